//! `approve` (record the plan), `begin` (check-and-claim) and `claim_for_resend`.

use std::time::Duration;

use super::{Change, Ctx, Effect, Step, illegal, require_lease, require_name, view};
use crate::error::{LedgerError, ValidationError};
use crate::identity::{OperationId, OperationRequest, destination_key};
use crate::ledger::{ApproveOutcome, BeginOptions, BeginOutcome, BlockWidth, Dispatch};
use crate::model::{Claim, Epoch, OperationRecord, State, Terminal};

fn validate_opts(opts: &BeginOptions) -> Result<(), ValidationError> {
    require_name("holder", &opts.holder)?;
    require_lease(opts.lease)
}

/// Takes a new claim on `rec` (epoch + 1) and returns the record and the claim.
fn claim(rec: &mut OperationRecord, opts: &BeginOptions, ctx: Ctx<'_>) -> Claim {
    rec.epoch = Epoch(rec.epoch.0 + 1);
    let lease_until = ctx.now.plus(opts.lease);
    rec.state = State::Claimed {
        holder: opts.holder.clone(),
        epoch: rec.epoch,
        lease_until,
    };
    rec.updated_at = ctx.now;
    Claim {
        id: rec.id.clone(),
        fingerprint: rec.fingerprint,
        epoch: rec.epoch,
        holder: opts.holder.clone(),
        lease_until,
        destination_key: rec.destination_key.clone(),
        attempt_number: rec.dispatch_count + 1,
        block: opts.block,
    }
}

/// The `planned` record of a new identity.
pub(crate) fn planned(req: &OperationRequest, ctx: Ctx<'_>) -> OperationRecord {
    OperationRecord {
        id: req.id().clone(),
        action: req.action().clone(),
        params: Some(req.params()),
        fingerprint: req.fingerprint(),
        state: State::Planned,
        epoch: Epoch(0),
        destination_key: destination_key(req.id()),
        created_at: ctx.now,
        updated_at: ctx.now,
        first_dispatched_at: None,
        dispatch_count: 0,
        tombstone: false,
    }
}

/// The recorded outcome of a terminal record as a retry sees it: in full
/// inside the replay window, a tombstone after it. `None` if not terminal
/// (cancellation is answered on its own).
pub(crate) fn replay(rec: &OperationRecord, ctx: Ctx<'_>) -> Option<Terminal> {
    let (State::Confirmed { at, .. } | State::Rejected { at, .. }) = &rec.state else {
        return None;
    };
    if rec.tombstone || !ctx.retention.replays(*at, ctx.now) {
        return Some(Terminal::Tombstone {
            state: rec.state.kind(),
            at: *at,
        });
    }
    Some(match &rec.state {
        State::Confirmed {
            result,
            evidence,
            at,
        } => Terminal::Confirmed {
            result: result.clone(),
            evidence: evidence.clone(),
            at: *at,
        },
        State::Rejected {
            reason,
            evidence,
            at,
        } => Terminal::Rejected {
            reason: reason.clone(),
            evidence: evidence.clone(),
            at: *at,
        },
        _ => return None,
    })
}

/// What `begin` answers for a settled record that it cannot claim; `None`
/// when the record may be claimed now (planned, or a first claim whose
/// lease ran out).
fn refusal(rec: &OperationRecord, ctx: Ctx<'_>) -> Option<BeginOutcome> {
    let in_progress = |holder: &String, lease_until: &crate::clock::Timestamp| {
        Some(BeginOutcome::InProgress {
            holder: holder.clone(),
            state: rec.state.kind(),
            lease_until: *lease_until,
        })
    };
    match &rec.state {
        State::Planned => None,
        State::Claimed {
            holder,
            lease_until,
            ..
        } if *lease_until > ctx.now => in_progress(holder, lease_until),
        State::Claimed { .. } => None,
        State::Dispatched {
            holder,
            lease_until,
            ..
        } => in_progress(holder, lease_until),
        State::Confirmed { .. } | State::Rejected { .. } => {
            replay(rec, ctx).map(BeginOutcome::Replayed)
        }
        State::Unknown(info) => Some(BeginOutcome::Unresolved(info.clone())),
        State::Cancelled { reason, .. } => Some(BeginOutcome::Cancelled {
            reason: reason.clone(),
        }),
    }
}

