//! A scriptable mock provider on a raw `TcpListener`, for what wiremock
//! cannot do: SSE streams written event by event that break, stall, or send
//! keep-alives while silent; answers delayed in *tokio* time. It runs on the
//! caller's tokio runtime, so `#[tokio::test(start_paused = true)]` tests
//! see its delays and silences in virtual time.

#![allow(clippy::disallowed_methods)] // a mock server: sleeping is its job

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::bodies::{self, Flavor};

/// What happens after a plan's body was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum After {
    /// Close the connection.
    Close,
    /// Keep the connection open and silent.
    Stall,
    /// Keep it open, sending `: keep-alive` comments at this interval.
    KeepAlive(Duration),
}

/// One connection's script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    status: u16,
    content_type: &'static str,
    headers: Vec<(String, String)>,
    delay: Duration,
    parts: Vec<String>,
    gap: Duration,
    after: After,
    drop: bool,
}

impl Plan {
    /// A JSON response (with Content-Length).
    pub fn json(status: u16, body: &Value) -> Self {
        Self {
            status,
            content_type: "application/json",
            headers: Vec::new(),
            delay: Duration::ZERO,
            parts: vec![body.to_string()],
            gap: Duration::ZERO,
            after: After::Close,
            drop: false,
        }
    }

    /// A text answer in `flavor`'s format.
    pub fn text(flavor: Flavor, text: &str) -> Self {
        Self::json(200, &bodies::answer(flavor, text))
    }

    /// An answer proposing one tool call, in `flavor`'s format.
    pub fn tool_call(flavor: Flavor, id: &str, name: &str, arguments: &Value) -> Self {
        Self::json(200, &bodies::tool_call(flavor, id, name, arguments))
    }

    /// An SSE stream of `events` (written one by one), then `after`.
    pub fn sse(events: Vec<String>, after: After) -> Self {
        Self {
            status: 200,
            content_type: "text/event-stream",
            headers: Vec::new(),
            delay: Duration::ZERO,
            parts: events,
            gap: Duration::ZERO,
            after,
            drop: false,
        }
    }

    /// Close the connection right after reading the request, without answering.
    pub fn drop_connection() -> Self {
        Self {
            drop: true,
            ..Self::json(500, &Value::Null)
        }
    }

    /// Waits `d` (tokio time) before answering.
    pub fn delayed(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }

    /// Waits `d` before each SSE event.
    pub fn gap(mut self, d: Duration) -> Self {
        self.gap = d;
        self
    }

