//! Fallback across provider families in the middle of a tool-using
//! conversation: an OpenAI primary fails, an Anthropic (or Gemini)
//! fallback answers. The fallback's mock checks the body it got (tool
//! calls as `tool_use` / `functionCall`, results as `tool_result` /
//! `functionResponse`, paired); the client still gets an OpenAI-shaped
//! answer naming the model and provider that answered.

use crate::support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::Running;
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

/// A fallback provider: configured name, kind, model.
type Fallback = (&'static str, &'static str, &'static str);
const TO_CLAUDE: Fallback = ("claude", "anthropic", "claude-sonnet-4-5");
const TO_GEMINI: Fallback = ("gemini", "gemini", "gemini-2.5-flash");

/// An OpenAI primary, then the fallback.
async fn gateway(primary: &MockServer, fallback: &MockServer, to: Fallback) -> Running {
    gateway_with(primary, fallback, to, "").await
}

/// [`gateway`] with `extra` lines in the fallback's section.
async fn gateway_with(
    primary: &MockServer,
    fallback: &MockServer,
    to: Fallback,
    extra: &str,
) -> Running {
    let (name, kind, model) = to;
    let c = format!(
        r#"
[providers.primary]
kind = "openai"
base_url = "{primary}/v1"
model = "gpt-4.1"

[providers.{name}]
kind = "{kind}"
base_url = "{fallback}/v1"
model = "{model}"
{extra}
{policy}{gateway}"#,
        primary = primary.uri(),
        fallback = fallback.uri(),
        policy = support::policy("support", &["primary", name], "first_token"),
        gateway = support::gateway_section(1 << 20, "5s", ""),
    );
    Running::start(&c).await
}

/// Sends the conversation through a gateway over both mocks; checks that
/// the answer is a 200 from the fallback.
async fn ask(
    primary: &MockServer,
    fallback: &MockServer,
    to: Fallback,
    stream: bool,
) -> reqwest::Response {
    let gw = gateway(primary, fallback, to).await;
    let resp = gw.chat(&conversation(stream)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["x-handover-provider"], to.0);
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
    let resp = ask(&primary, &claude, TO_CLAUDE, false).await;
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
    let resp = ask(&primary, &claude, TO_CLAUDE, true).await;
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

// ---- Gemini ----

const GEMINI: &str = "gemini-2.5-flash-preview-09-2025";

/// What Gemini must receive: calls as `functionCall`s, each result a
/// `functionResponse` named after the call its id answered.
fn gemini_history() -> Value {
    json!({
        "systemInstruction": {"parts": [{"text": "You are a support agent."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "Where is order K-701? Tell ops too."}]},
            {"role": "model", "parts": [
                {"functionCall": {"name": "lookup_order", "args": {"order": "K-701"}}},
                {"functionCall": {"name": "notify_ops", "args": {"order": "K-701"}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "lookup_order", "response": {"status": "in transit"}}},
                {"functionResponse": {"name": "notify_ops", "response": {"result": "notified"}}}
            ]}
        ],
        "tools": [{"functionDeclarations": [
            {"name": "lookup_order", "parametersJsonSchema": {"type": "object", "properties": {"order": {"type": "string"}}}},
            {"name": "notify_ops", "parametersJsonSchema": {"type": "object", "properties": {"order": {"type": "string"}}}}
        ]}]
    })
}

/// Gemini's next step: one more call, `schedule_redelivery`.
fn gemini_call() -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": "schedule_redelivery", "args": {"order": "K-701", "day": "friday"}}}
        ]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 90, "candidatesTokenCount": 14, "totalTokenCount": 104},
        "modelVersion": GEMINI,
        "responseId": "c2Q6aOSdFsqmz7IP7K3b2QM"
    })
}

