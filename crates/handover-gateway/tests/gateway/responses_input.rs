//! `POST /v1/responses` input the fourth probe sent: parts and fields of
//! the wrong shape are refused naming the Responses field (they used to
//! reach the model as nothing, be ignored, or be named as a chat field),
//! features of stored or background responses are refused unless off,
//! and the hints the chat request also has are forwarded as sent. A
//! Gemini 3 thought signature makes the round trip on `function_call`
//! items, as it does on chat tool calls.

use crate::support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, Running};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

async fn setup() -> (Running, MockServer) {
    support::one_provider(ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-up", "object": "chat.completion", "created": 1, "model": "p-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}})))
    .await
}

async fn post(gw: &Running, body: &Value) -> (StatusCode, Value) {
    let resp = gw
        .http
        .post(gw.url("/v1/responses"))
        .bearer_auth(CLIENT_A)
        .json(body)
        .send()
        .await
        .unwrap();
    (resp.status(), resp.json().await.unwrap())
}

fn with(field: &str, value: Value) -> Value {
    let mut body = json!({"model": "default", "input": "hi"});
    body[field] = value;
    body
}

fn user(content: Value) -> Value {
    json!({"model": "default", "input": [{"role": "user", "content": content}]})
}

#[tokio::test]
async fn input_of_the_wrong_shape_is_refused_naming_its_field_and_nothing_is_sent() {
    let (gw, server) = setup().await;
    for (body, param, code) in [
        (
            user(json!([{"type": "input_text"}])),
            "input[0].content[0].text",
            "invalid_field",
        ),
        (
            user(json!([{"type": "input_text", "text": "a"}, {"type": "input_text", "text": 5}])),
            "input[0].content[1].text",
            "invalid_field",
        ),
        (
            user(json!([{"type": "refusal"}])),
            "input[0].content[0].refusal",
            "invalid_field",
        ),
        (
            json!({"model": "default", "input": [{"role": "tool", "content": "42"}]}),
            "input[0].role",
            "invalid_field",
        ),
        (
            json!({"model": "default", "input": [
                {"role": "user", "content": "chart?"},
                {"type": "function_call", "call_id": "c1", "name": "chart", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": [
                    {"type": "input_text", "text": "here:"},
                    {"type": "input_image", "image_url": "https://example.com/c.png"}]}]}),
            "input[2].output[1].type",
            "unsupported_parameter",
        ),
        (
            json!({"model": "default", "input": [
                {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text"}]}]}),
            "input[0].output[0].text",
            "invalid_field",
        ),
        (
            with("reasoning", json!("high")),
            "reasoning",
            "invalid_field",
        ),
        (with("metadata", json!("tag")), "metadata", "invalid_field"),
        (
            with("background", json!(true)),
            "background",
            "unsupported_parameter",
        ),
        (
            with("conversation", json!("conv_1")),
            "conversation",
            "unsupported_parameter",
        ),
        (
            with("max_tool_calls", json!(3)),
            "max_tool_calls",
            "unsupported_parameter",
        ),
    ] {
        let (status, e) = post(&gw, &body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {e}");
        assert_eq!(e["error"]["param"], param, "{body}: {e}");
        assert_eq!(e["error"]["code"], code, "{body}: {e}");
        let message = e["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(param), "{message}");
    }
    assert_eq!(
        server.received_requests().await.unwrap().len(),
        0,
        "nothing was sent"
    );
}

#[tokio::test]
async fn hints_are_forwarded_and_features_turned_off_are_accepted() {
    let (gw, server) = setup().await;
    let body = json!({"model": "default", "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1",
             "output": [{"type": "input_text", "text": "4"}, {"type": "input_text", "text": "2"}]}],
        "safety_identifier": "user-7f3a", "prompt_cache_key": "support-v2",
        "prompt_cache_retention": "24h", "background": false, "conversation": null,
        "max_tool_calls": null, "reasoning": {"effort": "low"}, "metadata": {"ticket": "T-1"}});
    let (status, r) = post(&gw, &body).await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(r["metadata"], json!({"ticket": "T-1"}));
    assert_eq!(r["reasoning"], json!({"effort": "low"}));
    let sent = server.received_requests().await.unwrap();
    assert_eq!(sent.len(), 1);
    let chat: Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(chat["safety_identifier"], "user-7f3a");
    assert_eq!(chat["prompt_cache_key"], "support-v2");
    assert_eq!(chat["prompt_cache_retention"], "24h");
    assert_eq!(chat["reasoning_effort"], "low");
    assert_eq!(
        chat["messages"][0],
        json!({"role": "user", "content": "hi"})
    );
    assert_eq!(
        chat["messages"][2],
        json!({"role": "tool", "tool_call_id": "c1", "content": "42"})
    );
    for absent in ["background", "conversation", "max_tool_calls", "metadata"] {
        assert!(chat.get(absent).is_none(), "{absent}: {chat}");
    }
}

const SIG: &str = "SIG_ONE_abc";

/// A native Gemini upstream: two calls (the signature on the first
/// part only, as Google documents it), or text once the conversation has
/// the calls' results; streamed on `streamGenerateContent`.
fn gemini(req: &Request) -> ResponseTemplate {
    let body: Value = serde_json::from_slice(&req.body).unwrap();
    let answer = if body.to_string().contains("functionResponse") {
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "done"}]},
               "finishReason": "STOP", "index": 0}], "modelVersion": "gemini-3-pro-preview"})
    } else {
        json!({"candidates": [{"content": {"role": "model", "parts": [
                {"functionCall": {"name": "fa", "args": {"a": 1}}, "thoughtSignature": SIG},
                {"functionCall": {"name": "fb", "args": {"b": 2}}}
            ]}, "finishReason": "STOP", "index": 0}], "modelVersion": "gemini-3-pro-preview"})
    };
    if req.url.path().ends_with(":streamGenerateContent") {
        ResponseTemplate::new(200)
            .set_body_raw(format!("data: {answer}\r\n\r\n"), "text/event-stream")
    } else {
        ResponseTemplate::new(200).set_body_json(answer)
    }
}

