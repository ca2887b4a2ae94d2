//! The application's side of a write: an [`Executor`] calls the destination
//! once per dispatch, with a [`DispatchContext`], and says what happened.

use std::future::Future;
use std::time::Duration;

use futures::future::BoxFuture;
use handover_ledger::{ActionName, Epoch, OperationId};

/// Everything an executor needs to call the destination exactly as approved.
#[derive(Debug, Clone)]
pub struct DispatchContext {
    /// The operation's identity `(scope, key)`.
    pub operation: OperationId,
    /// The action.
    pub action: ActionName,
    /// The approved parameters (a copy; changing it changes nothing recorded).
    pub params: serde_json::Value,
    /// The stable destination idempotency key: the same on every re-send of
    /// this operation. Send it to the destination when it supports keys.
    pub destination_key: String,
    /// The header the destination reads the key from, if its contract has one.
    pub idempotency_header: Option<String>,
    /// 1 for the first dispatch, 2 for a re-send, ...
    pub attempt: u32,
    /// The claim's epoch (for logs; the gate does the fencing).
    pub epoch: Epoch,
    /// Time this call may take: the smaller of the action's timeout and
    /// what remains of the task's budget. The gate enforces it too.
    pub remaining: Duration,
}

/// A definitive answer from the destination.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecutorOutcome {
    /// The effect happened; this is its result (e.g. the created record).
    Confirmed(serde_json::Value),
    /// The destination definitively did not apply it.
    Rejected {
        /// Why, e.g. "address invalid".
        reason: String,
        /// Evidence, e.g. the status line and body.
        evidence: Option<String>,
    },
}

/// A call that did not produce a definitive answer.
///
/// Only [`ExecutorError::not_sent`] — proof that no byte reached the
/// destination (connection refused, DNS failure) — lets the operation be
/// claimed again. Everything else leaves its outcome unknown: a timeout, a
/// reset, a 5xx or a lost response may follow an applied effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutorError {
    sent: bool,
    evidence: String,
}

impl ExecutorError {
    /// The request provably never left: safe to claim again.
    pub fn not_sent(evidence: impl Into<String>) -> Self {
        Self {
            sent: false,
            evidence: evidence.into(),
        }
    }

    /// The request may have reached the destination: the outcome is unknown.
    pub fn maybe_sent(evidence: impl Into<String>) -> Self {
        Self {
            sent: true,
            evidence: evidence.into(),
        }
    }

    /// Classifies a reqwest error: only a failure to connect proves nothing
    /// was sent; anything after the connection may follow an applied effect.
    /// The evidence is the whole error chain ("connection closed before
    /// message completed" is what an operator needs to read), naming the
    /// destination by its host only: the URL may carry a credential (a
    /// token in the query or the path), and the evidence is recorded,
    /// shown and logged.
    pub fn from_reqwest(err: &reqwest::Error) -> Self {
        let mut chain = err.to_string();
        if let Some(url) = err.url() {
            let host = match (url.host_str(), url.port_or_known_default()) {
                (Some(h), Some(p)) => format!(" (host {h}:{p})"),
                (Some(h), None) => format!(" (host {h})"),
                _ => String::new(),
            };
            chain = chain.replace(&format!(" for url ({url})"), &host);
        }
        let mut source = std::error::Error::source(err);
        while let Some(s) = source {
            chain.push_str(": ");
            chain.push_str(&s.to_string());
            source = s.source();
        }
        // `is_connect` covers refused connections, DNS and TLS handshake
        // failures: the request itself was never written.
        if err.is_connect() {
            Self::not_sent(format!("connect error: {chain}"))
        } else {
            Self::maybe_sent(format!("transport error after connecting: {chain}"))
        }
    }

    /// Could the request have reached the destination?
    pub fn was_sent(&self) -> bool {
        self.sent
    }

    /// What happened, for the attempt log.
    pub fn evidence(&self) -> &str {
        &self.evidence
    }
}

/// Calls the destination for one dispatch. Object-safe, so a reconciler
/// can hold one per action; implemented for any
/// `Fn(DispatchContext) -> impl Future<Output = Result<ExecutorOutcome, ExecutorError>> + Send + 'static`.
///
/// Contract: send the request at most once per call, with
/// [`DispatchContext::destination_key`] when the destination supports keys;
/// return `Ok` only for a definitive answer.
pub trait Executor: Send + Sync {
    /// Performs one dispatch.
    fn execute(
        &self,
        ctx: DispatchContext,
    ) -> BoxFuture<'static, Result<ExecutorOutcome, ExecutorError>>;
}

impl<F, Fut> Executor for F
where
    F: Fn(DispatchContext) -> Fut + Send + Sync,
    Fut: Future<Output = Result<ExecutorOutcome, ExecutorError>> + Send + 'static,
{
    fn execute(
        &self,
        ctx: DispatchContext,
    ) -> BoxFuture<'static, Result<ExecutorOutcome, ExecutorError>> {
        Box::pin(self(ctx))
    }
}
