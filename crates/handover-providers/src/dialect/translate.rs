//! Pieces every non-OpenAI dialect needs to translate the OpenAI-shaped
//! request: errors naming the offending field, tool-call arguments as a
//! JSON object, the "explicit off" values of OpenAI-only parameters, and
//! base64 data URLs.

use serde_json::{Value, json};

use crate::request::{Content, ContentPart, ToolCall};

/// A request this dialect cannot express (nothing is sent): the field of
/// the OpenAI-shaped request that has no counterpart, and why. Not the
/// provider's verdict on the request — another provider may take it as it
/// is — so the router passes over this provider
/// ([`crate::ProviderError::Untranslatable`]).
#[derive(Debug)]
pub(crate) struct Untranslatable {
    pub(crate) field: String,
    pub(crate) reason: String,
}

/// A body that could not be written at all.
impl From<serde_json::Error> for Untranslatable {
    fn from(e: serde_json::Error) -> Self {
        Self {
            field: "request".into(),
            reason: format!("could not serialise: {e}"),
        }
    }
}

/// `field` has no counterpart in this dialect, because `reason`.
pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Untranslatable {
    Untranslatable {
        field: field.into(),
        reason: reason.into(),
    }
}

/// A sampling parameter as the client wrote it: `0.7f32` widened to `f64`
/// is 0.699999988079071, so it goes through its shortest decimal spelling
/// (what the OpenAI dialect's serializer writes) instead.
pub(crate) fn sampling(v: f32) -> Value {
    v.to_string()
        .parse::<f64>()
        .map_or_else(|_| Value::from(v), Value::from)
}

/// The arguments of `messages[i].tool_calls[j]` as a JSON object (empty
/// arguments are `{}`): vendors take objects, not JSON text.
pub(crate) fn call_arguments(c: &ToolCall, i: usize, j: usize) -> Result<Value, Untranslatable> {
    let args: Value = if c.arguments.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(&c.arguments).map_err(|_| {
            invalid(
                format!("messages[{i}].tool_calls[{j}].function.arguments"),
                "is not JSON",
            )
        })?
    };
    if !args.is_object() {
        return Err(invalid(
            format!("messages[{i}].tool_calls[{j}].function.arguments"),
            "is not a JSON object",
        ));
    }
    Ok(args)
}

/// Explicit "off" values of OpenAI-only parameters (SDKs and frameworks
/// send them): `null`, `n: 1`, `logprobs: false`, `top_logprobs: 0`, a
/// `text` response format. Dropping them asks nothing and loses nothing.
/// OpenAI hints about the caller and caching, with no counterpart in
/// another vendor's API and nothing a caller relies on in the answer:
/// dropped for Anthropic and Gemini as `store` is (a fallback there would
/// otherwise fail on a field the client sends every turn). `prediction`
/// is a latency hint, dropped likewise.
pub(crate) const OPENAI_HINTS: &[&str] = &[
    "safety_identifier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "prediction",
];

pub(crate) fn is_off(key: &str, v: &Value) -> bool {
    v.is_null()
        || (key == "n" && v == &json!(1))
        || (key == "logprobs" && v == &json!(false))
        || (key == "top_logprobs" && v.as_f64() == Some(0.0))
        || (key == "response_format" && v == &json!({"type": "text"}))
        || (key == "modalities" && v == &json!(["text"]))
}

/// `data:MIME;base64,DATA` as (MIME, DATA).
pub(crate) fn data_url(url: &str) -> Option<(&str, &str)> {
    url.strip_prefix("data:")?.split_once(";base64,")
}

/// A message's text and images as one family's content blocks: `text`
/// makes a text block, `image` an image block from an `image_url` part
/// (`None`: not an http(s) or base64 data URL). Empty text is left out
/// (neither Anthropic nor Gemini takes empty text); any other part type has
/// no equivalent in `family` and fails naming the part.
pub(crate) fn content_blocks(
    content: Option<&Content>,
    i: usize,
    family: &str,
    text: impl Fn(&str) -> Value,
    image: impl Fn(&ContentPart) -> Option<Value>,
) -> Result<Vec<Value>, Untranslatable> {
    let parts = match content {
        None => return Ok(Vec::new()),
        Some(Content::Text(t)) if t.is_empty() => return Ok(Vec::new()),
        Some(Content::Text(t)) => return Ok(vec![text(t)]),
        Some(Content::Parts(parts)) => parts,
    };
    let mut out = Vec::new();
    for (j, p) in parts.iter().enumerate() {
        match p.kind.as_str() {
            "text" | "refusal" => {
                if let Some(t) = p.text.as_deref().filter(|t| !t.is_empty()) {
                    out.push(text(t));
                }
            }
            "image_url" => out.push(image(p).ok_or_else(|| {
                invalid(
                    format!("messages[{i}].content[{j}].image_url"),
                    "must be an http(s) or base64 data URL",
                )
            })?),
            other => {
                return Err(invalid(
                    format!("messages[{i}].content[{j}]"),
                    format!("part type {other:?} has no {family} equivalent"),
                ));
            }
        }
    }
    Ok(out)
}
