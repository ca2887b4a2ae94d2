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

/// The whole body, within the configured limit.
pub(crate) async fn read<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
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
    let value = serde_path_to_error::deserialize(&mut *de).map_err(to_api_error)?;
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
