//! The router's error type.

use handover_ledger::LedgerError;

use crate::config::ConfigIssues;

/// Everything the router can fail with. Classify with methods
/// ([`RouterError::is_ledger_unavailable`]: nothing was sent;
/// [`RouterError::outcome_unknown`]: something may have been;
/// [`RouterError::field`]: bad input), never by message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RouterError {
    /// The configuration is invalid; every issue names its path.
    #[error("invalid configuration:\n{0}")]
    Config(ConfigIssues),
    /// The configuration file could not be read.
    #[error("while reading configuration file {path}: {source}")]
    ReadConfig {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The ledger refused or could not be reached; nothing was sent.
    #[error("ledger: {0}")]
    Ledger(#[from] LedgerError),
    /// The destination answered but the ledger could not record it: the
    /// effect may have happened, so do not report it as failed. If the
    /// ledger could not be used, the operation stays `dispatched` and
    /// becomes `unknown` when its lease passes; if the answer itself cannot
    /// be recorded (e.g. a result that is not I-JSON), it is `unknown` at
    /// once, for review. If the dispatch was no longer the claim's — its
    /// lease had passed, or a reconciler or an operator had decided the
    /// operation meanwhile — the answer is kept in the operation's attempt
    /// log for a human to review and the recorded state is not changed
    /// (`docs/decisions.md`, "late outcomes"). Either way it is never
    /// re-executed automatically.
    #[error("the destination's {outcome} answer could not be recorded: {source}")]
    OutcomeNotRecorded {
        /// What the destination said.
        outcome: &'static str,
        /// Why the ledger refused.
        #[source]
        source: LedgerError,
    },
    /// No approval covers a proposed tool call.
    #[error("tool call {tool_call_id:?} proposes {action:?}, which no approval covers")]
    NotApproved {
        /// The proposed action.
        action: String,
        /// The provider's tool-call id.
        tool_call_id: String,
    },
    /// A tool call could not be parsed.
    #[error("invalid tool call: {0}")]
    InvalidToolCall(String),
    /// The task produced no answer; the failure lists every attempt.
    #[error("{0}")]
    Task(Box<crate::route::TaskFailure>),
    /// A request's model names no policy, alias, `provider/model` or route
    /// (see [`crate::config::Config::route`]).
    #[error("unknown model {name:?}: {reason}")]
    UnknownModel {
        /// The name as requested.
        name: String,
        /// Why it did not resolve.
        reason: String,
    },
    /// A call named a task that was opened under another policy; nothing
    /// was sent. One task keeps the policy (and so the budget) of its
    /// first call.
    #[error(
        "task {task:?} runs under policy {recorded:?} (that of its first call); this call asked for {requested:?}: use the task's policy or another task id"
    )]
    TaskPolicyMismatch {
        /// The task's name.
        task: String,
        /// The policy of its first call.
        recorded: String,
        /// The policy this call asked for.
        requested: String,
    },
    /// No policy of that name.
    #[error("unknown policy {0:?}")]
    UnknownPolicy(String),
    /// A provider's API key variable is not set.
    #[error("provider {provider}: environment variable {variable} (api_key_env) is not set")]
    MissingApiKey {
        /// The provider.
        provider: String,
        /// The variable.
        variable: String,
    },
    /// A provider could not be built from its settings.
    #[error("provider {provider}: {source}")]
    Provider {
        /// The provider.
        provider: String,
        /// Why.
        #[source]
        source: handover_providers::ProviderError,
    },
    /// `ledger.url_env` names a variable that is not set.
    #[error("ledger.url_env: environment variable {variable} (the PostgreSQL URL) is not set")]
    MissingLedgerUrl {
        /// The variable.
        variable: String,
    },
    /// An invariant of Handover itself did not hold (a bug, not a user
    /// error): e.g. the ledger answered a transition with another state.
    /// Nothing more was done; please report it.
    #[error("internal error (a bug in Handover): {0}")]
    Internal(String),
}

impl RouterError {
    /// The ledger could not be reached: nothing was claimed or sent.
    pub fn is_ledger_unavailable(&self) -> bool {
        matches!(self, Self::Ledger(e) if e.is_unavailable())
    }

    /// The destination may have been called but its answer is not on
    /// record ([`RouterError::OutcomeNotRecorded`]): tell the user it is
    /// being verified, never that it failed (or succeeded). False for every
    /// error raised before anything was sent.
    pub fn outcome_unknown(&self) -> bool {
        matches!(self, Self::OutcomeNotRecorded { .. })
    }

    /// The failed task's details, if this is one.
    pub fn task_failure(&self) -> Option<&crate::route::TaskFailure> {
        match self {
            Self::Task(f) => Some(f),
            _ => None,
        }
    }

    /// The ledger's own error, when the ledger refused or could not be
    /// reached (including a destination answer it could not record): a
    /// door maps it to its own terms (e.g. an HTTP status).
    pub fn ledger_error(&self) -> Option<&LedgerError> {
        match self {
            Self::Ledger(e) | Self::OutcomeNotRecorded { source: e, .. } => Some(e),
            _ => None,
        }
    }

    /// The offending field of a validation error, if this is one.
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::Ledger(e) => e.field(),
            _ => None,
        }
    }
}
