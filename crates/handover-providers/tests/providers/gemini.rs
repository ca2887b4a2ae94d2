//! Gemini API translation: what reaches the mock for an OpenAI-shaped
//! request (system, tools, a tool-using history with foreign ids, tool
//! choice, generation parameters) and how its answers read back (derived
//! tool-call ids that attach results to their calls, thoughts, usage,
//! safety blocks, finish reasons) — plain and streamed.

use crate::support;

use handover_providers::{
    AnyProvider, CallOptions, ChatRequest, ErrorClass, FinishReason, Message, Provider,
    ProviderKind, Tool, ToolCall, ToolChoice,
};
use serde_json::{Value, json};
use support::{bodies, sent};
use wiremock::{
    Mock, MockServer, ResponseTemplate,
    matchers::{header, method, path},
};

const KIND: ProviderKind = ProviderKind::Gemini;
const PLAIN: &str = "/v1/models/gemini-2.5-flash:generateContent";
const STREAM: &str = "/v1/models/gemini-2.5-flash:streamGenerateContent";

async fn answering(at: &str, template: ResponseTemplate) -> (MockServer, AnyProvider) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(at))
        .and(header("x-goog-api-key", support::KEY))
        .respond_with(template)
        .mount(&server)
        .await;
    let p = support::provider(KIND, &format!("{}/v1", server.uri()));
    (server, p)
}

fn json_answer(body: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(body)
}

fn sse(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_string(body)
}

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
        ..ToolCall::default()
    }
}

fn shipment_tool() -> Tool {
    Tool::function(
        "create_shipment",
        Some("Create a replacement shipment".into()),
        json!({"type": "object", "properties": {"order": {"type": "string"}},
               "required": ["order"], "additionalProperties": false}),
    )
}

/// Two parallel calls by another family (foreign ids), the user's answer.
fn two_calls() -> Vec<ToolCall> {
    vec![
        call("toolu_01A", "create_shipment", "{\"order\":\"K-701\"}"),
        call("call:7/x", "notify", "{\"to\":\"ops\"}"),
    ]
}

#[tokio::test]
async fn tool_using_history_becomes_function_calls_and_named_responses() {
    let (server, p) = answering(PLAIN, json_answer(bodies::g_success())).await;
    let mut req = ChatRequest::new(vec![
        Message::system("You ship replacement orders."),
        Message::user("Order K-701 arrived broken."),
        Message::assistant_tool_calls(Some("On it.".into()), two_calls()),
        // Results out of order: each attaches by id, not by position.
        Message::tool_result("call:7/x", "sent"),
        Message::tool_result("toolu_01A", "{\"shipment\":\"S-9\"}"),
        Message::user("Thanks, and now?"),
    ])
    .with_tools(vec![shipment_tool()])
    .with_temperature(0.2)
    .with_max_tokens(300);
    req.tool_choice = Some(ToolChoice::Function("create_shipment".into()));
    req.stop = vec!["END".into()];
    req.extra
        .insert("response_format".into(), json!({"type": "json_object"}));
    // OpenAI hints a client sends every turn, which Gemini would refuse
    // as unknown fields: dropped (fourth gateway probe).
    let hints = [
        ("safety_identifier", json!("user-7f3a")),
        ("prompt_cache_key", json!("support-v2")),
        ("prompt_cache_retention", json!("24h")),
        ("prediction", json!({"type": "content", "content": "x"})),
        ("modalities", json!(["text"])),
    ];
    for (k, v) in &hints {
        req.extra.insert((*k).into(), v.clone());
    }
    p.chat(&req, &CallOptions::default()).await.unwrap();
    let body = &sent(&server).await[0];
    for (k, _) in &hints {
        assert!(body.get(*k).is_none(), "{k} sent: {body}");
    }
    assert_eq!(
        body["systemInstruction"],
        json!({"parts": [{"text": "You ship replacement orders."}]})
    );
    assert_eq!(
        body["contents"],
        json!([
            {"role": "user", "parts": [{"text": "Order K-701 arrived broken."}]},
            {"role": "model", "parts": [
                {"text": "On it."},
                {"functionCall": {"name": "create_shipment", "args": {"order": "K-701"}}},
                {"functionCall": {"name": "notify", "args": {"to": "ops"}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "notify", "response": {"result": "sent"}}},
                {"functionResponse": {"name": "create_shipment", "response": {"shipment": "S-9"}}},
                {"text": "Thanks, and now?"}
            ]}
        ])
    );
    assert_eq!(
        body["tools"][0]["functionDeclarations"][0],
        json!({"name": "create_shipment", "description": "Create a replacement shipment",
               "parametersJsonSchema": shipment_tool().parameters})
    );
    assert_eq!(
        body["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["create_shipment"]}})
    );
    let config = &body["generationConfig"];
    assert_eq!(config["maxOutputTokens"], 300);
    assert_eq!(config["stopSequences"], json!(["END"]));
    assert_eq!(config["responseMimeType"], "application/json");
    // Exactly as the client wrote it (an f32 widened to f64 would be 0.2000000029802322).
    assert_eq!(config["temperature"], serde_json::json!(0.2));
    assert!(body.get("response_format").is_none() && body.get("model").is_none());
}

#[tokio::test]
async fn a_result_for_no_call_is_refused_before_sending() {
    let (server, p) = answering(PLAIN, json_answer(bodies::g_success())).await;
    let req = ChatRequest::new(vec![
        Message::user("hi"),
        Message::assistant_tool_calls(None, two_calls()),
        Message::tool_result("call_unknown", "x"),
    ]);
    let err = p.chat(&req, &CallOptions::default()).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::InvalidRequest);
    assert!(!err.was_sent());
    assert!(
        err.to_string().contains("messages[2].tool_call_id"),
        "{err}"
    );
    assert!(server.received_requests().await.unwrap().is_empty());
}

