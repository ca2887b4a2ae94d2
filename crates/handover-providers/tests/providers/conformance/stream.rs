//! Streaming cases: keep-alives, completion without `[DONE]`, interruption, in-stream errors, malformed events, tool-call deltas.

use std::time::Duration;

use futures::StreamExt;
use handover_providers::ProviderError;
use handover_providers::{
    CallOptions, ErrorClass, FinishReason, Provider, ProviderKind, StreamAssembler, StreamEvent,
    TimeoutPhase, Tool, ToolCall,
};
use serde_json::json;
use wiremock::ResponseTemplate;

use super::{
    base, collect, request, sent_body, server_with, sse,
    support::{self, Case, bodies, provider, raw},
};

pub(crate) async fn stream_with_keepalives_assembles(kind: Case) {
    let server = server_with(kind, sse(bodies::text_stream(kind, true))).await;
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
    if kind == ProviderKind::Gemini {
        // Gemini streams by method and `alt=sse`, always with usage.
        let url = server.received_requests().await.unwrap()[0].url.clone();
        assert_eq!(url.path(), support::stream_path(kind, true));
        assert_eq!(url.query(), Some("alt=sse"));
        assert!(body.get("stream").is_none());
        return;
    }
    assert_eq!(body["stream"], true);
    if kind == ProviderKind::Anthropic || kind.is_responses() {
        // Anthropic and the Responses API always stream usage; Chat
        // Completions must be asked.
        assert!(body.get("stream_options").is_none());
    } else {
        assert_eq!(body["stream_options"]["include_usage"], true);
    }
}

pub(crate) async fn stream_without_done_but_finished_is_complete(kind: Case) {
    let server = server_with(kind, sse(bodies::text_stream(kind, false))).await;
    let p = provider(kind, &base(&server));
    let stream = p
        .chat_stream(&request(), &CallOptions::default())
        .await
        .unwrap();
    let resp = stream.into_response().await.unwrap();
    assert_eq!(resp.content.as_deref(), Some("Hello world"));
    assert_eq!(resp.finish_reason, Some(FinishReason::Stop));
}

pub(crate) async fn stream_without_done_or_finish_is_interrupted(kind: Case) {
    let (body, events) = bodies::partial_text(kind);
    let server = server_with(kind, sse(body)).await;
    let p = provider(kind, &base(&server));
    let stream = p
        .chat_stream(&request(), &CallOptions::default())
        .await
        .unwrap();
    let items = collect(stream).await;
    let last = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(last.class(), ErrorClass::StreamInterrupted);
    assert_eq!(last.partial_events(), Some(events));
    let mut partial = StreamAssembler::default();
    for ev in items.into_iter().filter_map(Result::ok) {
        partial.push(ev);
    }
    assert!(!partial.is_complete());
    assert_eq!(partial.finish("m", None).content.as_deref(), Some("Hello"));
}