async fn gemini(stream: bool, answer: ResponseTemplate) -> MockServer {
    let method_name = if stream {
        "streamGenerateContent"
    } else {
        "generateContent"
    };
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("/v1/models/gemini-2.5-flash:{method_name}")))
        .and(body_partial_json(gemini_history()))
        .respond_with(answer)
        .expect(1)
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn gemini_fallback_answers_with_an_openai_tool_call() {
    let primary = failing_primary().await;
    let g = gemini(
        false,
        ResponseTemplate::new(200).set_body_json(gemini_call()),
    )
    .await;
    let body: Value = ask(&primary, &g, TO_GEMINI, false)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], GEMINI);
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    let calls = body["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["type"], "function");
    assert_eq!(calls[0]["function"]["name"], "schedule_redelivery");
    let args: Value =
        serde_json::from_str(calls[0]["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"order": "K-701", "day": "friday"}));
    assert!(calls[0]["id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(body["usage"]["prompt_tokens"], 90);
    assert_eq!(body["usage"]["completion_tokens"], 14);
    assert!(!primary.received_requests().await.unwrap().is_empty());
    g.verify().await;
}

#[tokio::test]
async fn gemini_stream_reaches_an_openai_streaming_client_as_tool_call_chunks() {
    let primary = failing_primary().await;
    let events = format!("data: {}\r\n\r\n", gemini_call());
    let g = gemini(
        true,
        ResponseTemplate::new(200)
            .insert_header("content-type", "text/event-stream")
            .set_body_string(events),
    )
    .await;
    let text = ask(&primary, &g, TO_GEMINI, true)
        .await
        .text()
        .await
        .unwrap();
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    let chunks: Vec<Value> = text
        .split("\n\n")
        .filter_map(|ev| ev.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    let call = chunks
        .iter()
        .find_map(|c| c["choices"][0]["delta"]["tool_calls"][0].as_object())
        .unwrap_or_else(|| panic!("no tool call chunk: {text}"));
    assert_eq!(call["function"]["name"], "schedule_redelivery");
    assert!(call["id"].as_str().unwrap().starts_with("call_"));
    assert!(
        chunks
            .iter()
            .any(|c| c["choices"][0]["finish_reason"] == "tool_calls"),
        "{text}"
    );
    assert!(chunks.iter().any(|c| c["model"] == GEMINI), "{text}");
    g.verify().await;
}

/// A `temperature` above 1 is OpenAI's to give (0–2) but not Anthropic's
/// (0–1, refused with a 400): the Anthropic fallback is skipped for such
/// a request rather than sent one it refuses or a changed one.
#[tokio::test]
async fn a_temperature_above_1_never_reaches_an_anthropic_fallback() {
    let primary = failing_primary().await;
    let claude = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .expect(0)
        .mount(&claude)
        .await;
    let gw = gateway(&primary, &claude, TO_CLAUDE).await;
    let mut body = conversation(false);
    body["temperature"] = json!(1.5);
    let resp = gw.chat(&body).await;
    assert_ne!(resp.status(), StatusCode::OK);
    let text = resp.text().await.unwrap();
    assert!(text.contains("temperature"), "{text}");
    assert!(!primary.received_requests().await.unwrap().is_empty());
    claude.verify().await;
}

/// A history a translating provider's wire format cannot express (an
/// earlier tool call whose arguments were cut off by `finish_reason:
/// length`) is no verdict on the request: that provider is passed over
/// with nothing sent, and the next one gets the request as it is. With no
/// other provider, the answer is the 400 naming the field.
#[tokio::test]
async fn a_history_one_provider_cannot_express_goes_to_the_next_as_sent() {
    let claude = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500))
        .expect(0)
        .mount(&claude)
        .await;
    let openai = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4.1",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris is sunny."},
                         "finish_reason": "stop"}]})))
        .expect(1)
        .mount(&openai)
        .await;
    let config = |chain: &[&str]| {
        format!(
            "\n[providers.claude]\nkind = \"anthropic\"\nbase_url = \"{}/v1\"\nmodel = \"claude-sonnet-4-5\"\n\
             \n[providers.openai]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"gpt-4.1\"\n{}{}",
            claude.uri(),
            openai.uri(),
            support::policy("support", chain, "first_token"),
            support::gateway_section(1 << 20, "5s", ""),
        )
    };
    let truncated = json!({"model": "support", "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "weather", "arguments": "{\"city\": \"Par"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "error: arguments cut off"},
        {"role": "user", "content": "Try again please."}
    ]});
    let gw = Running::start(&config(&["claude", "openai"])).await;
    let resp = gw.chat(&truncated).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let attempts = resp.headers()["x-handover-attempts"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(attempts, "openai=answered, claude=skipped_untranslatable");
    let sent = openai.received_requests().await.unwrap();
    let body: Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(
        body["messages"], truncated["messages"],
        "as the client sent it"
    );

    let gw = Running::start(&config(&["claude"])).await;
    let resp = gw.chat(&truncated).await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let err: Value = resp.json().await.unwrap();
    assert_eq!(
        err["error"]["param"], "messages[1].tool_calls[0].function.arguments",
        "{err}"
    );
    assert_eq!(err["error"]["code"], "invalid_request", "{err}");
    claude.verify().await;
    openai.verify().await;
}

