//! Records a SQL backend last committed, kept to save a read on the hot
//! path (a holder's `mark_dispatched` / `confirm` right after its own
//! `begin`). Entries are hints, never truth: each backend checks them
//! before it trusts them (SQLite: `PRAGMA data_version` says no other
//! connection wrote; PostgreSQL: every write is conditional on the cached
//! row version), and forgets them on any doubt.

use std::collections::HashMap;

use crate::identity::OperationId;

/// Entries kept before the cache is simply emptied.
const LIMIT: usize = 16_384;

/// A bounded map from identity to a cached entry `E`, valid while its
/// `stamp` (what the backend checks its entries against) is unchanged.
#[derive(Debug)]
pub(crate) struct RecordCache<E> {
    entries: HashMap<OperationId, E>,
    stamp: Option<i64>,
}

impl<E> Default for RecordCache<E> {
    fn default() -> Self {
        Self {
            entries: HashMap::new(),
            stamp: None,
        }
    }
}

impl<E: Clone> RecordCache<E> {
    /// The entry for `id`, if one is kept.
    pub(crate) fn get(&self, id: &OperationId) -> Option<E> {
        self.entries.get(id).cloned()
    }

    /// Whether an entry for `id` is kept.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub(crate) fn contains(&self, id: &OperationId) -> bool {
        self.entries.contains_key(id)
    }

    /// Keeps `entry` for `id` (emptying the cache first when it is full).
    pub(crate) fn put(&mut self, id: OperationId, entry: E) {
        if self.entries.len() >= LIMIT && !self.entries.contains_key(&id) {
            self.entries.clear();
        }
        self.entries.insert(id, entry);
    }

    /// Drops the entry for `id`.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn forget(&mut self, id: &OperationId) {
        self.entries.remove(id);
    }

    /// Drops everything, including the stamp.
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.stamp = None;
    }

    /// Keeps the entries only if `stamp` is the one they were kept under.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub(crate) fn validate(&mut self, stamp: i64) {
        if self.stamp != Some(stamp) {
            self.entries.clear();
            self.stamp = Some(stamp);
        }
    }
}