    /// Adds a response header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

/// A raw mock provider at `base_url()` (`POST /v1/chat/completions`).
///
/// Each request is answered by the next scripted [`Plan`] (or the default
/// one), on a fresh connection. Delays and gaps are tokio sleeps on the
/// test's runtime, so paused-time tests cost no wall time:
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::time::Duration;
/// use handover_testkit::{After, Flavor, Plan, TcpProvider, bodies};
///
/// let p = TcpProvider::start(Flavor::OpenAi).await.unwrap();
/// p.script([
///     // Two text events, then silence with keep-alives every 100 ms: a
///     // stalled stream that only looks alive.
///     Plan::sse(
///         bodies::text_stream(Flavor::OpenAi, &["Your parcel", " is"], false, false),
///         After::KeepAlive(Duration::from_millis(100)),
///     ),
///     // An answer that arrives after 30 s (past a first-byte timeout).
///     Plan::text(Flavor::OpenAi, "late").delayed(Duration::from_secs(30)),
/// ]);
/// assert!(p.base_url().starts_with("http://127.0.0.1:"));
/// assert_eq!(p.requests(), 0);
/// # }
/// ```
#[derive(Debug)]
pub struct TcpProvider {
    base_url: String,
    requests: Arc<AtomicUsize>,
    plans: Arc<Mutex<VecDeque<Plan>>>,
    default: Arc<Mutex<Plan>>,
}

impl TcpProvider {
    /// Starts serving; unscripted requests get a text answer in `flavor`.
    pub async fn start(flavor: Flavor) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let base_url = format!("http://{}/v1", listener.local_addr()?);
        let requests = Arc::new(AtomicUsize::new(0));
        let plans = Arc::new(Mutex::new(VecDeque::<Plan>::new()));
        let default = Arc::new(Mutex::new(Plan::text(flavor, "Hello from the mock.")));
        let (counter, queue, fallback) = (requests.clone(), plans.clone(), default.clone());
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let (counter, queue, fallback) = (counter.clone(), queue.clone(), fallback.clone());
                tokio::spawn(async move {
                    while read_request(&mut sock).await {
                        counter.fetch_add(1, Ordering::SeqCst);
                        let plan = lock(&queue)
                            .pop_front()
                            .unwrap_or_else(|| lock(&fallback).clone());
                        if !play(&mut sock, plan).await {
                            return;
                        }
                    }
                });
            }
        });
        Ok(Self {
            base_url,
            requests,
            plans,
            default,
        })
    }

    /// The base URL to configure (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Queues plans for the next requests, in order.
    pub fn script(&self, plans: impl IntoIterator<Item = Plan>) {
        lock(&self.plans).extend(plans);
    }

    /// What unscripted requests get from now on.
    pub fn set_default(&self, plan: Plan) {
        *lock(&self.default) = plan;
    }

    /// Requests read so far (counted by the server).
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Plays one plan; true if the connection may serve another request (never,
/// today: see the comment on `connection: close`).
async fn play(sock: &mut TcpStream, plan: Plan) -> bool {
    if plan.drop {
        return false;
    }
    if !plan.delay.is_zero() {
        tokio::time::sleep(plan.delay).await;
    }
    let sse = plan.content_type == "text/event-stream";
    let mut head = format!(
        "HTTP/1.1 {} X\r\ncontent-type: {}\r\nx-request-id: req_testkit_tcp\r\n",
        plan.status, plan.content_type
    );
    for (k, v) in &plan.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    // Every response closes its connection: a fresh connection per request
    // keeps paused-time tests deterministic (a pooled connection's next
    // request can race tokio's auto-advance of the paused clock).
    if !sse {
        let len: usize = plan.parts.iter().map(String::len).sum();
        head.push_str(&format!("content-length: {len}\r\n"));
    }
    head.push_str("connection: close\r\n\r\n");
    if sock.write_all(head.as_bytes()).await.is_err() {
        return false;
    }
    for part in &plan.parts {
        if sse && !plan.gap.is_zero() {
            tokio::time::sleep(plan.gap).await;
        }
        if sock.write_all(part.as_bytes()).await.is_err() || sock.flush().await.is_err() {
            return false;
        }
    }
    if !sse {
        return false;
    }
    match plan.after {
        After::Close => {}
        After::Stall => std::future::pending::<()>().await,
        After::KeepAlive(every) => loop {
            tokio::time::sleep(every).await;
            if sock.write_all(b": keep-alive\n\n").await.is_err() {
                break;
            }
        },
    }
    false
}

/// Reads one request: the head, then a Content-Length or chunked body (the
/// body must be consumed, or a reused connection would read it as the next
/// request). False on EOF.
async fn read_request(sock: &mut TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let chunked = head
                .lines()
                .any(|l| l.starts_with("transfer-encoding:") && l.contains("chunked"));
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            let body_start = end + 4;
            // JSON never contains a raw CRLF, so the terminating zero-size
            // chunk can be found by its bytes.
            let complete = |buf: &[u8]| {
                if chunked {
                    let body = &buf[body_start..];
                    body.starts_with(b"0\r\n\r\n") || body.windows(7).any(|w| w == b"\r\n0\r\n\r\n")
                } else {
                    buf.len() >= body_start + len
                }
            };
            while !complete(&buf) {
                match sock.read(&mut tmp).await {
                    Ok(0) | Err(_) => return false,
                    Ok(n) => buf.extend_from_slice(&tmp[..n]),
                }
            }
            return true;
        }
        match sock.read(&mut tmp).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
}
