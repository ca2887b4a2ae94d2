//! The one error type of this crate and its classification.
//!
//! Callers never match on message text: [`ProviderError::class`] gives a
//! [`ErrorClass`] (a closed, string-named set the router's configuration maps
//! to actions), and [`ProviderError::was_sent`], [`ProviderError::retry_after`],
//! [`ProviderError::status`], [`ProviderError::provider_code`] and
//! [`ProviderError::partial_events`] give the details.

use std::{fmt, time::Duration};

pub use crate::class::{ErrorClass, UnknownErrorClass};
use crate::gate::SendRefused;

/// Which deadline fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TimeoutPhase {
    /// Establishing the connection (nothing was sent).
    Connect,
    /// Waiting for response headers after the request was sent.
    FirstByte,
    /// Waiting for a stream's response headers (`stream_first_byte`, when
    /// shorter than `first_byte`).
    StreamFirstByte,
    /// Waiting for the first data event of a stream.
    FirstToken,
    /// Waiting for the next data event of a stream.
    Idle,
    /// The whole call.
    Total,
}

impl TimeoutPhase {
    /// snake_case name (`"first_token"`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            TimeoutPhase::Connect => "connect",
            TimeoutPhase::FirstByte => "first_byte",
            TimeoutPhase::StreamFirstByte => "stream_first_byte",
            TimeoutPhase::FirstToken => "first_token",
            TimeoutPhase::Idle => "idle",
            TimeoutPhase::Total => "total",
        }
    }
}

impl fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Details of an error the provider reported (HTTP error status or an
/// `{"error": ...}` event inside a stream).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiFailure {
    /// Classification derived from status, code and type.
    pub class: ErrorClass,
    /// HTTP status (for in-stream errors: the stream's status, usually 200).
    pub status: u16,
    /// Provider error `code` (`"rate_limit_exceeded"`, `"insufficient_quota"`, ...),
    /// kept only if it is an identifier (1-64 ASCII letters, digits, `_`,
    /// `-`, `.`, with a letter): a code is relayed to clients and logged,
    /// and prose there can quote the prompt. Classification saw it as sent.
    pub code: Option<String>,
    /// Provider error `type` (`"invalid_request_error"`, ...).
    pub kind: Option<String>,
    /// Provider error `param`: the request parameter it blames
    /// (`"messages[0].content"`), when it named one. Kept so a gateway can
    /// relay it: clients branch on it as on `code`. Kept only up to 256
    /// bytes without control characters, the API key redacted.
    pub param: Option<String>,
    /// Provider message, with the API key redacted if the provider echoed it.
    pub message: String,
    /// Parsed `Retry-After` / `retry-after-ms`.
    pub retry_after: Option<Duration>,
}

