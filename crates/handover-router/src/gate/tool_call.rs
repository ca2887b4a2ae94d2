//! From a model's tool call to an operation: the key comes from the user's
//! approval (through an application-supplied [`KeyPolicy`]), never from the
//! provider's tool-call id, which is only attempt metadata. So a fallback
//! model that re-proposes the same approved action under a new tool-call id
//! maps to the same operation (and gets the recorded outcome), and one that
//! proposes changed parameters gets a conflict.

use handover_ledger::OperationRequest;
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
}

/// The common case: one approved action under one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedApproval {
    /// The approved action.
    pub action: String,
    /// Its identity.
    pub key: OperationKey,
}

impl KeyPolicy for FixedApproval {
    fn key_for(&self, call: &ProposedCall) -> Option<OperationKey> {
        (call.action == self.action).then(|| self.key.clone())
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
    pub async fn perform_call(
        &self,
        call: &ProposedCall,
        policy: &dyn KeyPolicy,
        executor: &dyn Executor,
        opts: PerformOptions<'_>,
    ) -> Result<PerformOutcome, RouterError> {
        let req = self.request_for_call(call, policy)?;
        let metadata = call.metadata();
        let opts = PerformOptions {
            metadata: Some(opts.metadata.unwrap_or(&metadata)),
            ..opts
        };
        self.perform(&req, executor, opts).await
    }
}
