//! How long terminal outcomes are kept (DESIGN §4, retention).
//!
//! A terminal operation (confirmed, rejected, cancelled) replays its full
//! outcome until `decided_at + replay_window`. After that `begin` answers with
//! a tombstone (identity, fingerprint and terminal state only), even before
//! [`crate::Ledger::purge`] has dropped the data. `purge` drops params and
//! results past the replay window and deletes records (and their attempts)
//! past `decided_at + tombstone_horizon`; a retry after that starts afresh.
//! `planned`, `claimed`, `dispatched` and `unknown` records never expire.

use std::time::Duration;

use crate::clock::Timestamp;

/// Retention windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Full replay of terminal outcomes (default 72 h).
    pub replay_window: Duration,
    /// Tombstones are answered until this long after the decision (default 30 days).
    pub tombstone_horizon: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            replay_window: Duration::from_secs(72 * 3600),
            tombstone_horizon: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

impl Retention {
    /// Terminal records decided at or before this instant are past the replay window.
    pub(crate) fn tombstone_cutoff(&self, now: Timestamp) -> Timestamp {
        now.minus(self.replay_window)
    }

    /// Terminal records decided at or before this instant are past the tombstone horizon.
    pub(crate) fn delete_cutoff(&self, now: Timestamp) -> Timestamp {
        now.minus(self.tombstone_horizon)
    }

    /// Whether a decision taken at `at` still replays in full at `now`.
    pub(crate) fn replays(&self, at: Timestamp, now: Timestamp) -> bool {
        at > self.tombstone_cutoff(now)
    }
}

/// What [`crate::Ledger::purge`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PurgeReport {
    /// Records whose params and result were dropped.
    pub tombstoned: u64,
    /// Records deleted (past the tombstone horizon).
    pub deleted: u64,
    /// Task budgets deleted (past their deadline plus grace).
    pub tasks_expired: u64,
}
