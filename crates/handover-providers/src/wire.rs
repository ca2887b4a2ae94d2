//! The OpenAI Chat Completions wire format (and DeepSeek's additions):
//! request serialisation and response / chunk / error decoding. Pure: no I/O.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    request::{ChatRequest, Role, ToolCall},
    settings::{ProviderKind, ReasoningPassback},
    types::{ChatResponse, FinishReason, StreamEvent, Usage},
};

/// Request body: the one request schema plus what the call sets.
#[derive(Serialize)]
struct Outgoing<'a> {
    model: &'a str,
    #[serde(flatten)]
    request: &'a ChatRequest,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// How a request is shaped for one provider kind.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dialect {
    pub(crate) kind: ProviderKind,
    pub(crate) passback: ReasoningPassback,
    pub(crate) stream_usage: bool,
}

/// The request body for `model`, as JSON bytes. OpenAI and OpenAI-compatible
/// providers get the request as it is; DeepSeek gets `user` as `user_id`
/// and, on assistant tool-call turns where its passback allows, the
/// message's `reasoning_content`.
pub(crate) fn request_body(
    req: &ChatRequest,
    model: &str,
    d: Dialect,
    stream: bool,
) -> Result<Vec<u8>, serde_json::Error> {
    let out = Outgoing {
        model,
        request: req,
        stream,
        stream_options: (stream && d.stream_usage).then_some(StreamOptions {
            include_usage: true,
        }),
    };
    if d.kind != ProviderKind::DeepSeek {
        return serde_json::to_vec(&out);
    }
    let mut body = serde_json::to_value(&out)?;
    if let Some(obj) = body.as_object_mut() {
        if let Some(user) = obj.remove("user") {
            obj.insert("user_id".into(), user);
        }
        let passback = d.passback == ReasoningPassback::OnToolCallTurns;
        if let Some(Value::Array(messages)) = obj.get_mut("messages") {
            for (wire, m) in messages.iter_mut().zip(&req.messages) {
                let pass = passback && m.role == Role::Assistant && !m.tool_calls.is_empty();
                if let (true, Some(r), Some(w)) = (pass, &m.reasoning_content, wire.as_object_mut())
                {
                    w.insert("reasoning_content".into(), Value::from(r.as_str()));
                }
            }
        }
    }
    serde_json::to_vec(&body)
}

// ---- responses ----

#[derive(Deserialize)]
pub(crate) struct WireResponse {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireChoice {
    #[serde(default)]
    message: Option<WireMessageIn>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct WireMessageIn {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<WireToolCallIn>,
}

#[derive(Deserialize)]
struct WireToolCallIn {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunctionIn>,
}

#[derive(Deserialize)]
struct WireFunctionIn {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize, Clone, Copy)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    /// DeepSeek reports cache hits at the top level.
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Deserialize, Clone, Copy)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

#[derive(Deserialize, Clone, Copy)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        Usage {
            input_tokens: u.prompt_tokens,
            output_tokens: u.completion_tokens,
            reasoning_tokens: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
            cached_input_tokens: u
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .or(u.prompt_cache_hit_tokens),
        }
    }
}

impl WireResponse {
    /// Converts to the neutral response.
    pub(crate) fn into_response(
        self,
        requested_model: &str,
        request_id: Option<String>,
    ) -> ChatResponse {
        let choice = self.choices.into_iter().next();
        let (message, finish) = match choice {
            Some(c) => (c.message.unwrap_or_default(), c.finish_reason),
            None => (WireMessageIn::default(), None),
        };
        ChatResponse {
            content: message.content,
            tool_calls: message
                .tool_calls
                .into_iter()
                .map(|c| {
                    let f = c.function.unwrap_or(WireFunctionIn {
                        name: None,
                        arguments: None,
                    });
                    ToolCall {
                        id: c.id.unwrap_or_default(),
                        name: f.name.unwrap_or_default(),
                        arguments: f.arguments.unwrap_or_default(),
                    }
                })
                .collect(),
            reasoning_content: message.reasoning_content,
            finish_reason: finish.as_deref().map(FinishReason::parse),
            usage: self.usage.map(Usage::from),
            model: self
                .model
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| requested_model.to_owned()),
            request_id,
        }
    }
}

// ---- stream chunks ----

/// One SSE data payload: a chunk, or an `{"error": ...}` object.
#[derive(Deserialize)]
pub(crate) struct WireChunk {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<WireChunkChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    /// An in-stream error: an object like the HTTP error body, or a string.
    #[serde(default)]
    pub(crate) error: Option<Value>,
}

#[derive(Deserialize)]
struct WireChunkChoice {
    #[serde(default)]
    delta: Option<WireMessageIn>,
    #[serde(default)]
    finish_reason: Option<String>,
}

impl WireChunk {
    /// Appends this chunk's events to `out`; `model_seen` makes the
    /// [`StreamEvent::Model`] event appear once.
    pub(crate) fn push_events(self, model_seen: &mut bool, out: &mut Vec<StreamEvent>) {
        if !*model_seen && let Some(m) = self.model.filter(|m| !m.is_empty()) {
            *model_seen = true;
            out.push(StreamEvent::Model(m));
        }
        if let Some(choice) = self.choices.into_iter().next() {
            if let Some(delta) = choice.delta {
                if let Some(r) = delta.reasoning_content.filter(|r| !r.is_empty()) {
                    out.push(StreamEvent::ReasoningDelta(r));
                }
                if let Some(c) = delta.content.filter(|c| !c.is_empty()) {
                    out.push(StreamEvent::ContentDelta(c));
                }
                for (pos, tc) in delta.tool_calls.into_iter().enumerate() {
                    let (name, arguments) = match tc.function {
                        Some(f) => (f.name, f.arguments),
                        None => (None, None),
                    };
                    out.push(StreamEvent::ToolCallDelta {
                        index: tc.index.unwrap_or(pos as u32),
                        id: tc.id,
                        name,
                        arguments,
                    });
                }
            }
            if let Some(reason) = choice.finish_reason {
                out.push(StreamEvent::Finish {
                    reason: FinishReason::parse(&reason),
                });
            }
        }
        if let Some(u) = self.usage {
            out.push(StreamEvent::Usage(u.into()));
        }
    }
}

// ---- errors ----

/// `{"error": {...}}` as OpenAI and DeepSeek send it.
#[derive(Deserialize)]
pub(crate) struct WireErrorEnvelope {
    pub(crate) error: WireError,
}

/// The error object. `code` is a string at OpenAI, sometimes a number elsewhere.
#[derive(Deserialize, Default)]
pub(crate) struct WireError {
    #[serde(default)]
    pub(crate) message: Option<String>,
    #[serde(default)]
    pub(crate) r#type: Option<String>,
    #[serde(default)]
    pub(crate) code: Option<Value>,
}

impl WireError {
    /// Reads an error value that may be an object or a bare string.
    pub(crate) fn from_value(v: Value) -> Self {
        match v {
            Value::String(message) => WireError {
                message: Some(message),
                ..WireError::default()
            },
            other => serde_json::from_value(other).unwrap_or_default(),
        }
    }

    /// The code as text (numbers become their decimal form).
    pub(crate) fn code_str(&self) -> Option<String> {
        match &self.code {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        }
    }
}
