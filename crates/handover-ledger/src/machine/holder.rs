//! Writes made by the claim holder, all fenced by the claim's epoch and lease.

use std::time::Duration;

use super::{
    AttemptFinish, Change, Ctx, Effect, Step, answer_opt_text, answer_text, canonical_value, fence,
    illegal, require_lease, require_name,
};
use crate::error::{LedgerError, ValidationError};
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
    require_lease(lease)?;
    let mut rec = fence(cur, claim, ctx.now, "renew")?;
    let new_until = ctx.now.plus(lease);
    match &mut rec.state {
        State::Claimed { lease_until, .. } | State::Dispatched { lease_until, .. } => {
            *lease_until = new_until;
        }
        _ => return Err(illegal(&rec, "renew")),
    }
    rec.updated_at = ctx.now;
    let mut renewed = claim.clone();
    renewed.lease_until = new_until;
    Ok(Change::new(Effect::save(rec), renewed))
}

/// Checks a dispatch's fields; returns its metadata in canonical form.
pub(super) fn validate_dispatch(
    dispatch: &Dispatch,
    ctx: Ctx<'_>,
) -> Result<Option<serde_json::Value>, ValidationError> {
    require_name("executor", &dispatch.executor)?;
    dispatch
        .metadata
        .as_ref()
        .map(|m| canonical_value("metadata", m, ctx.limits))
        .transpose()
}

/// `claimed` → `dispatched`, appending a pending dispatch attempt —
/// unless `blocker`, an operation the backend found within the claim's
/// block width, is `unknown` (or dispatched past its lease): then
/// [`LedgerError::Blocked`] and nothing changes.
pub(crate) fn mark_dispatched(
    cur: Option<&OperationRecord>,
    blocker: Option<&OperationRecord>,
    claim: &Claim,
    dispatch: &Dispatch,
    attempt_id: uuid::Uuid,
    ctx: Ctx<'_>,
) -> Step<uuid::Uuid> {
    let metadata = validate_dispatch(dispatch, ctx)?;
    let mut rec = fence(cur, claim, ctx.now, "mark_dispatched")?;
    let State::Claimed {
        holder,
        epoch,
        lease_until,
    } = &rec.state
    else {
        return Err(illegal(&rec, "mark_dispatched"));
    };
    if let Some(b) = blocker.filter(|b| b.id != rec.id)
        && let Some((info, _)) = super::blocking(b, ctx.now)
    {
        return Err(LedgerError::Blocked {
            id: rec.id.clone(),
            blocked_by: b.id.clone(),
            info: Box::new(info),
        });
    }
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
        executor: dispatch.executor.clone(),
        destination_key: rec.destination_key.clone(),
        sent_at: ctx.now,
        finished_at: None,
        outcome: AttemptOutcome::Pending,
        evidence: None,
        metadata,
    };
    let effect = Effect {
        attempts: vec![attempt],
        ..Effect::save(rec)
    };
    Ok(Change::new(effect, attempt_id))
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
    let mut rec = fence(cur, claim, ctx.now, op)?;
    if !matches!(rec.state, State::Dispatched { .. }) {
        return Err(illegal(&rec, op));
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
    let effect = Effect {
        finishes: vec![finish],
        ..Effect::save(rec.clone())
    };
    Ok(Change::new(effect, rec))
}

/// `dispatched` → `confirmed`.
pub(crate) fn confirm(
    cur: Option<&OperationRecord>,
    claim: &Claim,
    result: &serde_json::Value,
    evidence: Option<&str>,
    ctx: Ctx<'_>,
) -> Step<OperationRecord> {
    let result = canonical_value("result", result, ctx.limits)?;
    let evidence = answer_opt_text("evidence", evidence)?;
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
    reason: &str,
    evidence: Option<&str>,
    ctx: Ctx<'_>,
) -> Step<OperationRecord> {
    let reason = answer_text("reason", reason)?;
    let evidence = answer_opt_text("evidence", evidence)?;
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
    report: &UnknownReport,
    ctx: Ctx<'_>,
) -> Step<OperationRecord> {
    let reason = answer_text("reason", &report.reason)?;
    let evidence = answer_opt_text("evidence", report.evidence.as_deref())?;
    let next = State::Unknown(UnknownInfo {
        owner: report.owner,
        reason,
        since: ctx.now,
        next_check_at: report.next_check_at,
        diverged: false,
    });
    finish_dispatched(
        cur,
        claim,
        "mark_unknown",
        AttemptOutcome::Unknown,
        evidence,
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
    why: &ReleaseReason,
    ctx: Ctx<'_>,
) -> Step<OperationRecord> {
    // The proof comes from the transport's answer (e.g. its error text).
    let proof = match why {
        ReleaseReason::NotSent { evidence } => Some(answer_text("evidence", evidence)?),
        ReleaseReason::Abandoned => None,
    };
    let mut rec = fence(cur, claim, ctx.now, "release")?;
    let mut effect = Effect::default();
    match (&rec.state, why) {
        (State::Claimed { .. }, _) => {}
        (State::Dispatched { .. }, ReleaseReason::NotSent { .. }) => {
            rec.dispatch_count -= 1;
            if rec.dispatch_count == 0 {
                rec.first_dispatched_at = None;
            }
            effect.finishes.push(AttemptFinish {
                id: rec.id.clone(),
                epoch: claim.epoch,
                outcome: AttemptOutcome::NotSent,
                at: ctx.now,
                evidence: proof,
            });
        }
        _ => return Err(illegal(&rec, "release")),
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
    Ok(Change::new(effect, rec))
}
