//! Request bodies: JSON parsed with the path of the first problem
//! (`messages[1].role: unknown variant ...`), bodies over the configured
//! limit refused with 413, every refusal a JSON error. Nothing is done with
//! a body that fails here.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::api_error::ApiError;
use crate::conn::body::BodyTimedOut;

/// The whole body, unparsed, for a handler that parses it its own way
/// (the chat and Responses requests, each parsed once into its typed
/// form).
#[derive(Debug)]
pub(crate) struct RawBody(pub(crate) Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        read(req, state).await.map(RawBody)
    }
}

/// The whole body, within the configured limit. A body sent compressed
/// (any `Content-Encoding` but `identity`) is refused with 415 naming the
/// header before a byte of it is read: parsing it as JSON would only say
/// "malformed", and decoding it would let a few kilobytes grow past
/// `gateway.max_body_bytes` before the limit could see them.
pub(crate) async fn read<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    if let Some(coding) = encoded(req.headers()) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_request_error",
            "unsupported_content_encoding",
            format!(
                "content-encoding: request bodies are read as sent; \"{coding}\" is not decoded here (send the body uncompressed)"
            ),
        )
        .with_param("content-encoding"));
    }
    Bytes::from_request(req, state).await.map_err(|r| {
        if timed_out(&r) {
            ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "invalid_request_error",
                "body_timeout",
                "request body not received within gateway.body_read_timeout",
            )
        } else if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            too_large()
        } else {
            ApiError::new(
                r.status(),
                "invalid_request_error",
                "unreadable_body",
                format!("could not read the request body: {}", r.body_text()),
            )
        }
    })
}

/// The first coding named by `Content-Encoding` other than `identity`
/// (case-insensitive, list or repeated header), if any.
fn encoded(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get_all(axum::http::header::CONTENT_ENCODING)
        .iter()
        .flat_map(|v| v.to_str().unwrap_or("?").split(','))
        .map(str::trim)
        .find(|c| !c.is_empty() && !c.eq_ignore_ascii_case("identity"))
        .map(|c| c.chars().take(64).collect())
}

/// A body over `gateway.max_body_bytes` (413).
pub(crate) fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "invalid_request_error",
        "body_too_large",
        "request body is larger than gateway.max_body_bytes",
    )
}

/// The body stopped arriving: [`BodyTimedOut`] is somewhere in the chain.
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(e) = cur {
        if e.is::<BodyTimedOut>() {
            return true;
        }
        cur = e.source();
    }
    false
}

/// Parses `bytes` as `T`; the error names the path of the problem. The
/// body is one JSON document: anything after it but whitespace (a second
/// document, garbage) is malformed, never silently dropped.
pub(crate) fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // A body that parses is parsed once, without tracking the path of every
    // value (which costs more than the parse); only a body that does not is
    // read again with the tracking, for an error that names its field.
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    if let Ok(value) = T::deserialize(&mut *de)
        && de.end().is_ok()
    {
        return Ok(value);
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut *de).map_err(|e| {
        if e.inner().is_syntax() && nested_too_deep(bytes, e.inner()) {
            too_deep()
        } else {
            to_api_error(e)
        }
    })?;
    de.end().map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "invalid_json",
            format!("malformed JSON body: {e} (one JSON document per body)"),
        )
    })?;
    Ok(value)
}

/// How deep serde_json lets arrays and objects nest: its recursion limit
/// (128) counts the body's own outermost value, so the 128th opening
/// bracket is refused.
const MAX_NESTING: usize = 127;

/// Whether `err` is serde_json refusing a body nested past
/// [`MAX_NESTING`]. serde_json gives that refusal no kind of its own (it is
/// a syntax error like any other, known only by its message), so this
/// finds where `bytes` first opens a bracket too deep and compares it with
/// where serde_json stopped: the same place means that is why. Only a
/// body that failed to parse is scanned, once.
fn nested_too_deep(bytes: &[u8], err: &serde_json::Error) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let (mut line, mut column) = (1usize, 0usize);
    for &b in bytes {
        // serde_json's position: 1-based line, 1-based byte column.
        if b == b'\n' {
            line += 1;
            column = 0;
        } else {
            column += 1;
        }
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return (line, column) == (err.line(), err.column());
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// A body nested past what the gateway parses (400 naming the body).
fn too_deep() -> ApiError {
    ApiError::invalid(
        "invalid_field",
        "body",
        format!("body: arrays and objects nested deeper than {MAX_NESTING} levels"),
    )
}

/// Converts an already parsed JSON value into `T`, naming the path of the problem.
pub(crate) fn from_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(to_api_error)
}

fn to_api_error(e: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let syntax = inner.is_syntax() || inner.is_eof();
        let code = if syntax {
            "invalid_json"
        } else {
            "invalid_field"
        };
        let message = if syntax {
            format!("malformed JSON body: {inner}")
        } else if path == "." {
            format!("invalid body: {inner}")
        } else {
            format!("{path}: {inner}")
        };
        let err = ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            code,
            message,
        );
        if syntax || path == "." {
            err
        } else {
            err.with_param(path)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(bytes: &[u8]) -> String {
        match parse::<serde_json::Value>(bytes) {
            Ok(_) => "parsed".to_owned(),
            Err(e) => format!("{} {:?} {}", e.code, e.param, e.message),
        }
    }

    /// serde_json's limit, found where it stops: the deepest body it takes
    /// parses, one level more is named as too deep (arrays and objects,
    /// after a string holding brackets and quotes, on a second line), and
    /// a body broken before it gets that far stays malformed JSON.
    #[test]
    fn too_deep_is_told_apart_from_malformed() {
        let arrays = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert_eq!(message(arrays(MAX_NESTING).as_bytes()), "parsed");
        let deep =
            "invalid_field Some(\"body\") body: arrays and objects nested deeper than 127 levels";
        assert_eq!(message(arrays(MAX_NESTING + 1).as_bytes()), deep);
        assert_eq!(message(arrays(1000).as_bytes()), deep);
        let objects = |n: usize| {
            format!(
                "{{\"\u{e9}[\\\"{{\":\n {}1{}}}",
                "{\"b\":".repeat(n - 1),
                "}".repeat(n - 1)
            )
        };
        assert_eq!(message(objects(MAX_NESTING).as_bytes()), "parsed");
        assert_eq!(message(objects(MAX_NESTING + 1).as_bytes()), deep);
        let broken = format!("{{\"a\": nope, \"b\": {}", arrays(200));
        assert!(
            message(broken.as_bytes()).starts_with("invalid_json None malformed JSON body"),
            "{}",
            message(broken.as_bytes())
        );
    }
}
