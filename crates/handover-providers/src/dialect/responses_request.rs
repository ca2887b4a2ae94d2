//! The Responses API request body (`POST /responses`), translated from the
//! Chat-Completions-shaped [`ChatRequest`]. Pure: no I/O.
//!
//! The first message, if it is a system message, becomes `instructions`;
//! every other message becomes input items in order: `message` items
//! (`system`, `user` with `input_text` / `input_image` / `input_file`
//! parts, `assistant` text), an assistant turn's tool calls as
//! `function_call` items, tool results as `function_call_output` items.
//! Function tools are flat (`{"type": "function", "name", ...}`) and keep
//! Chat Completions' non-strict default (the Responses API's is strict);
//! `response_format` and `verbosity` go into `text`, `reasoning_effort`
//! into `reasoning.effort`, the token limit into `max_output_tokens`,
//! log probabilities into `top_logprobs` plus their `include`. `store` is
//! `false` unless the request set it: Handover keeps no conversation state
//! at a provider (a fallback could not read it), and Chat Completions'
//! default is not to store. Parameters that exist under the same name
//! (`metadata`, `service_tier`, `parallel_tool_calls`, `prompt_cache_key`,
//! `safety_identifier`, ...) and unknown ones are forwarded as sent.
//!
//! What the Responses API cannot express is never silently weakened: stop
//! sequences, audio, `logit_bias`, `n` above 1, web search options and the
//! legacy `functions` are refused before anything is sent, naming the
//! parameter (the router already skips a Responses provider for stop
//! sequences and audio, see [`crate::OpenAiApi::supports`]).

use serde_json::{Map, Value, json};

use super::translate::{invalid, is_off};
use crate::request::{ChatRequest, Content, ContentPart, Message, Role, ToolChoice};

/// Chat parameters with no Responses counterpart that change nothing a
/// caller relies on (best-effort determinism, sampling penalties, a
/// latency hint); dropped, as the Anthropic dialect drops them.
const DROPPED: &[&str] = &[
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "prediction",
];

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

/// The Responses body for `req`.
pub(crate) fn request_body(
    req: &ChatRequest,
    model: &str,
    stream: bool,
) -> Result<Value, serde_json::Error> {
    if !req.stop.is_empty() {
        return Err(invalid(
            "stop: the Responses API has no stop sequences".into(),
        ));
    }
    let mut body = Map::new();
    body.insert("model".into(), model.into());
    let (instructions, input) = input(&req.messages)?;
    if let Some(i) = instructions {
        body.insert("instructions".into(), i.into());
    }
    body.insert("input".into(), Value::Array(input));
    if !req.tools.is_empty() {
        let tools = req.tools.iter().map(|t| {
            let mut tool = t.extra.clone();
            tool.insert("type".into(), "function".into());
            tool.insert("name".into(), t.name.as_str().into());
            if let Some(d) = &t.description {
                tool.insert("description".into(), d.as_str().into());
            }
            tool.insert("parameters".into(), t.parameters.clone());
            tool.insert("strict".into(), t.strict.unwrap_or(false).into());
            Value::Object(tool)
        });
        body.insert("tools".into(), tools.collect());
    }
    if let Some(choice) = &req.tool_choice {
        body.insert("tool_choice".into(), tool_choice(choice)?);
    }
    if let Some(t) = req.temperature {
        body.insert("temperature".into(), t.into());
    }
    if let Some(p) = req.top_p {
        body.insert("top_p".into(), p.into());
    }
    let limit = match (req.max_tokens, req.max_completion_tokens) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    if let Some(n) = limit {
        body.insert("max_output_tokens".into(), n.into());
    }
    if let Some(user) = &req.user {
        body.insert("user".into(), user.as_str().into());
    }
    extra(req, &mut body)?;
    body.entry("store").or_insert(false.into());
    body.insert("stream".into(), stream.into());
    Ok(Value::Object(body))
}

