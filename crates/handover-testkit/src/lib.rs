//! Test doubles for Handover users: mock LLM providers and mock
//! destinations on real HTTP servers, so loss-of-confirmation scenarios can
//! be tested end to end against the real router and ledger.
//!
//! * [`MockProvider`] — an OpenAI- or DeepSeek-speaking provider on
//!   wiremock, scriptable per call ([`Reply`]): answers, tool calls, error
//!   statuses with real bodies, Retry-After, delays past a timeout, dropped
//!   connections, whole SSE bodies.
//! * [`TcpProvider`] — a raw TCP provider on the test's runtime (delays in tokio time), for streams that break or
//!   stall after N events, with or without keep-alives ([`Plan`]).
//! * [`MockDestination`] — a business system (scriptable per request: apply
//!   and confirm, apply and lose the response, reject, 5xx, idempotency keys
//!   with a retention window, a lookup with a visibility lag). It counts
//!   **effects** (records created) separately from requests.
//! * [`bodies`] — realistic provider wire bodies.

#![forbid(unsafe_code)]

pub mod bodies;
mod destination;
mod provider;
mod tcp_provider;

pub use bodies::Flavor;
pub use destination::{Behaviour, DestinationBuilder, MockDestination, Record};
pub use provider::{MockProvider, Reply};
pub use tcp_provider::{After, Plan, TcpProvider};
