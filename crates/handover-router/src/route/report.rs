//! What a call's result reports: every attempt that happened (answered,
//! failed or abandoned; sent or not), every provider that was skipped and
//! why (apart from the attempts, in chain order), partial output kept apart
//! from the answer, and the budget spent.

use std::time::Duration;

use handover_providers::{Capability, ChatResponse, ErrorClass, ProviderError};

use crate::budget::{Exhausted, Spent};

/// Why a provider in the chain was not tried (or not tried again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// It may not receive the request's data class.
    DataClass,
    /// Its circuit breaker is open (checked before every try, retries
    /// included, so a provider may be tried and then skipped).
    BreakerOpen,
    /// Its admission control refused: too many requests already wait for
    /// its concurrency slots.
    QueueFull,
    /// It cannot honour a parameter of the request as sent (structured
    /// outputs, log probabilities, images, ...): it is never given a weaker
    /// request.
    Unsupported(Capability),
    /// Its wire format cannot express the request (a content part it has
    /// no block for, tool-call arguments in the history that are not a
    /// JSON object): Handover's translation refused before anything was
    /// sent, which says nothing of what another provider can take.
    Untranslatable,
}

impl SkipReason {
    /// Stable name for headers, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DataClass => "data_class",
            Self::BreakerOpen => "breaker_open",
            Self::QueueFull => "queue_full",
            Self::Unsupported(_) => "unsupported",
            Self::Untranslatable => "untranslatable",
        }
    }
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::DataClass => "may not receive the request's data class",
            Self::BreakerOpen => "circuit breaker open",
            Self::QueueFull => "admission queue full",
            Self::Untranslatable => "its wire format cannot express the request",
            Self::Unsupported(c) => return write!(f, "does not support {c}"),
        })
    }
}

/// A provider of the chain that the call passed over, and why. No request
/// went to it for this reason; it is not an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    /// Provider name.
    pub provider: String,
    /// Model it would have been asked for.
    pub model: String,
    /// When, since the task began.
    pub at: Duration,
    /// Why.
    pub reason: SkipReason,
}

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptResult {
    /// It produced the answer.
    Answered,
    /// It failed with this class.
    Failed(ErrorClass),
    /// The task stopped waiting for it (`abandon_after`) and moved on; its
    /// request still runs, and whatever it returns is recorded as late.
    Abandoned,
}

/// One attempt of a task: one call to one provider (at most one HTTP
/// request; `sent` says whether it could have reached the provider).
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
    /// What the provider said of a failure ([`Attempt::provider_code`],
    /// [`Attempt::provider_param`]). Boxed: most attempts have none.
    pub(crate) said: Option<Box<ProviderSaid>>,
}

impl Attempt {
    /// The error `code` the provider gave for this failed attempt, when
    /// it gave one fit to relay (an identifier: see
    /// [`ApiFailure::code`](handover_providers::ApiFailure::code)).
    pub fn provider_code(&self) -> Option<&str> {
        self.said.as_ref()?.code.as_deref()
    }

    /// The request parameter the provider blamed for this failed attempt,
    /// when it named one (bounded and redacted: see
    /// [`ApiFailure::param`](handover_providers::ApiFailure::param)).
    pub fn provider_param(&self) -> Option<&str> {
        self.said.as_ref()?.param.as_deref()
    }
}

/// A provider's own account of a failure that a gateway relays to its
/// client: its error `code` and `param`, as
/// [`ApiFailure`](handover_providers::ApiFailure) keeps them (already
/// bounded and redacted where the provider's body was read). The one
/// place the router reads them, for an attempt and for
/// [`FailureReason::Failed`] alike.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ProviderSaid {
    pub(crate) code: Option<String>,
    pub(crate) param: Option<String>,
}

impl ProviderSaid {
    /// What `err` carries of the provider's code and param.
    pub(crate) fn of(err: &ProviderError) -> Self {
        Self {
            code: err.provider_code().map(str::to_owned),
            param: err.api_failure().and_then(|f| f.param.clone()),
        }
    }

    /// As an attempt keeps it: nothing when the provider said nothing.
    pub(crate) fn boxed(self) -> Option<Box<Self>> {
        (self.code.is_some() || self.param.is_some()).then(|| Box::new(self))
    }
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
///
/// The model that answered and its usage are the answer's own
/// (`response.model`, `response.usage`): one copy, not a second one here
/// that every call would build and drop.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The answer, whole, from one provider.
    pub response: ChatResponse,
    /// Provider that answered.
    pub provider: String,
    /// Its cost in USD, if the provider has prices.
    pub cost: Option<f64>,
    /// Every attempt of this call, in order (failed ones are attempts, not completions).
    pub attempts: Vec<Attempt>,
    /// Providers passed over, and why, in chain order.
    pub skipped: Vec<Skip>,
    /// Partial output of failed streaming attempts.
    pub partials: Vec<Partial>,
    /// The task's budget spent so far.
    pub spent: Spent,
}

