//! OpenAI chat request JSON → [`ChatRequest`]. Parameters the gateway cannot
//! honour are refused by name rather than silently dropped: a client asking
//! for JSON mode or several choices must not get something else.

use handover_providers::{ChatRequest, Content};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::api_error::ApiError;
use crate::body::from_value;

/// Top-level parameters the gateway understands.
const SUPPORTED: &[&str] = &[
    "model",
    "messages",
    "stream",
    "stream_options",
    "tools",
    "tool_choice",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "seed",
    "user",
    "n",
    "parallel_tool_calls",
    "logprobs",
];

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
    if let Some(key) = obj.keys().find(|k| !SUPPORTED.contains(&k.as_str())) {
        return Err(unsupported(key, "unknown or unsupported parameter"));
    }
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
    let mut request: ChatRequest = from_value(Value::Object(obj))?;
    refuse_unsupported(&mut request)?;
    Ok(Parsed {
        model: e.model,
        stream: e.stream.unwrap_or(false),
        include_usage: e.stream_options.is_some_and(|o| o.include_usage),
        request,
    })
}

fn refuse_unsupported(r: &mut ChatRequest) -> Result<(), ApiError> {
    if r.extra.get("n").is_some_and(|n| n.as_u64() != Some(1)) {
        return Err(unsupported("n", "only one choice per request"));
    }
    if r.extra.get("parallel_tool_calls") == Some(&Value::Bool(false)) {
        return Err(unsupported(
            "parallel_tool_calls",
            "false cannot be guaranteed",
        ));
    }
    if r.extra.get("logprobs") == Some(&Value::Bool(true)) {
        return Err(unsupported(
            "logprobs",
            "log probabilities are not returned",
        ));
    }
    for (i, m) in r.messages.iter_mut().enumerate() {
        if let Some(Content::Parts(parts)) = &m.content {
            if let Some(j) = parts
                .iter()
                .position(|p| p.kind != "text" || p.text.is_none())
            {
                return Err(unsupported(
                    &format!("messages[{i}].content[{j}]"),
                    "only text content parts",
                ));
            }
            m.content = Some(Content::Text(
                parts.iter().filter_map(|p| p.text.as_deref()).collect(),
            ));
        }
        m.extra.clear();
    }
    for t in &mut r.tools {
        t.strict = None;
        t.extra.clear();
    }
    if let Some(n) = r.max_completion_tokens.take() {
        r.max_tokens = Some(n);
    }
    r.extra.clear();
    Ok(())
}
