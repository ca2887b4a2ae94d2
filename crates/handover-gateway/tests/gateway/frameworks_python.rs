//! The four most used Python agent stacks — the official `openai` SDK, the
//! OpenAI Agents SDK, pydantic-ai and langchain-openai, pinned in
//! `tests/python/requirements.txt` — pointed at the gateway by changing
//! only the base URL and key. Every case runs twice, straight against a
//! plain OpenAI-like mock upstream and through the gateway in front of the
//! same mock; the results must be identical, and the mock must receive the
//! same request both times (but for `model` and the stream flags), so no
//! parameter was dropped or changed on the way.
//!
//! Like `openai_python.rs`: skipped (said so) without
//! `HANDOVER_TEST_PYTHON`, failing if it is set and a package is missing.

use crate::support;

use serde_json::{Value, json};
use wiremock::{Request, ResponseTemplate};

const ARGS: &str = r#"{"city":"Oslo","country":"Norway"}"#;

fn text_of(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| m["content"].to_string())
        .collect()
}

/// What the plain upstream answers: a tool call when tools are offered and
/// the conversation asks for one (and has no tool result yet), the JSON
/// object when a JSON answer is asked for, text otherwise; streamed when
/// asked, with log probabilities when asked.
fn reply(req: &Request) -> ResponseTemplate {
    let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
    let text = text_of(&body);
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    let answered = body["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
    let forced =
        matches!(&body["tool_choice"], Value::Object(_)) || body["tool_choice"] == "required";
    let call =
        (!tools.is_empty() && !answered && (forced || text.contains("CASE:tool"))).then(|| {
            tools[0]["function"]["name"]
                .as_str()
                .unwrap_or("tool")
                .to_owned()
        });
    let json_wanted =
        body.get("response_format").is_some() || text.contains("json") || text.contains("JSON");
    let content = if call.is_some() {
        None
    } else if json_wanted {
        Some(ARGS.to_owned())
    } else {
        Some("It is sunny in Oslo.".to_owned())
    };
    let logprobs = body["logprobs"] == true;
    if body["stream"] == true {
        return ResponseTemplate::new(200).set_body_raw(
            sse(call.as_deref(), content.as_deref(), logprobs, &body),
            "text/event-stream",
        );
    }
    let lp = |t: &str| json!({"content": [{"token": t, "logprob": -0.25, "bytes": t.as_bytes(), "top_logprobs": []}], "refusal": null});
    let message = match &call {
        Some(name) => json!({"role": "assistant", "content": null, "refusal": null,
            "tool_calls": [{"id": "call_up_1", "type": "function", "function": {"name": name, "arguments": ARGS}}]}),
        None => {
            json!({"role": "assistant", "content": content, "refusal": null, "annotations": []})
        }
    };
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-mock", "object": "chat.completion", "created": 1_764_000_000,
        "model": "mock-model-2026", "system_fingerprint": "fp_mock", "service_tier": "default",
        "choices": [{"index": 0, "message": message,
            "logprobs": if logprobs { lp(content.as_deref().unwrap_or("")) } else { Value::Null },
            "finish_reason": if call.is_some() { "tool_calls" } else { "stop" }}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18,
            "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}},
    }))
}

