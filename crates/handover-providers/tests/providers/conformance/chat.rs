//! Non-streaming and transport cases: answers, error classes, one request per call.

use std::{sync::Arc, time::Duration};

use handover_providers::{
    CallOptions, ChatRequest, ErrorClass, FinishReason, Message, Provider, ProviderKind,
    TimeoutPhase,
};
use serde_json::{Value, json};
use wiremock::{
    Mock, MockServer, ResponseTemplate,
    matchers::{header, method, path},
};

use super::{
    base, request, sent_body, server_with,
    support::{self, Case, CountingGate, bodies, provider, raw},
};

pub(crate) async fn success_reports_answer(kind: Case) {
    let server = MockServer::start().await;
    let (auth, key) = support::auth_header(kind);
    Mock::given(method("POST"))
        .and(path(support::endpoint_path(kind)))
        .and(header(auth, key.as_str()))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("x-request-id", "req_8f3a")
                .set_body_json(bodies::success(kind)),
        )
        .expect(1)
        .mount(&server)
        .await;
    let gate = Arc::new(CountingGate::default());
    let p = provider(kind, &base(&server));
    let opts = CallOptions::default().with_send_counter(gate.clone());
    let resp = p
        .chat(&request().with_data_class("customer"), &opts)
        .await
        .unwrap();
    {
        let seen = gate.seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].provider, p.name());
        assert_eq!(seen[0].model, support::model_for(kind));
        assert_eq!(seen[0].data_class.as_deref(), Some("customer"));
        assert!(!seen[0].stream);
    }
    assert_eq!(
        resp.content.as_deref(),
        Some("Hello! How can I help you today?")
    );
    assert_eq!(resp.model, bodies::answering_model(kind));
    assert_eq!(resp.request_id.as_deref(), Some("req_8f3a"));
    assert_eq!(resp.finish_reason, Some(FinishReason::Stop));
    let usage = resp.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (16, 10));
    assert_eq!(usage.cached_input_tokens, Some(4));
    assert_eq!(gate.admitted(), 1);
    let body = sent_body(&server).await;
    if kind == ProviderKind::Gemini {
        // The model is in the path; the conversation is `contents`.
        assert_eq!(
            body["systemInstruction"],
            json!({"parts": [{"text": "be brief"}]})
        );
        assert_eq!(
            body["contents"],
            json!([{"role": "user", "parts": [{"text": "hello"}]}])
        );
        assert_eq!(body["generationConfig"]["maxOutputTokens"], 50);
        assert!(body.get("model").is_none() && body.get("user").is_none());
        server.verify().await;
        return;
    }
    assert_eq!(body["model"], support::model_for(kind));
    if kind.is_responses() {
        // The first system message is `instructions`; the rest are items.
        assert_eq!(body["instructions"], "be brief");
        assert_eq!(
            body["input"],
            json!([{"type": "message", "role": "user", "content": "hello"}])
        );
        assert_eq!(body["max_output_tokens"], 50);
        assert_eq!(body["user"], "user-42");
        assert_eq!(
            (&body["store"], &body["stream"]),
            (&json!(false), &json!(false))
        );
        assert!(body.get("messages").is_none() && body.get("max_tokens").is_none());
        server.verify().await;
        return;
    }
    assert_eq!(body["max_tokens"], 50);
    if kind == ProviderKind::Anthropic {
        let reqs = server.received_requests().await.unwrap();
        assert_eq!(reqs[0].headers["anthropic-version"], "2023-06-01");
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "be brief"}])
        );
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": [{"type": "text", "text": "hello"}]}])
        );
        assert_eq!(body["metadata"]["user_id"], "user-42");
        assert!(body.get("stream").is_none() && body.get("user").is_none());
        server.verify().await;
        return;
    }
    assert_eq!(body["stream"], false);
    assert_eq!(body["messages"][1]["content"], "hello");
    if kind == ProviderKind::DeepSeek {
        assert_eq!(body["user_id"], "user-42");
        assert!(body.get("user").is_none());
    } else {
        assert_eq!(body["user"], "user-42");
        assert!(body.get("user_id").is_none());
    }
    server.verify().await;
}

