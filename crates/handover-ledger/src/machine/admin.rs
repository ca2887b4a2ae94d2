//! Unfenced commands: reads, operator/reconciler decisions, cancellation.

use super::{Ctx, Effect, Step, canonical_value, illegal, require_opt_text, require_text, view};
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
        return Step::answer(Effect::default(), None);
    };
    let (v, settled) = view(rec, ctx.now);
    let mut effect = Effect::default();
    effect.absorb(settled);
    Step::answer(effect, Some(v))
}

/// `unknown` → `confirmed` | `rejected`, with evidence and actor; appends an operator attempt.
pub(crate) fn resolve(
    cur: Option<&OperationRecord>,
    id: &OperationId,
    resolution: Resolution,
    attempt_id: uuid::Uuid,
    ctx: Ctx<'_>,
) -> Step<OperationRecord> {
    let checked = require_text("evidence", &resolution.evidence)
        .and_then(|()| require_text("actor", &resolution.actor))
        .and_then(|()| match &resolution.outcome {
            ResolvedAs::Confirmed { result } => {
                canonical_value("result", result, ctx.limits).map(Some)
            }
            ResolvedAs::Rejected { reason } => require_text("reason", reason).map(|()| None),
        });
    let result = match checked {
        Ok(r) => r,
        Err(e) => return Step::fail(e),
    };
    let rec = match existing(cur, id) {
        Ok(r) => r,
        Err(e) => return Step::fail(e),
    };
    let (mut rec, settled) = view(rec, ctx.now);
    if !matches!(rec.state, State::Unknown(_)) {
        return Step::fail(illegal(&rec, "resolve"));
    }
    let evidence = Some(resolution.evidence.clone());
    let outcome = match resolution.outcome {
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
                reason,
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
        executor: resolution.actor,
        destination_key: rec.destination_key.clone(),
        sent_at: ctx.now,
        finished_at: Some(ctx.now),
        outcome,
        evidence,
        metadata: None,
    });
    Step::answer(effect, rec)
}

/// Updates the bookkeeping of an `unknown` operation (its `since` is kept).
pub(crate) fn update_unknown(
    cur: Option<&OperationRecord>,
    id: &OperationId,
    update: UnknownUpdate,
    ctx: Ctx<'_>,
) -> Step<OperationRecord> {
    if let Err(e) = require_text("reason", &update.reason) {
        return Step::fail(e);
    }
    let rec = match existing(cur, id) {
        Ok(r) => r,
        Err(e) => return Step::fail(e),
    };
    let (mut rec, settled) = view(rec, ctx.now);
    let State::Unknown(info) = &mut rec.state else {
        return Step::fail(illegal(&rec, "update_unknown"));
    };
    info.owner = update.owner;
    info.reason = update.reason;
    info.next_check_at = update.next_check_at;
    info.diverged = update.diverged;
    rec.updated_at = ctx.now;
    let mut effect = Effect::default();
    if let Some(s) = settled {
        effect.finishes.extend(s.finish);
    }
    effect.saves.push(rec.clone());
    Step::answer(effect, rec)
}

/// Appends an unfenced attempt (reconciler lookup) to an existing operation.
pub(crate) fn append_attempt(
    cur: Option<&OperationRecord>,
    id: &OperationId,
    attempt: NewAttempt,
    attempt_id: uuid::Uuid,
    ctx: Ctx<'_>,
) -> Step<uuid::Uuid> {
    let checked = require_text("executor", &attempt.executor)
        .and_then(|()| require_opt_text("evidence", attempt.evidence.as_deref()))
        .and_then(|()| {
            attempt
                .metadata
                .as_ref()
                .map(|m| canonical_value("metadata", m, ctx.limits))
                .transpose()
        });
    let metadata = match checked {
        Ok(m) => m,
        Err(e) => return Step::fail(e),
    };
    let rec = match existing(cur, id) {
        Ok(r) => r,
        Err(e) => return Step::fail(e),
    };
    let (rec, settled) = view(rec, ctx.now);
    let mut effect = Effect::default();
    effect.absorb(settled);
    let pending = attempt.outcome == AttemptOutcome::Pending;
    effect.attempts.push(AttemptRecord {
        attempt_id,
        id: rec.id.clone(),
        kind: attempt.kind,
        epoch: None,
        executor: attempt.executor,
        destination_key: rec.destination_key.clone(),
        sent_at: ctx.now,
        finished_at: (!pending).then_some(ctx.now),
        outcome: attempt.outcome,
        evidence: attempt.evidence,
        metadata,
    });
    Step::answer(effect, attempt_id)
}

/// `planned` | `claimed` (never dispatched) → `cancelled`.
pub(crate) fn cancel(
    cur: Option<&OperationRecord>,
    id: &OperationId,
    reason: String,
    ctx: Ctx<'_>,
) -> Step<OperationRecord> {
    if let Err(e) = require_text("reason", &reason) {
        return Step::fail(e);
    }
    let rec = match existing(cur, id) {
        Ok(r) => r,
        Err(e) => return Step::fail(e),
    };
    let (mut rec, _) = view(rec, ctx.now);
    let cancellable = match rec.state {
        State::Planned => true,
        State::Claimed { .. } => rec.dispatch_count == 0,
        _ => false,
    };
    if !cancellable {
        return Step::fail(illegal(&rec, "cancel"));
    }
    rec.state = State::Cancelled {
        reason,
        at: ctx.now,
    };
    rec.updated_at = ctx.now;
    Step::answer(
        Effect {
            saves: vec![rec.clone()],
            ..Effect::default()
        },
        rec,
    )
}
