//! The gateway as a drop-in for the OpenAI API (issue 20): every request
//! parameter reaches the provider as sent, the provider's answer and its
//! stream chunks come back whole, and a request a provider cannot honour
//! as sent skips that provider (or fails naming the parameter) instead of
//! reaching it weakened. Effects are counted at the wiremock upstream.

use crate::support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, Running};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

async fn upstream(body: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(body)
        .mount(&server)
        .await;
    server
}

fn provider(name: &str, kind: &str, server: &MockServer) -> String {
    format!(
        "\n[providers.{name}]\nkind = \"{kind}\"\nbase_url = \"{}/v1\"\nmodel = \"{name}-model\"\n",
        server.uri()
    )
}

async fn gateway(providers: &str, chain: &[&str]) -> Running {
    let mut c = providers.to_owned();
    c.push_str(&support::policy("default", chain, "first_token"));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    Running::start(&c).await
}

async fn post(gw: &Running, body: &Value) -> reqwest::Response {
    gw.chat(body).await
}

async fn received(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

fn completion() -> Value {
    json!({
        "id": "chatcmpl-upstream-1",
        "object": "chat.completion",
        "created": 1_764_000_000,
        "model": "p-model-2026-01-01",
        "system_fingerprint": "fp_abc",
        "service_tier": "default",
        "x_vendor_top": {"kept": true},
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "{\"city\":\"Oslo\"}",
                "refusal": null,
                "annotations": [{"type": "url_citation", "url_citation": {"url": "https://example.invalid", "title": "t", "start_index": 0, "end_index": 3}}],
            },
            "logprobs": {"content": [{"token": "{", "logprob": -0.01, "bytes": [123], "top_logprobs": []}], "refusal": null},
            "finish_reason": "stop",
        }],
        "usage": {
            "prompt_tokens": 12,
            "completion_tokens": 5,
            "total_tokens": 17,
            "prompt_tokens_details": {"cached_tokens": 4, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 1, "rejected_prediction_tokens": 0},
        },
    })
}

