//! Anthropic Messages API translation: what reaches the mock for an
//! OpenAI-shaped request (system, tools, a tool-using history with foreign
//! ids, images, tool choice) and how its answers read back (thinking,
//! cache usage, stop reasons, argument-less tool calls).

use crate::support;

use handover_providers::{
    AnyProvider, CallOptions, ChatRequest, Content, ContentPart, ErrorClass, FinishReason, Message,
    Provider, ProviderKind, Tool, ToolCall, ToolChoice,
};
use serde_json::{Map, Value, json};
use support::{bodies, sent};
use wiremock::{
    Mock, MockServer, ResponseTemplate,
    matchers::{method, path},
};

const KIND: ProviderKind = ProviderKind::Anthropic;

async fn answering(body: Value) -> (MockServer, AnyProvider) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(200).set_body_json(body))
        .mount(&server)
        .await;
    let p = support::provider(KIND, &format!("{}/v1", server.uri()));
    (server, p)
}

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
        ..ToolCall::default()
    }
}

/// OpenAI hints a client sends every turn (fourth gateway probe), which
/// Anthropic would refuse as unknown fields: dropped.
fn openai_hints() -> [(&'static str, Value); 5] {
    [
        ("safety_identifier", json!("user-7f3a")),
        ("prompt_cache_key", json!("support-v2")),
        ("prompt_cache_retention", json!("24h")),
        ("prediction", json!({"type": "content", "content": "x"})),
        ("modalities", json!(["text"])),
    ]
}

fn shipment_tool() -> Tool {
    Tool::function(
        "create_shipment",
        Some("Create a replacement shipment".into()),
        json!({"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}),
    )
}

#[tokio::test]
async fn tool_using_history_becomes_paired_tool_use_and_tool_result_blocks() {
    let (server, p) = answering(bodies::a_success()).await;
    // An OpenAI-style conversation: two parallel calls (one id with
    // characters Anthropic refuses), their results, then the user again.
    let foreign = "call:7/x";
    let mut req = ChatRequest::new(vec![
        Message::system("You ship orders."),
        Message::user("Replace order K-701 and tell ops."),
        Message::assistant_tool_calls(
            Some("On it.".into()),
            vec![
                call("call_a1", "create_shipment", r#"{"order":"K-701"}"#),
                call(foreign, "notify", r#"{"to":"ops"}"#),
            ],
        ),
        Message::tool_result("call_a1", r#"{"shipment":"S-1"}"#),
        Message::tool_result(foreign, "sent"),
        Message::user("Thanks. Anything else?"),
        Message::system("Answer in one line."),
    ])
    .with_tools(vec![shipment_tool()])
    .with_temperature(0.2);
    req.tool_choice = Some(ToolChoice::Required);
    req.stop = vec!["END".into()];
    req.extra.insert("parallel_tool_calls".into(), json!(false));
    req.extra.insert("top_k".into(), json!(5));
    req.extra.insert("presence_penalty".into(), json!(0.5));
    req.extra.insert("logprobs".into(), json!(false));
    req.extra.insert("n".into(), json!(1));
    req.extra
        .insert("response_format".into(), json!({"type": "text"}));
    req.extra.insert("top_logprobs".into(), Value::Null);
    for (k, v) in openai_hints() {
        req.extra.insert(k.into(), v);
    }
    let resp = p.chat(&req, &CallOptions::default()).await.unwrap();
    assert_eq!(resp.model, "claude-sonnet-4-5-20250929");
    let bodies = sent(&server).await;
    assert_eq!(bodies.len(), 1, "exactly one HTTP request");
    let body = &bodies[0];
    let mapped = support::anthropic::hex_id(foreign);
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "You ship orders."},
               {"type": "text", "text": "Answer in one line."}])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Replace order K-701 and tell ops."}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "On it."},
                {"type": "tool_use", "id": "call_a1", "name": "create_shipment", "input": {"order": "K-701"}},
                {"type": "tool_use", "id": mapped, "name": "notify", "input": {"to": "ops"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_a1", "content": "{\"shipment\":\"S-1\"}"},
                {"type": "tool_result", "tool_use_id": mapped, "content": "sent"},
                {"type": "text", "text": "Thanks. Anything else?"}
            ]}
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"name": "create_shipment", "description": "Create a replacement shipment",
                "input_schema": {"type": "object", "properties": {"order": {"type": "string"}},
                                 "required": ["order"]}}])
    );
    assert_eq!(
        body["tool_choice"],
        json!({"type": "any", "disable_parallel_tool_use": true})
    );
    assert_eq!(body["stop_sequences"], json!(["END"]));
    assert_eq!(body["max_tokens"], 4096, "the API requires max_tokens");
    assert_eq!(body["top_k"], 5, "Anthropic parameters pass through");
    let keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    for absent in [
        "parallel_tool_calls",
        "presence_penalty",
        "stream",
        "user",
        "logprobs",
        "n",
        "response_format",
        "top_logprobs",
    ]
    .into_iter()
    .chain(openai_hints().map(|(k, _)| k))
    {
        assert!(!keys.contains(&absent), "{absent} sent: {keys:?}");
    }
    // Exactly as the client wrote it (an f32 widened to f64 would be 0.2000000029802322).
    assert_eq!(body["temperature"], serde_json::json!(0.2));
}

