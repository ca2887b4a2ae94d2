//! The bookkeeping of one routed call: what it tried, what it skipped, the
//! partial output it kept apart, and the decisions that touch the budget
//! (waiting for admission, backing off) — used by the chain walk.

use std::sync::Arc;
use std::time::Duration;

use handover_providers::{CallOptions, ErrorClass, ProviderError};

use super::caller::unless_left;
use super::report::{
    Attempt, AttemptResult, FailureReason, Partial, ProviderSaid, Skip, SkipReason, TaskFailure,
};
use super::task::{RequestCounter, Task};
use super::upstream::{BreakerTicket, Target};
use super::walk::{Answer, Answered, Leave};
use crate::admission::{Permit, Refused};
use crate::backoff::Backoff;
use crate::budget::Exhausted;
use crate::config::ClassAction;

pub(crate) struct Run<'t> {
    pub(crate) task: &'t Task,
    pub(crate) attempts: Vec<Attempt>,
    pub(crate) skipped: Vec<Skip>,
    pub(crate) partials: Vec<Partial>,
    /// The first provider whose wire format could not express the request:
    /// the call's answer if no provider was asked at all.
    pub(crate) untranslatable: Option<ProviderError>,
}

impl<'t> Run<'t> {
    pub(crate) fn new(task: &'t Task) -> Self {
        Self {
            task,
            attempts: Vec::new(),
            skipped: Vec::new(),
            partials: Vec::new(),
            untranslatable: None,
        }
    }

    pub(crate) fn now(&self) -> Duration {
        self.task.budget.elapsed()
    }

    /// Whether an earlier provider of this call failed: traffic arriving at
    /// the next one is failover traffic, limited by its `fallback_share`.
    pub(crate) fn failed_any(&self) -> bool {
        self.attempts
            .iter()
            .any(|a| matches!(a.result, AttemptResult::Failed(_)))
    }

    pub(crate) fn skip(&mut self, target: &Target, reason: SkipReason) {
        crate::metrics::skipped(&target.upstream.series, reason);
        self.skipped.push(Skip {
            provider: target.provider().to_owned(),
            model: target.model.clone(),
            at: self.now(),
            reason,
        });
    }

    /// Passes over `target`, whose wire format cannot express the request
    /// (`error`): nothing was sent and the provider said nothing, so no
    /// attempt and no breaker verdict, as for a capability it lacks.
    pub(crate) fn untranslatable(&mut self, target: &Target, error: ProviderError) {
        self.skip(target, SkipReason::Untranslatable);
        self.untranslatable.get_or_insert(error);
    }

    /// Why the call ends when no provider was asked: the first refusal of
    /// a translation, as the 400 it is for this request (naming the field),
    /// if that is what stopped the providers that could take it. Not when
    /// one was passed over for a passing reason (its breaker open, its
    /// queue full): that one would have taken the request as it is, and a
    /// 400 would tell the client not to retry a valid request.
    pub(crate) fn nothing_asked(&mut self) -> Option<FailureReason> {
        let passing =
            |s: &Skip| matches!(s.reason, SkipReason::BreakerOpen | SkipReason::QueueFull);
        if !self.attempts.is_empty() || self.skipped.iter().any(passing) {
            return None;
        }
        let e = self.untranslatable.take()?;
        let field = e.request_field().map(str::to_owned);
        let message = match &e {
            ProviderError::Untranslatable {
                provider,
                field,
                reason,
            } => format!(
                "{field}: {reason} (provider {provider} cannot express it and no other provider was left; nothing was sent)"
            ),
            other => other.to_string(),
        };
        Some(FailureReason::Failed {
            class: ErrorClass::InvalidRequest,
            message,
            code: None,
            param: field,
        })
    }

    pub(crate) fn record(
        &mut self,
        target: &Target,
        started: Duration,
        result: AttemptResult,
        sent: bool,
        request_id: Option<String>,
        said: Option<Box<ProviderSaid>>,
    ) {
        crate::metrics::attempt(&target.upstream.series, &result);
        self.attempts.push(Attempt {
            provider: target.provider().to_owned(),
            model: target.model.clone(),
            started,
            ended: self.now(),
            result,
            sent,
            request_id,
            late: false,
            said,
        });
    }

    pub(crate) fn fail(self, reason: FailureReason) -> TaskFailure {
        crate::metrics::call_failed(&self.task.series);
        TaskFailure {
            reason,
            attempts: self.attempts,
            skipped: self.skipped,
            partials: self.partials,
            spent: self.task.budget.spent(),
        }
    }

