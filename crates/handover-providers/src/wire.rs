//! The OpenAI Chat Completions wire format (and DeepSeek's additions):
//! request serialisation and response / chunk / error decoding. Pure: no I/O.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    settings::{ProviderKind, ReasoningPassback},
    types::{
        ChatRequest, ChatResponse, FinishReason, Message, Role, StreamEvent, ToolCall, ToolChoice,
        Usage,
    },
};

/// Request body. Borrowed from the neutral request: no copies of messages.
#[derive(Serialize)]
pub(crate) struct WireRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user_id: Option<&'a str>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireToolCallOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
}

#[derive(Serialize)]
struct WireToolCallOut<'a> {
    id: &'a str,
    r#type: &'static str,
    function: WireFunctionOut<'a>,
}

#[derive(Serialize)]
struct WireFunctionOut<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    r#type: &'static str,
    function: WireToolDef<'a>,
}

#[derive(Serialize)]
struct WireToolDef<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    parameters: &'a Value,
}

/// How a request is shaped for one provider kind.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dialect {
    pub(crate) kind: ProviderKind,
    pub(crate) passback: ReasoningPassback,
    pub(crate) stream_usage: bool,
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

fn wire_message<'a>(m: &'a Message, d: Dialect) -> WireMessage<'a> {
    let pass_reasoning = d.kind == ProviderKind::DeepSeek
        && d.passback == ReasoningPassback::OnToolCallTurns
        && m.role == Role::Assistant
        && !m.tool_calls.is_empty();
    WireMessage {
        role: role_name(m.role),
        content: m.content.as_deref(),
        tool_calls: m
            .tool_calls
            .iter()
            .map(|c| WireToolCallOut {
                id: &c.id,
                r#type: "function",
                function: WireFunctionOut {
                    name: &c.name,
                    arguments: &c.arguments,
                },
            })
            .collect(),
        tool_call_id: m.tool_call_id.as_deref(),
        reasoning_content: if pass_reasoning {
            m.reasoning_content.as_deref()
        } else {
            None
        },
    }
}

/// Builds the request body for `model`.
pub(crate) fn wire_request<'a>(
    req: &'a ChatRequest,
    model: &'a str,
    d: Dialect,
    stream: bool,
) -> WireRequest<'a> {
    let (user, user_id) = match d.kind {
        ProviderKind::DeepSeek => (None, req.user.as_deref()),
        _ => (req.user.as_deref(), None),
    };
    WireRequest {
        model,
        messages: req.messages.iter().map(|m| wire_message(m, d)).collect(),
        tools: req
            .tools
            .iter()
            .map(|t| WireTool {
                r#type: "function",
                function: WireToolDef {
                    name: &t.name,
                    description: t.description.as_deref(),
                    parameters: &t.parameters,
                },
            })
            .collect(),
        tool_choice: req.tool_choice.as_ref().map(|c| match c {
            ToolChoice::Auto => Value::from("auto"),
            ToolChoice::None => Value::from("none"),
            ToolChoice::Required => Value::from("required"),
            ToolChoice::Function(name) => {
                serde_json::json!({"type": "function", "function": {"name": name}})
            }
        }),
        temperature: req.temperature,
        top_p: req.top_p,
        max_tokens: req.max_tokens,
        stop: &req.stop,
        seed: req.seed,
        user,
        user_id,
        stream,
        stream_options: (stream && d.stream_usage).then_some(StreamOptions {
            include_usage: true,
        }),
    }
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