/// Passed over for a passing reason — the only other provider's breaker
/// is open — the call is a 502 to retry later, not a 400 that blames a
/// valid conversation (agent frameworks do not retry a 400).
#[tokio::test]
async fn an_untranslatable_history_with_the_fallback_briefly_out_is_a_502() {
    let claude = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500))
        .expect(0)
        .mount(&claude)
        .await;
    // 401 opens the OpenAI provider's breaker at once.
    let openai = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({"error": {
            "message": "bad key", "type": "invalid_request_error", "code": "invalid_api_key"}})))
        .expect(1)
        .mount(&openai)
        .await;
    let config = format!(
        "\n[providers.claude]\nkind = \"anthropic\"\nbase_url = \"{}/v1\"\nmodel = \"claude-sonnet-4-5\"\n\
         \n[providers.openai]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"gpt-4.1\"\n{}{}{}",
        claude.uri(),
        openai.uri(),
        support::policy("support", &["claude", "openai"], "first_token"),
        support::policy("direct", &["openai"], "first_token"),
        support::gateway_section(1 << 20, "5s", ""),
    );
    let gw = Running::start(&config).await;
    let ask = |model: &str| {
        json!({"model": model, "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "weather", "arguments": "{\"city\": \"Par"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "error: arguments cut off"}
        ]})
    };
    let tripped = gw.chat(&ask("direct")).await;
    assert_ne!(tripped.status(), StatusCode::OK);
    let resp = gw.chat(&ask("support")).await;
    let attempts = resp.headers()["x-handover-attempts"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        attempts,
        "claude=skipped_untranslatable, openai=skipped_breaker_open"
    );
    assert_eq!(resp.status(), StatusCode::BAD_GATEWAY, "{attempts}");
    claude.verify().await;
    openai.verify().await;
}

/// The OpenAI Agents SDK makes every tool `strict`. An Anthropic fallback
/// declared to have structured outputs (Claude 4.5 and later:
/// `supports = { structured_outputs = true }`) takes such a request as a
/// strict tool use, and the conversation goes on there; by default the
/// kind is not assumed to have them and the fallback is skipped (fourth
/// gateway probe).
#[tokio::test]
async fn strict_tools_reach_an_anthropic_fallback_declared_to_have_structured_outputs() {
    let primary = failing_primary().await;
    let claude = claude(ResponseTemplate::new(200).set_body_json(json!({
        "id": "msg_01", "type": "message", "role": "assistant", "model": CLAUDE,
        "content": [{"type": "text", "text": "K-701 is in transit."}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 100, "output_tokens": 6}
    })))
    .await;
    let declared = "supports = { structured_outputs = true }";
    let gw = gateway_with(&primary, &claude, TO_CLAUDE, declared).await;
    let mut body = conversation(false);
    for tool in body["tools"].as_array_mut().unwrap() {
        tool["function"]["strict"] = json!(true);
    }
    let resp = gw.chat(&body).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["x-handover-provider"], "claude");
    claude.verify().await;
    let sent: Value =
        serde_json::from_slice(&claude.received_requests().await.unwrap()[0].body).unwrap();
    assert_eq!(sent["tools"][0]["strict"], json!(true), "{sent}");
    assert_eq!(sent["tools"][1]["strict"], json!(true), "{sent}");
}
