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

use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderValue;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use handover_router::config::Config;
use handover_router::route::{RoutedStream, Task};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::chat::{now_secs, router_error};
use super::request::Parsed;
use super::response::{Chunker, attempts_header, header_value};
use crate::api_error::ApiError;
use crate::state::GatewayState;

/// How the opening went: the response headers (provider, attempts, and
/// what is left of a named task's budget), or the error.
type Opened = Result<(HeaderValue, HeaderValue, Option<HeaderValue>), ApiError>;

pub(crate) async fn respond(
    state: GatewayState,
    task: Task,
    parsed: Parsed,
    id: String,
) -> Response {
    let keepalive = state.settings().keepalive;
    let chunker = Chunker {
        id,
        created: now_secs(),
        model: String::new(),
        include_usage: parsed.include_usage,
    };
    let (opened_tx, opened_rx) = oneshot::channel::<Opened>();
    let (events_tx, events_rx) = mpsc::channel::<Event>(64);
    tokio::spawn(produce(
        state.clone(),
        task,
        parsed,
        chunker,
        opened_tx,
        events_tx,
    ));
    let events = futures::stream::unfold(events_rx, |mut rx| async move {
        rx.recv().await.map(|ev| (Ok::<_, Infallible>(ev), rx))
    });
    match tokio::time::timeout(keepalive, opened_rx).await {
        Ok(Ok(Ok((provider, attempts, remaining)))) => {
            let mut resp = sse(events, keepalive);
            let h = resp.headers_mut();
            h.insert("x-handover-provider", provider);
            h.insert("x-handover-attempts", attempts);
            if let Some(v) = remaining {
                h.insert(crate::task::REMAINING_HEADER, v);
            }
            resp
        }
        Ok(Ok(Err(e))) => e.into_response(),
        Ok(Err(_)) => {
            ApiError::internal("the stream producer ended without an answer").into_response()
        }
        // Still waiting: start the response and let keep-alives flow.
        Err(_) => sse(events, keepalive),
    }
}

/// Runs the router call to its end, sending SSE events while anyone listens.
async fn produce(
    state: GatewayState,
    task: Task,
    parsed: Parsed,
    chunker: Chunker,
    opened: oneshot::Sender<Opened>,
    events: mpsc::Sender<Event>,
) {
    let mut out = Out(Some(events));
    let stream = match state.router().chat_stream(&task, &parsed.request).await {
        Ok(s) => s,
        Err(e) => {
            let err = router_error(&e).with_remaining(&task);
            let code = err.code;
            let _ = opened.send(Err(err));
            out.send(error_event(e.to_string(), code)).await;
            return;
        }
    };
    let _ = opened.send(Ok((
        header_value(stream.provider()),
        attempts_header(stream.attempts(), stream.skipped()),
        crate::task::remaining(&task),
    )));
    let chunker = with_model(state.config(), &stream, chunker);
    forward(stream, chunker, &mut out).await;
}

/// The event sink; once the client is gone, events are dropped.
struct Out(Option<mpsc::Sender<Event>>);

impl Out {
    async fn send(&mut self, ev: Event) {
        if let Some(tx) = &self.0
            && tx.send(ev).await.is_err()
        {
            self.0 = None;
        }
    }
}

/// The role chunk, one chunk per provider event, then `[DONE]` or an error event.
async fn forward(mut stream: RoutedStream, mut chunker: Chunker, out: &mut Out) {
    out.send(data(&chunker.opening(
        stream.provider(),
        stream.attempts(),
        stream.skipped(),
    )))
    .await;
    while let Some(item) = stream.next().await {
        match item {
            Ok(ev) => {
                if let Some(v) = chunker.event(ev) {
                    out.send(data(&v)).await;
                }
            }
            Err(broken) => {
                out.send(error_event(broken.to_string(), "stream_broken"))
                    .await;
                return;
            }
        }
    }
    if stream.is_complete() {
        out.send(Event::default().data("[DONE]")).await;
    }
}

fn with_model(config: &Config, stream: &RoutedStream, mut chunker: Chunker) -> Chunker {
    chunker.model = config
        .provider(stream.provider())
        .map(|p| p.model.clone())
        .unwrap_or_default();
    chunker
}

fn sse(
    events: impl Stream<Item = Result<Event, Infallible>> + Send + 'static,
    keepalive: Duration,
) -> Response {
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(keepalive).text("keep-alive"))
        .into_response()
}

fn data(v: &Value) -> Event {
    Event::default().data(v.to_string())
}

fn error_event(message: String, code: &str) -> Event {
    data(
        &json!({"error": {"message": message, "type": "server_error", "param": null, "code": code}}),
    )
}
