//! `/v1/chat/completions` and `/v1/models` over real HTTP against testkit
//! providers: the answering provider and every attempt in headers, fallback
//! after a 503, streams before and after their commit point (the policy's
//! or the request's `x-handover-commit-point`), keep-alives
//! while a stream waits, and metrics.

use crate::support;

use std::time::Duration;

use handover_testkit::{After, Flavor, MockProvider, Plan, Reply, TcpProvider, bodies};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, Running};

fn ask(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
}

async fn post(gw: &Running, body: &Value) -> reqwest::Response {
    gw.chat(body).await
}

/// The `data:` payloads of an SSE body, and whether keep-alive comments came first.
fn sse_data(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter_map(|ev| ev.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(str::to_owned)
        .collect()
}

fn content(data: &[String]) -> String {
    data.iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

#[tokio::test]
async fn a_503_falls_back_and_the_answer_names_who_answered() {
    let down = MockProvider::start(Flavor::OpenAi).await;
    down.set_default(Reply::overloaded());
    let up = MockProvider::start(Flavor::DeepSeek).await;
    up.set_default(Reply::text("from the fallback"));
    let mut c = support::provider("down", &down.base_url());
    c.push_str(&support::provider("up", &up.base_url()));
    c.push_str(&support::policy("default", &["down", "up"], "first_token"));
    c.push_str(&support::gateway_section(
        1 << 20,
        "5s",
        "[gateway.models]\n\"gpt-4o-mini\" = \"default\"\n",
    ));
    let gw = Running::start(&c).await;

    let resp = post(&gw, &ask("gpt-4o-mini", false)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["x-handover-provider"], "up");
    assert_eq!(
        resp.headers()["x-handover-attempts"],
        "down=overloaded, up=answered"
    );
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "from the fallback"
    );
    assert_eq!(body["model"], Flavor::DeepSeek.answering_model());
    assert_eq!(body["usage"]["total_tokens"], 26);
    assert_eq!(down.requests().await, 1);
    assert_eq!(up.requests().await, 1);

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
    let ids: Vec<_> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].clone())
        .collect();
    assert_eq!(ids, vec![json!("default"), json!("gpt-4o-mini")]);

    let metrics = gw.metrics().await;
    assert!(
        metrics.contains("handover_gateway_requests_total"),
        "{metrics}"
    );
    assert!(metrics.contains("handover_tasks_total"), "{metrics}");
    // Histograms with fixed buckets (they add up across replicas), not
    // summaries with quantiles.
    assert!(
        metrics.contains("handover_gateway_request_duration_seconds_bucket{"),
        "{metrics}"
    );
    assert!(!metrics.contains("quantile="), "{metrics}");
}

#[tokio::test]
async fn every_provider_failing_is_a_json_error_that_sdks_must_not_retry() {
    let down = MockProvider::start(Flavor::OpenAi).await;
    down.set_default(Reply::overloaded());
    // One failure opens this provider's breaker.
    let mut c = support::provider("down", &down.base_url())
        .replace("failure_threshold = 100", "failure_threshold = 1");
    c.push_str(&support::policy("default", &["down"], "first_token"));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    let gw = Running::start(&c).await;
    // The 503 opens the provider's breaker, so the second call (a stream)
    // is refused without a request; each error message says what happened.
    for (stream, attempts, says) in [
        (false, "down=overloaded", "attempts: down=overloaded"),
        (
            true,
            "down=skipped_breaker_open",
            "skipped: down (circuit breaker open)",
        ),
    ] {
        let resp = post(&gw, &ask("default", stream)).await;
        assert_eq!(resp.status(), StatusCode::BAD_GATEWAY, "stream={stream}");
        assert_eq!(resp.headers()["x-should-retry"], "false");
        assert_eq!(resp.headers()["x-handover-attempts"], attempts);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "all_providers_failed", "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{body}");
    }
    assert_eq!(down.requests().await, 1);
}

