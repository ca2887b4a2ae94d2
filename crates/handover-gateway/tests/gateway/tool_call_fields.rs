//! A tool call's members beyond `id`, `type` and `function` (and its
//! function's beyond `name` and `arguments`) pass through the gateway both
//! ways: in a plain answer, in streamed deltas (the first one included),
//! and in the history a client sends back. Gemini 3 needs this: its thought
//! signature rides on each tool call as `extra_content.google.thought_signature`
//! (Google's OpenAI-compatible endpoint) or as `thoughtSignature` on the
//! `functionCall` part (the native API), and must come back with the call
//! in the next request. A signature is Gemini's: a fallback to a provider
//! of another family goes without it. Every upstream is a mock that
//! records what it received.

use crate::support;

use reqwest::StatusCode;
use serde_json::{Map, Value, json};
use support::{CLIENT_A, Running};
use wiremock::{Mock, MockServer, Request, ResponseTemplate, matchers::method};

const SIG_ONE: &str = "SIG_ONE_abc";
const SIG_TWO: &str = "SIG_TWO_def";

fn signature(sig: &str) -> Value {
    json!({"google": {"thought_signature": sig}})
}

fn body_of(r: &Request) -> Value {
    serde_json::from_slice(&r.body).unwrap()
}

/// A member list of an object, in order.
fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

// ---- an OpenAI-compatible upstream (Google's endpoint, a vendor) ----

/// The calls Google's OpenAI-compatible endpoint answers with (as in the
/// probe's `gemx` script), plus vendor members at both levels, in an order
/// that is not alphabetical.
fn compatible_calls() -> Value {
    json!([
        {"id": "function-call-1", "type": "function",
         "function": {"name": "fa", "arguments": "{\"a\":1}", "x_fn_field": 1, "a_fn": [true]},
         "extra_content": signature(SIG_ONE), "x_tc_field": "TC", "a_last": {"z": 1, "b": 2}},
        {"id": "function-call-2", "type": "function",
         "function": {"name": "fb", "arguments": "{\"b\":2}"},
         "extra_content": signature(SIG_TWO)}
    ])
}

fn sse(chunks: &[Value]) -> ResponseTemplate {
    let mut text: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    text.push_str("data: [DONE]\n\n");
    ResponseTemplate::new(200).set_body_raw(text, "text/event-stream")
}

fn chunk(delta: Value, finish: Value) -> Value {
    json!({"id": "chatcmpl-G", "object": "chat.completion.chunk", "created": 1,
           "model": "gemini-3-flash",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

/// The compatible upstream: a stream when asked (Google's shape, each call
/// whole in one delta without `index`, unless the conversation says
/// `numbered`: OpenAI's shape, the extras on the call's first delta and its
/// arguments in pieces after), else the whole answer; text once the
/// conversation has tool results.
fn compatible(req: &Request) -> ResponseTemplate {
    let body = body_of(req);
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    if messages.iter().any(|m| m["role"] == "tool") {
        return ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-T", "object": "chat.completion", "created": 1, "model": "gemini-3-flash",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "done"},
                         "finish_reason": "stop"}]}));
    }
    let calls = compatible_calls();
    if body["stream"] != true {
        return ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-G", "object": "chat.completion", "created": 1, "model": "gemini-3-flash",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
                         "tool_calls": calls}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}));
    }
    let numbered = body.to_string().contains("numbered");
    let mut chunks = vec![chunk(
        json!({"role": "assistant", "content": null}),
        Value::Null,
    )];
    for (i, call) in calls.as_array().unwrap().iter().enumerate() {
        if numbered {
            let mut first = call.clone();
            first["index"] = i.into();
            first["function"]["arguments"] = "".into();
            chunks.push(chunk(json!({"tool_calls": [first]}), Value::Null));
            let args = call["function"]["arguments"].as_str().unwrap();
            let (a, b) = args.split_at(3);
            for piece in [a, b] {
                chunks.push(chunk(
                    json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                    Value::Null,
                ));
            }
        } else {
            chunks.push(chunk(json!({"tool_calls": [call]}), Value::Null));
        }
    }
    chunks.push(chunk(json!({}), json!("tool_calls")));
    sse(&chunks)
}

// ---- Gemini's native API ----

