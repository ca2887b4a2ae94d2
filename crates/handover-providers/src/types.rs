//! Response and stream-event types.

use crate::request::ToolCall;

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
