//! From a model's tool call to an operation: the key comes from the user's
//! approval (through an application-supplied [`KeyPolicy`]), never from the
//! provider's tool-call id, which is only attempt metadata. So a fallback
//! model that re-proposes the same approved action under a new tool-call id
//! maps to the same operation (and gets the recorded outcome), and one that
//! proposes changed parameters gets a conflict.
//!
//! Two ways to bind the parameters (`docs/ledger.md`, "Approvals"):
//! * **light**: the approval names action and key only; the first proposal
//!   that reaches the ledger records the parameters, and every later one
//!   must match them;
//! * **explicit**: the application records the user's approval with its
//!   parameters ([`WriteGate::approve`], durable) and/or gives the policy
//!   the approved parameters ([`FixedApproval::with_params`]): then no
//!   proposal with other parameters is ever executed, whichever model makes
//!   it first, even after a restart that lost the first proposal.

use handover_ledger::{OperationRequest, ValidationError};
use handover_providers::ToolCall;
use serde_json::json;

use super::executor::Executor;
use super::{PerformOptions, PerformOutcome, WriteGate};
use crate::error::RouterError;

/// A tool call a model proposed, with who proposed it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProposedCall {
    /// The provider's tool-call id (attempt metadata only).
    pub tool_call_id: String,
    /// The tool (action) name.
    pub action: String,
    /// Parsed arguments.
    pub arguments: serde_json::Value,
    /// Provider that proposed it, if known.
    pub provider: Option<String>,
    /// Model that proposed it, if known.
    pub model: Option<String>,
}

impl ProposedCall {
    /// Parses a provider tool call; malformed argument JSON is an error
    /// naming the field.
    ///
    /// The arguments are JSON text a model wrote, so they get the check
    /// every door gives text before parsing it into values
    /// ([`validate_json_text`](handover_ledger::validate_json_text)): a
    /// number a parser would round (`123456789012345678901234`) or a
    /// member named twice (`{"qty": 1, "qty": 100}`) is refused with a
    /// validation error naming its path under `params`, instead of being
    /// executed as one silent reading of it.
    pub fn from_tool_call(
        call: &ToolCall,
        provider: Option<&str>,
        model: Option<&str>,
    ) -> Result<Self, RouterError> {
        let arguments = serde_json::from_str(&call.arguments).map_err(|e| {
            RouterError::InvalidToolCall(format!(
                "tool call {:?} ({}): arguments are not valid JSON: {e}",
                call.id, call.name
            ))
        })?;
        handover_ledger::validate_json_text(&call.arguments).map_err(|e| {
            let field = match e.field() {
                "body" => "params".to_owned(),
                f if f.starts_with('[') => format!("params{f}"),
                f => format!("params.{f}"),
            };
            let reason = format!("tool call {:?} ({}): {}", call.id, call.name, e.reason());
            RouterError::Ledger(ValidationError::new(field, reason).into())
        })?;
        Ok(Self {
            tool_call_id: call.id.clone(),
            action: call.name.clone(),
            arguments,
            provider: provider.map(str::to_owned),
            model: model.map(str::to_owned),
        })
    }

    fn metadata(&self) -> serde_json::Value {
        json!({
            "tool_call_id": self.tool_call_id,
            "provider": self.provider,
            "model": self.model,
        })
    }
}

/// An operation's identity as the application's approval defines it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationKey {
    /// Tenant / principal / workflow.
    pub scope: String,
    /// The logical request key chosen at approval (e.g. `K-701`).
    pub key: String,
}

/// Maps a proposed tool call to the approval it falls under. Key discipline
/// belongs to the application: the same intent must keep the same key
/// across retries, reconnects and provider switches.
pub trait KeyPolicy: Send + Sync {
    /// The approved identity for this call, or `None` if nothing approved it.
    fn key_for(&self, call: &ProposedCall) -> Option<OperationKey>;

