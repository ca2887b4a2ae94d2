//! What [`super::Protocol::begin`] answers.

use handover_ledger::{
    Claim, Fingerprint, OperationId, StateKind, Terminal, Timestamp, UnknownInfo,
};

use crate::config::ActionContract;
use crate::gate::PerformOutcome;

/// The answer to [`super::Protocol::begin`].
#[derive(Debug, Clone, PartialEq)]
pub enum Begun {
    /// The door holds the claim: mark it dispatched, call the destination
    /// with the claim's destination key, record what happened.
    Started(Box<Started>),
    /// Nothing may be sent; tell the caller why.
    NotStarted(NotStarted),
}

/// A claim handed to a door, with the contract it is to honour.
#[derive(Debug, Clone, PartialEq)]
pub struct Started {
    /// The claim: epoch (fencing), lease, destination key, attempt number.
    pub claim: Claim,
    /// A re-send of an operation whose outcome is unknown, inside the
    /// destination's idempotency window: send it with the same destination
    /// key (in the contract's header) so the destination deduplicates.
    pub resend: bool,
    /// The action's contract (timeout, idempotency header, lease).
    pub contract: ActionContract,
}

/// Why a begin did not start: in every case nothing was claimed and
/// nothing may be sent.
#[derive(Debug, Clone, PartialEq)]
pub enum NotStarted {
    /// Already decided: the recorded outcome (or its tombstone).
    Replayed(Terminal),
    /// Another holder has the claim.
    InProgress {
        /// Its holder.
        holder: String,
        /// `claimed` or `dispatched`.
        state: StateKind,
        /// When its lease runs out.
        lease_until: Timestamp,
    },
    /// The identity was approved with other parameters.
    Conflict {
        /// Fingerprint on record.
        recorded: Fingerprint,
        /// Fingerprint requested.
        requested: Fingerprint,
    },
    /// The outcome is unknown and no re-send is allowed: writes are blocked.
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
}

impl NotStarted {
    /// Stable name for logs and metrics (the same as the
    /// [`PerformOutcome`] it becomes).
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Self::Replayed(_) => "replayed",
            Self::InProgress { .. } => "in_progress",
            Self::Conflict { .. } => "conflict",
            Self::Unresolved(_) => "unresolved",
            Self::Suspended { .. } => "suspended",
            Self::Cancelled { .. } => "cancelled",
        }
    }
}

impl From<NotStarted> for PerformOutcome {
    fn from(n: NotStarted) -> Self {
        match n {
            NotStarted::Replayed(t) => Self::Replayed(t),
            NotStarted::InProgress {
                holder,
                lease_until,
                ..
            } => Self::InProgress {
                holder,
                lease_until,
            },
            NotStarted::Conflict {
                recorded,
                requested,
            } => Self::Conflict {
                recorded,
                requested,
            },
            NotStarted::Unresolved(info) => Self::Unresolved(info),
            NotStarted::Suspended { blocked_by, info } => Self::Suspended { blocked_by, info },
            NotStarted::Cancelled { reason } => Self::Cancelled { reason },
        }
    }
}
