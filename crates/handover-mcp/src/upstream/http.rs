//! A Streamable HTTP upstream (`[mcp.servers.NAME] url = "http://..."`):
//! each line for the server is one POST; what comes back (one JSON body, or
//! an SSE stream of messages ending with the answer) is routed exactly as a
//! child's stdout lines are. The session id the server assigns on
//! `initialize` is sent on every later request, and `DELETE`d when the
//! session ends.
//!
//! Headers the protocol asks for are derived from the message itself:
//! `MCP-Protocol-Version` from a 2026-07-28 request's `_meta` (with
//! `Mcp-Method` and `Mcp-Name`), or else the version `initialize`
//! negotiated.
//!
//! Failures: a request that could not be delivered because the connection
//! was refused was provably not sent (`Lost::NotSent`); a `404` to the
//! session id with an empty body or a JSON-RPC error is the server saying
//! it does not know the session and processed nothing
//! (`Lost::SessionEnded`: not sent, and the session is over, as when a
//! child server exits — once the POSTs already in flight have their
//! answers, which are routed as usual; a message after it is not sent); a
//! `404` with any other body (the call's own result, a web page) may
//! follow an effect, and is lost after sending; any other failure
//! after the POST began (a reset, a timeout, a 5xx, a stream that ends
//! without the answer) may have reached the server: the proxy's own
//! requests are lost after sending (unknown), the client's get a JSON-RPC
//! error.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use handover_providers::capped::Capped;
use handover_providers::sse::SseStream;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{Inbox, Lost, Upstream, lock, route};
use crate::error::McpError;
use crate::lines::MAX_LINE_BYTES;
use crate::result::PROTOCOL_VERSION_META;
use crate::wire::{Peek, error_line};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What every POST of one connection shares.
#[derive(Clone)]
struct Conn {
    http: reqwest::Client,
    url: String,
    session: Arc<Mutex<Option<String>>>,
    version: Arc<Mutex<Option<String>>>,
    inbox: Inbox,
    to_client: mpsc::UnboundedSender<String>,
    /// Set once the connection can answer nothing more.
    gone: Arc<tokio::sync::watch::Sender<bool>>,
    flight: Arc<Mutex<Flight>>,
}

/// The POSTs in flight, and whether the server ended the session (a 404
/// to its id). The connection is over when both are true and the last
/// POST is done: a call the server was already working on is answered by
/// what it gets, not abandoned.
#[derive(Default)]
struct Flight {
    posts: usize,
    ending: bool,
}

/// One POST in flight; the last one's end, once the session ended, ends
/// the connection.
struct InFlight(Conn);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut flight = lock(&self.0.flight);
        flight.posts -= 1;
        if flight.ending && flight.posts == 0 {
            self.0.gone.send_replace(true);
        }
    }
}

impl Upstream {
    /// A connection to the Streamable HTTP server at `url`. Nothing is sent
    /// until the first line.
    pub(crate) fn connect(
        name: &str,
        url: &str,
        to_client: mpsc::UnboundedSender<String>,
    ) -> Result<Self, McpError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            // A tool call is a write: a redirect is not followed (see the
            // write gate's HTTP executor), it is the server's answer.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| McpError::Spawn {
                server: name.to_owned(),
                source: std::io::Error::other(e),
            })?;
        let inbox = Inbox::default();
        let (gone_tx, gone) = tokio::sync::watch::channel(false);
        let conn = Conn {
            http,
            url: url.to_owned(),
            session: Arc::default(),
            version: Arc::default(),
            inbox: inbox.clone(),
            to_client,
            gone: Arc::new(gone_tx),
            flight: Arc::default(),
        };
        let (to_server, mut outgoing) = mpsc::unbounded_channel::<String>();
        tokio::spawn(async move {
            // Each message is its own POST, concurrently, as the transport allows.
            while let Some(line) = outgoing.recv().await {
                tokio::spawn(conn.clone().post(line));
            }
            conn.end().await;
            conn.gone.send_replace(true);
        });
        Ok(Self::over(to_server, inbox, gone))
    }
}

