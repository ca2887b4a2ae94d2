//! One span per attempt with OpenTelemetry GenAI attribute names.

use crate::support;

use futures::StreamExt;
use handover_providers::{CallOptions, ChatRequest, Message, Provider, ProviderKind};
use support::bodies;
use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};

fn req() -> ChatRequest {
    ChatRequest::new(vec![Message::user("hello")]).with_max_tokens(64)
}

#[tokio::test]
async fn chat_span_carries_gen_ai_attributes() {
    let (logs, _guard) = support::capture_logs();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("x-request-id", "req_tel_1")
                .set_body_json(bodies::success(ProviderKind::OpenAi)),
        )
        .mount(&server)
        .await;
    let p = support::provider(ProviderKind::OpenAi, &format!("{}/v1", server.uri()));
    p.chat(&req(), &CallOptions::default()).await.unwrap();
    let text = logs.text();
    for want in [
        "gen_ai.operation.name=\"chat\"",
        "gen_ai.system=\"openai\"",
        "gen_ai.request.model=\"gpt-4o-mini\"",
        "gen_ai.request.max_tokens=64",
        "gen_ai.response.model=\"gpt-4o-mini-2024-07-18\"",
        "gen_ai.usage.input_tokens=16",
        "gen_ai.usage.output_tokens=10",
        "http.response.status_code=200",
        "handover.request_id=\"req_tel_1\"",
    ] {
        assert!(text.contains(want), "missing {want} in {text}");
    }
}

#[tokio::test]
async fn stream_span_records_usage_and_errors_record_class() {
    let (logs, _guard) = support::capture_logs();
    let kind = ProviderKind::DeepSeek;
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(bodies::text_stream(kind, true)),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_json(bodies::error("busy", None, None)))
        .mount(&server)
        .await;
    let p = support::provider(kind, &format!("{}/v1", server.uri()));
    let mut s = p
        .chat_stream(&req(), &CallOptions::default())
        .await
        .unwrap();
    while let Some(item) = s.next().await {
        item.unwrap();
    }
    drop(s);
    p.chat(&req(), &CallOptions::default()).await.unwrap_err();
    let text = logs.text();
    for want in [
        "gen_ai.system=\"deepseek\"",
        "gen_ai.response.model=\"deepseek-chat-v3\"",
        "gen_ai.usage.output_tokens=3",
        "handover.stream=true",
        "handover.stream.events=",
        "error.type=\"overloaded\"",
        "http.response.status_code=503",
    ] {
        assert!(text.contains(want), "missing {want} in {text}");
    }
}
