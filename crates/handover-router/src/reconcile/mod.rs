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
mod verify;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{
    Clock, ListFilter, OperationRecord, Owner, Resolution, ResolvedAs, State, StateKind, Timestamp,
    UnknownInfo, UnknownUpdate,
};

pub use lookup::{FoundRecord, Lookup, LookupContext};

use verify::Case;

use crate::error::RouterError;
use crate::gate::{Executor, PerformOptions, PerformOutcome, WriteGate};
use crate::protocol::Started;

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
                _ = tick.tick() => self.run_logged().await,
            }
        }
    }

    async fn run_logged(&self) {
        if let Err(e) = self.run_once().await {
            tracing::warn!(error = %e, "reconciliation pass failed");
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
            && let Some(claim) = self
                .gate
                .protocol()
                .resend_claim(&rec.id, &contract, self.gate.holder())
                .await?
        {
            report.resent += 1;
            let started = Started {
                claim,
                resend: true,
                contract: contract.clone(),
            };
            let outcome = self
                .gate
                .dispatch(&req, started, resender.as_ref(), PerformOptions::default())
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
                let case = Case {
                    rec,
                    info,
                    params: req.params(),
                    timeout: contract.timeout,
                    lc,
                };
                self.look_up(&case, lookup.as_ref(), report).await
            }
            _ => self.without_lookup(rec, info, &contract, report).await,
        }
    }

    /// No lookup, and no re-send now: while the destination still remembers
    /// the key, a caller (or a reconciler with a re-send executor) may still
    /// re-send safely, so wait for the window's end; after it, or without a
    /// key, only an operator can decide.
    async fn without_lookup(
        &self,
        rec: &OperationRecord,
        info: &UnknownInfo,
        contract: &crate::config::ActionContract,
        report: &mut ReconcileReport,
    ) -> Result<(), RouterError> {
        let window_ends = contract
            .idempotency
            .as_ref()
            .zip(rec.first_dispatched_at)
            .map(|(idem, first)| first.plus(idem.retention));
        if let Some(end) = window_ends
            && end > self.clock.now()
        {
            self.update(rec, Owner::Reconciler, &info.reason, Some(end), false)
                .await?;
            report.still_unknown += 1;
            return Ok(());
        }
        let reason = if contract.idempotency.is_some() {
            "the destination's idempotency window has passed and there is no lookup: needs an operator"
        } else {
            "no lookup and no idempotency key: needs an operator"
        };
        self.update(rec, Owner::Review, reason, None, false).await?;
        report.to_review += 1;
        Ok(())
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