/// Every failure of a provider call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// Provider settings failed validation; names the field.
    #[error("invalid provider settings: {field}: {reason}")]
    InvalidSettings {
        /// The offending field (`"base_url"`, `"timeouts.idle"`, ...).
        field: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The chat request failed local validation; nothing was sent.
    #[error("invalid chat request: {field}: {reason}")]
    InvalidRequest {
        /// The offending field (`"messages"`, `"messages[2].tool_call_id"`, ...).
        field: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The request has no counterpart in this provider's wire format (a
    /// part type it lacks, tool-call arguments that are not a JSON object,
    /// a parameter its API does not have); nothing was sent. Not the
    /// provider's verdict: another provider may take the request as it
    /// is, so the router passes over this one ([`Self::is_untranslatable`]).
    #[error(
        "provider {provider}: {field}: {reason} (its wire format cannot express it; nothing was sent)"
    )]
    Untranslatable {
        /// Configured provider name.
        provider: String,
        /// The request field with no counterpart (`"messages[1].tool_calls[0].function.arguments"`).
        field: String,
        /// Why.
        reason: String,
    },
    /// The send gate refused the request; nothing was sent.
    #[error("provider {provider}: request not sent: {refused}")]
    SendRefused {
        /// Configured provider name.
        provider: String,
        /// The gate's reason.
        refused: SendRefused,
    },
    /// Could not connect; nothing was sent.
    #[error("provider {provider}: could not connect")]
    Connect {
        /// Configured provider name.
        provider: String,
        /// The transport error.
        #[source]
        source: reqwest::Error,
    },
    /// The connection broke after the request may have been sent.
    #[error("provider {provider}: connection lost before a complete response")]
    ConnectionLost {
        /// Configured provider name.
        provider: String,
        /// HTTP status if headers had arrived.
        status: Option<u16>,
        /// The transport error.
        #[source]
        source: reqwest::Error,
    },
    /// A deadline passed.
    #[error("provider {provider}: {phase} timeout after {after:?} ({events} data events received)")]
    Timeout {
        /// Configured provider name.
        provider: String,
        /// Which deadline.
        phase: TimeoutPhase,
        /// The configured limit that expired.
        after: Duration,
        /// Data events delivered before the deadline (streams), else 0.
        events: usize,
    },
    /// The provider answered with an error status or an in-stream error event.
    #[error("provider {provider}: {} error (status {}{}): {}", .failure.class, .failure.status, .failure.code.as_deref().map(|c| format!(", code {c}")).unwrap_or_default(), .failure.message)]
    Api {
        /// Configured provider name.
        provider: String,
        /// What the provider said (boxed to keep the error small).
        failure: Box<ApiFailure>,
        /// Data events delivered before an in-stream error, else 0.
        events: usize,
        /// The provider's request id (`x-request-id`), when it sent one.
        request_id: Option<String>,
    },
    /// A stream ended or broke without `[DONE]` and without a finish reason.
    #[error("provider {provider}: stream interrupted after {events} data events")]
    StreamInterrupted {
        /// Configured provider name.
        provider: String,
        /// Data events delivered before the stream ended.
        events: usize,
        /// The transport error, if the connection broke (rather than closed).
        #[source]
        source: Option<reqwest::Error>,
    },
    /// A stream event could not be decoded. The stream stays usable: the
    /// caller may skip the event and poll again.
    #[error("provider {provider}: malformed stream event #{events}: {detail}")]
    MalformedStream {
        /// Configured provider name.
        provider: String,
        /// Data events received so far, including the malformed one.
        events: usize,
        /// What was wrong (never the raw event text).
        detail: String,
    },
    /// A 2xx body could not be decoded as a chat completion.
    #[error("provider {provider}: could not decode response body")]
    Decode {
        /// Configured provider name.
        provider: String,
        /// The decoder error (positions, never the body).
        #[source]
        source: serde_json::Error,
    },
    /// A 2xx body was larger than the gateway reads (32 MiB): refused
    /// unread past the limit, classed as [`ErrorClass::Decode`] (no answer
    /// could be read from it).
    #[error("provider {provider}: response body larger than {limit} bytes (status {status})")]
    BodyTooLarge {
        /// Configured provider name.
        provider: String,
        /// The response's HTTP status.
        status: u16,
        /// The limit, in bytes.
        limit: usize,
    },
    /// Anything unclassified. Not retryable.
    #[error("provider {provider}: {detail}")]
    Other {
        /// Configured provider name.
        provider: String,
        /// What happened.
        detail: String,
    },
}

impl ProviderError {
    /// The class the router maps to an action.
    pub fn class(&self) -> ErrorClass {
        match self {
            ProviderError::InvalidSettings { .. } | ProviderError::Other { .. } => {
                ErrorClass::Other
            }
            ProviderError::InvalidRequest { .. } | ProviderError::Untranslatable { .. } => {
                ErrorClass::InvalidRequest
            }
            ProviderError::SendRefused { .. } => ErrorClass::SendRefused,
            ProviderError::Connect { .. } => ErrorClass::ConnectBeforeSend,
            ProviderError::ConnectionLost { .. } => ErrorClass::ConnectionLost,
            ProviderError::Timeout { phase, .. } => match phase {
                TimeoutPhase::Connect => ErrorClass::ConnectBeforeSend,
                TimeoutPhase::FirstToken | TimeoutPhase::Idle => ErrorClass::StreamStalled,
                TimeoutPhase::FirstByte | TimeoutPhase::StreamFirstByte | TimeoutPhase::Total => {
                    ErrorClass::Timeout
                }
            },
            ProviderError::Api { failure, .. } => failure.class,
            ProviderError::StreamInterrupted { .. } => ErrorClass::StreamInterrupted,
            ProviderError::MalformedStream { .. } => ErrorClass::MalformedStream,
            ProviderError::Decode { .. } | ProviderError::BodyTooLarge { .. } => ErrorClass::Decode,
        }
    }

