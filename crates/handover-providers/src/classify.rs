//! Turning what a provider said into an [`ErrorClass`]. Pure: no I/O.
//!
//! Classification uses, in order: the provider's `code`, its `type`, the
//! HTTP status. Only where a provider documents no code for a condition
//! (DeepSeek's context-length and content-risk errors are plain 400s, as
//! are Anthropic's `invalid_request_error`s for a too long prompt) a
//! short list of message fragments is consulted; that list lives here and
//! nowhere else.

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use secrecy::{ExposeSecret, SecretString};

use crate::{
    error::{ApiFailure, ErrorClass},
    wire::{WireError, WireErrorEnvelope},
};

/// Codes that identify a class regardless of status.
fn class_from_code(code: &str) -> Option<ErrorClass> {
    Some(match code {
        "context_length_exceeded" | "string_above_max_length" => ErrorClass::ContextLengthExceeded,
        "content_filter" | "content_policy_violation" => ErrorClass::ContentFiltered,
        "insufficient_quota" => ErrorClass::QuotaExhausted,
        "rate_limit_exceeded" => ErrorClass::RateLimited,
        // Gemini sends a bad key as 400 INVALID_ARGUMENT with this
        // `ErrorInfo` reason.
        "invalid_api_key" | "invalid_authentication" | "API_KEY_INVALID" => ErrorClass::Auth,
        "server_error" => ErrorClass::ServerError,
        "overloaded" | "engine_overloaded" => ErrorClass::Overloaded,
        _ => return None,
    })
}

fn class_from_type(kind: &str) -> Option<ErrorClass> {
    Some(match kind {
        "insufficient_quota" => ErrorClass::QuotaExhausted,
        "rate_limit_error" | "rate_limit_exceeded" => ErrorClass::RateLimited,
        "authentication_error" | "permission_error" => ErrorClass::Auth,
        "billing_error" => ErrorClass::Billing,
        "overloaded_error" => ErrorClass::Overloaded,
        "server_error" | "api_error" => ErrorClass::ServerError,
        // Google's canonical statuses (Gemini's `error.status`).
        "RESOURCE_EXHAUSTED" => ErrorClass::RateLimited,
        "UNAUTHENTICATED" | "PERMISSION_DENIED" => ErrorClass::Auth,
        "UNAVAILABLE" => ErrorClass::Overloaded,
        "INTERNAL" => ErrorClass::ServerError,
        "DEADLINE_EXCEEDED" => ErrorClass::Timeout,
        _ => return None,
    })
}

/// Message fragments for conditions some providers report without a code.
fn class_from_message(message: &str) -> Option<ErrorClass> {
    let m = message.to_ascii_lowercase();
    // OpenAI-compatible servers; Anthropic's "prompt is too long: N tokens >
    // M maximum" and "input length and `max_tokens` exceed context limit";
    // Gemini's "The input token count (N) exceeds the maximum number of
    // tokens allowed (M)".
    if m.contains("maximum context length")
        || m.contains("exceeds the maximum number of tokens")
        || m.contains("context length exceeded")
        || m.contains("prompt is too long")
        || m.contains("exceed context limit")
    {
        Some(ErrorClass::ContextLengthExceeded)
    } else if m.contains("content exists risk") || m.contains("content management policy") {
        Some(ErrorClass::ContentFiltered)
    } else {
        None
    }
}

fn class_from_status(status: u16) -> ErrorClass {
    match status {
        401 | 403 => ErrorClass::Auth,
        402 => ErrorClass::Billing,
        408 => ErrorClass::Timeout,
        429 => ErrorClass::RateLimited,
        503 | 529 => ErrorClass::Overloaded,
        400 | 404 | 405 | 409 | 413 | 415 | 422 => ErrorClass::InvalidRequest,
        500..=599 => ErrorClass::ServerError,
        _ => ErrorClass::Other,
    }
}

