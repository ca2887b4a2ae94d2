//! The pure state machine (DESIGN §4). No I/O: every function takes the
//! current record(s) and the time and returns a [`Step`] — what to write and
//! what to answer. Every backend loads, calls these, and persists the
//! effect in one transaction, so all backends share one set of semantics.
//!
//! Errors never carry an effect: a refused command changes nothing.
//! Answers are computed on the *settled* view of a record (see [`settle`]),
//! so they never depend on whether a lease expiry was already persisted.

mod admin;
mod begin;
mod holder;

pub(crate) use admin::{append_attempt, cancel, get, resolve, update_unknown};
pub(crate) use begin::{approve, begin, begin_dispatched, claim_for_resend};
pub(crate) use holder::{confirm, mark_dispatched, mark_unknown, reject, release, renew};

use crate::clock::Timestamp;
use crate::error::{LedgerError, ValidationError};
use crate::identity::{Limits, MAX_TEXT_BYTES as TEXT_BYTES, OperationId, canonical_json};
use crate::model::{
    AttemptOutcome, AttemptRecord, Claim, Epoch, LEASE_EXPIRED_AFTER_DISPATCH, OperationRecord,
    Owner, State, UnknownInfo,
};
use crate::retention::Retention;
use crate::task::TaskBudget;

/// Reason recorded when a re-send claim (taken on an operation that was
/// dispatched before) lapses or is given back: the earlier dispatch is still
/// unresolved, so the operation returns to `unknown`, never to `planned`.
pub const RESEND_CLAIM_LAPSED: &str = "re-send claim lapsed; an earlier dispatch is unresolved";

/// Inputs every transition needs besides the record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ctx<'a> {
    pub(crate) now: Timestamp,
    pub(crate) retention: &'a Retention,
    pub(crate) limits: &'a Limits,
}

/// Closes the pending dispatch attempt of `(id, epoch)`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AttemptFinish {
    pub(crate) id: OperationId,
    pub(crate) epoch: Epoch,
    pub(crate) outcome: AttemptOutcome,
    pub(crate) at: Timestamp,
    pub(crate) evidence: Option<String>,
}

/// Retention to apply: tombstone terminal records decided at or before
/// `tombstone_cutoff`, delete those decided at or before `delete_cutoff`
/// (with their attempts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Retire {
    pub(crate) tombstone_cutoff: Timestamp,
    pub(crate) delete_cutoff: Timestamp,
    /// Task budgets that expired at or before this instant are deleted.
    pub(crate) tasks_expired: Timestamp,
}

/// What a backend must write, in order: record upserts, new attempts,
/// finished attempts, task budget upserts, then retention.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Effect {
    pub(crate) saves: Vec<OperationRecord>,
    pub(crate) attempts: Vec<AttemptRecord>,
    pub(crate) finishes: Vec<AttemptFinish>,
    pub(crate) tasks: Vec<TaskBudget>,
    pub(crate) retire: Option<Retire>,
}

impl Effect {
    pub(crate) fn is_empty(&self) -> bool {
        self.saves.is_empty()
            && self.attempts.is_empty()
            && self.finishes.is_empty()
            && self.tasks.is_empty()
            && self.retire.is_none()
    }

    /// Writes only `rec`.
    pub(crate) fn save(rec: OperationRecord) -> Self {
        Self {
            saves: vec![rec],
            ..Self::default()
        }
    }

    /// Adds the write that records a lease expiry, if there is one.
    pub(crate) fn absorb(&mut self, settled: Option<Settled>) {
        if let Some(s) = settled {
            self.saves.push(s.record);
            self.finishes.extend(s.finish);
        }
    }

    /// Appends `other`'s writes after this one's.
    pub(crate) fn extend(&mut self, other: Effect) {
        self.saves.extend(other.saves);
        self.attempts.extend(other.attempts);
        self.finishes.extend(other.finishes);
        self.tasks.extend(other.tasks);
        self.retire = other.retire.or(self.retire);
    }
}

/// An accepted command: what to write and what to answer.
#[derive(Debug)]
pub(crate) struct Change<T> {
    pub(crate) effect: Effect,
    pub(crate) answer: T,
}

impl<T> Change<T> {
    pub(crate) fn new(effect: Effect, answer: T) -> Self {
        Self { effect, answer }
    }

    /// An answer that writes nothing.
    pub(crate) fn answer(answer: T) -> Self {
        Self::new(Effect::default(), answer)
    }
}

/// One transition. `Err` is a refusal and carries no effect: a refused
/// command changes nothing. Transitions use `?` on their checks.
pub(crate) type Step<T> = Result<Change<T>, LedgerError>;

/// A lease expiry that must be recorded.
#[derive(Clone, Debug)]
pub(crate) struct Settled {
    pub(crate) record: OperationRecord,
    pub(crate) finish: Option<AttemptFinish>,
}

