//! Records this ledger last committed, for the holder's next write.
//!
//! A holder's `mark_dispatched` / `confirm` usually follows its own `begin`
//! on the same ledger instance, so the record it needs is the one this
//! instance just wrote. With it the command skips its `SELECT … FOR
//! UPDATE`; the write is conditional on the cached row version (`UPDATE …
//! WHERE version = $v`), so a stale entry (another replica wrote since)
//! matches nothing and the command is re-run the normal way. An answer that
//! writes nothing is never given from the cache. Entries are hints, never
//! truth.

use std::sync::Mutex;

use crate::cache::RecordCache;
use crate::identity::OperationId;
use crate::model::{OperationRecord, State};

/// A record and the row version it was committed with.
pub(super) type Versioned = (OperationRecord, i64);

/// The crate's [`RecordCache`], shared by this ledger's concurrent calls.
#[derive(Debug, Default)]
pub(super) struct Cache(Mutex<RecordCache<Versioned>>);

impl Cache {
    pub(super) fn get(&self, id: &OperationId) -> Option<Versioned> {
        self.0.lock().ok().and_then(|c| c.get(id))
    }

    /// Remembers committed writes; only claims in flight are worth keeping
    /// (holder commands act on nothing else).
    pub(super) fn put(&self, written: Vec<Versioned>) {
        let Ok(mut c) = self.0.lock() else {
            return;
        };
        for (rec, v) in written {
            if matches!(rec.state, State::Claimed { .. } | State::Dispatched { .. }) {
                c.put(rec.id.clone(), (rec, v));
            } else {
                c.forget(&rec.id);
            }
        }
    }

    pub(super) fn forget(&self, id: &OperationId) {
        if let Ok(mut c) = self.0.lock() {
            c.forget(id);
        }
    }

    pub(super) fn clear(&self) {
        if let Ok(mut c) = self.0.lock() {
            c.clear();
        }
    }
}