/// Gemini's two calls, plain and streamed: the derived ids are the same
/// both ways and on every read, and the next request's results, sent
/// under those ids, name their calls.
#[tokio::test]
async fn derived_ids_are_stable_and_results_attach_to_their_calls() {
    let answer = bodies::g_answer(
        json!([
            {"text": "Shipping."},
            {"functionCall": {"name": "create_shipment", "args": {"order": "K-701"}}},
            {"functionCall": {"name": "create_shipment", "args": {"order": "K-702"}}}
        ]),
        Some("STOP"),
        None,
    );
    let (server, p) = answering(PLAIN, json_answer(answer.clone())).await;
    let req = ChatRequest::new(vec![Message::user("ship both")]);
    let first = p.chat(&req, &CallOptions::default()).await.unwrap();
    let again = p.chat(&req, &CallOptions::default()).await.unwrap();
    assert_eq!(first.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(first.tool_calls, again.tool_calls);
    let ids: Vec<&str> = first.tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert!(
        ids.iter()
            .all(|id| id.starts_with("call_") && id.len() == 21)
    );
    assert_ne!(ids[0], ids[1]);
    assert_eq!(first.tool_calls[1].arguments, "{\"order\":\"K-702\"}");

    let (_s, sp) = answering(STREAM, sse(bodies::g_event(answer))).await;
    let streamed = sp
        .chat_stream(&req, &CallOptions::default())
        .await
        .unwrap()
        .into_response()
        .await
        .unwrap();
    assert_eq!(streamed.tool_calls, first.tool_calls);
    assert_eq!(streamed.content.as_deref(), Some("Shipping."));

    // The client answers by id; Gemini hears the results by name, in order.
    let next = ChatRequest::new(vec![
        Message::user("ship both"),
        Message::assistant_tool_calls(first.content.clone(), first.tool_calls.clone()),
        Message::tool_result(ids[0], "S-1"),
        Message::tool_result(ids[1], "S-2"),
    ]);
    p.chat(&next, &CallOptions::default()).await.unwrap();
    let body = &sent(&server).await[2];
    assert_eq!(
        body["contents"][2]["parts"],
        json!([
            {"functionResponse": {"name": "create_shipment", "response": {"result": "S-1"}}},
            {"functionResponse": {"name": "create_shipment", "response": {"result": "S-2"}}}
        ])
    );
}

/// Gemini 3 signs its reasoning on the first `functionCall` part of a
/// turn. The call made from that part carries the signature as
/// `extra_content.google.thought_signature` (plain and streamed alike; the
/// other call carries nothing), and the next request puts it back on that
/// call's part, as Gemini requires.
#[tokio::test]
async fn a_thought_signature_rides_on_its_call_and_goes_back_on_its_part() {
    let answer = bodies::g_answer(
        json!([
            {"functionCall": {"name": "create_shipment", "args": {"order": "K-701"}},
             "thoughtSignature": "c2lnLTE="},
            {"functionCall": {"name": "notify", "args": {"to": "ops"}}}
        ]),
        Some("STOP"),
        None,
    );
    let (server, p) = answering(PLAIN, json_answer(answer.clone())).await;
    let req = ChatRequest::new(vec![Message::user("ship and tell ops")]);
    let first = p.chat(&req, &CallOptions::default()).await.unwrap();
    assert_eq!(
        first.tool_calls[0].extra.value("extra_content"),
        Some(json!({"google": {"thought_signature": "c2lnLTE="}}))
    );
    assert!(first.tool_calls[1].extra.is_empty());
    assert!(first.tool_calls.iter().all(|c| c.function_extra.is_empty()));

    let (_s, sp) = answering(STREAM, sse(bodies::g_event(answer))).await;
    let streamed = sp
        .chat_stream(&req, &CallOptions::default())
        .await
        .unwrap()
        .into_response()
        .await
        .unwrap();
    assert_eq!(streamed.tool_calls, first.tool_calls);

    let next = ChatRequest::new(vec![
        Message::user("ship and tell ops"),
        Message::assistant_tool_calls(None, first.tool_calls.clone()),
        Message::tool_result(&first.tool_calls[0].id, "S-1"),
        Message::tool_result(&first.tool_calls[1].id, "sent"),
    ]);
    p.chat(&next, &CallOptions::default()).await.unwrap();
    let body = &sent(&server).await[1];
    assert_eq!(
        body["contents"][1],
        json!({"role": "model", "parts": [
            {"functionCall": {"name": "create_shipment", "args": {"order": "K-701"}},
             "thoughtSignature": "c2lnLTE="},
            {"functionCall": {"name": "notify", "args": {"to": "ops"}}}
        ]})
    );
}

#[tokio::test]
async fn answer_reads_thoughts_usage_and_model_version() {
    let (_s, p) = answering(PLAIN, json_answer(bodies::g_tool_call_response())).await;
    let resp = p
        .chat(
            &ChatRequest::new(vec![Message::user("ship")]),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        resp.reasoning_content.as_deref(),
        Some("The user wants a shipment; call the tool.")
    );
    assert_eq!(resp.model, bodies::G_MODEL);
    let u = resp.usage.unwrap();
    // Output counts the thinking tokens, as OpenAI's completion tokens do.
    assert_eq!((u.input_tokens, u.output_tokens), (40, 20));
    assert_eq!(u.reasoning_tokens, Some(8));
    let openai = u.to_openai();
    assert_eq!(openai["prompt_tokens"], 40);
    assert_eq!(openai["completion_tokens"], 20);
}

#[tokio::test]
async fn safety_blocks_and_limits_map_to_finish_reasons() {
    let blocked = json!({
        "promptFeedback": {"blockReason": "SAFETY", "safetyRatings": [
            {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH"}]},
        "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9},
        "modelVersion": bodies::G_MODEL
    });
    let cases = [
        (blocked.clone(), FinishReason::ContentFilter, None),
        (
            bodies::g_answer(json!([{"text": "Partial"}]), Some("SAFETY"), None),
            FinishReason::ContentFilter,
            Some("Partial"),
        ),
        (
            bodies::g_answer(json!([{"text": "Long"}]), Some("MAX_TOKENS"), None),
            FinishReason::Length,
            Some("Long"),
        ),
        (
            bodies::g_answer(json!([]), Some("MALFORMED_FUNCTION_CALL"), None),
            FinishReason::Other("malformed_function_call".into()),
            None,
        ),
    ];
    let req = ChatRequest::new(vec![Message::user("hi")]);
    for (answer, want, text) in cases {
        let (_s, p) = answering(PLAIN, json_answer(answer.clone())).await;
        let resp = p.chat(&req, &CallOptions::default()).await.unwrap();
        assert_eq!(resp.finish_reason, Some(want.clone()), "{answer}");
        assert_eq!(resp.content.as_deref(), text);
        // Streamed, the same chunk ends the stream complete, not cut.
        let (_s, p) = answering(STREAM, sse(bodies::g_event(answer))).await;
        let stream = p.chat_stream(&req, &CallOptions::default()).await.unwrap();
        let resp = stream.into_response().await.unwrap();
        assert_eq!(resp.finish_reason, Some(want));
    }
}
