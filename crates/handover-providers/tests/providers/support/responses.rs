//! OpenAI Responses API bodies and stream events, in the shapes of the
//! official `openai` Python SDK's `types/responses/` (`Response`,
//! `ResponseOutputMessage`, `ResponseFunctionToolCall`,
//! `ResponseReasoningItem`, `ResponseUsage`, the `Response*Event`s).

use handover_providers::{
    AnyProvider, CallOptions, ChatRequest, ChatResponse, ErrorClass, Provider, ProviderKind,
};
use serde_json::{Value, json};
use wiremock::{
    Mock, MockServer, ResponseTemplate,
    matchers::{method, path},
};

use super::Case;

/// The Responses case the translation tests run: an `openai` provider with
/// `api = "responses"`.
pub const R_CASE: Case = Case::responses(ProviderKind::OpenAi);

/// A mock answering `POST /v1/responses` with `reply`, and a provider on it.
pub async fn r_answering(reply: ResponseTemplate) -> (MockServer, AnyProvider) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(reply)
        .mount(&server)
        .await;
    let p = super::provider(R_CASE, &format!("{}/v1", server.uri()));
    (server, p)
}

/// A streamed call's whole answer.
pub async fn r_streamed(p: &AnyProvider, req: &ChatRequest) -> ChatResponse {
    let stream = p.chat_stream(req, &CallOptions::default()).await.unwrap();
    stream.into_response().await.unwrap()
}

pub fn r_json(body: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(body)
}