impl Conn {
    async fn post(self, line: String) {
        let peek = Peek::of(&line);
        let request_id = peek
            .as_ref()
            .filter(|p| p.method.is_some())
            .and_then(|p| p.id)
            .map(|id| id.to_owned());
        let initialize = peek.as_ref().and_then(|p| p.method.as_deref()) == Some("initialize");
        let headers = self.headers(&line);
        let in_session = headers.iter().any(|(k, _)| *k == "mcp-session-id");
        drop(peek);
        let Some(_in_flight) = self.take_off() else {
            if let Some(id) = &request_id {
                self.fail(id, Lost::SessionEnded);
            }
            return;
        };
        let mut req = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(line);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let answered = match req.send().await {
            Ok(resp) => self.read(resp, initialize, in_session).await,
            Err(e) if e.is_connect() => Err(Lost::NotSent),
            Err(e) => {
                // Without the URL: its query may carry a token.
                tracing::warn!(error = %e.without_url(), "upstream MCP POST failed");
                Err(Lost::AfterSend)
            }
        };
        if let (Err(lost), Some(id)) = (answered, &request_id) {
            self.fail(id, lost);
        }
        if answered == Err(Lost::SessionEnded) {
            // As when a child server exits: the session ends with it, and
            // the client starts a new one (the transport asks a client to
            // initialize again; the proxy's client does that, not the proxy).
            tracing::warn!(
                "the upstream MCP server does not know its session any more (404): ending the session"
            );
            lock(&self.session).take();
            lock(&self.flight).ending = true;
        }
    }

    /// Counts a POST in flight; `None` once the session ended (nothing is
    /// sent: the server would not know the session).
    fn take_off(&self) -> Option<InFlight> {
        let mut flight = lock(&self.flight);
        if flight.ending {
            return None;
        }
        flight.posts += 1;
        Some(InFlight(self.clone()))
    }