/// Classifies an error with status `status` and error object `err`.
pub(crate) fn classify(status: u16, err: &WireError) -> ErrorClass {
    let by_code = err.code.as_deref().and_then(class_from_code);
    let by_type = err.r#type.as_deref().and_then(class_from_type);
    let by_msg = err.message.as_deref().and_then(class_from_message);
    let by_status = class_from_status(status);
    match status {
        // Status decides for these: a 401 is auth whatever the body says,
        // a 402 is billing, a 503 overloaded.
        401 | 403 | 402 | 503 | 529 => by_status,
        // 429 is a rate limit unless the code/type says quota.
        429 => match by_code.or(by_type) {
            Some(ErrorClass::QuotaExhausted) => ErrorClass::QuotaExhausted,
            _ => ErrorClass::RateLimited,
        },
        _ => by_code.or(by_msg).or(by_type).unwrap_or(by_status),
    }
}

/// How much of a body that is no JSON error object becomes the message.
const MESSAGE_BYTES: usize = 512;

/// Builds the failure for an HTTP error response. `body` may have been cut
/// at the error body limit (see `transport.rs`), possibly inside an echoed
/// key.
pub(crate) fn api_failure(
    status: u16,
    body: &[u8],
    retry_after: Option<Duration>,
    key: Option<&SecretString>,
) -> ApiFailure {
    let err = match serde_json::from_slice::<WireErrorEnvelope>(body) {
        Ok(env) => env.error,
        Err(_) => {
            // Redact first, cut after: a key straddling the cut would be
            // matched by neither, and the prefix before the cut is most of
            // the key. A body cut before it reached us can end in part of
            // the key, as the cut text can: both tails are redacted.
            let text = redact(String::from_utf8_lossy(body).into_owned(), key);
            WireError {
                message: Some(redact(truncate(&text, MESSAGE_BYTES), key)),
                ..WireError::default()
            }
        }
    };
    failure_from(status, err, retry_after, key)
}

/// Builds the failure for an error object (HTTP body or in-stream event).
///
/// The one place a provider's `code` and `param` are read. Both are relayed
/// to clients (the gateway's error envelope) and the code is logged, so
/// each is kept only where it is what it claims to be; the classification
/// has seen the code as sent.
pub(crate) fn failure_from(
    status: u16,
    err: WireError,
    retry_after: Option<Duration>,
    key: Option<&SecretString>,
) -> ApiFailure {
    let class = classify(status, &err);
    ApiFailure {
        class,
        status,
        code: err.code.filter(|c| relayable_code(c, key)),
        kind: err.r#type.clone(),
        param: err
            .param
            .map(|p| redact(p, key))
            .filter(|p| relayable_param(p)),
        message: redact(err.message.unwrap_or_default(), key),
        retry_after,
    }
}

/// The longest provider `code` kept.
const CODE_BYTES: usize = 64;
/// The longest provider `param` kept.
const PARAM_BYTES: usize = 256;

/// A code clients can branch on: an identifier (1-64 ASCII letters,
/// digits, `_`, `-`, `.`, at least one letter). Anything else is not a
/// code: prose that may quote the prompt ("... is too long"), a number
/// (`400`, `1.5`: some servers repeat the status there), a 100 KB blob.
/// A code holding the key is no code either.
fn relayable_code(code: &str, key: Option<&SecretString>) -> bool {
    (1..=CODE_BYTES).contains(&code.len())
        && code
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        && code.bytes().any(|b| b.is_ascii_alphabetic())
        && !key
            .map(|k| k.expose_secret())
            .is_some_and(|k| !k.is_empty() && code.contains(k))
}

/// A parameter name or path (`messages[0].content`), not a document: at
/// most 256 bytes, no control characters.
fn relayable_param(param: &str) -> bool {
    param.len() <= PARAM_BYTES && !param.chars().any(char::is_control)
}

fn truncate(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].trim().to_owned()
}

/// The shortest piece of the key taken for the key: shorter runs are too
/// likely to be the provider's own words.
const KEY_PIECE_BYTES: usize = 8;

