//! The one driver every backend runs inside its write transaction:
//! load → pure [`crate::machine`] step → persist the effect.
//!
//! A backend only implements [`Store`] (row access inside a transaction)
//! and decides how transactions are opened and committed; the semantics
//! live here and in the machine, once.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::clock::{Clock, Timestamp};
use crate::error::LedgerError;
use crate::identity::{ActionName, Limits, OperationId, OperationRequest, Scope};
use crate::ledger::{
    BeginOptions, BeginOutcome, BlockWidth, Dispatch, NewAttempt, ReleaseReason, Resolution,
    UnknownReport, UnknownUpdate,
};
use crate::machine::{self, AttemptFinish, Ctx, Effect, Step};
use crate::model::{AttemptRecord, Claim, OperationRecord};
use crate::retention::{PurgeReport, Retention};

/// Row access inside one transaction. Reads come first in every command, so
/// a read error means nothing of the command was written.
#[async_trait]
pub(crate) trait Store: Send {
    /// The stored record (not settled).
    async fn load(&mut self, id: &OperationId) -> Result<Option<OperationRecord>, LedgerError>;
    /// Another operation of `action` (in `scope`, if given), not `except`,
    /// that is `unknown` or `dispatched` with `lease_until <= now`; the first
    /// by `(created_at, scope, key)`.
    async fn find_blocker(
        &mut self,
        except: &OperationId,
        action: &ActionName,
        scope: Option<&Scope>,
        now: Timestamp,
    ) -> Result<Option<OperationRecord>, LedgerError>;
    /// Records whose lease expiry must be recorded as `unknown`
    /// (`dispatched`, or `claimed` with `dispatch_count > 0`, and `lease_until <= now`).
    async fn due_expired(&mut self, now: Timestamp) -> Result<Vec<OperationRecord>, LedgerError>;
    /// Inserts or replaces a record.
    async fn save(&mut self, rec: &OperationRecord) -> Result<(), LedgerError>;
    /// Appends an attempt.
    async fn insert_attempt(&mut self, a: &AttemptRecord) -> Result<(), LedgerError>;
    /// Closes the pending dispatch attempt of `(id, epoch)`, if there is one.
    async fn finish_attempt(&mut self, f: &AttemptFinish) -> Result<(), LedgerError>;
    /// Tombstones terminal records decided at or before `tombstone_cutoff`
    /// (see [`machine::tombstone`]) and deletes those decided at or before
    /// `delete_cutoff`, with their attempts.
    async fn purge(
        &mut self,
        tombstone_cutoff: Timestamp,
        delete_cutoff: Timestamp,
    ) -> Result<PurgeReport, LedgerError>;
}

/// A write command.
#[derive(Debug)]
pub(crate) enum Command {
    Begin(OperationRequest, BeginOptions),
    Renew(Claim, Duration),
    MarkDispatched(Claim, Dispatch),
    Confirm(Claim, serde_json::Value, Option<String>),
    Reject(Claim, String, Option<String>),
    MarkUnknown(Claim, UnknownReport),
    Release(Claim, ReleaseReason),
    ClaimForResend(OperationId, BeginOptions, Duration),
    Resolve(OperationId, Resolution),
    UpdateUnknown(OperationId, UnknownUpdate),
    AppendAttempt(OperationId, NewAttempt),
    Cancel(OperationId, String),
    /// Reads one record, recording a due lease expiry.
    Get(OperationId),
    /// Records every due lease expiry.
    SettleDue,
    Purge,
}

/// The answer to a [`Command`].
#[derive(Debug)]
pub(crate) enum Answer {
    Begin(BeginOutcome),
    Claim(Claim),
    Uuid(uuid::Uuid),
    Record(OperationRecord),
    MaybeClaim(Option<Claim>),
    MaybeRecord(Option<OperationRecord>),
    Purge(PurgeReport),
    Done,
}

macro_rules! into {
    ($name:ident, $variant:ident, $t:ty) => {
        pub(crate) fn $name(r: Result<Answer, LedgerError>) -> Result<$t, LedgerError> {
            match r? {
                Answer::$variant(v) => Ok(v),
                other => Err(LedgerError::corrupt(format!(
                    "internal: unexpected answer {other:?}"
                ))),
            }
        }
    };
}

impl Answer {
    into!(begin, Begin, BeginOutcome);
    into!(claim, Claim, Claim);
    into!(uuid, Uuid, uuid::Uuid);
    into!(record, Record, OperationRecord);
    into!(maybe_claim, MaybeClaim, Option<Claim>);
    into!(maybe_record, MaybeRecord, Option<OperationRecord>);
    into!(purge, Purge, PurgeReport);
}

/// What a backend is configured with.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) retention: Retention,
    pub(crate) limits: Limits,
}

/// The outcome of running one command: `Err` means a write failed and the
/// transaction must be rolled back; `Ok` carries the caller's answer.
pub(crate) type Executed = Result<Result<Answer, LedgerError>, LedgerError>;

