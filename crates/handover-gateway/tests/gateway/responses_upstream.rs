//! A provider reached through OpenAI's own Responses endpoint
//! (`api = "responses"`) behind the gateway: `/v1/chat/completions` and
//! `/v1/responses` both reach it as a Responses request (asserted at the
//! wiremock upstream), and the answer comes back in each door's shape. A
//! request the Responses API cannot express is never sent to it weakened:
//! stop sequences skip it (another provider serves, or a 400 names
//! `stop`), other parameters fail with a 400 naming them, nothing sent.

use crate::support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::responses_upstream::{self as up, ARGS, CALL_ID, MODEL, TEXT, mock, provider};
use support::{CLIENT_A, Running};
use wiremock::MockServer;

async fn responses_upstream() -> MockServer {
    mock("/v1/responses", up::reply).await
}

async fn chat_upstream() -> MockServer {
    mock(
        "/v1/chat/completions",
        up::chat_completion("c-model-v2", "from chat"),
    )
    .await
}

async fn gateway(providers: &str, chain: &[&str]) -> Running {
    let mut c = providers.to_owned();
    c.push_str(&support::policy("default", chain, "first_token"));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    Running::start(&c).await
}

async fn post(gw: &Running, route: &str, body: &Value) -> reqwest::Response {
    gw.http
        .post(gw.url(route))
        .bearer_auth(CLIENT_A)
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn received(server: &MockServer) -> Vec<Value> {
    let reqs = server.received_requests().await.unwrap_or_default();
    reqs.iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

#[tokio::test]
async fn chat_completions_reach_it_as_a_responses_request_and_read_back_as_a_chat_completion() {
    let r = responses_upstream().await;
    let gw = gateway(&provider("r", "responses", &r), &["r"]).await;
    let resp = post(
        &gw,
        "/v1/chat/completions",
        &json!({"model": "default", "max_completion_tokens": 64, "temperature": 0.5,
            "messages": [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Where is the fjord?"}]}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["x-handover-provider"], "r");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["id"], "resp_up_1", "the provider's id");
    assert_eq!(body["model"], MODEL);
    assert_eq!(body["choices"][0]["message"]["content"], TEXT);
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18,
            "prompt_tokens_details": {"cached_tokens": 3, "cache_write_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 2}})
    );
    assert_eq!(
        received(&r).await,
        vec![json!({"model": "r-model", "instructions": "Be brief.",
            "input": [{"type": "message", "role": "user", "content": "Where is the fjord?"}],
            "max_output_tokens": 64, "temperature": 0.5, "store": false, "stream": false})]
    );
}

#[tokio::test]
async fn a_streamed_chat_completion_and_a_tool_call_come_back_from_its_event_stream() {
    let r = responses_upstream().await;
    let gw = gateway(&provider("r", "responses", &r), &["r"]).await;
    let resp = post(
        &gw,
        "/v1/chat/completions",
        &json!({"model": "default", "stream": true, "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": "Where is the fjord?"}]}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let text = resp.text().await.unwrap();
    let chunks: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, TEXT);
    assert!(
        chunks
            .iter()
            .any(|c| c["choices"][0]["finish_reason"] == "stop")
    );
    assert_eq!(chunks.last().unwrap()["usage"]["total_tokens"], 18);
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    let sent = received(&r).await;
    assert_eq!(sent[0]["stream"], true);
    assert!(
        sent[0].get("stream_options").is_none(),
        "usage is always streamed"
    );

    let tool = json!({"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}});
    let resp = post(
        &gw,
        "/v1/chat/completions",
        &json!({"model": "default", "tools": [tool],
            "messages": [{"role": "user", "content": "CASE:tool weather in Oslo?"}]}),
    )
    .await;
    let body: Value = resp.json().await.unwrap();
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(
        choice["message"]["tool_calls"],
        json!([{"id": CALL_ID, "type": "function",
            "function": {"name": "get_weather", "arguments": ARGS}}])
    );
    assert_eq!(
        received(&r).await[1]["tools"],
        json!([{"type": "function", "name": "get_weather", "strict": false,
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}])
    );
}

#[tokio::test]
async fn stop_sequences_skip_a_responses_provider_and_other_gaps_fail_naming_the_parameter() {
    let r = responses_upstream().await;
    let c = chat_upstream().await;
    let providers = provider("r", "responses", &r) + &provider("c", "chat_completions", &c);
    let gw = gateway(&providers, &["r", "c"]).await;
    let stop = json!({"model": "default", "stop": ["END"],
        "messages": [{"role": "user", "content": "Count to ten."}]});
    let resp = post(&gw, "/v1/chat/completions", &stop).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let attempts = resp.headers()["x-handover-attempts"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(attempts.contains("r=skipped_unsupported"), "{attempts}");
    assert_eq!(resp.headers()["x-handover-provider"], "c");
    assert_eq!(received(&c).await[0]["stop"], json!(["END"]));
    assert_eq!(
        received(&r).await.len(),
        0,
        "never sent without its stop sequences"
    );

    // Alone in the chain: a 400 naming the parameter, nothing sent.
    let gw = gateway(&provider("r", "responses", &r), &["r"]).await;
    let resp = post(&gw, "/v1/chat/completions", &stop).await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unsupported_parameter", "{body}");
    assert_eq!(body["error"]["param"], "stop", "{body}");
    let resp = post(
        &gw,
        "/v1/chat/completions",
        &json!({"model": "default", "logit_bias": {"50256": -100},
            "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let body: Value = resp.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("logit_bias"), "{body}");
    assert_eq!(received(&r).await.len(), 0, "nothing was sent");
}

#[tokio::test]
async fn the_responses_door_reaches_it_with_the_clients_items_tools_and_format() {
    let r = responses_upstream().await;
    let gw = gateway(&provider("r", "responses", &r), &["r"]).await;
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}},
        "required": ["city"], "additionalProperties": false});
    let tool = json!({"type": "function", "name": "look", "description": "Look up",
        "parameters": {"type": "object", "properties": {}}, "strict": true});
    let input = json!([
        {"type": "message", "role": "user", "content": "Where is the fjord?"},
        {"type": "function_call", "call_id": "call_9", "name": "look", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_9", "output": "Norway"},
    ]);
    let resp = post(
        &gw,
        "/v1/responses",
        &json!({"model": "default", "instructions": "Be exact.", "input": input,
            "tools": [tool], "max_output_tokens": 100, "reasoning": {"effort": "low"},
            "text": {"format": {"type": "json_schema", "name": "place", "schema": schema,
                "strict": true}}}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["object"], "response");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["model"], MODEL);
    assert_eq!(body["output"][0]["content"][0]["text"], ARGS);
    assert_eq!(body["usage"]["input_tokens_details"]["cached_tokens"], 3);
    assert_eq!(
        body["usage"]["output_tokens_details"]["reasoning_tokens"],
        2
    );
    assert_eq!(
        received(&r).await,
        vec![
            json!({"model": "r-model", "instructions": "Be exact.", "input": input,
            "tools": [tool], "max_output_tokens": 100, "reasoning": {"effort": "low"},
            "text": {"format": {"type": "json_schema", "name": "place", "schema": schema,
                "strict": true}},
            "store": false, "stream": false})
        ],
        "what the client sent, but for the model and store: false"
    );
}