/// Removes the API key from text a provider sent back (some echo it), and
/// every piece of it of [`KEY_PIECE_BYTES`] or more: a provider that
/// quotes the key's prefix and suffix ("sk-proj-Zq8m…fD5g"), or text cut
/// inside the key, leaks as much as the whole key to anyone who can guess
/// the rest. Each run of such pieces becomes one `[REDACTED]`.
pub(crate) fn redact(text: String, key: Option<&SecretString>) -> String {
    let Some(k) = key
        .map(|k| k.expose_secret().as_bytes())
        .filter(|k| !k.is_empty())
    else {
        return text;
    };
    let n = KEY_PIECE_BYTES.min(k.len());
    let pieces: std::collections::HashSet<&[u8]> = k.windows(n).collect();
    let bytes = text.as_bytes();
    // The byte ranges covered by some piece, merged.
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for (at, w) in bytes.windows(n).enumerate() {
        if !pieces.contains(w) {
            continue;
        }
        match ranges.last_mut() {
            Some((_, end)) if *end >= at => *end = at + n,
            _ => ranges.push((at, at + n)),
        }
    }
    if ranges.is_empty() {
        return text;
    }
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for (mut start, mut end) in ranges {
        // A key with non-ASCII bytes could put a range inside a character.
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        while !text.is_char_boundary(end) {
            end += 1;
        }
        if start < from {
            start = from;
        }
        out.push_str(&text[from..start]);
        out.push_str("[REDACTED]");
        from = end.max(from);
    }
    out.push_str(&text[from..]);
    out
}

