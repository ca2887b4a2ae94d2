//! The connection cap: `max_connections` slots, and when they are all
//! taken, the slot of the connection idle longest, which is closed.
//!
//! A connection holds its slot from accept to close. Idle means no request
//! in flight: the client has sent nothing since its last response, or
//! nothing at all. A connection with a request in flight (its header
//! begun, its response not finished) is never chosen. The table is locked
//! only when a connection opens or closes; requests change a connection's
//! [`ConnState`] with atomics alone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::io::ConnState;

/// The open connections of one accept loop.
#[derive(Debug)]
pub(super) struct Slots {
    max: usize,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    next_id: u64,
    conns: HashMap<u64, Arc<ConnState>>,
}

/// One connection's place among the open ones: given back when dropped
/// (after the connection closed), unless it was handed to a newer
/// connection when this one was evicted.
#[derive(Debug)]
pub(super) struct Slot {
    slots: Arc<Slots>,
    id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.lock().conns.remove(&self.id);
    }
}

/// What admitting a new connection did.
pub(super) enum Admitted {
    /// A slot, and whether an idle connection was evicted to free it.
    Yes {
        slot: Slot,
        state: Arc<ConnState>,
        evicted: bool,
    },
    /// Every open connection has a request in flight.
    Full,
}

impl Slots {
    pub(super) fn new(max: u32) -> Arc<Self> {
        Arc::new(Self {
            max: max as usize,
            open: Mutex::new(Open::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        // The table stays consistent whatever panicked while holding it:
        // each change is a single insert or remove.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a new connection: a free one, else the one of the open
    /// connection idle longest, which is told to close.
    pub(super) fn admit(self: &Arc<Self>) -> Admitted {
        let mut open = self.lock();
        let evicted = open.conns.len() >= self.max;
        if evicted && !open.evict_idlest() {
            return Admitted::Full;
        }
        let id = open.next_id;
        open.next_id += 1;
        let state = Arc::new(ConnState::new());
        open.conns.insert(id, state.clone());
        Admitted::Yes {
            slot: Slot {
                slots: self.clone(),
                id,
            },
            state,
            evicted,
        }
    }
}

impl Open {
    /// Evicts the connection idle longest and takes its slot; `false` if
    /// none is idle. A connection whose request begins while it is being
    /// chosen is skipped (its [`ConnState::evict`] fails) for the next.
    fn evict_idlest(&mut self) -> bool {
        let mut idle: Vec<(u64, u64)> = self
            .conns
            .iter()
            .filter_map(|(id, s)| s.idle_since().map(|since| (since, *id)))
            .collect();
        idle.sort_unstable();
        for (_, id) in idle {
            if self.conns.get(&id).is_some_and(|s| s.evict()) {
                self.conns.remove(&id);
                return true;
            }
        }
        false
    }
}
