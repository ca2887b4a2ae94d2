//! The lookup step of reconciliation: ask the destination, record the
//! answer as a lookup attempt, and act only on what it proves (see the
//! module docs of `reconcile` for the rules).

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;

use handover_ledger::{
    AttemptKind, AttemptOutcome, AttemptRecord, NewAttempt, OperationRecord, Owner, ResolvedAs,
    State, StateKind, Timestamp, UnknownInfo,
};

use super::{FoundRecord, Lookup, LookupContext, ReconcileReport, Reconciler};
use crate::config::LookupContract;
use crate::error::RouterError;

/// One due unknown operation whose action has a lookup.
pub(super) struct Case<'a> {
    pub(super) rec: &'a OperationRecord,
    pub(super) info: &'a UnknownInfo,
    /// The approved parameters.
    pub(super) params: serde_json::Value,
    /// The action's executor timeout (also bounds the lookup).
    pub(super) timeout: Duration,
    pub(super) lc: LookupContract,
    /// The answer was reported by a client (the pull API), not fetched by
    /// this reconciler on its schedule.
    pub(super) reported: bool,
}

/// When this lookup happened, against the lag and the schedule.
struct Timing {
    /// When the lookup was sent. Its answer tells what the destination
    /// held at some moment from then on, so only a lookup sent after the
    /// lag proves an absence (one sent before it and answered after it
    /// may have been read before the record became visible).
    sent: Timestamp,
    /// When its answer came.
    now: Timestamp,
    /// Lookups recorded before this one (the schedule backs off with them).
    lookups_done: usize,
    /// The last moment the destination may have created its record.
    last_dispatch: Timestamp,
    /// From then on, an empty lookup is proof of non-execution.
    lag_ends: Timestamp,
}

impl Timing {
    /// Whether an empty answer to this lookup proves an absence: it was
    /// sent after the visibility lag ended.
    fn after_lag(&self) -> bool {
        self.sent >= self.lag_ends
    }
}

impl Reconciler {
    pub(super) async fn look_up(
        &self,
        case: &Case<'_>,
        lookup: &dyn Lookup,
        report: &mut ReconcileReport,
    ) -> Result<(), RouterError> {
        let rec = case.rec;
        let ctx = LookupContext {
            operation: rec.id.clone(),
            action: rec.action.clone(),
            params: case.params.clone(),
            destination_key: rec.destination_key.clone(),
        };
        let attempts = self.gate.ledger().attempts(&rec.id).await?;
        let lookups_done = attempts
            .iter()
            .filter(|a| a.kind == AttemptKind::Lookup)
            .count();
        let last_dispatch = last_dispatch(case, &attempts);
        let sent = self.clock.now();
        // A lookup that panics (or panics while building its future) is a
        // failed lookup of this operation: it proves nothing, and the pass
        // goes on with the others.
        let call = AssertUnwindSafe(async move { lookup.lookup(ctx).await }).catch_unwind();
        let found = match tokio::time::timeout(case.timeout, call).await {
            Ok(Ok(r)) => r,
            Ok(Err(_panic)) => Err("lookup panicked".to_owned()),
            Err(_) => Err(format!("lookup timed out after {:?}", case.timeout)),
        };
        let at = Timing {
            sent,
            now: self.clock.now(),
            lookups_done,
            last_dispatch,
            lag_ends: last_dispatch.plus(case.lc.visibility_lag),
        };
        let proves_nothing = match &found {
            Err(_) => true,
            Ok(records) => records.is_empty() && !at.after_lag(),
        };
        if case.reported
            && proves_nothing
            && looked_up_within(&attempts, at.now, case.lc.check_every)
        {
            // A report that proves nothing, sent again before the
            // schedule's first interval has passed since the last lookup:
            // not recorded again (a client of the scope could otherwise
            // grow the operation's attempt log without bound), and the
            // schedule stays as it is.
            report.still_unknown += 1;
            return Ok(());
        }
        match found {
            Err(e) => self.lookup_failed(case, &at, e, report).await,
            Ok(records) if records.is_empty() && at.after_lag() => {
                self.absent(case, &at, report).await
            }
            Ok(records) if records.is_empty() => self.not_visible_yet(case, &at, report).await,
            Ok(records) if records.len() > 1 => {
                self.duplicated(case, &at, records.len(), report).await
            }
            Ok(mut records) => self.found(case, &at, records.remove(0), report).await,
        }
    }

    /// A failed lookup proves nothing: check again on schedule.
    async fn lookup_failed(
        &self,
        case: &Case<'_>,
        at: &Timing,
        error: String,
        report: &mut ReconcileReport,
    ) -> Result<(), RouterError> {
        self.note(case.rec, at, AttemptOutcome::Error, error)
            .await?;
        let next = next_check(at.now, case.lc, at.lookups_done, None);
        let reason = &case.info.reason;
        self.update(case.rec, Owner::Reconciler, reason, Some(next), false)
            .await?;
        report.still_unknown += 1;
        Ok(())
    }