#[tokio::test]
async fn answer_reads_thinking_tool_use_and_cache_usage() {
    let mut answer = bodies::a_tool_call_response();
    answer["usage"] = json!({"input_tokens": 30, "cache_creation_input_tokens": 100,
                             "cache_read_input_tokens": 900, "output_tokens": 20});
    answer["content"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "tool_use", "id": "toolu_2", "name": "ping_ops", "input": {}}));
    let (_server, p) = answering(answer).await;
    let req = ChatRequest::new(vec![Message::user("ship it")]).with_tools(vec![shipment_tool()]);
    let resp = p.chat(&req, &CallOptions::default()).await.unwrap();
    assert_eq!(resp.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(
        resp.tool_calls,
        vec![
            call(
                "toolu_01A09q90qw90lq917835lq9",
                "create_shipment",
                r#"{"order":"K-701"}"#
            ),
            call("toolu_2", "ping_ops", "{}"),
        ]
    );
    assert_eq!(
        resp.reasoning_content.as_deref(),
        Some("The user wants a shipment; call the tool.")
    );
    let usage = resp.usage.clone().unwrap();
    // OpenAI's prompt_tokens counts cached input; Anthropic's does not.
    assert_eq!(usage.input_tokens, 1030);
    assert_eq!(usage.cached_input_tokens, Some(900));
    assert_eq!(usage.output_tokens, 20);
    assert_eq!(
        usage.extra.value("cache_creation_input_tokens").unwrap(),
        100
    );
    let openai = resp.into_openai("fallback-id", 0);
    assert_eq!(openai["id"], "msg_01Aq9w938a90dw8q");
    assert_eq!(openai["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(openai["usage"]["prompt_tokens"], 1030);
    assert_eq!(
        openai["usage"]["prompt_tokens_details"]["cached_tokens"],
        900
    );
    assert_eq!(
        openai["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        r#"{"order":"K-701"}"#
    );
}

#[tokio::test]
async fn stop_reasons_map_to_finish_reasons() {
    for (stop, want) in [
        ("end_turn", FinishReason::Stop),
        ("stop_sequence", FinishReason::Stop),
        ("max_tokens", FinishReason::Length),
        ("tool_use", FinishReason::ToolCalls),
        ("refusal", FinishReason::ContentFilter),
        ("pause_turn", FinishReason::Other("pause_turn".into())),
    ] {
        let mut answer = bodies::a_success();
        answer["stop_reason"] = json!(stop);
        let (_server, p) = answering(answer).await;
        let resp = p
            .chat(
                &ChatRequest::new(vec![Message::user("hi")]),
                &CallOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(resp.finish_reason, Some(want), "{stop}");
    }
}

#[tokio::test]
async fn images_become_image_blocks_and_bad_arguments_send_nothing() {
    let (server, p) = answering(bodies::a_success()).await;
    let part = |kind: &str, text: Option<&str>, extra: Value| ContentPart {
        kind: kind.into(),
        text: text.map(Into::into),
        extra: extra.as_object().cloned().unwrap_or_else(Map::new),
    };
    let mut user = Message::user("");
    user.content = Some(Content::Parts(vec![
        part("text", Some("What is in these?"), json!({})),
        part(
            "image_url",
            None,
            json!({"image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}),
        ),
        part(
            "image_url",
            None,
            json!({"image_url": {"url": "https://example.com/a.jpg"}}),
        ),
    ]));
    p.chat(&ChatRequest::new(vec![user]), &CallOptions::default())
        .await
        .unwrap();
    let body = &sent(&server).await[0];
    assert_eq!(
        body["messages"][0]["content"],
        json!([
            {"type": "text", "text": "What is in these?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}}
        ])
    );

    // Arguments Anthropic cannot carry (not a JSON object): refused before sending.
    let req = ChatRequest::new(vec![
        Message::user("go"),
        Message::assistant_tool_calls(None, vec![call("c1", "create_shipment", "[1, 2]")]),
        Message::tool_result("c1", "ok"),
    ]);
    let err = p.chat(&req, &CallOptions::default()).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::InvalidRequest);
    assert!(!err.was_sent());
    assert!(
        err.to_string()
            .contains("messages[1].tool_calls[0].function.arguments"),
        "{err}"
    );
    assert_eq!(sent(&server).await.len(), 1, "nothing more was sent");
}

#[tokio::test]
async fn streamed_tool_call_without_arguments_reads_as_empty_object() {
    let server = MockServer::start().await;
    let events = [
        bodies::a_event(json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "content": [], "model": "claude-haiku-4-5", "stop_reason": null,
            "usage": {"input_tokens": 9, "cache_read_input_tokens": 3, "output_tokens": 1}}})),
        bodies::a_event(json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_9", "name": "ping_ops", "input": {}}})),
        bodies::a_event(json!({"type": "content_block_stop", "index": 0})),
        bodies::a_event(json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 7}})),
        bodies::a_event(json!({"type": "message_stop"})),
    ]
    .concat();
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(events),
        )
        .expect(1)
        .mount(&server)
        .await;
    let p = support::provider(KIND, &format!("{}/v1", server.uri()));
    let resp = p
        .chat_stream(
            &ChatRequest::new(vec![Message::user("ping ops")]),
            &CallOptions::default(),
        )
        .await
        .unwrap()
        .into_response()
        .await
        .unwrap();
    assert_eq!(resp.tool_calls, vec![call("toolu_9", "ping_ops", "{}")]);
    assert_eq!(resp.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(resp.model, "claude-haiku-4-5");
    let usage = resp.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (12, 7));
    assert_eq!(usage.cached_input_tokens, Some(3));
    server.verify().await;
}

