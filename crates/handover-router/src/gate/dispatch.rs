//! The Rust door's call: for a claim the protocol handed out, mark it
//! dispatched (unless the claim was taken already dispatched), call the application's executor under a timeout, and hand
//! what it said (or did not say) back to the protocol as a [`Report`].

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use handover_ledger::{
    Claim, Dispatch, Ledger, OperationRecord, OperationRequest, State, UnknownReport,
};

use super::executor::{DispatchContext, Executor, ExecutorOutcome};
use super::{PerformOptions, PerformOutcome, WriteGate};
use crate::error::RouterError;
use crate::protocol::{Report, Started};

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
    /// Runs one dispatch for a claim the protocol handed out (not yet
    /// marked dispatched) and records its outcome: a reconciler's re-send,
    /// not counted as a door's operation.
    pub(crate) async fn dispatch(
        &self,
        req: &OperationRequest,
        started: Started,
        executor: &dyn Executor,
        opts: PerformOptions<'_>,
    ) -> Result<PerformOutcome, RouterError> {
        let dispatch = Dispatch {
            executor: self.holder().to_owned(),
            metadata: opts.metadata.cloned(),
        };
        // Durable before the first byte: if this fails, nothing is sent.
        self.protocol()
            .mark_dispatched(&started.claim, dispatch)
            .await?;
        self.call(req, started, executor, opts, false).await
    }

    /// Calls the executor for a claim already marked dispatched and
    /// records its outcome; `counted`: as a door's operation (`perform`).
    pub(crate) async fn call(
        &self,
        req: &OperationRequest,
        started: Started,
        executor: &dyn Executor,
        opts: PerformOptions<'_>,
        counted: bool,
    ) -> Result<PerformOutcome, RouterError> {
        let Started {
            claim, contract, ..
        } = started;
        let protocol = self.protocol();
        let mut guard = DroppedAfterDispatch {
            armed: Some((
                protocol.ledger().clone(),
                claim.clone(),
                protocol.unknown_report(
                    &contract,
                    "caller cancelled after dispatch".into(),
                    Some("perform future dropped".into()),
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
        // The executor is called inside the guarded future, so a panic while
        // it builds its future is caught like one while it runs.
        let call = AssertUnwindSafe(async move { executor.execute(ctx).await }).catch_unwind();
        let report = match tokio::time::timeout(remaining, call).await {
            Ok(Ok(Ok(ExecutorOutcome::Confirmed(result)))) => Report::Confirmed {
                result,
                evidence: None,
            },
            Ok(Ok(Ok(ExecutorOutcome::Rejected { reason, evidence }))) => {
                Report::Rejected { reason, evidence }
            }
            Ok(Ok(Err(e))) if !e.was_sent() => Report::NotSent {
                evidence: given(e.evidence())
                    .unwrap_or("the executor reported nothing sent, without evidence")
                    .to_owned(),
            },
            Ok(Ok(Err(e))) => Report::Unknown {
                reason: "destination outcome unknown".into(),
                evidence: given(e.evidence()).map(str::to_owned),
            },
            Ok(Err(_panic)) => Report::Unknown {
                reason: "executor panicked after dispatch".into(),
                evidence: Some("panic".into()),
            },
            Err(_elapsed) => Report::Unknown {
                reason: "executor timed out after dispatch".into(),
                evidence: Some(format!("no answer within {remaining:?}")),
            },
        };
        let recorded = if counted {
            protocol.record(&claim, req.action(), report.clone()).await
        } else {
            protocol
                .record_uncounted(&claim, req.action(), report.clone())
                .await
        };
        // Recorded (or the ledger refused and lease expiry will take over):
        // nothing left for the drop guard to do.
        guard.armed = None;
        performed(&recorded?, &claim, report)
    }
}

/// An executor's evidence, if it gave any: the ledger refuses blank text,
/// and an `ExecutorError` built from an empty message must still record
/// its outcome (not leave the operation `dispatched` for a whole lease).
fn given(evidence: &str) -> Option<&str> {
    Some(evidence).filter(|e| !e.trim().is_empty())
}

/// What the caller is told about a dispatch the protocol recorded: the
/// recorded form (which every replay returns too), not the executor's own.
fn performed(
    rec: &OperationRecord,
    claim: &Claim,
    report: Report,
) -> Result<PerformOutcome, RouterError> {
    Ok(match (&rec.state, report) {
        (State::Confirmed { result, .. }, _) => PerformOutcome::Confirmed {
            result: result.clone(),
            attempt: claim.attempt_number,
        },
        (
            State::Rejected {
                reason, evidence, ..
            },
            _,
        ) => PerformOutcome::Rejected {
            reason: reason.clone(),
            evidence: evidence.clone(),
        },
        (State::Unknown(info), _) => PerformOutcome::Unresolved(info.clone()),
        (State::Planned, Report::NotSent { evidence }) => PerformOutcome::NotSent { evidence },
        (other, _) => {
            return Err(RouterError::Internal(format!(
                "ledger recorded {} for a dispatch",
                other.kind().as_str()
            )));
        }
    })
}
