//! The reconciler: works through `unknown` operations on a schedule and
//! resolves what it can prove (DESIGN §6).
//!
//! For each due operation owned by the reconciler, by what its action's
//! contract offers:
//! 1. an idempotency key the destination still remembers → re-send with the
//!    same destination key (the destination deduplicates);
//! 2. an authoritative lookup → a matching record confirms; a record with
//!    other parameters (or several records) is `diverged` and goes to review;
//!    an empty answer is proof of non-execution only once the visibility lag
//!    has passed since the last dispatch; a failed lookup proves nothing;
//! 3. neither → hand it to the review queue for an operator.
//!
//! Every lookup is recorded as an attempt. Nothing here ever sends a second
//! request without the destination's idempotency key.

mod lookup;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{
    AttemptKind, AttemptOutcome, Clock, ListFilter, NewAttempt, OperationRecord, OperationRequest,
    Owner, Resolution, ResolvedAs, State, StateKind, Timestamp, UnknownInfo, UnknownUpdate,
};

pub use lookup::{FoundRecord, Lookup, LookupContext};

use crate::config::{ActionContract, LookupContract};
use crate::error::RouterError;
use crate::gate::{Executor, PerformOptions, PerformOutcome, WriteGate};

/// What one reconciliation pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    /// Due operations looked at.
    pub checked: usize,
    /// Re-sent with the same destination key.
    pub resent: usize,
    /// Resolved as confirmed.
    pub confirmed: usize,
    /// Resolved as rejected (not applied).
    pub rejected: usize,
    /// Found with other parameters or duplicated: sent to review.
    pub diverged: usize,
    /// Handed to the review queue (no way to prove anything automatically).
    pub to_review: usize,
    /// Still unknown, checked again later.
    pub still_unknown: usize,
    /// Duplicate effects detected (several records for one operation).
    pub duplicates: usize,
}

/// Resolves unknown operations. Build it with the same [`WriteGate`] the
/// application performs through, register lookups and re-send executors per
/// action, then call [`Reconciler::run_once`] on a schedule (or
/// [`Reconciler::run`] as a background task).
pub struct Reconciler {
    gate: WriteGate,
    clock: Arc<dyn Clock>,
    name: String,
    lookups: HashMap<String, Arc<dyn Lookup>>,
    resenders: HashMap<String, Arc<dyn Executor>>,
}

