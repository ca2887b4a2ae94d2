//! Outcome → ledger state: what a door learned from the destination, and
//! who owns an outcome nobody knows.

use handover_ledger::{
    ActionName, Claim, LedgerError, OperationRecord, Owner, ReleaseReason, UnknownReport,
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
    pub async fn record(
        &self,
        claim: &Claim,
        action: &ActionName,
        report: Report,
    ) -> Result<OperationRecord, RouterError> {
        let what = report.as_str();
        let ledger = &self.ledger;
        let written = match report {
            Report::Confirmed { result, evidence } => {
                let rec = ledger.confirm(claim, result, evidence).await;
                if let Ok(rec) = &rec {
                    crate::metrics::confirmed_action(
                        action.as_str(),
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
            Err(source) => Err(self.not_recorded(claim, what, source).await),
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