/// The `response` object of a plain answer, or of a stream's
/// `response.completed` event.
async fn response_of(resp: reqwest::Response, stream: bool) -> Value {
    assert_eq!(resp.status(), StatusCode::OK);
    if !stream {
        return resp.json().await.unwrap();
    }
    let text = resp.text().await.unwrap();
    text.split("\n\n")
        .filter_map(|ev| ev.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .find(|ev| ev["type"] == "response.completed")
        .map(|ev| ev["response"].clone())
        .unwrap_or_else(|| panic!("no response.completed: {text}"))
}

/// Gemini 3 through `/v1/responses`, plain and streamed: the first call's
/// thought signature comes out on its `function_call` item as
/// `extra_content`, where the chat door puts it; a client that sends the
/// items back as it got them (the Agents SDK does) gets the signature to
/// Gemini on the part it came on. Before, the item had no place for it
/// and Gemini 3 refused the second turn.
#[tokio::test]
async fn a_gemini_thought_signature_makes_the_round_trip_on_function_call_items() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(gemini)
        .mount(&server)
        .await;
    let mut c = format!(
        "\n[providers.gem]\nkind = \"gemini\"\nbase_url = \"{}/v1beta\"\nmodel = \"gemini-3-pro-preview\"\n",
        server.uri()
    );
    c.push_str(&support::policy("gem", &["gem"], "first_token"));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    let gw = Running::start(&c).await;
    let tools = json!([
        {"type": "function", "name": "fa", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}},
        {"type": "function", "name": "fb", "parameters": {"type": "object", "properties": {"b": {"type": "integer"}}}}
    ]);
    let ask = |input: Value, stream: bool| {
        gw.http
            .post(gw.url("/v1/responses"))
            .bearer_auth(CLIENT_A)
            .json(&json!({"model": "gem", "input": input, "tools": tools, "stream": stream}))
            .send()
    };
    let user = json!({"role": "user", "content": "go"});
    for stream in [false, true] {
        let first = response_of(ask(json!([user]), stream).await.unwrap(), stream).await;
        let items = first["output"].as_array().unwrap().clone();
        assert_eq!(items.len(), 2, "{first}");
        assert_eq!(
            items[0]["extra_content"],
            json!({"google": {"thought_signature": SIG}}),
            "{first}"
        );
        assert!(items[1].get("extra_content").is_none(), "{first}");
        let mut input = vec![user.clone()];
        input.extend(items.iter().cloned());
        for item in &items {
            input.push(
                json!({"type": "function_call_output", "call_id": item["call_id"],
                              "output": "ok"}),
            );
        }
        let second = response_of(ask(Value::Array(input), stream).await.unwrap(), stream).await;
        assert_eq!(second["output"][0]["content"][0]["text"], "done");
    }
    let received = server.received_requests().await.unwrap();
    assert_eq!(received.len(), 4, "two turns, twice");
    for (n, turn) in received.iter().enumerate() {
        let body: Value = serde_json::from_slice(&turn.body).unwrap();
        if n % 2 == 0 {
            assert!(!body.to_string().contains("thoughtSignature"), "{body}");
            continue;
        }
        assert_eq!(
            body["contents"][1],
            json!({"role": "model", "parts": [
                {"functionCall": {"name": "fa", "args": {"a": 1}}, "thoughtSignature": SIG},
                {"functionCall": {"name": "fb", "args": {"b": 2}}}
            ]}),
            "{body}"
        );
    }
}
