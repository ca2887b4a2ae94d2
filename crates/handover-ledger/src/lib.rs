//! The Handover operation ledger: the durable record that makes "sent but
//! unconfirmed" a real, blocking state.
//!
//! Every business write in Handover goes through a [`Ledger`]:
//! [`Ledger::approve`] records what the user approved (optional: the first
//! `begin` records it otherwise); [`Ledger::begin`] atomically checks an
//! operation's identity `(scope, key)` and claims it; the holder marks it [`dispatched`](Ledger::mark_dispatched)
//! *before* sending a byte, then records `confirmed`, `rejected` or
//! `unknown`. A retry, a reconnect or a fallback model that re-proposes the
//! same action gets the recorded outcome replayed — or, while the outcome is
//! unknown, a refusal — never a second execution.
//!
//! How it fits: the router's write gate drives this trait; the CLI reads and
//! resolves operations through it. Semantics live in a pure state machine
//! (no I/O) shared by every backend:
//! * [`MemoryLedger`] — tests and demos, not durable;
//! * `SqliteLedger` — the embedded default (one file, WAL, `synchronous=FULL`,
//!   group commit; cargo feature `sqlite`, on by default);
//! * `PostgresLedger` — one ledger shared by many replicas (row locks,
//!   `INSERT … ON CONFLICT`, epoch fencing; cargo feature `postgres`),
//!   same machine and the same `conformance` suite (cargo feature
//!   `conformance`).
//!
//! The same store keeps **task budgets** ([`TaskBudgets`], a supertrait of
//! [`Ledger`]): one budget per user task that every replica draws from.
//!
//! See `docs/ledger.md` for states, guarantees and what is not guaranteed.

#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod cache;
mod clock;
mod driver;
mod error;
mod identity;
mod ijson;
mod jcs;
mod ledger;
mod machine;
mod memory;
mod model;
#[cfg(feature = "postgres")]
mod postgres;
mod retention;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod row;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod schema;
#[cfg(feature = "sqlite")]
mod sqlite;
mod task;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod task_row;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use clock::{Clock, ManualClock, SystemClock, Timestamp};
pub use error::{LedgerError, ValidationError};
pub use identity::{
    ActionName, Fingerprint, Key, Limits, MAX_IDENT_BYTES, MAX_JSON_DEPTH, MAX_TEXT_BYTES,
    OperationId, OperationRequest, Scope, TaskName, destination_key,
};
pub use ijson::{MAX_EXACT_INTEGER, validate_json_text};
pub use jcs::to_string as canonical_text;
pub use ledger::{
    ApproveOutcome, BeginOptions, BeginOutcome, BlockWidth, Dispatch, DueFilter, Ledger,
    ListFilter, NewAttempt, ReleaseReason, Resolution, ResolvedAs, UnknownReport, UnknownUpdate,
};
pub use machine::RESEND_CLAIM_LAPSED;
pub use memory::MemoryLedger;
pub use model::{
    AttemptKind, AttemptOutcome, AttemptRecord, Claim, Epoch, LEASE_EXPIRED_AFTER_DISPATCH,
    OperationRecord, Owner, State, StateKind, Terminal, UnknownInfo,
};
#[cfg(feature = "postgres")]
pub use postgres::{PostgresLedger, PostgresOptions};
pub use retention::{PurgeReport, Retention};
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteLedger, SqliteOptions};
pub use task::{Reservation, TaskBudget, TaskBudgets, TaskExhausted, TaskId, TaskLimits, TaskOpen};