/// Structured outputs reach a provider declared to have them (Claude 4.5
/// and later): a strict tool as a strict tool, a JSON schema response
/// format as `output_config.format` beside the request's own
/// `output_config` members. Before, the tool went out without `strict`
/// (a weaker request) and the format as an unknown `response_format`.
#[tokio::test]
async fn strict_tools_and_json_schema_formats_become_anthropic_structured_outputs() {
    let (server, p) = answering(bodies::a_success()).await;
    let mut strict = shipment_tool();
    strict.strict = Some(true);
    let mut req = ChatRequest::new(vec![Message::user("ship order 1042")]);
    req.tools = vec![strict, shipment_tool()];
    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}},
                        "required": ["ok"], "additionalProperties": false});
    req.extra.insert(
        "response_format".into(),
        json!({"type": "json_schema", "json_schema": {"name": "r", "strict": true, "schema": schema}}),
    );
    req.extra
        .insert("output_config".into(), json!({"effort": "low"}));
    p.chat(&req, &CallOptions::default()).await.unwrap();
    let body = &sent(&server).await[0];
    assert_eq!(body["tools"][0]["strict"], json!(true));
    assert!(body["tools"][1].get("strict").is_none(), "{body}");
    assert_eq!(
        body["output_config"],
        json!({"effort": "low", "format": {"type": "json_schema", "schema": schema}})
    );
    assert!(body.get("response_format").is_none(), "{body}");

    // A schema format without its schema cannot be held to one: refused
    // before sending, naming the field.
    req.extra.insert(
        "response_format".into(),
        json!({"type": "json_schema", "json_schema": {"name": "r"}}),
    );
    let err = p.chat(&req, &CallOptions::default()).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::InvalidRequest);
    assert!(!err.was_sent());
    assert_eq!(
        err.request_field(),
        Some("response_format.json_schema.schema")
    );
    assert_eq!(sent(&server).await.len(), 1, "nothing more was sent");
}
