//! Streamed chat answers over SSE, following the policy's commit point.
//!
//! The router opens the stream and falls back invisibly until the commit
//! point. If that happens within one keep-alive interval, the response
//! starts with the usual headers (`x-handover-provider`,
//! `x-handover-attempts`), and a call that fails before committing gets a
//! plain JSON error status. If it takes longer, the gateway starts the SSE
//! response and sends keep-alive comments while it waits, so clients and
//! proxies do not time out; a failure then arrives as an OpenAI-style error
//! event. The first chunk names the answering provider and attempts either
//! way. After the commit, a broken stream ends with an error event and
//! **without** `[DONE]`: a client never takes a truncated answer for a
//! complete one. `[DONE]` is sent only when the provider's stream completed.

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use handover_providers::{ChatRequest, StreamEvent};
use handover_router::RouterError;
use handover_router::route::{Caller, Task};
use serde::Serialize;
use serde_json::Value;
use tracing::Span;

use super::chat::router_error;
use super::sse_body::SseBody;
use crate::api_error::ApiError;
use crate::state::GatewayState;

/// Turns the router's stream events into one API's SSE events (chat
/// completion chunks, Responses API events), written into `out`. The walk,
/// the commit point, keep-alives and reading the stream to its end after a
/// hang-up are the same for both.
pub(crate) trait Encoder: Send + 'static {
    /// Takes in an event that heads the answer (the provider's model, its
    /// top-level chunk fields); `false` if `ev` is not one.
    fn heading(&mut self, ev: &StreamEvent) -> bool;
    /// The events that open the answer; `handover` names the provider that
    /// answered and the attempts (`{"provider": …, "attempts": …}`).
    fn opening(&mut self, handover: &Value, out: &mut SseText);
    /// The events for one provider event.
    fn event(&mut self, ev: StreamEvent, out: &mut SseText);
    /// The events that close a complete answer.
    fn complete(&mut self, out: &mut SseText);
    /// The event for a failure (before or after the commit point): the
    /// error the plain path would answer, as an event.
    fn error(&mut self, err: &ApiError, out: &mut SseText);
    /// A failed call as this API's error ([`router_error`], with the
    /// names this API's client sent).
    fn failure(e: &RouterError) -> ApiError
    where
        Self: Sized,
    {
        router_error(e)
    }
}

/// Server-sent events as the bytes of the response body, written back to
/// back: no event is an object of its own, and a batch of them leaves as
/// one body frame. Every `data` written here is JSON (or `[DONE]`), which
/// never holds a line break, so each event is one `data:` line.
#[derive(Default)]
pub(crate) struct SseText {
    buf: Vec<u8>,
}

impl SseText {
    /// `data: <v as JSON>`.
    pub(crate) fn data(&mut self, v: &impl Serialize) {
        self.data_with(|buf| json(buf, v));
    }

    /// `event: <kind>` with `data: <v as JSON>` (Responses API events;
    /// `kind` is one of ours, never a line break).
    pub(crate) fn event(&mut self, kind: &str, v: &impl Serialize) {
        self.buf.extend_from_slice(b"event: ");
        self.buf.extend_from_slice(kind.as_bytes());
        self.buf.push(b'\n');
        self.data(v);
    }

    /// A `data:` line the caller writes as JSON.
    pub(crate) fn data_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        self.buf.extend_from_slice(b"data: ");
        write(&mut self.buf);
        self.buf.extend_from_slice(b"\n\n");
    }

    /// `data: [DONE]`, the end of a complete chat completion stream.
    pub(crate) fn done(&mut self) {
        self.buf.extend_from_slice(b"data: [DONE]\n\n");
    }

    /// The text written so far, taken out.
    pub(crate) fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

/// `v` as JSON into `buf`. Serializing into a `Vec` fails only for a map
/// with non-string keys, which no type written here has.
pub(crate) fn json(buf: &mut Vec<u8>, v: &(impl Serialize + ?Sized)) {
    let _ = serde_json::to_writer(buf, v);
}

pub(crate) async fn respond<E: Encoder + Unpin>(
    state: GatewayState,
    task: Task,
    request: ChatRequest,
    encoder: E,
) -> Response {
    let keepalive = state.settings().keepalive;
    let caller = Caller::new();
    let call_task = task.clone().with_caller(&caller);
    let opening = async move { state.router().chat_stream(&call_task, &request).await };
    let opening = Box::pin(opening);
    let mut body = SseBody::new(opening, caller, encoder, keepalive, Span::current());
    match tokio::time::timeout(keepalive, body.committed()).await {
        Ok(Ok(headers)) => {
            let mut resp = sse(body);
            let h = resp.headers_mut();
            h.extend(headers);
            if let Some(v) = crate::task::remaining(&task) {
                h.insert(crate::task::REMAINING_HEADER, v);
            }
            resp
        }
        Ok(Err(e)) => E::failure(&e).with_remaining(&task).into_response(),
        // Still waiting: start the response and let keep-alives flow.
        Err(_) => sse(body),
    }
}

/// The SSE response (the headers axum's `Sse` sets).
fn sse<E: Encoder + Unpin>(body: SseBody<E>) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::StreamExt;
    use tokio::sync::oneshot;

    use super::super::response::Chunker;
    use super::super::sse_body::Opening;
    use super::*;

    fn body(opening: Opening, caller: &Caller, keepalive: Duration) -> SseBody<Chunker> {
        let chunker = Chunker::new("chatcmpl-t".into(), 1, false);
        SseBody::new(opening, caller.clone(), chunker, keepalive, Span::none())
    }

    #[tokio::test(start_paused = true)]
    async fn keepalives_flow_while_the_router_waits_then_its_error_ends_the_body() {
        let interval = Duration::from_secs(10);
        let (fail, failed) = oneshot::channel::<()>();
        let opening: Opening = Box::pin(async move {
            let _ = failed.await;
            Err(RouterError::UnknownPolicy("p".into()))
        });
        let mut body = body(opening, &Caller::new(), interval);
        let start = tokio::time::Instant::now();
        for n in 1..=2 {
            let next = body.next().await.unwrap().unwrap();
            assert_eq!(&next[..], b": keep-alive\n\n");
            assert_eq!(start.elapsed(), n * interval);
        }
        fail.send(()).unwrap();
        let next = body.next().await.unwrap().unwrap();
        let text = std::str::from_utf8(&next).unwrap();
        assert!(text.starts_with("data: {\"error\":"), "{text}");
        assert!(body.next().await.is_none(), "the error ends the body");
    }

    #[tokio::test]
    async fn a_body_dropped_while_the_router_walks_lets_the_call_finish() {
        let (go, gone) = oneshot::channel::<()>();
        let (done, finished) = oneshot::channel::<&str>();
        let opening: Opening = Box::pin(async move {
            let _ = gone.await;
            let _ = done.send("finished");
            Err(RouterError::UnknownPolicy("p".into()))
        });
        let caller = Caller::new();
        let mut body = body(opening, &caller, Duration::from_secs(60));
        let waited = tokio::time::timeout(Duration::from_millis(1), body.committed()).await;
        assert!(
            waited.is_err(),
            "the router cannot commit before its signal"
        );
        assert!(!caller.has_left());
        drop(body);
        assert!(caller.has_left(), "the walk hears that its caller left");
        go.send(()).unwrap();
        let finished = tokio::time::timeout(Duration::from_secs(5), finished).await;
        assert_eq!(finished.unwrap().unwrap(), "finished");
    }
}
