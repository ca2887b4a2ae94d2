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
    // Batches, not single events: what the provider sent in one read goes
    // out in one write (see [`Out`]).
    let (events_tx, events_rx) = mpsc::channel::<Vec<Event>>(16);
    // In the request's span, so an exported trace keeps request → task → attempts.
    tokio::spawn(
        produce(state.clone(), task, request, encoder, opened_tx, events_tx)
            .instrument(Span::current()),
    );
    let events = futures::stream::unfold(events_rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|batch| (futures::stream::iter(batch), rx))
    })
    .flatten()
    .map(Ok::<_, Infallible>);
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
    events: mpsc::Sender<Vec<Event>>,
) {
    let mut out = Out::new(events);
    let stream = match state.router().chat_stream(&task, &request).await {
        Ok(s) => s,
        Err(e) => {
            let err = router_error(&e).with_remaining(&task);
            let code = err.code;
            let _ = opened.send(Err(err));
            out.push(encoder.error(e.to_string(), code));
            out.flush().await;
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
///
/// Events are held until the provider's stream has nothing more ready
/// ([`forward`] flushes before it waits): the events one upstream read
/// carried reach the response body together, so hyper writes them in one
/// `write` instead of one per event, and the connection's task is woken
/// once per batch rather than once per event. Nothing waits to fill a
/// batch: a flush happens whenever the next event is not already here.
struct Out {
    tx: Option<mpsc::Sender<Vec<Event>>>,
    batch: Vec<Event>,
}

impl Out {
    fn new(tx: mpsc::Sender<Vec<Event>>) -> Self {
        Self {
            tx: Some(tx),
            batch: Vec::new(),
        }
    }

    fn push(&mut self, ev: Event) {
        if self.tx.is_some() {
            self.batch.push(ev);
        }
    }

    fn push_all(&mut self, evs: Vec<Event>) {
        if self.tx.is_some() {
            self.batch.extend(evs);
        }
    }

    async fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        if let Some(tx) = &self.tx
            && tx.send(batch).await.is_err()
        {
            self.tx = None;
        }
    }
}

/// At most this many events are held before they are sent on, however
/// fast the provider's stream keeps coming.
const MAX_BATCH: usize = 64;

/// The provider stream's next item; what was held is flushed first unless
/// the item is already here.
async fn next_item<S: Stream + Unpin>(stream: &mut S, out: &mut Out) -> Option<S::Item> {
    if out.batch.len() < MAX_BATCH
        && let Some(item) = futures::FutureExt::now_or_never(stream.next())
    {
        return item;
    }
    out.flush().await;
    stream.next().await
}

/// The opening events, one batch per provider event, then the closing
/// events or an error event. The opening waits for the events that head
/// the answer (the provider's model and chunk fields), so every event names
/// the same model and id. After the commit point a broken stream ends with
/// the error event only: never presented as complete.
async fn forward<E: Encoder>(mut stream: RoutedStream, mut encoder: E, out: &mut Out) {
    let mut next = next_item(&mut stream, out).await;
    while let Some(Ok(ev)) = &next {
        if !encoder.heading(ev) {
            break;
        }
        next = next_item(&mut stream, out).await;
    }
    out.push_all(encoder.opening(stream.provider(), stream.attempts(), stream.skipped()));
    while let Some(item) = next {
        match item {
            Ok(ev) => out.push_all(encoder.event(ev)),
            Err(broken) => {
                out.push(encoder.error(broken.to_string(), "stream_broken"));
                out.flush().await;
                return;
            }
        }
        next = next_item(&mut stream, out).await;
    }
    if stream.is_complete() {
        out.push_all(encoder.complete());
    }
    out.flush().await;
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
    Event::default().data(json_text(v))
}

/// `v` as JSON text, written straight into a buffer: `Value::to_string`
/// goes through `fmt::Display`, one `write_str` call per token, which
/// cost a streamed answer more than everything else it does with a chunk.
pub(crate) fn json_text(v: &Value) -> String {
    // A `Value` always serializes (its keys are strings); empty is unreachable.
    serde_json::to_string(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream() -> (
        mpsc::UnboundedSender<u32>,
        futures::stream::BoxStream<'static, u32>,
    ) {
        let (tx, rx) = mpsc::unbounded_channel::<u32>();
        let s = futures::stream::unfold(rx, |mut r| async move { r.recv().await.map(|v| (v, r)) });
        (tx, s.boxed())
    }

    #[tokio::test]
    async fn events_already_here_leave_in_one_batch_and_none_waits_for_more() {
        let (batches_tx, mut batches) = mpsc::channel(16);
        let mut out = Out::new(batches_tx);
        let (up, mut stream) = upstream();
        for v in 0..3 {
            up.send(v).unwrap();
        }
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(next_item(&mut stream, &mut out).await.unwrap());
            out.push(Event::default().data("x"));
        }
        assert_eq!(seen, [0, 1, 2]);
        assert!(
            batches.try_recv().is_err(),
            "nothing sent while more was ready"
        );
        // The upstream has nothing ready: what is held goes out before the
        // wait, so the client never waits for a batch to fill.
        let (next, batch) = tokio::join!(next_item(&mut stream, &mut out), async {
            let batch = batches.recv().await.unwrap();
            up.send(3).unwrap();
            batch
        });
        assert_eq!(batch.len(), 3);
        assert_eq!(next, Some(3));
    }

    #[tokio::test]
    async fn a_stream_that_keeps_coming_is_sent_on_every_max_batch_events() {
        let (batches_tx, mut batches) = mpsc::channel(16);
        let mut out = Out::new(batches_tx);
        let (up, mut stream) = upstream();
        for v in 0..(MAX_BATCH as u32 + 2) {
            up.send(v).unwrap();
        }
        for _ in 0..(MAX_BATCH + 1) {
            next_item(&mut stream, &mut out).await.unwrap();
            out.push(Event::default().data("x"));
        }
        assert_eq!(batches.try_recv().unwrap().len(), MAX_BATCH);
    }
}