    /// The protocol's headers for `line`.
    fn headers(&self, line: &str) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(s) = lock(&self.session).clone() {
            out.push(("mcp-session-id", s));
        }
        let msg: Value = serde_json::from_str(line).unwrap_or(Value::Null);
        let modern = msg["params"]["_meta"][PROTOCOL_VERSION_META].as_str();
        match modern {
            Some(v) => {
                out.push(("mcp-protocol-version", v.to_owned()));
                if let Some(m) = msg["method"].as_str() {
                    out.push(("mcp-method", m.to_owned()));
                    let key = match m {
                        "tools/call" | "prompts/get" => Some("name"),
                        "resources/read" => Some("uri"),
                        _ => None,
                    };
                    if let Some(name) = key.and_then(|k| msg["params"][k].as_str())
                        && header_safe(name)
                    {
                        out.push(("mcp-name", name.to_owned()));
                    }
                }
            }
            None => {
                if let Some(v) = lock(&self.version).clone() {
                    out.push(("mcp-protocol-version", v));
                }
            }
        }
        out
    }

    /// Routes what the server answered; `Err` if the answer to a request
    /// did not come (the caller says so to whoever waits).
    async fn read(
        &self,
        mut resp: reqwest::Response,
        initialize: bool,
        in_session: bool,
    ) -> Result<(), Lost> {
        if initialize
            && let Some(s) = resp
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
        {
            *lock(&self.session) = Some(s.to_owned());
        }
        let status = resp.status();
        if status == reqwest::StatusCode::ACCEPTED {
            return Ok(());
        }
        // A server answers 404 to a session id it does not know (it
        // restarted, or ended the session) instead of processing the
        // message: Streamable HTTP, "Session Management".
        if status == reqwest::StatusCode::NOT_FOUND && in_session && !initialize {
            return Err(not_found(resp).await);
        }
        let sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !sse {
            // Read to the stdio side's own line limit: a longer message
            // could not be forwarded anyway, and is not held whole.
            let body = match handover_providers::capped::read(&mut resp, MAX_LINE_BYTES).await {
                Ok(Capped::Whole(body)) => String::from_utf8_lossy(&body).into_owned(),
                Ok(Capped::Cut(_)) => {
                    tracing::warn!(%status, limit = MAX_LINE_BYTES, "upstream MCP answer is too large");
                    return Err(Lost::AfterSend);
                }
                Err(_) => return Err(Lost::AfterSend),
            };
            // A JSON-RPC answer (an error one too, at a 4xx) is an answer.
            let is_message = Peek::of(&body).is_some_and(|p| p.id.is_some() || p.method.is_some());
            if !is_message {
                tracing::warn!(%status, "upstream MCP answer is not a JSON-RPC message");
                return Err(Lost::AfterSend);
            }
            self.deliver(body, initialize);
            return Ok(());
        }
        // One event is one message: bounded as a child's line is (the
        // parser refuses an event past its own cap, the same 16 MiB).
        let mut events = SseStream::new(resp.bytes_stream());
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(e) => {
                    tracing::warn!(error = %e, "upstream MCP event stream failed");
                    return Err(Lost::AfterSend);
                }
            };
            if event.data.is_empty() {
                continue; // priming events
            }
            let is_answer = Peek::of(&event.data).is_some_and(|p| p.method.is_none());
            self.deliver(event.data, initialize);
            if is_answer {
                return Ok(());
            }
        }
        Err(Lost::AfterSend)
    }

    fn deliver(&self, line: String, initialize: bool) {
        if initialize {
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if let Some(version) = v["result"]["protocolVersion"].as_str() {
                *lock(&self.version) = Some(version.to_owned());
            }
        }
        route(&self.inbox, &self.to_client, line);
    }

    /// The request `id` will get no answer: the proxy's own waiter learns
    /// how it was lost; a client gets a JSON-RPC error.
    fn fail(&self, id: &serde_json::value::RawValue, lost: Lost) {
        let own = serde_json::from_str::<String>(id.get())
            .ok()
            .and_then(|k| lock(&self.inbox.pending).remove(&k));
        if let Some(tx) = own {
            let _ = tx.send(Err(lost));
            return;
        }
        let message = match lost {
            Lost::NotSent => "the upstream MCP server is unreachable (not sent)",
            Lost::SessionEnded => {
                "the upstream MCP server ended its session (not sent); start a new session"
            }
            Lost::AfterSend => "the upstream MCP server did not answer (it may have acted)",
        };
        let e = rmcp::model::ErrorData::internal_error(message.to_owned(), None);
        let _ = self.to_client.send(error_line(Some(id), &e));
    }

    /// The session is over: tell the server (best effort, bounded).
    async fn end(&self) {
        let Some(session) = lock(&self.session).take() else {
            return;
        };
        let req = self
            .http
            .delete(&self.url)
            .header("mcp-session-id", session)
            .timeout(CONNECT_TIMEOUT);
        let _ = req.send().await;
    }
}

/// What a 404 to the session id proves. An empty body or a JSON-RPC
/// error (what the SDKs send for a session they do not know) is the
/// transport's "this session is unknown, nothing was processed"; a body
/// with a result — the call's own answer — or anything else contradicts
/// that, and the call may have been applied.
async fn not_found(mut resp: reqwest::Response) -> Lost {
    #[derive(serde::Deserialize)]
    struct Message<'a> {
        #[serde(borrow)]
        error: Option<&'a serde_json::value::RawValue>,
        #[serde(borrow)]
        result: Option<&'a serde_json::value::RawValue>,
    }
    let body = match handover_providers::capped::read(&mut resp, MAX_LINE_BYTES).await {
        Ok(Capped::Whole(body)) => body,
        _ => return Lost::AfterSend,
    };
    let text = String::from_utf8_lossy(&body);
    let text = text.trim();
    let error_only = text.starts_with('{')
        && serde_json::from_str::<Message<'_>>(text)
            .is_ok_and(|m| m.error.is_some() && m.result.is_none());
    if text.is_empty() || error_only {
        return Lost::SessionEnded;
    }
    tracing::warn!(
        "the upstream MCP server answered 404 to its session id with a body that is not a JSON-RPC error: it may have acted"
    );
    Lost::AfterSend
}

/// Plain printable ASCII with no edge whitespace travels as is.
fn header_safe(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| (0x20..0x7f).contains(&b)) && s.trim() == s
}