/// Why a task produced no answer.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum FailureReason {
    /// The budget ran out (deadline, requests or cost).
    Budget(Exhausted),
    /// An error whose class is configured to fail (e.g. content filter).
    Failed {
        /// The class.
        class: ErrorClass,
        /// The provider's message (never contains keys).
        message: String,
        /// The provider's error `code`, when it sent one: what OpenAI
        /// clients branch on (`context_length_exceeded`), relayed by the
        /// gateway.
        code: Option<String>,
        /// The request parameter the provider blamed (its `param`), when
        /// it named one.
        param: Option<String>,
    },
    /// Every provider in the chain failed or was skipped (the failure's
    /// attempts and skips say which and why).
    ChainExhausted,
    /// No provider in the chain may receive the request's data class; nothing was sent.
    NoAllowedProvider {
        /// The request's data class.
        data_class: String,
    },
    /// No provider allowed to receive the request can honour it as sent;
    /// nothing was sent.
    Unsupported {
        /// The request parameter no provider honours (a JSON path).
        parameter: String,
        /// The providers that lack it.
        providers: Vec<String>,
    },
    /// A stream failed after its commit point: the caller already has part of it.
    StreamBroken {
        /// The class.
        class: ErrorClass,
    },
    /// The caller left (see [`Caller`](super::Caller)): the attempt in
    /// flight was finished, nothing more was started.
    CallerLeft,
}

impl FailureReason {
    /// Stable name for the task span's `error.type` (the gateway's error
    /// codes where one exists).
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::Budget(_) => "budget_exhausted",
            Self::Failed { class, .. } => class.as_str(),
            Self::ChainExhausted => "all_providers_failed",
            Self::NoAllowedProvider { .. } => "data_class_not_allowed",
            Self::Unsupported { .. } => "unsupported_parameter",
            Self::StreamBroken { .. } => "stream_broken",
            Self::CallerLeft => "caller_left",
        }
    }
}

/// A task that produced no answer, with everything it tried.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskFailure {
    /// Why.
    pub reason: FailureReason,
    /// Every attempt that happened, in order.
    pub attempts: Vec<Attempt>,
    /// Providers passed over, and why, in chain order.
    pub skipped: Vec<Skip>,
    /// Partial output of failed streaming attempts.
    pub partials: Vec<Partial>,
    /// The budget spent.
    pub spent: Spent,
}

impl std::fmt::Display for TaskFailure {
    /// The reason, then the attempts (in order) and the skipped providers
    /// (in chain order), e.g. `no provider in the chain answered; attempts:
    /// primary=overloaded; skipped: fallback (may not receive the request's
    /// data class); 1 request(s) sent`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.reason {
            FailureReason::Budget(Exhausted::StoreUnavailable) => f.write_str(
                "the store of the task's shared budget could not be reached; nothing more was sent",
            )?,
            FailureReason::Budget(e) => write!(f, "task budget exhausted ({})", e.as_str())?,
            FailureReason::Failed { class, message, .. } => write!(f, "{class}: {message}")?,
            FailureReason::ChainExhausted => f.write_str("no provider in the chain answered")?,
            FailureReason::NoAllowedProvider { data_class } => write!(
                f,
                "no provider in the chain may receive data class {data_class:?}; nothing was sent"
            )?,
            FailureReason::Unsupported {
                parameter,
                providers,
            } => write!(
                f,
                "no provider in the chain supports {parameter} as sent (lacking: {}); nothing was sent",
                providers.join(", ")
            )?,
            FailureReason::StreamBroken { class } => {
                write!(f, "stream broke after its commit point ({class})")?
            }
            FailureReason::CallerLeft => {
                f.write_str("the caller left; nothing more was tried after it did")?
            }
        }
        for (i, a) in self.attempts.iter().enumerate() {
            let result = match a.result {
                AttemptResult::Answered => "answered",
                AttemptResult::Failed(class) => class.as_str(),
                AttemptResult::Abandoned => "abandoned",
            };
            let lead = if i == 0 { "; attempts: " } else { ", " };
            write!(f, "{lead}{}={result}", a.provider)?;
        }
        for (i, s) in self.skipped.iter().enumerate() {
            let lead = if i == 0 { "; skipped: " } else { ", " };
            write!(f, "{lead}{} ({})", s.provider, s.reason)?;
        }
        write!(f, "; {} request(s) sent", self.spent.requests)
    }
}
