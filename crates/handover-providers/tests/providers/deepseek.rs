//! DeepSeek specifics: `reasoning_content` in answers and stream deltas, and
//! the per-model passback rule (sent back on tool-call turns in thinking
//! mode; never for `deepseek-reasoner`).

use crate::support;

use handover_providers::{
    AnyProvider, CallOptions, ChatRequest, Message, Provider, ProviderKind, ReasoningPassback,
    ToolCall,
};
use serde_json::{Value, json};
use support::bodies;
use wiremock::{
    Mock, MockServer, ResponseTemplate,
    matchers::{method, path},
};

const KIND: ProviderKind = ProviderKind::DeepSeek;

/// A conversation in the middle of a tool-call exchange: the assistant's
/// tool-call turn carries reasoning, an earlier plain answer carries some too.
fn tool_turn_conversation() -> ChatRequest {
    ChatRequest::new(vec![
        Message::user("What is the weather in Hangzhou?"),
        Message::assistant("It is sunny.").with_reasoning("earlier plain-answer reasoning"),
        Message::user("And tomorrow? Book a courier if it rains."),
        Message::assistant_tool_calls(
            None,
            vec![ToolCall {
                id: "call_0".into(),
                name: "get_weather".into(),
                arguments: "{\"city\":\"Hangzhou\",\"day\":\"tomorrow\"}".into(),
                ..ToolCall::default()
            }],
        )
        .with_reasoning("I need tomorrow's forecast first."),
        Message::tool_result("call_0", "rain, 18C"),
    ])
}

async fn capture(model: &str, passback: Option<ReasoningPassback>) -> Vec<Value> {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(bodies::success(KIND)))
        .expect(1)
        .mount(&server)
        .await;
    let mut s = support::settings(KIND, &format!("{}/v1", server.uri()));
    if let Some(mode) = passback {
        s = s.with_reasoning_passback(model, mode);
    }
    let p = AnyProvider::new(s).unwrap();
    p.chat(
        &tool_turn_conversation(),
        &CallOptions::default().with_model(model),
    )
    .await
    .unwrap();
    let reqs = server.received_requests().await.unwrap();
    let body: Value = serde_json::from_slice(&reqs[0].body).unwrap();
    assert_eq!(body["model"], model);
    body["messages"].as_array().unwrap().clone()
}

#[tokio::test]
async fn thinking_mode_passes_reasoning_back_on_tool_call_turns_only() {
    let msgs = capture("deepseek-chat", None).await;
    assert_eq!(
        msgs[3]["reasoning_content"],
        "I need tomorrow's forecast first."
    );
    assert_eq!(msgs[3]["tool_calls"][0]["id"], "call_0");
    assert!(
        msgs[1].get("reasoning_content").is_none(),
        "plain answers: never"
    );
    assert_eq!(msgs[4]["tool_call_id"], "call_0");
}

#[tokio::test]
async fn reasoner_model_never_gets_reasoning_back() {
    let msgs = capture("deepseek-reasoner", None).await;
    assert!(
        msgs.iter().all(|m| m.get("reasoning_content").is_none()),
        "{msgs:?}"
    );
}

#[tokio::test]
async fn passback_is_a_per_model_setting() {
    let msgs = capture("deepseek-v4-flash", Some(ReasoningPassback::Never)).await;
    assert!(msgs.iter().all(|m| m.get("reasoning_content").is_none()));
    let msgs = capture(
        "deepseek-reasoner",
        Some(ReasoningPassback::OnToolCallTurns),
    )
    .await;
    assert_eq!(
        msgs[3]["reasoning_content"],
        "I need tomorrow's forecast first."
    );
}

#[tokio::test]
async fn other_kinds_never_send_reasoning_content() {
    for kind in [ProviderKind::OpenAi, ProviderKind::OpenAiCompatible] {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(bodies::success(kind)))
            .expect(1)
            .mount(&server)
            .await;
        let p = support::provider(kind, &format!("{}/v1", server.uri()));
        p.chat(&tool_turn_conversation(), &CallOptions::default())
            .await
            .unwrap();
        let reqs = server.received_requests().await.unwrap();
        let body = String::from_utf8_lossy(&reqs[0].body).into_owned();
        assert!(!body.contains("reasoning_content"), "{kind}: {body}");
    }
}

#[tokio::test]
async fn reasoner_stream_reports_reasoning_and_content_apart() {
    let body = [
        bodies::chunk(
            KIND,
            json!({"role": "assistant", "content": null, "reasoning_content": ""}),
            None,
        ),
        ": keep-alive\n\n".to_owned(),
        bodies::chunk(
            KIND,
            json!({"content": null, "reasoning_content": "9.11 vs 9.8: "}),
            None,
        ),
        bodies::chunk(
            KIND,
            json!({"content": null, "reasoning_content": "compare tenths."}),
            None,
        ),
        bodies::chunk(
            KIND,
            json!({"content": "9.8 is larger.", "reasoning_content": null}),
            None,
        ),
        bodies::chunk(KIND, json!({"content": ""}), Some("stop")),
        bodies::usage_chunk(KIND),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(body),
        )
        .expect(1)
        .mount(&server)
        .await;
    let p = support::provider(KIND, &format!("{}/v1", server.uri()));
    let resp = p
        .chat_stream(
            &ChatRequest::new(vec![Message::user("9.11 or 9.8?")]),
            &CallOptions::default().with_model("deepseek-reasoner"),
        )
        .await
        .unwrap()
        .into_response()
        .await
        .unwrap();
    assert_eq!(
        resp.reasoning_content.as_deref(),
        Some("9.11 vs 9.8: compare tenths.")
    );
    assert_eq!(resp.content.as_deref(), Some("9.8 is larger."));
    assert_eq!(resp.usage.unwrap().output_tokens, 3);
}
