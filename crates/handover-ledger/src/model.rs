//! Plain data: operation states, records, claims and attempts (DESIGN §2, §4).

use std::fmt;
use std::str::FromStr;

use crate::clock::Timestamp;
use crate::identity::{ActionName, Fingerprint, OperationId};

/// Fencing token: incremented by every successful claim.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct Epoch(pub u64);

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

macro_rules! str_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vdoc])* $variant),+ }

        impl $name {
            /// The stable lowercase name used in storage and output.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = crate::error::ValidationError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok(Self::$variant),)+
                    other => Err(crate::error::ValidationError::new(
                        stringify!($name),
                        format!("unknown value {other:?}"),
                    )),
                }
            }
        }
    };
}

str_enum!(
    /// The name of an operation state, without its data.
    StateKind {
        /// Recorded, not held by anyone.
        Planned => "planned",
        /// Held by an executor under a lease; nothing sent yet.
        Claimed => "claimed",
        /// Durably marked as about to be sent; the effect may happen.
        Dispatched => "dispatched",
        /// The destination confirmed the effect (terminal).
        Confirmed => "confirmed",
        /// The destination definitively did not apply it (terminal).
        Rejected => "rejected",
        /// Outcome not known; writes are blocked until resolved.
        Unknown => "unknown",
        /// Approval withdrawn before dispatch (terminal).
        Cancelled => "cancelled",
    }
);

str_enum!(
    /// Who is responsible for resolving an `unknown` operation.
    Owner {
        /// The automatic reconciler (authoritative lookup).
        Reconciler => "reconciler",
        /// A human review queue.
        Review => "review",
    }
);

str_enum!(
    /// What an attempt was.
    AttemptKind {
        /// A request sent to the destination to perform the action.
        Dispatch => "dispatch",
        /// An authoritative lookup at the destination.
        Lookup => "lookup",
        /// An operator's resolution.
        Operator => "operator",
    }
);

str_enum!(
    /// The outcome class of an attempt.
    AttemptOutcome {
        /// Sent (or about to be); no answer recorded yet.
        Pending => "pending",
        /// The destination confirmed.
        Confirmed => "confirmed",
        /// The destination definitively refused.
        Rejected => "rejected",
        /// No definitive answer.
        Unknown => "unknown",
        /// Proven not sent.
        NotSent => "not_sent",
        /// Lookup found a matching record.
        Found => "found",
        /// Lookup found nothing.
        NotFound => "not_found",
        /// Lookup found a record with other parameters.
        Diverged => "diverged",
        /// The attempt itself failed.
        Error => "error",
    }
);

/// Why and since when an operation's outcome is unknown.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct UnknownInfo {
    /// Who resolves it.
    pub owner: Owner,
    /// Why the outcome is unknown.
    pub reason: String,
    /// When it became unknown.
    pub since: Timestamp,
    /// When the reconciler should look again.
    pub next_check_at: Option<Timestamp>,
    /// A lookup found a record with other parameters: a human must decide.
    pub diverged: bool,
}

/// The reason recorded when a dispatched operation's holder vanished.
pub const LEASE_EXPIRED_AFTER_DISPATCH: &str = "lease expired after dispatch";

/// An operation's state and the data that goes with it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum State {
    /// Recorded, not held.
    Planned,
    /// Held under a lease; nothing sent.
    Claimed {
        /// Who holds it.
        holder: String,
        /// The claim's epoch.
        epoch: Epoch,
        /// When the lease runs out.
        lease_until: Timestamp,
    },
    /// Marked as sent (durably, before the first byte).
    Dispatched {
        /// Who holds it.
        holder: String,
        /// The claim's epoch.
        epoch: Epoch,
        /// When the lease runs out; afterwards the operation is `unknown`.
        lease_until: Timestamp,
        /// When it was marked dispatched.
        dispatched_at: Timestamp,
    },
    /// The destination confirmed (terminal).
    Confirmed {
        /// The recorded result (`null` once tombstoned).
        result: serde_json::Value,
        /// Evidence (e.g. the destination's record id).
        evidence: Option<String>,
        /// When it was decided.
        at: Timestamp,
    },
    /// The destination definitively refused (terminal).
    Rejected {
        /// Why.
        reason: String,
        /// Evidence.
        evidence: Option<String>,
        /// When it was decided.
        at: Timestamp,
    },
    /// Outcome unknown: writes are blocked.
    Unknown(UnknownInfo),
    /// Approval withdrawn before dispatch (terminal).
    Cancelled {
        /// Why.
        reason: String,
        /// When.
        at: Timestamp,
    },
}

