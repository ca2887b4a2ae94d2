//! What [`super::WriteGate::perform`] tells the caller.

use handover_ledger::{Fingerprint, OperationId, Terminal, Timestamp, UnknownInfo};

/// The typed answer of one `perform`. Only [`PerformOutcome::Confirmed`]
/// and a replayed confirmation mean the effect happened; `Unresolved` means
/// nobody knows yet, and must never be shown to a user as success or failure.
#[derive(Debug, Clone, PartialEq)]
pub enum PerformOutcome {
    /// Executed now and confirmed by the destination.
    Confirmed {
        /// The destination's result as recorded (canonical form): exactly
        /// what every later replay returns.
        result: serde_json::Value,
        /// Which dispatch this was (1 = first, 2 = a re-send with the same key).
        attempt: u32,
    },
    /// Executed now and definitively rejected by the destination.
    Rejected {
        /// Why.
        reason: String,
        /// Evidence.
        evidence: Option<String>,
    },
    /// Already decided earlier: the recorded outcome; nothing was executed.
    Replayed(Terminal),
    /// Another executor holds the claim; nothing was executed.
    InProgress {
        /// Its holder.
        holder: String,
        /// When its lease runs out.
        lease_until: Timestamp,
    },
    /// The identity was approved with other parameters (in the ledger, or
    /// by the [`KeyPolicy`](super::KeyPolicy)'s approved parameters): refused,
    /// nothing claimed or executed, the approved parameters are unchanged.
    Conflict {
        /// Fingerprint of the approved parameters.
        recorded: Fingerprint,
        /// Fingerprint of the proposed ones.
        requested: Fingerprint,
    },
    /// The outcome is unknown (now or from an earlier attempt): nothing more
    /// was executed; the owner and reason say who resolves it.
    Unresolved(UnknownInfo),
    /// Another operation with an unknown outcome blocks this one.
    Suspended {
        /// The blocking operation.
        blocked_by: OperationId,
        /// Its state.
        info: UnknownInfo,
    },
    /// Approval was withdrawn.
    Cancelled {
        /// Why.
        reason: String,
    },
    /// The executor proved nothing was sent (e.g. connection refused); the
    /// claim was released and the operation may be performed again.
    NotSent {
        /// The proof.
        evidence: String,
    },
}

impl PerformOutcome {
    /// True only when the effect is known to have happened (now or before).
    pub fn is_confirmed(&self) -> bool {
        matches!(
            self,
            Self::Confirmed { .. } | Self::Replayed(Terminal::Confirmed { .. })
        ) || matches!(self, Self::Replayed(Terminal::Tombstone { state, .. }) if state.as_str() == "confirmed")
    }

    /// Stable name for logs and metrics.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Confirmed { .. } => "confirmed",
            Self::Rejected { .. } => "rejected",
            Self::Replayed(_) => "replayed",
            Self::InProgress { .. } => "in_progress",
            Self::Conflict { .. } => "conflict",
            Self::Unresolved(_) => "unresolved",
            Self::Suspended { .. } => "suspended",
            Self::Cancelled { .. } => "cancelled",
            Self::NotSent { .. } => "not_sent",
        }
    }
}
