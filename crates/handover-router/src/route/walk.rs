//! The one chain walk of a routed call, shared by the plain and the
//! streaming path, which differ only in the [`Call`] they make.
//!
//! For each provider of the policy's chain, in order:
//! 1. the request's [`Needs`] may rule it out (data class): skipped;
//! 2. before every try — the first and each retry — its breaker is asked
//!    (open: skipped from here on) and its admission control grants a
//!    concurrency slot within the budget (queue full: skipped);
//! 3. the call is made; its outcome is recorded as an attempt, the breaker
//!    learns from it, and the policy's table picks what follows a failure:
//!    retry after a backoff that fits the budget, next provider, or stop.
//!
//! Everything the walk spends — requests (counted at the transport), waits
//! for a slot, backoff sleeps, cost — is drawn from the task's one budget
//! (`Task::budget`), so the walk does not care where that budget lives.

use std::sync::Arc;
use std::time::Duration;

use handover_providers::{CallOptions, ProviderError};

use super::Router;
use super::report::{AttemptResult, FailureReason, Partial, SkipReason};
use super::run::Run;
use super::task::Task;
use super::upstream::{BreakerTicket, Upstream};
use crate::admission::Permit;
use crate::backoff::Backoff;
use crate::error::RouterError;

/// What a request needs from a provider. A provider that cannot give it is
/// skipped before anything is sent to it; if no provider of the chain can,
/// the call fails closed.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Needs<'r> {
    /// The request's data class: only providers listing it may receive it.
    pub(crate) data_class: Option<&'r str>,
}

impl Needs<'_> {
    /// Why `upstream` may not serve this request, if it may not.
    fn refusal(&self, upstream: &Upstream) -> Option<SkipReason> {
        (!upstream.accepts(self.data_class)).then_some(SkipReason::DataClass)
    }

    fn nobody_allowed(&self) -> FailureReason {
        FailureReason::NoAllowedProvider {
            data_class: self.data_class.unwrap_or_default().to_owned(),
        }
    }
}

/// What one try of one provider produced.
pub(crate) enum Tried<T> {
    /// An answer (for a stream: one that reached its commit point).
    Answered(Answer<T>),
    /// A failure, with partial output to keep apart.
    Failed {
        error: ProviderError,
        request_id: Option<String>,
        partial: Option<Partial>,
    },
    /// The walk stopped waiting (`abandon_after`); the request runs on and
    /// its late outcome is recorded elsewhere.
    Abandoned,
}

/// An answer from one provider.
pub(crate) struct Answer<T> {
    pub(crate) value: T,
    pub(crate) request_id: Option<String>,
    /// Its cost, charged to the budget.
    pub(crate) cost: Option<f64>,
    /// The provider has delivered all of it, so its breaker hears of the
    /// success now; a stream committed before its end reports later.
    pub(crate) complete: bool,
}

/// The call the walk makes on one provider: the only difference between
/// the plain and the streaming path.
pub(crate) trait Call {
    type Output;

    /// Makes one try.
    fn call(&self, at: Try<'_>) -> impl Future<Output = Tried<Self::Output>>;
}

/// One try of one provider, as the walk hands it to the [`Call`].
pub(crate) struct Try<'a> {
    pub(crate) task: &'a Task,
    pub(crate) upstream: &'a Arc<Upstream>,
    /// Timeouts cut to the budget, and the budget's request counter.
    pub(crate) options: CallOptions,
    /// The provider's concurrency slot: hold it as long as the provider
    /// works on the request.
    pub(crate) permit: Permit,
    /// Since the task began.
    pub(crate) started: Duration,
}

/// Why the walk leaves a provider without an answer.
pub(crate) enum Leave {
    /// On to the next provider of the chain.
    Next,
    /// The call ends here.
    Stop(FailureReason),
}

/// A provider's answer with what the caller still needs from the walk.
pub(crate) struct Answered<T> {
    pub(crate) value: T,
    pub(crate) cost: Option<f64>,
    /// Still holds a half-open probe if the answer is not complete yet.
    pub(crate) ticket: BreakerTicket,
}

