//! A mock LLM provider on wiremock, speaking OpenAI's or DeepSeek's wire
//! format at `POST /v1/chat/completions`, scriptable per call.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use wiremock::matchers::{method, path};
use wiremock::{Match, Mock, MockServer, Request, ResponseTemplate};

use crate::bodies::{self, Flavor};

/// What the mock does with one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A text answer.
    Text(String),
    /// An answer proposing one tool call.
    ToolCall {
        /// Provider tool-call id.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments.
        arguments: Value,
    },
    /// An error status with a JSON body and an optional `Retry-After` (seconds).
    Status {
        /// HTTP status.
        status: u16,
        /// JSON body.
        body: Value,
        /// `Retry-After` header value in seconds.
        retry_after: Option<u64>,
    },
    /// A complete SSE body (wiremock sends it at once; for streams that
    /// break or stall after N events use [`crate::TcpProvider`]).
    Sse(Vec<String>),
    /// The inner reply, sent after a delay (past a timeout, it is lost).
    Delayed(Duration, Box<Reply>),
    /// Drop the connection after reading the request.
    Drop,
}

impl Reply {
    /// A text answer.
    pub fn text(t: &str) -> Self {
        Reply::Text(t.to_owned())
    }

    /// An answer proposing one tool call (`arguments` is the JSON object the
    /// model passes; it is sent as a string, as providers do).
    pub fn tool_call(id: &str, name: &str, arguments: Value) -> Self {
        Reply::ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments,
        }
    }

    /// This reply, sent only after `delay` (past the client's timeout the
    /// answer is lost; within it, it arrives late).
    pub fn after(self, delay: Duration) -> Self {
        Reply::Delayed(delay, Box::new(self))
    }

    /// A complete SSE body of a text answer split into `parts`, with
    /// `: keep-alive` comments between the events (wiremock sends the body at
    /// once, so this shows keep-alives are skipped, not that they time out).
    pub fn sse_text_with_keepalives(flavor: Flavor, parts: &[&str]) -> Self {
        let events = bodies::text_stream(flavor, parts, true, true)
            .into_iter()
            .flat_map(|e| [": keep-alive\n\n".to_owned(), e])
            .collect();
        Reply::Sse(events)
    }

    /// 429 with an optional Retry-After.
    pub fn rate_limited(retry_after: Option<u64>) -> Self {
        Reply::Status {
            status: 429,
            body: bodies::error(
                "Rate limit reached for requests",
                Some("requests"),
                Some("rate_limit_exceeded"),
            ),
            retry_after,
        }
    }

    /// 503 overloaded.
    pub fn overloaded() -> Self {
        Reply::status(
            503,
            bodies::error(
                "The server is overloaded, please try again later.",
                Some("server_error"),
                None,
            ),
        )
    }

    /// 500 server error.
    pub fn server_error() -> Self {
        Reply::status(
            500,
            bodies::error(
                "The server had an error while processing your request.",
                Some("server_error"),
                None,
            ),
        )
    }

    /// 400 context length exceeded.
    pub fn context_length() -> Self {
        Reply::status(
            400,
            bodies::error(
                "This model's maximum context length is 8192 tokens.",
                Some("invalid_request_error"),
                Some("context_length_exceeded"),
            ),
        )
    }

    /// 400 content filtered.
    pub fn content_filter() -> Self {
        Reply::status(
            400,
            bodies::error(
                "The response was filtered due to the prompt triggering content management policy.",
                Some("invalid_request_error"),
                Some("content_filter"),
            ),
        )
    }

    /// Any status with a JSON body.
    pub fn status(status: u16, body: Value) -> Self {
        Reply::Status {
            status,
            body,
            retry_after: None,
        }
    }
}

#[derive(Debug)]
struct State {
    flavor: Flavor,
    script: VecDeque<Reply>,
    default: Reply,
}

impl State {
    fn peek(&self) -> &Reply {
        self.script.front().unwrap_or(&self.default)
    }

    fn next(&mut self) -> Reply {
        self.script
            .pop_front()
            .unwrap_or_else(|| self.default.clone())
    }
}

fn lock(s: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

struct NextIsDrop(Arc<Mutex<State>>, bool);

impl Match for NextIsDrop {
    fn matches(&self, _request: &Request) -> bool {
        (*lock(&self.0).peek() == Reply::Drop) == self.1
    }
}

fn render(flavor: Flavor, reply: Reply) -> ResponseTemplate {
    match reply {
        Reply::Text(t) => ResponseTemplate::new(200)
            .insert_header("x-request-id", "req_testkit")
            .set_body_json(bodies::answer(flavor, &t)),
        Reply::ToolCall {
            id,
            name,
            arguments,
        } => ResponseTemplate::new(200)
            .insert_header("x-request-id", "req_testkit")
            .set_body_json(bodies::tool_call(flavor, &id, &name, &arguments)),
        Reply::Status {
            status,
            body,
            retry_after,
        } => {
            let mut t = ResponseTemplate::new(status).set_body_json(body);
            if let Some(s) = retry_after {
                t = t.insert_header("retry-after", s.to_string().as_str());
            }
            t
        }
        Reply::Sse(events) => ResponseTemplate::new(200)
            .insert_header("content-type", "text/event-stream")
            .insert_header("x-request-id", "req_testkit_stream")
            .set_body_raw(events.concat(), "text/event-stream"),
        Reply::Delayed(d, inner) => render(flavor, *inner).set_delay(d),
        Reply::Drop => ResponseTemplate::new(500),
    }
}

/// A scriptable mock provider.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use handover_testkit::{Flavor, MockProvider, Reply};
///
/// let p = MockProvider::start(Flavor::OpenAi).await;
/// p.script([Reply::rate_limited(Some(2)), Reply::text("hello")]);
/// assert!(p.base_url().ends_with("/v1"));
/// assert_eq!(p.requests().await, 0);
/// # }
/// ```
#[derive(Debug)]
pub struct MockProvider {
    server: MockServer,
    state: Arc<Mutex<State>>,
}

impl MockProvider {
    /// Starts a provider answering "Hello from the mock." to unscripted calls.
    pub async fn start(flavor: Flavor) -> Self {
        let server = MockServer::start().await;
        let state = Arc::new(Mutex::new(State {
            flavor,
            script: VecDeque::new(),
            default: Reply::text("Hello from the mock."),
        }));
        let s = state.clone();
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .and(NextIsDrop(state.clone(), true))
            .respond_with_err(move |_req: &Request| {
                lock(&s).next();
                std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "mock provider dropped the connection",
                )
            })
            .mount(&server)
            .await;
        let s = state.clone();
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .and(NextIsDrop(state.clone(), false))
            .respond_with(move |_req: &Request| {
                let mut st = lock(&s);
                let flavor = st.flavor;
                render(flavor, st.next())
            })
            .mount(&server)
            .await;
        Self { server, state }
    }

    /// The base URL to configure (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.uri())
    }

    /// Queues replies for the next calls, in order.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        lock(&self.state).script.extend(replies);
    }

    /// What unscripted calls get from now on.
    pub fn set_default(&self, reply: Reply) {
        lock(&self.state).default = reply;
    }

    /// Chat requests received, counted by the server.
    pub async fn requests(&self) -> usize {
        self.received().await.len()
    }

    /// Every chat request received, in order.
    pub async fn received(&self) -> Vec<Request> {
        self.server
            .received_requests()
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r.url.path() == "/v1/chat/completions")
            .collect()
    }
}
