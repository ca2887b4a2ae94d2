//! Unfenced commands: reads, operator/reconciler decisions, cancellation.

use super::{
    Change, Ctx, Effect, Step, answer_opt_text, answer_text, canonical_value, illegal,
    require_name, require_text, view,
};
use crate::error::LedgerError;
use crate::identity::OperationId;
use crate::ledger::{NewAttempt, Resolution, ResolvedAs, UnknownUpdate};
use crate::model::{AttemptKind, AttemptOutcome, AttemptRecord, OperationRecord, State};

fn existing<'a>(
    cur: Option<&'a OperationRecord>,
    id: &OperationId,
) -> Result<&'a OperationRecord, LedgerError> {
    cur.ok_or_else(|| LedgerError::NotFound { id: id.clone() })
}

/// Reads a record, recording a lease expiry if one is due.
pub(crate) fn get(cur: Option<&OperationRecord>, ctx: Ctx<'_>) -> Step<Option<OperationRecord>> {
    let Some(rec) = cur else {
        return Ok(Change::answer(None));
    };
    let (v, settled) = view(rec, ctx.now);
    let mut effect = Effect::default();
    effect.absorb(settled);
    Ok(Change::new(effect, Some(v)))
}

/// `unknown` → `confirmed` | `rejected`, with evidence and actor; appends an operator attempt.
pub(crate) fn resolve(
    cur: Option<&OperationRecord>,
    id: &OperationId,
    resolution: &Resolution,
    attempt_id: uuid::Uuid,
    ctx: Ctx<'_>,
) -> Step<OperationRecord> {
    require_text("evidence", &resolution.evidence)?;
    require_name("actor", &resolution.actor)?;
    let result = match &resolution.outcome {
        ResolvedAs::Confirmed { result } => Some(canonical_value("result", result, ctx.limits)?),
        ResolvedAs::Rejected { reason } => {
            require_text("reason", reason)?;
            None
        }
    };
    let (mut rec, settled) = view(existing(cur, id)?, ctx.now);
    if !matches!(rec.state, State::Unknown(_)) {
        return Err(illegal(&rec, "resolve"));
    }
    let evidence = Some(resolution.evidence.clone());
    let outcome = match &resolution.outcome {
        ResolvedAs::Confirmed { .. } => {
            rec.state = State::Confirmed {
                result: result.unwrap_or(serde_json::Value::Null),
                evidence: evidence.clone(),
                at: ctx.now,
            };
            AttemptOutcome::Confirmed
        }
        ResolvedAs::Rejected { reason } => {
            rec.state = State::Rejected {
                reason: reason.clone(),
                evidence: evidence.clone(),
                at: ctx.now,
            };
            AttemptOutcome::Rejected
        }
    };
    rec.updated_at = ctx.now;
    let mut effect = Effect::default();
    if let Some(s) = settled {
        effect.finishes.extend(s.finish);
    }
    effect.saves.push(rec.clone());
    effect.attempts.push(AttemptRecord {
        attempt_id,
        id: rec.id.clone(),
        kind: AttemptKind::Operator,
        epoch: None,
        executor: resolution.actor.clone(),
        destination_key: rec.destination_key.clone(),
        sent_at: ctx.now,
        finished_at: Some(ctx.now),
        outcome,
        evidence,
        metadata: None,
    });
    Ok(Change::new(effect, rec))
}

/// Updates the bookkeeping of an `unknown` operation (its `since` is kept).
pub(crate) fn update_unknown(
    cur: Option<&OperationRecord>,
    id: &OperationId,
    update: &UnknownUpdate,
    ctx: Ctx<'_>,
) -> Step<OperationRecord> {
    // The reconciler's note, often quoting the destination's answer.
    let reason = answer_text("reason", &update.reason)?;
    let (mut rec, settled) = view(existing(cur, id)?, ctx.now);
    let State::Unknown(info) = &mut rec.state else {
        return Err(illegal(&rec, "update_unknown"));
    };
    info.owner = update.owner;
    info.reason = reason;
    info.next_check_at = update.next_check_at;
    info.diverged = update.diverged;
    rec.updated_at = ctx.now;
    let mut effect = Effect::default();
    if let Some(s) = settled {
        effect.finishes.extend(s.finish);
    }
    effect.saves.push(rec.clone());
    Ok(Change::new(effect, rec))
}

/// Appends an unfenced attempt (reconciler lookup) to an existing operation.
pub(crate) fn append_attempt(
    cur: Option<&OperationRecord>,
    id: &OperationId,
    attempt: &NewAttempt,
    attempt_id: uuid::Uuid,
    ctx: Ctx<'_>,
) -> Step<uuid::Uuid> {
    require_name("executor", &attempt.executor)?;
    // A lookup's evidence is what the destination answered.
    let evidence = answer_opt_text("evidence", attempt.evidence.as_deref())?;
    let metadata = attempt
        .metadata
        .as_ref()
        .map(|m| canonical_value("metadata", m, ctx.limits))
        .transpose()?;
    let (rec, settled) = view(existing(cur, id)?, ctx.now);
    let mut effect = Effect::default();
    effect.absorb(settled);
    let pending = attempt.outcome == AttemptOutcome::Pending;
    effect.attempts.push(AttemptRecord {
        attempt_id,
        id: rec.id.clone(),
        kind: attempt.kind,
        epoch: None,
        executor: attempt.executor.clone(),
        destination_key: rec.destination_key.clone(),
        sent_at: attempt.sent_at.map_or(ctx.now, |t| t.min(ctx.now)),
        finished_at: (!pending).then_some(ctx.now),
        outcome: attempt.outcome,
        evidence,
        metadata,
    });
    Ok(Change::new(effect, attempt_id))
}

/// `planned` | `claimed` (never dispatched) → `cancelled`.
pub(crate) fn cancel(
    cur: Option<&OperationRecord>,
    id: &OperationId,
    reason: &str,
    ctx: Ctx<'_>,
) -> Step<OperationRecord> {
    require_text("reason", reason)?;
    let (mut rec, _) = view(existing(cur, id)?, ctx.now);
    let cancellable = match rec.state {
        State::Planned => true,
        State::Claimed { .. } => rec.dispatch_count == 0,
        _ => false,
    };
    if !cancellable {
        return Err(illegal(&rec, "cancel"));
    }
    rec.state = State::Cancelled {
        reason: reason.to_owned(),
        at: ctx.now,
    };
    rec.updated_at = ctx.now;
    Ok(Change::new(Effect::save(rec.clone()), rec))
}
