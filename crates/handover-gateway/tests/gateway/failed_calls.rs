//! What a failed call's answer carries, over real HTTP against testkit
//! providers: a provider's definitive client error reaches the client with
//! the provider's own `code` and `param` (chat, streamed chat, Responses),
//! and a call that tried nothing lists no attempts rather than an empty
//! list. Requests are counted at the mock providers.

use crate::support;

use handover_testkit::{Flavor, MockProvider, Reply};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, Running};

/// A policy over `chain` with `lines` (limits, `[policies.NAME.on]`) added.
fn policy(name: &str, chain: &str, lines: &str) -> String {
    format!(
        "\n[policies.{name}]\nchain = [\"{chain}\"]\ndeadline = \"20s\"\ncommit_point = \"first_token\"\n{lines}\n\
         [policies.{name}.backoff]\ninitial = \"1ms\"\nmax = \"2ms\"\n"
    )
}

/// `POST path` with `body` (and an `x-handover-task` when given).
async fn post(gw: &Running, path: &str, body: Value, task: Option<&str>) -> reqwest::Response {
    let mut req = gw.http.post(gw.url(path)).bearer_auth(CLIENT_A).json(&body);
    if let Some(task) = task {
        req = req.header("x-handover-task", task);
    }
    req.send().await.unwrap()
}

fn chat(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
}

fn responses(model: &str) -> Value {
    json!({"model": model, "input": "hi"})
}

