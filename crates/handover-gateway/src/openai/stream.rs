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
use handover_providers::{ChatRequest, StreamEvent};
use handover_router::route::{Attempt, RoutedStream, Skip, Task};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tracing::{Instrument, Span};

use super::chat::router_error;
use super::response::{attempts_header, header_value};
use crate::api_error::ApiError;
use crate::state::GatewayState;

/// How the opening went: the response headers (provider, attempts, and
/// what is left of a named task's budget), or the error.
type Opened = Result<(HeaderValue, HeaderValue, Option<HeaderValue>), ApiError>;

/// Turns the router's stream events into one API's SSE events (chat
/// completion chunks, Responses API events). The walk, the commit point,
/// keep-alives and the detached producer are the same for both.
pub(crate) trait Encoder: Send + 'static {
    /// Takes in an event that heads the answer (the provider's model, its
    /// top-level chunk fields); `false` if `ev` is not one.
    fn heading(&mut self, ev: &StreamEvent) -> bool;
    /// The events that open the answer, naming the provider and attempts.
    fn opening(&mut self, provider: &str, attempts: &[Attempt], skipped: &[Skip]) -> Vec<Event>;
    /// The events for one provider event.
    fn event(&mut self, ev: StreamEvent) -> Vec<Event>;
    /// The events that close a complete answer.
    fn complete(&mut self) -> Vec<Event>;
    /// The event for a failure (before or after the commit point).
    fn error(&mut self, message: String, code: &str) -> Event;
}

pub(crate) async fn respond<E: Encoder>(
    state: GatewayState,
    task: Task,
    request: ChatRequest,
    encoder: E,
) -> Response {
    let keepalive = state.settings().keepalive;
    let (opened_tx, opened_rx) = oneshot::channel::<Opened>();
    let (events_tx, events_rx) = mpsc::channel::<Event>(64);
    // In the request's span, so an exported trace keeps request → task → attempts.
    tokio::spawn(
        produce(state.clone(), task, request, encoder, opened_tx, events_tx)
            .instrument(Span::current()),
    );
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
async fn produce<E: Encoder>(
    state: GatewayState,
    task: Task,
    request: ChatRequest,
    mut encoder: E,
    opened: oneshot::Sender<Opened>,
    events: mpsc::Sender<Event>,
) {
    let mut out = Out(Some(events));
    let stream = match state.router().chat_stream(&task, &request).await {
        Ok(s) => s,
        Err(e) => {
            let err = router_error(&e).with_remaining(&task);
            let code = err.code;
            let _ = opened.send(Err(err));
            out.send(encoder.error(e.to_string(), code)).await;
            return;
        }
    };
    let _ = opened.send(Ok((
        header_value(stream.provider()),
        attempts_header(stream.attempts(), stream.skipped()),
        crate::task::remaining(&task),
    )));
    // The model the route asked for until the provider names its own.
    encoder.heading(&StreamEvent::Model(stream.model().to_owned()));
    forward(stream, encoder, &mut out).await;
}

/// The event sink; once the client is gone, events are dropped.
struct Out(Option<mpsc::Sender<Event>>);

impl Out {
    async fn send_all(&mut self, evs: Vec<Event>) {
        for ev in evs {
            self.send(ev).await;
        }
    }

    async fn send(&mut self, ev: Event) {
        if let Some(tx) = &self.0
            && tx.send(ev).await.is_err()
        {
            self.0 = None;
        }
    }
}

/// The opening events, one batch per provider event, then the closing
/// events or an error event. The opening waits for the events that head
/// the answer (the provider's model and chunk fields), so every event names
/// the same model and id. After the commit point a broken stream ends with
/// the error event only: never presented as complete.
async fn forward<E: Encoder>(mut stream: RoutedStream, mut encoder: E, out: &mut Out) {
    let mut next = stream.next().await;
    while let Some(Ok(ev)) = &next {
        if !encoder.heading(ev) {
            break;
        }
        next = stream.next().await;
    }
    let opening = encoder.opening(stream.provider(), stream.attempts(), stream.skipped());
    out.send_all(opening).await;
    while let Some(item) = next {
        match item {
            Ok(ev) => out.send_all(encoder.event(ev)).await,
            Err(broken) => {
                out.send(encoder.error(broken.to_string(), "stream_broken"))
                    .await;
                return;
            }
        }
        next = stream.next().await;
    }
    if stream.is_complete() {
        out.send_all(encoder.complete()).await;
    }
}

fn sse(
    events: impl Stream<Item = Result<Event, Infallible>> + Send + 'static,
    keepalive: Duration,
) -> Response {
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(keepalive).text("keep-alive"))
        .into_response()
}

pub(crate) fn data(v: &Value) -> Event {
    Event::default().data(v.to_string())
}