    /// Absent after the visibility lag: not applied.
    async fn absent(
        &self,
        case: &Case<'_>,
        at: &Timing,
        report: &mut ReconcileReport,
    ) -> Result<(), RouterError> {
        let evidence = format!(
            "lookup sent {} after the last dispatch ended found no record (visibility lag {:?})",
            humantime::format_duration(at.sent.saturating_since(at.last_dispatch)),
            case.lc.visibility_lag
        );
        self.note(case.rec, at, AttemptOutcome::NotFound, evidence.clone())
            .await?;
        let reason = "not applied: absent from the destination after its visibility lag";
        let rejected = ResolvedAs::Rejected {
            reason: reason.into(),
        };
        self.resolve(case.rec, rejected, evidence).await?;
        report.rejected += 1;
        Ok(())
    }

    /// Absent inside the visibility lag: not proof; check again, at the
    /// latest when the lag ends.
    async fn not_visible_yet(
        &self,
        case: &Case<'_>,
        at: &Timing,
        report: &mut ReconcileReport,
    ) -> Result<(), RouterError> {
        let evidence = "lookup found no record, but the visibility lag has not passed: not proof";
        self.note(case.rec, at, AttemptOutcome::NotFound, evidence.to_owned())
            .await?;
        let next = next_check(at.now, case.lc, at.lookups_done, Some(at.lag_ends));
        let reason = &case.info.reason;
        self.update(case.rec, Owner::Reconciler, reason, Some(next), false)
            .await?;
        report.still_unknown += 1;
        Ok(())
    }

    /// Several records for one operation: a duplicate effect, for review.
    async fn duplicated(
        &self,
        case: &Case<'_>,
        at: &Timing,
        records: usize,
        report: &mut ReconcileReport,
    ) -> Result<(), RouterError> {
        let evidence = format!("lookup found {records} records for one operation");
        self.note(case.rec, at, AttemptOutcome::Diverged, evidence.clone())
            .await?;
        let reason = format!("duplicate effect: {evidence}");
        self.update(case.rec, Owner::Review, &reason, None, true)
            .await?;
        crate::metrics::duplicate_effect(self.action_label(case.rec));
        report.duplicates += 1;
        report.diverged += 1;
        Ok(())
    }

    /// One record: confirmed if it has the approved parameters, otherwise
    /// diverged and sent to review.
    async fn found(
        &self,
        case: &Case<'_>,
        at: &Timing,
        record: FoundRecord,
        report: &mut ReconcileReport,
    ) -> Result<(), RouterError> {
        if !same_params(&record.params, &case.params) {
            let evidence = format!(
                "lookup found a record with other parameters: {}",
                record.params
            );
            self.note(case.rec, at, AttemptOutcome::Diverged, evidence)
                .await?;
            let reason = "diverged: the destination has other parameters";
            self.update(case.rec, Owner::Review, reason, None, true)
                .await?;
            report.diverged += 1;
            return Ok(());
        }
        let evidence = format!("lookup found the record: {}", record.result);
        self.note(case.rec, at, AttemptOutcome::Found, evidence.clone())
            .await?;
        let confirmed = ResolvedAs::Confirmed {
            result: record.result,
        };
        match self.resolve(case.rec, confirmed, evidence).await {
            Ok(()) => {
                report.confirmed += 1;
                Ok(())
            }
            Err(e)
                if e.ledger_error()
                    .and_then(|l| l.field())
                    .is_some_and(is_result) =>
            {
                self.unrecordable_record(case, &e, report).await
            }
            Err(e) => self.found_after_decision(case, at, e, report).await,
        }
    }

    /// The record has the approved parameters, but the ledger cannot
    /// record it as the result (an integer beyond 2^53, nested too deep,
    /// too large): the effect happened, so the operation goes to review
    /// with why — looked up again on every pass it would stay unknown for
    /// ever, and no recordable result may be made up for it.
    async fn unrecordable_record(
        &self,
        case: &Case<'_>,
        refused: &RouterError,
        report: &mut ReconcileReport,
    ) -> Result<(), RouterError> {
        let reason = format!(
            "found: the destination has the record with the approved parameters, but its \
             result cannot be recorded ({refused}); a human must confirm it with a \
             recordable result"
        );
        self.update(case.rec, Owner::Review, &reason, None, false)
            .await?;
        report.to_review += 1;
        Ok(())
    }

