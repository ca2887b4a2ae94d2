//! What a task's result reports: every attempt (answered, failed or
//! skipped), partial output kept apart from the answer, and the budget spent.

use std::time::Duration;

use handover_providers::{ChatResponse, ErrorClass, Usage};

use crate::budget::{Exhausted, Spent};

/// Why a provider in the chain was not tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// It may not receive the request's data class.
    DataClass,
    /// Its circuit breaker is open.
    BreakerOpen,
    /// Too many requests are waiting for its slots.
    QueueFull,
}

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptResult {
    /// It produced the answer.
    Answered,
    /// It failed with this class.
    Failed(ErrorClass),
    /// The task stopped waiting for it (`hedge_after`) and moved on; its
    /// request still runs, and whatever it returns is recorded as late.
    Abandoned,
    /// It was not made.
    Skipped(SkipReason),
}

/// One attempt of a task (at most one HTTP request).
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    /// Provider name.
    pub provider: String,
    /// Model requested.
    pub model: String,
    /// Start, since the task began.
    pub started: Duration,
    /// End, since the task began.
    pub ended: Duration,
    /// How it ended.
    pub result: AttemptResult,
    /// Whether its request could have reached the provider.
    pub sent: bool,
    /// The provider's request id, if any.
    pub request_id: Option<String>,
    /// It answered after the task had moved on: recorded, never used.
    pub late: bool,
}

/// Output a failed streaming attempt produced before it broke: kept apart,
/// never stitched to another provider's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partial {
    /// Provider that produced it.
    pub provider: String,
    /// Text received before the failure.
    pub text: String,
    /// Data events received.
    pub events: usize,
}

/// A task's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The answer, whole, from one provider.
    pub response: ChatResponse,
    /// Provider that answered.
    pub provider: String,
    /// Model that answered, as the provider reported it.
    pub model: String,
    /// Its usage.
    pub usage: Option<Usage>,
    /// Its cost in USD, if the provider has prices.
    pub cost: Option<f64>,
    /// Every attempt of this call, in order (failed ones are attempts, not completions).
    pub attempts: Vec<Attempt>,
    /// Partial output of failed streaming attempts.
    pub partials: Vec<Partial>,
    /// The task's budget spent so far.
    pub spent: Spent,
}

/// Why a task produced no answer.
#[derive(Debug, Clone, PartialEq)]
pub enum FailureReason {
    /// The budget ran out (deadline, requests or cost).
    Budget(Exhausted),
    /// An error whose class is configured to fail (e.g. content filter).
    Failed {
        /// The class.
        class: ErrorClass,
        /// The provider's message (never contains keys).
        message: String,
    },
    /// Every provider in the chain was tried or skipped.
    ChainExhausted,
    /// No provider in the chain may receive the request's data class; nothing was sent.
    NoAllowedProvider {
        /// The request's data class.
        data_class: String,
    },
    /// A stream failed after its commit point: the caller already has part of it.
    StreamBroken {
        /// The class.
        class: ErrorClass,
    },
}

/// A task that produced no answer, with everything it tried.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskFailure {
    /// Why.
    pub reason: FailureReason,
    /// Every attempt.
    pub attempts: Vec<Attempt>,
    /// Partial output of failed streaming attempts.
    pub partials: Vec<Partial>,
    /// The budget spent.
    pub spent: Spent,
}

impl std::fmt::Display for TaskFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.reason {
            FailureReason::Budget(e) => write!(f, "task budget exhausted ({})", e.as_str())?,
            FailureReason::Failed { class, message } => write!(f, "{class}: {message}")?,
            FailureReason::ChainExhausted => f.write_str("every provider in the chain failed")?,
            FailureReason::NoAllowedProvider { data_class } => write!(
                f,
                "no provider in the chain may receive data class {data_class:?}; nothing was sent"
            )?,
            FailureReason::StreamBroken { class } => {
                write!(f, "stream broke after its commit point ({class})")?
            }
        }
        write!(
            f,
            " after {} attempt(s), {} request(s) sent",
            self.attempts.len(),
            self.spent.requests
        )
    }
}