/// `retry-after-ms` (OpenAI), else `Retry-After` as seconds or an HTTP date.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let v = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// The provider request id: `x-request-id`, else `request-id`.
pub(crate) fn request_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get("x-request-id")
        .or_else(|| headers.get("request-id"))
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(code: Option<&str>, kind: Option<&str>, msg: &str) -> WireError {
        WireError {
            message: Some(msg.into()),
            r#type: kind.map(Into::into),
            code: code.map(Into::into),
            param: None,
        }
    }

    #[test]
    fn statuses_codes_and_types_map_to_classes() {
        let cases = [
            (
                429,
                err(
                    Some("insufficient_quota"),
                    Some("insufficient_quota"),
                    "quota",
                ),
                ErrorClass::QuotaExhausted,
            ),
            (
                429,
                err(Some("rate_limit_exceeded"), Some("requests"), "slow down"),
                ErrorClass::RateLimited,
            ),
            (
                429,
                err(None, None, "Rate limit reached"),
                ErrorClass::RateLimited,
            ),
            (
                400,
                err(
                    Some("context_length_exceeded"),
                    Some("invalid_request_error"),
                    "too long",
                ),
                ErrorClass::ContextLengthExceeded,
            ),
            (
                400,
                err(
                    None,
                    Some("invalid_request_error"),
                    "This model's maximum context length is 65536 tokens.",
                ),
                ErrorClass::ContextLengthExceeded,
            ),
            (
                400,
                err(Some("content_filter"), None, "filtered"),
                ErrorClass::ContentFiltered,
            ),
            (
                400,
                err(None, Some("invalid_request_error"), "Content Exists Risk"),
                ErrorClass::ContentFiltered,
            ),
            (
                400,
                err(None, Some("invalid_request_error"), "bad temperature"),
                ErrorClass::InvalidRequest,
            ),
            (
                422,
                err(None, None, "Invalid Parameters"),
                ErrorClass::InvalidRequest,
            ),
            (
                401,
                err(Some("invalid_api_key"), None, "bad key"),
                ErrorClass::Auth,
            ),
            (403, err(None, None, "forbidden"), ErrorClass::Auth),
            (
                402,
                err(None, Some("unknown_error"), "Insufficient Balance"),
                ErrorClass::Billing,
            ),
            (
                503,
                err(None, None, "Server overloaded"),
                ErrorClass::Overloaded,
            ),
            (
                500,
                err(None, Some("server_error"), "oops"),
                ErrorClass::ServerError,
            ),
            (502, err(None, None, "bad gateway"), ErrorClass::ServerError),
            (418, err(None, None, "teapot"), ErrorClass::Other),
            // Anthropic: `{"type": "error", "error": {"type", "message"}}`.
            (
                400,
                err(
                    None,
                    Some("invalid_request_error"),
                    "prompt is too long: 208310 tokens > 200000 maximum",
                ),
                ErrorClass::ContextLengthExceeded,
            ),
            (
                400,
                err(
                    None,
                    Some("invalid_request_error"),
                    "input length and `max_tokens` exceed context limit: 199000 + 21333 > 200000",
                ),
                ErrorClass::ContextLengthExceeded,
            ),
            (
                400,
                err(
                    None,
                    Some("invalid_request_error"),
                    "messages: field required",
                ),
                ErrorClass::InvalidRequest,
            ),
            (
                529,
                err(None, Some("overloaded_error"), "Overloaded"),
                ErrorClass::Overloaded,
            ),
            (
                500,
                err(None, Some("api_error"), "Internal server error"),
                ErrorClass::ServerError,
            ),
            (
                402,
                err(None, Some("billing_error"), "credit balance too low"),
                ErrorClass::Billing,
            ),
            (
                403,
                err(None, Some("permission_error"), "no access"),
                ErrorClass::Auth,
            ),
        ];
        for (status, e, want) in cases {
            assert_eq!(
                classify(status, &e),
                want,
                "status {status} {:?}",
                e.message
            );
        }
    }

    #[test]
    fn retry_after_forms() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", "7".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        h.insert("retry-after-ms", "1500".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(1500)));
        let mut h = HeaderMap::new();
        let at = SystemTime::now() + Duration::from_secs(120);
        h.insert("retry-after", httpdate::fmt_http_date(at).parse().unwrap());
        let d = retry_after(&h).unwrap();
        assert!(
            d > Duration::from_secs(110) && d <= Duration::from_secs(120),
            "{d:?}"
        );
    }

    #[test]
    fn param_and_code_are_kept_and_redacted() {
        let key = SecretString::from("sk-sentinel-123");
        let f = api_failure(
            400,
            br#"{"error":{"message":"too long","type":"invalid_request_error","param":"messages[0].content","code":"context_length_exceeded"}}"#,
            None,
            Some(&key),
        );
        assert_eq!(f.param.as_deref(), Some("messages[0].content"));
        assert_eq!(f.code.as_deref(), Some("context_length_exceeded"));
        // An odd `param` (not text) is dropped, not the whole error object.
        let f = api_failure(
            400,
            br#"{"error":{"message":"bad","param":["n"],"code":"sk-sentinel-123"}}"#,
            None,
            Some(&key),
        );
        assert_eq!((f.param, f.message.as_str()), (None, "bad"));
        assert_eq!(f.code, None, "a code holding the key is dropped");
    }

    #[test]
    fn echoed_key_is_redacted() {
        let key = SecretString::from("sk-sentinel-123");
        let f = api_failure(
            401,
            br#"{"error":{"message":"Incorrect API key provided: sk-sentinel-123","type":"invalid_request_error","code":"invalid_api_key"}}"#,
            None,
            Some(&key),
        );
        assert_eq!(f.class, ErrorClass::Auth);
        assert!(!f.message.contains("sk-sentinel-123"));
        assert!(f.message.contains("[REDACTED]"));
    }

    #[test]
    fn every_piece_of_the_key_of_8_bytes_or_more_is_redacted() {
        let key = SecretString::from("sk-sentinel-1234567");
        let cut = |t: &str| redact(t.to_owned(), Some(&key));
        assert_eq!(cut("body sk-sentin"), "body [REDACTED]");
        assert_eq!(cut("body sk-sentinel-1234567 x"), "body [REDACTED] x");
        assert_eq!(
            cut("key sk-sentinel-1234567sk-sentinel-1234567!"),
            "key [REDACTED]!"
        );
        // Its prefix and suffix quoted apart, and a piece from its middle.
        assert_eq!(
            cut("prefix sk-senti, suffix l-1234567, mid ntinel-12."),
            "prefix [REDACTED], suffix [REDACTED], mid [REDACTED]."
        );
        // Shorter than 8 bytes of it: the provider's own words.
        assert_eq!(cut("body sk-sent"), "body sk-sent");
        assert_eq!(cut("sk-s"), "sk-s");
        assert_eq!(cut("é sk-senti é"), "é [REDACTED] é");
    }
}