impl std::fmt::Debug for Reconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconciler")
            .field("name", &self.name)
            .field("lookups", &self.lookups.keys().collect::<Vec<_>>())
            .field("resenders", &self.resenders.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Reconciler {
    /// A reconciler over `gate`'s ledger and contracts.
    pub fn new(gate: WriteGate, clock: Arc<dyn Clock>) -> Self {
        Self {
            gate,
            clock,
            name: "reconciler".to_owned(),
            lookups: HashMap::new(),
            resenders: HashMap::new(),
        }
    }

    /// Registers the authoritative lookup of `action`.
    pub fn with_lookup(mut self, action: &str, lookup: impl Lookup + 'static) -> Self {
        self.lookups.insert(action.to_owned(), Arc::new(lookup));
        self
    }

    /// Registers the executor used to re-send `action` with the same
    /// destination key while the destination still remembers it.
    pub fn with_resender(mut self, action: &str, executor: impl Executor + 'static) -> Self {
        self.resenders.insert(action.to_owned(), Arc::new(executor));
        self
    }

    /// Runs passes every `every` until `shutdown` resolves. Errors of one
    /// pass are logged and the next pass runs on schedule.
    pub async fn run(self, every: Duration, shutdown: impl Future<Output = ()>) {
        let mut shutdown = std::pin::pin!(shutdown);
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                _ = tick.tick() => {
                    if let Err(e) = self.run_once().await {
                        tracing::warn!(error = %e, "reconciliation pass failed");
                    }
                }
            }
        }
    }

    /// One pass over every unknown operation that is due now.
    pub async fn run_once(&self) -> Result<ReconcileReport, RouterError> {
        let now = self.clock.now();
        let due = self
            .gate
            .ledger()
            .list(&ListFilter {
                state: Some(StateKind::Unknown),
                diverged: Some(false),
                due_at: Some(now),
                ..ListFilter::default()
            })
            .await?;
        let mut report = ReconcileReport::default();
        for rec in due {
            let State::Unknown(info) = &rec.state else {
                continue;
            };
            if info.owner != Owner::Reconciler {
                continue;
            }
            report.checked += 1;
            self.reconcile(&rec, info, &mut report).await?;
        }
        crate::metrics::reconcile(&report);
        Ok(report)
    }

    async fn reconcile(
        &self,
        rec: &OperationRecord,
        info: &UnknownInfo,
        report: &mut ReconcileReport,
    ) -> Result<(), RouterError> {
        let contract = self.gate.contract(rec.action.as_str());
        let Some(params) = rec.params.clone() else {
            return Ok(());
        };
        let req = self.gate.request(
            rec.id.scope.as_str(),
            rec.id.key.as_str(),
            rec.action.as_str(),
            &params,
        )?;
        if let Some(resender) = self.resenders.get(rec.action.as_str())
            && let Some(idem) = &contract.idempotency
            && let Some(claim) = self
                .gate
                .ledger()
                .claim_for_resend(&rec.id, &self.gate.begin_options(&contract), idem.retention)
                .await?
        {
            report.resent += 1;
            let outcome = self
                .gate
                .dispatch(
                    &req,
                    claim,
                    &contract,
                    resender.as_ref(),
                    PerformOptions::default(),
                )
                .await?;
            match outcome {
                PerformOutcome::Confirmed { .. } => report.confirmed += 1,
                PerformOutcome::Rejected { .. } => report.rejected += 1,
                _ => report.still_unknown += 1,
            }
            return Ok(());
        }
        match (self.lookups.get(rec.action.as_str()), contract.lookup) {
            (Some(lookup), Some(lc)) => {
                self.look_up(rec, &req, info, lookup.as_ref(), &contract, lc, report)
                    .await
            }
            _ => {
                let reason = if contract.idempotency.is_some() {
                    "the destination's idempotency window has passed and there is no lookup: needs an operator"
                } else {
                    "no lookup and no idempotency key: needs an operator"
                };
                self.update(rec, Owner::Review, reason, None, false).await?;
                report.to_review += 1;
                Ok(())
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn look_up(
        &self,
        rec: &OperationRecord,
        req: &OperationRequest,
        info: &UnknownInfo,
        lookup: &dyn Lookup,
        contract: &ActionContract,
        lc: LookupContract,
        report: &mut ReconcileReport,
    ) -> Result<(), RouterError> {
        let ledger = self.gate.ledger();
        let ctx = LookupContext {
            operation: rec.id.clone(),
            action: rec.action.clone(),
            params: req.params(),
            destination_key: rec.destination_key.clone(),
        };
        let attempts = ledger.attempts(&rec.id).await?;
        let lookups_done = attempts
            .iter()
            .filter(|a| a.kind == AttemptKind::Lookup)
            .count();
        // The destination may create its record at any moment until the
        // dispatch ended (and for an abandoned call, until the executor's
        // timeout has certainly passed), so the visibility lag counts from the
        // latest of those moments — never from when the dispatch was recorded.
        let last_dispatch = attempts
            .iter()
            .filter(|a| a.kind == AttemptKind::Dispatch)
            .map(|a| {
                let deadline = a.sent_at.plus(contract.timeout);
                a.finished_at.map_or(deadline, |f| f.max(deadline))
            })
            .max()
            .or_else(|| rec.first_dispatched_at.map(|t| t.plus(contract.timeout)))
            .unwrap_or(info.since)
            .max(info.since);
        let lag_ends = last_dispatch.plus(lc.visibility_lag);
        let found = match tokio::time::timeout(contract.timeout, lookup.lookup(ctx)).await {
            Ok(r) => r,
            Err(_) => Err(format!("lookup timed out after {:?}", contract.timeout)),
        };
        let now = self.clock.now();
        let note = |outcome, evidence: String| NewAttempt {
            kind: AttemptKind::Lookup,
            executor: self.name.clone(),
            outcome,
            evidence: Some(evidence),
            metadata: None,
        };
        match found {
            Err(e) => {
                ledger
                    .append_attempt(&rec.id, note(AttemptOutcome::Error, e))
                    .await?;
                let next = self.next_check(now, lc, lookups_done, None);
                self.update(rec, Owner::Reconciler, &info.reason, Some(next), false)
                    .await?;
                report.still_unknown += 1;
            }
            Ok(records) if records.is_empty() && now >= lag_ends => {
                let evidence = format!(
                    "lookup found no record {} after the last dispatch ended (visibility lag {:?})",
                    humantime::format_duration(now.saturating_since(last_dispatch)),
                    lc.visibility_lag
                );
                ledger
                    .append_attempt(&rec.id, note(AttemptOutcome::NotFound, evidence.clone()))
                    .await?;
                self.resolve(
                    rec,
                    ResolvedAs::Rejected {
                        reason: "not applied: absent from the destination after its visibility lag"
                            .into(),
                    },
                    evidence,
                )
                .await?;
                report.rejected += 1;
            }
            Ok(records) if records.is_empty() => {
                let evidence =
                    "lookup found no record, but the visibility lag has not passed: not proof"
                        .to_owned();
                ledger
                    .append_attempt(&rec.id, note(AttemptOutcome::NotFound, evidence))
                    .await?;
                let next = self.next_check(now, lc, lookups_done, Some(lag_ends));
                self.update(rec, Owner::Reconciler, &info.reason, Some(next), false)
                    .await?;
                report.still_unknown += 1;
            }
            Ok(records) if records.len() > 1 => {
                let evidence = format!("lookup found {} records for one operation", records.len());
                ledger
                    .append_attempt(&rec.id, note(AttemptOutcome::Diverged, evidence.clone()))
                    .await?;
                self.update(
                    rec,
                    Owner::Review,
                    &format!("duplicate effect: {evidence}"),
                    None,
                    true,
                )
                .await?;
                crate::metrics::duplicate_effect(rec.action.as_str());
                report.duplicates += 1;
                report.diverged += 1;
            }
            Ok(mut records) => {
                let record = records.remove(0);
                if same_params(&record.params, &req.params()) {
                    let evidence = format!("lookup found the record: {}", record.result);
                    ledger
                        .append_attempt(&rec.id, note(AttemptOutcome::Found, evidence.clone()))
                        .await?;
                    self.resolve(
                        rec,
                        ResolvedAs::Confirmed {
                            result: record.result,
                        },
                        evidence,
                    )
                    .await?;
                    report.confirmed += 1;
                } else {
                    let evidence = format!(
                        "lookup found a record with other parameters: {}",
                        record.params
                    );
                    ledger
                        .append_attempt(&rec.id, note(AttemptOutcome::Diverged, evidence))
                        .await?;
                    self.update(
                        rec,
                        Owner::Review,
                        "diverged: the destination has other parameters",
                        None,
                        true,
                    )
                    .await?;
                    report.diverged += 1;
                }
            }
        }
        Ok(())
    }

    /// Exponential schedule from `check_every` to `max_check_every`, never
    /// later than the end of the visibility lag when that is still ahead.
    fn next_check(
        &self,
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

    async fn update(
        &self,
        rec: &OperationRecord,
        owner: Owner,
        reason: &str,
        next_check_at: Option<Timestamp>,
        diverged: bool,
    ) -> Result<(), RouterError> {
        self.gate
            .ledger()
            .update_unknown(
                &rec.id,
                UnknownUpdate {
                    owner,
                    reason: reason.to_owned(),
                    next_check_at,
                    diverged,
                },
            )
            .await?;
        Ok(())
    }

    async fn resolve(
        &self,
        rec: &OperationRecord,
        outcome: ResolvedAs,
        evidence: String,
    ) -> Result<(), RouterError> {
        let resolved = self
            .gate
            .ledger()
            .resolve(
                &rec.id,
                Resolution {
                    outcome,
                    evidence,
                    actor: self.name.clone(),
                },
            )
            .await?;
        if let State::Unknown(info) = &rec.state {
            crate::metrics::recovered(
                rec.action.as_str(),
                resolved.updated_at.saturating_since(info.since),
            );
        }
        if resolved.state.kind() == StateKind::Confirmed {
            crate::metrics::confirmed_action(
                rec.action.as_str(),
                resolved.updated_at.saturating_since(rec.created_at),
            );
        }
        Ok(())
    }
}

/// Parameters match when they are equal as JSON values (member order does
/// not matter; `1` and `1.0` differ, as they do in the fingerprint).
fn same_params(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    a == b
}