/// The end of a walk that produced an answer.
pub(crate) struct Walked<'t, T> {
    pub(crate) answered: Answered<T>,
    pub(crate) upstream: Arc<Upstream>,
    pub(crate) run: Run<'t>,
}

impl<'t, T> Walked<'t, T> {
    fn new(answered: Answered<T>, upstream: &Arc<Upstream>, run: Run<'t>) -> Self {
        let upstream = upstream.clone();
        Self {
            answered,
            upstream,
            run,
        }
    }
}

impl Router {
    /// Walks `task`'s chain with `call` until a provider answers, then
    /// settles a shared budget (unused reservations back, cost charged).
    pub(crate) async fn walk<'t, C: Call>(
        &self,
        task: &'t Task,
        needs: Needs<'_>,
        call: &C,
    ) -> Result<Walked<'t, C::Output>, RouterError> {
        let walked = self.walk_chain(task, needs, call).await;
        task.budget.settle().await;
        walked
    }

    async fn walk_chain<'t, C: Call>(
        &self,
        task: &'t Task,
        needs: Needs<'_>,
        call: &C,
    ) -> Result<Walked<'t, C::Output>, RouterError> {
        let mut run = Run::new(task);
        let chain = || {
            task.policy
                .chain
                .iter()
                .filter_map(|name| self.upstreams.get(name))
        };
        if chain().all(|u| needs.refusal(u).is_some()) {
            for u in chain() {
                if let Some(why) = needs.refusal(u) {
                    run.skip(u, why);
                }
            }
            return Err(stopped(run, needs.nobody_allowed()));
        }
        for upstream in chain() {
            if let Some(why) = needs.refusal(upstream) {
                run.skip(upstream, why);
                continue;
            }
            match try_provider(&mut run, upstream, call).await {
                Ok(answered) => return Ok(Walked::new(answered, upstream, run)),
                Err(Leave::Next) => {}
                Err(Leave::Stop(reason)) => return Err(stopped(run, reason)),
            }
        }
        let reason = task
            .budget
            .check()
            .map_or_else(FailureReason::Budget, |()| FailureReason::ChainExhausted);
        Err(stopped(run, reason))
    }
}

fn stopped(run: Run<'_>, reason: FailureReason) -> RouterError {
    RouterError::Task(Box::new(run.fail(reason)))
}

/// Tries one provider as often as the policy allows.
async fn try_provider<C: Call>(
    run: &mut Run<'_>,
    upstream: &Arc<Upstream>,
    call: &C,
) -> Result<Answered<C::Output>, Leave> {
    let failover = run.failed_any();
    let mut backoff = Backoff::new(&run.task.policy.backoff);
    let mut tries = 0;
    loop {
        // Asked before every try, retries included: a breaker opened
        // meanwhile (by this call's failures or another task's) is obeyed.
        let Some(mut ticket) = BreakerTicket::admit(upstream) else {
            run.skip(upstream, SkipReason::BreakerOpen);
            return Err(Leave::Next);
        };
        let permit = run.admit(upstream, failover).await?;
        let started = run.now();
        let tried = call
            .call(Try {
                task: run.task,
                upstream,
                options: run.call_options(upstream),
                permit,
                started,
            })
            .await;
        tries += 1;
        let (error, request_id, partial) = match tried {
            Tried::Answered(answer) => return Ok(run.answered(upstream, ticket, started, answer)),
            Tried::Abandoned => {
                run.record(upstream, started, AttemptResult::Abandoned, true, None);
                return Err(Leave::Next);
            }
            Tried::Failed {
                error,
                request_id,
                partial,
            } => (error, request_id, partial),
        };
        let result = AttemptResult::Failed(error.class());
        run.record(upstream, started, result, error.was_sent(), request_id);
        run.partials.extend(partial);
        run.after_failure(&mut ticket, &error, tries, &mut backoff)
            .await?;
    }
}