#[tokio::test]
async fn a_stream_cut_after_its_commit_point_ends_with_an_error_and_no_done() {
    let cut = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    cut.set_default(Plan::sse(
        bodies::text_stream(Flavor::OpenAi, &["Hel", "lo"], false, false),
        After::Close,
    ));
    let spare = MockProvider::start(Flavor::OpenAi).await;
    let mut c = support::provider("cut", cut.base_url());
    c.push_str(&support::provider("spare", &spare.base_url()));
    c.push_str(&support::policy(
        "default",
        &["cut", "spare"],
        "first_token",
    ));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    let gw = Running::start(&c).await;

    let resp = post(&gw, &ask("default", true)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["x-handover-provider"], "cut");
    let data = sse_data(&resp.text().await.unwrap());
    assert_eq!(content(&data), "Hello");
    assert!(!data.iter().any(|d| d == "[DONE]"), "{data:?}");
    let last: Value = serde_json::from_str(data.last().unwrap()).unwrap();
    assert_eq!(last["error"]["code"], "stream_broken", "{last}");
    assert_eq!(
        spare.requests().await,
        0,
        "never stitched to another provider"
    );
}

#[tokio::test]
async fn a_stream_cut_before_its_commit_point_falls_back_whole() {
    let cut = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    cut.set_default(Plan::sse(
        bodies::text_stream(Flavor::OpenAi, &["Partial "], false, false),
        After::Close,
    ));
    let spare = MockProvider::start(Flavor::OpenAi).await;
    spare.set_default(Reply::Sse(bodies::text_stream(
        Flavor::OpenAi,
        &["Whole ", "answer"],
        true,
        true,
    )));
    let mut c = support::provider("cut", cut.base_url());
    c.push_str(&support::provider("spare", &spare.base_url()));
    c.push_str(&support::policy("default", &["cut", "spare"], "complete"));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    let gw = Running::start(&c).await;

    let body = json!({"model": "default", "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "hi"}]});
    let resp = post(&gw, &body).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["x-handover-provider"], "spare");
    assert_eq!(
        resp.headers()["x-handover-attempts"],
        "cut=stream_interrupted, spare=answered"
    );
    let data = sse_data(&resp.text().await.unwrap());
    assert_eq!(content(&data), "Whole answer");
    assert_eq!(data.last().unwrap(), "[DONE]");
    let usage = data
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|v| v["usage"].is_object());
    assert_eq!(usage.unwrap()["usage"]["total_tokens"], 19);
    assert_eq!(cut.requests(), 1);
}

/// `x-handover-commit-point` picks the commit point per request on one
/// policy (here `first_token`): `complete` falls back whole past a cut that
/// the policy's own point commits to; a bad value is a 400 naming the
/// header, and nothing is sent.
#[tokio::test]
async fn the_commit_point_header_overrides_the_policy_per_request() {
    let cut = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    cut.set_default(Plan::sse(
        bodies::text_stream(Flavor::OpenAi, &["Partial "], false, false),
        After::Close,
    ));
    let spare = MockProvider::start(Flavor::OpenAi).await;
    spare.set_default(Reply::Sse(bodies::text_stream(
        Flavor::OpenAi,
        &["Whole ", "answer"],
        true,
        true,
    )));
    let mut c = support::provider("cut", cut.base_url());
    c.push_str(&support::provider("spare", &spare.base_url()));
    c.push_str(&support::policy(
        "default",
        &["cut", "spare"],
        "first_token",
    ));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    let gw = Running::start_in_memory(&c).await;
    let with_point = |point: &str| {
        gw.http
            .post(gw.url("/v1/chat/completions"))
            .bearer_auth(CLIENT_A)
            .header("x-handover-commit-point", point)
            .json(&ask("default", true))
            .send()
    };

    let resp = with_point("complete").await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["x-handover-provider"], "spare");
    let data = sse_data(&resp.text().await.unwrap());
    assert_eq!(content(&data), "Whole answer");
    assert_eq!(data.last().unwrap(), "[DONE]");
    assert_eq!((cut.requests(), spare.requests().await), (1, 1));

    // Without the header the policy's first_token applies: committed to the cut.
    let resp = post(&gw, &ask("default", true)).await;
    assert_eq!(resp.headers()["x-handover-provider"], "cut");
    let data = sse_data(&resp.text().await.unwrap());
    assert_eq!(content(&data), "Partial ");
    assert!(!data.iter().any(|d| d == "[DONE]"), "{data:?}");
    assert_eq!((cut.requests(), spare.requests().await), (2, 1));

    for bad in ["whole", "", "Complete"] {
        let resp = with_point(bad).await.unwrap();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{bad:?}");
        let err: Value = resp.json().await.unwrap();
        assert_eq!(err["error"]["param"], "x-handover-commit-point", "{err}");
        assert_eq!(err["error"]["code"], "invalid_header", "{err}");
    }
    assert_eq!(
        (cut.requests(), spare.requests().await),
        (2, 1),
        "nothing sent"
    );
}

