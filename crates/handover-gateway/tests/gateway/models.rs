//! One provider entry serving many models, over real HTTP: pattern routes
//! send 16 model names to one upstream with a shared fallback, each answer
//! names the model that answered, breakers are per model, and
//! `provider/model` names run that one step. Requests are counted, and
//! their models read, at the mock upstreams.

use crate::support;

use handover_testkit::ModelsProvider;
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, Running};

async fn ask(gw: &Running, model: &str) -> (StatusCode, Option<String>, Value) {
    let resp = gw
        .http
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_A)
        .json(&json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    let provider = resp
        .headers()
        .get("x-handover-provider")
        .map(|v| v.to_str().unwrap().to_owned());
    (resp.status(), provider, resp.json().await.unwrap())
}

fn names() -> Vec<String> {
    (1..=16).map(|i| format!("fb-{i}")).collect()
}

/// `wall` serves any model; `spare` only its default `fb-ok`.
fn config(wall: &ModelsProvider, spare: &ModelsProvider, threshold: u32, routes: &str) -> String {
    format!(
        r#"
[providers.wall]
kind = "openai_compatible"
base_url = "{wall}"
model = "fb-default"
models = "*"
[providers.wall.breaker]
failure_threshold = {threshold}

[providers.spare]
kind = "openai_compatible"
base_url = "{spare}"
model = "fb-ok"

[policies.default]
chain = ["spare"]
deadline = "20s"
{gateway}"#,
        wall = wall.base_url(),
        spare = spare.base_url(),
        gateway = support::gateway_section(1 << 20, "5s", routes),
    )
}

#[tokio::test]
async fn sixteen_model_names_reach_one_upstream_with_a_shared_fallback() {
    // The first eight models are down at the upstream; the other eight answer.
    let names = names();
    let wall = ModelsProvider::start(names[..8].iter().map(String::as_str)).await;
    let spare = ModelsProvider::start([]).await;
    let routes = r#"
[gateway.routes]
"fb-*" = { chain = ["wall/{model}", "spare"], policy = "default" }
"#;
    let gw = Running::start(&config(&wall, &spare, 3, routes)).await;

    for (i, name) in names.iter().enumerate() {
        let (status, provider, body) = ask(&gw, name).await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        let (who, model) = if i < 8 {
            ("spare", "fb-ok")
        } else {
            ("wall", name.as_str())
        };
        assert_eq!(provider.as_deref(), Some(who), "{name}");
        assert_eq!(
            body["model"], model,
            "{name}: the answer names who answered"
        );
        assert_eq!(
            body["choices"][0]["message"]["content"],
            format!("answered by {model}")
        );
    }
    // Each name reached the upstream exactly once, as itself: eight failures
    // in a row on other models did not open the breaker of the eight that
    // work (breakers are per model).
    assert_eq!(wall.models_asked().await, names);
    assert_eq!(spare.models_asked().await, vec!["fb-ok"; 8]);
}

#[tokio::test]
async fn a_same_provider_fallback_survives_every_other_model_failing() {
    // The issue's shape: every fb-N fails at the upstream, fb-ok answers,
    // and both are models of the same provider entry.
    let names = names();
    let wall = ModelsProvider::start(names.iter().map(String::as_str)).await;
    let spare = ModelsProvider::start([]).await;
    let routes = r#"
[gateway.routes]
"fb-*" = { chain = ["wall/{model}", "wall/fb-ok"], policy = "default" }
"#;
    let gw = Running::start(&config(&wall, &spare, 3, routes)).await;

    for name in &names {
        let (status, provider, body) = ask(&gw, name).await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        assert_eq!(provider.as_deref(), Some("wall"));
        assert_eq!(body["model"], "fb-ok");
    }
    let expected: Vec<String> = names
        .iter()
        .flat_map(|n| [n.clone(), "fb-ok".to_owned()])
        .collect();
    assert_eq!(wall.models_asked().await, expected);

    // fb-1 has failed once; two more failures open its own breaker (the
    // threshold is 3), and from then on it is skipped, not asked — while
    // fb-2 is still asked.
    for _ in 0..3 {
        assert_eq!(ask(&gw, "fb-1").await.0, StatusCode::OK);
    }
    assert_eq!(ask(&gw, "fb-2").await.0, StatusCode::OK);
    let asked = wall.models_asked().await;
    let tail: Vec<&str> = asked[expected.len()..].iter().map(String::as_str).collect();
    assert_eq!(
        tail,
        ["fb-1", "fb-ok", "fb-1", "fb-ok", "fb-ok", "fb-2", "fb-ok"]
    );
    assert_eq!(spare.models_asked().await.len(), 0);
}

