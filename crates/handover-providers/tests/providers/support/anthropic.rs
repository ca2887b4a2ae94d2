//! Anthropic Messages API bodies and stream events, in the shapes its API
//! reference documents.

use handover_providers::ErrorClass;
use serde_json::{Value, json};

const MODEL: &str = "claude-sonnet-4-5-20250929";

/// One SSE event: `event: NAME` and its JSON data (which repeats the type).
pub fn a_event(data: Value) -> String {
    let name = data["type"].as_str().unwrap_or("unknown").to_owned();
    format!("event: {name}\ndata: {data}\n\n")
}

pub fn a_error(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

pub fn a_success() -> Value {
    json!({
        "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": "Hello! How can I help you today?"}],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {"input_tokens": 12, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 4, "output_tokens": 10,
                  "service_tier": "standard"}
    })
}

pub fn a_tool_call_response() -> Value {
    json!({
        "id": "msg_01Aq9w938a90dw8q",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [
            {"type": "thinking", "thinking": "The user wants a shipment; call the tool.",
             "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
            {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9",
             "name": "create_shipment", "input": {"order": "K-701"}}
        ],
        "stop_reason": "tool_use",
        "stop_sequence": null,
        "usage": {"input_tokens": 40, "output_tokens": 20}
    })
}

fn message_start() -> String {
    a_event(json!({"type": "message_start", "message": {
        "id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY", "type": "message", "role": "assistant",
        "content": [], "model": MODEL, "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 16, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "output_tokens": 1}}}))
}

fn text_start(index: u32) -> String {
    a_event(json!({"type": "content_block_start", "index": index,
                   "content_block": {"type": "text", "text": ""}}))
}

fn text_delta(index: u32, text: &str) -> String {
    a_event(json!({"type": "content_block_delta", "index": index,
                   "delta": {"type": "text_delta", "text": text}}))
}

fn block_stop(index: u32) -> String {
    a_event(json!({"type": "content_block_stop", "index": index}))
}

fn message_delta(stop: &str, output_tokens: u64) -> String {
    a_event(json!({"type": "message_delta",
                   "delta": {"stop_reason": stop, "stop_sequence": null},
                   "usage": {"output_tokens": output_tokens}}))
}

fn message_stop() -> String {
    a_event(json!({"type": "message_stop"}))
}

fn ping() -> String {
    a_event(json!({"type": "ping"}))
}

/// "Hello world" with `ping`s and comments interleaved; `message_stop` if `done`.
pub fn a_text_stream(done: bool) -> String {
    let mut s = String::from(": keep-alive\n\n");
    s.push_str(&message_start());
    s.push_str(&text_start(0));
    s.push_str(&ping());
    s.push_str(&text_delta(0, "Hello"));
    s.push_str(&ping());
    s.push_str(&text_delta(0, " world"));
    s.push_str(&block_stop(0));
    s.push_str(&message_delta("end_turn", 3));
    if done {
        s.push_str(&message_stop());
    }
    s
}

pub fn a_partial_text() -> (String, usize) {
    let body = [
        message_start(),
        text_start(0),
        text_delta(0, "Hel"),
        ping(),
        text_delta(0, "lo"),
    ]
    .concat();
    // `ping` is not a data event.
    (body, 4)
}

pub fn a_finish_and_done() -> String {
    [block_stop(0), message_delta("end_turn", 2), message_stop()].concat()
}

/// `overloaded_error` mid-stream, as Anthropic sends it during high load.
pub fn a_stream_error() -> (String, ErrorClass, Option<&'static str>) {
    let e = a_event(a_error("overloaded_error", "Overloaded"));
    (e, ErrorClass::Overloaded, None)
}

pub fn a_tool_stream() -> String {
    let tool_start = |index: u32, id: &str, name: &str| {
        a_event(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}))
    };
    let args = |index: u32, piece: &str| {
        a_event(json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "input_json_delta", "partial_json": piece}}))
    };
    [
        message_start(),
        text_start(0),
        text_delta(0, "Creating the shipment."),
        block_stop(0),
        tool_start(1, "call_a", "create_shipment"),
        args(1, ""),
        args(1, "{\"order\":"),
        args(1, "\"K-701\"}"),
        block_stop(1),
        tool_start(2, "call_b", "notify"),
        args(2, "{\"to\":"),
        ping(),
        args(2, "\"ops\"}"),
        block_stop(2),
        message_delta("tool_use", 30),
        message_stop(),
    ]
    .concat()
}

/// What the adapter sends for a tool call id Anthropic would refuse: the
/// id's bytes in hex behind `hx_` (documented in docs/providers.md).
pub fn hex_id(id: &str) -> String {
    let hex: String = id.bytes().map(|b| format!("{b:02x}")).collect();
    format!("hx_{hex}")
}
