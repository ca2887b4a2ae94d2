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

use std::borrow::Cow;

use serde::Serialize;
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

/// The Responses body, serialized straight from the request (borrowed
/// where it can be: this runs once per call).
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<Cow<'a, str>>,
    input: Vec<Item<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<FunctionTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<&'a str>,
    /// The other parameters, moved or forwarded (usually none).
    #[serde(flatten)]
    rest: Map<String, Value>,
    /// `false` unless the request set `store` (then it is in `rest`).
    #[serde(skip_serializing_if = "Option::is_none")]
    store: Option<bool>,
    stream: bool,
}

/// One input item.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Item<'a> {
    Message {
        role: &'static str,
        content: MessageContent<'a>,
    },
    FunctionCall {
        call_id: &'a str,
        name: &'a str,
        arguments: &'a str,
    },
    FunctionCallOutput {
        call_id: &'a str,
        output: Cow<'a, str>,
    },
}

#[derive(Serialize)]
#[serde(untagged)]
enum MessageContent<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<Value>),
}

/// A function tool, flat.
#[derive(Serialize)]
struct FunctionTool<'a> {
    r#type: &'static str,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    parameters: &'a Value,
    strict: bool,
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

/// The Responses body for `req`, as JSON bytes.
pub(crate) fn request_body(
    req: &ChatRequest,
    model: &str,
    stream: bool,
) -> Result<Vec<u8>, serde_json::Error> {
    if !req.stop.is_empty() {
        return Err(invalid(
            "stop: the Responses API has no stop sequences".into(),
        ));
    }
    let (instructions, input) = input(&req.messages)?;
    let tools = req.tools.iter().map(|t| FunctionTool {
        r#type: "function",
        name: &t.name,
        description: t.description.as_deref(),
        parameters: &t.parameters,
        strict: t.strict.unwrap_or(false),
        extra: &t.extra,
    });
    let mut rest = Map::new();
    extra(req, &mut rest)?;
    let body = Body {
        model,
        instructions,
        input,
        tools: tools.collect(),
        tool_choice: req.tool_choice.as_ref().map(tool_choice).transpose()?,
        temperature: req.temperature,
        top_p: req.top_p,
        max_output_tokens: match (req.max_tokens, req.max_completion_tokens) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        },
        user: req.user.as_deref(),
        store: (!rest.contains_key("store")).then_some(false),
        rest,
        stream,
    };
    serde_json::to_vec(&body)
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
type Input<'m> = (Option<Cow<'m, str>>, Vec<Item<'m>>);

fn input(msgs: &[Message]) -> Result<Input<'_>, serde_json::Error> {
    let mut instructions = None;
    let mut items = Vec::with_capacity(msgs.len());
    let text = |role, t| Item::Message {
        role,
        content: MessageContent::Text(t),
    };
    for (i, m) in msgs.iter().enumerate() {
        match m.role {
            Role::System if i == 0 => instructions = Some(text_only(m.content.as_ref(), i)?),
            Role::System => items.push(text("system", text_only(m.content.as_ref(), i)?)),
            Role::User => items.push(Item::Message {
                role: "user",
                content: user_content(m.content.as_ref(), i)?,
            }),
            Role::Assistant => {
                let t = text_only(m.content.as_ref(), i)?;
                if !t.is_empty() {
                    items.push(text("assistant", t));
                }
                items.extend(m.tool_calls.iter().map(|c| Item::FunctionCall {
                    call_id: &c.id,
                    name: &c.name,
                    arguments: &c.arguments,
                }));
            }
            Role::Tool => items.push(Item::FunctionCallOutput {
                call_id: m.tool_call_id.as_deref().unwrap_or_default(),
                output: m.content.as_ref().map_or(Cow::Borrowed(""), text_of),
            }),
        }
    }
    Ok((instructions, items))
}

/// Content as text, borrowed when it is a string.
fn text_of(c: &Content) -> Cow<'_, str> {
    match c {
        Content::Text(t) => Cow::Borrowed(t),
        parts => Cow::Owned(parts.text()),
    }
}

/// The text of a system or assistant message: its string, or its text (and
/// refusal) parts joined; any other part fails naming it.
fn text_only(content: Option<&Content>, i: usize) -> Result<Cow<'_, str>, serde_json::Error> {
    let Some(Content::Parts(parts)) = content else {
        return Ok(content.map_or(Cow::Borrowed(""), text_of));
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
    Ok(Cow::Owned(
        parts.iter().filter_map(|p| p.text.as_deref()).collect(),
    ))
}

/// A user message's content: its string, or its parts as input parts.
fn user_content(
    content: Option<&Content>,
    i: usize,
) -> Result<MessageContent<'_>, serde_json::Error> {
    let parts = match content {
        Some(Content::Parts(parts)) => parts,
        other => {
            return Ok(MessageContent::Text(
                other.map_or(Cow::Borrowed(""), text_of),
            ));
        }
    };
    let parts = parts.iter().enumerate().map(|(j, p)| {
        input_part(p).ok_or_else(|| {
            invalid(format!(
                "messages[{i}].content[{j}]: a {:?} part has no Responses counterpart",
                p.kind
            ))
        })
    });
    parts
        .collect::<Result<Vec<_>, _>>()
        .map(MessageContent::Parts)
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