/// Gemini 3 making two parallel calls: the signature on the first
/// `functionCall` part only, as Google documents it.
fn gemini_calls() -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": "fa", "args": {"a": 1}}, "thoughtSignature": SIG_ONE},
            {"functionCall": {"name": "fb", "args": {"b": 2}}}
        ]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 4, "totalTokenCount": 13},
        "modelVersion": "gemini-3-pro-preview",
        "responseId": "resp-1"
    })
}

/// The native upstream: the calls, or text once the conversation has
/// function responses; streamed on `streamGenerateContent`.
fn gemini(req: &Request) -> ResponseTemplate {
    let body = body_of(req);
    let answered = body.to_string().contains("functionResponse");
    let answer = if answered {
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "done"}]},
               "finishReason": "STOP", "index": 0}], "modelVersion": "gemini-3-pro-preview"})
    } else {
        gemini_calls()
    };
    if req.url.path().ends_with(":streamGenerateContent") {
        ResponseTemplate::new(200)
            .set_body_raw(format!("data: {answer}\r\n\r\n"), "text/event-stream")
    } else {
        ResponseTemplate::new(200).set_body_json(answer)
    }
}

/// What the native upstream must get back in the model turn: the
/// signature on the part of the call that carried it, nowhere else.
fn signed_model_turn() -> Value {
    json!({"role": "model", "parts": [
        {"functionCall": {"name": "fa", "args": {"a": 1}}, "thoughtSignature": SIG_ONE},
        {"functionCall": {"name": "fb", "args": {"b": 2}}}
    ]})
}

// ---- the gateway ----

struct Upstreams {
    compat: MockServer,
    gemini: MockServer,
    openai: MockServer,
    claude: MockServer,
}

async fn upstreams(gemini_up: bool) -> Upstreams {
    let compat = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(compatible)
        .mount(&compat)
        .await;
    let gem = MockServer::start().await;
    if gemini_up {
        Mock::given(method("POST"))
            .respond_with(gemini)
            .mount(&gem)
            .await;
    } else {
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(503).set_body_json(json!({"error": {
                "code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}})))
            .mount(&gem)
            .await;
    }
    let openai = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-O", "object": "chat.completion", "created": 1, "model": "gpt-4.1",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "done"},
                         "finish_reason": "stop"}]})))
        .mount(&openai)
        .await;
    let claude = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 2}})))
        .mount(&claude)
        .await;
    Upstreams {
        compat,
        gemini: gem,
        openai,
        claude,
    }
}

async fn gateway(up: &Upstreams) -> Running {
    let mut c = format!(
        r#"
[providers.compat]
kind = "openai_compatible"
base_url = "{compat}/v1beta/openai"
model = "gemini-3-flash"

[providers.gem]
kind = "gemini"
base_url = "{gemini}/v1beta"
model = "gemini-3-pro-preview"
[providers.gem.breaker]
failure_threshold = 100

[providers.oai]
kind = "openai"
base_url = "{openai}/v1"
model = "gpt-4.1"

[providers.claude]
kind = "anthropic"
base_url = "{claude}/v1"
model = "claude-sonnet-4-5"
"#,
        compat = up.compat.uri(),
        gemini = up.gemini.uri(),
        openai = up.openai.uri(),
        claude = up.claude.uri(),
    );
    c.push_str(&support::policy("compat", &["compat"], "first_token"));
    c.push_str(&support::policy("gem", &["gem"], "first_token"));
    c.push_str(&support::policy(
        "gem-then-oai",
        &["gem", "oai"],
        "first_token",
    ));
    c.push_str(&support::policy(
        "gem-then-claude",
        &["gem", "claude"],
        "first_token",
    ));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    Running::start(&c).await
}

const TOOLS: &str = r#"[
    {"type": "function", "function": {"name": "fa", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "fb", "parameters": {"type": "object", "properties": {"b": {"type": "integer"}}}}}
]"#;

fn request(model: &str, messages: Value, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "messages": messages,
           "tools": serde_json::from_str::<Value>(TOOLS).unwrap()})
}

async fn post(gw: &Running, body: &Value) -> reqwest::Response {
    let resp = gw
        .http
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_A)
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    resp
}

/// A streamed answer's chunks.
async fn chunks(resp: reqwest::Response) -> Vec<Value> {
    let text = resp.text().await.unwrap();
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    text.split("\n\n")
        .filter_map(|ev| ev.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

/// Every tool-call delta of a stream, in order.
fn call_deltas(chunks: &[Value]) -> Vec<Value> {
    chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].as_array())
        .flatten()
        .cloned()
        .collect()
}