    /// The record was found, but the operation was decided while the
    /// lookup ran (an operator's rejection, say): the ledger keeps the
    /// decision, and the finding is kept as a late outcome for a human —
    /// warned, counted in `handover_late_outcomes_total{report="confirmed"}`
    /// and in the attempt log — instead of a failed pass that says
    /// nothing. An agent told "rejected" may otherwise act again under a
    /// new key. A confirmation that came first (another reconciler) needs
    /// nothing; any other failure is the resolve's own error.
    async fn found_after_decision(
        &self,
        case: &Case<'_>,
        at: &Timing,
        refused: RouterError,
        report: &mut ReconcileReport,
    ) -> Result<(), RouterError> {
        let rec = case.rec;
        let now = match self.gate.ledger().get(&rec.id).await {
            Ok(Some(now)) if !matches!(now.state, State::Unknown(_)) => now,
            _ => return Err(refused),
        };
        let decided = now.state.kind();
        if decided == StateKind::Confirmed {
            return Ok(());
        }
        tracing::warn!(
            operation = %rec.id, action = %rec.action, decided = %decided.as_str(),
            "a lookup found the record of an operation decided otherwise meanwhile; kept for review"
        );
        crate::metrics::late_outcome(self.action_label(rec), "confirmed");
        let evidence = format!(
            "late finding: the lookup found the record after the operation was decided {}; \
             the effect may have happened: a human must review it",
            decided.as_str()
        );
        // The lookup itself is already noted (and counted) above.
        let attempt = NewAttempt {
            kind: AttemptKind::Lookup,
            executor: self.name.clone(),
            outcome: AttemptOutcome::Found,
            evidence: Some(evidence),
            metadata: Some(serde_json::json!({"late_report": true})),
            sent_at: Some(at.sent),
        };
        self.gate.ledger().append_attempt(&rec.id, attempt).await?;
        report.late += 1;
        Ok(())
    }

    /// Records one lookup as an attempt of the operation.
    async fn note(
        &self,
        rec: &OperationRecord,
        at: &Timing,
        outcome: AttemptOutcome,
        evidence: String,
    ) -> Result<(), RouterError> {
        let attempt = NewAttempt {
            kind: AttemptKind::Lookup,
            executor: self.name.clone(),
            outcome,
            evidence: Some(evidence),
            metadata: None,
            sent_at: Some(at.sent),
        };
        self.gate.ledger().append_attempt(&rec.id, attempt).await?;
        crate::metrics::lookup(self.action_label(rec), outcome.as_str());
        Ok(())
    }
}

/// Whether a refused field is the result or inside it (`result`,
/// `result.serial`, `result[2]`), not a name of ours such as the actor.
fn is_result(field: &str) -> bool {
    field
        .strip_prefix("result")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// The destination may create its record at any moment until the dispatch
/// ended (and for an abandoned call, until the executor's timeout has
/// certainly passed), so the visibility lag counts from the latest of those
/// moments — never from when the dispatch was recorded.
fn last_dispatch(case: &Case<'_>, attempts: &[AttemptRecord]) -> Timestamp {
    attempts
        .iter()
        .filter(|a| a.kind == AttemptKind::Dispatch)
        .map(|a| {
            let deadline = a.sent_at.plus(case.timeout);
            a.finished_at.map_or(deadline, |f| f.max(deadline))
        })
        .max()
        .or_else(|| case.rec.first_dispatched_at.map(|t| t.plus(case.timeout)))
        .unwrap_or(case.info.since)
        .max(case.info.since)
}

/// Exponential schedule from `check_every` to `max_check_every`, never
/// later than the end of the visibility lag when that is still ahead.
fn next_check(
    now: Timestamp,
    lc: LookupContract,
    done: usize,
    lag_ends: Option<Timestamp>,
) -> Timestamp {
    let factor = 1u32 << done.min(16);
    let wait = lc
        .check_every
        .saturating_mul(factor)
        .min(lc.max_check_every);
    let next = now.plus(wait);
    match lag_ends {
        Some(end) if end > now && end < next => end,
        _ => next,
    }
}

/// Parameters match when they are equal as JSON values: member order does
/// not matter, but numbers compare as parsed, so `1` and `1.0` differ here
/// even though both canonicalise to `1` in the operation's fingerprint. A
/// lookup should map the destination's record back into the approved form;
/// a mismatch is never confirmed (it goes to review as diverged).
fn same_params(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    a == b
}

/// Whether a lookup of the operation was recorded less than `interval`
/// before `now`.
fn looked_up_within(attempts: &[AttemptRecord], now: Timestamp, interval: Duration) -> bool {
    attempts
        .iter()
        .filter(|a| a.kind == AttemptKind::Lookup)
        .map(|a| a.finished_at.unwrap_or(a.sent_at))
        .max()
        .is_some_and(|last| now.saturating_since(last) < interval)
}
