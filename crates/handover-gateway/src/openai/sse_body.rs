//! The body of a streamed answer: it drives the router's stream itself.
//!
//! The stream is polled by the connection's own task as hyper asks for
//! the body's next frame: an upstream read wakes that task directly, the
//! events it carried are encoded and leave as one frame, and no task,
//! channel or thread hand-off sits in between (a producer task per stream
//! cost about 1.6 more futex wake-ups per streamed request than a plain
//! call, see docs/decisions.md). If the body is dropped before the stream
//! ended (the client hung up), the rest is handed to the runtime as a task
//! of its own and read to its end, so the router's breakers and attempts
//! hear how the call ended, as with `detach.rs` for plain calls; a walk
//! still opening hears that its caller left, so it starts no retry or
//! fallback after the attempt in flight.

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use futures::{Stream, StreamExt};
use handover_providers::StreamEvent;
use handover_router::RouterError;
use handover_router::route::{Caller, RoutedStream};
use tokio::time::{Instant, Sleep};
use tracing::Span;

use crate::api_error::ApiError;

use super::response::{answer_headers, attempts_header};
use super::stream::{Encoder, SseText};

/// The router's walk up to the commit point.
pub(crate) type Opening = Pin<Box<dyn Future<Output = Result<RoutedStream, RouterError>> + Send>>;

/// At most this many provider events leave in one frame, however fast
/// the provider's stream keeps coming.
pub(crate) const MAX_BATCH: usize = 64;

enum Phase {
    /// The router is still walking the chain.
    Opening(Opening),
    /// Committed; `heading` until the opening chunk is written (it waits
    /// for the events that head the answer: the provider's model and
    /// chunk fields, so every chunk names the same model and id).
    Streaming {
        stream: Box<RoutedStream>,
        heading: bool,
    },
    Done,
}

/// See the module docs: a `Stream` of body frames for `Body::from_stream`.
pub(crate) struct SseBody<E: Encoder> {
    phase: Phase,
    /// The caller the opening walk watches: it leaves if the body is dropped.
    caller: Caller,
    encoder: E,
    text: SseText,
    span: Span,
    keepalive: Duration,
    timer: Pin<Box<Sleep>>,
    /// When the last frame left (a keep-alive is due `keepalive` later).
    last: Instant,
}

impl<E: Encoder + Unpin> SseBody<E> {
    /// A body whose answer is `opening` (a walk watching `caller`); `span` is entered whenever the
    /// router's stream is polled (an exported trace keeps request → task →
    /// attempts), and a keep-alive is due `keepalive` from now.
    // The keep-alive timer is the one sleep here: it paces comments, it
    // does not wait for the call (whose deadlines are the budget's), as
    // axum's `KeepAlive` timer did before.
    #[allow(clippy::disallowed_methods)]
    pub(crate) fn new(
        opening: Opening,
        caller: Caller,
        encoder: E,
        keepalive: Duration,
        span: Span,
    ) -> Self {
        Self {
            phase: Phase::Opening(opening),
            caller,
            encoder,
            text: SseText::default(),
            span,
            keepalive,
            timer: Box::pin(tokio::time::sleep(keepalive)),
            last: Instant::now(),
        }
    }

