//! In-memory backend: **for tests and demos only — nothing is durable.**
//! Same semantics as every other backend (it runs the same driver); one
//! mutex makes every command atomic.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Mutex;

use crate::clock::{Clock, SystemClock, Timestamp};
use crate::driver::jobs::{self, SettleDue};
use crate::driver::{Backend, Config, Job, Store, execute};
use crate::error::LedgerError;
use crate::identity::{ActionName, Limits, OperationId, Scope};
use crate::ledger::ListFilter;
use crate::machine::{self, AttemptFinish, Retire};
use crate::model::{AttemptKind, AttemptOutcome, AttemptRecord, OperationRecord, State};
use crate::retention::{PurgeReport, Retention};
use crate::task::{TaskBudget, TaskId};

#[derive(Debug, Default)]
struct Inner {
    ops: HashMap<OperationId, OperationRecord>,
    attempts: HashMap<OperationId, Vec<AttemptRecord>>,
    tasks: HashMap<TaskId, TaskBudget>,
}

/// A ledger held in process memory. **Not durable**: everything is lost
/// when it is dropped. Use it in tests and demos; use
/// [`crate::SqliteLedger`] for anything real.
///
/// ```
/// # tokio_test_block_on(async {
/// use handover_ledger::*;
/// use serde_json::json;
/// use std::time::Duration;
///
/// let ledger = MemoryLedger::default();
/// let req = OperationRequest::new("tenant-1", "K-701", "create_shipment",
///     &json!({"order": 42}), &Limits::default())?;
/// let opts = BeginOptions::new("executor-a", Duration::from_secs(30));
/// let BeginOutcome::Started(claim) = ledger.begin(&req, &opts).await? else { panic!() };
/// ledger.mark_dispatched(&claim, Dispatch { executor: "executor-a".into(), metadata: None }).await?;
/// ledger.confirm(&claim, json!({"shipment": "S-1"}), None).await?;
/// assert!(matches!(ledger.begin(&req, &opts).await?, BeginOutcome::Replayed(_)));
/// # Ok::<(), LedgerError>(()) }).unwrap();
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Debug)]
pub struct MemoryLedger {
    inner: Mutex<Inner>,
    cfg: Config,
}

impl Default for MemoryLedger {
    fn default() -> Self {
        Self::new(
            Arc::new(SystemClock),
            Retention::default(),
            Limits::default(),
        )
    }
}

impl MemoryLedger {
    /// A ledger reading time from `clock`.
    pub fn new(clock: Arc<dyn Clock>, retention: Retention, limits: Limits) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            cfg: Config {
                clock,
                retention,
                limits,
            },
        }
    }
}

fn order_key(rec: &OperationRecord) -> (Timestamp, &OperationId) {
    (rec.created_at, &rec.id)
}

#[async_trait]
impl Store for Inner {
    async fn load(&mut self, id: &OperationId) -> Result<Option<OperationRecord>, LedgerError> {
        Ok(self.ops.get(id).cloned())
    }

    async fn find_blocker(
        &mut self,
        except: &OperationId,
        action: &ActionName,
        scope: Option<&Scope>,
        now: Timestamp,
    ) -> Result<Option<OperationRecord>, LedgerError> {
        Ok(self
            .ops
            .values()
            .filter(|r| {
                r.id != *except
                    && r.action == *action
                    && scope.is_none_or(|s| r.id.scope == *s)
                    && machine::blocks(r, now)
            })
            .min_by(|a, b| order_key(a).cmp(&order_key(b)))
            .cloned())
    }

    async fn due_expired(&mut self, now: Timestamp) -> Result<Vec<OperationRecord>, LedgerError> {
        Ok(self
            .ops
            .values()
            .filter(|r| machine::settle(r, now).is_some())
            .cloned()
            .collect())
    }

    async fn take_due_unknown(
        &mut self,
        now: Timestamp,
        filter: &crate::ledger::DueFilter,
        limit: usize,
    ) -> Result<Vec<OperationRecord>, LedgerError> {
        let mut due: Vec<&OperationRecord> = self
            .ops
            .values()
            .filter(|r| match &r.state {
                State::Unknown(u) => u.next_check_at.is_some_and(|t| t <= now) && filter.matches(r),
                _ => false,
            })
            .collect();
        due.sort_by_key(|r| {
            let next = match &r.state {
                State::Unknown(u) => u.next_check_at,
                _ => None,
            };
            (next, order_key(r))
        });
        Ok(due.into_iter().take(limit).cloned().collect())
    }