pub fn r_sse(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

/// A response stopped early for `reason` (`max_output_tokens`, ...).
pub fn r_incomplete(reason: &str) -> Value {
    let mut r = r_response(
        "incomplete",
        json!([r_message("Partial")]),
        r_usage(10, 0, 50, 0),
    );
    r["incomplete_details"] = json!({"reason": reason});
    r
}

pub const R_MODEL: &str = "gpt-4o-mini-2024-07-18";
pub const R_ID: &str = "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b";

/// One SSE event: `event: TYPE` and its JSON data (which repeats the type).
pub fn r_event(data: Value) -> String {
    let name = data["type"].as_str().unwrap_or("unknown").to_owned();
    format!("event: {name}\ndata: {data}\n\n")
}

/// A `response` object with `status`, `output` and `usage`, the request
/// echo as OpenAI returns it.
pub fn r_response(status: &str, output: Value, usage: Value) -> Value {
    json!({
        "id": R_ID,
        "object": "response",
        "created_at": 1741476542,
        "status": status,
        "background": false,
        "error": null,
        "incomplete_details": null,
        "instructions": "be brief",
        "max_output_tokens": 50,
        "model": R_MODEL,
        "output": output,
        "parallel_tool_calls": true,
        "previous_response_id": null,
        "reasoning": {"effort": null, "summary": null},
        "service_tier": "default",
        "store": false,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": "user-42",
        "metadata": {}
    })
}

pub fn r_usage(input: u64, cached: u64, output: u64, reasoning: u64) -> Value {
    json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
        "output_tokens": output, "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input + output})
}

pub fn r_message(text: &str) -> Value {
    json!({"type": "message", "id": "msg_67ccd2bf17f0819081ff3bb2cf6508e6", "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]})
}

pub fn r_call(id: &str, call_id: &str, name: &str, arguments: &str) -> Value {
    json!({"type": "function_call", "id": id, "call_id": call_id, "name": name,
        "arguments": arguments, "status": "completed"})
}

pub fn r_success() -> Value {
    r_response(
        "completed",
        json!([r_message("Hello! How can I help you today?")]),
        r_usage(16, 4, 10, 0),
    )
}

pub fn r_tool_call_response() -> Value {
    r_response(
        "completed",
        json!([
            {"type": "reasoning", "id": "rs_6820f383d7c08191846711c5df8233bc",
             "summary": [{"type": "summary_text", "text": "The user wants a shipment; call the tool."}],
             "encrypted_content": "gAAAAABoISQ24OyVRYbkYfukjbwWmrp1"},
            r_call("fc_67ca09c6bedc8190a7abfec07b1a1332", "call_abc123", "create_shipment",
                "{\"order\":\"K-701\"}"),
        ]),
        r_usage(40, 0, 20, 12),
    )
}

fn created() -> String {
    r_event(json!({"type": "response.created", "sequence_number": 0,
        "response": r_response("in_progress", json!([]), Value::Null)}))
}

fn message_added() -> String {
    let item = json!({"type": "message", "id": "msg_1", "status": "in_progress",
        "role": "assistant", "content": []});
    let part = json!({"type": "output_text", "text": "", "annotations": []});
    [
        r_event(
            json!({"type": "response.output_item.added", "sequence_number": 2,
            "output_index": 0, "item": item}),
        ),
        r_event(
            json!({"type": "response.content_part.added", "sequence_number": 3,
            "item_id": "msg_1", "output_index": 0, "content_index": 0, "part": part}),
        ),
    ]
    .concat()
}

pub fn r_text_delta(delta: &str) -> String {
    r_event(
        json!({"type": "response.output_text.delta", "sequence_number": 4,
        "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": delta,
        "logprobs": []}),
    )
}

fn completed(output: Value, usage: Value) -> String {
    r_event(json!({"type": "response.completed", "sequence_number": 9,
        "response": r_response("completed", output, usage)}))
}

/// "Hello world" with an SSE comment, `response.in_progress` and the
/// `*.done` repeats interleaved, ending with `response.completed` (the
/// Responses API's only end: it sends no `[DONE]`).
pub fn r_text_stream() -> String {
    [
        ": keep-alive\n\n".to_owned(),
        created(),
        r_keep_alive(),
        message_added(),
        r_text_delta("Hello"),
        ": keep-alive\n\n".to_owned(),
        r_text_delta(" world"),
        r_event(
            json!({"type": "response.output_text.done", "sequence_number": 6,
            "item_id": "msg_1", "output_index": 0, "content_index": 0, "text": "Hello world",
            "logprobs": []}),
        ),
        r_event(
            json!({"type": "response.output_item.done", "sequence_number": 8,
            "output_index": 0, "item": r_message("Hello world")}),
        ),
        completed(json!([r_message("Hello world")]), r_usage(16, 0, 3, 0)),
    ]
    .concat()
}

/// "Hel", "lo" and nothing more; five data events (`response.in_progress`
/// is a keep-alive and does not count).
pub fn r_partial_text() -> (String, usize) {
    let body = [
        created(),
        r_keep_alive(),
        message_added(),
        r_text_delta("Hel"),
        r_text_delta("lo"),
    ]
    .concat();
    (body, 5)
}

pub fn r_finish_and_done() -> String {
    completed(json!([r_message("Hello")]), r_usage(16, 0, 2, 0))
}

/// `response.failed` after some text: the response's own error.
pub fn r_stream_error() -> (String, ErrorClass, Option<&'static str>) {
    let mut failed = r_response("failed", json!([]), Value::Null);
    failed["error"] = json!({"code": "server_error",
        "message": "The server had an error while processing your request."});
    let event = r_event(json!({"type": "response.failed", "sequence_number": 6,
        "response": failed}));
    (event, ErrorClass::ServerError, Some("server_error"))
}

/// Two calls, `call_a` create_shipment {"order":"K-701"} and `call_b`
/// notify {"to":"ops"}, their arguments interleaved by output index.
pub fn r_tool_stream() -> String {
    let added = |at: u64, id: &str, call: &str, name: &str| {
        let item = json!({"type": "function_call", "id": id, "call_id": call, "name": name,
            "arguments": "", "status": "in_progress"});
        r_event(
            json!({"type": "response.output_item.added", "sequence_number": 1,
            "output_index": at, "item": item}),
        )
    };
    let delta = |at: u64, id: &str, d: &str| {
        r_event(
            json!({"type": "response.function_call_arguments.delta", "sequence_number": 2,
            "item_id": id, "output_index": at, "delta": d}),
        )
    };
    let done = |at: u64, id: &str, args: &str| {
        r_event(
            json!({"type": "response.function_call_arguments.done", "sequence_number": 3,
            "item_id": id, "output_index": at, "arguments": args}),
        )
    };
    let a = r_call("fc_a", "call_a", "create_shipment", "{\"order\":\"K-701\"}");
    let b = r_call("fc_b", "call_b", "notify", "{\"to\":\"ops\"}");
    [
        created(),
        added(0, "fc_a", "call_a", "create_shipment"),
        delta(0, "fc_a", "{\"order\":"),
        added(1, "fc_b", "call_b", "notify"),
        delta(1, "fc_b", "{\"to\":"),
        delta(0, "fc_a", "\"K-701\"}"),
        delta(1, "fc_b", "\"ops\"}"),
        done(0, "fc_a", "{\"order\":\"K-701\"}"),
        r_event(
            json!({"type": "response.output_item.done", "sequence_number": 4,
            "output_index": 0, "item": a}),
        ),
        done(1, "fc_b", "{\"to\":\"ops\"}"),
        r_event(
            json!({"type": "response.output_item.done", "sequence_number": 5,
            "output_index": 1, "item": b}),
        ),
        completed(json!([a, b]), r_usage(30, 0, 12, 0)),
    ]
    .concat()
}

/// `response.in_progress`: the provider is still at work, nothing more.
pub fn r_keep_alive() -> String {
    r_event(json!({"type": "response.in_progress", "sequence_number": 1,
        "response": r_response("in_progress", json!([]), Value::Null)}))
}
