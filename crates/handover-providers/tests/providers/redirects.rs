//! A provider that answers with a redirect: the redirect is not followed.
//! Its own binary, apart from `secrets.rs`, whose log capture a test
//! emitting spans on another thread would disturb.

use crate::support;

use handover_providers::{CallOptions, ChatRequest, Message, Provider, ProviderKind};
use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};

/// A provider that answers with a redirect: not followed. Following it
/// would carry a key that lives in its own header (`x-api-key`,
/// `x-goog-api-key`) to another host and send the request a second time
/// past the send counter; the redirect is the provider's failed answer.
#[tokio::test]
async fn a_redirect_is_a_failed_answer_and_nothing_reaches_its_target() {
    for kind in [
        ProviderKind::Anthropic,
        ProviderKind::Gemini,
        ProviderKind::OpenAi,
    ] {
        let elsewhere = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200))
            .mount(&elsewhere)
            .await;
        let provider_server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(307)
                    .insert_header("location", format!("{}/v1/steal", elsewhere.uri())),
            )
            .mount(&provider_server)
            .await;
        let p = support::provider(kind, &format!("{}/v1", provider_server.uri()));
        let req = ChatRequest::new(vec![Message::user("Hello!")]);
        let err = p.chat(&req, &CallOptions::default()).await.unwrap_err();
        assert!(err.was_sent(), "{kind:?}: {err}");
        let stolen = elsewhere.received_requests().await.unwrap();
        assert!(
            stolen.is_empty(),
            "{kind:?}: the redirect was followed: {stolen:?}"
        );
        assert_eq!(
            provider_server.received_requests().await.unwrap().len(),
            1,
            "{kind:?}: one request"
        );
    }
}
