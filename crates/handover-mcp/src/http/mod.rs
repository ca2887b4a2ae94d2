//! The Streamable HTTP downstream (`handover mcp --listen ADDR`): one MCP
//! endpoint (`/mcp`) serving many clients, each identified by a
//! `[gateway.clients]` bearer token whose scope is the scope of every
//! operation it performs — the gateway's own token check, not a copy.
//!
//! * `POST` carries one JSON-RPC message. A request is answered on that
//!   POST, as an SSE stream (`text/event-stream`: the upstream's messages
//!   while it runs, then its answer) or, for a client that accepts only
//!   JSON, a single JSON body; a notification or a response is `202`.
//! * `initialize` opens a session (`Mcp-Session-Id`), with an upstream
//!   connection of its own (for a `command` server, its own child
//!   process), as a direct stdio connection would have. Requests without a
//!   session id (the 2026-07-28 protocol's `server/discover` and
//!   self-contained requests) share one upstream connection per client.
//! * `GET` with a session id opens the stream of the server's own messages
//!   (notifications, sampling requests); `DELETE` ends the session.
//! * A request with an `Origin` that is neither loopback nor listed in
//!   `[mcp] allowed_origins` is refused `403` (DNS rebinding).
//!
//! Connection limits and header/body/idle deadlines are the gateway's
//! (`[gateway]`, served by [`handover_gateway::serve_router`]).

mod ids;
mod opening;
mod sessions;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use handover_gateway::ClientTokens;
use rmcp::model::ErrorData;
use serde_json::value::RawValue;

use self::sessions::{Registry, SessionRef};
use crate::wire::{self, Incoming, Peek, error_line};

/// The session header (case-insensitive on the wire).
const SESSION_HEADER: &str = "mcp-session-id";

/// Everything a request handler needs. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Http {
    tokens: ClientTokens,
    /// The default server's sessions (`/mcp`).
    default: String,
    /// Every server's sessions (`/mcp/NAME`).
    registries: Arc<BTreeMap<String, Arc<Registry>>>,
    allowed_origins: Arc<[String]>,
    keepalive: std::time::Duration,
}

impl Http {
    pub(crate) fn new(
        proxy: crate::McpProxy,
        tokens: ClientTokens,
        keepalive: std::time::Duration,
    ) -> Self {
        let settings = proxy.settings().clone();
        Self {
            tokens,
            default: proxy.server().to_owned(),
            registries: Arc::new(
                settings
                    .servers
                    .keys()
                    .map(|name| {
                        (
                            name.clone(),
                            Arc::new(Registry::new(proxy.for_server(name))),
                        )
                    })
                    .collect(),
            ),
            allowed_origins: settings.allowed_origins.into(),
            keepalive,
        }
    }

    /// The routes; `max_body_bytes` bounds a POST body.
    pub(crate) fn app(&self, max_body_bytes: usize) -> axum::Router {
        axum::Router::new()
            .route("/mcp", axum::routing::post(post).get(get).delete(delete))
            .route(
                "/mcp/{server}",
                axum::routing::post(post).get(get).delete(delete),
            )
            .layer(axum::extract::DefaultBodyLimit::max(max_body_bytes))
            .with_state(self.clone())
    }

    /// Closes every session and waits for their guarded calls to be recorded.
    pub(crate) async fn close(&self) {
        for r in self.registries.values() {
            r.close_all().await;
        }
    }

    /// Starts the idle-session reapers; each stops when its registry is closed.
    pub(crate) fn reap_idle(&self) -> tokio::task::JoinHandle<()> {
        let registries = self.registries.clone();
        tokio::spawn(async move {
            futures::future::join_all(registries.values().map(|r| r.reap_idle())).await;
        })
    }

    /// Who calls, and the sessions of the server the path names.
    fn caller_at(
        &self,
        headers: &HeaderMap,
        server: Option<&String>,
    ) -> Result<(handover_gateway::AuthenticatedClient, &Arc<Registry>), Refusal> {
        let client = self.caller(headers)?;
        Ok((client, self.registry(server.map(String::as_str))?))
    }

