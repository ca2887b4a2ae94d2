//! Writes made by the claim holder, all fenced by the claim's epoch and lease.

use std::time::Duration;

use super::{
    AttemptFinish, Ctx, Effect, Step, canonical_value, fence, illegal, require_lease,
    require_opt_text, require_text,
};
use crate::error::LedgerError;
use crate::ledger::{Dispatch, ReleaseReason, UnknownReport};
use crate::model::{
    AttemptKind, AttemptOutcome, AttemptRecord, Claim, OperationRecord, Owner, State, UnknownInfo,
};

/// Extends the lease of a live claim (claimed or dispatched).
pub(crate) fn renew(
    cur: Option<&OperationRecord>,
    claim: &Claim,
    lease: Duration,
    ctx: Ctx<'_>,
) -> Step<Claim> {
    if let Err(e) = require_lease(lease) {
        return Step::fail(e);
    }
    let mut rec = match fence(cur, claim, ctx.now, "renew") {
        Ok(r) => r,
        Err(e) => return Step::fail(e),
    };
    let new_until = ctx.now.plus(lease);
    match &mut rec.state {
        State::Claimed { lease_until, .. } | State::Dispatched { lease_until, .. } => {
            *lease_until = new_until;
        }
        _ => return Step::fail(illegal(&rec, "renew")),
    }
    rec.updated_at = ctx.now;
    let mut renewed = claim.clone();
    renewed.lease_until = new_until;
    Step::answer(
        Effect {
            saves: vec![rec],
            ..Effect::default()
        },
        renewed,
    )
}

/// `claimed` → `dispatched`, appending a pending dispatch attempt.
pub(crate) fn mark_dispatched(
    cur: Option<&OperationRecord>,
    claim: &Claim,
    dispatch: Dispatch,
    attempt_id: uuid::Uuid,
    ctx: Ctx<'_>,
) -> Step<uuid::Uuid> {
    if let Err(e) = require_text("executor", &dispatch.executor) {
        return Step::fail(e);
    }
    let metadata = match dispatch.metadata.as_ref() {
        Some(m) => match canonical_value("metadata", m, ctx.limits) {
            Ok(v) => Some(v),
            Err(e) => return Step::fail(e),
        },
        None => None,
    };
    let mut rec = match fence(cur, claim, ctx.now, "mark_dispatched") {
        Ok(r) => r,
        Err(e) => return Step::fail(e),
    };
    let State::Claimed {
        holder,
        epoch,
        lease_until,
    } = &rec.state
    else {
        return Step::fail(illegal(&rec, "mark_dispatched"));
    };
    let epoch = *epoch;
    rec.state = State::Dispatched {
        holder: holder.clone(),
        epoch,
        lease_until: *lease_until,
        dispatched_at: ctx.now,
    };
    rec.first_dispatched_at.get_or_insert(ctx.now);
    rec.dispatch_count += 1;
    rec.updated_at = ctx.now;
    let attempt = AttemptRecord {
        attempt_id,
        id: rec.id.clone(),
        kind: AttemptKind::Dispatch,
        epoch: Some(epoch),
        executor: dispatch.executor,
        destination_key: rec.destination_key.clone(),
        sent_at: ctx.now,
        finished_at: None,
        outcome: AttemptOutcome::Pending,
        evidence: None,
        metadata,
    };
    Step::answer(
        Effect {
            saves: vec![rec],
            attempts: vec![attempt],
            finishes: vec![],
        },
        attempt_id,
    )
}

/// Shared shape of confirm / reject / mark_unknown: fenced, from `dispatched` only.
fn finish_dispatched(
    cur: Option<&OperationRecord>,
    claim: &Claim,
    op: &'static str,
    outcome: AttemptOutcome,
    evidence: Option<String>,
    next: State,
    ctx: Ctx<'_>,
) -> Step<OperationRecord> {
    let mut rec = match fence(cur, claim, ctx.now, op) {
        Ok(r) => r,
        Err(e) => return Step::fail(e),
    };
    if !matches!(rec.state, State::Dispatched { .. }) {
        return Step::fail(illegal(&rec, op));
    }
    rec.state = next;
    rec.updated_at = ctx.now;
    let finish = AttemptFinish {
        id: rec.id.clone(),
        epoch: claim.epoch,
        outcome,
        at: ctx.now,
        evidence,
    };
    Step::answer(
        Effect {
            saves: vec![rec.clone()],
            attempts: vec![],
            finishes: vec![finish],
        },
        rec,
    )
}