    /// Waits for the router to commit: the response headers that name the
    /// answering provider, its attempts and request id, or the
    /// router's error (the body then has nothing to send). If this wait
    /// is dropped, the body is still whole: it goes on in the response, or
    /// its drop reads the call to its end.
    pub(crate) async fn committed(&mut self) -> Result<HeaderMap, RouterError> {
        std::future::poll_fn(|cx| {
            let Phase::Opening(opening) = &mut self.phase else {
                return Poll::Ready(Ok(()));
            };
            let span = self.span.clone();
            let _entered = span.enter();
            match opening.as_mut().poll(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Ok(stream)) => {
                    self.start(stream);
                    Poll::Ready(Ok(()))
                }
                Poll::Ready(Err(e)) => {
                    self.phase = Phase::Done;
                    Poll::Ready(Err(e))
                }
            }
        })
        .await?;
        let mut headers = HeaderMap::new();
        // `Done` only follows an error or the end: then no headers.
        if let Phase::Streaming { stream, .. } = &self.phase {
            answer_headers(
                &mut headers,
                stream.provider(),
                stream.attempts(),
                stream.skipped(),
            );
        }
        Ok(headers)
    }

    fn start(&mut self, stream: RoutedStream) {
        // The model the route asked for until the provider names its own.
        self.encoder
            .heading(&StreamEvent::Model(stream.model().to_owned()));
        self.phase = Phase::Streaming {
            stream: Box::new(stream),
            heading: true,
        };
    }

    /// Moves the answer on as far as it is ready, writing its events.
    fn advance(&mut self, cx: &mut Context<'_>) {
        if let Phase::Opening(opening) = &mut self.phase {
            match opening.as_mut().poll(cx) {
                Poll::Pending => return,
                Poll::Ready(Ok(stream)) => self.start(stream),
                Poll::Ready(Err(e)) => {
                    let err = E::failure(&e);
                    // The response head (and its access line) went out
                    // while the router waited: this is how the call ended.
                    tracing::info!(target: "handover::request", code = err.code, "stream failed before its answer");
                    self.encoder.error(&err, &mut self.text);
                    self.phase = Phase::Done;
                    return;
                }
            }
        }
        let Phase::Streaming { stream, heading } = &mut self.phase else {
            return;
        };
        let (encoder, text) = (&mut self.encoder, &mut self.text);
        let ended = take_ready(stream, cx, |stream, item| {
            if *heading {
                if let Some(Ok(ev)) = &item
                    && encoder.heading(ev)
                {
                    return true;
                }
                *heading = false;
                encoder.opening(&handover(stream), text);
            }
            match item {
                Some(Ok(ev)) => {
                    encoder.event(ev, text);
                    true
                }
                // After the commit point a broken stream ends with the
                // error event only: never presented as complete.
                Some(Err(broken)) => {
                    tracing::warn!(
                        target: "handover::request",
                        provider = %broken.provider,
                        class = broken.class.as_str(),
                        events = broken.events,
                        "stream broken after its commit point"
                    );
                    let err = ApiError::new(
                        StatusCode::BAD_GATEWAY,
                        "server_error",
                        "stream_broken",
                        broken.to_string(),
                    );
                    encoder.error(&err, text);
                    false
                }
                None => {
                    if stream.is_complete() {
                        encoder.complete(text);
                    }
                    false
                }
            }
        });
        if ended {
            self.phase = Phase::Done;
        }
    }
}

/// Takes in the items `stream` has ready (at most [`MAX_BATCH`]) with
/// `take`, which says whether to go on; `true` once the stream is over
/// (it ended, or `take` stopped it).
fn take_ready<S: Stream + Unpin>(
    stream: &mut S,
    cx: &mut Context<'_>,
    mut take: impl FnMut(&mut S, Option<S::Item>) -> bool,
) -> bool {
    for _ in 0..MAX_BATCH {
        match stream.poll_next_unpin(cx) {
            Poll::Pending => return false,
            Poll::Ready(item) => {
                let end = item.is_none();
                if !take(stream, item) || end {
                    return true;
                }
            }
        }
    }
    // More may be ready: the next frame takes it (hyper polls again
    // once this one is written).
    false
}

impl<E: Encoder + Unpin> Stream for SseBody<E> {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if !matches!(this.phase, Phase::Done) {
            // Taken out while entered (`advance` borrows all of `this`).
            let span = std::mem::replace(&mut this.span, Span::none());
            let entered = span.enter();
            // A panic ends this answer (without `[DONE]`), not the connection.
            if std::panic::catch_unwind(AssertUnwindSafe(|| this.advance(cx))).is_err() {
                this.phase = Phase::Done;
            }
            drop(entered);
            this.span = span;
        }
        let frame = this.text.take();
        if !frame.is_empty() {
            this.last = Instant::now();
            return Poll::Ready(Some(Ok(Bytes::from(frame))));
        }
        if matches!(this.phase, Phase::Done) {
            return Poll::Ready(None);
        }
        // A `: keep-alive` comment whenever `keepalive` passes without a
        // frame, so clients and proxies do not time out while the router
        // waits (for a slot, a fallback, the commit point) or the provider
        // thinks. One timer, moved only when it fires.
        while this.timer.as_mut().poll(cx).is_ready() {
            let due = this.last + this.keepalive;
            if Instant::now() >= due {
                this.last = Instant::now();
                this.timer.as_mut().reset(this.last + this.keepalive);
                return Poll::Ready(Some(Ok(Bytes::from_static(b": keep-alive\n\n"))));
            }
            this.timer.as_mut().reset(due);
        }
        Poll::Pending
    }
}