pub(crate) async fn model_override_is_sent(kind: Case) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(bodies::success(kind)))
        .expect(1)
        .mount(&server)
        .await;
    let p = provider(kind, &base(&server));
    p.chat(
        &request(),
        &CallOptions::default().with_model("other-model"),
    )
    .await
    .unwrap();
    let body = sent_body(&server).await;
    let url = server.received_requests().await.unwrap()[0].url.clone();
    if kind == ProviderKind::Gemini {
        assert_eq!(url.path(), "/v1/models/other-model:generateContent");
        return;
    }
    assert_eq!(body["model"], "other-model");
    if kind == ProviderKind::AzureOpenAi {
        // Azure names the model by its deployment, in the path.
        assert_eq!(
            url.path(),
            "/v1/openai/deployments/other-model/chat/completions"
        );
        assert_eq!(url.query(), Some("api-version=2024-10-21"));
    } else {
        assert_eq!(url.path(), support::endpoint_path(kind));
    }
}

/// (status, body, headers, expected class)
type ErrorCase = (u16, Value, Vec<(&'static str, &'static str)>, ErrorClass);

fn error_cases(kind: Case) -> Vec<ErrorCase> {
    if kind == ProviderKind::Anthropic {
        return anthropic_error_cases();
    }
    if kind == ProviderKind::Gemini {
        // Google sends the retry delay in the body (`RetryInfo`), not a header.
        return bodies::g_error_cases()
            .into_iter()
            .map(|(status, body, class)| (status, body, vec![], class))
            .collect();
    }
    vec![
        (
            429,
            bodies::error(
                "Rate limit reached for gpt-4o-mini in organization org-x on requests per min (RPM): Limit 3, Used 3, Requested 1.",
                Some("requests"),
                Some("rate_limit_exceeded"),
            ),
            vec![("retry-after", "20")],
            ErrorClass::RateLimited,
        ),
        (
            429,
            bodies::error("Rate Limit Reached", Some("rate_limit_error"), None),
            vec![],
            ErrorClass::RateLimited,
        ),
        (
            429,
            bodies::error(
                "You exceeded your current quota, please check your plan and billing details.",
                Some("insufficient_quota"),
                Some("insufficient_quota"),
            ),
            vec![],
            ErrorClass::QuotaExhausted,
        ),
        (
            503,
            bodies::error(
                "Server overloaded, please try again later",
                Some("server_error"),
                None,
            ),
            vec![],
            ErrorClass::Overloaded,
        ),
        (
            500,
            bodies::error(
                "The server had an error while processing your request. Sorry about that!",
                Some("server_error"),
                None,
            ),
            vec![],
            ErrorClass::ServerError,
        ),
        (
            502,
            json!("<html>Bad Gateway</html>"),
            vec![],
            ErrorClass::ServerError,
        ),
        (
            401,
            bodies::error(
                "Incorrect API key provided: sk-abc***xyz.",
                Some("invalid_request_error"),
                Some("invalid_api_key"),
            ),
            vec![],
            ErrorClass::Auth,
        ),
        (
            403,
            bodies::error(
                "Country, region, or territory not supported",
                Some("request_forbidden"),
                Some("unsupported_country_region_territory"),
            ),
            vec![],
            ErrorClass::Auth,
        ),
        (
            402,
            bodies::error(
                "Insufficient Balance",
                Some("unknown_error"),
                Some("invalid_request_error"),
            ),
            vec![],
            ErrorClass::Billing,
        ),
        (
            400,
            bodies::error(
                "Invalid value for 'temperature'",
                Some("invalid_request_error"),
                None,
            ),
            vec![],
            ErrorClass::InvalidRequest,
        ),
        (
            422,
            bodies::error("Invalid Parameters", Some("invalid_request_error"), None),
            vec![],
            ErrorClass::InvalidRequest,
        ),
        (
            400,
            bodies::error(
                "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
                Some("invalid_request_error"),
                Some("context_length_exceeded"),
            ),
            vec![],
            ErrorClass::ContextLengthExceeded,
        ),
        (
            400,
            bodies::error(
                "This model's maximum context length is 65536 tokens. However, you requested 70000 tokens.",
                Some("invalid_request_error"),
                Some("invalid_request_error"),
            ),
            vec![],
            ErrorClass::ContextLengthExceeded,
        ),
        (
            400,
            bodies::error(
                "Your request was rejected as a result of our safety system.",
                Some("invalid_request_error"),
                Some("content_policy_violation"),
            ),
            vec![],
            ErrorClass::ContentFiltered,
        ),
        (
            400,
            bodies::error("Content Exists Risk", Some("invalid_request_error"), None),
            vec![],
            ErrorClass::ContentFiltered,
        ),
    ]
}

