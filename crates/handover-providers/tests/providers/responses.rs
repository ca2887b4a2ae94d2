//! OpenAI's Responses API as a provider's wire format (`api = "responses"`):
//! what reaches the mock for a Chat-Completions-shaped request (checked
//! against the official `openai` SDK's types when `HANDOVER_TEST_PYTHON`
//! is set), and that what the API cannot express is refused before
//! anything is sent. Answers and stream events: `responses_answers.rs`.

use crate::support;

use handover_providers::{
    AnyProvider, CallOptions, ChatRequest, Content, ContentPart, ErrorClass, Message, OpenAiApi,
    Provider, ProviderKind, ProviderSettings, Tool, ToolCall, ToolChoice,
};
use serde_json::{Map, Value, json};
use support::{Case, bodies, sent};
use wiremock::{
    Mock, MockServer,
    matchers::{header, method, path},
};

fn part(kind: &str, field: &str, value: Value) -> ContentPart {
    let mut extra = Map::new();
    extra.insert(field.into(), value);
    ContentPart {
        kind: kind.into(),
        text: None,
        extra,
    }
}

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
        ..ToolCall::default()
    }
}

/// A conversation using every translated part of the request.
fn conversation() -> ChatRequest {
    let text = ContentPart {
        kind: "text".into(),
        text: Some("Where is this?".into()),
        extra: Map::new(),
    };
    let image = part(
        "image_url",
        "image_url",
        json!({"url": "https://example.com/fjord.png", "detail": "high"}),
    );
    let file = part("file", "file", json!({"file_id": "file-abc"}));
    let mut user = Message::user("");
    user.content = Some(Content::Parts(vec![text, image, file]));
    let calls = vec![
        call("call_1", "look", "{\"q\":\"fjord\"}"),
        call("call_2", "weather", "{\"city\":\"Oslo\"}"),
    ];
    let mut look = Tool::function(
        "look",
        Some("Look a place up".into()),
        json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"],
            "additionalProperties": false}),
    );
    look.strict = Some(true);
    let weather = Tool::function("weather", None, json!({"type": "object", "properties": {}}));
    let mut req = ChatRequest::new(vec![
        Message::system("Be exact."),
        user,
        Message::assistant_tool_calls(Some("Let me look.".into()), calls),
        Message::tool_result("call_1", "Norway"),
        Message::tool_result("call_2", "sunny"),
        Message::system("Answer in one word."),
        Message::user("So?"),
    ])
    .with_tools(vec![look, weather])
    .with_temperature(0.7)
    .with_max_tokens(300)
    .with_user("user-42");
    req.tool_choice = Some(ToolChoice::Function("look".into()));
    req.top_p = Some(0.5);
    req.max_completion_tokens = Some(200);
    req.seed = Some(7);
    let extra = [
        (
            "response_format",
            json!({"type": "json_schema", "json_schema": {"name": "place",
            "schema": {"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"], "additionalProperties": false}, "strict": true}}),
        ),
        ("reasoning_effort", json!("low")),
        ("verbosity", json!("low")),
        ("logprobs", json!(true)),
        ("top_logprobs", json!(2)),
        ("metadata", json!({"ticket": "K-701"})),
        ("service_tier", json!("flex")),
        ("parallel_tool_calls", json!(false)),
        ("prompt_cache_key", json!("pc-1")),
        ("safety_identifier", json!("sid-9")),
        ("frequency_penalty", json!(0.5)),
        ("n", json!(1)),
    ];
    for (k, v) in extra {
        req.extra.insert(k.into(), v);
    }
    req
}

/// The body [`conversation`] must become.
fn conversation_body() -> Value {
    json!({
        "model": support::model_for(bodies::R_CASE),
        "instructions": "Be exact.",
        "input": [
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "Where is this?"},
                {"type": "input_image", "image_url": "https://example.com/fjord.png", "detail": "high"},
                {"type": "input_file", "file_id": "file-abc"},
            ]},
            {"type": "message", "role": "assistant", "content": "Let me look."},
            {"type": "function_call", "call_id": "call_1", "name": "look", "arguments": "{\"q\":\"fjord\"}"},
            {"type": "function_call", "call_id": "call_2", "name": "weather", "arguments": "{\"city\":\"Oslo\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "Norway"},
            {"type": "function_call_output", "call_id": "call_2", "output": "sunny"},
            {"type": "message", "role": "system", "content": "Answer in one word."},
            {"type": "message", "role": "user", "content": "So?"},
        ],
        "tools": [
            {"type": "function", "name": "look", "description": "Look a place up",
             "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
                "required": ["q"], "additionalProperties": false}, "strict": true},
            {"type": "function", "name": "weather",
             "parameters": {"type": "object", "properties": {}}, "strict": false},
        ],
        "tool_choice": {"type": "function", "name": "look"},
        // As sent: an f32 0.7 is not 0.699999988 on the wire.
        "temperature": 0.7,
        "top_p": 0.5,
        "max_output_tokens": 200,
        "user": "user-42",
        "text": {"format": {"type": "json_schema", "name": "place",
            "schema": {"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"], "additionalProperties": false}, "strict": true},
            "verbosity": "low"},
        "reasoning": {"effort": "low"},
        "top_logprobs": 2,
        "include": ["message.output_text.logprobs"],
        "metadata": {"ticket": "K-701"},
        "service_tier": "flex",
        "parallel_tool_calls": false,
        "prompt_cache_key": "pc-1",
        "safety_identifier": "sid-9",
        "store": false,
        "stream": false,
    })
}

