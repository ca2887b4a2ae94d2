//! One user task: a policy and the budget every LLM call of the task
//! shares (an agent turn may make several calls under one budget).

use std::sync::{Arc, Mutex};

use handover_providers::{SendCounter, SendInfo, SendRefused};

use super::caller::Caller;
use super::report::Attempt;
use crate::budget::Budget;
use crate::config::{CommitPoint, Hop, PolicySettings};
use crate::metrics::PolicySeries;

/// A user task: the unit that is completed or not (the denominator of the
/// completion rate), with its one budget.
#[derive(Debug, Clone)]
pub struct Task {
    pub(crate) id: uuid::Uuid,
    pub(crate) policy: Arc<PolicySettings>,
    /// The series its calls record (its policy's).
    pub(crate) series: Arc<PolicySeries>,
    /// The steps it walks: its policy's chain, or the chain of the route
    /// the request's name resolved to.
    pub(crate) chain: Arc<[Hop]>,
    pub(crate) budget: Arc<Budget>,
    pub(crate) late: Arc<Mutex<Vec<Attempt>>>,
    /// Who waits for this task's calls, if anyone watches (see [`Caller`]).
    pub(crate) caller: Option<Caller>,
}

impl Task {
    /// The task's id (UUID v7).
    pub fn id(&self) -> uuid::Uuid {
        self.id
    }

    /// The policy it runs under.
    pub fn policy(&self) -> &PolicySettings {
        &self.policy
    }

    /// This task with its streams committed at `point` instead of its
    /// policy's (e.g. a chat UI streams from the first token while an agent
    /// loop on the same policy asks for whole answers). Budget and chain
    /// are unchanged.
    #[must_use]
    pub fn with_commit_point(mut self, point: CommitPoint) -> Self {
        if self.policy.commit_point != point {
            let mut policy = (*self.policy).clone();
            policy.commit_point = point;
            self.policy = Arc::new(policy);
        }
        self
    }

    /// This task with its calls watching `caller`: once it leaves, a call
    /// finishes the attempt in flight and starts nothing more (see
    /// [`Caller`]). Budget and chain are unchanged, and other clones of the
    /// task keep their own caller: one HTTP request's hang-up ends that
    /// request's call, not the other calls of a shared task.
    #[must_use]
    pub fn with_caller(mut self, caller: &Caller) -> Self {
        self.caller = Some(caller.clone());
        self
    }

    /// Whether this task's caller has left (never, if nobody watches).
    pub(crate) fn caller_left(&self) -> bool {
        self.caller.as_ref().is_some_and(Caller::has_left)
    }

    /// Attempts that answered (or failed) after the task had stopped waiting
    /// for them. Recorded for the record only: nothing is done with them.
    pub fn late_attempts(&self) -> Vec<Attempt> {
        self.late.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The provider/model steps each call walks, in fallback order.
    pub fn chain(&self) -> &[Hop] {
        &self.chain
    }

    /// Its budget (shared by every call, retry, sleep and switch).
    pub fn budget(&self) -> &Budget {
        &self.budget
    }
}

/// Counts HTTP requests at the transport against the task's budget: the
/// adapters call it right before a request is written (it refuses once the
/// budget is spent), and give the request back when it provably never left.
pub(crate) struct RequestCounter(pub(crate) Arc<Budget>);

impl SendCounter for RequestCounter {
    fn before_send(&self, _info: &SendInfo) -> Result<(), SendRefused> {
        self.0
            .try_send()
            .map_err(|e| SendRefused::new(format!("task budget exhausted ({})", e.as_str())))
    }

    fn not_sent(&self, _info: &SendInfo) {
        self.0.give_back();
    }
}