/// The assistant message a client builds from the deltas, as the openai
/// SDK's stream helper does: a call's arguments concatenated, every other
/// member as the deltas gave it.
fn assembled(deltas: &[Value]) -> Value {
    let mut calls: Vec<Map<String, Value>> = Vec::new();
    for d in deltas {
        let i = d["index"].as_u64().unwrap() as usize;
        if calls.len() <= i {
            calls.resize_with(i + 1, Map::new);
        }
        let call = &mut calls[i];
        for (k, v) in d.as_object().unwrap() {
            match k.as_str() {
                "index" => {}
                "function" => {
                    let f = call.entry("function").or_insert_with(|| json!({}));
                    for (fk, fv) in v.as_object().unwrap() {
                        match (fk.as_str(), f.get_mut(fk)) {
                            ("arguments", Some(Value::String(a))) => {
                                a.push_str(fv.as_str().unwrap())
                            }
                            _ => f[fk] = fv.clone(),
                        }
                    }
                }
                _ => {
                    call.insert(k.clone(), v.clone());
                }
            }
        }
    }
    json!({"role": "assistant", "content": null, "tool_calls": calls})
}

/// The conversation's second turn: the assistant message as the client
/// got it, and a result for each of its calls.
fn second_turn(assistant: &Value) -> Value {
    let mut messages = vec![
        json!({"role": "user", "content": "Do fa and fb."}),
        assistant.clone(),
    ];
    for call in assistant["tool_calls"].as_array().unwrap() {
        messages.push(json!({"role": "tool", "tool_call_id": call["id"], "content": "ok"}));
    }
    Value::Array(messages)
}

fn first_turn() -> Value {
    json!([{"role": "user", "content": "Do fa and fb."}])
}

// ---- the probe's repro (finding 2) ----

/// The probe's `repro_extra_content.sh`, through an `openai_compatible`
/// provider: the members of each call reach the client in a plain answer
/// and in the stream exactly as the provider sent them (in its order), and
/// a history that carries them reaches the provider as the client sent it.
#[tokio::test]
async fn a_tool_calls_other_members_pass_through_a_compatible_provider_both_ways() {
    let up = upstreams(true).await;
    let gw = gateway(&up).await;

    // The plain answer: each call as the provider wrote it.
    let plain: Value = post(&gw, &request("compat", first_turn(), false))
        .await
        .json()
        .await
        .unwrap();
    let got = &plain["choices"][0]["message"]["tool_calls"];
    assert_eq!(got, &compatible_calls(), "{plain}");
    for (got, sent) in got
        .as_array()
        .unwrap()
        .iter()
        .zip(compatible_calls().as_array().unwrap())
    {
        let others = |v: &Value| -> Vec<String> {
            keys(v)
                .into_iter()
                .filter(|k| !["id", "type", "function"].contains(k))
                .map(str::to_owned)
                .collect()
        };
        assert_eq!(others(got), others(sent), "the call's own order");
        assert_eq!(keys(&got["function"]), keys(&sent["function"]));
    }
    assert_eq!(keys(&got[0]["a_last"]), ["z", "b"], "values as sent");

    // Streamed in Google's shape: each call whole in one delta, members
    // included.
    let deltas =
        call_deltas(&chunks(post(&gw, &request("compat", first_turn(), true)).await).await);
    assert_eq!(deltas.len(), 2, "{deltas:?}");
    for (i, (d, sent)) in deltas
        .iter()
        .zip(compatible_calls().as_array().unwrap())
        .enumerate()
    {
        let mut expected = sent.clone();
        expected["index"] = i.into();
        assert_eq!(d, &expected);
    }

    // The history the client sends back: as sent, members and all.
    let assistant = plain["choices"][0]["message"].clone();
    post(&gw, &request("compat", second_turn(&assistant), false)).await;
    let received = up.compat.received_requests().await.unwrap();
    assert_eq!(received.len(), 3, "one request per call");
    let sent_back = body_of(&received[2]);
    assert_eq!(sent_back["messages"][1]["tool_calls"], compatible_calls());
    let call = &sent_back["messages"][1]["tool_calls"][0];
    assert_eq!(
        keys(call),
        [
            "id",
            "type",
            "function",
            "extra_content",
            "x_tc_field",
            "a_last"
        ]
    );
    assert_eq!(
        keys(&call["function"]),
        ["name", "arguments", "x_fn_field", "a_fn"]
    );
}

