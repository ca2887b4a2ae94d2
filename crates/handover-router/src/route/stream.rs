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
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};
use handover_providers::{
    ChatRequest, ChatStream, ErrorClass, Provider, ProviderError, StreamEvent,
};

use super::Router;
use super::report::{Attempt, Partial, Skip};
use super::task::Task;
use super::upstream::{BreakerTicket, Target};
use super::walk::{Answer, Call, Needs, Tried, Try};
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
    target: Target,
    events: usize,
    complete: bool,
    broken: Option<StreamBroken>,
    /// Tells the breaker how the stream ended (and gives a half-open probe
    /// back if the stream is dropped before its end).
    ticket: BreakerTicket,
    attempts: Vec<Attempt>,
    skipped: Vec<Skip>,
    partials: Vec<Partial>,
}

impl std::fmt::Debug for RoutedStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoutedStream")
            .field("provider", &self.target.provider())
            .field("model", &self.target.model)
            .field("events", &self.events)
            .field("complete", &self.complete)
            .finish_non_exhaustive()
    }
}

impl RoutedStream {
    /// The provider answering.
    pub fn provider(&self) -> &str {
        self.target.provider()
    }

    /// The model asked of the provider answering (the stream's own events
    /// may name the model that served it more precisely).
    pub fn model(&self) -> &str {
        &self.target.model
    }

    /// Attempts made before this stream was committed (the last one is the
    /// committed attempt).
    pub fn attempts(&self) -> &[Attempt] {
        &self.attempts
    }

    /// Providers passed over before the commit, and why, in chain order.
    pub fn skipped(&self) -> &[Skip] {
        &self.skipped
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
        self.ticket.failed(err.class());
        crate::metrics::stream_broken(&self.target.upstream.series, err.class());
        let b = StreamBroken {
            provider: self.target.provider().to_owned(),
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
                this.ticket.succeeded();
                Poll::Ready(None)
            }
        }
    }
}

/// A stream opened up to its commit point: the events read so far, and the
/// rest unless the provider's stream already ended.
struct Committed {
    buffered: VecDeque<StreamEvent>,
    rest: Option<ChatStream>,
}

impl Router {
    /// Streams one chat call of `task` through its policy's chain, falling
    /// back freely until the policy's commit point (see the module docs).
    #[tracing::instrument(
        name = "handover.task.chat_stream",
        skip_all,
        fields(task = %task.id, policy = %task.policy.name, handover.outcome, handover.provider, handover.attempts, error.type)
    )]
    pub async fn chat_stream(
        &self,
        task: &Task,
        req: &ChatRequest,
    ) -> Result<RoutedStream, RouterError> {
        let needs = Needs::of(req);
        let walked = self.walk(task, needs, &UntilCommit(req)).await?;
        let Committed { buffered, rest } = walked.answered.value;
        let events = buffered.iter().filter(|e| is_data(e)).count();
        Ok(RoutedStream {
            complete: rest.is_none(),
            buffered,
            inner: rest,
            target: walked.target,
            events,
            broken: None,
            ticket: walked.answered.ticket,
            attempts: walked.run.attempts,
            skipped: walked.run.skipped,
            partials: walked.run.partials,
        })
    }
}

/// One streaming call, read up to the policy's commit point: a failure
/// before it may fall back; the committed stream goes to the caller.
struct UntilCommit<'r>(&'r ChatRequest);

impl Call for UntilCommit<'_> {
    type Output = Committed;

    async fn call(&self, at: Try<'_>) -> Tried<Committed> {
        let (target, commit) = (at.target, at.task.policy.commit_point);
        let tried = match target
            .upstream
            .provider
            .chat_stream(self.0, &at.options)
            .await
        {
            Ok(stream) => open_until_commit(target, stream, commit).await,
            Err(error) => Tried::Failed {
                request_id: error.request_id().map(str::to_owned),
                error,
                partial: None,
            },
        };
        drop(at.permit);
        tried
    }
}

async fn open_until_commit(
    target: &Target,
    mut stream: ChatStream,
    commit: CommitPoint,
) -> Tried<Committed> {
    let request_id = stream.request_id().map(str::to_owned);
    let mut buffered = VecDeque::new();
    let mut text = String::new();
    let mut events = 0;
    let rest = loop {
        let ev = match stream.next().await {
            Some(Ok(ev)) => ev,
            Some(Err(error)) => {
                let provider = target.provider().to_owned();
                let partial = (events > 0).then_some(Partial {
                    provider,
                    text,
                    events,
                });
                let request_id = request_id.or_else(|| error.request_id().map(str::to_owned));
                return Tried::Failed {
                    request_id,
                    error,
                    partial,
                };
            }
            None => break None,
        };
        let data = is_data(&ev);
        if let StreamEvent::ContentDelta(t) = &ev {
            text.push_str(t);
        }
        events += usize::from(data);
        buffered.push_back(ev);
        if data && commit == CommitPoint::FirstToken {
            break Some(stream);
        }
    };
    Tried::Answered(Answer {
        complete: rest.is_none(),
        value: Committed { buffered, rest },
        request_id,
        cost: None,
    })
}
