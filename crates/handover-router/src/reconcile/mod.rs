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

mod http;
mod lookup;
mod verify;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{
    ActionName, Clock, DueFilter, OperationRecord, Owner, Resolution, ResolvedAs, State, StateKind,
    Timestamp, UnknownInfo, UnknownUpdate,
};

pub use http::HttpLookup;
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
    /// Operations whose reconciliation failed (e.g. the ledger refused a
    /// write): logged and skipped; due again once the hold passes.
    pub failed: usize,
    /// Records found after their operation was decided otherwise (an
    /// operator rejected it while the lookup ran): the decision stands,
    /// the finding is kept in the attempt log for a human.
    pub late: usize,
}

/// Resolves unknown operations. Build it with the same [`WriteGate`] the
/// application performs through, register lookups and re-send executors per
/// action, then call [`Reconciler::run_once`] on a schedule (or
/// [`Reconciler::run`] as a background task).
pub struct Reconciler {
    gate: WriteGate,
    clock: Arc<dyn Clock>,
    name: String,
    batch: usize,
    hold: Duration,
    due: DueFilter,
    lookups: HashMap<String, Arc<dyn Lookup>>,
    resenders: HashMap<String, Arc<dyn Executor>>,
    on_pass: Option<PassHook>,
    registered_only: bool,
    /// Actions taken with `registered_only` although nothing is registered
    /// for them: handed to review.
    reviewed: Vec<String>,
}

