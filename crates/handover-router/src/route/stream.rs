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
//!
//! A stream's cost comes from the usage it reports, usually its last event,
//! so it is charged to the task's budget (and counted in
//! `handover_provider_cost_micro_usd_total`) when the stream ends: complete,
//! or broken after its usage arrived. For a budget in the ledger's store
//! the stream does not yield its end before the store has the charge, so
//! the task's next call sees it. A stream ended at its commit point
//! (`complete`) is charged by the walk, like a plain answer. A provider
//! that reports no usage, or has no prices, charges nothing, as for plain
//! calls.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::{Stream, StreamExt};
use handover_providers::{
    ChatRequest, ChatStream, ErrorClass, Provider, ProviderError, StreamEvent,
};

use super::Router;
use super::report::{Attempt, Partial, Skip};
use super::task::Task;
use super::upstream::{BreakerTicket, Target};
use super::walk::{Answer, Call, Needs, Tried, Try};
use crate::budget::Budget;
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
    /// The error to yield once the stream's charge is paid.
    broken: Option<StreamBroken>,
    /// Tells the breaker how the stream ended (and gives a half-open probe
    /// back if the stream is dropped before its end).
    ticket: BreakerTicket,
    attempts: Vec<Attempt>,
    skipped: Vec<Skip>,
    partials: Vec<Partial>,
    /// The task's budget, charged when the stream ends.
    budget: Arc<Budget>,
    /// What the usage reported so far costs, not yet charged (a provider
    /// reporting usage more than once reports it cumulatively: the last
    /// report counts).
    cost: Option<f64>,
    /// The charge on its way to the budget's store: the end waits for it.
    paying: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
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

    fn broke(&mut self, err: &ProviderError) {
        self.ticket.failed(err.class());
        crate::metrics::stream_broken(&self.target.upstream.series, err.class());
        self.inner = None;
        self.broken = Some(StreamBroken {
            provider: self.target.provider().to_owned(),
            class: err.class(),
            events: self.events,
        });
    }

    /// Charges the cost of the usage reported so far (once), and starts
    /// handing it to the budget's store if the budget lives there.
    fn charge(&mut self) {
        let Some(usd) = self.cost.take() else {
            return;
        };
        self.budget.charge(usd);
        crate::metrics::cost(&self.target.upstream.series, usd);
        if self.budget.is_shared() {
            let budget = self.budget.clone();
            self.paying = Some(Box::pin(async move { budget.pay().await }));
        }
    }
}

impl Drop for RoutedStream {
    /// A stream dropped before its end (or while its charge was on its way
    /// to the store) still charges what its reported usage cost.
    fn drop(&mut self) {
        self.charge();
        if let Some(paying) = self.paying.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(paying);
        }
    }
}

impl Stream for RoutedStream {
    type Item = Result<StreamEvent, StreamBroken>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Some(ev) = this.buffered.pop_front() {
            return Poll::Ready(Some(Ok(ev)));
        }
        if let Some(inner) = this.inner.as_mut() {
            match ready!(inner.poll_next_unpin(cx)) {
                Some(Ok(ev)) => {
                    if is_data(&ev) {
                        this.events += 1;
                    }
                    if let StreamEvent::Usage(u) = &ev {
                        this.cost = this.target.upstream.cost(Some(u));
                    }
                    return Poll::Ready(Some(Ok(ev)));
                }
                // After the commit even a malformed event means a piece is
                // missing: the answer is incomplete, so end with an error.
                Some(Err(e)) => this.broke(&e),
                None => {
                    this.inner = None;
                    this.complete = true;
                    this.ticket.succeeded();
                }
            }
            this.charge();
        }
        // The end (or the error) only once the store has the charge.
        if let Some(paying) = this.paying.as_mut() {
            ready!(paying.as_mut().poll(cx));
            this.paying = None;
        }
        // The error once, then the end.
        Poll::Ready(this.broken.take().map(Err))
    }
}

/// A stream opened up to its commit point: the events read so far, and the
/// rest unless the provider's stream already ended.
struct Committed {
    buffered: VecDeque<StreamEvent>,
    rest: Option<ChatStream>,
    /// What the usage read before the commit costs, for a stream that goes
    /// on (one that ended is charged as its answer's cost).
    cost: Option<f64>,
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
        let Committed {
            buffered,
            rest,
            cost,
        } = walked.answered.value;
        let events = buffered.iter().filter(|e| is_data(e)).count();
        Ok(RoutedStream {
            complete: rest.is_none(),
            buffered,
            inner: rest,
            target: walked.target,
            events,
            broken: None,
            budget: task.budget.clone(),
            cost,
            paying: None,
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
                cost: None,
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
    let mut cost = None;
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
                    cost,
                };
            }
            None => break None,
        };
        let data = is_data(&ev);
        match &ev {
            StreamEvent::ContentDelta(t) => text.push_str(t),
            StreamEvent::Usage(u) => cost = target.upstream.cost(Some(u)),
            _ => {}
        }
        events += usize::from(data);
        buffered.push_back(ev);
        if data && commit == CommitPoint::FirstToken {
            break Some(stream);
        }
    };
    // A stream that ended here is charged with its answer; one that goes
    // on carries its cost so far to its end.
    let (answer_cost, cost) = match rest {
        None => (cost, None),
        Some(_) => (None, cost),
    };
    Tried::Answered(Answer {
        complete: rest.is_none(),
        value: Committed {
            buffered,
            rest,
            cost,
        },
        request_id,
        cost: answer_cost,
    })
}
