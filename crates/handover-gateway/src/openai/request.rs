//! OpenAI chat request JSON → [`ChatRequest`], the one request schema of
//! `handover-providers`: every parameter, message field, content part and
//! tool field is kept and reaches the provider as sent. The gateway reads
//! only `model` (a policy or alias), `stream` and `stream_options`, and
//! refuses `n` above 1: several choices would be several proposals for one
//! operation, and the write gate takes one answer.

use handover_providers::ChatRequest;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::api_error::ApiError;
use crate::body::from_value;

/// A parsed chat request.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub(crate) model: String,
    pub(crate) stream: bool,
    pub(crate) include_usage: bool,
    pub(crate) request: ChatRequest,
}

/// What the gateway itself reads of the body; the rest is the one
/// [`ChatRequest`] schema.
#[derive(Deserialize)]
struct Envelope {
    model: String,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

fn unsupported(param: &str, why: &str) -> ApiError {
    ApiError::invalid(
        "unsupported_parameter",
        param,
        format!("{param}: {why} (not supported by the Handover gateway)"),
    )
}

/// Parses an OpenAI chat request body.
pub(crate) fn parse(body: Value) -> Result<Parsed, ApiError> {
    let Value::Object(mut obj) = body else {
        return Err(ApiError::invalid(
            "invalid_field",
            "body",
            "the body must be a JSON object",
        ));
    };
    let mut envelope = Map::new();
    for key in ["model", "stream", "stream_options"] {
        if let Some(v) = obj.remove(key) {
            envelope.insert(key.to_owned(), v);
        }
    }
    let e: Envelope = from_value(Value::Object(envelope))?;
    if e.model.is_empty() {
        return Err(ApiError::invalid(
            "invalid_field",
            "model",
            "model: must not be empty",
        ));
    }
    let request: ChatRequest = from_value(Value::Object(obj))?;
    refuse_unsupported(&request)?;
    Ok(Parsed {
        model: e.model,
        stream: e.stream.unwrap_or(false),
        include_usage: e.stream_options.is_some_and(|o| o.include_usage),
        request,
    })
}

fn refuse_unsupported(r: &ChatRequest) -> Result<(), ApiError> {
    if r.extra
        .get("n")
        .is_some_and(|n| !n.is_null() && n.as_u64() != Some(1))
    {
        return Err(unsupported(
            "n",
            "only one choice per request (each choice would propose its own tool calls)",
        ));
    }
    Ok(())
}