/// `dispatched` → `confirmed`.
pub(crate) fn confirm(
    cur: Option<&OperationRecord>,
    claim: &Claim,
    result: &serde_json::Value,
    evidence: Option<String>,
    ctx: Ctx<'_>,
) -> Step<OperationRecord> {
    let result = match canonical_value("result", result, ctx.limits) {
        Ok(v) => v,
        Err(e) => return Step::fail(e),
    };
    if let Err(e) = require_opt_text("evidence", evidence.as_deref()) {
        return Step::fail(e);
    }
    let next = State::Confirmed {
        result,
        evidence: evidence.clone(),
        at: ctx.now,
    };
    finish_dispatched(
        cur,
        claim,
        "confirm",
        AttemptOutcome::Confirmed,
        evidence,
        next,
        ctx,
    )
}

/// `dispatched` → `rejected`.
pub(crate) fn reject(
    cur: Option<&OperationRecord>,
    claim: &Claim,
    reason: String,
    evidence: Option<String>,
    ctx: Ctx<'_>,
) -> Step<OperationRecord> {
    if let Err(e) = require_text("reason", &reason)
        .and_then(|()| require_opt_text("evidence", evidence.as_deref()))
    {
        return Step::fail(e);
    }
    let next = State::Rejected {
        reason,
        evidence: evidence.clone(),
        at: ctx.now,
    };
    finish_dispatched(
        cur,
        claim,
        "reject",
        AttemptOutcome::Rejected,
        evidence,
        next,
        ctx,
    )
}

/// `dispatched` → `unknown`.
pub(crate) fn mark_unknown(
    cur: Option<&OperationRecord>,
    claim: &Claim,
    report: UnknownReport,
    ctx: Ctx<'_>,
) -> Step<OperationRecord> {
    if let Err(e) = require_text("reason", &report.reason)
        .and_then(|()| require_opt_text("evidence", report.evidence.as_deref()))
    {
        return Step::fail(e);
    }
    let next = State::Unknown(UnknownInfo {
        owner: report.owner,
        reason: report.reason,
        since: ctx.now,
        next_check_at: report.next_check_at,
        diverged: false,
    });
    finish_dispatched(
        cur,
        claim,
        "mark_unknown",
        AttemptOutcome::Unknown,
        report.evidence,
        next,
        ctx,
    )
}

/// Gives a claim back. A first claim returns to `planned`; a re-send claim
/// (earlier dispatches exist) returns to `unknown`, because the earlier
/// dispatch may have happened.
pub(crate) fn release(
    cur: Option<&OperationRecord>,
    claim: &Claim,
    why: ReleaseReason,
    ctx: Ctx<'_>,
) -> Step<OperationRecord> {
    if let ReleaseReason::NotSent { evidence } = &why
        && let Err(e) = require_text("evidence", evidence)
    {
        return Step::fail(LedgerError::from(e));
    }
    let mut rec = match fence(cur, claim, ctx.now, "release") {
        Ok(r) => r,
        Err(e) => return Step::fail(e),
    };
    let mut effect = Effect::default();
    match (&rec.state, &why) {
        (State::Claimed { .. }, _) => {}
        (State::Dispatched { .. }, ReleaseReason::NotSent { evidence }) => {
            rec.dispatch_count -= 1;
            if rec.dispatch_count == 0 {
                rec.first_dispatched_at = None;
            }
            effect.finishes.push(AttemptFinish {
                id: rec.id.clone(),
                epoch: claim.epoch,
                outcome: AttemptOutcome::NotSent,
                at: ctx.now,
                evidence: Some(evidence.clone()),
            });
        }
        _ => return Step::fail(illegal(&rec, "release")),
    }
    rec.state = if rec.dispatch_count == 0 {
        State::Planned
    } else {
        State::Unknown(UnknownInfo {
            owner: Owner::Reconciler,
            reason: "re-send claim released; an earlier dispatch is unresolved".to_owned(),
            since: ctx.now,
            next_check_at: Some(ctx.now),
            diverged: false,
        })
    };
    rec.updated_at = ctx.now;
    effect.saves.push(rec.clone());
    Step::answer(effect, rec)
}
