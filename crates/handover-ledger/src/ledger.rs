//! The [`Ledger`] trait: the one door every business write goes through.

use std::time::Duration;

use async_trait::async_trait;

use crate::clock::Timestamp;
use crate::error::LedgerError;
use crate::identity::{ActionName, Fingerprint, OperationId, OperationRequest, Scope};
use crate::model::{
    AttemptKind, AttemptOutcome, AttemptRecord, Claim, OperationRecord, Owner, State, StateKind,
    Terminal, UnknownInfo,
};
use crate::retention::PurgeReport;

/// How far an unresolved operation blocks other writes, from narrowest to widest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BlockWidth {
    /// Only the operation itself (it answers `unresolved`).
    #[default]
    Operation,
    /// Also every other operation of the same action in the same scope.
    Scope,
    /// Also every other operation of the same action in any scope.
    Action,
}

/// Who is claiming, for how long, and how widely unknown operations block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BeginOptions {
    /// Holder name (executor instance), recorded in the claim.
    pub holder: String,
    /// Lease length; after it a pre-dispatch claim can be taken over.
    pub lease: Duration,
    /// Block width for this action.
    pub block: BlockWidth,
}

impl BeginOptions {
    /// Options with [`BlockWidth::Operation`].
    pub fn new(holder: impl Into<String>, lease: Duration) -> Self {
        Self {
            holder: holder.into(),
            lease,
            block: BlockWidth::Operation,
        }
    }
}

/// The answer to [`Ledger::begin`].
#[derive(Clone, Debug, PartialEq)]
pub enum BeginOutcome {
    /// The caller holds the claim and may dispatch.
    Started(Claim),
    /// Someone else holds it; no result yet.
    InProgress {
        /// Current holder.
        holder: String,
        /// `claimed` or `dispatched`.
        state: StateKind,
        /// When that lease runs out.
        lease_until: Timestamp,
    },
    /// Same identity, different parameters. Nothing changed.
    Conflict {
        /// Fingerprint on record.
        recorded: Fingerprint,
        /// Fingerprint requested.
        requested: Fingerprint,
    },
    /// The recorded outcome (or its tombstone).
    Replayed(Terminal),
    /// The outcome is unknown: writes are blocked.
    Unresolved(UnknownInfo),
    /// Another unresolved operation within the block width blocks this one. Nothing written.
    Suspended {
        /// The blocking operation.
        blocked_by: OperationId,
        /// Its unknown state.
        info: UnknownInfo,
    },
    /// Approval was withdrawn.
    Cancelled {
        /// Why.
        reason: String,
    },
}

/// The answer to [`Ledger::approve`]. Only `Planned` wrote anything.
#[derive(Clone, Debug, PartialEq)]
pub enum ApproveOutcome {
    /// Recorded now: the operation is `planned` with exactly these parameters.
    Planned,
    /// Approved earlier with the same parameters; nothing changed.
    AlreadyApproved {
        /// Where it is now: `planned`, `claimed`, `dispatched` or `unknown`.
        state: StateKind,
    },
    /// Approved earlier with other parameters; nothing changed: the earlier
    /// approval stands and every proposal must match it.
    Conflict {
        /// Fingerprint on record.
        recorded: Fingerprint,
        /// Fingerprint of this approval.
        requested: Fingerprint,
    },
    /// Already decided: the recorded outcome (or its tombstone). Nothing changed.
    Replayed(Terminal),
    /// The approval was withdrawn earlier.
    Cancelled {
        /// Why.
        reason: String,
    },
}

/// Details recorded when marking an operation dispatched.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dispatch {
    /// Executor name (non-empty).
    pub executor: String,
    /// Metadata, e.g. the provider's tool-call id (attempt metadata, never identity).
    pub metadata: Option<serde_json::Value>,
}

/// Why an outcome is unknown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownReport {
    /// Reason (non-empty).
    pub reason: String,
    /// Evidence, e.g. the transport error.
    pub evidence: Option<String>,
    /// Who resolves it.
    pub owner: Owner,
    /// When to look again.
    pub next_check_at: Option<Timestamp>,
}

