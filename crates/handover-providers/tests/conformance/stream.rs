//! Streaming cases: keep-alives, completion without `[DONE]`, interruption, in-stream errors, malformed events, tool-call deltas.

use std::time::Duration;

use futures::StreamExt;
use handover_providers::{
    CallOptions, ErrorClass, FinishReason, Provider, ProviderKind, StreamAssembler, Tool, ToolCall,
};
use serde_json::json;
use wiremock::ResponseTemplate;

use crate::{
    base, collect, request, sent_body, server_with, sse,
    support::{bodies, provider},
};

pub(crate) async fn stream_with_keepalives_assembles(kind: ProviderKind) {
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

pub(crate) async fn stream_without_done_but_finished_is_complete(kind: ProviderKind) {
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

pub(crate) async fn stream_without_done_or_finish_is_interrupted(kind: ProviderKind) {
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

pub(crate) async fn error_event_in_200_stream_is_an_error(kind: ProviderKind) {
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

pub(crate) async fn malformed_event_is_typed_and_skippable(kind: ProviderKind) {
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

pub(crate) async fn tool_call_deltas_assemble(kind: ProviderKind) {
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

pub(crate) async fn non_streaming_tool_calls_and_reasoning(kind: ProviderKind) {
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

pub(crate) async fn stream_error_status_sends_once(kind: ProviderKind) {
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
