//! Outcome → ledger state: what a door learned from the destination, and
//! who owns an outcome nobody knows.

use handover_ledger::{
    ActionName, AttemptKind, AttemptOutcome, Claim, Epoch, LedgerError, NewAttempt,
    OperationRecord, Owner, ReleaseReason, StateKind, UnknownReport,
};

use super::Protocol;
use crate::config::{ActionContract, defaults};
use crate::error::RouterError;

/// What a door learned from one dispatch (or why it sent nothing).
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    /// The destination definitively applied it; `result` is what it returned.
    Confirmed {
        /// The destination's result (e.g. the created record).
        result: serde_json::Value,
        /// Evidence, e.g. the record's id.
        evidence: Option<String>,
    },
    /// The destination definitively did not apply it.
    Rejected {
        /// Why (non-empty).
        reason: String,
        /// Evidence, e.g. the status line and body.
        evidence: Option<String>,
    },
    /// The request may have reached the destination, but no definitive
    /// answer came back: a timeout, a reset, a 5xx, a lost response.
    Unknown {
        /// Why (non-empty).
        reason: String,
        /// Evidence, e.g. the transport error.
        evidence: Option<String>,
    },
    /// Proof that no byte reached the destination (connection refused, DNS):
    /// the claim is given back and the operation may be sent again.
    NotSent {
        /// The proof (non-empty).
        evidence: String,
    },
    /// The holder gives up before dispatching: the claim is given back.
    Abandoned,
}

impl Report {
    /// Stable name for errors and logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Confirmed { .. } => "confirmed",
            Self::Rejected { .. } => "rejected",
            Self::Unknown { .. } => "unknown",
            Self::NotSent { .. } => "not sent",
            Self::Abandoned => "abandoned",
        }
    }

    /// The operation's outcome once this report is recorded, as
    /// `handover_operations_total` and [`PerformOutcome::as_str`] name it.
    ///
    /// [`PerformOutcome::as_str`]: crate::gate::PerformOutcome::as_str
    fn outcome(&self) -> &'static str {
        match self {
            Self::Confirmed { .. } => "confirmed",
            Self::Rejected { .. } => "rejected",
            Self::Unknown { .. } => "unresolved",
            Self::NotSent { .. } => "not_sent",
            Self::Abandoned => "abandoned",
        }
    }

    /// The attempt that keeps this report as evidence when it came too
    /// late to be recorded (see [`Protocol::record`]); `None` for a report
    /// that says nothing about the destination (not sent, abandoned).
    fn late_attempt(&self, claim: &Claim, refusal: &LedgerError) -> Option<NewAttempt> {
        let (outcome, evidence, result) = match self {
            Self::Confirmed { result, evidence } => {
                (AttemptOutcome::Confirmed, evidence.as_deref(), Some(result))
            }
            Self::Rejected { reason, evidence } => (
                AttemptOutcome::Rejected,
                evidence.as_deref().or(Some(reason.as_str())),
                None,
            ),
            Self::Unknown { reason, evidence } => (
                AttemptOutcome::Unknown,
                evidence.as_deref().or(Some(reason.as_str())),
                None,
            ),
            Self::NotSent { .. } | Self::Abandoned => return None,
        };
        let mut text = format!(
            "late report: the holder of epoch {} reported {} after the ledger had closed \
             this dispatch ({refusal}); a human must review it",
            claim.epoch,
            self.as_str()
        );
        if let Some(e) = evidence {
            text.push_str("; evidence: ");
            text.push_str(e);
        }
        let mut metadata = late_mark(claim.epoch);
        if let Some(result) = result {
            metadata["result"] = result.clone();
        }
        Some(NewAttempt {
            kind: AttemptKind::Dispatch,
            executor: claim.holder.clone(),
            outcome,
            evidence: Some(text),
            metadata: Some(metadata),
            sent_at: None,
        })
    }
}