/// The request's other parameters: moved where the Responses API keeps
/// them, dropped, refused, or forwarded as sent.
fn extra(req: &ChatRequest, body: &mut Map<String, Value>) -> Result<(), serde_json::Error> {
    for (k, v) in &req.extra {
        let key = k.as_str();
        if is_off(key, v) || DROPPED.contains(&key) {
            continue;
        }
        if let Some((_, why)) = REFUSED.iter().find(|(name, _)| *name == key) {
            return Err(invalid(format!("{key}: {why}")));
        }
        if WRITTEN.contains(&key) {
            return Err(invalid(format!(
                "{key}: is written from the chat request's own fields"
            )));
        }
        match key {
            "modalities" if v.as_array().is_some_and(|m| m.iter().any(|x| x != "text")) => {
                return Err(invalid(
                    "modalities: the Responses API answers in text only".into(),
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
                    return Err(invalid(format!("{key}: must be an object")));
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
) -> Result<&'b mut Map<String, Value>, serde_json::Error> {
    body.entry(key)
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| invalid(format!("{key}: must be an object")))
}

/// Adds `entry` to `include` once.
fn include(body: &mut Map<String, Value>, entry: &str) -> Result<(), serde_json::Error> {
    let list = body
        .entry("include")
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
        .ok_or_else(|| invalid("include: must be a list".into()))?;
    if !list.iter().any(|e| e == entry) {
        list.push(entry.into());
    }
    Ok(())
}

/// `response_format` as `text.format`: a `json_schema` format's fields
/// move up one level (`{"type": "json_schema", "name", "schema", ...}`).
fn text_format(v: &Value) -> Result<Value, serde_json::Error> {
    match v.get("type").and_then(Value::as_str) {
        Some("json_object") => Ok(json!({"type": "json_object"})),
        Some("json_schema") => {
            let mut format = v
                .get("json_schema")
                .and_then(Value::as_object)
                .cloned()
                .ok_or_else(|| invalid("response_format.json_schema: must be an object".into()))?;
            format.insert("type".into(), "json_schema".into());
            Ok(Value::Object(format))
        }
        _ => Err(invalid(
            "response_format.type: only text, json_object and json_schema have a Responses counterpart"
                .into(),
        )),
    }
}

/// `tool_choice` in the Responses shape (a function is named directly;
/// `allowed_tools` lists functions by name).
fn tool_choice(choice: &ToolChoice) -> Result<Value, serde_json::Error> {
    Ok(match choice {
        ToolChoice::Auto => "auto".into(),
        ToolChoice::None => "none".into(),
        ToolChoice::Required => "required".into(),
        ToolChoice::Function(name) => json!({"type": "function", "name": name}),
        ToolChoice::Other(v) => allowed_tools(v).ok_or_else(|| {
            invalid("tool_choice: only auto, none, required, a function or allowed_tools functions have a Responses counterpart".into())
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

/// `instructions` (the leading system message) and the input items.
fn input(msgs: &[Message]) -> Result<(Option<String>, Vec<Value>), serde_json::Error> {
    let mut instructions = None;
    let mut items = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        match m.role {
            Role::System if i == 0 => instructions = Some(text_only(m.content.as_ref(), i)?),
            Role::System => items.push(message("system", text_only(m.content.as_ref(), i)?)),
            Role::User => items.push(message("user", user_content(m.content.as_ref(), i)?)),
            Role::Assistant => {
                let text = text_only(m.content.as_ref(), i)?;
                if !text.is_empty() {
                    items.push(message("assistant", text));
                }
                items.extend(m.tool_calls.iter().map(|c| {
                    json!({"type": "function_call", "call_id": c.id, "name": c.name,
                        "arguments": c.arguments})
                }));
            }
            Role::Tool => items.push(json!({
                "type": "function_call_output",
                "call_id": m.tool_call_id.as_deref().unwrap_or_default(),
                "output": m.content.as_ref().map(Content::text).unwrap_or_default(),
            })),
        }
    }
    Ok((instructions, items))
}

fn message(role: &str, content: impl Into<Value>) -> Value {
    json!({"type": "message", "role": role, "content": content.into()})
}

/// The text of a system or assistant message: its string, or its text (and
/// refusal) parts joined; any other part fails naming it.
fn text_only(content: Option<&Content>, i: usize) -> Result<String, serde_json::Error> {
    let Some(Content::Parts(parts)) = content else {
        return Ok(content.map(Content::text).unwrap_or_default());
    };
    if let Some((j, p)) = parts
        .iter()
        .enumerate()
        .find(|(_, p)| !matches!(p.kind.as_str(), "text" | "refusal"))
    {
        return Err(invalid(format!(
            "messages[{i}].content[{j}]: a {:?} part has no Responses counterpart in this message",
            p.kind
        )));
    }
    Ok(parts.iter().filter_map(|p| p.text.as_deref()).collect())
}

/// A user message's content: its string, or its parts as input parts.
fn user_content(content: Option<&Content>, i: usize) -> Result<Value, serde_json::Error> {
    let parts = match content {
        Some(Content::Parts(parts)) => parts,
        other => return Ok(other.map(Content::text).unwrap_or_default().into()),
    };
    let parts = parts.iter().enumerate().map(|(j, p)| {
        input_part(p).ok_or_else(|| {
            invalid(format!(
                "messages[{i}].content[{j}]: a {:?} part has no Responses counterpart",
                p.kind
            ))
        })
    });
    parts.collect::<Result<Vec<_>, _>>().map(Value::Array)
}

/// One content part as a Responses input part: text, an image (URL or data
/// URL, with its detail), a file (id or data, with its name).
fn input_part(p: &ContentPart) -> Option<Value> {
    match p.kind.as_str() {
        "text" => Some(json!({"type": "input_text", "text": p.text.as_deref().unwrap_or("")})),
        "image_url" => {
            let image = p.extra.get("image_url")?;
            let url = image.get("url")?.as_str()?;
            let detail = image
                .get("detail")
                .and_then(Value::as_str)
                .unwrap_or("auto");
            Some(json!({"type": "input_image", "image_url": url, "detail": detail}))
        }
        "file" => {
            let mut file = p.extra.get("file")?.as_object()?.clone();
            file.insert("type".into(), "input_file".into());
            Some(Value::Object(file))
        }
        _ => None,
    }
}
