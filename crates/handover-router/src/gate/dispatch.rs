//! From a held claim to a recorded outcome: mark dispatched (durably, before
//! the executor runs), call the executor under a timeout, and record what it
//! said — or `unknown` for anything that is not a definitive answer.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use handover_ledger::{
    Claim, Dispatch, Ledger, OperationRequest, Owner, ReleaseReason, State, UnknownReport,
};

use super::executor::{DispatchContext, Executor, ExecutorError, ExecutorOutcome};
use super::{PerformOptions, PerformOutcome, WriteGate};
use crate::config::{ActionContract, defaults};
use crate::error::RouterError;

/// What came of calling the executor.
enum Answer {
    Returned(Result<ExecutorOutcome, ExecutorError>),
    Panicked,
    TimedOut(std::time::Duration),
}

/// If the caller drops `perform` after the dispatch was recorded, the
/// outcome is unknown: record it at once instead of waiting for the lease.
struct DroppedAfterDispatch {
    armed: Option<(Arc<dyn Ledger>, Claim, UnknownReport)>,
}

impl Drop for DroppedAfterDispatch {
    fn drop(&mut self) {
        if let Some((ledger, claim, report)) = self.armed.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            // Best effort: if this fails, lease expiry turns the dispatched
            // operation into `unknown` anyway.
            rt.spawn(async move {
                let _ = ledger.mark_unknown(&claim, report).await;
            });
        }
    }
}

impl WriteGate {
    /// Who owns an unknown operation of this action, and when to look again.
    fn unknown_report(
        &self,
        contract: &ActionContract,
        reason: &str,
        evidence: String,
    ) -> UnknownReport {
        let can_reconcile = contract.lookup.is_some() || contract.idempotency.is_some();
        let next = contract
            .lookup
            .map_or(defaults::CHECK_EVERY, |l| l.check_every);
        UnknownReport {
            reason: reason.to_owned(),
            evidence: Some(evidence),
            owner: if can_reconcile {
                Owner::Reconciler
            } else {
                Owner::Review
            },
            next_check_at: can_reconcile.then(|| self.now_plus(next)),
        }
    }

    /// Runs one dispatch for a held claim and records its outcome.
    pub(crate) async fn dispatch(
        &self,
        req: &OperationRequest,
        claim: Claim,
        contract: &ActionContract,
        executor: &dyn Executor,
        opts: PerformOptions<'_>,
    ) -> Result<PerformOutcome, RouterError> {
        let dispatch = Dispatch {
            executor: self.holder.clone(),
            metadata: opts.metadata.cloned(),
        };
        // Durable before the first byte: if this fails, nothing is sent.
        self.ledger.mark_dispatched(&claim, dispatch).await?;
        let mut guard = DroppedAfterDispatch {
            armed: Some((
                self.ledger.clone(),
                claim.clone(),
                self.unknown_report(
                    contract,
                    "caller cancelled after dispatch",
                    "perform future dropped".into(),
                ),
            )),
        };
        let remaining = opts
            .budget
            .map_or(contract.timeout, |b| b.attempt_timeout(contract.timeout));
        let ctx = DispatchContext {
            operation: req.id().clone(),
            action: req.action().clone(),
            params: req.params(),
            destination_key: claim.destination_key.clone(),
            idempotency_header: contract.idempotency.as_ref().map(|i| i.header.clone()),
            attempt: claim.attempt_number,
            epoch: claim.epoch,
            remaining,
        };
        let call = AssertUnwindSafe(executor.execute(ctx)).catch_unwind();
        let answer = match tokio::time::timeout(remaining, call).await {
            Ok(Ok(answer)) => Answer::Returned(answer),
            Ok(Err(_panic)) => Answer::Panicked,
            Err(_elapsed) => Answer::TimedOut(remaining),
        };
        let outcome = self.record(req, &claim, contract, answer).await;
        // Recorded (or the ledger refused and lease expiry will take over):
        // nothing left for the drop guard to do.
        guard.armed = None;
        outcome
    }

