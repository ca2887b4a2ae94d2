//! What a provider's error body may put in an error: a code only if it is
//! an identifier, a param only if it is short, and no more of the body
//! than the read limits; an answer body past its limit is refused.

use crate::support;

use handover_providers::{CallOptions, ChatRequest, ErrorClass, Message, Provider, ProviderKind};
use serde_json::json;
use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};

async fn failing_with(body: serde_json::Value) -> handover_providers::ProviderError {
    answered(ResponseTemplate::new(400).set_body_json(body)).await
}

async fn answered(template: ResponseTemplate) -> handover_providers::ProviderError {
    let (_server, p) = answering(template).await;
    p.chat(&req(), &CallOptions::default()).await.unwrap_err()
}

/// A provider whose server answers its one request with `template` (the
/// server lives as long as the first value; it checks the one request).
async fn answering(template: ResponseTemplate) -> (MockServer, handover_providers::AnyProvider) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(template)
        .expect(1)
        .mount(&server)
        .await;
    let p = support::provider(ProviderKind::OpenAi, &format!("{}/v1", server.uri()));
    (server, p)
}

fn req() -> ChatRequest {
    ChatRequest::new(vec![Message::user("hello")])
}

fn error(code: serde_json::Value, param: serde_json::Value) -> serde_json::Value {
    json!({"error": {"message": "bad request", "type": "invalid_request_error", "code": code, "param": param}})
}

#[tokio::test]
async fn identifier_codes_and_short_params_are_kept() {
    for code in [
        "context_length_exceeded",
        "invalid-value",
        "v1.bad_param",
        "E42",
    ] {
        let e = failing_with(error(json!(code), json!("messages[0].content"))).await;
        let f = e.api_failure().unwrap();
        assert_eq!(f.code.as_deref(), Some(code));
        assert_eq!(f.param.as_deref(), Some("messages[0].content"));
        assert_eq!(e.provider_code(), Some(code));
    }
}

#[tokio::test]
async fn a_code_that_is_no_identifier_is_dropped() {
    // 60 KiB: within the error body limit, so the body is still JSON.
    for code in [
        json!("c".repeat(60 * 1024)),
        json!("c".repeat(65)),
        json!("SECRET-PROMPT-123 is too long"),
        json!("1.5"),
        json!("-1"),
        json!("400"),
        json!(400),
        json!(""),
        json!("naïve"),
    ] {
        let e = failing_with(error(code.clone(), json!(null))).await;
        assert_eq!(e.provider_code(), None, "{:.80}", code.to_string());
        assert!(e.to_string().len() < 200, "{:.80}", e.to_string());
    }
    // 100 KiB: past the error body limit, the cut body is the message.
    let e = failing_with(error(json!("c".repeat(100 * 1024)), json!(null))).await;
    assert_eq!(e.provider_code(), None);
    assert!(e.to_string().len() < 700, "{}", e.to_string().len());
    // Classification still reads the code as sent.
    let e = failing_with(error(json!("context_length_exceeded"), json!(null))).await;
    assert_eq!(e.class(), ErrorClass::ContextLengthExceeded);
}

#[tokio::test]
async fn a_param_that_is_no_name_is_dropped() {
    for param in [
        "p".repeat(257),
        "p".repeat(60 * 1024),
        "messages[0]\ncontent".to_owned(),
        "tab\there".to_owned(),
    ] {
        let e = failing_with(error(json!("invalid_value"), json!(param))).await;
        let f = e.api_failure().unwrap();
        assert_eq!(f.param, None, "{:.80}", param);
        assert_eq!(f.code.as_deref(), Some("invalid_value"));
    }
    let e = failing_with(error(json!("invalid_value"), json!("p".repeat(10 << 20)))).await;
    assert_eq!(e.api_failure().unwrap().param, None);
    assert!(e.to_string().len() < 700, "{}", e.to_string().len());
    let e = failing_with(error(json!("invalid_value"), json!("p".repeat(256)))).await;
    assert_eq!(
        e.api_failure().unwrap().param.as_ref().map(String::len),
        Some(256)
    );
}

/// An error body is read to 64 KiB only: a 1 MiB JSON error is cut, no
/// longer JSON, and its message the first 512 bytes of it.
#[tokio::test]
async fn an_error_body_is_read_only_to_its_limit() {
    let body = json!({"error": {"message": "m".repeat(1024 * 1024), "code": "server_error"}});
    let e = answered(ResponseTemplate::new(500).set_body_json(body)).await;
    let f = e.api_failure().unwrap();
    assert_eq!(f.status, 500);
    assert_eq!(e.class(), ErrorClass::ServerError);
    assert!(f.message.len() <= 512, "{}", f.message.len());
}

/// A 2xx body past 32 MiB is refused with class `decode` (the router
/// falls back), not read whole.
#[tokio::test]
async fn an_answer_past_its_limit_is_refused_as_decode() {
    let body = vec![b' '; 32 * 1024 * 1024 + 1];
    let e = answered(
        ResponseTemplate::new(200)
            .insert_header("content-type", "application/json")
            .set_body_raw(body, "application/json"),
    )
    .await;
    assert_eq!(e.class(), ErrorClass::Decode);
    assert_eq!(e.status(), Some(200));
    assert!(e.to_string().contains("larger than 33554432 bytes"), "{e}");
}

/// A stream request answered 200 with a body that is no event stream (a
/// proxy that ignores `stream: true`, a login page): malformed, so not
/// retried at the same provider, and saying what came. A body labelled as
/// events that ends before any is still an interruption.
#[tokio::test]
async fn a_stream_answered_without_events_is_malformed_naming_what_came() {
    use futures::StreamExt;
    let whole = json!({"id": "c1", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]});
    let cases = [
        (
            ResponseTemplate::new(200).set_body_json(whole),
            Some("application/json"),
        ),
        (
            ResponseTemplate::new(200).set_body_raw("<html>sign in</html>", "text/html"),
            Some("text/html"),
        ),
        (
            ResponseTemplate::new(200).set_body_raw("", "text/event-stream; charset=utf-8"),
            None,
        ),
    ];
    for (template, named) in cases {
        let (_server, p) = answering(template).await;
        let mut s = p
            .chat_stream(&req(), &CallOptions::default())
            .await
            .unwrap();
        // No event was sent: the first item is the error.
        let e = match s.next().await.expect("the stream ends with an error") {
            Ok(ev) => panic!("no event was sent, got {ev:?}"),
            Err(e) => e,
        };
        match named {
            Some(ct) => {
                assert_eq!(e.class(), ErrorClass::MalformedStream, "{e}");
                assert!(!e.is_retryable());
                assert!(e.to_string().contains(ct), "{e}");
            }
            None => assert_eq!(e.class(), ErrorClass::StreamInterrupted, "{e}"),
        }
    }
}