/// OpenAI's stream shape with a vendor's members on a call's first delta
/// (the one with its id and name) and plain argument pieces after: the
/// first delta carries the members, the pieces nothing more, and a client
/// that assembles the deltas has the calls the provider made.
#[tokio::test]
async fn a_calls_first_delta_carries_its_members_in_a_numbered_stream() {
    let up = upstreams(true).await;
    let gw = gateway(&up).await;
    let turn = json!([{"role": "user", "content": "numbered, please: do fa and fb."}]);
    let deltas = call_deltas(&chunks(post(&gw, &request("compat", turn, true)).await).await);
    assert_eq!(deltas.len(), 6, "{deltas:?}");
    assert_eq!(
        deltas[0],
        json!({"index": 0, "id": "function-call-1", "type": "function",
               "function": {"name": "fa", "arguments": "", "x_fn_field": 1, "a_fn": [true]},
               "extra_content": signature(SIG_ONE), "x_tc_field": "TC", "a_last": {"z": 1, "b": 2}})
    );
    assert_eq!(
        deltas[1],
        json!({"index": 0, "function": {"arguments": "{\"a"}})
    );
    assert_eq!(deltas[3]["extra_content"], signature(SIG_TWO));
    let assistant = assembled(&deltas);
    assert_eq!(assistant["tool_calls"], compatible_calls());
}

// ---- Gemini's native API ----

/// Two turns of a tool loop with Gemini 3 through the native dialect,
/// plain and streamed: the client gets the signature where Google's
/// OpenAI-compatible endpoint puts it, sends the assistant message back as
/// it got it, and Gemini gets the signature on the `functionCall` part it
/// came on — the first call's, not the second's.
#[tokio::test]
async fn a_gemini_thought_signature_goes_back_on_its_function_call_part() {
    let up = upstreams(true).await;
    let gw = gateway(&up).await;

    for stream in [false, true] {
        let resp = post(&gw, &request("gem", first_turn(), stream)).await;
        let assistant = if stream {
            let deltas = call_deltas(&chunks(resp).await);
            assert_eq!(deltas.len(), 2, "{deltas:?}");
            assert_eq!(deltas[0]["extra_content"], signature(SIG_ONE), "{deltas:?}");
            assert!(deltas[1].get("extra_content").is_none(), "{deltas:?}");
            assembled(&deltas)
        } else {
            let body: Value = resp.json().await.unwrap();
            body["choices"][0]["message"].clone()
        };
        let calls = assistant["tool_calls"].as_array().unwrap();
        assert_eq!(calls[0]["extra_content"], signature(SIG_ONE), "{assistant}");
        assert_eq!(
            keys(&calls[1]),
            ["id", "type", "function"],
            "no signature made up for the second call"
        );

        post(&gw, &request("gem", second_turn(&assistant), stream)).await;
    }
    let received = up.gemini.received_requests().await.unwrap();
    assert_eq!(received.len(), 4, "two turns, twice");
    for turn in [&received[0], &received[2]] {
        assert!(!body_of(turn).to_string().contains("thoughtSignature"));
    }
    for turn in [&received[1], &received[3]] {
        let body = body_of(turn);
        assert_eq!(body["contents"][1], signed_model_turn(), "{body}");
    }
}

// ---- a signature is Gemini's ----