    /// The sessions of the server a path names (`/mcp`: the default one).
    fn registry(&self, server: Option<&str>) -> Result<&Arc<Registry>, Refusal> {
        let name = server.unwrap_or(&self.default);
        self.registries.get(name).ok_or_else(|| Refusal {
            status: StatusCode::NOT_FOUND,
            message: format!("no MCP server {name:?} here (see [mcp.servers])"),
        })
    }

    /// The caller's client name and scope, after the Origin check.
    fn caller(
        &self,
        headers: &HeaderMap,
    ) -> Result<handover_gateway::AuthenticatedClient, Refusal> {
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !origin_allowed(origin, &self.allowed_origins) {
                return Err(Refusal {
                    status: StatusCode::FORBIDDEN,
                    message: format!(
                        "origin {origin:?} is not allowed (add it to [mcp] allowed_origins)"
                    ),
                });
            }
        }
        self.tokens.client(headers).map_err(|e| Refusal {
            status: e.status(),
            message: e.to_string(),
        })
    }
}

/// Loopback origins on any port, or one listed exactly.
fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    if allowed.iter().any(|a| a == origin) {
        return true;
    }
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let host = if rest.starts_with('[') {
        rest.split_inclusive(']').next().unwrap_or("")
    } else {
        rest.split(':').next().unwrap_or("")
    };
    matches!(host, "localhost" | "127.0.0.1" | "[::1]")
}

/// An HTTP refusal with a JSON-RPC error body (id null), which the MCP
/// SDKs surface as the error's message.
struct Refusal {
    status: StatusCode,
    message: String,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let body = error_line(None, &ErrorData::invalid_request(self.message, None));
        (self.status, json_body(body)).into_response()
    }
}

fn refusal(status: StatusCode, message: &str) -> Response {
    Refusal {
        status,
        message: message.to_owned(),
    }
    .into_response()
}

/// A body that could not be read, as a JSON-RPC refusal (axum's own
/// rejection is plain text, which an MCP client cannot show as an error).
fn unreadable(r: &BytesRejection) -> Response {
    let status = r.status();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        return refusal(
            status,
            "the body is larger than gateway.max_body_bytes (nothing was sent)",
        );
    }
    let message = format!(
        "could not read the request body: {} (nothing was sent)",
        r.body_text()
    );
    refusal(status, &message)
}

fn session_id(headers: &HeaderMap) -> Option<&str> {
    headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok())
}

fn wants_sse(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"))
}

