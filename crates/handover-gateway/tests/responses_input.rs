//! `POST /v1/responses` input the fourth probe sent: parts and fields of
//! the wrong shape are refused naming the Responses field (they used to
//! reach the model as nothing, be ignored, or be named as a chat field),
//! features of stored or background responses are refused unless off,
//! and the hints the chat request also has are forwarded as sent.

mod support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, Running};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

async fn setup() -> (Running, MockServer) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-up", "object": "chat.completion", "created": 1, "model": "p-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}})))
        .mount(&server)
        .await;
    let mut c = format!(
        "\n[providers.p]\nkind = \"openai_compatible\"\nbase_url = \"{}/v1\"\nmodel = \"p-model\"\n",
        server.uri()
    );
    c.push_str(&support::policy("default", &["p"], "first_token"));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    (Running::start(&c).await, server)
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