/// Runs `cmd` against `store` at the clock's current time.
pub(crate) async fn execute<S: Store + ?Sized>(
    store: &mut S,
    cmd: Command,
    cfg: &Config,
) -> Executed {
    let now = cfg.clock.now();
    let ctx = Ctx {
        now,
        retention: &cfg.retention,
        limits: &cfg.limits,
    };
    macro_rules! load {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(e) => return Ok(Err(e)),
            }
        };
    }
    let (effect, answer) = match cmd {
        Command::Begin(req, opts) => {
            let cur = load!(store.load(req.id()).await);
            let scope = match opts.block {
                BlockWidth::Operation => None,
                BlockWidth::Scope => Some(Some(&req.id().scope)),
                BlockWidth::Action => Some(None),
            };
            let blocker = match scope {
                Some(scope) => {
                    load!(store.find_blocker(req.id(), req.action(), scope, now).await)
                }
                None => None,
            };
            split(
                machine::begin(cur.as_ref(), blocker.as_ref(), &req, &opts, ctx),
                Answer::Begin,
            )
        }
        Command::Renew(claim, lease) => {
            let cur = load!(store.load(&claim.id).await);
            split(
                machine::renew(cur.as_ref(), &claim, lease, ctx),
                Answer::Claim,
            )
        }
        Command::MarkDispatched(claim, d) => {
            let cur = load!(store.load(&claim.id).await);
            let step = machine::mark_dispatched(cur.as_ref(), &claim, d, uuid::Uuid::now_v7(), ctx);
            split(step, Answer::Uuid)
        }
        Command::Confirm(claim, result, evidence) => {
            let cur = load!(store.load(&claim.id).await);
            let step = machine::confirm(cur.as_ref(), &claim, &result, evidence, ctx);
            split(step, Answer::Record)
        }
        Command::Reject(claim, reason, evidence) => {
            let cur = load!(store.load(&claim.id).await);
            let step = machine::reject(cur.as_ref(), &claim, reason, evidence, ctx);
            split(step, Answer::Record)
        }
        Command::MarkUnknown(claim, report) => {
            let cur = load!(store.load(&claim.id).await);
            split(
                machine::mark_unknown(cur.as_ref(), &claim, report, ctx),
                Answer::Record,
            )
        }
        Command::Release(claim, why) => {
            let cur = load!(store.load(&claim.id).await);
            split(
                machine::release(cur.as_ref(), &claim, why, ctx),
                Answer::Record,
            )
        }
        Command::ClaimForResend(id, opts, window) => {
            let cur = load!(store.load(&id).await);
            let step = machine::claim_for_resend(cur.as_ref(), &id, &opts, window, ctx);
            split(step, Answer::MaybeClaim)
        }
        Command::Resolve(id, resolution) => {
            let cur = load!(store.load(&id).await);
            let step = machine::resolve(cur.as_ref(), &id, resolution, uuid::Uuid::now_v7(), ctx);
            split(step, Answer::Record)
        }
        Command::UpdateUnknown(id, update) => {
            let cur = load!(store.load(&id).await);
            split(
                machine::update_unknown(cur.as_ref(), &id, update, ctx),
                Answer::Record,
            )
        }
        Command::AppendAttempt(id, attempt) => {
            let cur = load!(store.load(&id).await);
            let step =
                machine::append_attempt(cur.as_ref(), &id, attempt, uuid::Uuid::now_v7(), ctx);
            split(step, Answer::Uuid)
        }
        Command::Cancel(id, reason) => {
            let cur = load!(store.load(&id).await);
            split(
                machine::cancel(cur.as_ref(), &id, reason, ctx),
                Answer::Record,
            )
        }
        Command::Get(id) => {
            let cur = load!(store.load(&id).await);
            split(machine::get(cur.as_ref(), ctx), Answer::MaybeRecord)
        }
        Command::SettleDue => {
            let due = load!(store.due_expired(now).await);
            let mut effect = Effect::default();
            for rec in &due {
                if let Some(s) = machine::settle(rec, now) {
                    effect.saves.push(s.record);
                    effect.finishes.extend(s.finish);
                }
            }
            (effect, Ok(Answer::Done))
        }
        Command::Purge => {
            // Lease expiries first, so nothing due is mistaken for live.
            let due = load!(store.due_expired(now).await);
            for rec in &due {
                if let Some(s) = machine::settle(rec, now) {
                    persist(
                        store,
                        Effect {
                            saves: vec![s.record],
                            attempts: vec![],
                            finishes: s.finish.into_iter().collect(),
                        },
                    )
                    .await?;
                }
            }
            let report = store
                .purge(
                    cfg.retention.tombstone_cutoff(now),
                    cfg.retention.delete_cutoff(now),
                )
                .await?;
            (Effect::default(), Ok(Answer::Purge(report)))
        }
    };
    if answer.is_ok() {
        persist(store, effect).await?;
    }
    Ok(answer)
}

fn split<T>(
    step: Step<T>,
    wrap: impl FnOnce(T) -> Answer,
) -> (Effect, Result<Answer, LedgerError>) {
    (step.effect, step.answer.map(wrap))
}

async fn persist<S: Store + ?Sized>(store: &mut S, effect: Effect) -> Result<(), LedgerError> {
    if effect.is_empty() {
        return Ok(());
    }
    for rec in &effect.saves {
        store.save(rec).await?;
    }
    for a in &effect.attempts {
        store.insert_attempt(a).await?;
    }
    for f in &effect.finishes {
        store.finish_attempt(f).await?;
    }
    Ok(())
}
