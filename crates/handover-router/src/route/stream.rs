//! The streaming path, with a commit point.
//!
//! Before the commit point a failure may fall back and the next provider
//! starts cleanly (nothing of the failed attempt reaches the caller; its text
//! is kept as a [`Partial`]). After it, a failure ends the stream with an
//! explicit [`StreamBroken`] error: never a truncated answer presented as
//! complete, never another provider's text stitched on.
//!
//! * `first_token`: commit at the first data event (text, reasoning or tool
//!   call). Keep-alives are not data and never commit.
//! * `complete`: commit only when the provider's stream completed; the
//!   caller then receives the whole buffered answer.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};
use handover_providers::{
    ChatRequest, ChatStream, ErrorClass, Provider, ProviderError, StreamEvent,
};

use super::Router;
use super::attempt::{Attempt, AttemptResult, FailureReason, Partial, SkipReason};
use super::run::{Run, Step};
use super::slot::{ProbeGuard, Slot, breaker_failure};
use super::task::Task;
use crate::backoff::Backoff;
use crate::config::CommitPoint;
use crate::error::RouterError;

/// The stream broke after its commit point: what the caller received is
/// incomplete and must not be presented as a complete answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the answer from {provider} broke after {events} event(s) ({class}): it is incomplete")]
pub struct StreamBroken {
    /// The provider whose stream broke.
    pub provider: String,
    /// The error class.
    pub class: ErrorClass,
    /// Data events delivered before it broke.
    pub events: usize,
}

fn is_data(ev: &StreamEvent) -> bool {
    matches!(
        ev,
        StreamEvent::ContentDelta(_)
            | StreamEvent::ReasoningDelta(_)
            | StreamEvent::ToolCallDelta { .. }
    )
}

/// A committed stream from one provider. Yields the provider's events, then
/// ends; or yields one `Err(StreamBroken)` and ends.
pub struct RoutedStream {
    buffered: VecDeque<StreamEvent>,
    inner: Option<ChatStream>,
    slot: Arc<Slot>,
    events: usize,
    complete: bool,
    broken: Option<StreamBroken>,
    /// Gives a half-open probe back if the stream is dropped before its end.
    probe: ProbeGuard,
    attempts: Vec<Attempt>,
    partials: Vec<Partial>,
}

impl std::fmt::Debug for RoutedStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoutedStream")
            .field("provider", &self.slot.config.name)
            .field("events", &self.events)
            .field("complete", &self.complete)
            .finish_non_exhaustive()
    }
}

impl RoutedStream {
    /// The provider answering.
    pub fn provider(&self) -> &str {
        &self.slot.config.name
    }

    /// Attempts made before this stream was committed (the last one is the
    /// committed attempt).
    pub fn attempts(&self) -> &[Attempt] {
        &self.attempts
    }

    /// Partial output of failed attempts before the commit.
    pub fn partials(&self) -> &[Partial] {
        &self.partials
    }

    /// True once the provider's stream ended complete.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    fn broke(&mut self, err: &ProviderError) -> StreamBroken {
        match breaker_failure(err.class()) {
            Some(f) => self.slot.breaker.record_failure(f),
            None => self.slot.breaker.release_probe(),
        }
        self.probe.disarm();
        let b = StreamBroken {
            provider: self.slot.config.name.clone(),
            class: err.class(),
            events: self.events,
        };
        self.inner = None;
        self.broken = Some(b.clone());
        b
    }
}

impl Stream for RoutedStream {
    type Item = Result<StreamEvent, StreamBroken>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Some(ev) = this.buffered.pop_front() {
            return Poll::Ready(Some(Ok(ev)));
        }
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        match inner.poll_next_unpin(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(ev))) => {
                if is_data(&ev) {
                    this.events += 1;
                }
                Poll::Ready(Some(Ok(ev)))
            }
            // After the commit even a malformed event means a piece is
            // missing: the answer is incomplete, so end with an error.
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(this.broke(&e)))),
            Poll::Ready(None) => {
                this.inner = None;
                this.complete = true;
                this.slot.breaker.record_success();
                this.probe.disarm();
                Poll::Ready(None)
            }
        }
    }
}

/// Outcome of opening one provider's stream up to the commit point.
enum Opened {
    Committed {
        buffered: VecDeque<StreamEvent>,
        rest: Option<ChatStream>,
    },
    Failed(ProviderError, Option<Partial>),
}