fn sse(call: Option<&str>, content: Option<&str>, logprobs: bool, body: &Value) -> Vec<u8> {
    let chunk = |choices: Value, usage: Value| {
        let c = json!({"id": "chatcmpl-mock-s", "object": "chat.completion.chunk", "created": 1_764_000_000,
            "model": "mock-model-2026", "system_fingerprint": "fp_mock", "choices": choices, "usage": usage});
        format!("data: {c}\n\n")
    };
    let one = |delta: Value, finish: Value, lp: Value| {
        chunk(
            json!([{"index": 0, "delta": delta, "logprobs": lp, "finish_reason": finish}]),
            Value::Null,
        )
    };
    let mut out = vec![one(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
        Value::Null,
    )];
    if let Some(name) = call {
        out.push(one(
            json!({"tool_calls": [{"index": 0, "id": "call_up_1", "type": "function",
            "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
            Value::Null,
        ));
        let (a, b) = ARGS.split_at(10);
        for piece in [a, b] {
            out.push(one(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
                Value::Null,
                Value::Null,
            ));
        }
        out.push(one(json!({}), json!("tool_calls"), Value::Null));
    } else {
        let text = content.unwrap_or_default();
        let (a, b) = text.split_at(text.len() / 2);
        for piece in [a, b] {
            let lp = if logprobs {
                json!({"content": [{"token": piece, "logprob": -0.25, "bytes": piece.as_bytes(), "top_logprobs": []}]})
            } else {
                Value::Null
            };
            out.push(one(json!({"content": piece}), Value::Null, lp));
        }
        out.push(one(json!({}), json!("stop"), Value::Null));
    }
    if body["stream_options"]["include_usage"] == true {
        out.push(chunk(
            json!([]),
            json!({"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}),
        ));
    }
    out.push("data: [DONE]\n\n".to_owned());
    out.concat().into_bytes()
}

/// The request as the upstream saw it, without what legitimately differs.
fn normalized(r: &Request) -> Value {
    let mut v: Value = serde_json::from_slice(&r.body).unwrap();
    if let Some(o) = v.as_object_mut() {
        for k in ["model", "stream", "stream_options"] {
            o.remove(k);
        }
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_frameworks_behave_through_the_gateway_as_against_the_upstream() {
    let Ok(python) = std::env::var("HANDOVER_TEST_PYTHON") else {
        println!(
            "SKIPPED: set HANDOVER_TEST_PYTHON to a python with tests/python/requirements.txt"
        );
        return;
    };
    let (gw, upstream) = support::one_provider_of("openai", reply).await;

    let (results, stdout) = support::python_cases(&python, "frameworks.py", &upstream, &gw).await;
    assert!(results.len() >= 20, "{stdout}");
    // Every chunk whole, the first naming the same model as the rest.
    let chunks = results["openai_stream_chunks"]["gateway"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(chunks.len() >= 4, "{chunks:?}");
    for c in &chunks {
        assert_eq!(c["model"], "mock-model-2026", "{c}");
        assert_eq!(c["id"], "chatcmpl-mock-s", "{c}");
        assert_eq!(c["system_fingerprint"], "fp_mock", "{c}");
    }
    assert!(
        chunks
            .iter()
            .any(|c| c["choices"][0]["logprobs"]["content"][0]["logprob"] == -0.25),
        "{chunks:?}"
    );
    assert_eq!(
        results["langchain_stream"]["gateway"]["models"],
        json!(["mock-model-2026"])
    );
    assert_eq!(
        results["agents_chat_output_type"]["gateway"],
        json!({"city": "Oslo", "country": "Norway"})
    );
    let streamed = &results["agents_responses_streamed"]["gateway"];
    assert_eq!(streamed["output"], "It is sunny in Oslo.", "{streamed}");
    assert_eq!(streamed["saw_text_delta"], true, "{streamed}");
    assert_eq!(streamed["saw_args_delta"], true, "{streamed}");
    let parsed = &results["openai_responses_parse"]["gateway"];
    assert_eq!(
        parsed["parsed"],
        json!({"city": "Oslo", "country": "Norway"})
    );
    assert_eq!(parsed["store"], false);
    for (case, by) in &results {
        let gateway = by
            .get("gateway")
            .unwrap_or_else(|| panic!("{case}: no gateway run"));
        assert!(gateway.get("error").is_none(), "{case}: {gateway}");
        if let Some(direct) = by.get("direct") {
            assert!(direct.get("error").is_none(), "{case} (direct): {direct}");
            assert_eq!(
                gateway, direct,
                "{case}: the gateway must behave as the upstream does"
            );
        }
    }

    // The upstream saw the same requests from the gateway as from the
    // clients directly (the SDKs send a user agent; the gateway does not).
    let received = upstream.received_requests().await.unwrap();
    let (direct, via): (Vec<&Request>, Vec<&Request>) = received
        .iter()
        .partition(|r| r.headers.get("user-agent").is_some());
    let direct: Vec<Value> = direct.into_iter().map(normalized).collect();
    let via: Vec<Value> = via
        .into_iter()
        .map(normalized)
        .filter(|b| !text_of(b).contains("CASE:gateway_only"))
        .collect();
    assert_eq!(
        direct.len(),
        via.len(),
        "as many requests upstream either way"
    );
    for (d, g) in direct.iter().zip(&via) {
        assert_eq!(
            g, d,
            "the upstream request through the gateway is the client's"
        );
    }
}