    /// Could the request have reached the provider? `false` only when it is
    /// certain nothing was written: invalid settings or request, a refused
    /// send, a connect failure or connect timeout.
    pub fn was_sent(&self) -> bool {
        !matches!(
            self,
            ProviderError::InvalidSettings { .. }
                | ProviderError::InvalidRequest { .. }
                | ProviderError::Untranslatable { .. }
                | ProviderError::SendRefused { .. }
                | ProviderError::Connect { .. }
                | ProviderError::Timeout {
                    phase: TimeoutPhase::Connect,
                    ..
                }
        )
    }

    /// This provider's wire format cannot express the request
    /// ([`ProviderError::Untranslatable`]): nothing was sent, and another
    /// provider may take it as it is.
    pub fn is_untranslatable(&self) -> bool {
        matches!(self, ProviderError::Untranslatable { .. })
    }

    /// The request field this error names, when it is the request's fault
    /// or has no counterpart here (`InvalidRequest`, `Untranslatable`).
    pub fn request_field(&self) -> Option<&str> {
        match self {
            ProviderError::InvalidRequest { field, .. }
            | ProviderError::Untranslatable { field, .. } => Some(field),
            _ => None,
        }
    }

    /// Whether the same request may succeed if repeated ([`ErrorClass::is_retryable`]).
    pub fn is_retryable(&self) -> bool {
        self.class().is_retryable()
    }

    /// How long the provider asked us to wait (`Retry-After`, `retry-after-ms`).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::Api { failure, .. } => failure.retry_after,
            _ => None,
        }
    }

    /// The HTTP status, when a response arrived.
    pub fn status(&self) -> Option<u16> {
        match self {
            ProviderError::Api { failure, .. } => Some(failure.status),
            ProviderError::ConnectionLost { status, .. } => *status,
            ProviderError::BodyTooLarge { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The provider's error code (`"insufficient_quota"`, ...), when it sent one.
    pub fn provider_code(&self) -> Option<&str> {
        match self {
            ProviderError::Api { failure, .. } => failure.code.as_deref(),
            _ => None,
        }
    }

    /// For stream errors: how many data events were delivered before it.
    /// `Some(0)` means nothing reached the caller (a fallback is safe).
    pub fn partial_events(&self) -> Option<usize> {
        match self {
            ProviderError::StreamInterrupted { events, .. }
            | ProviderError::MalformedStream { events, .. } => Some(*events),
            ProviderError::Timeout {
                events,
                phase: TimeoutPhase::FirstToken | TimeoutPhase::Idle | TimeoutPhase::Total,
                ..
            } => Some(*events),
            ProviderError::Api {
                events, failure, ..
            } if failure.status < 300 => Some(*events),
            _ => None,
        }
    }

    /// Which deadline fired, for timeouts.
    pub fn timeout_phase(&self) -> Option<TimeoutPhase> {
        match self {
            ProviderError::Timeout { phase, .. } => Some(*phase),
            _ => None,
        }
    }

    /// The provider's request id (`x-request-id`) for API errors.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            ProviderError::Api { request_id, .. } => request_id.as_deref(),
            _ => None,
        }
    }

    /// The provider's error details, for API errors.
    pub fn api_failure(&self) -> Option<&ApiFailure> {
        match self {
            ProviderError::Api { failure, .. } => Some(failure),
            _ => None,
        }
    }

    /// The error as a log line may carry it: without the provider's own
    /// words. A provider's error message often quotes the request (the
    /// prompt, a parameter's value) and a malformed event's detail can
    /// quote what the model wrote; the caller gets both in the error, a log
    /// gets the class, status, code and request id.
    pub(crate) fn for_log(&self) -> ForLog<'_> {
        ForLog(self)
    }
}

/// See [`ProviderError::for_log`].
pub(crate) struct ForLog<'e>(&'e ProviderError);

impl fmt::Display for ForLog<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            ProviderError::Api {
                provider,
                failure,
                events,
                request_id,
            } => {
                write!(
                    f,
                    "provider {provider}: {} error (status {}",
                    failure.class, failure.status
                )?;
                if let Some(code) = &failure.code {
                    write!(f, ", code {code}")?;
                }
                if let Some(id) = request_id {
                    write!(f, ", request id {id}")?;
                }
                write!(f, ") after {events} data events")
            }
            ProviderError::MalformedStream {
                provider, events, ..
            } => write!(f, "provider {provider}: malformed stream event #{events}"),
            other => fmt::Display::fmt(other, f),
        }
    }
}