pub(crate) async fn error_event_in_200_stream_is_an_error(kind: Case) {
    let (start, events) = bodies::partial_text(kind);
    let (error, class, code) = bodies::stream_error(kind);
    let server = server_with(kind, sse(format!("{start}{error}"))).await;
    let p = provider(kind, &base(&server));
    let stream = p
        .chat_stream(&request(), &CallOptions::default())
        .await
        .unwrap();
    let items = collect(stream).await;
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.class(), class, "{err}");
    assert_eq!(err.provider_code(), code);
    assert_eq!(err.partial_events(), Some(events + 1));
    assert_eq!(err.request_id(), Some("req_stream_1"));
    // The text before the break is kept as partial output, never a success.
    let text: String = items
        .iter()
        .filter_map(|i| match i {
            Ok(StreamEvent::ContentDelta(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Hello");
}

pub(crate) async fn malformed_event_is_typed_and_skippable(kind: Case) {
    let (start, events) = bodies::partial_text(kind);
    let body = format!(
        "{start}data: {{not json\n\n{}",
        bodies::finish_and_done(kind)
    );
    let server = server_with(kind, sse(body)).await;
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
                assert_eq!(e.partial_events(), Some(events + 1));
                malformed += 1;
            }
        }
    }
    assert_eq!(malformed, 1);
    assert_eq!(a.finish("m", None).content.as_deref(), Some("Hello"));
    // The plain assembler refuses a stream with a malformed event.
    let server = server_with(
        kind,
        sse(format!(
            "data: {{not json\n\n{}",
            bodies::text_stream(kind, true)
        )),
    )
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

pub(crate) async fn tool_call_deltas_assemble(kind: Case) {
    let body = bodies::tool_stream(kind);
    let server = server_with(kind, sse(body)).await;
    let p = provider(kind, &base(&server));
    let req = request().with_tools(vec![Tool::function(
        "create_shipment",
        Some("Create a replacement shipment".into()),
        json!({"type": "object", "properties": {"order": {"type": "string"}}}),
    )]);
    let resp = p
        .chat_stream(&req, &CallOptions::default())
        .await
        .unwrap()
        .into_response()
        .await
        .unwrap();
    assert_eq!(resp.finish_reason, Some(FinishReason::ToolCalls));
    let mut calls = resp.tool_calls.clone();
    if kind == ProviderKind::Gemini {
        // Gemini sends no ids: they are derived, distinct, OpenAI-like.
        assert!(calls.iter().all(|c| c.id.starts_with("call_")));
        assert_ne!(calls[0].id, calls[1].id);
        calls[0].id = "call_a".into();
        calls[1].id = "call_b".into();
    }
    assert_eq!(
        calls,
        vec![
            ToolCall {
                id: "call_a".into(),
                name: "create_shipment".into(),
                arguments: "{\"order\":\"K-701\"}".into(),
                ..ToolCall::default()
            },
            ToolCall {
                id: "call_b".into(),
                name: "notify".into(),
                arguments: "{\"to\":\"ops\"}".into(),
                ..ToolCall::default()
            },
        ]
    );
    let body = sent_body(&server).await;
    if kind == ProviderKind::Gemini {
        let decl = &body["tools"][0]["functionDeclarations"][0];
        assert_eq!(decl["name"], "create_shipment");
        assert_eq!(
            decl["parametersJsonSchema"]["properties"]["order"]["type"],
            "string"
        );
    } else if kind == ProviderKind::Anthropic {
        assert_eq!(body["tools"][0]["name"], "create_shipment");
        assert_eq!(
            body["tools"][0]["input_schema"]["properties"]["order"]["type"],
            "string"
        );
    } else if kind.is_responses() {
        // Flat function tools, non-strict as Chat Completions' default is.
        assert_eq!(body["tools"][0]["name"], "create_shipment");
        assert_eq!(body["tools"][0]["type"], "function");
        assert_eq!(body["tools"][0]["strict"], false);
        assert!(body["tools"][0].get("function").is_none());
    } else {
        assert_eq!(body["tools"][0]["function"]["name"], "create_shipment");
        assert_eq!(body["tools"][0]["type"], "function");
    }
}

pub(crate) async fn non_streaming_tool_calls_and_reasoning(kind: Case) {
    let server = server_with(
        kind,
        ResponseTemplate::new(200).set_body_json(bodies::tool_call_response(kind)),
    )
    .await;
    let p = provider(kind, &base(&server));
    let resp = p.chat(&request(), &CallOptions::default()).await.unwrap();
    assert_eq!(resp.finish_reason, Some(FinishReason::ToolCalls));
    if kind == ProviderKind::Gemini {
        assert!(resp.tool_calls[0].id.starts_with("call_"));
    } else {
        assert_eq!(resp.tool_calls[0].id, bodies::tool_call_id(kind));
    }
    assert_eq!(resp.tool_calls[0].arguments, "{\"order\":\"K-701\"}");
    assert_eq!(
        resp.reasoning_content.as_deref(),
        Some("The user wants a shipment; call the tool.")
    );
    assert_eq!(resp.content, None);
}

pub(crate) async fn stream_error_status_sends_once(kind: Case) {
    let server = server_with(
        kind,
        ResponseTemplate::new(429)
            .insert_header("retry-after", "2")
            .set_body_json(match kind.kind {
                ProviderKind::Anthropic => bodies::a_error("rate_limit_error", "Rate limited"),
                // The header wins over the body's `RetryInfo`.
                ProviderKind::Gemini => bodies::g_error(
                    429,
                    "RESOURCE_EXHAUSTED",
                    "Resource has been exhausted (e.g. check quota).",
                    bodies::g_retry_20s(),
                ),
                _ => bodies::error(
                    "Rate limit reached",
                    Some("requests"),
                    Some("rate_limit_exceeded"),
                ),
            }),
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

/// Drains a stream from the raw server; returns the text and the end.
async fn drain_raw(kind: Case, base: &str) -> (String, Result<(), ProviderError>) {
    let p = provider(kind, base);
    let opts = CallOptions::default().with_timeouts(support::tight());
    let mut s = p.chat_stream(&request(), &opts).await.unwrap();
    let mut text = String::new();
    while let Some(item) = s.next().await {
        match item {
            Ok(StreamEvent::ContentDelta(t)) => text.push_str(&t),
            Ok(_) => {}
            Err(e) => return (text, Err(e)),
        }
    }
    (text, Ok(()))
}

/// After some text, only keep-alives (comments; Anthropic `ping` events)
/// arrive, faster than the idle limit: the idle deadline still fires.
pub(crate) async fn keep_alives_are_not_progress(kind: Case) {
    let server = raw::serve(move |mut sock| async move {
        raw::sse_head(&mut sock).await;
        raw::write(&mut sock, &bodies::partial_text(kind).0).await;
        let mut tick = tokio::time::interval(Duration::from_millis(300));
        loop {
            tick.tick().await;
            raw::write(&mut sock, &bodies::keep_alive(kind)).await;
        }
    })
    .await;
    let started = tokio::time::Instant::now();
    let (text, end) = drain_raw(kind, &server.base).await;
    let err = end.unwrap_err();
    assert_eq!(err.class(), ErrorClass::StreamStalled, "{err}");
    assert_eq!(err.timeout_phase(), Some(TimeoutPhase::Idle));
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_secs(1) && elapsed < Duration::from_millis(1100),
        "{elapsed:?}"
    );
    assert_eq!(text, "Hello");
    assert_eq!(server.requests(), 1);
}

/// Headers, then nothing but keep-alives: the first-token deadline fires.
pub(crate) async fn stalled_stream_times_out(kind: Case) {
    let server = raw::serve(move |mut sock| async move {
        raw::sse_head(&mut sock).await;
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        loop {
            tick.tick().await;
            raw::write(&mut sock, &bodies::keep_alive(kind)).await;
        }
    })
    .await;
    let started = tokio::time::Instant::now();
    let (text, end) = drain_raw(kind, &server.base).await;
    let err = end.unwrap_err();
    assert_eq!(err.timeout_phase(), Some(TimeoutPhase::FirstToken), "{err}");
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_secs(2) && elapsed < Duration::from_millis(2100),
        "{elapsed:?}"
    );
    assert!(text.is_empty());
    assert_eq!(server.requests(), 1);
}

/// Some text, then the connection closes: interrupted, never a success.
pub(crate) async fn cut_stream_is_interrupted(kind: Case) {
    let server = raw::serve(move |mut sock| async move {
        raw::sse_head(&mut sock).await;
        raw::write(&mut sock, &bodies::partial_text(kind).0).await;
    })
    .await;
    let (text, end) = drain_raw(kind, &server.base).await;
    let err = end.unwrap_err();
    assert_eq!(err.class(), ErrorClass::StreamInterrupted, "{err}");
    assert_eq!(err.partial_events(), Some(bodies::partial_text(kind).1));
    assert_eq!(text, "Hello");
    assert_eq!(server.requests(), 1);
}

/// A server that calls a function without parameters may send no
/// `arguments`, or `""`: the call reads `{}` (a client parses the text it
/// gets, and `""` is not JSON), in a plain answer and in a stream alike;
/// a call with arguments keeps them as sent.
pub(crate) async fn a_call_without_arguments_reads_as_an_empty_object(kind: Case) {
    let call = |id: &str, function: serde_json::Value| json!({"id": id, "type": "function", "function": function});
    let answer = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "tool_calls": [
                call("call_a", json!({"name": "ping"})),
                call("call_b", json!({"name": "now", "arguments": ""})),
                call("call_c", json!({"name": "get", "arguments": "{\"k\":1}"})),
            ]}}]
    });
    let server = server_with(kind, ResponseTemplate::new(200).set_body_json(answer)).await;
    let resp = provider(kind, &base(&server))
        .chat(&request(), &CallOptions::default())
        .await
        .unwrap();
    let args: Vec<&str> = resp
        .tool_calls
        .iter()
        .map(|c| c.arguments.as_str())
        .collect();
    assert_eq!(args, ["{}", "{}", "{\"k\":1}"]);

    let delta = |index: u32, function: serde_json::Value| json!({"tool_calls": [{"index": index, "id": format!("call_{index}"), "type": "function", "function": function}]});
    let body = [
        bodies::chunk(kind, delta(0, json!({"name": "ping"})), None),
        bodies::chunk(
            kind,
            delta(1, json!({"name": "now", "arguments": " "})),
            None,
        ),
        bodies::chunk(
            kind,
            delta(2, json!({"name": "get", "arguments": "{\"k\":"})),
            None,
        ),
        bodies::chunk(
            kind,
            json!({"tool_calls": [{"index": 2, "function": {"arguments": "1}"}}]}),
            Some("tool_calls"),
        ),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let server = server_with(kind, sse(body)).await;
    let events = collect(
        provider(kind, &base(&server))
            .chat_stream(&request(), &CallOptions::default())
            .await
            .unwrap(),
    )
    .await;
    let mut assembled = StreamAssembler::default();
    let mut finished_after_args = false;
    for ev in events {
        let ev = ev.unwrap();
        if matches!(ev, StreamEvent::Finish { .. }) {
            finished_after_args = true;
        }
        if let StreamEvent::ToolCallDelta {
            arguments: Some(_), ..
        } = &ev
        {
            assert!(!finished_after_args, "arguments after the finish");
        }
        assembled.push(ev);
    }
    let resp = assembled.finish("m", None);
    let args: Vec<&str> = resp
        .tool_calls
        .iter()
        .map(|c| c.arguments.as_str())
        .collect();
    assert_eq!(args, ["{}", " {}", "{\"k\":1}"]);
}