/// Why a claim is given back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReleaseReason {
    /// Proof that nothing was sent (connect refused, DNS failure). Allowed from
    /// `claimed` or `dispatched`.
    NotSent {
        /// The proof (non-empty).
        evidence: String,
    },
    /// The holder gives up before dispatch. Allowed from `claimed` only.
    Abandoned,
}

/// An operator's or reconciler's decision on an unknown operation.
#[derive(Clone, Debug, PartialEq)]
pub enum ResolvedAs {
    /// The effect happened.
    Confirmed {
        /// The result to record.
        result: serde_json::Value,
    },
    /// The effect did not happen.
    Rejected {
        /// Why (non-empty).
        reason: String,
    },
}

/// A resolution with its evidence and author.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolution {
    /// The decision.
    pub outcome: ResolvedAs,
    /// Evidence (non-empty).
    pub evidence: String,
    /// Who decided (non-empty).
    pub actor: String,
}

/// New bookkeeping for an unknown operation (the reconciler's notes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownUpdate {
    /// New owner.
    pub owner: Owner,
    /// New reason (non-empty).
    pub reason: String,
    /// Next check.
    pub next_check_at: Option<Timestamp>,
    /// A lookup found diverging parameters.
    pub diverged: bool,
}

/// An attempt appended without a claim (reconciler lookups).
#[derive(Clone, Debug, PartialEq)]
pub struct NewAttempt {
    /// Usually [`AttemptKind::Lookup`].
    pub kind: AttemptKind,
    /// Who made it (non-empty).
    pub executor: String,
    /// Outcome class.
    pub outcome: AttemptOutcome,
    /// Evidence.
    pub evidence: Option<String>,
    /// Metadata.
    pub metadata: Option<serde_json::Value>,
    /// When it was sent (a lookup's request), if before it is appended;
    /// `None` (or a later time) is when it is appended.
    pub sent_at: Option<crate::Timestamp>,
}

/// Which due unknown operations [`Ledger::take_due_unknown`] may hand out;
/// all set conditions must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DueFilter {
    /// Only this scope (e.g. a gateway client's own).
    pub scope: Option<Scope>,
    /// Only these actions.
    pub actions: Option<Vec<ActionName>>,
    /// Never these actions (e.g. those another reconciler looks up).
    pub except_actions: Vec<ActionName>,
}

impl DueFilter {
    /// Whether `rec` may be handed out (the reference semantics every backend's query implements).
    pub(crate) fn matches(&self, rec: &OperationRecord) -> bool {
        self.scope.as_ref().is_none_or(|s| *s == rec.id.scope)
            && self
                .actions
                .as_ref()
                .is_none_or(|a| a.contains(&rec.action))
            && !self.except_actions.contains(&rec.action)
    }

    /// The action lists as JSON arrays of names, for SQL binds.
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub(crate) fn action_names(&self) -> (Option<Vec<String>>, Vec<String>) {
        let names = |l: &[ActionName]| l.iter().map(ToString::to_string).collect::<Vec<_>>();
        (
            self.actions.as_deref().map(names),
            names(&self.except_actions),
        )
    }
}

/// Which operations [`Ledger::list`] returns; all set conditions must hold.
/// Results are ordered by `(created_at, scope, key)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// In this state.
    pub state: Option<StateKind>,
    /// Unknown and diverged (`Some(true)`) or not diverged (`Some(false)`).
    pub diverged: Option<bool>,
    /// In this scope.
    pub scope: Option<Scope>,
    /// Of this action.
    pub action: Option<ActionName>,
    /// At least this old: since `unknown.since` for unknown operations, else since `updated_at`.
    pub older_than: Option<Duration>,
    /// Unknown with `next_check_at <= t`.
    pub due_at: Option<Timestamp>,
    /// At most this many.
    pub limit: Option<usize>,
    /// Only operations after this one in list order (oldest first: by
    /// creation, then scope and key): where the previous page ended. An
    /// operation that no longer exists (purged) lists nothing.
    pub after: Option<OperationId>,
}

