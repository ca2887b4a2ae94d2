//! The backend conformance suite: one set of scenarios every [`Ledger`]
//! implementation must pass (memory, SQLite, and PostgreSQL when it lands).
//!
//! Each scenario is an `async fn` taking a factory that builds a fresh,
//! empty ledger from a [`Setup`] (a [`ManualClock`] the scenario drives,
//! retention windows and limits). [`conformance_tests!`](crate::conformance_tests)
//! expands to one `#[tokio::test]` per scenario, so a backend's test file is:
//!
//! ```ignore
//! mod sqlite {
//!     use handover_ledger::conformance::{Setup, Subject};
//!     async fn make(setup: Setup) -> Subject { /* open a fresh file */ }
//!     handover_ledger::conformance_tests!(make);
//! }
//! ```
//!
//! Scenarios panic (with a message) when a backend deviates.

mod approval;
mod dispatch;
mod errors;
mod holder;
mod lifecycle;
mod list;
mod resolution;
mod tasks;
mod time;
mod unknown;
mod validation;

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

pub use approval::{
    approval_binds_parameters, approval_in_unknown_and_cancelled,
    concurrent_approvals_record_one_plan, numbers_are_recorded_exactly,
};
pub use dispatch::{
    a_resend_in_progress_blocks_its_siblings, begin_dispatched_claims_and_dispatches,
    begin_dispatched_races_one_winner, block_width_is_checked_again_at_dispatch,
};
pub use errors::{
    finish_invalid_result_changes_nothing, finish_mismatched_params_changes_nothing,
    finish_unknown_identity_changes_nothing, second_finish_cannot_overwrite, stale_epoch_refused,
};
pub use holder::another_holder_cannot_write_under_the_epoch;
pub use lifecycle::{
    attempt_log, conflict_after_completion, member_order_irrelevant, mutation_cannot_change_stored,
    other_scope_and_other_key_are_independent, reject_is_replayed, release_not_sent_and_abandoned,
    seed_timeline,
};
pub use list::list_pages_with_after;
pub use resolution::{
    cancel_before_dispatch_only, claim_for_resend_window, resolve_needs_actor_and_evidence,
};
pub use tasks::{
    task_budget_concurrent_reservations_never_exceed, task_budget_cost_deadline_expiry_and_purge,
    task_budget_open_join_and_policy_mismatch,
};
pub use time::{
    lease_expiry_after_dispatch, lease_expiry_before_dispatch, renew_extends_lease,
    resend_claim_lapse_returns_to_unknown, retention_replay_tombstone_purge,
};
pub use unknown::{
    list_unknown_with_owner_and_age, suspended_by_block_width, take_due_unknown_filters,
    take_due_unknown_leases,
};
pub use validation::{
    identifier_boundaries, long_names_and_texts_are_bounded, nul_in_text, params_boundaries,
};

use crate::{
    BeginOptions, BeginOutcome, Claim, Dispatch, Ledger, Limits, ManualClock, OperationRecord,
    OperationRequest, Retention, Timestamp,
};

/// Start of every scenario's clock.
pub const T0: Timestamp = Timestamp::from_millis(1_700_000_000_000);

/// What a factory is given.
#[derive(Clone, Debug)]
pub struct Setup {
    /// The scenario's clock; the ledger must read time from it.
    pub clock: ManualClock,
    /// Retention windows to use.
    pub retention: Retention,
    /// Limits to use.
    pub limits: Limits,
}

/// A fresh ledger plus whatever must live as long as it (e.g. a temp dir).
pub struct Subject {
    /// The ledger under test.
    pub ledger: Arc<dyn Ledger>,
    /// Dropped after the scenario.
    pub guard: Box<dyn Any + Send>,
}

impl Subject {
    /// A subject with nothing to keep alive.
    pub fn new(ledger: Arc<dyn Ledger>) -> Self {
        Self {
            ledger,
            guard: Box::new(()),
        }
    }
}

pub(crate) struct Env {
    pub(crate) clock: ManualClock,
    pub(crate) ledger: Arc<dyn Ledger>,
    _guard: Box<dyn Any + Send>,
}

pub(crate) async fn env<F, Fut>(make: F, retention: Retention) -> Env
where
    F: Fn(Setup) -> Fut,
    Fut: Future<Output = Subject>,
{
    let clock = ManualClock::new(T0);
    let s = make(Setup {
        clock: clock.clone(),
        retention,
        limits: Limits::default(),
    })
    .await;
    Env {
        clock,
        ledger: s.ledger,
        _guard: s.guard,
    }
}

