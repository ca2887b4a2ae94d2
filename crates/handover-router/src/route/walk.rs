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

use std::time::Duration;

use handover_providers::{CallOptions, Capability, ChatRequest, Need, ProviderError};

use super::Router;
use super::report::{AttemptResult, FailureReason, Partial, ProviderSaid, Skip, SkipReason};
use super::run::Run;
use super::task::Task;
use super::upstream::{BreakerTicket, Target};
use crate::admission::Permit;
use crate::backoff::Backoff;
use crate::error::RouterError;

/// What a request needs from a provider. A provider that cannot give it is
/// skipped before anything is sent to it; if no provider of the chain can,
/// the call fails closed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Needs<'r> {
    /// The request's data class: only providers listing it may receive it.
    pub(crate) data_class: Option<&'r str>,
    /// What the request asks for beyond plain chat: only providers that
    /// honour all of it receive it (never a weaker request).
    pub(crate) features: Vec<Need>,
}

impl<'r> Needs<'r> {
    pub(crate) fn of(req: &'r ChatRequest) -> Self {
        Self {
            data_class: req.data_class.as_deref(),
            features: req.needs(),
        }
    }

    /// Why `target` may not serve this request, if it may not.
    fn refusal(&self, target: &Target) -> Option<SkipReason> {
        if !target.upstream.accepts(self.data_class) {
            return Some(SkipReason::DataClass);
        }
        let provider = &target.upstream.config;
        self.features
            .iter()
            .find(|n| !provider.supports(n.capability))
            .map(|n| SkipReason::Unsupported(n.capability))
    }

    /// Why the call fails when every provider was refused: the data class
    /// if that excluded them all, else the first parameter nobody left
    /// honours, with the providers that lack it.
    fn nobody_allowed(&self, skipped: &[Skip]) -> FailureReason {
        let lacking = |c: Capability| {
            skipped
                .iter()
                .filter(|s| s.reason == SkipReason::Unsupported(c))
                .map(|s| s.provider.clone())
                .collect::<Vec<_>>()
        };
        let unsupported = self.features.iter().find_map(|n| {
            let providers = lacking(n.capability);
            (!providers.is_empty()).then(|| FailureReason::Unsupported {
                parameter: n.parameter.clone(),
                providers,
            })
        });
        unsupported.unwrap_or_else(|| FailureReason::NoAllowedProvider {
            data_class: self.data_class.unwrap_or_default().to_owned(),
        })
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
        /// What the usage reported before the failure cost (a stream that
        /// broke after its usage arrived), charged like an answer's.
        cost: Option<f64>,
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
    pub(crate) target: &'a Target,
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
    pub(crate) target: Target,
    pub(crate) run: Run<'t>,
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
        record_outcome(&walked);
        walked
    }

    async fn walk_chain<'t, C: Call>(
        &self,
        task: &'t Task,
        needs: Needs<'_>,
        call: &C,
    ) -> Result<Walked<'t, C::Output>, RouterError> {
        let mut run = Run::new(task);
        // A hop's target (its breaker looked up, its model named) is built
        // only when the walk reaches it: most calls end at the first hop.
        let mut allowed_any = false;
        for hop in task.chain.iter() {
            let Some(upstream) = self.upstreams.get(&hop.provider) else {
                continue;
            };
            let target = upstream.target(&hop.model);
            if let Some(why) = needs.refusal(&target) {
                run.skip(&target, why);
                continue;
            }
            allowed_any = true;
            match try_provider(&mut run, &target, call).await {
                Ok(answered) => {
                    return Ok(Walked {
                        answered,
                        target,
                        run,
                    });
                }
                Err(Leave::Next) => {}
                Err(Leave::Stop(reason)) => return Err(stopped(run, reason)),
            }
        }
        if !allowed_any {
            let reason = needs.nobody_allowed(&run.skipped);
            return Err(stopped(run, reason));
        }
        let reason = match run.nothing_asked() {
            Some(reason) => reason,
            None => task
                .budget
                .check()
                .map_or_else(FailureReason::Budget, |()| FailureReason::ChainExhausted),
        };
        Err(stopped(run, reason))
    }
}

/// Names the walk's outcome on the task span (`handover.task.*`): which
/// provider answered after how many attempts, or why it failed.
fn record_outcome<T>(walked: &Result<Walked<'_, T>, RouterError>) {
    let span = tracing::Span::current();
    if span.is_disabled() {
        return;
    }
    match walked {
        // One `record_all!` per outcome: each record is a trip through the
        // subscriber's layers.
        Ok(w) => tracing::record_all!(
            span,
            "handover.outcome" = "answered",
            "handover.provider" = w.target.provider(),
            "handover.attempts" = w.run.attempts.len(),
        ),
        Err(RouterError::Task(failure)) => tracing::record_all!(
            span,
            "handover.outcome" = "failed",
            "handover.attempts" = failure.attempts.len(),
            "error.type" = failure.reason.kind(),
        ),
        Err(_) => {
            span.record("handover.outcome", "failed");
        }
    }
}

fn stopped(run: Run<'_>, reason: FailureReason) -> RouterError {
    RouterError::Task(Box::new(run.fail(reason)))
}

/// Tries one provider (for one model) as often as the policy allows.
async fn try_provider<C: Call>(
    run: &mut Run<'_>,
    target: &Target,
    call: &C,
) -> Result<Answered<C::Output>, Leave> {
    let failover = run.failed_any();
    let mut backoff = Backoff::new(&run.task.policy.backoff);
    let mut tries = 0;
    loop {
        // Nobody waits for an answer any more: nothing more is started (the
        // attempt that was in flight when the caller left has ended).
        if run.task.caller_left() {
            return Err(Leave::Stop(FailureReason::CallerLeft));
        }
        // Asked before every try, retries included: a breaker opened
        // meanwhile (by this call's failures or another task's) is obeyed.
        let Some(mut ticket) = BreakerTicket::admit(target) else {
            run.skip(target, SkipReason::BreakerOpen);
            return Err(Leave::Next);
        };
        let permit = run.admit(target, failover).await?;
        let started = run.now();
        // Boxed: the provider's request future is most of this state
        // machine, and a call waiting above for a slot (or a backoff)
        // would otherwise carry its space the whole time.
        let tried = Box::pin(call.call(Try {
            task: run.task,
            target,
            options: run.call_options(target),
            permit,
            started,
        }))
        .await;
        tries += 1;
        let (error, request_id, partial, cost) = match tried {
            Tried::Answered(answer) => return Ok(run.answered(target, ticket, started, answer)),
            Tried::Abandoned => {
                run.record(target, started, AttemptResult::Abandoned, true, None, None);
                return Err(Leave::Next);
            }
            Tried::Failed {
                error,
                request_id,
                partial,
                cost,
            } => (error, request_id, partial, cost),
        };
        if error.is_untranslatable() {
            run.untranslatable(target, error);
            return Err(Leave::Next);
        }
        let result = AttemptResult::Failed(error.class());
        let said = ProviderSaid::of(&error).boxed();
        run.record(target, started, result, error.was_sent(), request_id, said);
        if let Some(c) = cost {
            run.charge(target, c);
        }
        run.partials.extend(partial);
        run.after_failure(&mut ticket, &error, tries, &mut backoff)
            .await?;
    }
}