/// A request using every documented parameter (and vendor fields at every level).
fn everything() -> Value {
    json!({
        "model": "default",
        "messages": [
            {"role": "system", "content": "Answer in JSON.", "name": "rules"},
            {"role": "user", "content": [
                {"type": "text", "text": "Where is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
            ], "x_vendor_message": 1},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{}"}}], "refusal": null},
            {"role": "tool", "tool_call_id": "call_1", "content": "a fjord"},
        ],
        "tools": [{"type": "function", "function": {
            "name": "look", "description": "Look it up", "strict": true,
            "parameters": {"type": "object", "properties": {}, "additionalProperties": false, "required": []},
            "x_vendor_function": "kept",
        }}],
        "tool_choice": {"type": "function", "function": {"name": "look"}},
        "parallel_tool_calls": false,
        "response_format": {"type": "json_schema", "json_schema": {"name": "place", "strict": true,
            "schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}}},
        "reasoning_effort": "low",
        "logprobs": true,
        "top_logprobs": 2,
        "frequency_penalty": 0.5,
        "presence_penalty": -0.5,
        "logit_bias": {"50256": -100},
        "metadata": {"run": "r-1"},
        "store": false,
        "service_tier": "auto",
        "prediction": {"type": "content", "content": "{\"city\""},
        "modalities": ["text"],
        "max_completion_tokens": 300,
        "temperature": 0.5,
        "top_p": 0.25,
        "seed": 7,
        "stop": ["\n\n"],
        "user": "end-user-9",
        "verbosity": "low",
        "web_search_options": {},
        "x_vendor_flag": {"nested": [1, 2.5, "three"]},
    })
}

#[tokio::test]
async fn every_parameter_reaches_the_provider_as_sent() {
    let server = upstream(ResponseTemplate::new(200).set_body_json(completion())).await;
    let gw = gateway(&provider("p", "openai", &server), &["p"]).await;
    let sent = everything();
    let resp = post(&gw, &sent).await;
    assert_eq!(resp.status(), StatusCode::OK);

    let got = received(&server).await;
    assert_eq!(got.len(), 1, "exactly one request upstream");
    let mut want = sent.clone();
    want["model"] = json!("p-model"); // the policy's provider model, not the alias
    want["stream"] = json!(false);
    assert_eq!(got[0], want, "the upstream body is the client's body");
}

/// A structured-output schema is generated in its key order ("reasoning"
/// before "answer": think, then answer), so every object reaches the
/// provider with its members in the order the client wrote them, at every
/// depth: compared as bytes at the mock, not as parsed values.
#[tokio::test]
async fn objects_reach_the_provider_with_their_members_in_the_clients_order() {
    let server = upstream(ResponseTemplate::new(200).set_body_json(completion())).await;
    let gw = gateway(&provider("p", "openai", &server), &["p"]).await;
    let schema = r#"{"type":"object","properties":{"reasoning":{"type":"string"},"answer":{"type":"string"}},"required":["reasoning","answer"],"additionalProperties":false}"#;
    let params =
        r#"{"type":"object","properties":{"zip":{"type":"string"},"city":{"type":"string"}}}"#;
    let vendor = r#"{"z":1,"a":{"y":2,"b":3}}"#;
    let body = format!(
        r#"{{"model":"default","messages":[{{"role":"user","content":"hi"}}],"response_format":{{"type":"json_schema","json_schema":{{"name":"Ans","strict":true,"schema":{schema}}}}},"tools":[{{"type":"function","function":{{"name":"look","parameters":{params}}}}}],"x_vendor":{vendor}}}"#
    );
    let resp = gw
        .http
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_A)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let got = server.received_requests().await.unwrap_or_default();
    assert_eq!(got.len(), 1, "exactly one request upstream");
    let raw = String::from_utf8(got[0].body.clone()).unwrap();
    for part in [
        schema,
        params,
        vendor,
        r#""json_schema":{"name":"Ans","strict":true,"schema":"#,
    ] {
        assert!(raw.contains(part), "{part} not as sent in {raw}");
    }
}

#[tokio::test]
async fn the_answer_passes_through_whole() {
    let server = upstream(ResponseTemplate::new(200).set_body_json(completion())).await;
    let gw = gateway(&provider("p", "openai_compatible", &server), &["p"]).await;
    let resp = post(
        &gw,
        &json!({"model": "default", "messages": [{"role": "user", "content": "where?"}]}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(
        answer,
        completion(),
        "id, refusal, annotations, logprobs, usage details, vendor fields"
    );
}

fn chunk(extra: Value) -> String {
    let mut c = json!({
        "id": "chatcmpl-upstream-2", "object": "chat.completion.chunk", "created": 1_764_000_001,
        "model": "p-model-2026-01-01", "system_fingerprint": "fp_abc", "service_tier": "default",
        "choices": [],
    });
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    format!("data: {c}\n\n")
}

/// The chunks of a chat completion stream (`[DONE]` left out).
fn chunks_of(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

/// The text of a streamed chat completion through `gw`.
async fn streamed(gw: &Running) -> String {
    let ask = json!({"model": "default", "stream": true,
        "messages": [{"role": "user", "content": "hi"}]});
    post(gw, &ask).await.text().await.unwrap()
}

#[tokio::test]
async fn stream_chunks_pass_through_with_one_model_and_id() {
    let lp = |t: &str| json!({"content": [{"token": t, "logprob": -0.5, "bytes": null, "top_logprobs": []}], "refusal": null});
    let body = [
        chunk(json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "", "refusal": null}, "logprobs": null, "finish_reason": null}]})),
        chunk(json!({"choices": [{"index": 0, "delta": {"content": "Hel"}, "logprobs": lp("Hel"), "finish_reason": null}]})),
        chunk(json!({"choices": [{"index": 0, "delta": {"content": "lo"}, "logprobs": lp("lo"), "finish_reason": null}]})),
        chunk(json!({"choices": [{"index": 0, "delta": {}, "logprobs": null, "finish_reason": "stop"}]})),
        chunk(json!({"usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5,
            "completion_tokens_details": {"reasoning_tokens": 0, "accepted_prediction_tokens": 0}}})),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let server =
        upstream(ResponseTemplate::new(200).set_body_raw(body.into_bytes(), "text/event-stream"))
            .await;
    let gw = gateway(&provider("p", "openai", &server), &["p"]).await;
    let resp = post(
        &gw,
        &json!({"model": "default", "stream": true, "stream_options": {"include_usage": true},
            "logprobs": true, "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let text = resp.text().await.unwrap();
    let chunks: Vec<Value> = text
        .split("\n\n")
        .filter_map(|ev| ev.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(text.contains("data: [DONE]"), "{text}");
    for c in &chunks {
        assert_eq!(
            c["model"], "p-model-2026-01-01",
            "every chunk, the first included: {c}"
        );
        assert_eq!(c["id"], "chatcmpl-upstream-2", "{c}");
        assert_eq!(c["created"], 1_764_000_001, "the provider's: {c}");
        assert_eq!(c["system_fingerprint"], "fp_abc", "{c}");
        assert_eq!(c["service_tier"], "default", "{c}");
    }
    let tokens: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["logprobs"]["content"][0]["token"].as_str())
        .collect();
    assert_eq!(tokens, ["Hel", "lo"]);
    // Each piece's log probabilities travel in the chunk with its text, as
    // the provider sent them.
    let paired: Vec<(&str, &str)> = chunks
        .iter()
        .filter_map(|c| {
            let choice = &c["choices"][0];
            let token = choice["logprobs"]["content"][0]["token"].as_str()?;
            Some((choice["delta"]["content"].as_str()?, token))
        })
        .collect();
    assert_eq!(paired, [("Hel", "Hel"), ("lo", "lo")]);
    let usage = chunks.iter().find_map(|c| c.get("usage")).unwrap();
    assert_eq!(
        usage["completion_tokens_details"]["accepted_prediction_tokens"], 0,
        "{usage}"
    );
    assert_eq!(usage["total_tokens"], 5);
}

#[tokio::test]
async fn a_provider_that_cannot_honour_the_request_is_skipped_not_weakened() {
    let weak = upstream(ResponseTemplate::new(200).set_body_json(completion())).await;
    let strong = upstream(ResponseTemplate::new(200).set_body_json(completion())).await;
    let providers = provider("weak", "deepseek", &weak) + &provider("strong", "openai", &strong);
    let gw = gateway(&providers, &["weak", "strong"]).await;
    let schema =
        json!({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}});
    let resp = post(
        &gw,
        &json!({"model": "default", "response_format": schema,
            "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let attempts = resp.headers()["x-handover-attempts"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(attempts.contains("weak=skipped_unsupported"), "{attempts}");
    assert_eq!(
        received(&weak).await.len(),
        0,
        "never given a weaker request"
    );
    assert_eq!(received(&strong).await[0]["response_format"], schema);

    // JSON mode is something DeepSeek honours: it is tried first.
    let resp = post(
        &gw,
        &json!({"model": "default", "response_format": {"type": "json_object"},
            "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(received(&weak).await.len(), 1);
}

#[tokio::test]
async fn no_provider_left_is_a_400_naming_the_parameter_and_the_providers() {
    let weak = upstream(ResponseTemplate::new(200).set_body_json(completion())).await;
    let gw = gateway(&provider("weak", "deepseek", &weak), &["weak"]).await;
    let resp = post(
        &gw,
        &json!({"model": "default", "reasoning_effort": "high",
            "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unsupported_parameter", "{body}");
    assert_eq!(body["error"]["param"], "reasoning_effort", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("weak"), "{message}");
    assert_eq!(received(&weak).await.len(), 0, "nothing was sent");
}

#[tokio::test]
async fn a_providers_declared_capabilities_override_its_kinds() {
    // An OpenAI-compatible server without structured outputs, and a
    // DeepSeek deployment declared to take `reasoning_effort`.
    let plain = upstream(ResponseTemplate::new(200).set_body_json(completion())).await;
    let thinker = upstream(ResponseTemplate::new(200).set_body_json(completion())).await;
    let providers = provider("plain", "openai_compatible", &plain)
        + "supports = { structured_outputs = false }\n"
        + &provider("thinker", "deepseek", &thinker)
        + "supports = { reasoning_effort = true }\n";
    let gw = gateway(&providers, &["plain", "thinker"]).await;

    let resp = post(
        &gw,
        &json!({"model": "default", "reasoning_effort": "high",
            "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(
        resp.status(),
        StatusCode::OK,
        "the kind's default for plain"
    );
    assert_eq!(received(&plain).await[0]["reasoning_effort"], "high");

    let tool = json!({"type": "function", "function": {"name": "f", "strict": true,
        "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}});
    let resp = post(
        &gw,
        &json!({"model": "default", "tools": [tool],
            "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unsupported_parameter", "{body}");
    assert_eq!(body["error"]["param"], "tools[0].function.strict", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("plain") && message.contains("thinker"),
        "{message}"
    );
    assert_eq!(received(&plain).await.len(), 1, "nothing more was sent");
    assert_eq!(received(&thinker).await.len(), 0);

    // Declared on: DeepSeek receives reasoning_effort once plain is skipped.
    let gw = gateway(&providers, &["thinker"]).await;
    let resp = post(
        &gw,
        &json!({"model": "default", "reasoning_effort": "low",
            "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(received(&thinker).await[0]["reasoning_effort"], "low");
}

/// A 200 without a choice (`choices` empty, or absent) is not an answer:
/// the gateway does not make one up, it goes on to the next provider.
/// An answer whose provider gave no finish reason keeps `null`: it is not
/// reported as a complete `stop`.
#[tokio::test]
async fn no_choice_is_no_answer_and_no_finish_reason_is_not_stop() {
    for broken in [json!({"id": "x", "choices": []}), json!({"id": "x"})] {
        let empty = upstream(ResponseTemplate::new(200).set_body_json(broken.clone())).await;
        let good = upstream(ResponseTemplate::new(200).set_body_json(completion())).await;
        let providers = provider("e", "openai", &empty) + &provider("g", "openai", &good);
        let gw = gateway(&providers, &["e", "g"]).await;
        let resp = post(&gw, &everything()).await;
        assert_eq!(resp.status(), StatusCode::OK, "{broken}");
        let attempts = resp.headers()["x-handover-attempts"].to_str().unwrap();
        assert!(attempts.starts_with("e=decode"), "{broken}: {attempts}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(
            body["choices"][0]["message"]["content"],
            "{\"city\":\"Oslo\"}"
        );
        assert_eq!(received(&empty).await.len(), 1, "{broken}");
        assert_eq!(received(&good).await.len(), 1, "{broken}");
    }

    let mut unfinished = completion();
    unfinished["choices"][0]["finish_reason"] = Value::Null;
    let server = upstream(ResponseTemplate::new(200).set_body_json(unfinished)).await;
    let gw = gateway(&provider("p", "openai", &server), &["p"]).await;
    let body: Value = post(&gw, &everything()).await.json().await.unwrap();
    assert_eq!(body["choices"][0]["finish_reason"], Value::Null, "{body}");
}

#[tokio::test]
async fn errors_quote_the_start_of_a_huge_value_not_all_of_it() {
    let server = upstream(ResponseTemplate::new(500)).await;
    let gw = gateway(&provider("p", "openai_compatible", &server), &["p"]).await;
    let huge = "m".repeat(100_000);
    let ask = |path: &'static str, body: Value| {
        let gw = &gw;
        async move {
            let resp = gw
                .http
                .post(gw.url(path))
                .bearer_auth(CLIENT_A)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = resp.status();
            let text = resp.text().await.unwrap();
            (status, text)
        }
    };
    let chat = json!({"model": huge, "messages": [{"role": "user", "content": "hi"}]});
    let mut unknown = json!({"model": "default", "input": "hi"});
    unknown[huge.as_str()] = json!(1);
    let typed = json!({"model": "default", "input": "hi", "temperature": huge});
    for (path, body, status) in [
        ("/v1/chat/completions", chat, StatusCode::NOT_FOUND),
        ("/v1/responses", unknown, StatusCode::BAD_REQUEST),
        ("/v1/responses", typed, StatusCode::BAD_REQUEST),
    ] {
        let (got, text) = ask(path, body).await;
        assert_eq!(got, status, "{path}");
        assert!(text.len() < 2_000, "{path}: a {} byte answer", text.len());
        let e: Value = serde_json::from_str(&text).unwrap();
        let message = e["error"]["message"].as_str().unwrap();
        assert!(message.contains("mmmm"), "the start is quoted: {message}");
        assert!(message.ends_with("(cut)"), "and says it is cut: {message}");
    }
    assert_eq!(received(&server).await.len(), 0, "nothing was sent");
}

/// Two parallel tool calls streamed whole, each with its own id and no
/// `index` (as Google's OpenAI-compatible endpoint sends them).
fn calls_without_index() -> String {
    let call = |id: &str, city: &str| {
        chunk(
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"id": id, "type": "function",
            "function": {"name": "get_weather", "arguments": format!("{{\"city\":\"{city}\"}}")}}]},
            "finish_reason": null}]}),
        )
    };
    [
        call("call_N1", "Rome"),
        call("call_N2", "Oslo"),
        chunk(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat()
}

#[tokio::test]
async fn streamed_tool_calls_without_an_index_stay_apart_on_both_doors() {
    let server = upstream(
        ResponseTemplate::new(200)
            .set_body_raw(calls_without_index().into_bytes(), "text/event-stream"),
    )
    .await;
    let gw = gateway(&provider("p", "openai", &server), &["p"]).await;
    // Chat completions: what a client assembling deltas by index gets.
    let text = streamed(&gw).await;
    assert!(text.contains("data: [DONE]"), "{text}");
    let mut calls: Vec<(String, String)> = Vec::new();
    for c in chunks_of(&text) {
        for tc in c["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let i = usize::try_from(tc["index"].as_u64().expect("an index")).unwrap();
            if calls.len() <= i {
                calls.resize(i + 1, Default::default());
            }
            calls[i].0 += tc["id"].as_str().unwrap_or_default();
            calls[i].1 += tc["function"]["arguments"].as_str().unwrap_or_default();
        }
    }
    let two = [
        ("call_N1".to_owned(), r#"{"city":"Rome"}"#.to_owned()),
        ("call_N2".to_owned(), r#"{"city":"Oslo"}"#.to_owned()),
    ];
    assert_eq!(calls, two, "{text}");
    // Responses: the gateway assembles the calls itself.
    let text = gw
        .http
        .post(gw.url("/v1/responses"))
        .bearer_auth(CLIENT_A)
        .json(&json!({"model": "default", "input": "weather?", "stream": true}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let completed = text
        .split("\n\n")
        .find(|ev| ev.lines().any(|l| l == "event: response.completed"))
        .and_then(|ev| ev.lines().find_map(|l| l.strip_prefix("data: ")))
        .unwrap_or_else(|| panic!("no response.completed: {text}"));
    let answer: Value = serde_json::from_str(completed).unwrap();
    let items: Vec<(String, String)> = answer["response"]["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "function_call")
        .map(|i| {
            (
                i["call_id"].as_str().unwrap().to_owned(),
                i["arguments"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(items, two, "{answer}");
}

#[tokio::test]
async fn a_chunk_field_sent_once_stays_on_its_chunk() {
    // Azure's first chunk carries `prompt_filter_results` and no choice;
    // a vendor field rides on one delta only.
    let body = [
        chunk(json!({"id": "", "created": 0, "model": "", "prompt_filter_results": [{"prompt_index": 0}]})),
        chunk(json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "a"}, "finish_reason": null}], "x_once": 1})),
        chunk(json!({"choices": [{"index": 0, "delta": {"content": "b"}, "finish_reason": null}]})),
        chunk(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let server =
        upstream(ResponseTemplate::new(200).set_body_raw(body.into_bytes(), "text/event-stream"))
            .await;
    let gw = gateway(&provider("p", "openai", &server), &["p"]).await;
    let text = streamed(&gw).await;
    let chunks = chunks_of(&text);
    let with = |field: &str| -> Vec<usize> {
        (0..chunks.len())
            .filter(|&i| chunks[i].get(field).is_some())
            .collect()
    };
    let delta = |i: usize| chunks[i]["choices"][0]["delta"]["content"].clone();
    // The opening chunk stands for the provider's first; then "a", "b",
    // the finish.
    assert_eq!(chunks.len(), 4, "{text}");
    assert_eq!(with("prompt_filter_results"), [0], "{text}");
    assert_eq!(with("x_once"), [1], "{text}");
    assert_eq!((delta(1), delta(2)), (json!("a"), json!("b")), "{text}");
    assert!(
        chunks.iter().all(|c| c["service_tier"] == "default"),
        "a field every chunk carries stays on every chunk: {text}"
    );
    assert!(
        chunks.iter().all(|c| c["id"] == "chatcmpl-upstream-2"),
        "one id for the stream, though Azure's first chunk has \"\": {text}"
    );
}

/// The answering provider's request id reaches the client as
/// `x-request-id` (the OpenAI SDKs' `_request_id`), plain and streamed.
#[tokio::test]
async fn the_providers_request_id_is_the_answers_x_request_id() {
    let plain = upstream(
        ResponseTemplate::new(200)
            .insert_header("x-request-id", "req_plain_1")
            .set_body_json(completion()),
    )
    .await;
    let gw = gateway(&provider("p", "openai", &plain), &["p"]).await;
    let resp = post(
        &gw,
        &json!({"model": "default", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(resp.headers()["x-request-id"], "req_plain_1");
    let stream_upstream = upstream(
        ResponseTemplate::new(200)
            .insert_header("x-request-id", "req_stream_1")
            .set_body_raw(calls_without_index().into_bytes(), "text/event-stream"),
    )
    .await;
    let gw = gateway(&provider("s", "openai", &stream_upstream), &["s"]).await;
    let resp = post(
        &gw,
        &json!({"model": "default", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(resp.headers()["x-request-id"], "req_stream_1");
    // A refusal the client must act on names the provider's request too.
    let refusing = upstream(
        ResponseTemplate::new(400)
            .insert_header("x-request-id", "req_refused_1")
            .set_body_json(
                json!({"error": {"message": "bad", "type": "invalid_request_error",
                "param": "messages", "code": null}}),
            ),
    )
    .await;
    let gw = gateway(&provider("r", "openai", &refusing), &["r"]).await;
    let resp = post(
        &gw,
        &json!({"model": "default", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    assert_eq!(resp.headers()["x-request-id"], "req_refused_1");
}