pub(crate) const LEASE: Duration = Duration::from_secs(30);

pub(crate) fn req(scope: &str, key: &str, params: serde_json::Value) -> OperationRequest {
    OperationRequest::new(scope, key, "create_shipment", &params, &Limits::default())
        .expect("valid request")
}

pub(crate) fn opts(holder: &str) -> BeginOptions {
    BeginOptions::new(holder, LEASE)
}

pub(crate) fn started(o: BeginOutcome) -> Claim {
    match o {
        BeginOutcome::Started(c) => c,
        other => panic!("expected started, got {other:?}"),
    }
}

impl Env {
    pub(crate) async fn begin(&self, r: &OperationRequest, holder: &str) -> BeginOutcome {
        self.ledger.begin(r, &opts(holder)).await.expect("begin")
    }

    pub(crate) async fn start(&self, r: &OperationRequest, holder: &str) -> Claim {
        started(self.begin(r, holder).await)
    }

    pub(crate) async fn dispatch(&self, c: &Claim) {
        self.ledger
            .mark_dispatched(
                c,
                Dispatch {
                    executor: c.holder.clone(),
                    metadata: None,
                },
            )
            .await
            .expect("mark_dispatched");
    }

    /// Begun and dispatched.
    pub(crate) async fn in_flight(&self, r: &OperationRequest) -> Claim {
        let c = self.start(r, "exec-a").await;
        self.dispatch(&c).await;
        c
    }

    pub(crate) async fn get(&self, r: &OperationRequest) -> Option<OperationRecord> {
        self.ledger.get(r.id()).await.expect("get")
    }

    /// Record and attempt log, to prove a refused call changed nothing.
    pub(crate) async fn snapshot(
        &self,
        r: &OperationRequest,
    ) -> (Option<OperationRecord>, Vec<crate::AttemptRecord>) {
        let rec = self.get(r).await;
        let attempts = self.ledger.attempts(r.id()).await.expect("attempts");
        (rec, attempts)
    }
}

/// Expands to one `#[tokio::test]` per conformance scenario, each calling
/// `$make(setup).await` for a fresh ledger. Use it inside a module named
/// after the backend (`mod sqlite { … }`).
///
/// `conformance_tests!(make, enabled = ready)` first calls `ready()` in every
/// test and returns early when it is `false` (a backend whose server is not
/// configured, e.g. PostgreSQL without `HANDOVER_TEST_POSTGRES_URL`).
#[macro_export]
macro_rules! conformance_tests {
    ($make:path) => {
        $crate::conformance_tests!($make, enabled = $crate::conformance::always);
    };
    ($make:path, enabled = $enabled:path) => {
        $crate::conformance_tests!(@each $make, $enabled;
            seed_timeline, conflict_after_completion, second_finish_cannot_overwrite,
            finish_unknown_identity_changes_nothing, finish_mismatched_params_changes_nothing,
            finish_invalid_result_changes_nothing, other_scope_and_other_key_are_independent,
            member_order_irrelevant, mutation_cannot_change_stored, identifier_boundaries,
            params_boundaries, nul_in_text, lease_expiry_before_dispatch, lease_expiry_after_dispatch,
            stale_epoch_refused, renew_extends_lease, retention_replay_tombstone_purge,
            list_unknown_with_owner_and_age, suspended_by_block_width, take_due_unknown_leases, take_due_unknown_filters,
            cancel_before_dispatch_only, resolve_needs_actor_and_evidence,
            claim_for_resend_window, release_not_sent_and_abandoned, attempt_log,
            reject_is_replayed, resend_claim_lapse_returns_to_unknown,
            approval_binds_parameters, approval_in_unknown_and_cancelled,
            concurrent_approvals_record_one_plan, numbers_are_recorded_exactly,
            task_budget_open_join_and_policy_mismatch,
            task_budget_concurrent_reservations_never_exceed,
            task_budget_cost_deadline_expiry_and_purge,
            begin_dispatched_claims_and_dispatches, begin_dispatched_races_one_winner,
            block_width_is_checked_again_at_dispatch, long_names_and_texts_are_bounded,
            list_pages_with_after, a_resend_in_progress_blocks_its_siblings,
            another_holder_cannot_write_under_the_epoch
        );
    };
    (@each $make:path, $enabled:path; $($name:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                if !$enabled() {
                    return;
                }
                $crate::conformance::$name($make).await;
            }
        )+
    };
}

/// Every backend without a server to configure is always enabled (see
/// [`conformance_tests!`](crate::conformance_tests)).
#[doc(hidden)]
pub fn always() -> bool {
    true
}
