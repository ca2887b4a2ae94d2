//! Pieces every non-OpenAI dialect needs to translate the OpenAI-shaped
//! request: errors naming the offending field, tool-call arguments as a
//! JSON object, the "explicit off" values of OpenAI-only parameters, and
//! base64 data URLs.

use serde_json::{Value, json};

use crate::request::ToolCall;

/// A translation failure; the engine reports it as an invalid request
/// (nothing is sent).
pub(crate) fn invalid(what: String) -> serde_json::Error {
    <serde_json::Error as serde::ser::Error>::custom(what)
}

/// The arguments of `messages[i].tool_calls[j]` as a JSON object (empty
/// arguments are `{}`): vendors take objects, not JSON text.
pub(crate) fn call_arguments(c: &ToolCall, i: usize, j: usize) -> Result<Value, serde_json::Error> {
    let args: Value = if c.arguments.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(&c.arguments).map_err(|_| {
            invalid(format!(
                "messages[{i}].tool_calls[{j}].function.arguments is not JSON"
            ))
        })?
    };
    if !args.is_object() {
        return Err(invalid(format!(
            "messages[{i}].tool_calls[{j}].function.arguments is not a JSON object"
        )));
    }
    Ok(args)
}

/// Explicit "off" values of OpenAI-only parameters (SDKs and frameworks
/// send them): `null`, `n: 1`, `logprobs: false`, a `text` response
/// format. Dropping them asks nothing and loses nothing.
pub(crate) fn is_off(key: &str, v: &Value) -> bool {
    v.is_null()
        || (key == "n" && v == &json!(1))
        || (key == "logprobs" && v == &json!(false))
        || (key == "response_format" && v == &json!({"type": "text"}))
}

/// `data:MIME;base64,DATA` as (MIME, DATA).
pub(crate) fn data_url(url: &str) -> Option<(&str, &str)> {
    url.strip_prefix("data:")?.split_once(";base64,")
}