impl Protocol {
    /// Who owns an unknown operation of this action, and when to look
    /// again (the one rule; see the module docs).
    pub(crate) fn unknown_report(
        &self,
        contract: &ActionContract,
        reason: String,
        evidence: Option<String>,
    ) -> UnknownReport {
        let can_reconcile = contract.lookup.is_some() || contract.idempotency.is_some();
        let next = contract
            .lookup
            .map_or(defaults::CHECK_EVERY, |l| l.check_every);
        UnknownReport {
            reason,
            evidence,
            owner: if can_reconcile {
                Owner::Reconciler
            } else {
                Owner::Review
            },
            next_check_at: can_reconcile.then(|| self.now_plus(next)),
        }
    }

    /// Records what the door learned about the dispatch `claim` made,
    /// fenced by the claim's epoch, and returns the record as it now is.
    ///
    /// If the destination answered definitively but the ledger refuses the
    /// answer itself (e.g. a result number that cannot be recorded
    /// exactly), the operation is recorded `unknown` for a human, with the
    /// evidence; if the ledger could not be used, the operation stays
    /// `dispatched` and its lease expiry makes it `unknown`. Either way it
    /// is never sent again automatically, and the error is
    /// [`RouterError::OutcomeNotRecorded`].
    ///
    /// Counts the door's operation in `handover_operations_total` by what
    /// was recorded (see the module docs).
    pub async fn record(
        &self,
        claim: &Claim,
        action: &ActionName,
        report: Report,
    ) -> Result<OperationRecord, RouterError> {
        let outcome = report.outcome();
        let rec = self.record_uncounted(claim, action, report).await?;
        crate::metrics::operation(self.action_label(action.as_str()), outcome);
        Ok(rec)
    }

    /// [`record`](Self::record) for a dispatch that is not a door's
    /// operation (a reconciler's re-send): not counted as one.
    pub(crate) async fn record_uncounted(
        &self,
        claim: &Claim,
        action: &ActionName,
        report: Report,
    ) -> Result<OperationRecord, RouterError> {
        let what = report.as_str();
        let report_copy = report.clone();
        let ledger = &self.ledger;
        let written = match report {
            Report::Confirmed { result, evidence } => {
                let rec = ledger.confirm(claim, result, evidence).await;
                if let Ok(rec) = &rec {
                    crate::metrics::confirmed_action(
                        self.action_label(action.as_str()),
                        rec.updated_at.saturating_since(rec.created_at),
                    );
                }
                rec
            }
            Report::Rejected { reason, evidence } => ledger.reject(claim, reason, evidence).await,
            Report::Unknown { reason, evidence } => {
                let contract = self.contract(action.as_str());
                let report = self.unknown_report(&contract, reason, evidence);
                ledger.mark_unknown(claim, report).await
            }
            Report::NotSent { evidence } => {
                ledger
                    .release(claim, ReleaseReason::NotSent { evidence })
                    .await
            }
            Report::Abandoned => ledger.release(claim, ReleaseReason::Abandoned).await,
        };
        match written {
            Ok(rec) => Ok(rec),
            Err(source) => {
                if closed(&source) {
                    self.keep_late(claim, action, &report_copy, &source).await;
                }
                Err(self.not_recorded(claim, what, source).await)
            }
        }
    }

