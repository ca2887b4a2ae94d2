//! One conformance suite, run against every adapter kind on wiremock (and
//! the raw TCP server for a dropped connection). Each case counts the HTTP
//! requests the mock actually received.

mod support;

use std::{sync::Arc, time::Duration};

use futures::StreamExt;
use handover_providers::{
    CallOptions, ChatRequest, ErrorClass, FinishReason, Message, Provider, ProviderError,
    ProviderKind, StreamAssembler, StreamEvent, TimeoutPhase, Tool, ToolCall,
};
use serde_json::{Value, json};
use support::{CountingGate, bodies, provider, raw};
use wiremock::{
    Mock, MockServer, ResponseTemplate,
    matchers::{header, method, path},
};

fn request() -> ChatRequest {
    ChatRequest::new(vec![Message::system("be brief"), Message::user("hello")])
        .with_max_tokens(50)
        .with_user("user-42")
}

async fn server_with(template: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(template)
        .expect(1)
        .mount(&server)
        .await;
    server
}

fn base(server: &MockServer) -> String {
    format!("{}/v1", server.uri())
}

fn sse(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .insert_header("x-request-id", "req_stream_1")
        .set_body_string(body)
}

async fn sent_body(server: &MockServer) -> Value {
    let reqs = server.received_requests().await.unwrap();
    assert_eq!(reqs.len(), 1, "exactly one HTTP request");
    serde_json::from_slice(&reqs[0].body).unwrap()
}

async fn collect(
    stream: handover_providers::ChatStream,
) -> Vec<Result<StreamEvent, ProviderError>> {
    stream.collect().await
}

async fn success_reports_answer(kind: ProviderKind) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header(
            "authorization",
            format!("Bearer {}", support::KEY).as_str(),
        ))
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
    let opts = CallOptions::default().with_send_gate(gate.clone());
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
    assert_eq!(body["model"], support::model_for(kind));
    assert_eq!(body["stream"], false);
    assert_eq!(body["messages"][1]["content"], "hello");
    assert_eq!(body["max_tokens"], 50);
    if kind == ProviderKind::DeepSeek {
        assert_eq!(body["user_id"], "user-42");
        assert!(body.get("user").is_none());
    } else {
        assert_eq!(body["user"], "user-42");
        assert!(body.get("user_id").is_none());
    }
    server.verify().await;
}

async fn model_override_is_sent(kind: ProviderKind) {
    let server = server_with(ResponseTemplate::new(200).set_body_json(bodies::success(kind))).await;
    let p = provider(kind, &base(&server));
    p.chat(
        &request(),
        &CallOptions::default().with_model("other-model"),
    )
    .await
    .unwrap();
    assert_eq!(sent_body(&server).await["model"], "other-model");
}

/// (status, body, headers, expected class)
type ErrorCase = (u16, Value, Vec<(&'static str, &'static str)>, ErrorClass);

fn error_cases() -> Vec<ErrorCase> {
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

async fn error_statuses_are_classified_with_one_request_each(kind: ProviderKind, stream: bool) {
    for (status, body, headers, want) in error_cases() {
        let mut t = match &body {
            Value::String(s) => ResponseTemplate::new(status).set_body_string(s.clone()),
            other => ResponseTemplate::new(status).set_body_json(other),
        };
        t = t.insert_header("x-request-id", "req_err");
        for (k, v) in &headers {
            t = t.insert_header(*k, *v);
        }
        let server = server_with(t).await;
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
        if headers.is_empty() {
            assert_eq!(err.retry_after(), None);
        } else {
            assert_eq!(err.retry_after(), Some(Duration::from_secs(20)));
        }
        if let Value::Object(_) = body {
            assert_eq!(
                err.provider_code(),
                body["error"]["code"].as_str(),
                "status {status}"
            );
        }
        assert_eq!(
            server.received_requests().await.unwrap().len(),
            1,
            "status {status}"
        );
        server.verify().await;
    }
}

async fn first_byte_timeout_sends_once(kind: ProviderKind) {
    let server = server_with(
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

async fn dropped_connection_sends_once(kind: ProviderKind, stream: bool) {
    // Reads the request, then closes without answering.
    let server = raw::serve(|sock| async move { drop(sock) }).await;
    let p = provider(kind, &server.base);
    let gate = Arc::new(CountingGate::default());
    let opts = CallOptions::default().with_send_gate(gate.clone());
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

async fn connect_refused_is_not_sent(kind: ProviderKind) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let p = provider(kind, &format!("http://{addr}/v1"));
    let gate = Arc::new(CountingGate::default());
    let opts = CallOptions::default().with_send_gate(gate.clone());
    let err = p.chat(&request(), &opts).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::ConnectBeforeSend, "{err}");
    assert!(!err.was_sent());
    assert_eq!((gate.admitted(), gate.refunded()), (1, 1));
}

async fn send_gate_refusal_sends_nothing(kind: ProviderKind) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(bodies::success(kind)))
        .expect(0)
        .mount(&server)
        .await;
    let p = provider(kind, &base(&server));
    let gate = CountingGate::limited(0);
    let opts = CallOptions::default().with_send_gate(gate.clone());
    let err = p.chat(&request(), &opts).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::SendRefused);
    assert!(!err.was_sent());
    let err = p.chat_stream(&request(), &opts).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::SendRefused);
    assert_eq!(gate.seen.lock().unwrap().len(), 2);
    assert!(gate.seen.lock().unwrap()[1].stream);
    server.verify().await;
}