impl ListFilter {
    /// Whether `rec` matches at `now` (the reference semantics every backend's query implements).
    pub(crate) fn matches(&self, rec: &OperationRecord, now: Timestamp) -> bool {
        let unknown = match &rec.state {
            State::Unknown(info) => Some(info),
            _ => None,
        };
        if self.state.is_some_and(|s| s != rec.state.kind()) {
            return false;
        }
        if let Some(d) = self.diverged
            && unknown.is_some_and(|u| u.diverged) != d
        {
            return false;
        }
        if self.scope.as_ref().is_some_and(|s| *s != rec.id.scope) {
            return false;
        }
        if self.action.as_ref().is_some_and(|a| *a != rec.action) {
            return false;
        }
        if let Some(age) = self.older_than {
            let since = unknown.map_or(rec.updated_at, |u| u.since);
            if since > now.minus(age) {
                return false;
            }
        }
        if let Some(t) = self.due_at
            && unknown.and_then(|u| u.next_check_at).is_none_or(|n| n > t)
        {
            return false;
        }
        true
    }
}

/// The operation ledger. Object-safe: pick the backend at run time and hold
/// an `Arc<dyn Ledger>`.
///
/// Contract for every implementation (checked by the `conformance` suite, cargo feature `conformance`):
/// * `approve` and `begin` each check and write in one atomic step:
///   concurrent approvals of one identity record one plan (the others get
///   `AlreadyApproved` or `Conflict`); concurrent `begin`s get exactly one
///   `Started`.
/// * Every write after a claim is fenced by the claim's epoch and lease; any
///   error changes nothing.
/// * A `dispatched` operation whose lease passed is `unknown` (recorded
///   lazily by the next call that touches it), never claimable again.
/// * Returned values are owned copies; nothing the caller does to them or to
///   its inputs changes what is stored.
/// * If the store cannot be reached the call fails with
///   [`LedgerError::Unavailable`]: no claim, no send.
#[async_trait]
pub trait Ledger: crate::TaskBudgets + Send + Sync + std::fmt::Debug {
    /// Records what the user approved, durably, as `planned` — before any
    /// model proposes anything. From then on every `begin` under this
    /// identity must carry exactly these parameters (else `Conflict`),
    /// whichever model proposes it and whenever. Idempotent: approving the
    /// same parameters again changes nothing; other parameters are a
    /// conflict and never replace the approved ones.
    async fn approve(&self, req: &OperationRequest) -> Result<ApproveOutcome, LedgerError>;
    /// Atomically checks the identity and claims it if it may run now.
    async fn begin(
        &self,
        req: &OperationRequest,
        opts: &BeginOptions,
    ) -> Result<BeginOutcome, LedgerError>;
    /// [`begin`](Self::begin) and, if it answers `Started`, [`mark_dispatched`](Self::mark_dispatched)
    /// on that claim — in one atomic, durable step (one commit instead of
    /// two), for a caller that sends right after claiming. On `Started` the
    /// operation is already `dispatched` (with a pending dispatch attempt):
    /// if the caller then dies before sending, the outcome is `unknown`
    /// once the lease passes, never `planned` — the same as a crash right
    /// after `mark_dispatched`. Every other answer is `begin`'s. An invalid
    /// `dispatch` is refused before anything is claimed.
    async fn begin_dispatched(
        &self,
        req: &OperationRequest,
        opts: &BeginOptions,
        dispatch: Dispatch,
    ) -> Result<BeginOutcome, LedgerError>;
    /// Extends a live claim's lease to `now + lease`.
    async fn renew(&self, claim: &Claim, lease: Duration) -> Result<Claim, LedgerError>;
    /// Records, durably, that the request is about to be sent; call before the first byte.
    /// Appends a `pending` dispatch attempt and returns its id.
    async fn mark_dispatched(
        &self,
        claim: &Claim,
        dispatch: Dispatch,
    ) -> Result<uuid::Uuid, LedgerError>;
    /// Records a definitive success.
    async fn confirm(
        &self,
        claim: &Claim,
        result: serde_json::Value,
        evidence: Option<String>,
    ) -> Result<OperationRecord, LedgerError>;
    /// Records a definitive "not applied".
    async fn reject(
        &self,
        claim: &Claim,
        reason: String,
        evidence: Option<String>,
    ) -> Result<OperationRecord, LedgerError>;
    /// Records that the outcome is unknown (timeout, reset, 5xx, lost response).
    async fn mark_unknown(
        &self,
        claim: &Claim,
        report: UnknownReport,
    ) -> Result<OperationRecord, LedgerError>;
    /// Gives a claim back; the operation returns to `planned`.
    async fn release(
        &self,
        claim: &Claim,
        why: ReleaseReason,
    ) -> Result<OperationRecord, LedgerError>;
    /// Re-claims an unknown operation for a re-send with the same destination key,
    /// only while `first_dispatched_at + window > now` (the destination's
    /// idempotency-key retention). `None` (and no change) otherwise.
    async fn claim_for_resend(
        &self,
        id: &OperationId,
        opts: &BeginOptions,
        window: Duration,
    ) -> Result<Option<Claim>, LedgerError>;
    /// Resolves an unknown operation with evidence; appends an operator attempt.
    async fn resolve(
        &self,
        id: &OperationId,
        resolution: Resolution,
    ) -> Result<OperationRecord, LedgerError>;
    /// Updates the owner, reason, next check and divergence of an unknown operation.
    async fn update_unknown(
        &self,
        id: &OperationId,
        update: UnknownUpdate,
    ) -> Result<OperationRecord, LedgerError>;
    /// Appends an attempt without a claim (e.g. a reconciler lookup). The operation must exist.
    async fn append_attempt(
        &self,
        id: &OperationId,
        attempt: NewAttempt,
    ) -> Result<uuid::Uuid, LedgerError>;
    /// Withdraws approval of a `planned` or `claimed` operation.
    async fn cancel(
        &self,
        id: &OperationId,
        reason: String,
    ) -> Result<OperationRecord, LedgerError>;
    /// The current record.
    async fn get(&self, id: &OperationId) -> Result<Option<OperationRecord>, LedgerError>;
    /// Records matching `filter`.
    async fn list(&self, filter: &ListFilter) -> Result<Vec<OperationRecord>, LedgerError>;
    /// For reconcilers sharing the work (replicas of one service, or clients
    /// of the gateway's pull API): up to `limit` `unknown` operations whose
    /// `next_check_at` has passed, earliest first, each with its next check
    /// moved to `now + hold` (owner, reason and divergence kept) in the same
    /// atomic step, returned as updated. Concurrent callers get disjoint
    /// sets (PostgreSQL skips rows another transaction holds, `FOR UPDATE
    /// SKIP LOCKED`; SQLite and memory serialise writers); one that dies
    /// simply lets `hold` pass and the operation is due again. `hold` must
    /// be positive. Only operations `filter` admits are considered.
    async fn take_due_unknown(
        &self,
        filter: &DueFilter,
        limit: usize,
        hold: Duration,
    ) -> Result<Vec<OperationRecord>, LedgerError>;
    /// The attempt log of one operation, oldest first.
    async fn attempts(&self, id: &OperationId) -> Result<Vec<AttemptRecord>, LedgerError>;
    /// Applies retention: tombstones past the replay window, deletes past the horizon.
    async fn purge(&self) -> Result<PurgeReport, LedgerError>;
    /// Closes the store on a clean shutdown: writes already queued are
    /// committed, then the connections are closed (waiting for those in
    /// use). A SQLite ledger folds its write-ahead log into the main file,
    /// so the file alone holds every record. On SQLite and PostgreSQL
    /// every later call fails with [`LedgerError::Unavailable`]; the memory
    /// ledger has nothing to close. Closing again does nothing.
    async fn close(&self);
}
