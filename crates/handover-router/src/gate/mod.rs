//! The write gate (DESIGN §6): a business action is executed only through
//! the ledger — begin → claim → mark dispatched (durable before the first
//! byte) → the application's executor → confirmed / rejected / unknown.
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
use std::time::Duration;

use handover_ledger::{
    ApproveOutcome, BeginOptions, BeginOutcome, BlockWidth, Clock, Ledger, Limits, OperationRequest,
};

pub use executor::{DispatchContext, Executor, ExecutorError, ExecutorOutcome};
pub use http::HttpJsonExecutor;
pub use outcome::PerformOutcome;
pub use tool_call::{FixedApproval, KeyPolicy, OperationKey, ProposedCall};

use crate::budget::Budget;
use crate::config::{ActionContract, BlockSetting, Config, defaults};
use crate::error::RouterError;

/// Per-call options of [`WriteGate::perform`].
#[derive(Debug, Default, Clone, Copy)]
pub struct PerformOptions<'a> {
    /// The user task's budget: the executor gets at most what remains.
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
    ledger: Arc<dyn Ledger>,
    config: Config,
    clock: Arc<dyn Clock>,
    holder: String,
    limits: Limits,
}

impl WriteGate {
    /// A gate over `ledger`, with action contracts from `config` and the
    /// ledger's clock (for next-check times).
    pub fn new(ledger: Arc<dyn Ledger>, config: Config, clock: Arc<dyn Clock>) -> Self {
        let limits = Limits {
            max_params_bytes: config.ledger().max_params_bytes,
            max_depth: config.ledger().max_params_depth,
        };
        Self {
            ledger,
            config,
            clock,
            holder: format!("gate-{}", uuid::Uuid::now_v7()),
            limits,
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

    /// The ledger.
    pub fn ledger(&self) -> &Arc<dyn Ledger> {
        &self.ledger
    }

    /// Builds a validated operation request with the configured limits.
    pub fn request(
        &self,
        scope: &str,
        key: &str,
        action: &str,
        params: &serde_json::Value,
    ) -> Result<OperationRequest, RouterError> {
        OperationRequest::new(scope, key, action, params, &self.limits)
            .map_err(|e| RouterError::Ledger(e.into()))
    }

    /// The contract of `action`: its configured one, or the most careful
    /// default (block only itself, no re-send, no lookup — an unknown
    /// outcome waits for an operator).
    pub fn contract(&self, action: &str) -> ActionContract {
        self.config
            .action(action)
            .cloned()
            .unwrap_or_else(|| ActionContract {
                name: action.to_owned(),
                block: BlockSetting::Operation,
                lease: self.config.ledger().lease,
                timeout: defaults::ACTION_TIMEOUT,
                idempotency: None,
                lookup: None,
            })
    }

    pub(crate) fn begin_options(&self, contract: &ActionContract) -> BeginOptions {
        BeginOptions {
            holder: self.holder.clone(),
            lease: contract.lease,
            block: match contract.block {
                BlockSetting::Operation => BlockWidth::Operation,
                BlockSetting::Scope => BlockWidth::Scope,
                BlockSetting::Action => BlockWidth::Action,
            },
        }
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
        let outcome = self.ledger.approve(req).await?;
        tracing::debug!(
            scope = %req.id().scope, key = %req.id().key, action = %req.action(),
            ?outcome, "approval recorded"
        );
        Ok(outcome)
    }

    /// Runs one business action through the ledger (see the module docs).
    ///
    /// Errors mean the ledger could not be used: with
    /// [`RouterError::is_ledger_unavailable`] nothing was sent. Every other
    /// answer — including "unknown" — is an `Ok` [`PerformOutcome`].
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
        let contract = self.contract(req.action().as_str());
        let begin = self
            .ledger
            .begin(req, &self.begin_options(&contract))
            .await?;
        let outcome = match begin {
            BeginOutcome::Started(claim) => {
                self.dispatch(req, claim, &contract, executor, opts).await?
            }
            BeginOutcome::Unresolved(info) => match self.resend_claim(req, &contract).await? {
                Some(claim) => self.dispatch(req, claim, &contract, executor, opts).await?,
                None => PerformOutcome::Unresolved(info),
            },
            BeginOutcome::InProgress {
                holder,
                lease_until,
                ..
            } => PerformOutcome::InProgress {
                holder,
                lease_until,
            },
            BeginOutcome::Conflict {
                recorded,
                requested,
            } => PerformOutcome::Conflict {
                recorded,
                requested,
            },
            BeginOutcome::Replayed(t) => PerformOutcome::Replayed(t),
            BeginOutcome::Suspended { blocked_by, info } => {
                PerformOutcome::Suspended { blocked_by, info }
            }
            BeginOutcome::Cancelled { reason } => PerformOutcome::Cancelled { reason },
        };
        tracing::Span::current().record("outcome", outcome.as_str());
        crate::metrics::operation(req.action().as_str(), outcome.as_str());
        Ok(outcome)
    }

    /// Re-claims an unknown operation for a re-send with the same
    /// destination key, if the destination still remembers that key.
    async fn resend_claim(
        &self,
        req: &OperationRequest,
        contract: &ActionContract,
    ) -> Result<Option<handover_ledger::Claim>, RouterError> {
        let Some(idem) = &contract.idempotency else {
            return Ok(None);
        };
        Ok(self
            .ledger
            .claim_for_resend(req.id(), &self.begin_options(contract), idem.retention)
            .await?)
    }

    pub(crate) fn now_plus(&self, d: Duration) -> handover_ledger::Timestamp {
        self.clock.now().plus(d)
    }
}
