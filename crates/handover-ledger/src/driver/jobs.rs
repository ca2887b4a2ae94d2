//! The ledger's commands as [`Job`]s. Most act on one record: an
//! [`OnRecord`] loads it and hands it to a machine function. The others
//! read more (blockers, lease sweeps, the reconciler's queue).

use std::marker::PhantomData;
use std::time::Duration;

use super::{Job, Store};
use crate::identity::{OperationId, OperationRequest};
use crate::ledger::{BeginOptions, BeginOutcome, BlockWidth, Dispatch, UnknownUpdate};
use crate::machine::{self, Change, Ctx, Effect, Retire, Step};
use crate::model::{Claim, OperationRecord, State};
use crate::retention::PurgeReport;

/// How a single-record command uses its record (a hint for backends).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    /// An unfenced command (operator, reconciler).
    Write,
    /// A claim holder's fenced write: may start from a cached record.
    Holder,
    /// Usually answered without writing (reads, approvals): may be tried
    /// without the row lock.
    Unlocked,
}

/// A command on one operation: load its record, run `step` (a machine
/// function) on it. The answer type is `step`'s.
pub(crate) struct OnRecord<F, T> {
    id: OperationId,
    access: Access,
    step: F,
    answer: PhantomData<fn() -> T>,
}

impl<F, T> OnRecord<F, T>
where
    F: Fn(Option<&OperationRecord>, Ctx<'_>) -> Step<T> + Send + Sync,
    T: Send,
{
    fn with(id: &OperationId, access: Access, step: F) -> Self {
        Self {
            id: id.clone(),
            access,
            step,
            answer: PhantomData,
        }
    }

    /// An unfenced command on `id`.
    pub(crate) fn new(id: &OperationId, step: F) -> Self {
        Self::with(id, Access::Write, step)
    }

    /// A claim holder's command on `id`.
    pub(crate) fn holder(id: &OperationId, step: F) -> Self {
        Self::with(id, Access::Holder, step)
    }

    /// A command on `id` that usually writes nothing or inserts a new identity.
    pub(crate) fn unlocked(id: &OperationId, step: F) -> Self {
        Self::with(id, Access::Unlocked, step)
    }
}

impl<F, T> Job for OnRecord<F, T>
where
    F: Fn(Option<&OperationRecord>, Ctx<'_>) -> Step<T> + Send + Sync,
    T: Send,
{
    type Output = T;

    async fn plan<S: Store + ?Sized>(&self, store: &mut S, ctx: Ctx<'_>) -> Step<T> {
        let cur = store.load(&self.id).await?;
        (self.step)(cur.as_ref(), ctx)
    }

    fn holder_of(&self) -> Option<&OperationId> {
        (self.access == Access::Holder).then_some(&self.id)
    }

    fn loads(&self) -> Option<&OperationId> {
        Some(&self.id)
    }

    fn try_unlocked(&self) -> bool {
        self.access == Access::Unlocked
    }
}

/// Reads one record, recording a due lease expiry.
pub(crate) fn get(
    id: &OperationId,
) -> impl Job<Output = Option<OperationRecord>> + 'static + use<> {
    OnRecord::unlocked(id, machine::get)
}

/// Check-and-claim: the identity's record and, for a block width wider
/// than the operation, the first other unresolved operation within it.
/// With `dispatch`, a claim it takes is marked dispatched in the same step
/// (see [`crate::Ledger::begin_dispatched`]).
pub(crate) struct Begin {
    pub(crate) req: OperationRequest,
    pub(crate) opts: BeginOptions,
    pub(crate) dispatch: Option<Dispatch>,
}

impl Job for Begin {
    type Output = BeginOutcome;

    async fn plan<S: Store + ?Sized>(&self, store: &mut S, ctx: Ctx<'_>) -> Step<BeginOutcome> {
        let id = self.req.id();
        let cur = store.load(id).await?;
        let scope = match self.opts.block {
            BlockWidth::Operation => None,
            BlockWidth::Scope => Some(Some(&id.scope)),
            BlockWidth::Action => Some(None),
        };
        let blocker = match scope {
            Some(scope) => {
                let action = self.req.action();
                store.find_blocker(id, action, scope, ctx.now).await?
            }
            None => None,
        };
        let (cur, blocker) = (cur.as_ref(), blocker.as_ref());
        match &self.dispatch {
            None => machine::begin(cur, blocker, &self.req, &self.opts, ctx),
            Some(d) => {
                let attempt = uuid::Uuid::now_v7();
                machine::begin_dispatched(cur, blocker, &self.req, &self.opts, d, attempt, ctx)
            }
        }
    }

    fn loads(&self) -> Option<&OperationId> {
        Some(self.req.id())
    }

    /// Racing losers and replays write nothing, and a new identity is one
    /// insert — unless a wider block width needs other rows.
    fn try_unlocked(&self) -> bool {
        self.opts.block == BlockWidth::Operation
    }
}

/// `mark_dispatched`, with the claim's block width checked again (see
/// [`crate::Claim::block`]): the claim's record and, for a width wider
/// than the operation, the first other unresolved operation within it.
pub(crate) struct MarkDispatched {
    pub(crate) claim: Claim,
    pub(crate) dispatch: Dispatch,
}

impl Job for MarkDispatched {
    type Output = uuid::Uuid;

    async fn plan<S: Store + ?Sized>(&self, store: &mut S, ctx: Ctx<'_>) -> Step<uuid::Uuid> {
        let id = &self.claim.id;
        let cur = store.load(id).await?;
        let scope = match self.claim.block {
            BlockWidth::Operation => None,
            BlockWidth::Scope => Some(Some(&id.scope)),
            BlockWidth::Action => Some(None),
        };
        let blocker = match (scope, &cur) {
            (Some(scope), Some(rec)) => store.find_blocker(id, &rec.action, scope, ctx.now).await?,
            _ => None,
        };
        let attempt = uuid::Uuid::now_v7();
        machine::mark_dispatched(
            cur.as_ref(),
            blocker.as_ref(),
            &self.claim,
            &self.dispatch,
            attempt,
            ctx,
        )
    }

    fn holder_of(&self) -> Option<&OperationId> {
        Some(&self.claim.id)
    }

    fn loads(&self) -> Option<&OperationId> {
        Some(&self.claim.id)
    }
}

/// The lease-expiry writes due at `ctx.now` for `due`.
fn settle_all(due: &[OperationRecord], ctx: Ctx<'_>) -> Effect {
    let mut effect = Effect::default();
    for rec in due {
        effect.absorb(machine::settle(rec, ctx.now));
    }
    effect
}

/// Records every due lease expiry (before listing, so nothing due is
/// listed as live).
pub(crate) struct SettleDue;

impl Job for SettleDue {
    type Output = ();

    async fn plan<S: Store + ?Sized>(&self, store: &mut S, ctx: Ctx<'_>) -> Step<()> {
        let due = store.due_expired(ctx.now).await?;
        Ok(Change::new(settle_all(&due, ctx), ()))
    }
}

/// Retention: lease expiries first (so nothing due is mistaken for live),
/// then tombstones and deletions.
pub(crate) struct Purge;

impl Job for Purge {
    type Output = PurgeReport;

    async fn plan<S: Store + ?Sized>(&self, store: &mut S, ctx: Ctx<'_>) -> Step<PurgeReport> {
        let due = store.due_expired(ctx.now).await?;
        let effect = Effect {
            retire: Some(Retire {
                tombstone_cutoff: ctx.retention.tombstone_cutoff(ctx.now),
                delete_cutoff: ctx.retention.delete_cutoff(ctx.now),
                tasks_expired: ctx.now,
            }),
            ..settle_all(&due, ctx)
        };
        Ok(Change::new(effect, PurgeReport::default()))
    }

    fn written(&self, _planned: PurgeReport, retired: PurgeReport) -> PurgeReport {
        retired
    }
}

/// For reconcilers sharing the work: up to `limit` due `unknown`
/// operations no other transaction holds, each with its next check moved
/// to `now + hold` (owner, reason and divergence kept).
pub(crate) struct TakeDueUnknown {
    pub(crate) filter: crate::ledger::DueFilter,
    pub(crate) limit: usize,
    pub(crate) hold: Duration,
}

impl Job for TakeDueUnknown {
    type Output = Vec<OperationRecord>;

    async fn plan<S: Store + ?Sized>(
        &self,
        store: &mut S,
        ctx: Ctx<'_>,
    ) -> Step<Vec<OperationRecord>> {
        if self.hold.as_millis() == 0 {
            return Err(crate::error::ValidationError::new("hold", "must be at least 1 ms").into());
        }
        let due = store
            .take_due_unknown(ctx.now, &self.filter, self.limit)
            .await?;
        let mut effect = Effect::default();
        let mut taken = Vec::with_capacity(due.len());
        for rec in &due {
            let State::Unknown(info) = &rec.state else {
                continue;
            };
            let update = UnknownUpdate {
                owner: info.owner,
                reason: info.reason.clone(),
                next_check_at: Some(ctx.now.plus(self.hold)),
                diverged: info.diverged,
            };
            let change = machine::update_unknown(Some(rec), &rec.id, &update, ctx)?;
            effect.extend(change.effect);
            taken.push(change.answer);
        }
        Ok(Change::new(effect, taken))
    }
}
