//! The write gate (DESIGN §6): a business action is executed only through
//! the ledger — begin → claim → mark dispatched (durable before the first
//! byte) → the application's executor → confirmed / rejected / unknown.
//! The claim and the dispatch mark are one commit (the executor runs right
//! after the claim), the outcome a second one.
//!
//! Why writes block while unresolved: after a lost confirmation the effect
//! may exist. Retrying the model is fine; re-executing the action is not. So
//! an `unknown` operation answers every later `perform` with `Unresolved`
//! (and, per the action's block width, suspends its siblings) until the
//! reconciler proves what happened or an operator resolves it with evidence.
//! The only automatic re-send is one the destination itself makes safe: an
//! idempotency key it still remembers (inside its retention window), with
//! the same destination key as the first send.

mod dispatch;
mod executor;
mod http;
mod outcome;
mod tool_call;

use std::sync::Arc;

use handover_ledger::{ApproveOutcome, Clock, Dispatch, Ledger, OperationRequest};

pub use executor::{DispatchContext, Executor, ExecutorError, ExecutorOutcome};
pub use http::HttpJsonExecutor;
pub use outcome::PerformOutcome;
pub use tool_call::{FixedApproval, KeyPolicy, OperationKey, ProposedCall};

use crate::budget::{Budget, Exhausted};
use crate::config::{ActionContract, Config};
use crate::error::RouterError;
use crate::protocol::{Begun, Protocol, Report};
use crate::route::{FailureReason, TaskFailure};

/// Per-call options of [`WriteGate::perform`].
#[derive(Debug, Default, Clone, Copy)]
pub struct PerformOptions<'a> {
    /// The user task's budget: the executor gets at most what remains,
    /// and once its deadline has passed nothing is claimed or sent
    /// ([`RouterError::Task`] with the budget's reason).
    pub budget: Option<&'a Budget>,
    /// Attempt metadata recorded with the dispatch (e.g. the provider's
    /// tool-call id and model) — never part of the operation's identity.
    pub metadata: Option<&'a serde_json::Value>,
}

/// Executes business actions through the ledger.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::sync::Arc;
/// use handover_ledger::{Limits, ManualClock, MemoryLedger, Retention, Timestamp};
/// use handover_router::config::Config;
/// use handover_router::gate::{ExecutorOutcome, PerformOptions, PerformOutcome, WriteGate};
///
/// let clock = Arc::new(ManualClock::new(Timestamp::from_millis(0)));
/// let ledger = Arc::new(MemoryLedger::new(clock.clone(), Retention::default(), Limits::default()));
/// let config = Config::parse("[ledger]\nbackend = \"memory\"", &|_| None).unwrap();
/// let gate = WriteGate::new(ledger, config, clock);
///
/// let req = gate.request("tenant-1", "K-701", "create_shipment", &serde_json::json!({"sku": "A"})).unwrap();
/// let ship = |_ctx| async { Ok(ExecutorOutcome::Confirmed(serde_json::json!({"id": "rec-1"}))) };
/// let first = gate.perform(&req, &ship, PerformOptions::default()).await.unwrap();
/// assert!(matches!(first, PerformOutcome::Confirmed { .. }));
/// // A retry — or a fallback model re-proposing the same action — replays.
/// let again = gate.perform(&req, &ship, PerformOptions::default()).await.unwrap();
/// assert!(matches!(again, PerformOutcome::Replayed(_)));
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct WriteGate {
    protocol: Protocol,
    holder: String,
}

impl WriteGate {
    /// A gate over `ledger`, with action contracts from `config` and the
    /// ledger's clock (for next-check times).
    pub fn new(ledger: Arc<dyn Ledger>, config: Config, clock: Arc<dyn Clock>) -> Self {
        Self {
            protocol: Protocol::new(ledger, config, clock),
            holder: format!("gate-{}", uuid::Uuid::now_v7()),
        }
    }

    /// Names this gate's claims (e.g. the replica or executor name).
    pub fn with_holder(mut self, holder: impl Into<String>) -> Self {
        self.holder = holder.into();
        self
    }

