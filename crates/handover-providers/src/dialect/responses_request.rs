//! The Responses API request body (`POST /responses`), translated from the
//! Chat-Completions-shaped [`ChatRequest`] (its other parameters in
//! `responses_params.rs`). Pure: no I/O.
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

use super::Untranslatable;
use std::borrow::Cow;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::responses_params::{extra, tool_choice};
use super::translate::invalid;
use crate::request::{ChatRequest, Content, ContentPart, Message, Role};

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
) -> Result<Vec<u8>, Untranslatable> {
    if !req.stop.is_empty() {
        return Err(invalid("stop", "the Responses API has no stop sequences"));
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
    Ok(serde_json::to_vec(&body)?)
}

/// `instructions` (the leading system message) and the input items.
type Input<'m> = (Option<Cow<'m, str>>, Vec<Item<'m>>);

fn input(msgs: &[Message]) -> Result<Input<'_>, Untranslatable> {
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
fn text_only(content: Option<&Content>, i: usize) -> Result<Cow<'_, str>, Untranslatable> {
    let Some(Content::Parts(parts)) = content else {
        return Ok(content.map_or(Cow::Borrowed(""), text_of));
    };
    if let Some((j, p)) = parts
        .iter()
        .enumerate()
        .find(|(_, p)| !matches!(p.kind.as_str(), "text" | "refusal"))
    {
        return Err(invalid(
            format!("messages[{i}].content[{j}]"),
            format!(
                "a {:?} part has no Responses counterpart in this message",
                p.kind
            ),
        ));
    }
    Ok(Cow::Owned(
        parts.iter().filter_map(|p| p.text.as_deref()).collect(),
    ))
}

/// A user message's content: its string, or its parts as input parts.
fn user_content(content: Option<&Content>, i: usize) -> Result<MessageContent<'_>, Untranslatable> {
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
            invalid(
                format!("messages[{i}].content[{j}]"),
                format!("a {:?} part has no Responses counterpart", p.kind),
            )
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
