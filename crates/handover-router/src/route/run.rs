//! The bookkeeping of one routed call: attempts, partials, and the walk
//! over providers with retries — shared by the plain and streaming paths.

use std::sync::Arc;
use std::time::Duration;

use handover_providers::{CallOptions, ProviderError};

use super::attempt::{Attempt, AttemptResult, FailureReason, Partial, SkipReason, TaskFailure};
use super::slot::{Slot, breaker_failure};
use super::task::{BudgetGate, Task};
use crate::admission::{Refused, Slot as Permit};
use crate::backoff::Backoff;
use crate::budget::Exhausted;
use crate::config::ClassAction;

/// What to do after one attempt failed.
pub(crate) enum Step {
    /// Try the same provider again (after the backoff already slept).
    Again,
    /// Move on to the next provider.
    Next,
    /// Stop the task.
    Stop(FailureReason),
}

pub(crate) struct Run<'t> {
    pub(crate) task: &'t Task,
    pub(crate) attempts: Vec<Attempt>,
    pub(crate) partials: Vec<Partial>,
}

impl<'t> Run<'t> {
    pub(crate) fn new(task: &'t Task) -> Self {
        Self {
            task,
            attempts: Vec::new(),
            partials: Vec::new(),
        }
    }

    pub(crate) fn now(&self) -> Duration {
        self.task.budget.spent().elapsed
    }

    pub(crate) fn failed_any(&self) -> bool {
        self.attempts
            .iter()
            .any(|a| matches!(a.result, AttemptResult::Failed(_)))
    }

    pub(crate) fn skip(&mut self, slot: &Slot, why: SkipReason) {
        let now = self.now();
        self.attempts.push(Attempt {
            provider: slot.config.name.clone(),
            model: slot.config.model.clone(),
            started: now,
            ended: now,
            result: AttemptResult::Skipped(why),
            sent: false,
            request_id: None,
            late: false,
        });
    }

    pub(crate) fn record(
        &mut self,
        slot: &Slot,
        started: Duration,
        result: AttemptResult,
        sent: bool,
        request_id: Option<String>,
    ) {
        crate::metrics::attempt(&slot.config.name, &result);
        self.attempts.push(Attempt {
            provider: slot.config.name.clone(),
            model: slot.config.model.clone(),
            started,
            ended: self.now(),
            result,
            sent,
            request_id,
            late: false,
        });
    }

    pub(crate) fn fail(self, reason: FailureReason) -> TaskFailure {
        crate::metrics::call_failed(&self.task.policy.name);
        TaskFailure {
            reason,
            attempts: self.attempts,
            partials: self.partials,
            spent: self.task.budget.spent(),
        }
    }

    /// The providers of the policy's chain that may receive `data_class`;
    /// the others are recorded as skipped.
    pub(crate) fn chain(
        &mut self,
        slots: &std::collections::HashMap<String, Arc<Slot>>,
        data_class: Option<&str>,
    ) -> Result<Vec<Arc<Slot>>, FailureReason> {
        let mut allowed = Vec::new();
        for name in &self.task.policy.chain {
            let Some(slot) = slots.get(name) else {
                continue;
            };
            if slot.accepts(data_class) {
                allowed.push(slot.clone());
            } else {
                self.skip(slot, SkipReason::DataClass);
            }
        }
        if allowed.is_empty() {
            return Err(FailureReason::NoAllowedProvider {
                data_class: data_class.unwrap_or_default().to_owned(),
            });
        }
        Ok(allowed)
    }

    /// Waits for a slot of `slot`'s provider within the budget.
    pub(crate) async fn admit(&mut self, slot: &Slot, failover: bool) -> Result<Permit, Step> {
        if let Err(e) = self.task.budget.check() {
            return Err(Step::Stop(FailureReason::Budget(e)));
        }
        match slot.admission.acquire(failover, &self.task.budget).await {
            Ok(permit) => Ok(permit),
            Err(Refused::QueueFull) => {
                self.skip(slot, SkipReason::QueueFull);
                Err(Step::Next)
            }
            Err(Refused::Budget(e)) => Err(Step::Stop(FailureReason::Budget(e))),
        }
    }

    /// Per-call options: the provider's timeouts cut to what remains, and
    /// the budget counting requests at the transport.
    pub(crate) fn call_options(&self, slot: &Slot) -> CallOptions {
        CallOptions::default()
            .with_timeouts(slot.config.timeouts.capped(self.task.budget.remaining()))
            .with_send_gate(Arc::new(BudgetGate(self.task.budget.clone())))
    }

    /// Decides what follows a failed attempt: the breaker learns from it,
    /// the policy's table picks the action, and a retry sleeps its backoff
    /// only if the whole delay fits the budget.
    pub(crate) async fn after_failure(
        &mut self,
        slot: &Slot,
        err: &ProviderError,
        tries: u32,
        backoff: &mut Backoff,
    ) -> Step {
        let class = err.class();
        if class == handover_providers::ErrorClass::SendRefused {
            let why = self
                .task
                .budget
                .check()
                .err()
                .unwrap_or(Exhausted::Requests);
            return Step::Stop(FailureReason::Budget(why));
        }
        match breaker_failure(class) {
            Some(f) => slot.breaker.record_failure(f),
            None => slot.breaker.release_probe(),
        }
        match self.task.policy.action_for(class) {
            ClassAction::Fail => Step::Stop(FailureReason::Failed {
                class,
                message: err.to_string(),
            }),
            ClassAction::Next => Step::Next,
            ClassAction::Retry if tries >= self.task.policy.max_attempts_per_provider => Step::Next,
            ClassAction::Retry => {
                let delay = backoff.next_delay(err.retry_after());
                match self.task.budget.sleep_within(delay).await {
                    Ok(()) => Step::Again,
                    // A wait that cannot finish inside the budget: fail over now.
                    Err(_) => Step::Next,
                }
            }
        }
    }
}