#[tokio::test]
async fn a_whole_conversation_becomes_instructions_and_input_items() {
    let (server, p) = bodies::r_answering(bodies::r_json(bodies::r_success())).await;
    p.chat(&conversation(), &CallOptions::default())
        .await
        .unwrap();
    let body = sent(&server).await.remove(0);
    assert_eq!(body, conversation_body(), "{body:#}");
}

#[tokio::test]
async fn a_stored_request_and_allowed_tools_keep_their_meaning() {
    let (server, p) = bodies::r_answering(bodies::r_json(bodies::r_success())).await;
    let mut req = ChatRequest::new(vec![Message::user("hi")]).with_tools(vec![Tool::function(
        "look",
        None,
        json!({"type": "object"}),
    )]);
    req.extra.insert("store".into(), json!(true));
    req.tool_choice = Some(ToolChoice::Other(json!({"type": "allowed_tools",
        "allowed_tools": {"mode": "required",
            "tools": [{"type": "function", "function": {"name": "look"}}]}})));
    p.chat(&req, &CallOptions::default()).await.unwrap();
    let body = sent(&server).await.remove(0);
    assert_eq!(body["store"], true, "asked for, so sent");
    assert_eq!(
        body["tool_choice"],
        json!({"type": "allowed_tools", "mode": "required",
            "tools": [{"type": "function", "name": "look"}]})
    );
    assert!(body.get("instructions").is_none());
}

#[tokio::test]
async fn what_the_responses_api_cannot_express_is_refused_before_sending() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(bodies::r_json(bodies::r_success()))
        .expect(0)
        .mount(&server)
        .await;
    let p = support::provider(bodies::R_CASE, &format!("{}/v1", server.uri()));
    let with = |k: &str, v: Value| {
        let mut r = ChatRequest::new(vec![Message::user("hi")]);
        r.extra.insert(k.into(), v);
        r
    };
    let mut stop = ChatRequest::new(vec![Message::user("hi")]);
    stop.stop = vec!["END".into()];
    let mut audio_in = ChatRequest::new(vec![Message::user("")]);
    audio_in.messages[0].content = Some(Content::Parts(vec![part(
        "input_audio",
        "input_audio",
        json!({"data": "UklGR", "format": "wav"}),
    )]));
    let cases = [
        (stop, "stop"),
        (with("logit_bias", json!({"50256": -100})), "logit_bias"),
        (with("n", json!(2)), "n"),
        (
            with("audio", json!({"voice": "alloy", "format": "wav"})),
            "audio",
        ),
        (with("modalities", json!(["text", "audio"])), "modalities"),
        (with("web_search_options", json!({})), "web_search_options"),
        (with("functions", json!([{"name": "f"}])), "functions"),
        (
            with("response_format", json!({"type": "grammar"})),
            "response_format.type",
        ),
        (with("input", json!("smuggled")), "input"),
        (audio_in, "messages[0].content[0]"),
    ];
    for (req, param) in cases {
        for stream in [false, true] {
            let err = if stream {
                p.chat_stream(&req, &CallOptions::default())
                    .await
                    .unwrap_err()
            } else {
                p.chat(&req, &CallOptions::default()).await.unwrap_err()
            };
            assert_eq!(err.class(), ErrorClass::InvalidRequest, "{param}: {err}");
            assert!(!err.was_sent(), "{param}");
            assert!(
                err.to_string().contains(&format!("{param}:")),
                "{param}: {err}"
            );
        }
    }
    let mut custom = ChatRequest::new(vec![Message::user("hi")]);
    custom.tool_choice = Some(ToolChoice::Other(
        json!({"type": "custom", "custom": {"name": "x"}}),
    ));
    let err = p.chat(&custom, &CallOptions::default()).await.unwrap_err();
    assert!(err.to_string().contains("tool_choice:"), "{err}");
    server.verify().await;
}