async fn post(
    State(http): State<Http>,
    server: Option<Path<String>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (client, registry) = match http.caller_at(&headers, server.as_deref()) {
        Ok(c) => c,
        Err(r) => return r.into_response(),
    };
    let body = match body {
        Ok(b) => b,
        Err(r) => return unreadable(&r),
    };
    let Ok(text) = std::str::from_utf8(&body) else {
        return refusal(StatusCode::BAD_REQUEST, "the body is not UTF-8");
    };
    // The same intake as stdio: only one readable JSON-RPC object goes on.
    let text = wire::without_bom(text).trim();
    let peek = match wire::incoming(text) {
        Incoming::Message(peek) => peek,
        Incoming::Blank => {
            return refusal(
                StatusCode::BAD_REQUEST,
                "the body is not a JSON-RPC message (one JSON object)",
            );
        }
        Incoming::Batch(_) => {
            return refusal(
                StatusCode::BAD_REQUEST,
                "JSON-RPC batches are not supported: send one message per POST (nothing in this batch was sent)",
            );
        }
        Incoming::Refused { id, error } => {
            let body = error_line(id.as_deref(), &error);
            return (StatusCode::BAD_REQUEST, json_body(body)).into_response();
        }
    };
    let initialize = peek.method.as_deref() == Some("initialize");
    let opens = initialize && session_id(&headers).is_none();
    let session = match (session_id(&headers), initialize) {
        (Some(id), _) => registry.find(id, &client.name),
        (None, true) => registry.open(&client).await,
        (None, false) => registry.shared(&client).await,
    };
    let session = match session {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let (Some(id), Some(_)) = (peek.id, &peek.method) else {
        // A notification, or the client's answer to the server's request.
        return if session.send(text.to_owned()) {
            StatusCode::ACCEPTED.into_response()
        } else {
            sessions::Refused::Gone.into_response()
        };
    };
    let Some(answers) = session.request(text, id) else {
        return sessions::Refused::Gone.into_response();
    };
    // Dropped with the answer stream: when the client has it, or has gone.
    let mut opening = opens.then(|| opening::Opening::new(registry.clone(), session.clone()));
    let answers = answers.inspect(move |line| {
        if let Some(o) = &mut opening {
            o.sees(line);
        }
    });
    let mut response = if wants_sse(&headers) {
        sse(answers, http.keepalive)
    } else {
        json_answer(answers, id).await
    };
    if let SessionRef::Opened(sid) = session.reference()
        && let Ok(v) = HeaderValue::from_str(sid)
    {
        response.headers_mut().insert(SESSION_HEADER, v);
    }
    response
}

/// The answer as one JSON body: the server's messages before it are
/// dropped (a JSON-only client cannot receive them).
async fn json_answer(
    mut answers: impl futures::Stream<Item = String> + Unpin,
    id: &RawValue,
) -> Response {
    while let Some(line) = answers.next().await {
        let is_answer = Peek::of(&line).is_some_and(|p| p.method.is_none() && p.id.is_some());
        if is_answer {
            return json_body(line);
        }
    }
    let e = ErrorData::internal_error(
        "the upstream MCP server closed before answering".to_owned(),
        None,
    );
    json_body(error_line(Some(id), &e))
}

/// Messages as an SSE stream (`event: message`), with keep-alive comments.
fn sse(
    lines: impl futures::Stream<Item = String> + Send + 'static,
    keepalive: std::time::Duration,
) -> Response {
    let events = lines.map(|line| {
        Ok::<_, std::convert::Infallible>(Event::default().event("message").data(line))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(keepalive))
        .into_response()
}

/// One message as a JSON body.
fn json_body(line: String) -> Response {
    let json = HeaderValue::from_static("application/json");
    ([(header::CONTENT_TYPE, json)], line).into_response()
}

async fn get(
    State(http): State<Http>,
    server: Option<Path<String>>,
    headers: HeaderMap,
) -> Response {
    let (client, registry) = match http.caller_at(&headers, server.as_deref()) {
        Ok(c) => c,
        Err(r) => return r.into_response(),
    };
    let Some(id) = session_id(&headers) else {
        return refusal(
            StatusCode::METHOD_NOT_ALLOWED,
            "GET needs an Mcp-Session-Id (sessions begin with initialize)",
        );
    };
    let session = match registry.find(id, &client.name) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    sse(session.listen(), http.keepalive)
}

async fn delete(
    State(http): State<Http>,
    server: Option<Path<String>>,
    headers: HeaderMap,
) -> Response {
    let (client, registry) = match http.caller_at(&headers, server.as_deref()) {
        Ok(c) => c,
        Err(r) => return r.into_response(),
    };
    let Some(id) = session_id(&headers) else {
        return refusal(StatusCode::BAD_REQUEST, "DELETE needs an Mcp-Session-Id");
    };
    match registry.end(id, &client.name) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::origin_allowed;

    #[test]
    fn only_loopback_or_listed_origins_are_allowed() {
        let listed = vec!["https://agent.example".to_owned()];
        for ok in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "http://[::1]:8080",
            "https://agent.example",
        ] {
            assert!(origin_allowed(ok, &listed), "{ok}");
        }
        for bad in [
            "http://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example:80",
            "https://agent.example.evil",
            "null",
            "",
        ] {
            assert!(!origin_allowed(bad, &listed), "{bad}");
        }
    }
}
