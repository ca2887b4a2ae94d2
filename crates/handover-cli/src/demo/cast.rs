//! The demo's cast (the mocks, the ledger, the router, the gate) and the
//! narration: every timeline line is read back from where it happened.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{Context, bail};
use handover::ledger::{
    AttemptKind, Ledger, ListFilter, OperationId, OperationRecord, SqliteLedger, State, StateKind,
    Timestamp,
};
use handover::providers::ChatRequest;
use handover::router::gate::{FixedApproval, PerformOptions, PerformOutcome, WriteGate};
use handover::router::reconcile::Reconciler;
use handover::router::route::{Attempt, AttemptResult, Completion, Router, Task};
use handover_testkit::{MockDestination, MockProvider};

use super::Summary;
use super::app::{self, ACTION};
use super::timeline::{Actor, DemoClock, Timeline};
use crate::term::rfc3339;

/// Everything the story needs in one place.
pub(super) struct Cast {
    pub(super) tl: Timeline,
    pub(super) ledger: Arc<SqliteLedger>,
    pub(super) router: Router,
    pub(super) gate: WriteGate,
    pub(super) primary: MockProvider,
    pub(super) fallback: MockProvider,
    pub(super) dest: MockDestination,
    pub(super) clock: DemoClock,
    pub(super) id: OperationId,
    pub(super) approval: FixedApproval,
    pub(super) attempts: usize,
    pub(super) model_calls: usize,
    pub(super) refused: usize,
}

impl Cast {
    pub(super) fn since(&self, t: Timestamp) -> String {
        format!("+{:.3}s", self.tl.offset(t).as_secs_f64())
    }

    pub(super) async fn record(&self) -> anyhow::Result<OperationRecord> {
        self.ledger
            .get(&self.id)
            .await?
            .context("the demo's operation is missing from the ledger")
    }

    /// Puts the router's attempts on the timeline (their times are relative
    /// to the task's start).
    fn push_attempts(&mut self, task_start: Timestamp, attempts: &[Attempt]) {
        for a in attempts {
            self.push_attempt(task_start, a);
        }
    }

    /// Calls the model and puts every attempt on the timeline.
    pub(super) async fn chat(
        &mut self,
        task: &Task,
        task_start: Timestamp,
        req: &ChatRequest,
    ) -> anyhow::Result<Completion> {
        self.model_calls += 1;
        let result = self.router.chat(task, req).await;
        let attempts = match &result {
            Ok(c) => c.attempts.clone(),
            Err(e) => e
                .task_failure()
                .map(|f| f.attempts.clone())
                .unwrap_or_default(),
        };
        self.push_attempts(task_start, &attempts);
        Ok(result?)
    }

    fn push_attempt(&mut self, task_start: Timestamp, a: &Attempt) {
        self.attempts += 1;
        let label = Some(format!("attempt {}", self.attempts));
        let what = match a.result {
            AttemptResult::Answered => format!("{} answered", a.model),
            AttemptResult::Failed(class) => {
                let next = if class.as_str() == "overloaded" {
                    " (503): falling back"
                } else {
                    ""
                };
                format!("{} failed: {class}{next}", a.model)
            }
            _ => crate::chat::result_name(&a.result),
        };
        self.tl.push_at(
            task_start.plus(a.ended),
            Actor::Provider,
            &a.provider,
            label,
            what,
            None,
        );
    }

    pub(super) async fn replay_earlier(&mut self, prev: &OperationRecord) -> anyhow::Result<()> {
        let Some(params) = &prev.params else {
            return Ok(());
        };
        let req = self.gate.request(
            prev.id.scope.as_str(),
            prev.id.key.as_str(),
            prev.action.as_str(),
            params,
        )?;
        let before = self.dest.action_requests().await;
        let out = self
            .gate
            .perform(&req, &app::executor(&self.dest), PerformOptions::default())
            .await?;
        let sent = self.dest.action_requests().await - before;
        let decided = prev.state.decided_at().map(rfc3339).unwrap_or_default();
        self.tl.push(
            Actor::Ledger,
            "ledger",
            None,
            format!(
                "already has {} {} confirmed at {decided} (earlier run); asked again: {} ({sent} request(s) sent)",
                prev.id.scope,
                prev.id.key,
                out.as_str()
            ),
            Some("confirmed, replayed"),
        );
        Ok(())
    }