#[tokio::test(start_paused = true)]
async fn keep_alives_flow_while_the_stream_waits_for_its_first_token() {
    let slow = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    slow.set_default(
        Plan::sse(
            bodies::text_stream(Flavor::OpenAi, &["late ", "but whole"], true, true),
            After::Close,
        )
        .delayed(Duration::from_secs(4)),
    );
    let mut c = support::provider("slow", slow.base_url());
    c.push_str(&support::policy("default", &["slow"], "first_token"));
    c.push_str(&support::gateway_section(1 << 20, "1s", ""));
    let gw = Running::start_in_memory(&c).await;

    let resp = post(&gw, &ask("default", true)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    // Headers went out before the provider answered: no provider header...
    assert!(resp.headers().get("x-handover-provider").is_none());
    let text = resp.text().await.unwrap();
    let first_data = text.find("data: ").unwrap();
    assert!(text[..first_data].contains(": keep-alive"), "{text}");
    let data = sse_data(&text);
    // ...so the first chunk names it.
    let opening: Value = serde_json::from_str(&data[0]).unwrap();
    assert_eq!(opening["handover"]["provider"], "slow");
    assert_eq!(opening["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(content(&data), "late but whole");
    assert_eq!(data.last().unwrap(), "[DONE]");
}

#[tokio::test]
async fn tools_go_out_and_tool_calls_come_back_in_openai_shape() {
    let p = MockProvider::start(Flavor::OpenAi).await;
    p.set_default(Reply::tool_call(
        "call_1",
        "create_shipment",
        json!({"order": 42}),
    ));
    let mut c = support::provider("p", &p.base_url());
    c.push_str(&support::policy("default", &["p"], "first_token"));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    let gw = Running::start(&c).await;

    let body = json!({
        "model": "default",
        "messages": [
            {"role": "developer", "content": [{"type": "text", "text": "be brief"}]},
            {"role": "user", "content": "ship order 42"},
        ],
        "tools": [{"type": "function", "function": {"name": "create_shipment",
            "parameters": {"type": "object", "properties": {"order": {"type": "integer"}}}}}],
        "tool_choice": "auto",
        "max_completion_tokens": 64,
    });
    let resp = post(&gw, &body).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let answer: Value = resp.json().await.unwrap();
    let choice = &answer["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["id"], "call_1");
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "create_shipment");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"order": 42}));

    let sent: Value = serde_json::from_slice(&p.received().await[0].body).unwrap();
    assert_eq!(sent["tools"][0]["function"]["name"], "create_shipment");
    assert_eq!(sent["messages"][0]["role"], "system");
    assert_eq!(
        sent["messages"][0]["content"],
        json!([{"type": "text", "text": "be brief"}]),
        "content parts as sent"
    );
    assert_eq!(sent["max_completion_tokens"], 64, "as sent, not renamed");
    assert!(sent.get("max_tokens").is_none(), "{sent}");
    assert_eq!(
        sent["model"], "p-model",
        "the provider's configured model, not the alias"
    );
}

