//! Anthropic's Messages API (`POST {base}/messages`, `x-api-key`,
//! `anthropic-version`), translated from and to the OpenAI shape.
//!
//! Requests: system messages become `system`; assistant `tool_calls`
//! become `tool_use` blocks and `tool` messages `tool_result` blocks in the
//! next user turn (consecutive turns of one role are merged, results first,
//! as the API requires); call ids are kept, or — where a foreign id has
//! characters Anthropic refuses — mapped by one deterministic function on
//! both sides so every result still attaches to its call. Answers:
//! `tool_use` becomes `tool_calls` (arguments as JSON text), stop reasons
//! map to finish reasons, usage counts cache reads and writes as input
//! (OpenAI's `prompt_tokens` includes cached tokens) and keeps Anthropic's
//! own counters verbatim. Streams: `anthropic_stream.rs`.

use std::fmt::Write as _;

use eventsource_stream::Event;
use http::{HeaderMap, HeaderName, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Dialect, StreamDecoder, anthropic_stream::MessageDecoder, secret_header};
use crate::{
    error::ProviderError,
    request::{ChatRequest, Content, ContentPart, Message, Role, ToolChoice},
    settings::ProviderSettings,
    types::{ChatResponse, FinishReason, Passthrough, Usage},
};

/// Output limit sent when the request sets none (the API requires one).
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 4096;

/// OpenAI parameters with no Messages API counterpart that change nothing
/// a caller relies on; they are dropped (as are `null`s, `n: 1`,
/// `logprobs: false` and a `text` response format). Every other unknown parameter is
/// forwarded, so Anthropic refuses it by name rather than Handover
/// silently ignoring it.
const DROPPED: &[&str] = &[
    "store",
    "frequency_penalty",
    "presence_penalty",
    "service_tier",
    "parallel_tool_calls",
];

pub(crate) struct AnthropicDialect {
    url: String,
    version: String,
}

impl AnthropicDialect {
    pub(crate) fn new(settings: &ProviderSettings) -> Self {
        Self {
            url: format!("{}/messages", settings.base_url.trim_end_matches('/')),
            version: settings.api_version().unwrap_or("2023-06-01").to_owned(),
        }
    }
}

impl Dialect for AnthropicDialect {
    fn url(&self, _model: &str, _stream: bool) -> String {
        self.url.clone()
    }

    fn headers(&self, key: Option<&SecretString>) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        let version =
            HeaderValue::from_str(&self.version).map_err(|_| ProviderError::InvalidSettings {
                field: "api_version".into(),
                reason: "contains characters not allowed in an http header".into(),
            })?;
        headers.insert(HeaderName::from_static("anthropic-version"), version);
        if let Some(key) = key {
            let (name, value) =
                secret_header(HeaderName::from_static("x-api-key"), key.expose_secret())?;
            headers.insert(name, value);
        }
        Ok(headers)
    }

    fn body(
        &self,
        req: &ChatRequest,
        model: &str,
        stream: bool,
    ) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(&request_body(req, model, stream)?)
    }

    fn response(
        &self,
        body: &[u8],
        requested_model: &str,
        request_id: Option<String>,
    ) -> Result<ChatResponse, serde_json::Error> {
        let m: WireMessage = serde_json::from_slice(body)?;
        Ok(m.into_response(requested_model, request_id))
    }

    fn decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(MessageDecoder::default())
    }
}

fn invalid(what: String) -> serde_json::Error {
    <serde_json::Error as serde::ser::Error>::custom(what)
}

