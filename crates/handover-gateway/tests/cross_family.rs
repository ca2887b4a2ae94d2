//! Fallback across provider families in the middle of a tool-using
//! conversation: an OpenAI primary fails, an Anthropic fallback answers.
//! The Anthropic mock checks the body it got (tool calls as `tool_use`,
//! results as `tool_result`, ids paired); the client still gets an
//! OpenAI-shaped answer naming the model and provider that answered.

mod support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, Running};
use wiremock::{
    Mock, MockServer, ResponseTemplate,
    matchers::{body_partial_json, method, path},
};

const CLAUDE: &str = "claude-sonnet-4-5-20250929";

/// A conversation that already made two tool calls and got their results.
fn conversation(stream: bool) -> Value {
    json!({
        "model": "support",
        "stream": stream,
        "messages": [
            {"role": "system", "content": "You are a support agent."},
            {"role": "user", "content": "Where is order K-701? Tell ops too."},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_lookup_1", "type": "function",
                 "function": {"name": "lookup_order", "arguments": "{\"order\":\"K-701\"}"}},
                {"id": "call_notify_2", "type": "function",
                 "function": {"name": "notify_ops", "arguments": "{\"order\":\"K-701\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_lookup_1", "content": "{\"status\":\"in transit\"}"},
            {"role": "tool", "tool_call_id": "call_notify_2", "content": "notified"}
        ],
        "tools": [
            {"type": "function", "function": {"name": "lookup_order",
             "parameters": {"type": "object", "properties": {"order": {"type": "string"}}}}},
            {"type": "function", "function": {"name": "notify_ops",
             "parameters": {"type": "object", "properties": {"order": {"type": "string"}}}}}
        ]
    })
}

/// What Anthropic must receive: results attached to their calls.
fn paired_history() -> Value {
    json!({
        "system": [{"type": "text", "text": "You are a support agent."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Where is order K-701? Tell ops too."}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_lookup_1", "name": "lookup_order", "input": {"order": "K-701"}},
                {"type": "tool_use", "id": "call_notify_2", "name": "notify_ops", "input": {"order": "K-701"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_lookup_1", "content": "{\"status\":\"in transit\"}"},
                {"type": "tool_result", "tool_use_id": "call_notify_2", "content": "notified"}
            ]}
        ],
        "tools": [
            {"name": "lookup_order", "input_schema": {"type": "object", "properties": {"order": {"type": "string"}}}},
            {"name": "notify_ops", "input_schema": {"type": "object", "properties": {"order": {"type": "string"}}}}
        ]
    })
}

async fn gateway(primary: &MockServer, claude: &MockServer) -> Running {
    let c = format!(
        r#"
[providers.primary]
kind = "openai"
base_url = "{primary}/v1"
model = "gpt-4.1"

[providers.claude]
kind = "anthropic"
base_url = "{claude}/v1"
model = "claude-sonnet-4-5"
{policy}{gateway}"#,
        primary = primary.uri(),
        claude = claude.uri(),
        policy = support::policy("support", &["primary", "claude"], "first_token"),
        gateway = support::gateway_section(1 << 20, "5s", ""),
    );
    Running::start(&c).await
}

/// Sends the conversation through a gateway over both mocks; checks that
/// the answer is a 200 from `claude`.
async fn ask(primary: &MockServer, claude: &MockServer, stream: bool) -> reqwest::Response {
    let gw = gateway(primary, claude).await;
    let resp = gw
        .http
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_A)
        .json(&conversation(stream))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["x-handover-provider"], "claude");
    resp
}

async fn failing_primary() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(500).set_body_json(json!({"error": {
            "message": "The server had an error while processing your request.",
            "type": "server_error", "param": null, "code": null}})))
        .mount(&server)
        .await;
    server
}

async fn claude(answer: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(body_partial_json(paired_history()))
        .respond_with(answer)
        .expect(1)
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn anthropic_fallback_answers_a_tool_using_conversation_in_openai_shape() {
    let primary = failing_primary().await;
    let claude = claude(ResponseTemplate::new(200).set_body_json(json!({
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
        "model": CLAUDE,
        "content": [{"type": "text", "text": "K-701 is in transit; ops are informed."}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 100, "cache_read_input_tokens": 20, "output_tokens": 12}
    })))
    .await;
    let resp = ask(&primary, &claude, false).await;
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], CLAUDE);
    assert_eq!(
        body["choices"][0]["message"],
        json!({"role": "assistant", "content": "K-701 is in transit; ops are informed."})
    );
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(body["usage"]["prompt_tokens"], 120);
    assert_eq!(body["usage"]["completion_tokens"], 12);
    assert_eq!(body["usage"]["total_tokens"], 132);
    assert_eq!(body["usage"]["prompt_tokens_details"]["cached_tokens"], 20);
    assert!(!primary.received_requests().await.unwrap().is_empty());
    // The body matcher above only answers a properly paired history.
    claude.verify().await;
}

#[tokio::test]
async fn anthropic_stream_reaches_an_openai_streaming_client_as_chunks() {
    let event = |v: Value| format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap());
    let events = [
        event(
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "content": [], "model": CLAUDE, "stop_reason": null,
            "usage": {"input_tokens": 50, "output_tokens": 1}}}),
        ),
        event(json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}})),
        event(json!({"type": "ping"})),
        event(json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "K-701 is "}})),
        event(json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "in transit."}})),
        event(json!({"type": "content_block_stop", "index": 0})),
        event(
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 6}}),
        ),
        event(json!({"type": "message_stop"})),
    ]
    .concat();
    let primary = failing_primary().await;
    let claude = claude(
        ResponseTemplate::new(200)
            .insert_header("content-type", "text/event-stream")
            .set_body_string(events),
    )
    .await;
    let resp = ask(&primary, &claude, true).await;
    let text = resp.text().await.unwrap();
    let chunks: Vec<Value> = text
        .split("\n\n")
        .filter_map(|ev| ev.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "K-701 is in transit.");
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert!(chunks.iter().any(|c| c["model"] == CLAUDE), "{text}");
    assert!(
        chunks
            .iter()
            .any(|c| c["choices"][0]["finish_reason"] == "stop"),
        "{text}"
    );
    claude.verify().await;
}