    /// A report refused because the dispatch is no longer this claim's —
    /// its lease passed, a newer claim took over, or the operation was
    /// decided meanwhile (a reconciler's lookup, an operator) — still says
    /// what the destination did. It is kept in the attempt log, with the
    /// refusal naming the state the operation is in, so a human reviewing
    /// the operation sees it; the state itself is not changed (a decided
    /// operation stays decided, `docs/decisions.md`, "late outcomes").
    async fn keep_late(
        &self,
        claim: &Claim,
        action: &ActionName,
        report: &Report,
        refusal: &LedgerError,
    ) {
        let Some(attempt) = report.late_attempt(claim, refusal) else {
            return;
        };
        if !self.dispatch_left_open(claim, attempt.outcome).await {
            return;
        }
        tracing::warn!(
            scope = %claim.id.scope, key = %claim.id.key, action = %action,
            report = report.as_str(), refusal = %refusal,
            "a dispatch's outcome arrived after the ledger had closed the dispatch; kept for review"
        );
        crate::metrics::late_outcome(self.action_label(action.as_str()), report.as_str());
        let kept = match self.ledger.append_attempt(&claim.id, attempt).await {
            // A result that cannot be stored (not I-JSON, too large) must
            // not cost the evidence: keep the report without it.
            Err(e) if e.field().is_some() => {
                let mut plain = report.late_attempt(claim, refusal).expect("a late attempt");
                plain.metadata = Some(late_mark(claim.epoch));
                self.ledger.append_attempt(&claim.id, plain).await
            }
            other => other,
        };
        if let Err(e) = kept {
            tracing::warn!(error = %e, "could not keep a late outcome report");
        }
    }

    /// The ledger refused to record `outcome`. A definitive answer that is
    /// itself unrecordable is kept as `unknown` for review (the effect may
    /// well exist).
    async fn not_recorded(
        &self,
        claim: &Claim,
        outcome: &'static str,
        source: LedgerError,
    ) -> RouterError {
        let definitive = matches!(outcome, "confirmed" | "rejected");
        if definitive && source.field().is_some() {
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
}

impl Protocol {
    /// Whether this claim dispatched and its dispatch was closed by
    /// someone else than its own definitive report: by the lease lapsing,
    /// a newer claim, or the holder's own `unknown` / `not sent`. A claim
    /// whose dispatch it already finished as confirmed or rejected is
    /// finishing twice, which changes nothing (not even the attempt log);
    /// a claim that never dispatched has no late answer to keep. A late
    /// report of `outcome` already kept for this epoch is not kept again:
    /// a client retrying (or looping on) its refused report would
    /// otherwise grow the attempt log — and every read of the operation —
    /// without bound.
    async fn dispatch_left_open(&self, claim: &Claim, outcome: AttemptOutcome) -> bool {
        let attempts = match self.ledger.attempts(&claim.id).await {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the attempts of a late outcome");
                return false;
            }
        };
        let kept_already = attempts.iter().any(|a| {
            a.outcome == outcome
                && a.metadata
                    .as_ref()
                    .is_some_and(|m| is_late_mark(m, claim.epoch))
        });
        !kept_already
            && attempts
                .iter()
                .filter(|a| a.kind == AttemptKind::Dispatch && a.epoch == Some(claim.epoch))
                .any(|a| {
                    !matches!(
                        a.outcome,
                        AttemptOutcome::Confirmed | AttemptOutcome::Rejected
                    )
                })
    }
}

/// The metadata that marks an attempt as the late report of `epoch`'s
/// dispatch (its result goes beside it, when it can be stored).
fn late_mark(epoch: Epoch) -> serde_json::Value {
    serde_json::json!({"late_report": true, "epoch": epoch.0})
}

/// Whether `metadata` is [`late_mark`] of `epoch` (with or without a result).
fn is_late_mark(metadata: &serde_json::Value, epoch: Epoch) -> bool {
    metadata["late_report"] == true && metadata["epoch"] == epoch.0
}

/// The refusal of a report whose dispatch is no longer the claim's: the
/// lease passed or a newer claim took over (fencing), or the operation is
/// in a state a dispatch's outcome cannot move (decided meanwhile).
/// (`claimed` or `dispatched` under the same epoch is a door's protocol
/// error, not a late report; so is a report under another holder's claim,
/// which is no report of this dispatch at all.)
fn closed(e: &LedgerError) -> bool {
    (e.is_stale() && !matches!(e, LedgerError::NotHolder { .. }))
        || matches!(e, LedgerError::IllegalTransition { from, .. }
            if !matches!(from, StateKind::Claimed | StateKind::Dispatched))
}
