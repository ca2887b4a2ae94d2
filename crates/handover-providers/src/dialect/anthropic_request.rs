//! The Messages API request body, translated from the OpenAI-shaped
//! [`ChatRequest`]: system messages hoisted into `system`, consecutive
//! turns of one role merged (tool results first), assistant `tool_calls` as
//! `tool_use` blocks and `tool` messages as `tool_result` blocks with ids
//! kept or mapped by [`tool_use_id`], images as image blocks, tools and
//! tool choice in Anthropic's shape. Pure: no I/O.

use super::Untranslatable;
use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use super::translate::{
    OPENAI_HINTS, call_arguments, content_blocks, data_url, invalid, is_off, sampling,
};
use crate::request::{ChatRequest, Content, ContentPart, Message, Role, ToolChoice};

/// Output limit sent when the request sets none (the API requires one).
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 4096;

/// OpenAI parameters with no Messages API counterpart that change nothing
/// a caller relies on; they are dropped (as are [`OPENAI_HINTS`], `null`s, `n: 1`,
/// `logprobs: false`, a `text` response format and text-only `modalities`). Every other unknown parameter is
/// forwarded, so Anthropic refuses it by name rather than Handover
/// silently ignoring it.
const DROPPED: &[&str] = &[
    "store",
    "frequency_penalty",
    "presence_penalty",
    "service_tier",
    "parallel_tool_calls",
];

/// The Messages API body for `req`.
pub(crate) fn request_body(
    req: &ChatRequest,
    model: &str,
    stream: bool,
) -> Result<Value, Untranslatable> {
    let mut body = Map::new();
    body.insert("model".into(), model.into());
    let max = req
        .max_tokens
        .or(req.max_completion_tokens)
        .unwrap_or(DEFAULT_MAX_TOKENS);
    body.insert("max_tokens".into(), max.into());
    let (system, messages) = messages(&req.messages)?;
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !req.tools.is_empty() {
        let tools = req.tools.iter().map(|t| {
            let mut tool = json!({"name": t.name, "input_schema": t.parameters});
            if let Some(d) = &t.description {
                tool["description"] = d.as_str().into();
            }
            // Strict tool use: the arguments are held to the schema, as
            // OpenAI's `strict` holds them (never a weaker request).
            if t.strict == Some(true) {
                tool["strict"] = true.into();
            }
            tool
        });
        body.insert("tools".into(), tools.collect());
    }
    if let Some(choice) = tool_choice(req) {
        body.insert("tool_choice".into(), choice);
    }
    if let Some(t) = req.temperature {
        body.insert("temperature".into(), sampling(t));
    }
    if let Some(p) = req.top_p {
        body.insert("top_p".into(), sampling(p));
    }
    if !req.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(req.stop));
    }
    if let Some(user) = &req.user {
        body.insert("metadata".into(), json!({"user_id": user}));
    }
    let mut format = None;
    for (k, v) in &req.extra {
        match k.as_str() {
            k if DROPPED.contains(&k) || OPENAI_HINTS.contains(&k) => {}
            k if is_off(k, v) => {}
            "response_format" if v.get("type") == Some(&json!("json_schema")) => {
                format = Some(json_schema_format(v)?);
            }
            // OpenAI's `metadata` (stored-completion tags) is not
            // Anthropic's (only `user_id`).
            "metadata" if body.contains_key("metadata") || !anthropic_metadata(v) => {}
            _ => {
                body.insert(k.clone(), v.clone());
            }
        }
    }
    if let Some(format) = format {
        // Into the request's own `output_config` (its `effort`, say), if
        // it sent one.
        let config = body
            .entry("output_config")
            .or_insert_with(|| Value::Object(Map::new()));
        let Some(config) = config.as_object_mut() else {
            return Err(invalid("output_config", "must be an object"));
        };
        config.insert("format".into(), format);
    }
    if stream {
        body.insert("stream".into(), true.into());
    }
    Ok(Value::Object(body))
}

/// OpenAI's `response_format: {type: json_schema, json_schema: {schema}}`
/// as Anthropic's structured output, `output_config.format`: the answer's
/// text held to the schema. (Only a provider declared to have structured
/// outputs receives one: see `ProviderKind::supports`.)
fn json_schema_format(rf: &Value) -> Result<Value, Untranslatable> {
    let Some(schema) = rf.pointer("/json_schema/schema").filter(|s| s.is_object()) else {
        return Err(invalid(
            "response_format.json_schema.schema",
            "Anthropic's structured outputs need the schema as an object",
        ));
    };
    Ok(json!({"type": "json_schema", "schema": schema}))
}

