//! The crate's error type. Callers classify errors with methods
//! ([`LedgerError::is_unavailable`], [`LedgerError::is_stale`],
//! [`LedgerError::field`]), never by reading messages.

use std::borrow::Cow;

use crate::identity::{Fingerprint, OperationId};
use crate::model::{Epoch, StateKind};
use crate::task::TaskId;

/// Bad input: names the field and says precisely what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid {field}: {reason}")]
pub struct ValidationError {
    field: Cow<'static, str>,
    reason: String,
}

impl ValidationError {
    /// A validation error for `field`.
    pub fn new(field: impl Into<Cow<'static, str>>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The offending field (`"scope"`, `"key"`, `"action"`, `"params"`, `"result"`, …).
    pub fn field(&self) -> &str {
        &self.field
    }

    /// What is wrong with it.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// Everything a ledger call can fail with. Any error means the call changed
/// nothing (apart from lazily recording a lease expiry that had already
/// happened).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// Bad input; see [`ValidationError::field`].
    #[error(transparent)]
    Validation(#[from] ValidationError),
    /// The operation was never begun (or was deleted after its tombstone horizon).
    #[error("operation {id} was never begun")]
    NotFound {
        /// The identity asked for.
        id: OperationId,
    },
    /// No live task budget of that identity (never opened, or expired).
    #[error("task {id} has no budget (never opened, or expired)")]
    TaskNotFound {
        /// The task asked for.
        id: TaskId,
    },
    /// The claim's parameters differ from the approved ones.
    #[error(
        "parameters for operation {id} differ from the recorded ones (recorded {recorded}, given {given})"
    )]
    ParamsMismatch {
        /// The identity.
        id: OperationId,
        /// Fingerprint on record.
        recorded: Fingerprint,
        /// Fingerprint presented.
        given: Fingerprint,
    },
    /// The claim was superseded by a newer claim (fencing).
    #[error(
        "stale claim on operation {id}: epoch {given} is not its current claim (epoch {current})"
    )]
    StaleEpoch {
        /// The identity.
        id: OperationId,
        /// Epoch presented.
        given: Epoch,
        /// Latest epoch issued.
        current: Epoch,
    },
    /// The claim of this epoch is someone else's: the write names the
    /// current epoch but another holder. An epoch is a small counter that
    /// anyone who can read the record sees, so it fences stale holders
    /// only together with the holder's name.
    #[error("operation {id}: the claim of epoch {epoch} is held by {holder}, not by {given}")]
    NotHolder {
        /// The identity.
        id: OperationId,
        /// The claim's epoch.
        epoch: Epoch,
        /// Who holds it.
        holder: String,
        /// Who presented it.
        given: String,
    },
    /// The claim's lease ran out before this write.
    #[error("lease of epoch {epoch} on operation {id} expired")]
    LeaseExpired {
        /// The identity.
        id: OperationId,
        /// The claim's epoch.
        epoch: Epoch,
    },
    /// The operation's state does not allow this command.
    #[error("operation {id} is {from}; cannot {op}")]
    IllegalTransition {
        /// The identity.
        id: OperationId,
        /// Current state.
        from: StateKind,
        /// The refused command (`"confirm"`, `"mark_dispatched"`, …).
        op: &'static str,
    },
    /// The claim may not be sent: another operation within its block
    /// width became `unknown` after it was taken. Nothing was recorded;
    /// the claim lapses at its lease (or is given back).
    #[error(
        "operation {id} may not be sent: operation {blocked_by} of the same action has an unknown outcome"
    )]
    Blocked {
        /// The identity.
        id: OperationId,
        /// The unresolved operation that blocks it.
        blocked_by: OperationId,
        /// Its unknown state (owner, reason, next check).
        info: Box<crate::model::UnknownInfo>,
    },
    /// The store cannot be reached or did not commit: fail closed.
    #[error("ledger store unavailable while {context}: {message}")]
    Unavailable {
        /// What the ledger was doing.
        context: &'static str,
        /// The backend's description.
        message: String,
    },
    /// The store returned data this version cannot interpret.
    #[error("corrupt ledger data: {message}")]
    Corrupt {
        /// What was wrong.
        message: String,
    },
}

impl LedgerError {
    /// The store is unreachable or did not commit; nothing may be sent.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }

    /// The caller's claim does not hold (superseded, expired, or never
    /// the caller's): record nothing, send nothing.
    pub fn is_stale(&self) -> bool {
        matches!(
            self,
            Self::StaleEpoch { .. } | Self::LeaseExpired { .. } | Self::NotHolder { .. }
        )
    }

    /// Another unresolved operation blocks sending this one (see
    /// [`LedgerError::Blocked`]); nothing may be sent.
    pub fn is_blocked(&self) -> bool {
        matches!(self, Self::Blocked { .. })
    }

    /// For validation errors, the offending field.
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::Validation(v) => Some(v.field()),
            _ => None,
        }
    }

    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub(crate) fn unavailable(context: &'static str, e: impl std::fmt::Display) -> Self {
        Self::Unavailable {
            context,
            message: e.to_string(),
        }
    }

    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub(crate) fn corrupt(message: impl Into<String>) -> Self {
        Self::Corrupt {
            message: message.into(),
        }
    }
}