/// Applies lease expiry as of `now`, if it changes anything:
/// * `dispatched` past its lease → `unknown` (owner reconciler, since the lease end);
/// * a re-send claim (earlier dispatches exist) past its lease → `unknown`.
///
/// A first claim past its lease stays `claimed` (visibly expired) and is
/// taken over by the next `begin`.
pub(crate) fn settle(rec: &OperationRecord, now: Timestamp) -> Option<Settled> {
    let (epoch, lease_until, reason, pending) = match &rec.state {
        State::Dispatched {
            epoch, lease_until, ..
        } if *lease_until <= now => (*epoch, *lease_until, LEASE_EXPIRED_AFTER_DISPATCH, true),
        State::Claimed {
            epoch, lease_until, ..
        } if *lease_until <= now && rec.dispatch_count > 0 => {
            (*epoch, *lease_until, RESEND_CLAIM_LAPSED, false)
        }
        _ => return None,
    };
    let mut record = rec.clone();
    record.state = State::Unknown(UnknownInfo {
        owner: Owner::Reconciler,
        reason: reason.to_owned(),
        since: lease_until,
        next_check_at: Some(lease_until),
        diverged: false,
    });
    record.updated_at = lease_until;
    let finish = pending.then(|| AttemptFinish {
        id: rec.id.clone(),
        epoch,
        outcome: AttemptOutcome::Unknown,
        at: lease_until,
        evidence: Some(LEASE_EXPIRED_AFTER_DISPATCH.to_owned()),
    });
    Some(Settled { record, finish })
}

/// Whether `rec` blocks other operations of its action within a block
/// width at `now`: `unknown`; `dispatched` past its lease (about to be
/// recorded as `unknown`); or being re-sent — an unknown operation claimed
/// again for a re-send with its own destination key (`claimed` after a
/// dispatch, or `dispatched` more than once), whose first outcome is
/// still not known. What every backend's `find_blocker` selects, besides
/// action and scope.
pub(crate) fn blocks(rec: &OperationRecord, now: Timestamp) -> bool {
    match &rec.state {
        State::Unknown(_) => true,
        State::Dispatched { lease_until, .. } => *lease_until <= now || rec.dispatch_count > 1,
        State::Claimed { .. } => rec.dispatch_count > 0,
        _ => false,
    }
}

/// What a suspended request is told of the operation `b` that blocks it
/// at `now`, if it does: its unknown state, or for one being re-sent an
/// account of that (its outcome is unknown until the re-send answers).
pub(crate) fn blocking(
    b: &OperationRecord,
    now: Timestamp,
) -> Option<(UnknownInfo, Option<Settled>)> {
    if !blocks(b, now) {
        return None;
    }
    let (bv, settled) = view(b, now);
    let info = match bv.state {
        State::Unknown(info) => info,
        State::Claimed { lease_until, .. } | State::Dispatched { lease_until, .. } => UnknownInfo {
            owner: Owner::Reconciler,
            reason: "its outcome is unknown, and it is being re-sent with its own destination key"
                .into(),
            since: bv.first_dispatched_at.unwrap_or(bv.updated_at),
            next_check_at: Some(lease_until),
            diverged: false,
        },
        _ => return None,
    };
    Some((info, settled))
}

/// The settled view of `rec` and the write that records it, if any.
pub(crate) fn view(rec: &OperationRecord, now: Timestamp) -> (OperationRecord, Option<Settled>) {
    match settle(rec, now) {
        Some(s) => (s.record.clone(), Some(s)),
        None => (rec.clone(), None),
    }
}

/// Checks a claim against the record (fencing) and returns the settled view.
pub(crate) fn fence(
    cur: Option<&OperationRecord>,
    claim: &Claim,
    now: Timestamp,
    op: &'static str,
) -> Result<OperationRecord, LedgerError> {
    let rec = cur.ok_or_else(|| LedgerError::NotFound {
        id: claim.id.clone(),
    })?;
    if rec.fingerprint != claim.fingerprint {
        return Err(LedgerError::ParamsMismatch {
            id: rec.id.clone(),
            recorded: rec.fingerprint,
            given: claim.fingerprint,
        });
    }
    if claim.epoch != rec.epoch {
        return Err(LedgerError::StaleEpoch {
            id: rec.id.clone(),
            given: claim.epoch,
            current: rec.epoch,
        });
    }
    if let State::Claimed { holder, .. } | State::Dispatched { holder, .. } = &rec.state
        && *holder != claim.holder
    {
        return Err(LedgerError::NotHolder {
            id: rec.id.clone(),
            epoch: claim.epoch,
            holder: holder.clone(),
            given: claim.holder.clone(),
        });
    }
    let (view, _) = view(rec, now);
    let expired = LedgerError::LeaseExpired {
        id: rec.id.clone(),
        epoch: claim.epoch,
    };
    match &view.state {
        State::Claimed { lease_until, .. } | State::Dispatched { lease_until, .. } => {
            if *lease_until <= now {
                return Err(expired);
            }
        }
        State::Unknown(info)
            if info.reason == LEASE_EXPIRED_AFTER_DISPATCH
                || info.reason == RESEND_CLAIM_LAPSED =>
        {
            return Err(expired);
        }
        other => {
            return Err(LedgerError::IllegalTransition {
                id: rec.id.clone(),
                from: other.kind(),
                op,
            });
        }
    }
    Ok(view)
}

