//! The metrics of DESIGN §9, computed from what the scenarios actually did:
//! the user tasks they served, the destination's records and the ledger.

use std::sync::Mutex;
use std::time::Duration;

use handover::ledger::{AttemptKind, AttemptOutcome, State};
use handover_testkit::MockDestination;

use super::store::Store;

/// What one scenario (or a whole run) amounted to.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Totals {
    /// Scenarios settled.
    pub scenarios: usize,
    /// Original user tasks (the denominator): a retry of the same task is
    /// not a new task.
    pub tasks: usize,
    /// Tasks that ended with a usable answer or a confirmed action.
    pub completed: usize,
    /// Records the destinations created.
    pub effects: usize,
    /// Operations confirmed (now or by reconciliation / an operator).
    pub confirmed: usize,
    /// Effects beyond one per operation.
    pub duplicates: usize,
    /// Operations still unknown at the end, with their age.
    pub unresolved: Vec<Duration>,
    /// Unknown → resolved, per operation that was unknown and got resolved.
    pub recoveries: Vec<Duration>,
}

impl Totals {
    /// Completed tasks over original tasks.
    pub fn completion_rate(&self) -> f64 {
        if self.tasks == 0 {
            return 1.0;
        }
        self.completed as f64 / self.tasks as f64
    }

    fn add(&mut self, other: &Totals) {
        self.scenarios += other.scenarios;
        self.tasks += other.tasks;
        self.completed += other.completed;
        self.effects += other.effects;
        self.confirmed += other.confirmed;
        self.duplicates += other.duplicates;
        self.unresolved.extend(other.unresolved.iter().copied());
        self.recoveries.extend(other.recoveries.iter().copied());
    }

    /// One JSON line for logs and `docs/testing.md`.
    pub fn to_json(&self) -> serde_json::Value {
        let secs = |v: &[Duration]| v.iter().map(Duration::as_secs_f64).collect::<Vec<_>>();
        let max = |v: &[Duration]| v.iter().max().map_or(0.0, Duration::as_secs_f64);
        serde_json::json!({
            "scenarios": self.scenarios,
            "tasks": self.tasks,
            "completed_tasks": self.completed,
            "completion_rate": (self.completion_rate() * 1000.0).round() / 1000.0,
            "effects": self.effects,
            "confirmed_operations": self.confirmed,
            "duplicates": self.duplicates,
            "unresolved": self.unresolved.len(),
            "unresolved_max_age_s": max(&self.unresolved),
            "recovery_s": secs(&self.recoveries),
            "recovery_max_s": max(&self.recoveries),
        })
    }
}

/// Collects [`Totals`] as scenarios report into it.
#[derive(Debug, Default)]
pub struct Scoreboard {
    totals: Mutex<Totals>,
}

impl Scoreboard {
    fn with<R>(&self, f: impl FnOnce(&mut Totals) -> R) -> R {
        f(&mut self.totals.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// One original user task, and whether the user got a usable end
    /// (an answer, or a confirmed action).
    pub fn task(&self, completed: bool) {
        self.with(|t| {
            t.tasks += 1;
            t.completed += usize::from(completed);
        });
    }

    /// Closes a scenario: reads every operation of `store` and the effects
    /// at `dest` (if the scenario had a destination), and adds them up.
    pub async fn settle(&self, store: &Store, dest: Option<&MockDestination>) {
        let now = store.clock.clone();
        let mut mine = Totals {
            scenarios: 1,
            effects: dest.map_or(0, MockDestination::effect_count),
            ..Totals::default()
        };
        for rec in store.all().await {
            let effects = dest.map_or(0, |d| d.effects_for(&rec.destination_key));
            mine.duplicates += effects.saturating_sub(1);
            if matches!(rec.state, State::Confirmed { .. }) {
                mine.confirmed += 1;
            }
            if let State::Unknown(info) = &rec.state {
                use handover::ledger::Clock;
                mine.unresolved.push(now.now().saturating_since(info.since));
                continue;
            }
            let Some(decided) = rec.state.decided_at() else {
                continue;
            };
            let attempts = store.ledger().attempts(&rec.id).await.expect("attempts");
            let became_unknown = attempts
                .iter()
                .filter(|a| a.kind == AttemptKind::Dispatch && a.outcome == AttemptOutcome::Unknown)
                .filter_map(|a| a.finished_at)
                .min();
            if let Some(since) = became_unknown {
                mine.recoveries.push(decided.saturating_since(since));
            }
        }
        self.with(|t| t.add(&mine));
    }

    /// Everything reported so far.
    pub fn totals(&self) -> Totals {
        self.with(|t| t.clone())
    }
}
