//! Provider-neutral request, response and stream-event types.

use serde_json::Value;

use crate::error::ProviderError;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Instructions.
    System,
    /// The end user.
    User,
    /// The model (possibly with tool calls).
    Assistant,
    /// A tool result answering one tool call.
    Tool,
}

/// One tool call proposed by the model. `id` is attempt metadata (it changes
/// between providers), never an operation identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// Provider-assigned call id.
    pub id: String,
    /// Function name.
    pub name: String,
    /// JSON arguments exactly as the model produced them.
    pub arguments: String,
}

/// One conversation message.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Author.
    pub role: Role,
    /// Text content.
    pub content: Option<String>,
    /// Assistant tool calls.
    pub tool_calls: Vec<ToolCall>,
    /// For [`Role::Tool`]: the call this result answers.
    pub tool_call_id: Option<String>,
    /// Assistant reasoning (DeepSeek); sent back only as
    /// [`crate::ReasoningPassback`] allows.
    pub reasoning_content: Option<String>,
}

impl Message {
    fn new(role: Role, content: Option<String>) -> Self {
        Self {
            role,
            content,
            tool_calls: Vec::new(),
            tool_call_id: None,
            reasoning_content: None,
        }
    }

    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self::new(Role::System, Some(text.into()))
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::new(Role::User, Some(text.into()))
    }

    /// An assistant text message.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::new(Role::Assistant, Some(text.into()))
    }

    /// An assistant message that made tool calls.
    pub fn assistant_tool_calls(content: Option<String>, calls: Vec<ToolCall>) -> Self {
        let mut m = Self::new(Role::Assistant, content);
        m.tool_calls = calls;
        m
    }

    /// A tool result for call `tool_call_id`.
    pub fn tool_result(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        let mut m = Self::new(Role::Tool, Some(content.into()));
        m.tool_call_id = Some(tool_call_id.into());
        m
    }

    /// Attaches reasoning content (an assistant message received from DeepSeek).
    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> Self {
        self.reasoning_content = Some(reasoning.into());
        self
    }
}

/// A function the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// Function name.
    pub name: String,
    /// What it does (shown to the model).
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    pub parameters: Value,
}

/// How the model may use tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// This function.
    Function(String),
}

/// A provider-neutral chat request. Streaming is chosen by calling
/// [`crate::Provider::chat_stream`] instead of [`crate::Provider::chat`].
///
/// ```
/// use handover_providers::{ChatRequest, Message};
/// let req = ChatRequest::new(vec![Message::system("be brief"), Message::user("hi")])
///     .with_max_tokens(64)
///     .with_data_class("internal");
/// assert_eq!(req.messages.len(), 2);
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    /// The conversation, oldest first. Must not be empty.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    pub tools: Vec<Tool>,
    /// Tool choice; `None` leaves the provider default.
    pub tool_choice: Option<ToolChoice>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Nucleus sampling.
    pub top_p: Option<f32>,
    /// Output token limit.
    pub max_tokens: Option<u32>,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// Sampling seed.
    pub seed: Option<i64>,
    /// Data class of the content (the router's data policy); never sent.
    pub data_class: Option<String>,
    /// End-user id for provider abuse monitoring (`user`; DeepSeek `user_id`).
    pub user: Option<String>,
}

impl ChatRequest {
    /// A request with these messages and nothing else set.
    pub fn new(messages: Vec<Message>) -> Self {
        Self {
            messages,
            ..Self::default()
        }
    }

    /// Sets the tools.
    pub fn with_tools(mut self, tools: Vec<Tool>) -> Self {
        self.tools = tools;
        self
    }

    /// Sets the temperature.
    pub fn with_temperature(mut self, t: f32) -> Self {
        self.temperature = Some(t);
        self
    }