type PassHook = Box<dyn Fn(&Result<ReconcileReport, RouterError>) + Send + Sync>;

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
            batch: 100,
            hold: Duration::from_secs(60),
            due: DueFilter::default(),
            lookups: HashMap::new(),
            resenders: HashMap::new(),
            on_pass: None,
            registered_only: false,
            reviewed: Vec::new(),
        }
    }

    /// How long an operation this reconciler took stays its own before
    /// another replica may take it (default 60 s): longer than one lookup
    /// takes. A reconciler that dies mid-pass just lets it pass.
    pub fn with_hold(mut self, hold: Duration) -> Self {
        self.hold = hold;
        self
    }

    /// Only takes the due operations `due` admits (default: all), e.g.
    /// leaving the actions whose lookup agents run through the gateway's
    /// pull API to them.
    pub fn with_filter(mut self, due: DueFilter) -> Self {
        self.due = due;
        self
    }

    /// The name recorded as the executor of lookup attempts and the actor
    /// of resolutions (default `reconciler`).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Applies a lookup someone else ran (e.g. an agent reporting through
    /// the gateway's pull API) to the unknown operation `rec`, by the same
    /// rules as a lookup of the reconciler's own: found with the approved
    /// parameters confirms, other parameters or several records diverge to
    /// review, empty proves absence only after the visibility lag, an error
    /// proves nothing. A report that proves nothing, made less than the
    /// contract's `check_every` after the operation's last recorded lookup,
    /// is not recorded (and moves no schedule): one client cannot grow an
    /// operation's attempt log faster than the schedule itself would.
    /// `rec` must be unknown, owned by the reconciler, not
    /// diverged, and its action must have a lookup contract; otherwise
    /// nothing is changed and `Ok(None)` is returned.
    pub async fn apply_lookup(
        &self,
        rec: &OperationRecord,
        answer: Result<Vec<FoundRecord>, String>,
    ) -> Result<Option<ReconcileReport>, RouterError> {
        let State::Unknown(info) = &rec.state else {
            return Ok(None);
        };
        let contract = self.gate.contract(rec.action.as_str());
        let (Some(lc), Some(params)) = (contract.lookup, rec.params.clone()) else {
            return Ok(None);
        };
        if info.owner != Owner::Reconciler || info.diverged {
            return Ok(None);
        }
        let case = Case {
            rec,
            info,
            params,
            timeout: contract.timeout,
            lc,
            reported: true,
        };
        let reported = move |_ctx: LookupContext| {
            let answer = answer.clone();
            async move { answer }
        };
        let mut report = ReconcileReport {
            checked: 1,
            ..ReconcileReport::default()
        };
        self.look_up(&case, &reported, &mut report).await?;
        crate::metrics::reconcile(&report);
        Ok(Some(report))
    }

    /// How many due operations one take leases at once (default 100).
    pub fn with_batch(mut self, batch: usize) -> Self {
        self.batch = batch.max(1);
        self
    }

    /// Registers the authoritative lookup of `action`. It runs only if the
    /// action's contract declares one (`[actions.NAME.lookup]`, which says
    /// its visibility lag and schedule, with or without a `url`): without
    /// it an unknown operation of the action belongs to the review queue,
    /// and registering a lookup logs a warning saying so.
    pub fn with_lookup(mut self, action: &str, lookup: impl Lookup + 'static) -> Self {
        if self.gate.contract(action).lookup.is_none() {
            tracing::warn!(
                action,
                "a lookup is registered for an action whose contract declares none                  ([actions.{action}.lookup]): it will not run"
            );
        }
        self.lookups.insert(action.to_owned(), Arc::new(lookup));
        self
    }

    /// Registers the executor used to re-send `action` with the same
    /// destination key while the destination still remembers it. It runs
    /// only if the action's contract declares the destination's key
    /// (`[actions.NAME.idempotency]`); registering one without it logs a
    /// warning.
    pub fn with_resender(mut self, action: &str, executor: impl Executor + 'static) -> Self {
        if self.gate.contract(action).idempotency.is_none() {
            tracing::warn!(
                action,
                "a re-sender is registered for an action whose contract declares no \
                 idempotency key ([actions.{action}.idempotency]): it will not run"
            );
        }
        self.resenders.insert(action.to_owned(), Arc::new(executor));
        self
    }

    /// Looks only at operations of actions with a registered lookup or
    /// re-sender, leaving every other unknown operation to the reconciler
    /// that serves it (e.g. one door of several sharing a ledger: the MCP
    /// proxy reconciles its MCP actions only). Without this, an action with
    /// nothing registered is handed to the review queue.
    #[must_use]
    pub fn registered_actions_only(mut self) -> Self {
        self.registered_only = true;
        self
    }

    /// With [`registered_actions_only`](Self::registered_actions_only),
    /// also takes `action`'s due unknown operations: with neither a lookup
    /// nor a re-sender registered, it hands them to the review queue. The
    /// door that performs an action nothing can look up says a person must
    /// decide; otherwise an unknown left by a crash (its lease passed) kept
    /// owner "reconciler" with no reconciler taking it.
    #[must_use]
    pub fn with_review(mut self, action: &str) -> Self {
        if !self.reviewed.iter().any(|a| a == action) {
            self.reviewed.push(action.to_owned());
        }
        self
    }

    /// Runs passes every `every` until `shutdown` resolves. Errors of one
    /// pass are logged and the next pass runs on schedule.
    pub async fn run(self, every: Duration, shutdown: impl Future<Output = ()>) {
        let mut shutdown = std::pin::pin!(shutdown);
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut ages = BTreeMap::new();
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                _ = tick.tick() => self.run_logged(&mut ages).await,
            }
        }
    }

    /// Updates the oldest-unknown-age gauge per action (every unknown
    /// operation, whoever owns it: the age is what an operator watches),
    /// and the review queue's gauges from the same list.
    async fn oldest_unknown(
        &self,
        ages: &mut BTreeMap<String, Duration>,
    ) -> Result<(), RouterError> {
        let now = self.clock.now();
        let unknown = self
            .gate
            .ledger()
            .list(&handover_ledger::ListFilter {
                state: Some(StateKind::Unknown),
                ..Default::default()
            })
            .await?;
        for age in ages.values_mut() {
            *age = Duration::ZERO;
        }
        let mut oldest_of_all = Duration::ZERO;
        for rec in &unknown {
            if let State::Unknown(info) = &rec.state {
                let age = now.saturating_since(info.since);
                let label = self.action_label(rec);
                let oldest = ages.entry(label.to_owned()).or_default();
                *oldest = (*oldest).max(age);
                oldest_of_all = oldest_of_all.max(age);
            }
        }
        crate::metrics::oldest_unknown(ages);
        // The same list the review queue is: its gauges stay current
        // wherever operations are written (the gateway's HTTP doors too),
        // not only when an operator lists the queue.
        crate::metrics::review_queue(unknown.len(), oldest_of_all);
        Ok(())
    }

    /// Calls `hook` after every pass [`Reconciler::run`] makes, with its
    /// report (for metrics, or a test waiting for a pass to finish).
    pub fn on_pass(
        mut self,
        hook: impl Fn(&Result<ReconcileReport, RouterError>) + Send + Sync + 'static,
    ) -> Self {
        self.on_pass = Some(Box::new(hook));
        self
    }

    async fn run_logged(&self, ages: &mut BTreeMap<String, Duration>) {
        let pass = self.run_once().await;
        if let Err(e) = self.oldest_unknown(ages).await {
            tracing::warn!(error = %e, "could not measure the oldest unknown operations");
        }
        if let Err(e) = &pass {
            tracing::warn!(error = %e, "reconciliation pass failed");
        }
        if let Some(hook) = &self.on_pass {
            hook(&pass);
        }
    }

    /// One pass over every unknown operation that is due now. Operations
    /// are leased from the ledger in batches
    /// ([`Ledger::take_due_unknown`](handover_ledger::Ledger::take_due_unknown)),
    /// so replicas running passes at the same time share the work and never
    /// look one operation up twice in one schedule step. One operation that
    /// fails is logged, counted in [`ReconcileReport::failed`] and skipped;
    /// the pass goes on. `Err` only when the ledger cannot hand out work.
    pub async fn run_once(&self) -> Result<ReconcileReport, RouterError> {
        let mut report = ReconcileReport::default();
        let due = self.due_filter();
        loop {
            let taken = self
                .gate
                .ledger()
                .take_due_unknown(&due, self.batch, self.hold)
                .await?;
            let more = taken.len() >= self.batch;
            for rec in &taken {
                self.reconcile_one(rec, &mut report).await;
            }
            if !more {
                break;
            }
        }
        crate::metrics::reconcile(&report);
        Ok(report)
    }

    /// The filter a pass leases with: with [`Reconciler::registered_actions_only`],
    /// narrowed to the actions that have a lookup or a re-sender.
    fn due_filter(&self) -> DueFilter {
        let mut due = self.due.clone();
        if self.registered_only {
            let mut actions: Vec<ActionName> = Vec::new();
            let registered = self.lookups.keys().chain(self.resenders.keys());
            for name in registered.chain(self.reviewed.iter()) {
                if let Ok(a) = ActionName::new(name.as_str())
                    && !actions.contains(&a)
                {
                    actions.push(a);
                }
            }
            due.actions = Some(match due.actions.take() {
                Some(only) => actions.into_iter().filter(|a| only.contains(a)).collect(),
                None => actions,
            });
        }
        due
    }

    async fn reconcile_one(&self, rec: &OperationRecord, report: &mut ReconcileReport) {
        let State::Unknown(info) = &rec.state else {
            return;
        };
        if info.owner != Owner::Reconciler || info.diverged {
            return;
        }
        report.checked += 1;
        if let Err(e) = self.reconcile(rec, info, report).await {
            report.failed += 1;
            tracing::warn!(
                operation = %rec.id, action = %rec.action, error = %e,
                "reconciling one operation failed; skipped until its hold passes"
            );
        }
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
                .resend_claim(&rec.id, &contract, self.gate.holder(), true)
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
                    reported: false,
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
                self.action_label(rec),
                resolved.updated_at.saturating_since(info.since),
            );
        }
        if resolved.state.kind() == StateKind::Confirmed {
            crate::metrics::confirmed_action(
                self.action_label(rec),
                resolved.updated_at.saturating_since(rec.created_at),
            );
        }
        Ok(())
    }
}

impl Reconciler {
    /// The metrics label of `rec`'s action (see `Protocol::action_label`).
    fn action_label<'a>(&'a self, rec: &'a OperationRecord) -> &'a str {
        self.gate.protocol().action_label(rec.action.as_str())
    }
}