fn provider_error(message: &str, param: Value, code: Value) -> Reply {
    Reply::status(
        400,
        json!({"error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }}),
    )
}

#[tokio::test]
async fn a_providers_client_error_keeps_its_code_and_param() {
    // OpenAI's context-length refusal, with a policy that fails on it
    // (the default moves on to a fallback that may have a longer context).
    let long = MockProvider::start(Flavor::OpenAi).await;
    long.set_default(provider_error(
        "This model's maximum context length is 8192 tokens.",
        json!("messages[0].content"),
        json!("context_length_exceeded"),
    ));
    // Invalid requests: with a code of the provider's own, naming a
    // parameter without a code, and one whose code only repeats the
    // status (as some OpenAI-compatible servers send it).
    let picky = MockProvider::start(Flavor::OpenAi).await;
    picky.script([
        provider_error(
            "temperature must be at most 2",
            json!("temperature"),
            json!("invalid_value"),
        ),
        provider_error("tools[0] is not a tool", json!("tools[0]"), Value::Null),
        provider_error("invalid request", Value::Null, json!(400)),
        // A code that is a document, a code that is prose quoting the
        // prompt, a param that is no name: none of it is relayed.
        provider_error("bad", json!("p".repeat(300)), json!("c".repeat(60 * 1024))),
        provider_error("bad", json!("a\nb"), json!("SECRET-PROMPT-123 is too long")),
    ]);
    let mut c = support::provider("long", &long.base_url());
    c.push_str(&support::provider("picky", &picky.base_url()));
    c.push_str(&policy(
        "default",
        "long",
        "[policies.default.on]\ncontext_length = \"fail\"",
    ));
    c.push_str(&policy("picky", "picky", ""));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    let gw = Running::start(&c).await;

    let calls = [
        ("/v1/chat/completions", chat("default", false)),
        ("/v1/chat/completions", chat("default", true)),
        ("/v1/responses", responses("default")),
    ];
    for (path, body) in calls {
        let resp = post(&gw, path, body.clone(), None).await;
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{path} {body}");
        assert_eq!(resp.headers()["x-should-retry"], "false");
        assert_eq!(resp.headers()["x-handover-attempts"], "long=context_length");
        let got: Value = resp.json().await.unwrap();
        let e = &got["error"];
        assert_eq!(e["code"], "context_length_exceeded", "{path}: {got}");
        // The Responses client sent `input`, never `messages`.
        let param = if path == "/v1/responses" {
            "input"
        } else {
            "messages[0].content"
        };
        assert_eq!(e["param"], param, "{path}: {got}");
        assert_eq!(e["type"], "invalid_request_error", "{path}: {got}");
    }
    assert_eq!(long.requests().await, 3, "one request per call, no retry");

    // Where the provider gave no usable code, the gateway's own stays;
    // the parameter it named is relayed either way.
    for (param, code) in [
        (json!("temperature"), "invalid_value"),
        (json!("tools[0]"), "invalid_request"),
        (Value::Null, "invalid_request"),
        (Value::Null, "invalid_request"),
        (Value::Null, "invalid_request"),
    ] {
        let resp = post(&gw, "/v1/chat/completions", chat("picky", false), None).await;
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        let text = resp.text().await.unwrap();
        assert!(text.len() < 2048, "{} bytes: {:.200}", text.len(), text);
        assert!(!text.contains("SECRET-PROMPT"), "{text}");
        let got: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(got["error"]["code"], code, "{got}");
        assert_eq!(got["error"]["param"], param, "{got}");
    }
    assert_eq!(picky.requests().await, 5);
}

#[tokio::test]
async fn a_call_that_tried_nothing_lists_no_attempts() {
    let p = MockProvider::start(Flavor::OpenAi).await;
    p.set_default(Reply::text("the one answer"));
    let mut c = support::provider("p", &p.base_url());
    c.push_str(&policy("tasked", "p", "max_requests = 1"));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    let gw = Running::start(&c).await;

    let resp = post(
        &gw,
        "/v1/chat/completions",
        chat("tasked", false),
        Some("t-1"),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["x-handover-attempts"], "p=answered");

    // The task's one request is spent: later calls are refused before
    // anything is tried, and say so without an empty attempts header.
    let calls = [
        ("/v1/chat/completions", chat("tasked", false)),
        ("/v1/chat/completions", chat("tasked", true)),
        ("/v1/responses", responses("tasked")),
    ];
    for (path, body) in calls {
        let resp = post(&gw, path, body.clone(), Some("t-1")).await;
        assert_eq!(resp.status(), StatusCode::BAD_GATEWAY, "{path} {body}");
        assert_eq!(resp.headers()["x-should-retry"], "false");
        assert_eq!(
            resp.headers().get("x-handover-attempts"),
            None,
            "{path} {body}"
        );
        let got: Value = resp.json().await.unwrap();
        assert_eq!(got["error"]["code"], "budget_exhausted", "{path}: {got}");
    }
    assert_eq!(
        p.requests().await,
        1,
        "nothing sent after the budget ran out"
    );
}

/// Under the default table a context-length refusal falls back (the next
/// provider may have a longer context). When every provider asked refused
/// the request for that one reason, the client gets that refusal — a 400
/// `context_length_exceeded` its framework acts on by trimming — not a 502
/// that says "try again later". A chain that also failed otherwise stays
/// a 502.
#[tokio::test]
async fn a_chain_that_refused_the_request_alike_everywhere_answers_that_refusal() {
    let too_long = || {
        provider_error(
            "This model's maximum context length is 8192 tokens.",
            json!("messages"),
            json!("context_length_exceeded"),
        )
    };
    let (short, shorter, down) = (
        MockProvider::start(Flavor::OpenAi).await,
        MockProvider::start(Flavor::OpenAi).await,
        MockProvider::start(Flavor::OpenAi).await,
    );
    short.set_default(too_long());
    shorter.set_default(too_long());
    down.set_default(Reply::status(
        503,
        json!({"error": {"message": "overloaded", "type": "server_error"}}),
    ));
    let mut c = support::provider("short", &short.base_url());
    c.push_str(&support::provider("shorter", &shorter.base_url()));
    c.push_str(&support::provider("down", &down.base_url()));
    c.push_str(&policy("alike", "short\", \"shorter", ""));
    c.push_str(&policy(
        "mixed",
        "short\", \"down",
        "max_attempts_per_provider = 1",
    ));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    let gw = Running::start(&c).await;

    let calls = [
        ("/v1/chat/completions", chat("alike", false)),
        ("/v1/chat/completions", chat("alike", true)),
        ("/v1/responses", responses("alike")),
    ];
    for (path, body) in calls {
        let resp = post(&gw, path, body, None).await;
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{path}");
        assert_eq!(
            resp.headers()["x-handover-attempts"],
            "short=context_length, shorter=context_length"
        );
        let got: Value = resp.json().await.unwrap();
        assert_eq!(got["error"]["code"], "context_length_exceeded", "{got}");
        assert_eq!(got["error"]["type"], "invalid_request_error", "{got}");
        // Both blamed `messages`: so does the answer (by its Responses
        // name on that API).
        let param = if path == "/v1/responses" {
            "input"
        } else {
            "messages"
        };
        assert_eq!(got["error"]["param"], param, "{path}: {got}");
    }
    assert_eq!((short.requests().await, shorter.requests().await), (3, 3));

    let resp = post(&gw, "/v1/chat/completions", chat("mixed", false), None).await;
    assert_eq!(resp.status(), StatusCode::BAD_GATEWAY);
    let got: Value = resp.json().await.unwrap();
    assert_eq!(got["error"]["code"], "all_providers_failed", "{got}");
    assert_eq!(down.requests().await, 1);
}

/// A Responses call is sent to providers as a chat request: a `param` the
/// provider names is a chat field the client never sent. It is renamed to
/// the Responses field it came from, or dropped where there is none, on
/// the plain and the streamed path alike.
#[tokio::test]
async fn a_providers_param_reaches_a_responses_client_by_its_responses_name() {
    let p = MockProvider::start(Flavor::OpenAi).await;
    let refusals = [
        ("max_completion_tokens", json!("max_output_tokens")),
        ("max_tokens", json!("max_output_tokens")),
        ("messages[1].content", json!("input")),
        ("temperature", json!("temperature")),
        ("frequency_penalty", Value::Null),
        ("stop", Value::Null),
    ];
    let script = refusals.iter().flat_map(|(param, _)| {
        let r = || provider_error("bad value", json!(param), json!("invalid_value"));
        [r(), r()]
    });
    p.script(script);
    let mut c = support::provider("p", &p.base_url());
    c.push_str(&policy("default", "p", ""));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    let gw = Running::start(&c).await;

    for (sent, want) in &refusals {
        for stream in [false, true] {
            let body = json!({"model": "default", "input": "hi", "stream": stream});
            let resp = post(&gw, "/v1/responses", body, None).await;
            assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{sent}");
            let got: Value = resp.json().await.unwrap();
            assert_eq!(
                &got["error"]["param"], want,
                "{sent} (stream {stream}): {got}"
            );
            assert_eq!(got["error"]["code"], "invalid_value", "{got}");
        }
    }
    assert_eq!(p.requests().await, 2 * refusals.len());

    // The chat path keeps the provider's name: it is the client's.
    p.set_default(provider_error(
        "bad",
        json!("max_completion_tokens"),
        json!("invalid_value"),
    ));
    let resp = post(&gw, "/v1/chat/completions", chat("default", false), None).await;
    let got: Value = resp.json().await.unwrap();
    assert_eq!(got["error"]["param"], "max_completion_tokens", "{got}");
}

/// A streamed call whose every provider refused it, after the keep-alive
/// interval (the SSE head already went out): its error event carries the
/// type, code and param the plain answer would have, not `server_error`.
#[tokio::test(start_paused = true)]
async fn a_refusal_after_the_sse_head_reads_as_the_plain_answer() {
    use handover_testkit::{Plan, TcpProvider};
    use std::time::Duration;
    let too_long = || {
        Plan::json(
            400,
            &json!({"error": {
                "message": "This model's maximum context length is 8192 tokens.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }}),
        )
        .delayed(Duration::from_secs(3))
    };
    let (a, b) = (
        TcpProvider::start(Flavor::OpenAi).await.unwrap(),
        TcpProvider::start(Flavor::OpenAi).await.unwrap(),
    );
    a.set_default(too_long());
    b.set_default(too_long());
    let mut c = support::provider("a", a.base_url());
    c.push_str(&support::provider("b", b.base_url()));
    c.push_str(&policy("default", "a\", \"b", ""));
    c.push_str(&support::gateway_section(1 << 20, "1s", ""));
    let gw = Running::start_in_memory(&c).await;

    let plain = post(&gw, "/v1/chat/completions", chat("default", false), None).await;
    assert_eq!(plain.status(), StatusCode::BAD_REQUEST);
    let plain: Value = plain.json().await.unwrap();

    let resp = post(&gw, "/v1/chat/completions", chat("default", true), None).await;
    assert_eq!(resp.status(), StatusCode::OK, "the SSE head went out first");
    let text = resp.text().await.unwrap();
    assert!(text.starts_with(": keep-alive"), "{text}");
    let event = text
        .split("\n\n")
        .find_map(|ev| ev.strip_prefix("data: "))
        .expect("an error event");
    let event: Value = serde_json::from_str(event).unwrap();
    for field in ["type", "code", "param"] {
        assert_eq!(
            event["error"][field], plain["error"][field],
            "{field}: {event}"
        );
    }
    assert_eq!(event["error"]["type"], "invalid_request_error", "{event}");
    assert_eq!(event["error"]["code"], "context_length_exceeded", "{event}");
    assert!(!text.contains("[DONE]"), "{text}");
    assert_eq!((a.requests(), b.requests()), (2, 2));

    // The Responses stream's error event carries the same code, and the
    // param both providers blamed by its Responses name.
    let body = json!({"model": "default", "input": "hi", "stream": true});
    let text = post(&gw, "/v1/responses", body, None)
        .await
        .text()
        .await
        .unwrap();
    let event = text
        .split("\n\n")
        .find(|ev| ev.starts_with("event: error"))
        .and_then(|ev| ev.lines().find_map(|l| l.strip_prefix("data: ")))
        .unwrap_or_else(|| panic!("no error event in {text}"));
    let event: Value = serde_json::from_str(event).unwrap();
    assert_eq!(event["code"], "context_length_exceeded", "{event}");
    assert_eq!(plain["error"]["param"], "messages", "{plain}");
    assert_eq!(event["param"], "input", "{event}");
}

/// A chain refused alike carries the providers' own `code` and `param`
/// where every provider gave the same one, field by field, and the
/// gateway's own (its code, no param) where they differ or one gave none:
/// one provider's account is not the whole chain's.
#[tokio::test]
async fn a_chain_refused_alike_relays_only_what_every_provider_said() {
    let said = |param: Value, code: Value| provider_error("bad value", param, code);
    let (a, b) = (
        MockProvider::start(Flavor::OpenAi).await,
        MockProvider::start(Flavor::OpenAi).await,
    );
    // (a's param and code, b's, the answer's param and code)
    let cases = [
        (
            (json!("temperature"), json!("invalid_value")),
            (json!("temperature"), json!("invalid_value")),
            (json!("temperature"), "invalid_value"),
        ),
        (
            (json!("temperature"), json!("invalid_value")),
            (json!("top_p"), json!("invalid_value")),
            (Value::Null, "invalid_value"),
        ),
        (
            (json!("temperature"), json!("invalid_value")),
            (json!("temperature"), Value::Null),
            (json!("temperature"), "invalid_request"),
        ),
        (
            (json!("temperature"), json!("out_of_range")),
            (Value::Null, json!("invalid_value")),
            (Value::Null, "invalid_request"),
        ),
    ];
    a.script(cases.iter().map(|(s, _, _)| said(s.0.clone(), s.1.clone())));
    b.script(cases.iter().map(|(_, s, _)| said(s.0.clone(), s.1.clone())));
    let mut c = support::provider("a", &a.base_url());
    c.push_str(&support::provider("b", &b.base_url()));
    c.push_str(&policy(
        "default",
        "a\", \"b",
        "[policies.default.on]\ninvalid_request = \"next\"",
    ));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    let gw = Running::start(&c).await;

    for (i, (_, _, (param, code))) in cases.iter().enumerate() {
        let resp = post(&gw, "/v1/chat/completions", chat("default", false), None).await;
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "case {i}");
        assert_eq!(
            resp.headers()["x-handover-attempts"],
            "a=invalid_request, b=invalid_request",
            "case {i}"
        );
        let got: Value = resp.json().await.unwrap();
        assert_eq!(&got["error"]["param"], param, "case {i}: {got}");
        assert_eq!(got["error"]["code"], *code, "case {i}: {got}");
    }
    assert_eq!(
        (a.requests().await, b.requests().await),
        (cases.len(), cases.len())
    );
}
