//! A budget drawn from a task budget in the ledger's store, shared by every
//! call of one user task in every process that uses the store.
//!
//! The transport counts requests synchronously, right before it writes one,
//! so the store cannot be asked there. Instead the chain walk reserves one
//! request in the store before each try ([`Budget::reserve`]); that
//! reservation is this process's allowance, and the transport's counter
//! takes from it as from a local budget. A request that provably never left
//! keeps its reservation for the next try; when the call ends
//! ([`Budget::settle`]) unused reservations are given back and the cost of
//! the call is charged to the store. A process that dies holding a
//! reservation loses it: the task can only be under-spent, never over-spent.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use handover_ledger::{Reservation, TaskBudget, TaskBudgets, TaskExhausted, TaskId};

use super::{Budget, Exhausted};

/// How long settling a call (giving back reservations, charging its cost)
/// may wait for the store: the call's own deadline may already be past.
const SETTLE_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug)]
pub(super) struct Shared {
    store: Arc<dyn TaskBudgets>,
    id: TaskId,
    /// Requests the store had reserved when this budget joined the task.
    base_requests: u32,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// The store's last answer.
    last: TaskBudget,
    /// Cost charged here but not yet in the store.
    owed: f64,
    /// Why the store refused a reservation, once it has.
    refused: Option<Exhausted>,
}

fn exhausted(why: TaskExhausted) -> Exhausted {
    match why {
        TaskExhausted::Deadline => Exhausted::Deadline,
        TaskExhausted::Requests => Exhausted::Requests,
        TaskExhausted::Cost => Exhausted::Cost,
    }
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn refused(&self) -> Result<(), Exhausted> {
        self.state().refused.map_or(Ok(()), Err)
    }

    pub(super) fn owe(&self, usd: f64) {
        self.state().owed += usd;
    }

    pub(super) fn base_requests(&self) -> u32 {
        self.base_requests
    }

    fn refuse(&self, why: Exhausted) -> Exhausted {
        self.state().refused = Some(why);
        why
    }
}

impl Budget {
    /// A budget drawn from the task budget `view` (as the store answered
    /// when the call opened or joined the task): the store's deadline and
    /// cost ceiling, and requests reserved in the store one by one.
    pub(crate) fn shared(store: Arc<dyn TaskBudgets>, view: TaskBudget) -> Self {
        let mut budget = Self::new(view.time_left(), 0, view.max_cost);
        budget.max_requests = view.max_requests;
        *budget.cost.get_mut().unwrap_or_else(|p| p.into_inner()) = view.cost;
        budget.shared = Some(Shared {
            store,
            id: view.id.clone(),
            base_requests: view.requests,
            state: Mutex::new(State {
                last: view,
                owed: 0.0,
                refused: None,
            }),
        });
        budget
    }

    /// The task budget as the store last reported it (shared budgets only).
    pub fn task_budget(&self) -> Option<TaskBudget> {
        let shared = self.shared.as_ref()?;
        Some(shared.state().last.clone())
    }

    /// Makes sure one request may be sent: for a shared budget, reserves it
    /// in the store unless an earlier reservation is still unused. A local
    /// budget has nothing to do. Waits for the store at most until the
    /// deadline; an unreachable store refuses (fail closed).
    pub(crate) async fn reserve(&self) -> Result<(), Exhausted> {
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        shared.refused()?;
        if self.allowance.load(Ordering::Acquire) > self.sent.load(Ordering::Acquire) {
            return Ok(());
        }
        let answer = match self.within(shared.store.reserve_request(&shared.id)).await {
            Err(deadline) => return Err(deadline),
            Ok(Err(e)) => {
                tracing::warn!(task = %shared.id, error = %e, "task budget store: cannot reserve");
                return Err(Exhausted::StoreUnavailable);
            }
            Ok(Ok(answer)) => answer,
        };
        match answer {
            Reservation::Reserved(view) => {
                self.allowance.fetch_add(1, Ordering::AcqRel);
                shared.state().last = view;
                Ok(())
            }
            Reservation::Exhausted(why, view) => {
                shared.state().last = view;
                Err(shared.refuse(exhausted(why)))
            }
        }
    }

    /// Charges the cost owed so far to the store, and nothing else: a
    /// stream's cost is known only when it ends, after its call settled,
    /// and another call of the same task may hold a reservation by then
    /// (settling again would give it back). A local budget has nothing to
    /// do. A store that does not answer keeps the cost owed, as in
    /// [`Budget::settle`].
    pub(crate) async fn pay(&self) {
        let Some(shared) = &self.shared else {
            return;
        };
        let owed = std::mem::take(&mut shared.state().owed);
        if owed <= 0.0 {
            return;
        }
        let charged = tokio::time::timeout(SETTLE_WAIT, shared.store.charge_task(&shared.id, owed));
        match charged.await {
            Ok(Ok(view)) => shared.state().last = view,
            Ok(Err(e)) => {
                shared.owe(owed);
                tracing::warn!(task = %shared.id, error = %e, "task budget store: cannot charge");
            }
            Err(_) => {
                shared.owe(owed);
                tracing::warn!(task = %shared.id, "task budget store: charging timed out");
            }
        }
    }

    /// Ends a call on a shared budget: gives back the reservations it did
    /// not use and charges its cost to the store. A store that does not
    /// answer loses the reservations (the task is under-spent, never
    /// over-spent) and keeps the cost owed for the next settle.
    pub(crate) async fn settle(&self) {
        let Some(shared) = &self.shared else {
            return;
        };
        let sent = self.sent.load(Ordering::Acquire);
        let unused = self
            .allowance
            .swap(sent, Ordering::AcqRel)
            .saturating_sub(sent);
        let owed = std::mem::take(&mut shared.state().owed);
        let store = &shared.store;
        let settled = tokio::time::timeout(SETTLE_WAIT, async {
            let mut last = None;
            if unused > 0 {
                last = Some(store.release_requests(&shared.id, unused).await?);
            }
            if owed > 0.0 {
                last = Some(store.charge_task(&shared.id, owed).await?);
            }
            Ok::<_, handover_ledger::LedgerError>(last)
        })
        .await;
        match settled {
            Ok(Ok(last)) => {
                if let Some(view) = last {
                    shared.state().last = view;
                }
            }
            Ok(Err(e)) => {
                shared.owe(owed);
                tracing::warn!(task = %shared.id, error = %e, "task budget store: cannot settle");
            }
            Err(_) => {
                shared.owe(owed);
                tracing::warn!(task = %shared.id, "task budget store: settling timed out");
            }
        }
    }
}