async fn invalid_request_sends_nothing(kind: ProviderKind) {
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

async fn undecodable_success_body_is_decode_error(kind: ProviderKind) {
    let server = server_with(ResponseTemplate::new(200).set_body_string("{\"choices\": [")).await;
    let p = provider(kind, &base(&server));
    let err = p
        .chat(&request(), &CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Decode);
    assert!(!err.is_retryable());
    server.verify().await;
}

async fn blank_lines_before_json_body_are_tolerated(kind: ProviderKind) {
    let body = format!("\n\n\n{}", bodies::success(kind));
    let server = server_with(ResponseTemplate::new(200).set_body_string(body)).await;
    let p = provider(kind, &base(&server));
    let resp = p.chat(&request(), &CallOptions::default()).await.unwrap();
    assert_eq!(resp.finish_reason, Some(FinishReason::Stop));
}

async fn stream_with_keepalives_assembles(kind: ProviderKind) {
    let server = server_with(sse(bodies::text_stream(kind, true))).await;
    let p = provider(kind, &base(&server));
    let stream = p
        .chat_stream(&request(), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(stream.request_id(), Some("req_stream_1"));
    let resp = stream.into_response().await.unwrap();
    assert_eq!(resp.content.as_deref(), Some("Hello world"));
    assert_eq!(resp.model, bodies::answering_model(kind));
    assert_eq!(resp.finish_reason, Some(FinishReason::Stop));
    assert_eq!(
        resp.usage.map(|u| (u.input_tokens, u.output_tokens)),
        Some((16, 3))
    );
    assert_eq!(resp.request_id.as_deref(), Some("req_stream_1"));
    let body = sent_body(&server).await;
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
}

async fn stream_without_done_but_finished_is_complete(kind: ProviderKind) {
    let server = server_with(sse(bodies::text_stream(kind, false))).await;
    let p = provider(kind, &base(&server));
    let stream = p
        .chat_stream(&request(), &CallOptions::default())
        .await
        .unwrap();
    let resp = stream.into_response().await.unwrap();
    assert_eq!(resp.content.as_deref(), Some("Hello world"));
    assert_eq!(resp.finish_reason, Some(FinishReason::Stop));
}

async fn stream_without_done_or_finish_is_interrupted(kind: ProviderKind) {
    let body = format!(
        "{}{}",
        bodies::chunk(kind, json!({"role": "assistant", "content": "Hel"}), None),
        bodies::chunk(kind, json!({"content": "lo"}), None)
    );
    let server = server_with(sse(body)).await;
    let p = provider(kind, &base(&server));
    let stream = p
        .chat_stream(&request(), &CallOptions::default())
        .await
        .unwrap();
    let items = collect(stream).await;
    let last = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(last.class(), ErrorClass::StreamInterrupted);
    assert_eq!(last.partial_events(), Some(2));
    let mut partial = StreamAssembler::default();
    for ev in items.into_iter().filter_map(Result::ok) {
        partial.push(ev);
    }
    assert!(!partial.is_complete());
    assert_eq!(partial.finish("m", None).content.as_deref(), Some("Hello"));
}

async fn error_event_in_200_stream_is_an_error(kind: ProviderKind) {
    let body = format!(
        "{}data: {}\n\n",
        bodies::chunk(kind, json!({"role": "assistant", "content": "Hel"}), None),
        bodies::error(
            "Rate limit reached",
            Some("rate_limit_error"),
            Some("rate_limit_exceeded")
        )
    );
    let server = server_with(sse(body)).await;
    let p = provider(kind, &base(&server));
    let stream = p
        .chat_stream(&request(), &CallOptions::default())
        .await
        .unwrap();
    let items = collect(stream).await;
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.class(), ErrorClass::RateLimited, "{err}");
    assert_eq!(err.provider_code(), Some("rate_limit_exceeded"));
    assert_eq!(err.partial_events(), Some(2));
    assert_eq!(err.request_id(), Some("req_stream_1"));
}

async fn malformed_event_is_typed_and_skippable(kind: ProviderKind) {
    let body = format!(
        "{}data: {{not json\n\n{}{}data: [DONE]\n\n",
        bodies::chunk(kind, json!({"role": "assistant", "content": "Hel"}), None),
        bodies::chunk(kind, json!({"content": "lo"}), None),
        bodies::chunk(kind, json!({}), Some("stop")),
    );
    let server = server_with(sse(body)).await;
    let p = provider(kind, &base(&server));
    let mut stream = p
        .chat_stream(&request(), &CallOptions::default())
        .await
        .unwrap();
    let mut a = StreamAssembler::default();
    let mut malformed = 0;
    while let Some(item) = stream.next().await {
        match item {
            Ok(ev) => a.push(ev),
            Err(e) => {
                assert_eq!(e.class(), ErrorClass::MalformedStream);
                assert_eq!(e.partial_events(), Some(2));
                malformed += 1;
            }
        }
    }
    assert_eq!(malformed, 1);
    assert_eq!(a.finish("m", None).content.as_deref(), Some("Hello"));
    // The plain assembler refuses a stream with a malformed event.
    let server = server_with(sse(format!(
        "data: {{not json\n\n{}",
        bodies::text_stream(kind, true)
    )))
    .await;
    let p = provider(kind, &base(&server));
    let stream = p
        .chat_stream(&request(), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(
        stream.into_response().await.unwrap_err().class(),
        ErrorClass::MalformedStream
    );
}

async fn tool_call_deltas_assemble(kind: ProviderKind) {
    let tc = |index: u32, id: Option<&str>, name: Option<&str>, args: &str| {
        let mut f = json!({"arguments": args});
        if let Some(n) = name {
            f["name"] = json!(n);
        }
        let mut c = json!({"index": index, "function": f});
        if let Some(id) = id {
            c["id"] = json!(id);
            c["type"] = json!("function");
        }
        c
    };
    let body = [
        bodies::chunk(kind, json!({"role": "assistant", "content": null, "tool_calls": [tc(0, Some("call_a"), Some("create_shipment"), "")]}), None),
        bodies::chunk(kind, json!({"tool_calls": [tc(0, None, None, "{\"order\":")]}), None),
        bodies::chunk(kind, json!({"tool_calls": [tc(1, Some("call_b"), Some("notify"), "{\"to\":")]}), None),
        bodies::chunk(kind, json!({"tool_calls": [tc(0, None, None, "\"K-701\"}")]}), None),
        bodies::chunk(kind, json!({"tool_calls": [tc(1, None, None, "\"ops\"}")]}), None),
        bodies::chunk(kind, json!({}), Some("tool_calls")),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let server = server_with(sse(body)).await;
    let p = provider(kind, &base(&server));
    let req = request().with_tools(vec![Tool {
        name: "create_shipment".into(),
        description: Some("Create a replacement shipment".into()),
        parameters: json!({"type": "object", "properties": {"order": {"type": "string"}}}),
    }]);
    let resp = p
        .chat_stream(&req, &CallOptions::default())
        .await
        .unwrap()
        .into_response()
        .await
        .unwrap();
    assert_eq!(resp.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(
        resp.tool_calls,
        vec![
            ToolCall {
                id: "call_a".into(),
                name: "create_shipment".into(),
                arguments: "{\"order\":\"K-701\"}".into()
            },
            ToolCall {
                id: "call_b".into(),
                name: "notify".into(),
                arguments: "{\"to\":\"ops\"}".into()
            },
        ]
    );
    let body = sent_body(&server).await;
    assert_eq!(body["tools"][0]["function"]["name"], "create_shipment");
    assert_eq!(body["tools"][0]["type"], "function");
}

async fn non_streaming_tool_calls_and_reasoning(kind: ProviderKind) {
    let server =
        server_with(ResponseTemplate::new(200).set_body_json(bodies::tool_call_response(kind)))
            .await;
    let p = provider(kind, &base(&server));
    let resp = p.chat(&request(), &CallOptions::default()).await.unwrap();
    assert_eq!(resp.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(resp.tool_calls[0].id, "call_abc123");
    assert_eq!(resp.tool_calls[0].arguments, "{\"order\":\"K-701\"}");
    assert_eq!(
        resp.reasoning_content.as_deref(),
        Some("The user wants a shipment; call the tool.")
    );
    assert_eq!(resp.content, None);
}

async fn stream_error_status_sends_once(kind: ProviderKind) {
    let server = server_with(
        ResponseTemplate::new(429)
            .insert_header("retry-after", "2")
            .set_body_json(bodies::error(
                "Rate limit reached",
                Some("requests"),
                Some("rate_limit_exceeded"),
            )),
    )
    .await;
    let p = provider(kind, &base(&server));
    let err = p
        .chat_stream(&request(), &CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::RateLimited);
    assert_eq!(err.retry_after(), Some(Duration::from_secs(2)));
    server.verify().await;
}

macro_rules! conformance {
    ($($module:ident => $kind:expr),* $(,)?) => {$(
        mod $module {
            use super::*;
            const KIND: ProviderKind = $kind;

            #[tokio::test] async fn success_reports_answer() { super::success_reports_answer(KIND).await }
            #[tokio::test] async fn model_override_is_sent() { super::model_override_is_sent(KIND).await }
            #[tokio::test] async fn error_statuses_chat() { super::error_statuses_are_classified_with_one_request_each(KIND, false).await }
            #[tokio::test] async fn error_statuses_stream() { super::error_statuses_are_classified_with_one_request_each(KIND, true).await }
            #[tokio::test] async fn first_byte_timeout_sends_once() { super::first_byte_timeout_sends_once(KIND).await }
            #[tokio::test] async fn dropped_connection_chat() { super::dropped_connection_sends_once(KIND, false).await }
            #[tokio::test] async fn dropped_connection_stream() { super::dropped_connection_sends_once(KIND, true).await }
            #[tokio::test] async fn connect_refused_is_not_sent() { super::connect_refused_is_not_sent(KIND).await }
            #[tokio::test] async fn send_gate_refusal_sends_nothing() { super::send_gate_refusal_sends_nothing(KIND).await }
            #[tokio::test] async fn invalid_request_sends_nothing() { super::invalid_request_sends_nothing(KIND).await }
            #[tokio::test] async fn undecodable_success_body() { super::undecodable_success_body_is_decode_error(KIND).await }
            #[tokio::test] async fn blank_lines_before_json_body() { super::blank_lines_before_json_body_are_tolerated(KIND).await }
            #[tokio::test] async fn stream_with_keepalives() { super::stream_with_keepalives_assembles(KIND).await }
            #[tokio::test] async fn stream_without_done_but_finished() { super::stream_without_done_but_finished_is_complete(KIND).await }
            #[tokio::test] async fn stream_without_done_or_finish() { super::stream_without_done_or_finish_is_interrupted(KIND).await }
            #[tokio::test] async fn error_event_in_200_stream() { super::error_event_in_200_stream_is_an_error(KIND).await }
            #[tokio::test] async fn malformed_event() { super::malformed_event_is_typed_and_skippable(KIND).await }
            #[tokio::test] async fn tool_call_deltas() { super::tool_call_deltas_assemble(KIND).await }
            #[tokio::test] async fn non_streaming_tool_calls() { super::non_streaming_tool_calls_and_reasoning(KIND).await }
            #[tokio::test] async fn stream_error_status_sends_once() { super::stream_error_status_sends_once(KIND).await }
        }
    )*};
}

conformance!(
    openai => ProviderKind::OpenAi,
    deepseek => ProviderKind::DeepSeek,
    openai_compatible => ProviderKind::OpenAiCompatible,
);
