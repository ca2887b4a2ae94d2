//! The [`TaskBudgets`] methods, written once for every [`Backend`]: each
//! loads one task budget and runs a pure transition of [`crate::task`] on
//! it, in the backend's write transaction (so concurrent reservations of
//! one task are serialised on its row in every backend).

use async_trait::async_trait;

use super::{Backend, Job, Store};
use crate::error::LedgerError;
use crate::machine::{Ctx, Step};
use crate::task::{self, Reservation, TaskBudget, TaskBudgets, TaskId, TaskLimits, TaskOpen};

/// A command on one task budget: load it, run `step` on it.
struct OnTask<F> {
    id: TaskId,
    step: F,
}

impl<F, T> Job for OnTask<F>
where
    F: Fn(Option<&TaskBudget>, Ctx<'_>) -> Step<T> + Send + Sync,
    T: Send,
{
    type Output = T;

    async fn plan<S: Store + ?Sized>(&self, store: &mut S, ctx: Ctx<'_>) -> Step<T> {
        let cur = store.load_task(&self.id).await?;
        (self.step)(cur.as_ref(), ctx)
    }
}

fn on_task<F, T>(id: &TaskId, step: F) -> OnTask<F>
where
    F: Fn(Option<&TaskBudget>, Ctx<'_>) -> Step<T> + Send + Sync,
{
    OnTask {
        id: id.clone(),
        step,
    }
}

#[async_trait]
impl<B: Backend> TaskBudgets for B {
    async fn open_task(&self, id: &TaskId, limits: &TaskLimits) -> Result<TaskOpen, LedgerError> {
        let (i, l) = (id.clone(), limits.clone());
        self.run(on_task(id, move |cur, ctx| {
            task::open(cur, &i, &l, ctx.now)
        }))
        .await
    }

    async fn reserve_request(&self, id: &TaskId) -> Result<Reservation, LedgerError> {
        let i = id.clone();
        self.run(on_task(id, move |cur, ctx| task::reserve(cur, &i, ctx.now)))
            .await
    }

    async fn release_requests(&self, id: &TaskId, n: u32) -> Result<TaskBudget, LedgerError> {
        let i = id.clone();
        self.run(on_task(id, move |cur, ctx| {
            task::release(cur, &i, n, ctx.now)
        }))
        .await
    }

    async fn charge_task(&self, id: &TaskId, usd: f64) -> Result<TaskBudget, LedgerError> {
        let i = id.clone();
        self.run(on_task(id, move |cur, ctx| {
            task::charge(cur, &i, usd, ctx.now)
        }))
        .await
    }

    async fn task_budget(&self, id: &TaskId) -> Result<Option<TaskBudget>, LedgerError> {
        self.run(on_task(id, |cur, ctx| task::read(cur, ctx.now)))
            .await
    }
}