#[tokio::test]
async fn provider_slash_model_names_run_that_step_and_unknown_names_say_why() {
    let wall = ModelsProvider::start([]).await;
    let spare = ModelsProvider::start([]).await;
    let gw = Running::start(&config(&wall, &spare, 3, "")).await;

    let (status, provider, body) = ask(&gw, "wall/any-model-at-all").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(provider.as_deref(), Some("wall"));
    assert_eq!(body["model"], "any-model-at-all");
    let (status, _, body) = ask(&gw, "spare/fb-ok").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["model"], "fb-ok");

    // spare lists no other model: nothing is sent anywhere.
    let (status, _, body) = ask(&gw, "spare/gpt-4.1").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "model_not_found");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(r#"provider "spare" does not serve model "gpt-4.1""#),
        "{message}"
    );
    let (status, _, body) = ask(&gw, "fb-7").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "no route matches: {body}");
    assert_eq!(wall.models_asked().await, ["any-model-at-all"]);
    assert_eq!(spare.models_asked().await, ["fb-ok"]);

    // /v1/models lists policies and aliases; provider/model names and
    // patterns are shown by `handover check`.
    let models: Value = gw
        .http
        .get(gw.url("/v1/models"))
        .bearer_auth(CLIENT_A)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert_eq!(ids, ["default"]);
}

#[tokio::test]
async fn a_routed_stream_names_the_model_of_the_step_that_answered() {
    let wall = ModelsProvider::start(["fb-3"]).await;
    let spare = ModelsProvider::start([]).await;
    let routes = r#"
[gateway.routes]
"fb-*" = { chain = ["wall/{model}", "wall/fb-ok"], policy = "default" }
"#;
    let gw = Running::start(&config(&wall, &spare, 3, routes)).await;
    for (name, answering) in [("fb-3", "fb-ok"), ("fb-4", "fb-4")] {
        let resp = gw
            .http
            .post(gw.url("/v1/chat/completions"))
            .bearer_auth(CLIENT_A)
            .json(&json!({"model": name, "stream": true,
                "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let text = resp.text().await.unwrap();
        let chunks: Vec<Value> = text
            .split("\n\n")
            .filter_map(|ev| ev.lines().find_map(|l| l.strip_prefix("data: ")))
            .filter_map(|d| serde_json::from_str(d).ok())
            .collect();
        assert!(chunks.len() >= 2, "{text}");
        for c in &chunks {
            assert_eq!(
                c["model"], answering,
                "{name}: every chunk, the role chunk first"
            );
        }
        let content: String = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .collect();
        assert_eq!(content, format!("answered by {answering}"));
        assert!(text.contains("data: [DONE]"));
    }
    assert_eq!(wall.models_asked().await, ["fb-3", "fb-ok", "fb-4"]);
}

/// `GET /v1/models/{model}` as the OpenAI SDK's `models.retrieve` calls
/// it: `status`, and the body as JSON.
async fn retrieve(gw: &Running, model: &str) -> (StatusCode, Value) {
    let resp = gw
        .http
        .get(gw.url(&format!("/v1/models/{model}")))
        .bearer_auth(CLIENT_A)
        .send()
        .await
        .unwrap();
    (resp.status(), resp.json().await.unwrap())
}

#[tokio::test]
async fn one_model_is_retrieved_as_a_chat_request_would_resolve_it() {
    let wall = ModelsProvider::start([]).await;
    let spare = ModelsProvider::start([]).await;
    let routes = r#"
[gateway.routes]
"fb-*" = { chain = ["wall/{model}", "spare"], policy = "default" }
"#;
    let gw = Running::start(&config(&wall, &spare, 3, routes)).await;
    for (name, policy, via) in [
        ("default", json!("default"), "policy"),
        // A name with a slash, plain or percent-encoded as SDKs send it.
        ("wall/any-model", Value::Null, "direct"),
        ("wall%2Fany-model", Value::Null, "direct"),
        // A name only a pattern knows, which the list cannot show.
        ("fb-12", json!("default"), "route"),
    ] {
        let (status, body) = retrieve(&gw, name).await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        assert_eq!(body["object"], "model");
        assert_eq!(body["id"], name.replace("%2F", "/"));
        assert_eq!(body["handover"]["policy"], policy, "{name}");
        assert_eq!(body["handover"]["via"], via, "{name}");
    }
    for name in ["gpt-7", "spare/gpt-4.1"] {
        let (status, body) = retrieve(&gw, name).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{name}: {body}");
        assert_eq!(body["error"]["code"], "model_not_found");
        assert_eq!(body["error"]["param"], "model");
    }
    // A name that is no UTF-8 is a JSON 400 naming `model`, as any bad field.
    let (status, body) = retrieve(&gw, "%FF%FE").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["param"], "model", "{body}");
    // Resolving a name asks no upstream.
    assert_eq!(wall.models_asked().await.len(), 0);
    assert_eq!(spare.models_asked().await.len(), 0);
    let resp = gw
        .http
        .get(gw.url("/v1/models/default"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status(),
        StatusCode::UNAUTHORIZED,
        "a token is required"
    );
}