    /// The holder name recorded in claims.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The write protocol this gate is the Rust door of; other doors (the
    /// gateway's operations API, the MCP guard) use the same one.
    pub fn protocol(&self) -> &Protocol {
        &self.protocol
    }

    /// The ledger.
    pub fn ledger(&self) -> &Arc<dyn Ledger> {
        self.protocol.ledger()
    }

    /// Builds a validated operation request with the configured limits.
    pub fn request(
        &self,
        scope: &str,
        key: &str,
        action: &str,
        params: &serde_json::Value,
    ) -> Result<OperationRequest, RouterError> {
        self.protocol.request(scope, key, action, params)
    }

    /// The contract of `action` (see [`Protocol::contract`]).
    pub fn contract(&self, action: &str) -> ActionContract {
        self.protocol.contract(action)
    }

    /// Records what the user approved — action, key and exact parameters —
    /// durably as `planned`, before any model proposes anything. From then
    /// on no proposal under this key with other parameters is executed
    /// (it gets [`PerformOutcome::Conflict`]), whichever model makes it and
    /// even if the process restarts and the application no longer has the
    /// parameters at hand. Approving the same parameters again changes
    /// nothing; other parameters are answered
    /// [`ApproveOutcome::Conflict`] and never replace the approved ones.
    pub async fn approve(&self, req: &OperationRequest) -> Result<ApproveOutcome, RouterError> {
        self.protocol.approve(req).await
    }

    /// Runs one business action through the ledger (see the module docs).
    ///
    /// Errors mean the ledger could not be used (with
    /// [`RouterError::is_ledger_unavailable`] nothing was sent; with
    /// [`RouterError::outcome_unknown`] the answer is not on record) or,
    /// before anything was claimed, that the task's budget has no time left
    /// ([`RouterError::task_failure`]). Every other answer — including
    /// "unknown" — is an `Ok` [`PerformOutcome`].
    #[tracing::instrument(
        name = "handover.perform",
        skip_all,
        fields(scope = %req.id().scope, key = %req.id().key, action = %req.action(), outcome)
    )]
    pub async fn perform(
        &self,
        req: &OperationRequest,
        executor: &dyn Executor,
        opts: PerformOptions<'_>,
    ) -> Result<PerformOutcome, RouterError> {
        if let Some(budget) = opts.budget
            && budget.remaining().is_zero()
        {
            return self.spent(req, budget).await;
        }
        // Claim and dispatch in one commit: the executor runs right after.
        let dispatch = Dispatch {
            executor: self.holder.clone(),
            metadata: opts.metadata.cloned(),
        };
        let begun = self
            .protocol
            .begin_dispatched(req, &self.holder, dispatch)
            .await?;
        let outcome = match begun {
            Begun::Started(started) => self.call(req, *started, executor, opts, true).await?,
            Begun::NotStarted(answer) => answer.into(),
        };
        // Counted in `handover_operations_total` by the protocol, where
        // every door's outcome is (see `crate::protocol`).
        tracing::Span::current().record("outcome", outcome.as_str());
        Ok(outcome)
    }

    /// `perform` under a task whose deadline has passed. The executor
    /// would get no time at all: a dispatch recorded now would time out at
    /// once, leaving an `unknown` for an operator. So what the ledger
    /// already knows is answered as usual (a replay, a conflict, unresolved
    /// …), and a claim is given back unsent with the budget's failure.
    async fn spent(
        &self,
        req: &OperationRequest,
        budget: &Budget,
    ) -> Result<PerformOutcome, RouterError> {
        match self.protocol.begin(req, &self.holder).await? {
            Begun::NotStarted(answer) => Ok(answer.into()),
            Begun::Started(started) => {
                self.protocol
                    .record(&started.claim, req.action(), Report::Abandoned)
                    .await?;
                Err(RouterError::Task(Box::new(TaskFailure {
                    reason: FailureReason::Budget(Exhausted::Deadline),
                    attempts: Vec::new(),
                    skipped: Vec::new(),
                    partials: Vec::new(),
                    spent: budget.spent(),
                })))
            }
        }
    }
}