impl State {
    /// The state's name.
    pub fn kind(&self) -> StateKind {
        match self {
            Self::Planned => StateKind::Planned,
            Self::Claimed { .. } => StateKind::Claimed,
            Self::Dispatched { .. } => StateKind::Dispatched,
            Self::Confirmed { .. } => StateKind::Confirmed,
            Self::Rejected { .. } => StateKind::Rejected,
            Self::Unknown(_) => StateKind::Unknown,
            Self::Cancelled { .. } => StateKind::Cancelled,
        }
    }

    /// When a terminal state was decided.
    pub fn decided_at(&self) -> Option<Timestamp> {
        match self {
            Self::Confirmed { at, .. } | Self::Rejected { at, .. } | Self::Cancelled { at, .. } => {
                Some(*at)
            }
            _ => None,
        }
    }
}

/// Everything the ledger knows about one operation.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct OperationRecord {
    /// Identity.
    pub id: OperationId,
    /// Action name.
    pub action: ActionName,
    /// Approved parameters (canonical); `None` once tombstoned.
    pub params: Option<serde_json::Value>,
    /// Fingerprint of `{action, params}`; kept in tombstones.
    pub fingerprint: Fingerprint,
    /// Current state.
    pub state: State,
    /// The last epoch issued.
    pub epoch: Epoch,
    /// Destination idempotency key (see [`crate::destination_key`]).
    pub destination_key: String,
    /// When first begun.
    pub created_at: Timestamp,
    /// When last changed.
    pub updated_at: Timestamp,
    /// When first marked dispatched.
    pub first_dispatched_at: Option<Timestamp>,
    /// How many times it was marked dispatched.
    pub dispatch_count: u32,
    /// Params and result were dropped after the replay window.
    pub tombstone: bool,
}

/// Proof of holding an operation. Fields are public so an API can rebuild a
/// claim from `(scope, key, fingerprint, epoch)`; the ledger checks every
/// field that matters against the record (fencing), so a forged or stale
/// claim is refused.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Claim {
    /// Identity.
    pub id: OperationId,
    /// Fingerprint of the approved parameters.
    pub fingerprint: Fingerprint,
    /// Fencing epoch.
    pub epoch: Epoch,
    /// Holder name.
    pub holder: String,
    /// When the lease runs out.
    pub lease_until: Timestamp,
    /// Destination idempotency key to send with the request.
    pub destination_key: String,
    /// 1 + the number of earlier dispatches of this operation.
    pub attempt_number: u32,
    /// How widely an unresolved sibling blocks this claim, checked again
    /// when it is marked dispatched: a sibling that became `unknown` after
    /// the claim was taken stops the send (a door that claims and sends
    /// in two requests leaves time for that). [`BlockWidth::Operation`](crate::BlockWidth::Operation)
    /// for a re-send, whose destination key cannot add an effect.
    #[serde(skip)]
    pub block: crate::ledger::BlockWidth,
}

/// A recorded outcome, as replayed to a retry.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Terminal {
    /// Confirmed, with its result.
    Confirmed {
        /// Recorded result.
        result: serde_json::Value,
        /// Evidence.
        evidence: Option<String>,
        /// When decided.
        at: Timestamp,
    },
    /// Rejected, with its reason.
    Rejected {
        /// Why.
        reason: String,
        /// Evidence.
        evidence: Option<String>,
        /// When decided.
        at: Timestamp,
    },
    /// Past the replay window: only the terminal state is kept.
    Tombstone {
        /// `confirmed` or `rejected`.
        state: StateKind,
        /// When decided.
        at: Timestamp,
    },
}

/// One request to a destination (or a lookup, or an operator decision).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct AttemptRecord {
    /// UUID v7 (sortable by time).
    pub attempt_id: uuid::Uuid,
    /// The operation.
    pub id: OperationId,
    /// What it was.
    pub kind: AttemptKind,
    /// Claim epoch for dispatches.
    pub epoch: Option<Epoch>,
    /// Executor (or actor) name.
    pub executor: String,
    /// Destination idempotency key used.
    pub destination_key: String,
    /// When sent.
    pub sent_at: Timestamp,
    /// When the outcome was recorded.
    pub finished_at: Option<Timestamp>,
    /// Outcome class.
    pub outcome: AttemptOutcome,
    /// Evidence.
    pub evidence: Option<String>,
    /// Free metadata (e.g. the provider's tool-call id).
    pub metadata: Option<serde_json::Value>,
}