/// A conversation Gemini started falls back to OpenAI and to Anthropic:
/// neither gets the signature (OpenAI may refuse a member it does not
/// know; Anthropic's wire has no place for it), both answer, and a vendor
/// member that is not Google's still goes to the OpenAI-kind provider as
/// sent. Gemini's own share of `extra_content` is all that is left out.
#[tokio::test]
async fn a_gemini_signature_stays_with_gemini_when_the_conversation_falls_back() {
    let up = upstreams(false).await;
    let gw = gateway(&up).await;
    let mut signed = json!({"google": {"thought_signature": SIG_ONE}, "other": {"k": 1}});
    let assistant = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "fa", "arguments": "{\"a\":1}"},
         "extra_content": signed.clone(), "x_tc_field": "TC"},
        {"id": "call_2", "type": "function", "function": {"name": "fb", "arguments": "{\"b\":2}"},
         "extra_content": signature(SIG_TWO)}
    ]});

    for (policy, answered) in [("gem-then-oai", "oai"), ("gem-then-claude", "claude")] {
        let resp = post(&gw, &request(policy, second_turn(&assistant), false)).await;
        assert_eq!(resp.headers()["x-handover-provider"], answered);
        assert!(
            resp.headers()["x-handover-attempts"]
                .to_str()
                .unwrap()
                .starts_with("gem=overloaded"),
        );
    }

    let to_openai = up.openai.received_requests().await.unwrap();
    assert_eq!(to_openai.len(), 1);
    let calls = body_of(&to_openai[0])["messages"][1]["tool_calls"].clone();
    signed.as_object_mut().unwrap().shift_remove("google");
    assert_eq!(
        calls,
        json!([
            {"id": "call_1", "type": "function", "function": {"name": "fa", "arguments": "{\"a\":1}"},
             "extra_content": signed, "x_tc_field": "TC"},
            {"id": "call_2", "type": "function", "function": {"name": "fb", "arguments": "{\"b\":2}"}}
        ])
    );
    let to_claude = up.claude.received_requests().await.unwrap();
    assert_eq!(to_claude.len(), 1);
    let text = body_of(&to_claude[0]).to_string();
    assert!(!text.contains("SIG_") && !text.contains("TC"), "{text}");
    assert!(text.contains("tool_use"), "{text}");
    // Gemini itself was asked both times and got the signature both times.
    let to_gemini = up.gemini.received_requests().await.unwrap();
    assert_eq!(to_gemini.len(), 2);
    for r in &to_gemini {
        let body = body_of(r);
        assert_eq!(
            body["contents"][1]["parts"][0]["thoughtSignature"], SIG_ONE,
            "{body}"
        );
        assert_eq!(
            body["contents"][1]["parts"][1]["thoughtSignature"], SIG_TWO,
            "{body}"
        );
    }
}

// ---- the official openai client ----

/// The official `openai` Python client in a two-turn tool loop, sending
/// the assistant message back as it got it (the SDK keeps a tool call's
/// unknown members as model extras and writes them back), plain and
/// through its stream helper, against Google's OpenAI-compatible endpoint
/// and the native API: each upstream gets its signatures back where it
/// wants them. Skipped (said so) without `HANDOVER_TEST_PYTHON`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_sends_the_signature_back_through_the_gateway() {
    let Ok(python) = std::env::var("HANDOVER_TEST_PYTHON") else {
        println!("SKIPPED: set HANDOVER_TEST_PYTHON to a python with the `openai` package");
        return;
    };
    let up = upstreams(true).await;
    let gw = gateway(&up).await;
    let out =
        support::python_scenarios(&python, "tool_call_fields.py", &[&gw.base, CLIENT_A]).await;
    for scenario in ["compat_plain", "compat_stream"] {
        let r = out.get(scenario);
        assert_eq!(
            r["kept"],
            json!([signature(SIG_ONE), signature(SIG_TWO)]),
            "{r}"
        );
        assert_eq!(r["answer"], "done", "{r}");
    }
    for scenario in ["gem_plain", "gem_stream"] {
        let r = out.get(scenario);
        assert_eq!(r["kept"], json!([signature(SIG_ONE), null]), "{r}");
        assert_eq!(r["answer"], "done", "{r}");
    }

    let compat = up.compat.received_requests().await.unwrap();
    assert_eq!(compat.len(), 4);
    for second in [&compat[1], &compat[3]] {
        let body = body_of(second);
        let calls = body["messages"][1]["tool_calls"]
            .as_array()
            .unwrap()
            .clone();
        let sigs: Vec<&Value> = calls.iter().map(|c| &c["extra_content"]).collect();
        assert_eq!(sigs, [&signature(SIG_ONE), &signature(SIG_TWO)], "{body}");
        assert_eq!(calls[0]["x_tc_field"], "TC", "{body}");
        assert_eq!(calls[0]["function"]["x_fn_field"], 1, "{body}");
    }
    let gemini = up.gemini.received_requests().await.unwrap();
    assert_eq!(gemini.len(), 4);
    for second in [&gemini[1], &gemini[3]] {
        let body = body_of(second);
        assert_eq!(body["contents"][1], signed_model_turn(), "{body}");
    }
}
