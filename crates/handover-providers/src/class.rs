//! [`ErrorClass`]: the closed, string-named set of failure kinds the
//! router's configuration maps to actions.

use std::{fmt, str::FromStr};

/// What kind of failure a [`crate::ProviderError`] is; the key the router's
/// error-class → action table is written in.
///
/// The class is deliberately field-less (`Copy + Eq + Hash`, round-trips
/// through [`ErrorClass::as_str`] / [`FromStr`]) so configuration can name it.
/// Details such as the timeout phase or the number of events delivered before
/// a stream broke are on the error: [`crate::ProviderError::timeout_phase`],
/// [`crate::ProviderError::partial_events`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorClass {
    /// Could not connect (DNS, refused, TLS, connect timeout): nothing was sent.
    ConnectBeforeSend,
    /// A deadline passed after the request was sent: waiting for response
    /// headers, or the whole call. (A connect timeout is
    /// [`ErrorClass::ConnectBeforeSend`]; stream silences are
    /// [`ErrorClass::StreamStalled`].)
    Timeout,
    /// The connection broke after the request may have been written and before
    /// a response arrived.
    ConnectionLost,
    /// 429 rate limit (requests, tokens or account concurrency).
    RateLimited,
    /// 429 whose code says the quota/credit is used up (`insufficient_quota`).
    QuotaExhausted,
    /// 503 / 529: the provider is overloaded.
    Overloaded,
    /// Other 5xx.
    ServerError,
    /// 401 / 403.
    Auth,
    /// 402 (DeepSeek "insufficient balance").
    Billing,
    /// 400 / 404 / 413 / 422 and local validation failures.
    InvalidRequest,
    /// The prompt does not fit the model's context window.
    ContextLengthExceeded,
    /// The provider refused the content.
    ContentFiltered,
    /// A stream ended (or broke) without `[DONE]` and without a finish reason.
    StreamInterrupted,
    /// A stream stayed silent past its first-token or idle timeout.
    StreamStalled,
    /// A stream event could not be decoded (the stream may continue).
    MalformedStream,
    /// A successful (2xx) non-streaming body could not be decoded.
    Decode,
    /// The caller's [`crate::SendCounter`] refused the request; nothing was sent.
    SendRefused,
    /// Anything not classified above (including invalid provider settings).
    /// Never retryable.
    Other,
}

impl ErrorClass {
    /// Every class, in declaration order.
    pub const ALL: [ErrorClass; 18] = [
        ErrorClass::ConnectBeforeSend,
        ErrorClass::Timeout,
        ErrorClass::ConnectionLost,
        ErrorClass::RateLimited,
        ErrorClass::QuotaExhausted,
        ErrorClass::Overloaded,
        ErrorClass::ServerError,
        ErrorClass::Auth,
        ErrorClass::Billing,
        ErrorClass::InvalidRequest,
        ErrorClass::ContextLengthExceeded,
        ErrorClass::ContentFiltered,
        ErrorClass::StreamInterrupted,
        ErrorClass::StreamStalled,
        ErrorClass::MalformedStream,
        ErrorClass::Decode,
        ErrorClass::SendRefused,
        ErrorClass::Other,
    ];

    /// The snake_case name used in configuration (`"rate_limited"`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorClass::ConnectBeforeSend => "connect",
            ErrorClass::Timeout => "timeout",
            ErrorClass::ConnectionLost => "connection_lost",
            ErrorClass::RateLimited => "rate_limited",
            ErrorClass::QuotaExhausted => "quota_exhausted",
            ErrorClass::Overloaded => "overloaded",
            ErrorClass::ServerError => "server_error",
            ErrorClass::Auth => "auth",
            ErrorClass::Billing => "billing",
            ErrorClass::InvalidRequest => "invalid_request",
            ErrorClass::ContextLengthExceeded => "context_length",
            ErrorClass::ContentFiltered => "content_filter",
            ErrorClass::StreamInterrupted => "stream_interrupted",
            ErrorClass::StreamStalled => "stream_stalled",
            ErrorClass::MalformedStream => "malformed_stream",
            ErrorClass::Decode => "decode",
            ErrorClass::SendRefused => "send_refused",
            ErrorClass::Other => "other",
        }
    }

    /// Whether repeating the same request may succeed. `Other` is never
    /// retryable; neither are auth, billing, quota, invalid input, content
    /// filtering, malformed events or decode failures.
    pub const fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorClass::ConnectBeforeSend
                | ErrorClass::Timeout
                | ErrorClass::ConnectionLost
                | ErrorClass::RateLimited
                | ErrorClass::Overloaded
                | ErrorClass::ServerError
                | ErrorClass::StreamInterrupted
                | ErrorClass::StreamStalled
        )
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown error-class name; the message lists the valid ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown error class {name:?} (expected one of: {})", ErrorClass::ALL.map(ErrorClass::as_str).join(", "))]
pub struct UnknownErrorClass {
    /// The name that was not recognised.
    pub name: String,
}

impl FromStr for ErrorClass {
    type Err = UnknownErrorClass;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ErrorClass::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| UnknownErrorClass { name: s.to_owned() })
    }
}
