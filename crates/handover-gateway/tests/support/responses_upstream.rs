//! A Responses-speaking upstream for wiremock (`POST /v1/responses`), in
//! the shapes of OpenAI's API reference and the official SDK's types: a
//! function call when tools are offered and the input asks for one (and
//! holds no result yet), the JSON object when `text.format` asks for JSON,
//! text otherwise; a `response` object, or the Responses event stream when
//! `stream` is set.

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

pub(crate) const ARGS: &str = r#"{"city":"Oslo","country":"Norway"}"#;
pub(crate) const TEXT: &str = "It is sunny in Oslo.";
pub(crate) const MODEL: &str = "mock-model-2026";
pub(crate) const CALL_ID: &str = "call_up_1";

/// A mock answering `POST {route}` with `reply`.
pub(crate) async fn mock(route: &str, reply: impl Respond + 'static) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(route))
        .respond_with(reply)
        .mount(&server)
        .await;
    server
}

/// A Chat Completions answer from `model` saying `text` (the other kind of
/// upstream in a mixed chain).
pub(crate) fn chat_completion(model: &str, text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-c", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
            "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }))
}

/// An `openai` provider entry for `server`, called through `api`.
pub(crate) fn provider(name: &str, api: &str, server: &MockServer) -> String {
    format!(
        "\n[providers.{name}]\nkind = \"openai\"\napi = \"{api}\"\nbase_url = \"{}/v1\"\nmodel = \"{name}-model\"\n",
        server.uri()
    )
}

/// Every text of the request: instructions and input, as one string.
pub(crate) fn text_of(body: &Value) -> String {
    let mut out = body["instructions"].as_str().unwrap_or_default().to_owned();
    match &body["input"] {
        Value::String(s) => out.push_str(s),
        other => out.push_str(&other.to_string()),
    }
    out
}

/// The answer to one request.
pub(crate) fn reply(req: &Request) -> ResponseTemplate {
    let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
    let text = text_of(&body);
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    let answered = body["input"]
        .as_array()
        .is_some_and(|items| items.iter().any(|i| i["type"] == "function_call_output"));
    let forced = body["tool_choice"].is_object() || body["tool_choice"] == "required";
    let call = (!tools.is_empty() && !answered && (forced || text.contains("CASE:tool")))
        .then(|| tools[0]["name"].as_str().unwrap_or("tool").to_owned());
    let json_wanted = matches!(
        body["text"]["format"]["type"].as_str(),
        Some("json_schema" | "json_object")
    );
    let item = match &call {
        Some(name) => json!({"type": "function_call", "id": "fc_up_1", "call_id": CALL_ID,
            "name": name, "arguments": ARGS, "status": "completed"}),
        None => message(if json_wanted { ARGS } else { TEXT }),
    };
    let done = response(&body, "completed", json!([item]), usage());
    if body["stream"] != true {
        return ResponseTemplate::new(200)
            .insert_header("x-request-id", "req_up_1")
            .set_body_json(done);
    }
    let mut events = Vec::new();
    events.push(json!({"type": "response.created",
        "response": response(&body, "in_progress", json!([]), Value::Null)}));
    events.push(json!({"type": "response.in_progress",
        "response": response(&body, "in_progress", json!([]), Value::Null)}));
    match &call {
        Some(name) => {
            let open = json!({"type": "function_call", "id": "fc_up_1", "call_id": CALL_ID,
                "name": name, "arguments": "", "status": "in_progress"});
            events.push(
                json!({"type": "response.output_item.added", "output_index": 0, "item": open}),
            );
            let (a, b) = ARGS.split_at(10);
            for piece in [a, b] {
                events.push(json!({"type": "response.function_call_arguments.delta",
                    "item_id": "fc_up_1", "output_index": 0, "delta": piece}));
            }
            events.push(json!({"type": "response.function_call_arguments.done",
                "item_id": "fc_up_1", "output_index": 0, "arguments": ARGS}));
        }
        None => {
            let full = if json_wanted { ARGS } else { TEXT };
            let open = json!({"type": "message", "id": "msg_up_1", "status": "in_progress",
                "role": "assistant", "content": []});
            events.push(
                json!({"type": "response.output_item.added", "output_index": 0, "item": open}),
            );
            let part =
                json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []});
            events.push(
                json!({"type": "response.content_part.added", "item_id": "msg_up_1",
                "output_index": 0, "content_index": 0, "part": part}),
            );
            let (a, b) = full.split_at(full.len() / 2);
            for piece in [a, b] {
                events.push(
                    json!({"type": "response.output_text.delta", "item_id": "msg_up_1",
                    "output_index": 0, "content_index": 0, "delta": piece, "logprobs": []}),
                );
            }
            events.push(
                json!({"type": "response.output_text.done", "item_id": "msg_up_1",
                "output_index": 0, "content_index": 0, "text": full, "logprobs": []}),
            );
        }
    }
    events.push(json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
    events.push(json!({"type": "response.completed", "response": done}));
    let sse: String = events
        .into_iter()
        .enumerate()
        .map(|(n, mut e)| {
            e["sequence_number"] = n.into();
            format!(
                "event: {}\ndata: {e}\n\n",
                e["type"].as_str().unwrap_or_default()
            )
        })
        .collect();
    ResponseTemplate::new(200)
        .insert_header("x-request-id", "req_up_1")
        .set_body_raw(sse, "text/event-stream")
}

fn message(text: &str) -> Value {
    json!({"type": "message", "id": "msg_up_1", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]})
}

fn usage() -> Value {
    json!({"input_tokens": 11, "input_tokens_details": {"cached_tokens": 3, "cache_write_tokens": 0},
        "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 18})
}

/// A `response` object echoing the request, as OpenAI answers.
fn response(req: &Value, status: &str, output: Value, usage: Value) -> Value {
    let echo = |k: &str, default: Value| req.get(k).cloned().unwrap_or(default);
    json!({
        "id": "resp_up_1", "object": "response", "created_at": 1_764_000_000, "status": status,
        "background": false, "error": null, "incomplete_details": null,
        "instructions": echo("instructions", Value::Null),
        "max_output_tokens": echo("max_output_tokens", Value::Null),
        "model": MODEL, "output": output,
        "parallel_tool_calls": echo("parallel_tool_calls", json!(true)),
        "previous_response_id": null,
        "reasoning": echo("reasoning", json!({"effort": null, "summary": null})),
        "service_tier": "default", "store": echo("store", json!(true)),
        "temperature": echo("temperature", json!(1.0)),
        "text": echo("text", json!({"format": {"type": "text"}, "verbosity": "medium"})),
        "tool_choice": echo("tool_choice", json!("auto")), "tools": echo("tools", json!([])),
        "top_p": echo("top_p", json!(1.0)), "truncation": "disabled", "usage": usage,
        "user": echo("user", Value::Null), "metadata": echo("metadata", json!({})),
    })
}