#[tokio::test]
async fn azure_reaches_its_v1_responses_path_with_the_deployment_as_model() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/openai/v1/responses"))
        .and(header("api-key", support::KEY))
        .respond_with(bodies::r_json(bodies::r_success()))
        .expect(2)
        .mount(&server)
        .await;
    let azure = Case::responses(ProviderKind::AzureOpenAi);
    let req = ChatRequest::new(vec![Message::user("hi")]);
    // No version by default; a configured one (`preview`) is sent.
    let plain = support::provider(azure, &server.uri());
    plain.chat(&req, &CallOptions::default()).await.unwrap();
    let pinned =
        AnyProvider::new(support::settings(azure, &server.uri()).with_api_version("preview"))
            .unwrap();
    pinned.chat(&req, &CallOptions::default()).await.unwrap();
    let reqs = server.received_requests().await.unwrap();
    assert_eq!(reqs[0].url.query(), None);
    assert_eq!(reqs[1].url.query(), Some("api-version=preview"));
    assert!(reqs[0].headers.get("authorization").is_none());
    let body: Value = serde_json::from_slice(&reqs[0].body).unwrap();
    assert_eq!(body["model"], support::model_for(azure));
    server.verify().await;
}

#[test]
fn only_openai_and_azure_can_be_called_through_the_responses_api() {
    for kind in ProviderKind::ALL {
        let settings = ProviderSettings::new("p", kind, "m")
            .with_base_url("http://127.0.0.1:9/v1")
            .with_api(OpenAiApi::Responses);
        let two_apis = matches!(kind, ProviderKind::OpenAi | ProviderKind::AzureOpenAi);
        match AnyProvider::new(settings) {
            Ok(_) => assert!(two_apis, "{kind}"),
            Err(e) => {
                assert!(!two_apis, "{kind}: {e}");
                assert!(e.to_string().contains("api:"), "{e}");
            }
        }
    }
}

/// The SSE events of a stream fixture, as JSON.
fn events(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[tokio::test]
async fn requests_and_fixtures_follow_the_official_sdks_types() {
    let Ok(python) = std::env::var("HANDOVER_TEST_PYTHON") else {
        println!("SKIPPED: set HANDOVER_TEST_PYTHON to a python with the `openai` package");
        return;
    };
    let (server, p) = bodies::r_answering(bodies::r_json(bodies::r_success())).await;
    let opts = CallOptions::default();
    p.chat(&conversation(), &opts).await.unwrap();
    p.chat(&bodies_request(), &opts).await.unwrap();
    let _ = p.chat_stream(&bodies_request(), &opts).await;
    let mut docs = Vec::new();
    for (i, body) in sent(&server).await.into_iter().enumerate() {
        docs.push(json!({"name": format!("request {i}"), "kind": "request", "body": body}));
    }
    for (name, body) in [
        ("r_success", bodies::r_success()),
        ("r_tool_call_response", bodies::r_tool_call_response()),
        ("incomplete", bodies::r_incomplete("max_output_tokens")),
    ] {
        docs.push(json!({"name": name, "kind": "response", "body": body}));
    }
    let streams = [
        ("r_text_stream", bodies::r_text_stream()),
        ("r_tool_stream", bodies::r_tool_stream()),
        ("r_stream_error", bodies::r_stream_error().0),
    ];
    for (name, body) in streams {
        for (i, e) in events(&body).into_iter().enumerate() {
            docs.push(json!({"name": format!("{name}[{i}]"), "kind": "event", "body": e}));
        }
    }
    let script = format!(
        "{}/tests/python/responses_shapes.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let input: String = docs.iter().map(|d| format!("{d}\n")).collect();
    let run = move || {
        use std::io::Write;
        let mut child = std::process::Command::new(&python)
            .arg(&script)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("HANDOVER_TEST_PYTHON={python} cannot run: {e}"));
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.as_bytes()).unwrap();
        drop(stdin);
        child.wait_with_output().unwrap()
    };
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        tokio::task::spawn_blocking(run),
    )
    .await
    .expect("the checker answers within 60 s")
    .unwrap();
    assert!(out.status.success(), "the checker failed: {out:?}");
    let results: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(results.len(), docs.len());
    for r in &results {
        assert_eq!(r["ok"], true, "{}: {}", r["name"], r["error"]);
    }
}

/// A small request (the conformance one) for the plain and streamed body.
fn bodies_request() -> ChatRequest {
    ChatRequest::new(vec![Message::system("be brief"), Message::user("hello")])
        .with_max_tokens(50)
        .with_user("user-42")
}