fn anthropic_metadata(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|m| m.keys().all(|k| k == "user_id"))
}

/// `tool_choice`, with `parallel_tool_calls: false` as
/// `disable_parallel_tool_use`.
fn tool_choice(req: &ChatRequest) -> Option<Value> {
    let serial = req.extra.get("parallel_tool_calls") == Some(&Value::Bool(false));
    let mut choice = match &req.tool_choice {
        None if serial && !req.tools.is_empty() => json!({"type": "auto"}),
        None => return None,
        Some(ToolChoice::Auto) => json!({"type": "auto"}),
        Some(ToolChoice::None) => return Some(json!({"type": "none"})),
        Some(ToolChoice::Required) => json!({"type": "any"}),
        Some(ToolChoice::Function(name)) => json!({"type": "tool", "name": name}),
        Some(ToolChoice::Other(v)) => v.clone(),
    };
    if serial && let Some(c) = choice.as_object_mut() {
        c.insert("disable_parallel_tool_use".into(), true.into());
    }
    Some(choice)
}

/// A tool call id Anthropic accepts (`^[a-zA-Z0-9_-]+$`): kept when it
/// already is one, else hex-encoded behind a prefix. The same function
/// serves `tool_use.id` and `tool_result.tool_use_id`, so pairs stay paired.
pub(crate) fn tool_use_id(id: &str) -> String {
    let ok = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    if !id.is_empty() && id.bytes().all(ok) {
        return id.to_owned();
    }
    let mut out = String::from("hx_");
    for b in id.bytes() {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// `system` blocks and the conversation, consecutive turns of one role
/// merged (tool results open the user turn that carries them).
fn messages(msgs: &[Message]) -> Result<(Vec<Value>, Vec<Value>), Untranslatable> {
    let mut system = Vec::new();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let (role, blocks) = match m.role {
            Role::System => {
                system.extend(text_blocks(m.content.as_ref(), i)?);
                continue;
            }
            Role::User => ("user", text_blocks(m.content.as_ref(), i)?),
            Role::Assistant => ("assistant", assistant_blocks(m, i)?),
            Role::Tool => {
                let id = m.tool_call_id.as_deref().unwrap_or_default();
                let text = m.content.as_ref().map(Content::text).unwrap_or_default();
                let block = json!({
                    "type": "tool_result",
                    "tool_use_id": tool_use_id(id),
                    "content": text,
                });
                ("user", vec![block])
            }
        };
        match turns.last_mut() {
            Some((r, prev)) if *r == role => {
                if m.role == Role::Tool {
                    // Results come first in a user turn.
                    let at = prev
                        .iter()
                        .take_while(|b| b["type"] == "tool_result")
                        .count();
                    prev.splice(at..at, blocks);
                } else {
                    prev.extend(blocks);
                }
            }
            _ => turns.push((role, blocks)),
        }
    }
    let turns = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    Ok((system, turns))
}

fn assistant_blocks(m: &Message, i: usize) -> Result<Vec<Value>, Untranslatable> {
    let mut blocks = text_blocks(m.content.as_ref(), i)?;
    for (j, c) in m.tool_calls.iter().enumerate() {
        let input = call_arguments(c, i, j)?;
        blocks.push(json!({
            "type": "tool_use",
            "id": tool_use_id(&c.id),
            "name": c.name,
            "input": input,
        }));
    }
    Ok(blocks)
}

/// Text and images as content blocks; empty text is left out (the API
/// refuses empty text blocks).
fn text_blocks(content: Option<&Content>, i: usize) -> Result<Vec<Value>, Untranslatable> {
    content_blocks(
        content,
        i,
        "Anthropic",
        |t| json!({"type": "text", "text": t}),
        image,
    )
}

/// An `image_url` part as an image block (URL or base64 source).
fn image(p: &ContentPart) -> Option<Value> {
    let url = p.extra.get("image_url")?.get("url")?.as_str()?;
    if url.starts_with("data:") {
        let (media_type, data) = data_url(url)?;
        return Some(json!({"type": "image", "source": {
            "type": "base64", "media_type": media_type, "data": data}}));
    }
    (url.starts_with("https://") || url.starts_with("http://"))
        .then(|| json!({"type": "image", "source": {"type": "url", "url": url}}))
}
