//! Realistic provider wire bodies (OpenAI and DeepSeek shapes), for mocks
//! and for assertions in users' own tests.

use serde_json::{Value, json};

/// Which provider's wire dialect a mock speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// OpenAI Chat Completions.
    OpenAi,
    /// DeepSeek (adds `reasoning_content`, cache-hit usage fields).
    DeepSeek,
}

impl Flavor {
    /// The model string the provider reports in answers (differs from the
    /// alias a client requests, as real providers do).
    pub fn answering_model(self) -> &'static str {
        match self {
            Flavor::OpenAi => "gpt-4o-mini-2024-07-18",
            Flavor::DeepSeek => "deepseek-chat-v3",
        }
    }
}

fn usage(flavor: Flavor, input: u64, output: u64) -> Value {
    match flavor {
        Flavor::DeepSeek => json!({"prompt_tokens": input, "completion_tokens": output,
            "total_tokens": input + output, "prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": input}),
        Flavor::OpenAi => json!({"prompt_tokens": input, "completion_tokens": output,
            "total_tokens": input + output, "prompt_tokens_details": {"cached_tokens": 0}}),
    }
}

fn completion(flavor: Flavor, message: Value, finish: &str) -> Value {
    json!({
        "id": "chatcmpl-testkit",
        "object": "chat.completion",
        "created": 1741569952,
        "model": flavor.answering_model(),
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": usage(flavor, 16, 10),
        "system_fingerprint": "fp_testkit"
    })
}

/// A complete text answer.
pub fn answer(flavor: Flavor, text: &str) -> Value {
    let mut message = json!({"role": "assistant", "content": text});
    if flavor == Flavor::DeepSeek {
        message["reasoning_content"] = json!("Thinking about the answer.");
    }
    completion(flavor, message, "stop")
}

/// An answer proposing one tool call.
pub fn tool_call(flavor: Flavor, call_id: &str, name: &str, arguments: &Value) -> Value {
    let message = json!({
        "role": "assistant",
        "content": null,
        "tool_calls": [{"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments.to_string()}}]
    });
    completion(flavor, message, "tool_calls")
}

/// An error body: `{"error": {"message", "type", "code"}}`.
pub fn error(message: &str, kind: Option<&str>, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

/// One SSE `data:` event for a chunk with `delta` and an optional finish reason.
pub fn chunk(flavor: Flavor, delta: Value, finish: Option<&str>) -> String {
    let v = json!({
        "id": "chatcmpl-testkit-stream",
        "object": "chat.completion.chunk",
        "created": 1741569952,
        "model": flavor.answering_model(),
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]
    });
    format!("data: {v}\n\n")
}

/// The usage chunk streams send last.
pub fn usage_chunk(flavor: Flavor) -> String {
    let v = json!({
        "id": "chatcmpl-testkit-stream",
        "object": "chat.completion.chunk",
        "created": 1741569952,
        "model": flavor.answering_model(),
        "choices": [],
        "usage": usage(flavor, 16, 3)
    });
    format!("data: {v}\n\n")
}

/// The SSE events of a text answer split into `parts`: a role chunk, one
/// chunk per part, then (if `finish`) a finish chunk and usage, then (if
/// `done`) the `[DONE]` sentinel.
pub fn text_stream(flavor: Flavor, parts: &[&str], finish: bool, done: bool) -> Vec<String> {
    let mut events = vec![chunk(
        flavor,
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    events.extend(
        parts
            .iter()
            .map(|p| chunk(flavor, json!({"content": p}), None)),
    );
    if finish {
        events.push(chunk(flavor, json!({}), Some("stop")));
        events.push(usage_chunk(flavor));
    }
    if done {
        events.push("data: [DONE]\n\n".to_owned());
    }
    events
}
