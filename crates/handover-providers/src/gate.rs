//! Per-call options and the send counter the router counts requests with.

use std::{fmt, sync::Arc};

use crate::settings::Timeouts;

/// What is about to be sent; passed to [`SendCounter::before_send`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SendInfo {
    /// Configured provider name.
    pub provider: String,
    /// Model requested.
    pub model: String,
    /// Whether this is a streaming request.
    pub stream: bool,
    /// The request's data class, if tagged.
    pub data_class: Option<String>,
}

/// Why a [`SendCounter`] refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct SendRefused {
    /// Human-readable reason ("request budget exhausted", ...).
    pub reason: String,
}

impl SendRefused {
    /// A refusal with this reason.
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
        }
    }
}

/// Called by the transport for every HTTP request it is about to send.
///
/// Contract:
/// * [`SendCounter::before_send`] is called **exactly once per HTTP request the
///   transport attempts**, immediately before handing it to the HTTP client
///   (after all local validation and serialisation succeeded). The adapters
///   never retry, so one call of `chat`/`chat_stream` calls it at most once.
/// * Returning `Err` means the request is not sent; the call fails with
///   [`crate::ErrorClass::SendRefused`] and `was_sent() == false`.
/// * If the request then provably never left (connection refused, DNS
///   failure, connect timeout), [`SendCounter::not_sent`] is called once, so a
///   counter of "requests actually sent" can give the slot back.
pub trait SendCounter: Send + Sync {
    /// Admit or refuse one HTTP request.
    fn before_send(&self, info: &SendInfo) -> Result<(), SendRefused>;

    /// The admitted request failed before any byte was written. Default: nothing.
    fn not_sent(&self, _info: &SendInfo) {}
}

/// Per-call options.
#[derive(Clone, Default)]
pub struct CallOptions {
    /// Model override; `None` uses the provider's default model.
    pub model: Option<String>,
    /// Timeout override for this call (e.g. the provider's own limits capped
    /// by what remains of the router's budget: see [`Timeouts::capped`]).
    /// `connect` is applied by the provider's HTTP client from its settings
    /// and is not overridable per call; the per-call first-byte deadline,
    /// which includes connecting, still bounds it.
    pub timeouts: Option<Timeouts>,
    /// Counter consulted right before the HTTP request is sent.
    pub send_counter: Option<Arc<dyn SendCounter>>,
    /// Which try of a routed call this is (1-based), so the attempt's span
    /// (`handover.attempt`) can be placed among its siblings in a trace.
    pub attempt: Option<u32>,
}

impl fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallOptions")
            .field("model", &self.model)
            .field("timeouts", &self.timeouts)
            .field(
                "send_counter",
                &self.send_counter.as_ref().map(|_| "<counter>"),
            )
            .field("attempt", &self.attempt)
            .finish()
    }
}

impl CallOptions {
    /// Options with a model override.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Options with a timeout override.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = Some(timeouts);
        self
    }

    /// Options numbering the try of a routed call (1-based).
    pub fn with_attempt(mut self, attempt: u32) -> Self {
        self.attempt = Some(attempt);
        self
    }

    /// Options with a send counter.
    pub fn with_send_counter(mut self, counter: Arc<dyn SendCounter>) -> Self {
        self.send_counter = Some(counter);
        self
    }
}