/// Anthropic's documented errors: `{"type": "error", "error": {"type", "message"}}`.
fn anthropic_error_cases() -> Vec<ErrorCase> {
    let e = bodies::a_error;
    vec![
        (
            429,
            e(
                "rate_limit_error",
                "Number of request tokens has exceeded your per-minute rate limit",
            ),
            vec![("retry-after", "20")],
            ErrorClass::RateLimited,
        ),
        (
            529,
            e("overloaded_error", "Overloaded"),
            vec![],
            ErrorClass::Overloaded,
        ),
        (
            500,
            e("api_error", "Internal server error"),
            vec![],
            ErrorClass::ServerError,
        ),
        (
            502,
            json!("<html>Bad Gateway</html>"),
            vec![],
            ErrorClass::ServerError,
        ),
        (
            401,
            e("authentication_error", "invalid x-api-key"),
            vec![],
            ErrorClass::Auth,
        ),
        (
            403,
            e(
                "permission_error",
                "Your API key does not have permission to use the specified resource.",
            ),
            vec![],
            ErrorClass::Auth,
        ),
        (
            400,
            e(
                "invalid_request_error",
                "messages: text content blocks must be non-empty",
            ),
            vec![],
            ErrorClass::InvalidRequest,
        ),
        (
            404,
            e("not_found_error", "model: claude-nope"),
            vec![],
            ErrorClass::InvalidRequest,
        ),
        (
            413,
            e(
                "request_too_large",
                "Request exceeds the maximum allowed number of bytes.",
            ),
            vec![],
            ErrorClass::InvalidRequest,
        ),
        (
            400,
            e(
                "invalid_request_error",
                "prompt is too long: 208310 tokens > 200000 maximum",
            ),
            vec![],
            ErrorClass::ContextLengthExceeded,
        ),
        (
            400,
            e(
                "invalid_request_error",
                "input length and `max_tokens` exceed context limit: 198000 + 21333 > 200000, decrease input length or `max_tokens` and try again",
            ),
            vec![],
            ErrorClass::ContextLengthExceeded,
        ),
    ]
}