    /// Waits for a concurrency slot of `upstream` within the budget.
    pub(crate) async fn admit(&mut self, target: &Target, failover: bool) -> Result<Permit, Leave> {
        if let Err(e) = self.task.budget.check() {
            return Err(Leave::Stop(FailureReason::Budget(e)));
        }
        // A slot wait stops when the caller leaves; the reservation below
        // is not cut off half-way (a shared budget's store holds it).
        let acquire = target
            .upstream
            .admission
            .acquire(failover, &self.task.budget);
        let acquired = unless_left(self.task.caller.as_ref(), acquire).await;
        // A slot that came free as the caller left is not used either.
        let Some(acquired) = acquired.filter(|_| !self.task.caller_left()) else {
            return Err(Leave::Stop(FailureReason::CallerLeft));
        };
        match acquired {
            // A shared budget reserves the request in its store now, with
            // the slot held (a reservation is not parked in a queue).
            Ok(permit) => match self.task.budget.reserve().await {
                Ok(()) => Ok(permit),
                Err(e) => Err(Leave::Stop(FailureReason::Budget(e))),
            },
            Err(Refused::QueueFull) => {
                self.skip(target, SkipReason::QueueFull);
                Err(Leave::Next)
            }
            Err(Refused::Budget(e)) => Err(Leave::Stop(FailureReason::Budget(e))),
        }
    }

    /// Charges what a failed attempt's reported usage cost (an answer's
    /// cost is charged and counted with the answer, see [`Run::answered`]).
    pub(crate) fn charge(&self, target: &Target, usd: f64) {
        self.task.budget.charge(usd);
        crate::metrics::cost(&target.upstream.series, usd);
    }

    /// Records an answer: the attempt, its cost against the budget, and —
    /// when the answer is complete — the breaker's success.
    pub(crate) fn answered<T>(
        &mut self,
        target: &Target,
        mut ticket: BreakerTicket,
        started: Duration,
        answer: Answer<T>,
    ) -> Answered<T> {
        if answer.complete {
            ticket.succeeded();
        }
        let result = AttemptResult::Answered;
        self.record(target, started, result, true, answer.request_id, None);
        if let Some(c) = answer.cost {
            self.task.budget.charge(c);
        }
        let (policy, provider) = (&self.task.series, &target.upstream.series);
        crate::metrics::answered(policy, provider, self.now(), answer.cost);
        Answered {
            value: answer.value,
            cost: answer.cost,
            ticket,
        }
    }

    /// Per-call options: the provider's timeouts cut to what remains, and
    /// the budget counting requests at the transport.
    /// The model asked for is the target's.
    pub(crate) fn call_options(&self, target: &Target) -> CallOptions {
        CallOptions::default()
            .with_model(target.model.as_str())
            .with_timeouts(
                target
                    .upstream
                    .config
                    .timeouts
                    .capped(self.task.budget.remaining()),
            )
            .with_send_counter(Arc::new(RequestCounter(self.task.budget.clone())))
            .with_attempt(u32::try_from(self.attempts.len() + 1).unwrap_or(u32::MAX))
    }

    /// Decides what follows a failed attempt: the breaker learns from it,
    /// the policy's table picks the action, and a retry (`Ok`) sleeps its
    /// backoff only if the whole delay fits the budget.
    pub(crate) async fn after_failure(
        &mut self,
        ticket: &mut BreakerTicket,
        err: &ProviderError,
        tries: u32,
        backoff: &mut Backoff,
    ) -> Result<(), Leave> {
        let class = err.class();
        if class == ErrorClass::SendRefused {
            // Our budget, not the provider: nothing for the breaker to learn.
            ticket.give_back();
            let why = self
                .task
                .budget
                .check()
                .err()
                .unwrap_or(Exhausted::Requests);
            return Err(Leave::Stop(FailureReason::Budget(why)));
        }
        ticket.failed(class);
        match self.task.policy.action_for(class) {
            ClassAction::Fail => {
                let said = ProviderSaid::of(err);
                Err(Leave::Stop(FailureReason::Failed {
                    class,
                    message: err.to_string(),
                    code: said.code,
                    param: said.param,
                }))
            }
            ClassAction::Next => Err(Leave::Next),
            ClassAction::Retry if tries >= self.task.policy.max_attempts_per_provider => {
                Err(Leave::Next)
            }
            ClassAction::Retry => {
                let delay = backoff.next_delay(err.retry_after());
                // A wait that cannot finish inside the budget: fail over now.
                let sleep = self.task.budget.sleep_within(delay);
                match unless_left(self.task.caller.as_ref(), sleep).await {
                    Some(slept) => slept.map_err(|_| Leave::Next),
                    None => Err(Leave::Stop(FailureReason::CallerLeft)),
                }
            }
        }
    }
}