pub(crate) fn illegal(rec: &OperationRecord, op: &'static str) -> LedgerError {
    LedgerError::IllegalTransition {
        id: rec.id.clone(),
        from: rec.state.kind(),
        op,
    }
}

/// Text a caller chooses (a name, an operator's evidence or reason):
/// refused, naming `field`, when empty or when it holds a NUL character.
/// PostgreSQL `text` cannot hold NUL, so without this one backend would
/// refuse at COMMIT (an outage to the caller, retried for ever) what
/// another stores; refused here, the caller learns which field to fix on
/// every backend, before anything is recorded.
/// The longest name of who did something (`executor`, `holder`, `actor`).
pub(crate) const NAME_BYTES: usize = 1024;

/// A name of who did something: non-empty, no NUL, at most
/// [`NAME_BYTES`].
pub(crate) fn require_name(field: &'static str, s: &str) -> Result<(), ValidationError> {
    if s.len() > NAME_BYTES {
        return Err(ValidationError::new(
            field,
            format!("is {} bytes; at most {NAME_BYTES}", s.len()),
        ));
    }
    require_text(field, s)
}

/// Text given by a person or a program (an operator's evidence, a
/// cancellation's reason): non-empty, no NUL, at most [`TEXT_BYTES`].
pub(crate) fn require_text(field: &'static str, s: &str) -> Result<(), ValidationError> {
    if s.trim().is_empty() {
        return Err(ValidationError::new(field, "must not be empty"));
    }
    if s.len() > TEXT_BYTES {
        return Err(ValidationError::new(
            field,
            format!("is {} bytes; at most {TEXT_BYTES}", s.len()),
        ));
    }
    if s.contains('\0') {
        return Err(ValidationError::new(
            field,
            "must not contain a NUL character (U+0000)",
        ));
    }
    Ok(())
}

/// Text a holder or reconciler reports from a destination's answer (an
/// outcome's reason and evidence, a lookup's evidence): NUL characters are
/// stored as U+FFFD on every backend. Refusing them would turn a
/// definitive answer (a destination's refusal whose body holds a NUL)
/// into an unrecordable one, left for review; the text is for people, and
/// the replacement character shows where the NUL was. For the same reason
/// a text past [`TEXT_BYTES`] is cut there (at a character boundary, with
/// a note saying so), not refused. Empty is still refused, naming `field`.
pub(crate) fn answer_text(field: &'static str, s: &str) -> Result<String, ValidationError> {
    if s.trim().is_empty() {
        return Err(ValidationError::new(field, "must not be empty"));
    }
    const CUT: &str = " … [cut: longer than 64 KiB]";
    let kept = if s.len() > TEXT_BYTES {
        let mut end = TEXT_BYTES - CUT.len();
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}{CUT}", &s[..end])
    } else {
        s.to_owned()
    };
    Ok(kept.replace('\0', "\u{FFFD}"))
}

pub(crate) fn answer_opt_text(
    field: &'static str,
    s: Option<&str>,
) -> Result<Option<String>, ValidationError> {
    s.map(|s| answer_text(field, s)).transpose()
}

/// Validates a JSON document and returns its canonical (owned) value.
pub(crate) fn canonical_value(
    field: &'static str,
    v: &serde_json::Value,
    limits: &Limits,
) -> Result<serde_json::Value, ValidationError> {
    let text = canonical_json(field, v, limits)?;
    serde_json::from_str(&text)
        .map_err(|e| ValidationError::new(field, format!("does not round-trip: {e}")))
}

pub(crate) fn require_lease(lease: std::time::Duration) -> Result<(), ValidationError> {
    if lease.as_millis() == 0 {
        return Err(ValidationError::new("lease", "must be at least 1 ms"));
    }
    Ok(())
}

/// Drops params and result, keeping identity, fingerprint and terminal state.
pub(crate) fn tombstone(rec: &mut OperationRecord) {
    rec.params = None;
    rec.tombstone = true;
    match &mut rec.state {
        State::Confirmed {
            result, evidence, ..
        } => {
            *result = serde_json::Value::Null;
            *evidence = None;
        }
        State::Rejected { evidence, .. } => *evidence = None,
        _ => {}
    }
}
