//! The official `openai` Python SDK's `responses.create` / `parse` (plain,
//! streamed, with a function tool and its result, with a `text.format`
//! JSON schema) straight against a Responses-speaking mock upstream and
//! through `handover serve` in front of it, the gateway's provider
//! configured with `api = "responses"`. Results must be identical, and
//! the upstream must receive the same request either way (but for the
//! model and `store: false`), so nothing was lost between the two
//! translations. A failing Responses provider falls back to a Chat
//! Completions provider in the same chain, each counted at its mock.
//!
//! Like `openai_python.rs`: skipped (said so) without
//! `HANDOVER_TEST_PYTHON`, failing if it is set and a package is missing.

use crate::support;

use serde_json::{Value, json};
use support::Running;
use support::responses_upstream::{self as up, ARGS, CALL_ID, MODEL, TEXT, mock, provider};
use wiremock::{Request, ResponseTemplate};

/// The request as the upstream saw it, without what legitimately differs:
/// the model, `store` (the gateway always sends `false`), `stream: false`,
/// and the two spellings of a user message (a bare string, an item
/// without `type`).
fn normalized(r: &Request) -> Value {
    let mut v: Value = serde_json::from_slice(&r.body).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("model");
    o.remove("store");
    if o.get("stream") == Some(&json!(false)) {
        o.remove("stream");
    }
    if let Some(Value::String(s)) = o.get("input") {
        let item = json!([{"type": "message", "role": "user", "content": s}]);
        o.insert("input".into(), item);
    }
    for item in o["input"].as_array_mut().into_iter().flatten() {
        if item.get("role").is_some() && item.get("type").is_none() {
            item["type"] = "message".into();
        }
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdks_responses_api_behaves_through_the_gateway_as_against_openai() {
    let Ok(python) = std::env::var("HANDOVER_TEST_PYTHON") else {
        println!("SKIPPED: set HANDOVER_TEST_PYTHON to a python with the `openai` package");
        return;
    };
    let upstream = mock("/v1/responses", up::reply).await;
    let overloaded = json!({"error": {"message": "Server overloaded, please try again later",
        "type": "server_error", "param": null, "code": null}});
    let down = mock(
        "/v1/responses",
        ResponseTemplate::new(503).set_body_json(overloaded),
    )
    .await;
    let chat = mock(
        "/v1/chat/completions",
        up::chat_completion("chat-model-v2", "from chat"),
    )
    .await;
    let mut c = provider("up", "responses", &upstream);
    c.push_str(&provider("down", "responses", &down));
    c.push_str(&provider("chat", "chat_completions", &chat));
    c.push_str(&support::policy("default", &["up"], "first_token"));
    c.push_str(&support::policy(
        "fallback",
        &["down", "chat"],
        "first_token",
    ));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    let gw = Running::start(&c).await;

    let (results, stdout) =
        support::python_cases(&python, "responses_upstream.py", &upstream, &gw).await;
    assert_eq!(results.len(), 7, "{stdout}");
    for (case, by) in &results {
        let gateway = &by["gateway"];
        assert!(gateway.get("error").is_none(), "{case}: {gateway}");
        if let Some(direct) = by.get("direct") {
            assert!(direct.get("error").is_none(), "{case} (direct): {direct}");
            assert_eq!(
                gateway, direct,
                "{case}: the gateway must behave as the upstream does"
            );
        }
    }
    // What the cases saw, so an upstream that answered nothing fails too.
    let r = |case: &str| &results[case]["gateway"];
    let use_ = json!({"input": 11, "cached": 3, "output": 7, "reasoning": 2, "total": 18});
    assert_eq!(
        r("plain"),
        &json!({"text": TEXT, "status": "completed", "model": MODEL, "usage": use_})
    );
    assert_eq!(r("streamed")["text"], TEXT);
    assert_eq!(r("streamed")["final"], TEXT);
    let args: Value = serde_json::from_str(ARGS).unwrap();
    assert_eq!(
        r("tool"),
        &json!([{"type": "function_call", "name": "get_weather", "arguments": args,
            "call_id": CALL_ID}])
    );
    assert_eq!(r("tool_result")["text"], TEXT);
    assert_eq!(r("streamed_tool")["arguments"], args);
    assert_eq!(r("parse")["parsed"], args);
    assert_eq!(
        r("fallback"),
        &json!({"text": "from chat", "model": "chat-model-v2", "provider": "chat",
            "attempts": "down=overloaded, chat=answered"})
    );

    // The upstream saw the same requests from the gateway as from the SDK
    // directly (the SDK sends a user agent; the gateway does not).
    let received = upstream.received_requests().await.unwrap();
    let (direct, via): (Vec<&Request>, Vec<&Request>) = received
        .iter()
        .partition(|r| r.headers.get("user-agent").is_some());
    assert_eq!(direct.len(), 6);
    assert_eq!(via.len(), 6, "one request per call through the gateway");
    for (d, g) in direct.iter().zip(&via) {
        assert_eq!(
            normalized(g),
            normalized(d),
            "the upstream request through the gateway is the client's"
        );
        let body: Value = serde_json::from_slice(&g.body).unwrap();
        assert_eq!(
            body["store"], false,
            "Handover keeps no state at a provider"
        );
        assert_eq!(body["model"], "up-model");
    }
    let parsed: Value = serde_json::from_slice(&via[5].body).unwrap();
    assert_eq!(parsed["text"]["format"]["type"], "json_schema");
    assert_eq!(parsed["text"]["format"]["name"], "Place");
    assert_eq!(parsed["text"]["format"]["strict"], true);

    // The fallback: one Responses request to the failing provider, one
    // chat request to the next, nothing else.
    let down_got: Vec<Value> = down
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    assert_eq!(
        down_got,
        vec![
            json!({"model": "down-model", "store": false, "stream": false,
            "input": [{"type": "message", "role": "user", "content": "Where is the fjord?"}]})
        ]
    );
    let chat_got = chat.received_requests().await.unwrap();
    assert_eq!(chat_got.len(), 1);
    let chat_body: Value = serde_json::from_slice(&chat_got[0].body).unwrap();
    assert_eq!(
        chat_body["messages"],
        json!([{"role": "user", "content": "Where is the fjord?"}])
    );
    assert_eq!(gw.all_operations().await, 0);
}
