//! Realistic provider bodies (shapes copied from the OpenAI, DeepSeek and
//! Anthropic API references). Every builder takes the kind and answers in
//! that vendor's documented shape, so one conformance case runs against
//! every adapter.

use handover_providers::{ErrorClass, ProviderKind};
use serde_json::{Value, json};

use super::Case;
pub use super::{anthropic::*, gemini::*, responses::*};

/// The model string the provider reports (differs from the requested alias).
pub fn answering_model(kind: impl Into<Case>) -> &'static str {
    match kind.into().kind {
        ProviderKind::OpenAi | ProviderKind::AzureOpenAi => "gpt-4o-mini-2024-07-18",
        ProviderKind::DeepSeek => "deepseek-chat-v3",
        ProviderKind::Anthropic => "claude-sonnet-4-5-20250929",
        ProviderKind::Gemini => G_MODEL,
        _ => "Qwen/Qwen2.5-7B-Instruct-served",
    }
}

pub fn success(kind: impl Into<Case>) -> Value {
    let kind = kind.into();
    if kind.is_responses() {
        return r_success();
    }
    match kind.kind {
        ProviderKind::Anthropic => a_success(),
        ProviderKind::Gemini => g_success(),
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

/// The id of the tool call in [`tool_call_response`].
pub fn tool_call_id(kind: impl Into<Case>) -> &'static str {
    match kind.into().kind {
        ProviderKind::Anthropic => "toolu_01A09q90qw90lq917835lq9",
        _ => "call_abc123",
    }
}

pub fn tool_call_response(kind: impl Into<Case>) -> Value {
    let kind = kind.into();
    if kind.is_responses() {
        return r_tool_call_response();
    }
    if kind == ProviderKind::Anthropic {
        return a_tool_call_response();
    }
    if kind == ProviderKind::Gemini {
        return g_tool_call_response();
    }
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
pub fn chunk(kind: impl Into<Case>, delta: Value, finish: Option<&str>) -> String {
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

pub fn usage_chunk(kind: impl Into<Case>) -> String {
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
pub fn text_stream(kind: impl Into<Case>, done: bool) -> String {
    let kind = kind.into();
    if kind.is_responses() {
        return r_text_stream();
    }
    if kind == ProviderKind::Anthropic {
        return a_text_stream(done);
    }
    if kind == ProviderKind::Gemini {
        return g_text_stream(done);
    }
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

/// A stream that starts "Hel", "lo" and says nothing more, with the number
/// of data events it holds.
pub fn partial_text(kind: impl Into<Case>) -> (String, usize) {
    let kind = kind.into();
    if kind.is_responses() {
        return r_partial_text();
    }
    if kind == ProviderKind::Anthropic {
        return a_partial_text();
    }
    if kind == ProviderKind::Gemini {
        return g_partial_text();
    }
    let body = format!(
        "{}{}",
        chunk(kind, json!({"role": "assistant", "content": "Hel"}), None),
        chunk(kind, json!({"content": "lo"}), None)
    );
    (body, 2)
}

/// The end of a text stream: the finish reason and the end marker.
pub fn finish_and_done(kind: impl Into<Case>) -> String {
    let kind = kind.into();
    if kind.is_responses() {
        return r_finish_and_done();
    }
    if kind == ProviderKind::Anthropic {
        return a_finish_and_done();
    }
    if kind == ProviderKind::Gemini {
        return g_finish_and_done();
    }
    format!("{}data: [DONE]\n\n", chunk(kind, json!({}), Some("stop")))
}

/// An in-stream error event as the vendor sends it, its class and code.
pub fn stream_error(kind: impl Into<Case>) -> (String, ErrorClass, Option<&'static str>) {
    let kind = kind.into();
    if kind.is_responses() {
        return r_stream_error();
    }
    if kind == ProviderKind::Anthropic {
        return a_stream_error();
    }
    if kind == ProviderKind::Gemini {
        return g_stream_error();
    }
    let e = error(
        "Rate limit reached",
        Some("rate_limit_error"),
        Some("rate_limit_exceeded"),
    );
    (
        format!("data: {e}\n\n"),
        ErrorClass::RateLimited,
        Some("rate_limit_exceeded"),
    )
}

/// Two tool calls, `call_a` create_shipment {"order":"K-701"} and `call_b`
/// notify {"to":"ops"}, streamed in pieces, then the end.
pub fn tool_stream(kind: impl Into<Case>) -> String {
    let kind = kind.into();
    if kind.is_responses() {
        return r_tool_stream();
    }
    if kind == ProviderKind::Anthropic {
        return a_tool_stream();
    }
    if kind == ProviderKind::Gemini {
        return g_tool_stream();
    }
    let tc = |index: u32, id: Option<&str>, name: Option<&str>, args: &str| {
        let mut f = json!({"arguments": args});
        if let Some(n) = name {
            f["name"] = json!(n);
        }
        let mut c = json!({"index": index, "function": f});
        if let Some(id) = id {
            c["id"] = json!(id);
            c["type"] = json!("function");
        }
        c
    };
    [
        chunk(kind, json!({"role": "assistant", "content": null, "tool_calls": [tc(0, Some("call_a"), Some("create_shipment"), "")]}), None),
        chunk(kind, json!({"tool_calls": [tc(0, None, None, "{\"order\":")]}), None),
        chunk(kind, json!({"tool_calls": [tc(1, Some("call_b"), Some("notify"), "{\"to\":")]}), None),
        chunk(kind, json!({"tool_calls": [tc(0, None, None, "\"K-701\"}")]}), None),
        chunk(kind, json!({"tool_calls": [tc(1, None, None, "\"ops\"}")]}), None),
        chunk(kind, json!({}), Some("tool_calls")),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat()
}

/// A keep-alive: an SSE comment, Anthropic's `ping` event, a Responses
/// `response.in_progress` event.
pub fn keep_alive(kind: impl Into<Case>) -> String {
    let kind = kind.into();
    if kind.is_responses() {
        return r_keep_alive();
    }
    match kind.kind {
        ProviderKind::Anthropic => a_event(json!({"type": "ping"})),
        _ => ": keep-alive\n\n".into(),
    }
}
