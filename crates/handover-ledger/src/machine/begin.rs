//! `begin` (check-and-claim) and `claim_for_resend`.

use std::time::Duration;

use super::{Ctx, Effect, Step, illegal, require_lease, require_text, view};
use crate::error::{LedgerError, ValidationError};
use crate::identity::{OperationId, OperationRequest, destination_key};
use crate::ledger::{BeginOptions, BeginOutcome};
use crate::model::{Claim, Epoch, OperationRecord, State, Terminal};

fn validate_opts(opts: &BeginOptions) -> Result<(), ValidationError> {
    require_text("holder", &opts.holder)?;
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
    }
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
    if let Err(e) = validate_opts(opts) {
        return Step::fail(e);
    }
    let mut effect = Effect::default();
    if let Some(rec) = cur
        && rec.fingerprint != req.fingerprint()
    {
        return Step::answer(
            effect,
            BeginOutcome::Conflict {
                recorded: rec.fingerprint,
                requested: req.fingerprint(),
            },
        );
    }
    let mut rec = match cur {
        None => OperationRecord {
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
        },
        Some(rec) => {
            let (v, settled) = view(rec, ctx.now);
            effect.absorb(settled);
            v
        }
    };
    let startable = match &rec.state {
        State::Planned => true,
        State::Claimed {
            holder,
            lease_until,
            ..
        } => {
            if *lease_until > ctx.now {
                let outcome = BeginOutcome::InProgress {
                    holder: holder.clone(),
                    state: rec.state.kind(),
                    lease_until: *lease_until,
                };
                return Step::answer(effect, outcome);
            }
            true
        }
        State::Dispatched {
            holder,
            lease_until,
            ..
        } => {
            let outcome = BeginOutcome::InProgress {
                holder: holder.clone(),
                state: rec.state.kind(),
                lease_until: *lease_until,
            };
            return Step::answer(effect, outcome);
        }
        State::Confirmed {
            result,
            evidence,
            at,
        } => {
            let t = if rec.tombstone || !ctx.retention.replays(*at, ctx.now) {
                Terminal::Tombstone {
                    state: rec.state.kind(),
                    at: *at,
                }
            } else {
                Terminal::Confirmed {
                    result: result.clone(),
                    evidence: evidence.clone(),
                    at: *at,
                }
            };
            return Step::answer(effect, BeginOutcome::Replayed(t));
        }
        State::Rejected {
            reason,
            evidence,
            at,
        } => {
            let t = if rec.tombstone || !ctx.retention.replays(*at, ctx.now) {
                Terminal::Tombstone {
                    state: rec.state.kind(),
                    at: *at,
                }
            } else {
                Terminal::Rejected {
                    reason: reason.clone(),
                    evidence: evidence.clone(),
                    at: *at,
                }
            };
            return Step::answer(effect, BeginOutcome::Replayed(t));
        }
        State::Unknown(info) => {
            return Step::answer(effect, BeginOutcome::Unresolved(info.clone()));
        }
        State::Cancelled { reason, .. } => {
            return Step::answer(
                effect,
                BeginOutcome::Cancelled {
                    reason: reason.clone(),
                },
            );
        }
    };
    debug_assert!(startable);
    if let Some(b) = blocker
        && b.id != rec.id
    {
        let (bv, settled) = view(b, ctx.now);
        if let State::Unknown(info) = bv.state {
            effect.absorb(settled);
            let outcome = BeginOutcome::Suspended {
                blocked_by: bv.id,
                info,
            };
            return Step::answer(effect, outcome);
        }
    }
    let c = claim(&mut rec, opts, ctx);
    effect.saves.push(rec);
    Step::answer(effect, BeginOutcome::Started(c))
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
    if let Err(e) = validate_opts(opts) {
        return Step::fail(e);
    }
    let Some(rec) = cur else {
        return Step::fail(LedgerError::NotFound { id: id.clone() });
    };
    let (mut rec, settled) = view(rec, ctx.now);
    let mut effect = Effect::default();
    effect.absorb(settled);
    let State::Unknown(info) = &rec.state else {
        return Step::fail(illegal(&rec, "claim_for_resend"));
    };
    let inside = rec
        .first_dispatched_at
        .is_some_and(|first| first.plus(window) > ctx.now);
    if !inside || info.diverged {
        return Step::answer(effect, None);
    }
    let c = claim(&mut rec, opts, ctx);
    effect.saves.retain(|r| r.id != rec.id);
    effect.saves.push(rec);
    Step::answer(effect, Some(c))
}