/// The Messages API body for `req`.
pub(crate) fn request_body(
    req: &ChatRequest,
    model: &str,
    stream: bool,
) -> Result<Value, serde_json::Error> {
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
            tool
        });
        body.insert("tools".into(), tools.collect());
    }
    if let Some(choice) = tool_choice(req) {
        body.insert("tool_choice".into(), choice);
    }
    if let Some(t) = req.temperature {
        body.insert("temperature".into(), t.into());
    }
    if let Some(p) = req.top_p {
        body.insert("top_p".into(), p.into());
    }
    if !req.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(req.stop));
    }
    if let Some(user) = &req.user {
        body.insert("metadata".into(), json!({"user_id": user}));
    }
    for (k, v) in &req.extra {
        match k.as_str() {
            k if DROPPED.contains(&k) => {}
            // Explicit "off" values of OpenAI-only parameters (SDKs and
            // frameworks send them): nothing is asked, nothing is lost.
            _ if v.is_null() => {}
            "n" if v == &json!(1) => {}
            "logprobs" if v == &json!(false) => {}
            "response_format" if v == &json!({"type": "text"}) => {}
            // OpenAI's `metadata` (stored-completion tags) is not
            // Anthropic's (only `user_id`).
            "metadata" if body.contains_key("metadata") || !anthropic_metadata(v) => {}
            _ => {
                body.insert(k.clone(), v.clone());
            }
        }
    }
    if stream {
        body.insert("stream".into(), true.into());
    }
    Ok(Value::Object(body))
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
fn messages(msgs: &[Message]) -> Result<(Vec<Value>, Vec<Value>), serde_json::Error> {
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

fn assistant_blocks(m: &Message, i: usize) -> Result<Vec<Value>, serde_json::Error> {
    let mut blocks = text_blocks(m.content.as_ref(), i)?;
    for (j, c) in m.tool_calls.iter().enumerate() {
        let input: Value = if c.arguments.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(&c.arguments).map_err(|_| {
                invalid(format!(
                    "messages[{i}].tool_calls[{j}].function.arguments is not JSON"
                ))
            })?
        };
        if !input.is_object() {
            return Err(invalid(format!(
                "messages[{i}].tool_calls[{j}].function.arguments is not a JSON object"
            )));
        }
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
fn text_blocks(content: Option<&Content>, i: usize) -> Result<Vec<Value>, serde_json::Error> {
    let text = |t: &str| json!({"type": "text", "text": t});
    Ok(match content {
        None => Vec::new(),
        Some(Content::Text(t)) if t.is_empty() => Vec::new(),
        Some(Content::Text(t)) => vec![text(t)],
        Some(Content::Parts(parts)) => {
            let mut out = Vec::new();
            for (j, p) in parts.iter().enumerate() {
                match p.kind.as_str() {
                    "text" | "refusal" => {
                        if let Some(t) = p.text.as_deref().filter(|t| !t.is_empty()) {
                            out.push(text(t));
                        }
                    }
                    "image_url" => out.push(image(p).ok_or_else(|| {
                        invalid(format!(
                            "messages[{i}].content[{j}].image_url must be an http(s) or base64 data URL"
                        ))
                    })?),
                    other => {
                        return Err(invalid(format!(
                            "messages[{i}].content[{j}]: part type {other:?} has no Anthropic equivalent"
                        )));
                    }
                }
            }
            out
        }
    })
}

/// An `image_url` part as an image block (URL or base64 source).
fn image(p: &ContentPart) -> Option<Value> {
    let url = p.extra.get("image_url")?.get("url")?.as_str()?;
    if let Some(rest) = url.strip_prefix("data:") {
        let (media_type, data) = rest.split_once(";base64,")?;
        return Some(json!({"type": "image", "source": {
            "type": "base64", "media_type": media_type, "data": data}}));
    }
    (url.starts_with("https://") || url.starts_with("http://"))
        .then(|| json!({"type": "image", "source": {"type": "url", "url": url}}))
}

// ---- answers ----

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    content: Vec<WireBlock>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<Map<String, Value>>,
}

/// A content block of an answer.
#[derive(Deserialize)]
pub(crate) struct WireBlock {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    #[serde(default)]
    pub(crate) text: Option<String>,
    #[serde(default)]
    pub(crate) thinking: Option<String>,
    #[serde(default)]
    pub(crate) id: Option<String>,
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) input: Option<Value>,
}

impl WireMessage {
    fn into_response(self, requested_model: &str, request_id: Option<String>) -> ChatResponse {
        let mut content: Option<String> = None;
        let mut reasoning: Option<String> = None;
        let mut tool_calls = Vec::new();
        for b in self.content {
            match b.kind.as_str() {
                "text" => content
                    .get_or_insert_default()
                    .push_str(b.text.as_deref().unwrap_or("")),
                "thinking" => reasoning
                    .get_or_insert_default()
                    .push_str(b.thinking.as_deref().unwrap_or("")),
                "tool_use" => tool_calls.push(crate::request::ToolCall {
                    id: b.id.unwrap_or_default(),
                    name: b.name.unwrap_or_default(),
                    arguments: b.input.unwrap_or_else(|| json!({})).to_string(),
                }),
                _ => {}
            }
        }
        let mut passthrough = Passthrough::default();
        if let Some(id) = self.id {
            passthrough.top.insert("id".into(), id.into());
        }
        ChatResponse {
            content,
            tool_calls,
            reasoning_content: reasoning,
            finish_reason: self.stop_reason.as_deref().map(finish_reason),
            usage: self.usage.map(usage),
            model: self
                .model
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| requested_model.to_owned()),
            request_id,
            passthrough,
        }
    }
}

/// Anthropic's `stop_reason` as a finish reason.
pub(crate) fn finish_reason(stop: &str) -> FinishReason {
    match stop {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// Anthropic usage: `input_tokens` excludes cache reads and writes, which
/// OpenAI's `prompt_tokens` includes, so input is their sum; cache reads
/// are the cached input. Anthropic's counters stay in `extra`.
pub(crate) fn usage(mut u: Map<String, Value>) -> Usage {
    let n = |u: &Map<String, Value>, k: &str| u.get(k).and_then(Value::as_u64);
    let read = n(&u, "cache_read_input_tokens");
    let input = n(&u, "input_tokens").unwrap_or(0)
        + n(&u, "cache_creation_input_tokens").unwrap_or(0)
        + read.unwrap_or(0);
    let output = n(&u, "output_tokens").unwrap_or(0);
    u.remove("input_tokens");
    u.remove("output_tokens");
    u.retain(|_, v| !v.is_null());
    Usage {
        input_tokens: input,
        output_tokens: output,
        reasoning_tokens: None,
        cached_input_tokens: read,
        extra: u,
    }
}

/// An SSE event's JSON (`type` decides; the SSE `event:` name repeats it).
pub(crate) fn event_json(event: &Event) -> Result<Value, serde_json::Error> {
    serde_json::from_str(event.data.trim())
}
