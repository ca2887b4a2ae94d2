//! Helpers for the content-path tests: a request, provider error replies
//! for the raw mock, and a router built from TOML.

use handover_providers::{ChatRequest, Message};
use handover_router::config::Config;
use handover_router::route::Router;
use handover_testkit::{Plan, bodies};

/// A user's question.
pub fn hello() -> ChatRequest {
    ChatRequest::new(vec![Message::user("Where is my parcel?")])
}

/// An error reply with a provider-shaped body.
pub fn status(code: u16, message: &str, code_str: Option<&str>) -> Plan {
    Plan::json(code, &bodies::error(message, Some("error"), code_str))
}

/// A 503 "overloaded" reply.
pub fn overloaded() -> Plan {
    status(503, "The server is overloaded", None)
}

/// A router over a whole configuration file (no API keys).
pub fn router(toml: &str) -> Router {
    let config = Config::parse(toml, &|_| None).unwrap();
    Router::with_env(&config, &|_| None).unwrap()
}