impl<E: Encoder> Drop for SseBody<E> {
    fn drop(&mut self) {
        let phase = std::mem::replace(&mut self.phase, Phase::Done);
        let rest: Pin<Box<dyn Future<Output = ()> + Send>> = match phase {
            Phase::Done => return,
            Phase::Opening(opening) => {
                self.caller.leave();
                Box::pin(async move {
                    if let Ok(stream) = opening.await {
                        drain(stream).await;
                    }
                })
            }
            Phase::Streaming { stream, .. } => Box::pin(drain(*stream)),
        };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let span = self.span.clone();
            rt.spawn(tracing::Instrument::instrument(rest, span));
        }
    }
}

/// Which provider answered after which attempts, as the opening event
/// tells the client: the same facts as the response headers, which a
/// stream that waited with keep-alives could not send.
fn handover(stream: &RoutedStream) -> serde_json::Value {
    let attempts = attempts_header(stream.attempts(), stream.skipped());
    serde_json::json!({"provider": stream.provider(), "attempts": attempts.to_str().unwrap_or("")})
}

/// Reads a stream nobody listens to any more to its end.
async fn drain(mut stream: RoutedStream) {
    while let Some(item) = stream.next().await {
        if item.is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::task::Poll;

    use futures::task::noop_waker_ref;
    use tokio::sync::mpsc;

    use super::*;

    #[test]
    fn what_is_ready_is_taken_in_one_go_up_to_the_batch_limit() {
        let (tx, mut stream, mut cx) = three_ready();
        let mut seen = Vec::new();
        let ended = take_ready(&mut stream, &mut cx, |_, item| {
            seen.extend(item);
            true
        });
        assert_eq!(
            (ended, seen),
            (false, vec![0, 1, 2]),
            "nothing waits for more"
        );
        for v in 0..(MAX_BATCH as u32 + 5) {
            tx.send(v).unwrap();
        }
        let mut n = 0;
        take_ready(&mut stream, &mut cx, |_, _| {
            n += 1;
            true
        });
        assert_eq!(n, MAX_BATCH);
        drop(tx);
        let mut rest = Vec::new();
        let ended = take_ready(&mut stream, &mut cx, |_, item| {
            rest.push(item);
            true
        });
        assert!(ended);
        assert_eq!(rest.len(), 6, "five items, then the end");
        assert_eq!(rest.last(), Some(&None));
    }

    #[test]
    fn take_can_stop_the_stream() {
        let (_tx, mut stream, mut cx) = three_ready();
        let mut seen = Vec::new();
        let ended = take_ready(&mut stream, &mut cx, |_, item| {
            seen.extend(item);
            seen.len() < 2
        });
        assert!(ended);
        assert_eq!(seen, [0, 1]);
        assert!(matches!(
            stream.poll_next_unpin(&mut cx),
            Poll::Ready(Some(2))
        ));
    }

    /// A stream with 0, 1 and 2 ready, its sender, and a context to poll it.
    fn three_ready() -> (
        mpsc::UnboundedSender<u32>,
        futures::stream::BoxStream<'static, u32>,
        Context<'static>,
    ) {
        let (tx, rx) = mpsc::unbounded_channel::<u32>();
        let stream =
            futures::stream::unfold(rx, |mut r| async move { r.recv().await.map(|v| (v, r)) })
                .boxed();
        for v in 0..3 {
            tx.send(v).unwrap();
        }
        (tx, stream, Context::from_waker(noop_waker_ref()))
    }
}
