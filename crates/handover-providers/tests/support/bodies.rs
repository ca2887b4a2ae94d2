//! Realistic provider bodies (shapes copied from OpenAI and DeepSeek docs).

use handover_providers::ProviderKind;
use serde_json::{Value, json};

/// The model string the provider reports (differs from the requested alias).
pub fn answering_model(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "gpt-4o-mini-2024-07-18",
        ProviderKind::DeepSeek => "deepseek-chat-v3",
        _ => "Qwen/Qwen2.5-7B-Instruct-served",
    }
}

pub fn success(kind: ProviderKind) -> Value {
    match kind {
        ProviderKind::DeepSeek => json!({
            "id": "930c60df-bf64-41c9-a88e-3ec75f81e00e",
            "object": "chat.completion",
            "created": 1705651092,
            "model": answering_model(kind),
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": "Hello! How can I help you today?"},
                "logprobs": null,
                "finish_reason": "stop"
            }],
            "usage": {"prompt_tokens": 16, "completion_tokens": 10, "total_tokens": 26,
                      "prompt_cache_hit_tokens": 4, "prompt_cache_miss_tokens": 12},
            "system_fingerprint": "fp_44709d6fcb"
        }),
        _ => json!({
            "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
            "object": "chat.completion",
            "created": 1741569952,
            "model": answering_model(kind),
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": "Hello! How can I help you today?",
                            "refusal": null, "annotations": []},
                "logprobs": null,
                "finish_reason": "stop"
            }],
            "usage": {"prompt_tokens": 16, "completion_tokens": 10, "total_tokens": 26,
                      "prompt_tokens_details": {"cached_tokens": 4, "audio_tokens": 0},
                      "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}},
            "service_tier": "default",
            "system_fingerprint": "fp_06737a9306"
        }),
    }
}

pub fn tool_call_response(kind: ProviderKind) -> Value {
    json!({
        "id": "chatcmpl-tool",
        "object": "chat.completion",
        "created": 1741569952,
        "model": answering_model(kind),
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": null,
                "reasoning_content": "The user wants a shipment; call the tool.",
                "tool_calls": [{
                    "id": "call_abc123",
                    "type": "function",
                    "function": {"name": "create_shipment", "arguments": "{\"order\":\"K-701\"}"}
                }]
            },
            "finish_reason": "tool_calls"
        }],
        "usage": {"prompt_tokens": 40, "completion_tokens": 20, "total_tokens": 60}
    })
}

pub fn error(message: &str, kind: Option<&str>, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

/// One SSE `data:` line for a chunk.
pub fn chunk(kind: ProviderKind, delta: Value, finish: Option<&str>) -> String {
    let v = json!({
        "id": "chatcmpl-stream",
        "object": "chat.completion.chunk",
        "created": 1741569952,
        "model": answering_model(kind),
        "system_fingerprint": "fp_06737a9306",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]
    });
    format!("data: {v}\n\n")
}

pub fn usage_chunk(kind: ProviderKind) -> String {
    let v = json!({
        "id": "chatcmpl-stream",
        "object": "chat.completion.chunk",
        "created": 1741569952,
        "model": answering_model(kind),
        "choices": [],
        "usage": {"prompt_tokens": 16, "completion_tokens": 3, "total_tokens": 19}
    });
    format!("data: {v}\n\n")
}

/// A complete text stream "Hello world" with keep-alive comments and blank
/// lines interleaved, usage and `[DONE]`.
pub fn text_stream(kind: ProviderKind, done: bool) -> String {
    let mut s = String::new();
    s.push_str(": keep-alive\n\n\n");
    s.push_str(&chunk(
        kind,
        json!({"role": "assistant", "content": ""}),
        None,
    ));
    s.push_str(&chunk(kind, json!({"content": "Hello"}), None));
    s.push_str(": keep-alive\n\n");
    s.push('\n');
    s.push_str(&chunk(kind, json!({"content": " world"}), None));
    s.push_str(&chunk(kind, json!({}), Some("stop")));
    s.push_str(&usage_chunk(kind));
    if done {
        s.push_str("data: [DONE]\n\n");
    }
    s
}
