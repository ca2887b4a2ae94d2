//! One conformance suite, run against every adapter kind on wiremock (and
//! the raw TCP server for dropped, cut and stalled connections). Each case
//! counts the HTTP requests the mock actually received. Bodies follow each
//! vendor's documented shapes (`support/bodies.rs`, `support/anthropic.rs`,
//! `support/gemini.rs`, `support/responses.rs`). OpenAI and Azure run twice:
//! through Chat Completions and through the Responses API.
//!
//! `chat.rs` holds the non-streaming and transport cases, `stream.rs` the
//! streaming ones; the macro below instantiates every case per adapter.

use crate::support;

mod chat;
mod stream;

use futures::StreamExt;
use handover_providers::{ChatRequest, Message, ProviderError, ProviderKind, StreamEvent};
use serde_json::Value;
use support::Case;
use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};

pub(crate) fn request() -> ChatRequest {
    ChatRequest::new(vec![Message::system("be brief"), Message::user("hello")])
        .with_max_tokens(50)
        .with_user("user-42")
}

pub(crate) async fn server_with(kind: Case, template: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    // Gemini streams post to another method; either path answers.
    let any_of = move |req: &wiremock::Request| {
        [false, true]
            .into_iter()
            .any(|stream| req.url.path() == support::stream_path(kind, stream))
    };
    Mock::given(method("POST"))
        .and(any_of)
        .respond_with(template)
        .expect(1)
        .mount(&server)
        .await;
    server
}

pub(crate) fn base(server: &MockServer) -> String {
    format!("{}/v1", server.uri())
}

pub(crate) fn sse(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .insert_header("x-request-id", "req_stream_1")
        .set_body_string(body)
}

pub(crate) async fn sent_body(server: &MockServer) -> Value {
    let reqs = server.received_requests().await.unwrap();
    assert_eq!(reqs.len(), 1, "exactly one HTTP request");
    serde_json::from_slice(&reqs[0].body).unwrap()
}

pub(crate) async fn collect(
    stream: handover_providers::ChatStream,
) -> Vec<Result<StreamEvent, ProviderError>> {
    stream.collect().await
}

macro_rules! conformance {
    ($($module:ident => $kind:expr),* $(,)?) => {$(
        mod $module {
            use super::*;
            const KIND: Case = $kind;

            #[tokio::test] async fn success_reports_answer() { chat::success_reports_answer(KIND).await }
            #[tokio::test] async fn model_override_is_sent() { super::chat::model_override_is_sent(KIND).await }
            #[tokio::test] async fn error_statuses_chat() { super::chat::error_statuses_are_classified_with_one_request_each(KIND, false).await }
            #[tokio::test] async fn error_statuses_stream() { super::chat::error_statuses_are_classified_with_one_request_each(KIND, true).await }
            #[tokio::test] async fn first_byte_timeout_sends_once() { super::chat::first_byte_timeout_sends_once(KIND).await }
            #[tokio::test] async fn dropped_connection_chat() { super::chat::dropped_connection_sends_once(KIND, false).await }
            #[tokio::test] async fn dropped_connection_stream() { super::chat::dropped_connection_sends_once(KIND, true).await }
            #[tokio::test] async fn connect_refused_is_not_sent() { super::chat::connect_refused_is_not_sent(KIND).await }
            #[tokio::test] async fn send_gate_refusal_sends_nothing() { super::chat::send_gate_refusal_sends_nothing(KIND).await }
            #[tokio::test] async fn invalid_request_sends_nothing() { super::chat::invalid_request_sends_nothing(KIND).await }
            #[tokio::test] async fn undecodable_success_body() { super::chat::undecodable_success_body_is_decode_error(KIND).await }
            #[tokio::test] async fn tool_call_members() { super::chat::tool_call_members_follow_the_wire_format(KIND).await }
            #[tokio::test] async fn blank_lines_before_json_body() { super::chat::blank_lines_before_json_body_are_tolerated(KIND).await }
            #[tokio::test] async fn stream_with_keepalives() { super::stream::stream_with_keepalives_assembles(KIND).await }
            #[tokio::test] async fn stream_without_done_but_finished() { super::stream::stream_without_done_but_finished_is_complete(KIND).await }
            #[tokio::test] async fn stream_without_done_or_finish() { super::stream::stream_without_done_or_finish_is_interrupted(KIND).await }
            #[tokio::test] async fn error_event_in_200_stream() { super::stream::error_event_in_200_stream_is_an_error(KIND).await }
            #[tokio::test] async fn malformed_event() { super::stream::malformed_event_is_typed_and_skippable(KIND).await }
            #[tokio::test] async fn tool_call_deltas() { super::stream::tool_call_deltas_assemble(KIND).await }
            #[tokio::test] async fn non_streaming_tool_calls() { super::stream::non_streaming_tool_calls_and_reasoning(KIND).await }
            #[tokio::test] async fn stream_error_status_sends_once() { super::stream::stream_error_status_sends_once(KIND).await }
            #[tokio::test(start_paused = true)] async fn keep_alives_are_not_progress() { super::stream::keep_alives_are_not_progress(KIND).await }
            #[tokio::test(start_paused = true)] async fn stalled_stream_times_out() { super::stream::stalled_stream_times_out(KIND).await }
            #[tokio::test(start_paused = true)] async fn cut_stream_is_interrupted() { super::stream::cut_stream_is_interrupted(KIND).await }
        }
    )*};
}

#[tokio::test]
async fn a_call_without_arguments_reads_as_an_empty_object() {
    stream::a_call_without_arguments_reads_as_an_empty_object(Case::chat(
        ProviderKind::OpenAiCompatible,
    ))
    .await
}

conformance!(
    openai => Case::chat(ProviderKind::OpenAi),
    deepseek => Case::chat(ProviderKind::DeepSeek),
    openai_compatible => Case::chat(ProviderKind::OpenAiCompatible),
    azure_openai => Case::chat(ProviderKind::AzureOpenAi),
    anthropic => Case::chat(ProviderKind::Anthropic),
    gemini => Case::chat(ProviderKind::Gemini),
    openai_responses => Case::responses(ProviderKind::OpenAi),
    azure_responses => Case::responses(ProviderKind::AzureOpenAi),
);