#[tokio::test]
async fn a_data_class_no_provider_may_receive_fails_closed() {
    let p = MockProvider::start(Flavor::OpenAi).await;
    let mut c = support::provider("p", &p.base_url());
    c.push_str(&support::policy("default", &["p"], "first_token"));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    let gw = Running::start(&c).await;
    let resp = gw
        .http
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_A)
        .header("x-handover-data-class", "health")
        .json(&ask("default", false))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "data_class_not_allowed", "{body}");
    assert_eq!(p.requests().await, 0);
}

/// Integer fields written as floats (`n: 1.0`, as Python callers send)
/// are those integers, on both APIs, and reach the provider as integers;
/// a fraction is still refused naming the field, and sends nothing.
#[tokio::test]
async fn whole_number_floats_are_integers_on_the_wire() {
    let p = MockProvider::start(Flavor::OpenAi).await;
    p.set_default(Reply::text("ok"));
    let mut c = support::provider("p", &p.base_url());
    c.push_str(&support::policy("default", &["p"], "first_token"));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    let gw = Running::start(&c).await;

    let body = json!({
        "model": "default",
        "messages": [{"role": "user", "content": "hi"}],
        "n": 1.0, "max_tokens": 64.0, "max_completion_tokens": 1e2, "seed": -7.0,
    });
    let resp = post(&gw, &body).await;
    assert_eq!(
        resp.status(),
        StatusCode::OK,
        "{}",
        resp.text().await.unwrap()
    );
    let resp = gw
        .http
        .post(gw.url("/v1/responses"))
        .bearer_auth(CLIENT_A)
        .json(&json!({"model": "default", "input": "hi",
            "max_output_tokens": 32.0, "top_logprobs": 2.0}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status(),
        StatusCode::OK,
        "{}",
        resp.text().await.unwrap()
    );
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["max_output_tokens"], json!(32), "{answer}");

    let received = p.received().await;
    assert_eq!(received.len(), 2);
    let chat: Value = serde_json::from_slice(&received[0].body).unwrap();
    for (field, want) in [
        ("n", json!(1)),
        ("max_tokens", json!(64)),
        ("max_completion_tokens", json!(100)),
        ("seed", json!(-7)),
    ] {
        // `json!(1) != json!(1.0)`: an integer on the wire, not the float.
        assert_eq!(chat[field], want, "{field}: {chat}");
    }
    let responses: Value = serde_json::from_slice(&received[1].body).unwrap();
    assert_eq!(responses["max_completion_tokens"], json!(32), "{responses}");
    assert_eq!(responses["top_logprobs"], json!(2), "{responses}");

    for (path, body, param) in [
        (
            "/v1/chat/completions",
            json!({"model": "default", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 64.5}),
            "max_tokens",
        ),
        (
            "/v1/chat/completions",
            json!({"model": "default", "messages": [{"role": "user", "content": "hi"}], "seed": "7"}),
            "seed",
        ),
        (
            "/v1/responses",
            json!({"model": "default", "input": "hi", "max_output_tokens": 1e10}),
            "max_output_tokens",
        ),
        (
            "/v1/responses",
            json!({"model": "default", "input": "hi", "top_logprobs": 2.5}),
            "top_logprobs",
        ),
    ] {
        let resp = gw
            .http
            .post(gw.url(path))
            .bearer_auth(CLIENT_A)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{path} {body}");
        let err: Value = resp.json().await.unwrap();
        assert_eq!(err["error"]["param"], param, "{err}");
        assert_eq!(err["error"]["code"], "invalid_field", "{err}");
    }
    assert_eq!(p.requests().await, 2, "a refused body sends nothing");
}
