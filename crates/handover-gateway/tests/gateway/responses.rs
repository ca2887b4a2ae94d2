//! `POST /v1/responses` over a Chat-Completions-only upstream (wiremock):
//! the input items, tools, structured-output format and limits arrive as
//! the equivalent chat request; the answer comes back as a `response`
//! object or as Responses streaming events; stored state is refused before
//! anything is sent.

use crate::support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, Running};
use wiremock::{MockServer, ResponseTemplate};

async fn setup(reply: ResponseTemplate) -> (Running, MockServer) {
    support::one_provider(reply).await
}

async fn post(gw: &Running, body: &Value) -> reqwest::Response {
    gw.http
        .post(gw.url("/v1/responses"))
        .bearer_auth(CLIENT_A)
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn sent(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

fn answer(message: Value, finish: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-up", "object": "chat.completion", "created": 1, "model": "p-model-v2",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27,
            "completion_tokens_details": {"reasoning_tokens": 3}},
    }))
}

#[tokio::test]
async fn a_responses_request_becomes_the_equivalent_chat_request() {
    let (gw, server) = setup(answer(
        json!({"role": "assistant", "content": "{\"city\":\"Oslo\"}"}),
        "stop",
    ))
    .await;
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}},
        "required": ["city"], "additionalProperties": false});
    let resp = post(
        &gw,
        &json!({
            "model": "default",
            "instructions": "Be exact.",
            "input": [
                {"role": "user", "content": "Where is the fjord?"},
                {"type": "function_call", "call_id": "call_9", "name": "look", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "call_9", "output": "Norway"},
            ],
            "tools": [{"type": "function", "name": "look", "description": "Look up",
                "parameters": {"type": "object", "properties": {}}, "strict": true}],
            "tool_choice": "auto",
            "text": {"format": {"type": "json_schema", "name": "place", "schema": schema, "strict": true}},
            "reasoning": {"effort": "low"},
            "max_output_tokens": 200,
            "store": false,
        }),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let r: Value = resp.json().await.unwrap();

    let chat = &sent(&server).await[0];
    assert_eq!(
        chat["messages"],
        json!([
            {"role": "system", "content": "Be exact."},
            {"role": "user", "content": "Where is the fjord?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_9", "type": "function",
                "function": {"name": "look", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_9", "content": "Norway"},
        ])
    );
    assert_eq!(
        chat["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "place", "schema": schema, "strict": true}})
    );
    assert_eq!(chat["tools"][0]["function"]["strict"], true);
    assert_eq!(chat["reasoning_effort"], "low");
    assert_eq!(chat["max_completion_tokens"], 200);
    assert_eq!(chat["tool_choice"], "auto");

    assert_eq!(r["object"], "response");
    assert_eq!(r["status"], "completed");
    assert_eq!(r["model"], "p-model-v2", "the answering provider's model");
    assert_eq!(r["store"], false);
    assert_eq!(r["output"][0]["type"], "message");
    assert_eq!(r["output"][0]["content"][0]["type"], "output_text");
    assert_eq!(r["output"][0]["content"][0]["text"], "{\"city\":\"Oslo\"}");
    assert_eq!(r["usage"]["input_tokens"], 20);
    assert_eq!(r["usage"]["output_tokens_details"]["reasoning_tokens"], 3);
}

#[tokio::test]
async fn a_tool_call_comes_back_as_a_function_call_item() {
    let (gw, _server) = setup(answer(
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "ship", "arguments": "{\"order\":42}"}}]}),
        "tool_calls",
    ))
    .await;
    let resp = post(
        &gw,
        &json!({"model": "default", "input": "ship order 42",
        "tools": [{"type": "function", "name": "ship", "parameters": {"type": "object"}}]}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let r: Value = resp.json().await.unwrap();
    let item = &r["output"][0];
    assert_eq!(item["type"], "function_call");
    assert_eq!(item["call_id"], "call_1");
    assert_eq!(item["name"], "ship");
    assert_eq!(item["arguments"], "{\"order\":42}");
}

#[tokio::test]
async fn a_streamed_response_sends_the_responses_events() {
    let chunk = |delta: Value, finish: Value| {
        let c = json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "p-model-v2",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {c}\n\n")
    };
    let body = [
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        chunk(json!({"content": "Hel"}), Value::Null),
        chunk(json!({"content": "lo"}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_2", "type": "function",
            "function": {"name": "ship", "arguments": "{\"o\":"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let (gw, _server) =
        setup(ResponseTemplate::new(200).set_body_raw(body.into_bytes(), "text/event-stream"))
            .await;
    let resp = post(
        &gw,
        &json!({"model": "default", "input": "hi", "stream": true}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let text = resp.text().await.unwrap();
    let events: Vec<(String, Value)> = text
        .split("\n\n")
        .filter_map(|ev| {
            let name = ev.lines().find_map(|l| l.strip_prefix("event: "))?;
            let data = ev.lines().find_map(|l| l.strip_prefix("data: "))?;
            Some((name.to_owned(), serde_json::from_str(data).unwrap()))
        })
        .collect();
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"response.created"), "{names:?}");
    assert_eq!(names.last(), Some(&"response.completed"), "{names:?}");
    for (i, (name, data)) in events.iter().enumerate() {
        assert_eq!(data["type"], name.as_str());
        assert_eq!(data["sequence_number"], i, "{name}");
    }
    let deltas: String = events
        .iter()
        .filter(|(n, _)| n == "response.output_text.delta")
        .filter_map(|(_, d)| d["delta"].as_str())
        .collect();
    assert_eq!(deltas, "Hello");
    let args: String = events
        .iter()
        .filter(|(n, _)| n == "response.function_call_arguments.delta")
        .filter_map(|(_, d)| d["delta"].as_str())
        .collect();
    assert_eq!(args, "{\"o\":1}");
    let done = &events.last().unwrap().1["response"];
    assert_eq!(done["model"], "p-model-v2");
    assert_eq!(done["output"][0]["content"][0]["text"], "Hello");
    assert_eq!(done["output"][1]["call_id"], "call_2");
    assert_eq!(done["output"][1]["arguments"], "{\"o\":1}");
}

#[tokio::test]
async fn stored_state_is_refused_before_anything_is_sent() {
    let (gw, server) = setup(answer(json!({"role": "assistant", "content": "x"}), "stop")).await;
    for (field, value) in [
        ("store", json!(true)),
        ("previous_response_id", json!("resp_1")),
    ] {
        let mut body = json!({"model": "default", "input": "hi"});
        body[field] = value;
        let resp = post(&gw, &body).await;
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        let e: Value = resp.json().await.unwrap();
        assert_eq!(e["error"]["code"], "unsupported_parameter", "{e}");
        assert_eq!(e["error"]["param"], field, "{e}");
    }
    let resp = post(
        &gw,
        &json!({"model": "default", "input": [{"type": "item_reference", "id": "msg_1"}]}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    // A member named twice is refused, never won by its last copy.
    let resp = gw
        .http
        .post(gw.url("/v1/responses"))
        .bearer_auth(CLIENT_A)
        .header("content-type", "application/json")
        .body(r#"{"model": "gpt-5-turbo", "model": "default", "input": "hi"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let e: Value = resp.json().await.unwrap();
    assert_eq!(e["error"]["param"], "model", "{e}");
    assert_eq!(sent(&server).await.len(), 0, "nothing was sent");
}

fn token(t: &str, lp: f64) -> Value {
    json!({"token": t, "logprob": lp, "bytes": t.as_bytes(),
        "top_logprobs": [{"token": t, "logprob": lp, "bytes": t.as_bytes()}]})
}

#[tokio::test]
async fn requested_logprobs_come_back_on_the_output_text() {
    let tokens = json!([token("Hel", -0.25), token("lo", -0.5)]);
    let (gw, server) = setup(ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-up", "object": "chat.completion", "created": 1, "model": "p-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"},
            "logprobs": {"content": tokens, "refusal": null}, "finish_reason": "stop"}],
    })))
    .await;
    let resp = post(
        &gw,
        &json!({"model": "default", "input": "hi", "top_logprobs": 1,
            "include": ["message.output_text.logprobs"]}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let r: Value = resp.json().await.unwrap();
    assert_eq!(r["output"][0]["content"][0]["logprobs"], tokens, "{r}");
    let asked = &sent(&server).await[0];
    assert_eq!(asked["logprobs"], true, "{asked}");
    assert_eq!(asked["top_logprobs"], 1, "{asked}");
}

#[tokio::test]
async fn streamed_logprobs_ride_their_text_deltas() {
    let chunk = |content: &str, lp: Value| {
        let c = json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "p",
            "choices": [{"index": 0, "delta": {"content": content},
                "logprobs": lp, "finish_reason": null}]});
        format!("data: {c}\n\n")
    };
    let body = [
        chunk("Hel", json!({"content": [token("Hel", -0.25)]})),
        chunk("lo", json!({"content": [token("lo", -0.5)]})),
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"p\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n".to_owned(),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let (gw, server) =
        setup(ResponseTemplate::new(200).set_body_raw(body.into_bytes(), "text/event-stream"))
            .await;
    let resp = post(
        &gw,
        &json!({"model": "default", "input": "hi", "stream": true,
            "include": ["message.output_text.logprobs"]}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let text = resp.text().await.unwrap();
    let data = |name: &str| -> Vec<Value> {
        text.split("\n\n")
            .filter(|ev| ev.lines().any(|l| l == format!("event: {name}")))
            .filter_map(|ev| ev.lines().find_map(|l| l.strip_prefix("data: ")))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    };
    let deltas = data("response.output_text.delta");
    assert_eq!(deltas.len(), 2, "{text}");
    assert_eq!(deltas[0]["logprobs"], json!([token("Hel", -0.25)]));
    assert_eq!(deltas[1]["logprobs"], json!([token("lo", -0.5)]));
    let all = json!([token("Hel", -0.25), token("lo", -0.5)]);
    assert_eq!(data("response.output_text.done")[0]["logprobs"], all);
    let completed = &data("response.completed")[0]["response"];
    assert_eq!(completed["output"][0]["content"][0]["logprobs"], all);
    assert_eq!(sent(&server).await[0]["logprobs"], true);
}

#[tokio::test]
async fn options_without_their_meaning_here_are_refused_before_anything_is_sent() {
    let (gw, server) = setup(answer(json!({"role": "assistant", "content": "x"}), "stop")).await;
    for (field, value, param) in [
        ("truncation", json!("auto"), "truncation"),
        ("truncation", json!("sometimes"), "truncation"),
        (
            "include",
            json!(["reasoning.encrypted_content", "output.secret"]),
            "include[1]",
        ),
        (
            "stream_options",
            json!({"include_usage": true}),
            "stream_options",
        ),
    ] {
        let mut body = json!({"model": "default", "input": "hi"});
        body[field] = value;
        let resp = post(&gw, &body).await;
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{field}");
        let e: Value = resp.json().await.unwrap();
        let got = e["error"]["param"].as_str().unwrap_or_default();
        assert!(got.starts_with(param), "{field}: {e}");
    }
    assert_eq!(sent(&server).await.len(), 0, "nothing was sent");
    // What a stateless gateway does mean is accepted.
    let resp = post(
        &gw,
        &json!({"model": "default", "input": "hi", "truncation": "disabled",
            "include": ["reasoning.encrypted_content"],
            "stream_options": {"include_obfuscation": false}}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let r: Value = resp.json().await.unwrap();
    assert_eq!(r["truncation"], "disabled");
    assert_eq!(sent(&server).await.len(), 1);
}