/// `approve`: records a new identity as `planned`; an existing one is
/// answered, never changed (apart from recording a due lease expiry, as
/// every command that touches a record does).
pub(crate) fn approve(
    cur: Option<&OperationRecord>,
    req: &OperationRequest,
    ctx: Ctx<'_>,
) -> Step<ApproveOutcome> {
    let Some(rec) = cur else {
        return Ok(Change::new(
            Effect::save(planned(req, ctx)),
            ApproveOutcome::Planned,
        ));
    };
    if rec.fingerprint != req.fingerprint() {
        return Ok(Change::answer(ApproveOutcome::Conflict {
            recorded: rec.fingerprint,
            requested: req.fingerprint(),
        }));
    }
    let (rec, settled) = view(rec, ctx.now);
    let mut effect = Effect::default();
    effect.absorb(settled);
    let outcome = match (&rec.state, replay(&rec, ctx)) {
        (_, Some(terminal)) => ApproveOutcome::Replayed(terminal),
        (State::Cancelled { reason, .. }, None) => ApproveOutcome::Cancelled {
            reason: reason.clone(),
        },
        (state, None) => ApproveOutcome::AlreadyApproved {
            state: state.kind(),
        },
    };
    Ok(Change::new(effect, outcome))
}

/// `begin`: `cur` is the stored record of the identity; `blocker` is any
/// *other* operation the backend found within the block width that is
/// `unknown` or `dispatched` past its lease (ignored if it is neither).
pub(crate) fn begin(
    cur: Option<&OperationRecord>,
    blocker: Option<&OperationRecord>,
    req: &OperationRequest,
    opts: &BeginOptions,
    ctx: Ctx<'_>,
) -> Step<BeginOutcome> {
    validate_opts(opts)?;
    let mut effect = Effect::default();
    let mut rec = match cur {
        Some(rec) if rec.fingerprint != req.fingerprint() => {
            return Ok(Change::answer(BeginOutcome::Conflict {
                recorded: rec.fingerprint,
                requested: req.fingerprint(),
            }));
        }
        Some(rec) => {
            let (v, settled) = view(rec, ctx.now);
            effect.absorb(settled);
            v
        }
        None => planned(req, ctx),
    };
    if let Some(outcome) = refusal(&rec, ctx) {
        return Ok(Change::new(effect, outcome));
    }
    if let Some(b) = blocker.filter(|b| b.id != rec.id)
        && let Some((info, settled)) = super::blocking(b, ctx.now)
    {
        effect.absorb(settled);
        let blocked_by = b.id.clone();
        return Ok(Change::new(
            effect,
            BeginOutcome::Suspended { blocked_by, info },
        ));
    }
    let c = claim(&mut rec, opts, ctx);
    effect.saves.push(rec);
    Ok(Change::new(effect, BeginOutcome::Started(c)))
}

/// `begin` and, if it starts, `mark_dispatched` on the claim it took: one
/// step, so a backend writes both in one commit. Every other answer is
/// `begin`'s, with its effect. The dispatch is validated first: an invalid
/// one is refused before anything is claimed.
pub(crate) fn begin_dispatched(
    cur: Option<&OperationRecord>,
    blocker: Option<&OperationRecord>,
    req: &OperationRequest,
    opts: &BeginOptions,
    dispatch: &Dispatch,
    attempt_id: uuid::Uuid,
    ctx: Ctx<'_>,
) -> Step<BeginOutcome> {
    super::holder::validate_dispatch(dispatch, ctx)?;
    let begun = begin(cur, blocker, req, opts, ctx)?;
    let BeginOutcome::Started(claim) = &begun.answer else {
        return Ok(begun);
    };
    let mut effect = begun.effect;
    // `begin` saved the claimed record last; dispatch from it and save the
    // dispatched one in its place.
    let claimed = effect.saves.pop();
    let dispatched =
        super::holder::mark_dispatched(claimed.as_ref(), None, claim, dispatch, attempt_id, ctx)?;
    effect.extend(dispatched.effect);
    Ok(Change::new(effect, begun.answer))
}

/// `claim_for_resend`: an `unknown` operation is re-claimed (epoch + 1) only
/// while the destination still honours its idempotency key
/// (`first_dispatched_at + window > now`) and it is not diverged.
pub(crate) fn claim_for_resend(
    cur: Option<&OperationRecord>,
    id: &OperationId,
    opts: &BeginOptions,
    window: Duration,
    ctx: Ctx<'_>,
) -> Step<Option<Claim>> {
    validate_opts(opts)?;
    let rec = cur.ok_or_else(|| LedgerError::NotFound { id: id.clone() })?;
    let (mut rec, settled) = view(rec, ctx.now);
    let mut effect = Effect::default();
    effect.absorb(settled);
    let State::Unknown(info) = &rec.state else {
        return Err(illegal(&rec, "claim_for_resend"));
    };
    let inside = rec
        .first_dispatched_at
        .is_some_and(|first| first.plus(window) > ctx.now);
    if !inside || info.diverged {
        return Ok(Change::new(effect, None));
    }
    let c = Claim {
        // The same destination key again: nothing a sibling could block.
        block: BlockWidth::Operation,
        ..claim(&mut rec, opts, ctx)
    };
    effect.saves.retain(|r| r.id != rec.id);
    effect.saves.push(rec);
    Ok(Change::new(effect, Some(c)))
}