    /// The parameters the user approved for this call, if the approval names
    /// them. A proposal whose canonical parameters differ is then refused as
    /// a conflict before anything is claimed or sent. `None` (the default)
    /// leaves the binding to the ledger: what it recorded first (an explicit
    /// [`WriteGate::approve`], or the first proposal) binds.
    fn approved_params(&self, call: &ProposedCall) -> Option<&serde_json::Value> {
        let _ = call;
        None
    }
}

/// The common case: one approved action under one key, optionally with the
/// exact parameters the user approved.
///
/// ```
/// use handover_router::gate::FixedApproval;
/// use serde_json::json;
///
/// // Light: the first proposal that reaches the ledger binds the parameters.
/// let light = FixedApproval::new("customer-42", "K-701", "create_shipment");
/// // Explicit: only these parameters may ever run under K-701.
/// let bound = FixedApproval::new("customer-42", "K-701", "create_shipment")
///     .with_params(json!({"sku": "KETTLE", "qty": 1}));
/// # let _ = (light, bound);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct FixedApproval {
    /// The approved action.
    pub action: String,
    /// Its identity.
    pub key: OperationKey,
    /// The approved parameters, if the approval names them.
    pub params: Option<serde_json::Value>,
}

impl FixedApproval {
    /// `action` approved under `(scope, key)`, parameters not named.
    pub fn new(
        scope: impl Into<String>,
        key: impl Into<String>,
        action: impl Into<String>,
    ) -> Self {
        Self {
            action: action.into(),
            key: OperationKey {
                scope: scope.into(),
                key: key.into(),
            },
            params: None,
        }
    }

    /// Binds the approval to exactly `params` (compared canonically: member
    /// order and number spelling do not matter, values do).
    #[must_use]
    pub fn with_params(mut self, params: serde_json::Value) -> Self {
        self.params = Some(params);
        self
    }
}

impl KeyPolicy for FixedApproval {
    fn key_for(&self, call: &ProposedCall) -> Option<OperationKey> {
        (call.action == self.action).then(|| self.key.clone())
    }

    fn approved_params(&self, call: &ProposedCall) -> Option<&serde_json::Value> {
        self.params.as_ref().filter(|_| call.action == self.action)
    }
}

impl WriteGate {
    /// The operation request a proposed call maps to under `policy`.
    pub fn request_for_call(
        &self,
        call: &ProposedCall,
        policy: &dyn KeyPolicy,
    ) -> Result<OperationRequest, RouterError> {
        let key = policy
            .key_for(call)
            .ok_or_else(|| RouterError::NotApproved {
                action: call.action.clone(),
                tool_call_id: call.tool_call_id.clone(),
            })?;
        self.request(&key.scope, &key.key, &call.action, &call.arguments)
    }

    /// Performs a model's proposed call under the application's approval;
    /// the tool-call id, provider and model are recorded as attempt metadata.
    ///
    /// If the approval names its parameters and the proposal's differ, the
    /// answer is [`PerformOutcome::Conflict`] and nothing is claimed, sent or
    /// written. Otherwise the ledger decides, as in [`WriteGate::perform`]:
    /// a key approved there with other parameters is a conflict too.
    pub async fn perform_call(
        &self,
        call: &ProposedCall,
        policy: &dyn KeyPolicy,
        executor: &dyn Executor,
        opts: PerformOptions<'_>,
    ) -> Result<PerformOutcome, RouterError> {
        let req = self.request_for_call(call, policy)?;
        if let Some(approved) = policy.approved_params(call) {
            let id = req.id();
            let approved =
                self.request(id.scope.as_str(), id.key.as_str(), &call.action, approved)?;
            if approved.fingerprint() != req.fingerprint() {
                crate::metrics::operation(self.protocol.action_label(&call.action), "conflict");
                return Ok(PerformOutcome::Conflict {
                    recorded: approved.fingerprint(),
                    requested: req.fingerprint(),
                });
            }
        }
        let metadata = call.metadata();
        let opts = PerformOptions {
            metadata: Some(opts.metadata.unwrap_or(&metadata)),
            ..opts
        };
        self.perform(&req, executor, opts).await
    }
}
