//! Response and stream-event types. Fields Handover does not interpret
//! are kept verbatim ([`Passthrough`], [`Usage::extra`]) so the gateway can
//! hand the answering provider's response on whole.

use serde_json::Value;

use crate::{fields::Fields, request::ToolCall};

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
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens (including reasoning tokens).
    pub output_tokens: u64,
    /// Of the output, reasoning tokens, if reported.
    pub reasoning_tokens: Option<u64>,
    /// Of the input, tokens served from the provider's cache, if reported.
    pub cached_input_tokens: Option<u64>,
    /// Every usage field other than `prompt_tokens` and
    /// `completion_tokens`, verbatim (`total_tokens`, `*_details`,
    /// DeepSeek's cache counters, ...).
    pub extra: Fields,
}

impl Usage {
    /// The OpenAI `usage` object: the provider's fields as reported, with
    /// `total_tokens` and the details filled in from the counts only where
    /// the provider sent none.
    pub fn to_openai(&self) -> Value {
        let mut text = Vec::with_capacity(128);
        self.write_openai_json(&mut text);
        serde_json::from_slice(&text).unwrap_or(Value::Null)
    }

    /// [`Usage::to_openai`] as JSON text, appended to `out`: what a
    /// server writes into a response without building the `Value`.
    pub fn write_openai_json(&self, out: &mut Vec<u8>) {
        crate::openai_json::usage(self, out);
    }
}

/// The fields of an answer (or of one stream chunk) that Handover does not
/// interpret, verbatim, so the gateway passes the provider's answer on
/// whole: `refusal`, `annotations`, `logprobs`, `service_tier`,
/// `system_fingerprint`, the provider's `id`, vendor fields.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Passthrough {
    /// Top-level fields other than `model`, `choices` and `usage` (`id`,
    /// `object`, `created`, `system_fingerprint`, `service_tier`, ...).
    pub top: Fields,
    /// Fields of the first choice other than its message (or delta) and
    /// `finish_reason` (`index`, `logprobs`, ...).
    pub choice: Fields,
    /// Fields of the message (or delta) other than content, tool calls and
    /// reasoning (`role`, `refusal`, `annotations`, `audio`, ...).
    pub message: Fields,
}

impl Passthrough {
    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.top.is_empty() && self.choice.is_empty() && self.message.is_empty()
    }
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
    /// Everything else the provider sent, verbatim.
    pub passthrough: Passthrough,
}

impl ChatResponse {
    /// The answer as an OpenAI `chat.completion` object: the provider's
    /// fields as it sent them, `object`, `model` and `usage` its own; `id`
    /// and `created` from the defaults only where the provider sent none.
    pub fn into_openai(self, default_id: &str, default_created: u64) -> Value {
        serde_json::from_slice(&self.openai_json(default_id, default_created))
            .unwrap_or(Value::Null)
    }

    /// [`ChatResponse::into_openai`] as JSON text (the same object, members
    /// sorted by key as the `Value` serializes them), written without
    /// building the `Value`: what the gateway sends.
    pub fn openai_json(&self, default_id: &str, default_created: u64) -> Vec<u8> {
        crate::openai_json::completion(self, default_id, default_created)
    }
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
    /// first piece, `arguments` is concatenated across pieces. The
    /// piece's other members (`extra_content`, vendor fields) travel with
    /// it as sent; an assembled call keeps each member's latest value.
    ToolCallDelta {
        /// Position of the call in the answer.
        index: u32,
        /// Call id, when present in this piece.
        id: Option<String>,
        /// Function name, when present in this piece.
        name: Option<String>,
        /// A fragment of the JSON arguments.
        arguments: Option<String>,
        /// This piece's other members of the call (see [`ToolCall::extra`]).
        extra: Fields,
        /// This piece's other members of its `function` (see
        /// [`ToolCall::function_extra`]).
        function_extra: Fields,
    },
    /// Token usage (usually the last event).
    Usage(Usage),
    /// Chunk fields Handover does not interpret (the provider's `id`,
    /// `system_fingerprint`, `logprobs`, a `refusal` piece, ...), sent
    /// before the chunk's other events whenever a chunk has any.
    Passthrough(Passthrough),
    /// The model finished; the answer is complete.
    Finish {
        /// Why.
        reason: FinishReason,
    },
}
