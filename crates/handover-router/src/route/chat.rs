//! The non-streaming path.

use handover_providers::{ChatRequest, Provider};

use super::attempt::{AttemptResult, Completion, FailureReason};
use super::run::{Run, Step};
use super::slot::ProbeGuard;
use super::task::Task;
use super::{Router, SkipReason, late};
use crate::backoff::Backoff;
use crate::error::RouterError;

impl Router {
    /// Answers one chat call of `task` through its policy's chain. The
    /// answer comes whole from one provider; failed attempts are reported as
    /// attempts. Fails with [`RouterError::Task`] when no provider answered
    /// within the budget.
    #[tracing::instrument(name = "handover.task.chat", skip_all, fields(task = %task.id, policy = %task.policy.name))]
    pub async fn chat(&self, task: &Task, req: &ChatRequest) -> Result<Completion, RouterError> {
        let mut run = Run::new(task);
        let chain = match run.chain(&self.slots, req.data_class.as_deref()) {
            Ok(chain) => chain,
            Err(reason) => return Err(RouterError::Task(Box::new(run.fail(reason)))),
        };
        let mut budget_out = None;
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
                        budget_out = Some(reason);
                        break 'chain;
                    }
                    Err(_) => {
                        continue 'chain;
                    }
                };
                let started = run.now();
                let opts = run.call_options(&slot);
                let result = match task.policy.hedge_after {
                    None => {
                        let result = slot.provider.chat(req, &opts).await;
                        drop(permit);
                        result
                    }
                    Some(after) => {
                        let (s, r) = (slot.clone(), req.clone());
                        let mut call = tokio::spawn(async move {
                            let result = s.provider.chat(&r, &opts).await;
                            (result, permit)
                        });
                        match tokio::time::timeout(after, &mut call).await {
                            Ok(Ok((result, permit))) => {
                                drop(permit);
                                result
                            }
                            Ok(Err(join)) => std::panic::resume_unwind(join.into_panic()),
                            Err(_waited) => {
                                run.record(&slot, started, AttemptResult::Abandoned, true, None);
                                late::watch(task, &slot, started, call);
                                continue 'chain;
                            }
                        }
                    }
                };
                tries += 1;
                match result {
                    Ok(response) => {
                        slot.breaker.record_success();
                        probe.disarm();
                        run.record(
                            &slot,
                            started,
                            AttemptResult::Answered,
                            true,
                            response.request_id.clone(),
                        );
                        let cost = slot.cost(response.usage.as_ref());
                        if let Some(c) = cost {
                            task.budget.charge(c);
                        }
                        crate::metrics::answered(
                            &task.policy.name,
                            &slot.config.name,
                            run.now(),
                            cost,
                        );
                        return Ok(Completion {
                            provider: slot.config.name.clone(),
                            model: response.model.clone(),
                            usage: response.usage,
                            cost,
                            response,
                            attempts: run.attempts,
                            partials: run.partials,
                            spent: task.budget.spent(),
                        });
                    }
                    Err(e) => {
                        run.record(
                            &slot,
                            started,
                            AttemptResult::Failed(e.class()),
                            e.was_sent(),
                            e.request_id().map(str::to_owned),
                        );
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
        let reason = budget_out
            .or_else(|| task.budget.check().err().map(FailureReason::Budget))
            .unwrap_or(FailureReason::ChainExhausted);
        Err(RouterError::Task(Box::new(run.fail(reason))))
    }
}