    /// Records what the executor said (or did not say) about one dispatch.
    async fn record(
        &self,
        req: &OperationRequest,
        claim: &Claim,
        contract: &ActionContract,
        answer: Answer,
    ) -> Result<PerformOutcome, RouterError> {
        let (reason, evidence) = match answer {
            Answer::TimedOut(remaining) => (
                "executor timed out after dispatch",
                format!("no answer within {remaining:?}"),
            ),
            Answer::Panicked => ("executor panicked after dispatch", "panic".into()),
            Answer::Returned(Err(e)) if !e.was_sent() => {
                return self.record_not_sent(claim, e).await;
            }
            Answer::Returned(Err(e)) => ("destination outcome unknown", e.evidence().to_owned()),
            Answer::Returned(Ok(ExecutorOutcome::Confirmed(result))) => {
                return self.record_confirmed(req, claim, result).await;
            }
            Answer::Returned(Ok(ExecutorOutcome::Rejected { reason, evidence })) => {
                return match self
                    .ledger
                    .reject(claim, reason.clone(), evidence.clone())
                    .await
                {
                    Ok(_) => Ok(PerformOutcome::Rejected { reason, evidence }),
                    Err(source) => Err(self.not_recorded(claim, "rejected", source).await),
                };
            }
        };
        self.record_unknown(claim, contract, reason, evidence).await
    }

    async fn record_confirmed(
        &self,
        req: &OperationRequest,
        claim: &Claim,
        result: serde_json::Value,
    ) -> Result<PerformOutcome, RouterError> {
        let rec = match self.ledger.confirm(claim, result.clone(), None).await {
            Ok(rec) => rec,
            Err(source) => return Err(self.not_recorded(claim, "confirmed", source).await),
        };
        crate::metrics::confirmed_action(
            req.action().as_str(),
            rec.updated_at.saturating_since(rec.created_at),
        );
        // The recorded (canonical) form, which every replay returns too, not
        // the executor's own value.
        let result = match rec.state {
            State::Confirmed { result, .. } => result,
            _ => result,
        };
        Ok(PerformOutcome::Confirmed {
            result,
            attempt: claim.attempt_number,
        })
    }

    /// The destination answered definitively but the ledger refused to
    /// record the answer. If the answer itself is invalid (e.g. a number
    /// that cannot be recorded exactly), the operation is recorded `unknown`
    /// at once, for a human with the evidence; otherwise (ledger
    /// unavailable, claim lost) lease expiry makes it `unknown`. Either way
    /// it is never executed again automatically.
    async fn not_recorded(
        &self,
        claim: &Claim,
        outcome: &'static str,
        source: handover_ledger::LedgerError,
    ) -> RouterError {
        if source.field().is_some() {
            let report = UnknownReport {
                reason: format!(
                    "the destination answered {outcome}, but its answer cannot be recorded"
                ),
                evidence: Some(source.to_string()),
                owner: Owner::Review,
                next_check_at: None,
            };
            if let Err(e) = self.ledger.mark_unknown(claim, report).await {
                tracing::warn!(error = %e, "could not record an unrecordable answer as unknown");
            }
        }
        RouterError::OutcomeNotRecorded { outcome, source }
    }

    async fn record_unknown(
        &self,
        claim: &Claim,
        contract: &ActionContract,
        reason: &str,
        evidence: String,
    ) -> Result<PerformOutcome, RouterError> {
        let report = self.unknown_report(contract, reason, evidence);
        match self.ledger.mark_unknown(claim, report).await {
            Ok(rec) => match rec.state {
                State::Unknown(info) => Ok(PerformOutcome::Unresolved(info)),
                other => Err(RouterError::Internal(format!(
                    "ledger recorded {} instead of unknown",
                    other.kind().as_str()
                ))),
            },
            Err(source) => Err(RouterError::OutcomeNotRecorded {
                outcome: "unknown",
                source,
            }),
        }
    }

    async fn record_not_sent(
        &self,
        claim: &Claim,
        e: ExecutorError,
    ) -> Result<PerformOutcome, RouterError> {
        let evidence = e.evidence().to_owned();
        self.ledger
            .release(
                claim,
                ReleaseReason::NotSent {
                    evidence: evidence.clone(),
                },
            )
            .await
            .map_err(|source| RouterError::OutcomeNotRecorded {
                outcome: "not sent",
                source,
            })?;
        Ok(PerformOutcome::NotSent { evidence })
    }
}
