//! OpenAI's Responses API answers and stream events as the neutral answer:
//! finish reasons, usage details, reasoning, refusals, log probabilities,
//! calls announced late, failed and unfinished responses, in-stream errors.

use crate::support;

use handover_providers::{
    CallOptions, ChatRequest, ErrorClass, FinishReason, Message, Provider, ToolCall,
};
use serde_json::{Value, json};
use support::{bodies, sent};

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
        ..ToolCall::default()
    }
}

/// A conversation using every translated part of the request.
#[tokio::test]
async fn answers_read_back_with_reasoning_refusals_logprobs_and_usage_details() {
    let lp = json!([{"token": "Oslo", "logprob": -0.1, "bytes": [79, 115, 108, 111],
        "top_logprobs": []}]);
    let answer = bodies::r_response(
        "completed",
        json!([
            {"type": "reasoning", "id": "rs_1", "summary": [
                {"type": "summary_text", "text": "**Plan**"},
                {"type": "summary_text", "text": "Look it up."}]},
            {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
             "content": [
                {"type": "output_text", "text": "Oslo", "annotations": [], "logprobs": lp},
                {"type": "refusal", "refusal": "No more."}]},
            bodies::r_call("fc_1", "call_9", "look", "{\"q\":\"Oslo\"}"),
        ]),
        bodies::r_usage(40, 8, 20, 12),
    );
    let (_s, p) = bodies::r_answering(bodies::r_json(answer)).await;
    let resp = p
        .chat(
            &ChatRequest::new(vec![Message::user("hi")]),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(resp.content.as_deref(), Some("Oslo"));
    assert_eq!(
        resp.reasoning_content.as_deref(),
        Some("**Plan**\n\nLook it up.")
    );
    assert_eq!(
        resp.tool_calls,
        vec![call("call_9", "look", "{\"q\":\"Oslo\"}")]
    );
    assert_eq!(resp.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(resp.model, bodies::R_MODEL);
    let usage = resp.usage.clone().unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (40, 20));
    assert_eq!(
        (usage.cached_input_tokens, usage.reasoning_tokens),
        (Some(8), Some(12))
    );
    // As a chat completion: the provider's id, its details under their
    // Chat Completions names.
    let chat = resp.into_openai("chatcmpl-default", 1);
    assert_eq!(chat["id"], bodies::R_ID);
    assert_eq!(chat["created"], 1741476542);
    assert_eq!(chat["service_tier"], "default");
    assert_eq!(chat["choices"][0]["message"]["refusal"], "No more.");
    assert_eq!(chat["choices"][0]["logprobs"]["content"], lp);
    assert_eq!(chat["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        chat["usage"],
        json!({"prompt_tokens": 40, "completion_tokens": 20, "total_tokens": 60,
            "prompt_tokens_details": {"cached_tokens": 8, "cache_write_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 12}})
    );
}

#[tokio::test]
async fn incomplete_responses_finish_by_their_reason_plain_and_streamed() {
    for (reason, want) in [
        ("max_output_tokens", FinishReason::Length),
        ("content_filter", FinishReason::ContentFilter),
    ] {
        let (_s, p) = bodies::r_answering(bodies::r_json(bodies::r_incomplete(reason))).await;
        let req = ChatRequest::new(vec![Message::user("hi")]);
        let resp = p.chat(&req, &CallOptions::default()).await.unwrap();
        assert_eq!(resp.finish_reason, Some(want.clone()), "{reason}");
        assert_eq!(resp.content.as_deref(), Some("Partial"));

        let events = [
            bodies::r_partial_text().0,
            bodies::r_event(json!({"type": "response.incomplete", "sequence_number": 7,
                "response": bodies::r_incomplete(reason)})),
        ];
        let (_s, p) = bodies::r_answering(bodies::r_sse(events.concat())).await;
        let stream = p.chat_stream(&req, &CallOptions::default()).await.unwrap();
        let resp = stream.into_response().await.unwrap();
        assert_eq!(resp.finish_reason, Some(want), "{reason}, streamed");
        assert_eq!(resp.content.as_deref(), Some("Hello"));
        assert_eq!(resp.usage.map(|u| u.output_tokens), Some(50));
    }
}

#[tokio::test]
async fn a_failed_or_unfinished_response_is_an_error_never_an_answer() {
    let mut failed = bodies::r_response("failed", json!([]), Value::Null);
    failed["error"] = json!({"code": "rate_limit_exceeded", "message": "Slow down."});
    let (server, p) =
        bodies::r_answering(bodies::r_json(failed).insert_header("x-request-id", "req_failed"))
            .await;
    let req = ChatRequest::new(vec![Message::user("hi")]);
    let err = p.chat(&req, &CallOptions::default()).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::RateLimited, "{err}");
    assert_eq!(err.provider_code(), Some("rate_limit_exceeded"));
    assert_eq!(err.request_id(), Some("req_failed"));
    assert!(err.was_sent());
    assert_eq!(sent(&server).await.len(), 1);

    for status in ["in_progress", "queued", "cancelled"] {
        let (_s, p) = bodies::r_answering(bodies::r_json(bodies::r_response(
            status,
            json!([]),
            Value::Null,
        )))
        .await;
        let err = p.chat(&req, &CallOptions::default()).await.unwrap_err();
        assert_eq!(err.class(), ErrorClass::Other, "{status}: {err}");
        assert!(!err.is_retryable(), "unknown is not retried blindly");
        assert!(err.to_string().contains(status), "{err}");
    }
}

#[tokio::test]
async fn stream_events_carry_reasoning_refusals_logprobs_and_in_stream_errors() {
    let ev = bodies::r_event;
    let lp = json!([{"token": "Hi", "logprob": -0.5, "top_logprobs": []}]);
    let body = [
        bodies::r_partial_text().0,
        ev(
            json!({"type": "response.reasoning_summary_part.added", "sequence_number": 5,
            "item_id": "rs_1", "output_index": 1, "summary_index": 0,
            "part": {"type": "summary_text", "text": ""}}),
        ),
        ev(
            json!({"type": "response.reasoning_summary_text.delta", "sequence_number": 6,
            "item_id": "rs_1", "output_index": 1, "summary_index": 0, "delta": "One."}),
        ),
        ev(
            json!({"type": "response.reasoning_summary_part.added", "sequence_number": 7,
            "item_id": "rs_1", "output_index": 1, "summary_index": 1,
            "part": {"type": "summary_text", "text": ""}}),
        ),
        ev(
            json!({"type": "response.reasoning_summary_text.delta", "sequence_number": 8,
            "item_id": "rs_1", "output_index": 1, "summary_index": 1, "delta": "Two."}),
        ),
        ev(
            json!({"type": "response.output_text.delta", "sequence_number": 9, "item_id": "msg_1",
            "output_index": 0, "content_index": 0, "delta": " Hi", "logprobs": lp}),
        ),
        ev(
            json!({"type": "response.refusal.delta", "sequence_number": 10, "item_id": "msg_1",
            "output_index": 0, "content_index": 1, "delta": "No."}),
        ),
        bodies::r_finish_and_done(),
    ];
    let (_s, p) = bodies::r_answering(bodies::r_sse(body.concat())).await;
    let req = ChatRequest::new(vec![Message::user("hi")]);
    let resp = bodies::r_streamed(&p, &req).await;
    assert_eq!(resp.content.as_deref(), Some("Hello Hi"));
    assert_eq!(resp.reasoning_content.as_deref(), Some("One.\n\nTwo."));
    assert_eq!(resp.passthrough.message.value("refusal").unwrap(), "No.");
    assert_eq!(
        resp.passthrough.choice.value("logprobs").unwrap()["content"],
        lp
    );
    assert_eq!(resp.passthrough.top.value("id").unwrap(), bodies::R_ID);
    assert_eq!(resp.finish_reason, Some(FinishReason::Stop));

    // A bare `error` event after some text breaks the stream, classified
    // by its code; the text is partial, never an answer.
    let error = ev(
        json!({"type": "error", "sequence_number": 5, "code": "rate_limit_exceeded",
        "message": "Rate limit reached", "param": null}),
    );
    let (_s, p) = bodies::r_answering(bodies::r_sse(bodies::r_partial_text().0 + &error)).await;
    let stream = p.chat_stream(&req, &CallOptions::default()).await.unwrap();
    let err = stream.into_response().await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::RateLimited, "{err}");
    assert_eq!(err.provider_code(), Some("rate_limit_exceeded"));
    assert_eq!(err.partial_events(), Some(6));
}

#[tokio::test]
async fn a_call_announced_only_when_done_still_arrives_whole() {
    let call = bodies::r_call("fc_1", "call_7", "look", "{\"q\":\"Oslo\"}");
    let body = [
        bodies::r_partial_text().0,
        bodies::r_event(
            json!({"type": "response.output_item.done", "sequence_number": 5,
            "output_index": 1, "item": call}),
        ),
        bodies::r_event(json!({"type": "response.completed", "sequence_number": 6,
            "response": bodies::r_response("completed", json!([call]), Value::Null)})),
    ];
    let (_s, p) = bodies::r_answering(bodies::r_sse(body.concat())).await;
    let req = ChatRequest::new(vec![Message::user("hi")]);
    let resp = bodies::r_streamed(&p, &req).await;
    assert_eq!(
        resp.tool_calls,
        vec![self::call("call_7", "look", "{\"q\":\"Oslo\"}")]
    );
    assert_eq!(resp.finish_reason, Some(FinishReason::ToolCalls));
}