    pub(super) async fn narrate_first_dispatch(
        &mut self,
        out: &PerformOutcome,
    ) -> anyhow::Result<()> {
        let rec = self.record().await?;
        let attempts = self.ledger.attempts(&self.id).await?;
        let Some(dispatch) = attempts.iter().find(|a| a.kind == AttemptKind::Dispatch) else {
            bail!("the write gate recorded no dispatch ({})", out.as_str());
        };
        let label = || Some("dispatch 1".to_owned());
        self.tl.push_at(
            rec.created_at,
            Actor::Ledger,
            "ledger",
            None,
            format!(
                "begin: claimed by {} (epoch {})",
                dispatch.executor,
                dispatch.epoch.map_or(0, |e| e.0)
            ),
            Some("new -> claimed"),
        );
        self.tl.push_at(
            dispatch.sent_at,
            Actor::Ledger,
            "ledger",
            label(),
            format!(
                "recorded as dispatched BEFORE the first byte (destination key {})",
                dispatch.destination_key
            ),
            Some("claimed -> dispatched"),
        );
        for r in self.dest.records() {
            self.tl.push_at(
                r.created_at,
                Actor::Destination,
                "destination",
                label(),
                format!(
                    "POST /records: created {} ... then the connection dropped before the answer",
                    r.id
                ),
                None,
            );
        }
        let at = dispatch.finished_at.unwrap_or(rec.updated_at);
        match (&rec.state, out) {
            (State::Unknown(info), PerformOutcome::Unresolved(_)) => {
                let evidence = dispatch.evidence.clone().unwrap_or_default();
                let what = format!(
                    "no confirmation ({evidence}): outcome UNKNOWN, owner {}, next check {}",
                    info.owner,
                    info.next_check_at
                        .map_or_else(|| "-".to_owned(), |t| self.since(t))
                );
                self.tl.push_at(
                    at,
                    Actor::Gate,
                    "write gate",
                    label(),
                    what,
                    Some("dispatched -> unknown"),
                );
            }
            (state, out) => self.tl.push_at(
                at,
                Actor::Gate,
                "write gate",
                label(),
                format!("answered {}", out.as_str()),
                Some(state.kind().as_str()),
            ),
        }
        Ok(())
    }

    pub(super) async fn reconcile(&mut self) -> anyhow::Result<()> {
        let reconciler = Reconciler::new(self.gate.clone(), Arc::new(self.clock.clone()))
            .with_lookup(ACTION, app::lookup(&self.dest, self.id.clone()));
        for _ in 0..4 {
            let rec = self.record().await?;
            let State::Unknown(info) = &rec.state else {
                break;
            };
            // A pass runs on a one-second tick once the check is due.
            if let Some(next) = info.next_check_at {
                self.clock
                    .wait_until(next.plus(std::time::Duration::from_secs(1)));
            }
            reconciler.run_once().await?;
            let after = self.record().await?;
            let attempts = self.ledger.attempts(&self.id).await?;
            let lookups: Vec<_> = attempts
                .iter()
                .filter(|a| a.kind == AttemptKind::Lookup)
                .collect();
            let Some(last) = lookups.last() else {
                bail!("the reconciler did not look the operation up");
            };
            let label = Some(format!("lookup {}", lookups.len()));
            let evidence = match &after.state {
                State::Confirmed { result, .. } => format!(
                    "found {} with the approved parameters",
                    result["id"].as_str().unwrap_or("the record")
                ),
                _ => last.evidence.clone().unwrap_or_default(),
            };
            let state = match &after.state {
                State::Unknown(i) => format!(
                    "unknown, next check {}",
                    i.next_check_at
                        .map_or_else(|| "-".to_owned(), |t| self.since(t))
                ),
                s => format!("unknown -> {}", s.kind()),
            };
            self.tl.push_at(
                last.sent_at,
                Actor::Reconciler,
                "reconciler",
                label,
                format!("GET /records?key={}: {evidence}", after.destination_key),
                Some(&state),
            );
        }
        Ok(())
    }

    pub(super) async fn summary(&self) -> anyhow::Result<Summary> {
        let records = self.dest.records();
        let mut per_reference: HashMap<String, usize> = HashMap::new();
        for r in &records {
            let reference = r.body["reference"].as_str().unwrap_or_default().to_owned();
            *per_reference.entry(reference).or_default() += 1;
        }
        let duplicates = per_reference.values().map(|n| n - 1).sum();
        let unknown = self
            .ledger
            .list(&ListFilter {
                state: Some(StateKind::Unknown),
                scope: Some(self.id.scope.clone()),
                ..ListFilter::default()
            })
            .await?;
        let unresolved = unknown.iter().filter(|r| r.id == self.id).count();
        Ok(Summary {
            tasks: 1,
            model_calls: self.model_calls,
            attempts: self.attempts,
            provider_requests: self.primary.requests().await + self.fallback.requests().await,
            destination_requests: self.dest.action_requests().await,
            lookups: self.dest.lookup_requests().await,
            effects: self.dest.effect_count(),
            duplicates,
            unresolved,
            left_unknown_earlier: unknown.len() - unresolved,
            final_state: self.record().await?.state.kind().to_string(),
            refused: self.refused,
        })
    }
}