async fn open_until_commit(slot: &Slot, mut stream: ChatStream, commit: CommitPoint) -> Opened {
    let mut buffered = VecDeque::new();
    let mut text = String::new();
    let mut events = 0;
    loop {
        match stream.next().await {
            Some(Ok(ev)) => {
                let data = is_data(&ev);
                if let StreamEvent::ContentDelta(t) = &ev {
                    text.push_str(t);
                }
                if data {
                    events += 1;
                }
                buffered.push_back(ev);
                if data && commit == CommitPoint::FirstToken {
                    return Opened::Committed {
                        buffered,
                        rest: Some(stream),
                    };
                }
            }
            Some(Err(e)) => {
                let partial = (events > 0).then(|| Partial {
                    provider: slot.config.name.clone(),
                    text,
                    events,
                });
                return Opened::Failed(e, partial);
            }
            None => {
                return Opened::Committed {
                    buffered,
                    rest: None,
                };
            }
        }
    }
}

impl Router {
    /// Streams one chat call of `task` through its policy's chain, falling
    /// back freely until the policy's commit point (see the module docs).
    #[tracing::instrument(name = "handover.task.chat_stream", skip_all, fields(task = %task.id, policy = %task.policy.name))]
    pub async fn chat_stream(
        &self,
        task: &Task,
        req: &ChatRequest,
    ) -> Result<RoutedStream, RouterError> {
        let mut run = Run::new(task);
        let chain = match run.chain(&self.slots, req.data_class.as_deref()) {
            Ok(chain) => chain,
            Err(reason) => return Err(RouterError::Task(Box::new(run.fail(reason)))),
        };
        let mut stop = None;
        'chain: for slot in chain {
            let failover = run.failed_any();
            let Some(mut probe) = ProbeGuard::admit(&slot) else {
                run.skip(&slot, SkipReason::BreakerOpen);
                continue;
            };
            let mut backoff = Backoff::new(&task.policy.backoff);
            let mut tries = 0;
            loop {
                let permit = match run.admit(&slot, failover).await {
                    Ok(p) => p,
                    Err(Step::Stop(reason)) => {
                        stop = Some(reason);
                        break 'chain;
                    }
                    Err(_) => {
                        continue 'chain;
                    }
                };
                let started = run.now();
                let opened = match slot
                    .provider
                    .chat_stream(req, &run.call_options(&slot))
                    .await
                {
                    Ok(stream) => {
                        let request_id = stream.request_id().map(str::to_owned);
                        (
                            open_until_commit(&slot, stream, task.policy.commit_point).await,
                            request_id,
                        )
                    }
                    Err(e) => (Opened::Failed(e, None), None),
                };
                drop(permit);
                tries += 1;
                match opened {
                    (Opened::Committed { buffered, rest }, request_id) => {
                        run.record(&slot, started, AttemptResult::Answered, true, request_id);
                        crate::metrics::answered(
                            &task.policy.name,
                            &slot.config.name,
                            run.now(),
                            None,
                        );
                        let complete = rest.is_none();
                        if complete {
                            slot.breaker.record_success();
                            probe.disarm();
                        }
                        let events = buffered.iter().filter(|e| is_data(e)).count();
                        return Ok(RoutedStream {
                            buffered,
                            inner: rest,
                            slot,
                            events,
                            complete,
                            broken: None,
                            probe,
                            attempts: run.attempts,
                            partials: run.partials,
                        });
                    }
                    (Opened::Failed(e, partial), request_id) => {
                        run.record(
                            &slot,
                            started,
                            AttemptResult::Failed(e.class()),
                            e.was_sent(),
                            request_id.or_else(|| e.request_id().map(str::to_owned)),
                        );
                        run.partials.extend(partial);
                        let step = run.after_failure(&slot, &e, tries, &mut backoff).await;
                        probe.disarm();
                        match step {
                            Step::Again => continue,
                            Step::Next => continue 'chain,
                            Step::Stop(reason) => {
                                return Err(RouterError::Task(Box::new(run.fail(reason))));
                            }
                        }
                    }
                }
            }
        }
        let reason = stop
            .or_else(|| task.budget.check().err().map(FailureReason::Budget))
            .unwrap_or(FailureReason::ChainExhausted);
        Err(RouterError::Task(Box::new(run.fail(reason))))
    }
}
