//! The Responses API's parameters from the Chat-Completions-shaped
//! request's: what moves (`response_format` → `text.format`, `verbosity`
//! → `text.verbosity`, `reasoning_effort` → `reasoning.effort`, log
//! probabilities → `top_logprobs` and `include`), what keeps its name and
//! is forwarded, what is dropped, and what is refused because the
//! Responses API cannot express it; `tool_choice` in the Responses shape.
//! Pure: no I/O.

use super::Untranslatable;
use serde_json::{Map, Value, json};

use super::translate::{invalid, is_off};
use crate::request::{ChatRequest, ToolChoice};

/// Chat parameters with no Responses counterpart that change nothing a
/// caller relies on (sampling penalties, a latency hint); dropped, as the
/// Anthropic dialect drops them. So is `seed` (best-effort determinism), a
/// typed field the translation does not read.
const DROPPED: &[&str] = &["frequency_penalty", "presence_penalty", "prediction"];

/// Chat parameters the Responses API cannot express as sent.
const REFUSED: &[(&str, &str)] = &[
    ("logit_bias", "the Responses API has no logit bias"),
    ("n", "the Responses API returns one answer"),
    (
        "web_search_options",
        "the Responses API takes web search as a tool, not an option",
    ),
    (
        "functions",
        "send tools instead (the legacy form has no Responses counterpart)",
    ),
    (
        "function_call",
        "send tool_choice instead (the legacy form has no Responses counterpart)",
    ),
    ("audio", "the Responses API has no audio output"),
];

/// Keys this translation writes; the same key in `extra` would be sent twice.
const WRITTEN: &[&str] = &["input", "instructions", "max_output_tokens"];

/// The `include` entry that asks for output log probabilities.
const LOGPROBS_INCLUDE: &str = "message.output_text.logprobs";

/// The request's other parameters: moved where the Responses API keeps
/// them, dropped, refused, or forwarded as sent.
pub(super) fn extra(
    req: &ChatRequest,
    body: &mut Map<String, Value>,
) -> Result<(), Untranslatable> {
    for (k, v) in &req.extra {
        let key = k.as_str();
        if is_off(key, v) || DROPPED.contains(&key) {
            continue;
        }
        if let Some((_, why)) = REFUSED.iter().find(|(name, _)| *name == key) {
            return Err(invalid(key, *why));
        }
        if WRITTEN.contains(&key) {
            return Err(invalid(
                key,
                "is written from the chat request's own fields",
            ));
        }
        match key {
            "modalities" if v.as_array().is_some_and(|m| m.iter().any(|x| x != "text")) => {
                return Err(invalid(
                    "modalities",
                    "the Responses API answers in text only",
                ));
            }
            "modalities" => {}
            "reasoning_effort" => {
                object_at(body, "reasoning")?.insert("effort".into(), v.clone());
            }
            "verbosity" => {
                object_at(body, "text")?.insert("verbosity".into(), v.clone());
            }
            "response_format" => {
                let format = text_format(v)?;
                object_at(body, "text")?.insert("format".into(), format);
            }
            "logprobs" | "top_logprobs" => {
                let n = req.extra.get("top_logprobs").cloned().unwrap_or(0.into());
                body.insert("top_logprobs".into(), n);
                include(body, LOGPROBS_INCLUDE)?;
            }
            "include" => {
                for entry in v.as_array().into_iter().flatten() {
                    if let Some(e) = entry.as_str() {
                        include(body, e)?;
                    }
                }
            }
            // A Responses-only parameter sent as an extension: merged with
            // what the translation puts there.
            "reasoning" | "text" => {
                let Value::Object(fields) = v else {
                    return Err(invalid(key, "must be an object"));
                };
                let target = object_at(body, key)?;
                for (f, x) in fields {
                    target.entry(f.clone()).or_insert_with(|| x.clone());
                }
            }
            _ => {
                body.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(())
}

/// The object at `body[key]`, created if absent.
fn object_at<'b>(
    body: &'b mut Map<String, Value>,
    key: &str,
) -> Result<&'b mut Map<String, Value>, Untranslatable> {
    body.entry(key)
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| invalid(key, "must be an object"))
}

/// Adds `entry` to `include` once.
fn include(body: &mut Map<String, Value>, entry: &str) -> Result<(), Untranslatable> {
    let list = body
        .entry("include")
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
        .ok_or_else(|| invalid("include", "must be a list"))?;
    if !list.iter().any(|e| e == entry) {
        list.push(entry.into());
    }
    Ok(())
}

/// `response_format` as `text.format`: a `json_schema` format's fields
/// move up one level (`{"type": "json_schema", "name", "schema", ...}`).
fn text_format(v: &Value) -> Result<Value, Untranslatable> {
    match v.get("type").and_then(Value::as_str) {
        Some("json_object") => Ok(json!({"type": "json_object"})),
        Some("json_schema") => {
            let mut format = v
                .get("json_schema")
                .and_then(Value::as_object)
                .cloned()
                .ok_or_else(|| invalid("response_format.json_schema", "must be an object"))?;
            format.insert("type".into(), "json_schema".into());
            Ok(Value::Object(format))
        }
        _ => Err(invalid(
            "response_format.type",
            "only text, json_object and json_schema have a Responses counterpart",
        )),
    }
}

/// `tool_choice` in the Responses shape (a function is named directly;
/// `allowed_tools` lists functions by name).
pub(super) fn tool_choice(choice: &ToolChoice) -> Result<Value, Untranslatable> {
    Ok(match choice {
        ToolChoice::Auto => "auto".into(),
        ToolChoice::None => "none".into(),
        ToolChoice::Required => "required".into(),
        ToolChoice::Function(name) => json!({"type": "function", "name": name}),
        ToolChoice::Other(v) => allowed_tools(v).ok_or_else(|| {
            invalid(
                "tool_choice",
                "only auto, none, required, a function or allowed_tools functions have a Responses counterpart",
            )
        })?,
    })
}

/// Chat's `{"type": "allowed_tools", "allowed_tools": {"mode", "tools":
/// [{"type": "function", "function": {"name"}}]}}`, flattened.
fn allowed_tools(v: &Value) -> Option<Value> {
    if v.get("type")?.as_str()? != "allowed_tools" {
        return None;
    }
    let allowed = v.get("allowed_tools")?;
    let tools = allowed.get("tools")?.as_array()?.iter().map(|t| {
        let name = t.get("function")?.get("name")?.as_str()?;
        (t.get("type")?.as_str()? == "function").then(|| json!({"type": "function", "name": name}))
    });
    let tools = tools.collect::<Option<Vec<_>>>()?;
    Some(json!({"type": "allowed_tools", "mode": allowed.get("mode")?, "tools": tools}))
}