pub(crate) async fn error_statuses_are_classified_with_one_request_each(kind: Case, stream: bool) {
    for (status, body, headers, want) in error_cases(kind) {
        let mut t = match &body {
            Value::String(s) => ResponseTemplate::new(status).set_body_string(s.clone()),
            other => ResponseTemplate::new(status).set_body_json(other),
        };
        t = t.insert_header("x-request-id", "req_err");
        for (k, v) in &headers {
            t = t.insert_header(*k, *v);
        }
        let server = server_with(kind, t).await;
        let p = provider(kind, &base(&server));
        let err = if stream {
            p.chat_stream(&request(), &CallOptions::default())
                .await
                .unwrap_err()
        } else {
            p.chat(&request(), &CallOptions::default())
                .await
                .unwrap_err()
        };
        assert_eq!(err.class(), want, "status {status}: {err}");
        assert_eq!(err.status(), Some(status));
        assert!(err.was_sent());
        assert_eq!(err.request_id(), Some("req_err"));
        assert_eq!(err.is_retryable(), want.is_retryable());
        let retry_info = body.to_string().contains("RetryInfo");
        if headers.is_empty() && !retry_info {
            assert_eq!(err.retry_after(), None);
        } else {
            assert_eq!(err.retry_after(), Some(Duration::from_secs(20)));
        }
        if let Value::Object(_) = body {
            let code = match kind.kind {
                ProviderKind::Gemini => bodies::g_error_code(&body),
                _ => body["error"]["code"].as_str(),
            };
            assert_eq!(err.provider_code(), code, "status {status}");
        }
        assert_eq!(
            server.received_requests().await.unwrap().len(),
            1,
            "status {status}"
        );
        server.verify().await;
    }
}

pub(crate) async fn first_byte_timeout_sends_once(kind: Case) {
    let server = server_with(
        kind,
        ResponseTemplate::new(200)
            .set_body_json(bodies::success(kind))
            .set_delay(Duration::from_secs(3)),
    )
    .await;
    let p = provider(kind, &base(&server));
    let mut t = support::relaxed();
    t.first_byte = Duration::from_millis(150);
    let started = std::time::Instant::now();
    let err = p
        .chat(&request(), &CallOptions::default().with_timeouts(t))
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(err.class(), ErrorClass::Timeout);
    assert_eq!(err.timeout_phase(), Some(TimeoutPhase::FirstByte));
    assert!(err.was_sent());
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

pub(crate) async fn dropped_connection_sends_once(kind: Case, stream: bool) {
    // Reads the request, then closes without answering.
    let server = raw::serve(|sock| async move { drop(sock) }).await;
    let p = provider(kind, &server.base);
    let gate = Arc::new(CountingGate::default());
    let opts = CallOptions::default().with_send_counter(gate.clone());
    let err = if stream {
        p.chat_stream(&request(), &opts).await.unwrap_err()
    } else {
        p.chat(&request(), &opts).await.unwrap_err()
    };
    assert_eq!(err.class(), ErrorClass::ConnectionLost, "{err}");
    assert!(err.was_sent());
    assert!(err.is_retryable());
    assert_eq!(server.requests(), 1);
    assert_eq!((gate.admitted(), gate.refunded()), (1, 0));
}

pub(crate) async fn connect_refused_is_not_sent(kind: Case) {
    // Bound but not listening, and held: refused, and no other test's
    // server can take the port meanwhile.
    let closed = tokio::net::TcpSocket::new_v4().unwrap();
    closed.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = closed.local_addr().unwrap();
    let p = provider(kind, &format!("http://{addr}/v1"));
    let gate = Arc::new(CountingGate::default());
    let opts = CallOptions::default().with_send_counter(gate.clone());
    let err = p.chat(&request(), &opts).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::ConnectBeforeSend, "{err}");
    assert!(!err.was_sent());
    assert_eq!((gate.admitted(), gate.refunded()), (1, 1));
}

pub(crate) async fn send_gate_refusal_sends_nothing(kind: Case) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(bodies::success(kind)))
        .expect(0)
        .mount(&server)
        .await;
    let p = provider(kind, &base(&server));
    let gate = CountingGate::limited(0);
    let opts = CallOptions::default().with_send_counter(gate.clone());
    let err = p.chat(&request(), &opts).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::SendRefused);
    assert!(!err.was_sent());
    let err = p.chat_stream(&request(), &opts).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::SendRefused);
    assert_eq!(gate.seen.lock().unwrap().len(), 2);
    assert!(gate.seen.lock().unwrap()[1].stream);
    server.verify().await;
}