    /// Sets the output token limit.
    pub fn with_max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = Some(n);
        self
    }

    /// Tags the data class.
    pub fn with_data_class(mut self, class: impl Into<String>) -> Self {
        self.data_class = Some(class.into());
        self
    }

    /// Sets the end-user id.
    pub fn with_user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    /// Checks the request; the error names the offending field. Nothing is
    /// sent for an invalid request.
    pub fn validate(&self) -> Result<(), ProviderError> {
        let bad = |field: String, reason: &str| {
            Err(ProviderError::InvalidRequest {
                field,
                reason: reason.into(),
            })
        };
        if self.messages.is_empty() {
            return bad("messages".into(), "must not be empty");
        }
        for (i, m) in self.messages.iter().enumerate() {
            match m.role {
                Role::Tool if m.tool_call_id.as_deref().is_none_or(str::is_empty) => {
                    return bad(
                        format!("messages[{i}].tool_call_id"),
                        "is required for tool results",
                    );
                }
                Role::Assistant if m.content.is_none() && m.tool_calls.is_empty() => {
                    return bad(
                        format!("messages[{i}].content"),
                        "an assistant message needs content or tool calls",
                    );
                }
                Role::System | Role::User if m.content.is_none() => {
                    return bad(format!("messages[{i}].content"), "is required");
                }
                _ => {}
            }
            for (j, c) in m.tool_calls.iter().enumerate() {
                if c.id.is_empty() || c.name.is_empty() {
                    return bad(
                        format!("messages[{i}].tool_calls[{j}]"),
                        "id and name must not be empty",
                    );
                }
            }
        }
        for (i, t) in self.tools.iter().enumerate() {
            if t.name.is_empty() {
                return bad(format!("tools[{i}].name"), "must not be empty");
            }
        }
        if let Some(t) = self.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return bad("temperature".into(), "must be between 0 and 2");
        }
        Ok(())
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FinishReason {
    /// Natural end or stop sequence.
    Stop,
    /// Output token limit.
    Length,
    /// The model made tool calls.
    ToolCalls,
    /// The provider filtered the output.
    ContentFilter,
    /// Anything else, verbatim (e.g. DeepSeek `insufficient_system_resource`).
    Other(String),
}

impl FinishReason {
    pub(crate) fn parse(s: &str) -> Self {
        match s {
            "stop" => FinishReason::Stop,
            "length" => FinishReason::Length,
            "tool_calls" | "function_call" => FinishReason::ToolCalls,
            "content_filter" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_owned()),
        }
    }

    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Other(s) => s,
        }
    }
}

/// Token usage as the provider reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens (including reasoning tokens).
    pub output_tokens: u64,
    /// Of the output, reasoning tokens, if reported.
    pub reasoning_tokens: Option<u64>,
    /// Of the input, tokens served from the provider's cache, if reported.
    pub cached_input_tokens: Option<u64>,
}

/// A complete answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    /// Text content.
    pub content: Option<String>,
    /// Tool calls proposed by the model.
    pub tool_calls: Vec<ToolCall>,
    /// Reasoning (DeepSeek thinking mode / reasoner).
    pub reasoning_content: Option<String>,
    /// Why the model stopped, if reported.
    pub finish_reason: Option<FinishReason>,
    /// Usage, if reported.
    pub usage: Option<Usage>,
    /// The model as reported by the provider (falls back to the requested
    /// model only if the provider reported none).
    pub model: String,
    /// The provider's request id (`x-request-id` header), if sent.
    pub request_id: Option<String>,
}

/// One event of a streamed answer, in arrival order.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StreamEvent {
    /// The model the provider reports (sent once, before the first delta of
    /// the first chunk that names a model).
    Model(String),
    /// A piece of text.
    ContentDelta(String),
    /// A piece of reasoning (DeepSeek).
    ReasoningDelta(String),
    /// A piece of tool call `index`; `id` and `name` usually arrive in the
    /// first piece, `arguments` is concatenated across pieces.
    ToolCallDelta {
        /// Position of the call in the answer.
        index: u32,
        /// Call id, when present in this piece.
        id: Option<String>,
        /// Function name, when present in this piece.
        name: Option<String>,
        /// A fragment of the JSON arguments.
        arguments: Option<String>,
    },
    /// Token usage (usually the last event).
    Usage(Usage),
    /// The model finished; the answer is complete.
    Finish {
        /// Why.
        reason: FinishReason,
    },
}