    async fn save(&mut self, rec: &OperationRecord) -> Result<(), LedgerError> {
        self.ops.insert(rec.id.clone(), rec.clone());
        Ok(())
    }

    async fn insert_attempt(&mut self, a: &AttemptRecord) -> Result<(), LedgerError> {
        self.attempts
            .entry(a.id.clone())
            .or_default()
            .push(a.clone());
        Ok(())
    }

    async fn finish_attempt(&mut self, f: &AttemptFinish) -> Result<(), LedgerError> {
        if let Some(list) = self.attempts.get_mut(&f.id) {
            for a in list.iter_mut().filter(|a| {
                a.epoch == Some(f.epoch)
                    && a.kind == AttemptKind::Dispatch
                    && a.outcome == AttemptOutcome::Pending
            }) {
                a.outcome = f.outcome;
                a.finished_at = Some(f.at);
                if f.evidence.is_some() {
                    a.evidence.clone_from(&f.evidence);
                }
            }
        }
        Ok(())
    }

    async fn load_task(&mut self, id: &TaskId) -> Result<Option<TaskBudget>, LedgerError> {
        Ok(self.tasks.get(id).cloned())
    }

    async fn save_task(&mut self, budget: &TaskBudget) -> Result<(), LedgerError> {
        self.tasks.insert(budget.id.clone(), budget.clone());
        Ok(())
    }

    async fn retire(&mut self, retire: Retire) -> Result<PurgeReport, LedgerError> {
        let Retire {
            tombstone_cutoff,
            delete_cutoff,
            tasks_expired,
        } = retire;
        let mut report = PurgeReport::default();
        let before = self.tasks.len();
        self.tasks.retain(|_, t| t.expires_at > tasks_expired);
        report.tasks_expired = (before - self.tasks.len()) as u64;
        let mut doomed = Vec::new();
        for rec in self.ops.values_mut() {
            let Some(at) = rec.state.decided_at() else {
                continue;
            };
            if at <= delete_cutoff {
                doomed.push(rec.id.clone());
            } else if at <= tombstone_cutoff && !rec.tombstone {
                machine::tombstone(rec);
                report.tombstoned += 1;
            }
        }
        for id in doomed {
            self.ops.remove(&id);
            self.attempts.remove(&id);
            report.deleted += 1;
        }
        Ok(report)
    }
}

impl Backend for MemoryLedger {
    /// Nothing to close: the records live as long as the value.
    async fn close_store(&self) {}

    async fn run<J: Job + 'static>(&self, job: J) -> Result<J::Output, LedgerError> {
        let mut inner = self.inner.lock().await;
        // The memory store cannot fail a write, so there is never a partial effect.
        execute(&job, &mut *inner, &self.cfg).await?
    }

    async fn get_record(&self, id: &OperationId) -> Result<Option<OperationRecord>, LedgerError> {
        self.run(jobs::get(id)).await
    }

    async fn list_records(&self, filter: &ListFilter) -> Result<Vec<OperationRecord>, LedgerError> {
        let mut inner = self.inner.lock().await;
        execute(&SettleDue, &mut *inner, &self.cfg).await??;
        let now = self.cfg.clock.now();
        let mut out: Vec<OperationRecord> = inner
            .ops
            .values()
            .filter(|r| filter.matches(r, now))
            .cloned()
            .collect();
        out.sort_by(|a, b| order_key(a).cmp(&order_key(b)));
        if let Some(after) = &filter.after {
            match inner.ops.get(after) {
                Some(from) => {
                    let from = order_key(from);
                    out.retain(|r| order_key(r) > from);
                }
                None => out.clear(),
            }
        }
        if let Some(n) = filter.limit {
            out.truncate(n);
        }
        Ok(out)
    }

    async fn attempt_log(&self, id: &OperationId) -> Result<Vec<AttemptRecord>, LedgerError> {
        let mut inner = self.inner.lock().await;
        execute(&jobs::get(id), &mut *inner, &self.cfg).await??;
        Ok(inner.attempts.get(id).cloned().unwrap_or_default())
    }
}