pub(crate) async fn invalid_request_sends_nothing(kind: Case) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .expect(0)
        .mount(&server)
        .await;
    let p = provider(kind, &base(&server));
    let err = p
        .chat(&ChatRequest::new(vec![]), &CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::InvalidRequest);
    assert!(!err.was_sent());
    assert!(err.to_string().contains("messages"), "{err}");
    let bad = ChatRequest::new(vec![Message::user("x"), Message::tool_result("", "42")]);
    let err = p
        .chat_stream(&bad, &CallOptions::default())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("messages[1].tool_call_id"),
        "{err}"
    );
    server.verify().await;
}

pub(crate) async fn undecodable_success_body_is_decode_error(kind: Case) {
    let server = server_with(
        kind,
        ResponseTemplate::new(200).set_body_string("{\"choices\": ["),
    )
    .await;
    let p = provider(kind, &base(&server));
    let err = p
        .chat(&request(), &CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Decode);
    assert!(!err.is_retryable());
    server.verify().await;
}

pub(crate) async fn blank_lines_before_json_body_are_tolerated(kind: Case) {
    let body = format!("\n\n\n{}", bodies::success(kind));
    let server = server_with(kind, ResponseTemplate::new(200).set_body_string(body)).await;
    let p = provider(kind, &base(&server));
    let resp = p.chat(&request(), &CallOptions::default()).await.unwrap();
    assert_eq!(resp.finish_reason, Some(FinishReason::Stop));
}

/// A history whose tool call carries members Handover does not read
/// (Gemini's signature under `extra_content.google`, another vendor's
/// share of `extra_content`, vendor fields on the call and its function):
/// sent by every kind in one request, each member where its wire format
/// has a place. OpenAI-compatible endpoints get the call as sent; OpenAI,
/// Azure and DeepSeek the same but Google's signature; native Gemini the
/// signature on the call's part; Anthropic and the Responses API none of
/// it (no place for it), without refusing the request.
pub(crate) async fn tool_call_members_follow_the_wire_format(kind: Case) {
    let server = server_with(
        kind,
        ResponseTemplate::new(200).set_body_json(bodies::success(kind)),
    );
    let server = server.await;
    let call_json = json!({"id": "call_1", "type": "function",
        "function": {"name": "ship", "arguments": "{\"order\":\"K-701\"}", "x_fn": 1},
        "extra_content": {"google": {"thought_signature": "SIG_1"}, "other": {"k": 1}},
        "x_tc_field": "TC"});
    let call: handover_providers::ToolCall = serde_json::from_value(call_json.clone()).unwrap();
    let req = ChatRequest::new(vec![
        Message::user("ship K-701"),
        Message::assistant_tool_calls(None, vec![call]),
        Message::tool_result("call_1", "shipped"),
    ]);
    provider(kind, &base(&server))
        .chat(&req, &CallOptions::default())
        .await
        .unwrap();
    let body = sent_body(&server).await;
    let text = body.to_string();
    if kind == ProviderKind::OpenAiCompatible {
        assert_eq!(body["messages"][1]["tool_calls"][0], call_json);
    } else if [
        ProviderKind::OpenAi,
        ProviderKind::AzureOpenAi,
        ProviderKind::DeepSeek,
    ]
    .iter()
    .any(|k| kind == *k)
    {
        let mut without = call_json;
        without["extra_content"] = json!({"other": {"k": 1}});
        assert_eq!(body["messages"][1]["tool_calls"][0], without);
    } else if kind == ProviderKind::Gemini {
        let part = &body["contents"][1]["parts"][0];
        assert_eq!(
            part,
            &json!({"functionCall": {"name": "ship", "args": {"order": "K-701"}},
                    "thoughtSignature": "SIG_1"})
        );
        assert!(!text.contains("TC") && !text.contains("x_fn"), "{text}");
    } else {
        assert!(
            !text.contains("SIG_1") && !text.contains("TC") && !text.contains("x_fn"),
            "{text}"
        );
        assert!(text.contains("K-701"), "{text}");
    }
}
