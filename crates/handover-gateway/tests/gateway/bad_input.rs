//! Bad input gets a clear JSON 4xx naming what is wrong, and nothing is
//! recorded or sent: the ledger stays empty and the provider sees no request.

use crate::support;

use handover_testkit::{Flavor, MockProvider};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, OPERATOR, Running};

async fn setup() -> (Running, MockProvider) {
    let p = MockProvider::start(Flavor::OpenAi).await;
    let mut c = support::provider("p", &p.base_url());
    c.push_str(&support::policy("default", &["p"], "first_token"));
    c.push_str(&support::gateway_section(
        2048,
        "5s",
        "[gateway.models]\n\"gpt-4o-mini\" = \"default\"\n",
    ));
    (Running::start(&c).await, p)
}

async fn send(
    gw: &Running,
    path: &str,
    token: Option<&str>,
    body: Vec<u8>,
    key: Option<&str>,
) -> (StatusCode, Value) {
    let mut req = gw
        .http
        .post(gw.url(path))
        .header("content-type", "application/json")
        .body(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(k) = key {
        req = req.header("Idempotency-Key", k);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let body: Value = resp.json().await.expect("every error is JSON");
    (status, body)
}

fn chat(model: &str) -> Vec<u8> {
    json!({"model": model, "messages": [{"role": "user", "content": "hi"}]})
        .to_string()
        .into_bytes()
}

fn chat_with_n(n: Value) -> Vec<u8> {
    json!({"model": "default", "messages": [{"role": "user", "content": "hi"}], "n": n})
        .to_string()
        .into_bytes()
}

/// A request whose `metadata` nests 200 arrays deep: valid JSON that
/// serde_json will not parse (at most 127 levels).
fn too_deep() -> Vec<u8> {
    format!(
        r#"{{"model": "default", "input": "hi", "messages": [{{"role": "user", "content": "hi"}}], "metadata": {}{}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    )
    .into_bytes()
}

/// (name, token, body, expected status, expected error code)
type ChatCase = (
    &'static str,
    Option<&'static str>,
    Vec<u8>,
    StatusCode,
    &'static str,
);
/// (name, token, body, Idempotency-Key, expected status, expected error code)
type OpCase = (
    &'static str,
    Option<&'static str>,
    Vec<u8>,
    Option<&'static str>,
    StatusCode,
    &'static str,
);

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn bad_chat_requests_are_refused_before_anything_is_sent() {
    let (gw, provider) = setup().await;
    let cases: Vec<ChatCase> = vec![
        (
            "no token",
            None,
            chat("default"),
            StatusCode::UNAUTHORIZED,
            "invalid_api_key",
        ),
        (
            "wrong token",
            Some("nope"),
            chat("default"),
            StatusCode::UNAUTHORIZED,
            "invalid_api_key",
        ),
        (
            "operator token",
            Some(OPERATOR),
            chat("default"),
            StatusCode::FORBIDDEN,
            "forbidden",
        ),
        (
            "malformed JSON",
            Some(CLIENT_A),
            b"{\"model\": ".to_vec(),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (
            "trailing data after the JSON document",
            Some(CLIENT_A),
            [chat("default"), b" {\"model\": \"default\"}".to_vec()].concat(),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (
            "unknown model",
            Some(CLIENT_A),
            chat("gpt-5-turbo"),
            StatusCode::NOT_FOUND,
            "model_not_found",
        ),
        // A proxy that reads the first `model` would not see the one that
        // runs: a member named twice is refused.
        (
            "model named twice",
            Some(CLIENT_A),
            br#"{"model": "gpt-5-turbo", "model": "default", "messages": [{"role": "user", "content": "hi"}]}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            "stream named twice",
            Some(CLIENT_A),
            br#"{"model": "default", "stream": true, "stream": false, "messages": [{"role": "user", "content": "hi"}]}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            "oversized",
            Some(CLIENT_A),
            vec![b' '; 4096],
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
        ),
        (
            "wrong type",
            Some(CLIENT_A),
            json!({"model": "default", "messages": [{"role": "wizard", "content": "hi"}]})
                .to_string()
                .into_bytes(),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            "unsupported parameter",
            Some(CLIENT_A),
            json!({"model": "default", "messages": [{"role": "user", "content": "hi"}], "n": 2})
                .to_string()
                .into_bytes(),
            StatusCode::BAD_REQUEST,
            "unsupported_parameter",
        ),
        (
            "n of 0",
            Some(CLIENT_A),
            chat_with_n(json!(0)),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            "negative n",
            Some(CLIENT_A),
            chat_with_n(json!(-1)),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            "fractional n",
            Some(CLIENT_A),
            chat_with_n(json!(1.5)),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            "n past u32",
            Some(CLIENT_A),
            chat_with_n(json!(4_294_967_296_u64)),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            "n of 2.0",
            Some(CLIENT_A),
            chat_with_n(json!(2.0)),
            StatusCode::BAD_REQUEST,
            "unsupported_parameter",
        ),
        (
            "n as text",
            Some(CLIENT_A),
            chat_with_n(json!("2")),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            "nested past the parser's limit",
            Some(CLIENT_A),
            too_deep(),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            "empty messages",
            Some(CLIENT_A),
            json!({"model": "default", "messages": []})
                .to_string()
                .into_bytes(),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
    ];
    for (name, token, body, status, want) in cases {
        let (got, body) = send(&gw, "/v1/chat/completions", token, body, None).await;
        assert_eq!(got, status, "{name}: {body}");
        assert_eq!(code(&body), want, "{name}: {body}");
        assert!(
            !body["error"]["message"].as_str().unwrap().is_empty(),
            "{name}"
        );
    }
    let (_, body) = send(
        &gw,
        "/v1/chat/completions",
        Some(CLIENT_A),
        json!({"model": "default", "messages": [{"role": "wizard", "content": "hi"}]})
            .to_string()
            .into_bytes(),
        None,
    )
    .await;
    assert_eq!(body["error"]["param"], "messages[0].role", "{body}");
    // What is wrong is said, naming what is wrong: an `n` that is no
    // number of choices, a body nested too deep (not "malformed").
    for (body, param, message) in [
        (chat_with_n(json!(0)), "n", "n must be at least 1"),
        (chat_with_n(json!(-1)), "n", "n must be at least 1"),
        (
            chat_with_n(json!(1.5)),
            "n",
            "n must be a whole number, at least 1",
        ),
        (chat_with_n(json!(0.0)), "n", "n must be at least 1"),
        (
            chat_with_n(json!("1")),
            "n",
            "n must be a whole number, at least 1",
        ),
        (
            chat_with_n(json!(1e10)),
            "n",
            "n must be a whole number, at most 4294967295",
        ),
        (
            too_deep(),
            "body",
            "body: arrays and objects nested deeper than 127 levels",
        ),
    ] {
        for path in ["/v1/chat/completions", "/v1/responses"] {
            if path == "/v1/responses" && param == "n" {
                continue;
            }
            let (st, got) = send(&gw, path, Some(CLIENT_A), body.clone(), None).await;
            assert_eq!(st, StatusCode::BAD_REQUEST, "{path}: {got}");
            assert_eq!(got["error"]["param"], param, "{path}: {got}");
            assert_eq!(got["error"]["message"], message, "{path}: {got}");
            assert_eq!(got["error"]["type"], "invalid_request_error", "{got}");
        }
    }
    assert_eq!(
        provider.requests().await,
        0,
        "nothing may reach the provider"
    );
    // The alias works and reaches the provider exactly once.
    let (st, body) = send(
        &gw,
        "/v1/chat/completions",
        Some(CLIENT_A),
        chat("gpt-4o-mini"),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(provider.requests().await, 1);
}

#[tokio::test]
async fn bad_operation_requests_record_nothing() {
    let (gw, _provider) = setup().await;
    let ok = json!({"action": "ship", "params": {"order": 1}})
        .to_string()
        .into_bytes();
    let cases: Vec<OpCase> = vec![
        (
            "no token",
            None,
            ok.clone(),
            Some("K-1"),
            StatusCode::UNAUTHORIZED,
            "invalid_api_key",
        ),
        (
            "wrong token",
            Some("nope"),
            ok.clone(),
            Some("K-1"),
            StatusCode::UNAUTHORIZED,
            "invalid_api_key",
        ),
        (
            "no key",
            Some(CLIENT_A),
            ok.clone(),
            None,
            StatusCode::BAD_REQUEST,
            "missing_idempotency_key",
        ),
        (
            "key with a space",
            Some(CLIENT_A),
            ok.clone(),
            Some("K 1"),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            "malformed JSON",
            Some(CLIENT_A),
            b"{\"action\": \"ship\",".to_vec(),
            Some("K-1"),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (
            "a second document after the first",
            Some(CLIENT_A),
            [
                ok.clone(),
                json!({"action": "refund", "params": {"order": 2}})
                    .to_string()
                    .into_bytes(),
            ]
            .concat(),
            Some("K-1"),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (
            "trailing garbage",
            Some(CLIENT_A),
            [ok.clone(), b"xx".to_vec()].concat(),
            Some("K-1"),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (
            "oversized",
            Some(CLIENT_A),
            vec![b' '; 4096],
            Some("K-1"),
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
        ),
        (
            "missing params",
            Some(CLIENT_A),
            json!({"action": "ship"}).to_string().into_bytes(),
            Some("K-1"),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            "bad action name",
            Some(CLIENT_A),
            json!({"action": "", "params": {}}).to_string().into_bytes(),
            Some("K-1"),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            "too deep",
            Some(CLIENT_A),
            format!(
                "{{\"action\":\"ship\",\"params\":{}1{}}}",
                "[".repeat(40),
                "]".repeat(40)
            )
            .into_bytes(),
            Some("K-1"),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
    ];
    for (name, token, body, key, status, want) in cases {
        let (got, body) = send(&gw, "/v1/operations", token, body, key).await;
        assert_eq!(got, status, "{name}: {body}");
        assert_eq!(code(&body), want, "{name}: {body}");
    }
    let (_, body) = send(
        &gw,
        "/v1/operations",
        Some(CLIENT_A),
        ok.clone(),
        Some("K 1"),
    )
    .await;
    assert_eq!(body["error"]["param"], "Idempotency-Key", "{body}");
    // A member named twice (I-JSON forbids it): parsers disagree on which
    // one counts, so what was approved would be ambiguous. Refused naming
    // the member, an escaped spelling of the name included.
    for (params, param) in [
        (r#"{"qty": 1, "qty": 100}"#, "params.qty"),
        (
            r#"{"items": [{"sku": "A", "s\u006bu": "B"}]}"#,
            "params.items[0].sku",
        ),
    ] {
        let body = format!(r#"{{"action": "ship", "params": {params}}}"#);
        let (st, body) = send(
            &gw,
            "/v1/operations",
            Some(CLIENT_A),
            body.into_bytes(),
            Some("K-dup"),
        )
        .await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{params}: {body}");
        assert_eq!(code(&body), "invalid_field", "{body}");
        assert_eq!(body["error"]["param"], param, "{body}");
    }
    let (st, body) = send(
        &gw,
        "/v1/operations/K-1/outcome",
        Some(CLIENT_A),
        json!({"epoch": 1, "outcome": "maybe"})
            .to_string()
            .into_bytes(),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["param"], "outcome", "{body}");
    // A key in the path is named as the path's `key`, not as the header a
    // begin sends it in.
    for (path, body) in [
        ("/v1/operations/K%201/dispatch", json!({"epoch": 1})),
        (
            "/v1/operations/K%C3%A9/outcome",
            json!({"epoch": 1, "outcome": "abandoned"}),
        ),
        (
            "/v1/reconcile/K%201/report",
            json!({"outcome": "not_found"}),
        ),
    ] {
        let body = body.to_string().into_bytes();
        let (st, body) = send(&gw, path, Some(CLIENT_A), body, None).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert_eq!(body["error"]["param"], "key", "{path}: {body}");
    }
    let resp = gw
        .http
        .get(gw.url("/v1/operations/K%201"))
        .bearer_auth(CLIENT_A)
        .send()
        .await
        .unwrap();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["param"], "key", "{body}");
    assert_eq!(gw.all_operations().await, 0, "nothing may be recorded");
}

/// Every operations-API body names a top-level field that is missing,
/// unknown, given twice or of the wrong type in `param` (a missing one
/// used to be named only in the message), over real HTTP, and nothing is
/// recorded; the chat and Responses bodies, read the same way, too.
#[tokio::test]
async fn every_body_names_the_field_that_is_missing_or_wrong() {
    let (gw, provider) = setup().await;
    let admin = "/v1/admin/operations/tenant-a/K-1/resolve";
    // (path, token, body, the field `param` must name)
    let cases: [(&str, &str, &str, &str); 25] = [
        (
            "/v1/chat/completions",
            CLIENT_A,
            r#"{"messages": [{"role": "user", "content": "hi"}]}"#,
            "model",
        ),
        (
            "/v1/chat/completions",
            CLIENT_A,
            r#"{"model": "default"}"#,
            "messages",
        ),
        (
            "/v1/responses",
            CLIENT_A,
            r#"{"model": "default"}"#,
            "input",
        ),
        (
            "/v1/responses",
            CLIENT_A,
            r#"{"model": "default", "input": "hi", "previous_id": "r"}"#,
            "previous_id",
        ),
        ("/v1/operations", CLIENT_A, r#"{"params": {}}"#, "action"),
        (
            "/v1/operations",
            CLIENT_A,
            r#"{"action": "ship"}"#,
            "params",
        ),
        (
            "/v1/operations",
            CLIENT_A,
            r#"{"action": 7, "params": {}}"#,
            "action",
        ),
        (
            "/v1/operations",
            CLIENT_A,
            r#"{"action": "ship", "params": {}, "scope": "tenant-b"}"#,
            "scope",
        ),
        (
            "/v1/operations",
            CLIENT_A,
            r#"{"action": "ship", "action": "refund", "params": {}}"#,
            "action",
        ),
        ("/v1/operations", CLIENT_A, r#"["ship", {}]"#, "body"),
        (
            "/v1/operations/K-1/approve",
            CLIENT_A,
            r#"{"action": "ship"}"#,
            "params",
        ),
        ("/v1/operations/K-1/dispatch", CLIENT_A, r#"{}"#, "epoch"),
        (
            "/v1/operations/K-1/dispatch",
            CLIENT_A,
            r#"{"epoch": "1"}"#,
            "epoch",
        ),
        // Past 2^53: not "send it as a string" (a string is refused too).
        (
            "/v1/operations/K-1/dispatch",
            CLIENT_A,
            r#"{"epoch": 9223372036854775808}"#,
            "epoch",
        ),
        (
            "/v1/operations/K-1/outcome",
            CLIENT_A,
            r#"{"epoch": 1}"#,
            "outcome",
        ),
        (
            "/v1/operations/K-1/outcome",
            CLIENT_A,
            r#"{"outcome": "confirmed"}"#,
            "epoch",
        ),
        (
            "/v1/reconcile/K-1/report",
            CLIENT_A,
            r#"{"records": []}"#,
            "outcome",
        ),
        (
            "/v1/reconcile/K-1/report",
            CLIENT_A,
            r#"{"outcome": "found", "records": [{"params": {}}]}"#,
            "records[0]",
        ),
        (
            "/v1/reconcile/lease",
            CLIENT_A,
            r#"{"limit": "5"}"#,
            "limit",
        ),
        ("/v1/reconcile/lease", CLIENT_A, r#"{"lease": 5}"#, "lease"),
        (admin, OPERATOR, r#"{"evidence": "portal"}"#, "outcome"),
        (admin, OPERATOR, r#"{"outcome": "confirmed"}"#, "evidence"),
        (
            admin,
            OPERATOR,
            r#"{"outcome": "confirmed", "evidence": "portal", "actor": "me"}"#,
            "actor",
        ),
        (
            admin,
            OPERATOR,
            r#"{"outcome": "maybe", "evidence": "portal"}"#,
            "outcome",
        ),
        (
            admin,
            OPERATOR,
            r#"{"outcome": "rejected", "evidence": 1}"#,
            "evidence",
        ),
    ];
    for (path, token, body, field) in cases {
        let key = (path == "/v1/operations").then_some("K-1");
        let (st, got) = send(&gw, path, Some(token), body.as_bytes().to_vec(), key).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{path} {body}: {got}");
        assert_eq!(
            got["error"]["code"], "invalid_field",
            "{path} {body}: {got}"
        );
        assert_eq!(got["error"]["param"], field, "{path} {body}: {got}");
        let message = got["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with(field) || field == "body",
            "{path} {body}: {message}"
        );
    }
    let (_, got) = send(
        &gw,
        "/v1/operations/K-1/dispatch",
        Some(CLIENT_A),
        b"{}".to_vec(),
        None,
    )
    .await;
    assert_eq!(got["error"]["message"], "epoch: required", "{got}");
    assert_eq!(gw.all_operations().await, 0, "nothing may be recorded");
    assert_eq!(provider.requests().await, 0);
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json() {
    let (gw, provider) = setup().await;
    let resp = gw.http.get(gw.url("/v2/nothing")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unknown_route");
    // A framework calling an OpenAI route not served here learns which are.
    let resp = gw
        .http
        .post(gw.url("/v1/embeddings"))
        .bearer_auth(CLIENT_A)
        .body(r#"{"model": "default", "input": "x"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let body: Value = resp.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("/v1/embeddings"), "{message}");
    assert!(message.contains("POST /v1/chat/completions"), "{message}");
    assert_eq!(provider.requests().await, 0);
    let resp = gw.http.delete(gw.url("/v1/models")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
    let resp = gw.http.get(gw.url("/healthz")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
}

/// A header that names who calls, which operation or which task, or
/// decides where the request may go, given twice: proxies and frameworks disagree on which copy counts (the first,
/// the last, both joined), so the request is refused naming the header,
/// and nothing is recorded or sent.
#[tokio::test]
async fn identity_headers_given_twice_are_refused() {
    let (gw, provider) = setup().await;
    let begin = || {
        gw.http
            .post(gw.url("/v1/operations"))
            .header("content-type", "application/json")
            .body(r#"{"action": "ship", "params": {"order": 1}}"#)
    };
    let cases = [
        (
            "Idempotency-Key",
            begin()
                .bearer_auth(CLIENT_A)
                .header("Idempotency-Key", "K-1")
                .header("Idempotency-Key", "K-2"),
            StatusCode::BAD_REQUEST,
        ),
        (
            "Authorization",
            begin()
                .header("authorization", format!("Bearer {CLIENT_A}"))
                .header("authorization", "Bearer another-token")
                .header("Idempotency-Key", "K-1"),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "x-handover-task",
            gw.http
                .post(gw.url("/v1/chat/completions"))
                .bearer_auth(CLIENT_A)
                .header("x-handover-task", "t-1")
                .header("x-handover-task", "t-2")
                .header("content-type", "application/json")
                .body(chat("default")),
            StatusCode::BAD_REQUEST,
        ),
        // Which providers may receive the data: a proxy's label beside the
        // client's must not be settled by order.
        (
            "x-handover-data-class",
            gw.http
                .post(gw.url("/v1/chat/completions"))
                .bearer_auth(CLIENT_A)
                .header("x-handover-data-class", "public")
                .header("x-handover-data-class", "internal")
                .header("content-type", "application/json")
                .body(chat("default")),
            StatusCode::BAD_REQUEST,
        ),
        (
            "x-handover-commit-point",
            gw.http
                .post(gw.url("/v1/chat/completions"))
                .bearer_auth(CLIENT_A)
                .header("x-handover-commit-point", "first_token")
                .header("x-handover-commit-point", "complete")
                .header("content-type", "application/json")
                .body(chat("default")),
            StatusCode::BAD_REQUEST,
        ),
    ];
    for (header, req, status) in cases {
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), status, "{header}");
        let body: Value = resp.json().await.unwrap();
        let text = body["error"]["message"].as_str().unwrap_or_default();
        assert!(text.contains("twice"), "{header}: {body}");
        if status == StatusCode::BAD_REQUEST {
            assert_eq!(body["error"]["param"], header, "{body}");
        }
    }
    assert_eq!(gw.all_operations().await, 0, "nothing recorded");
    assert_eq!(provider.requests().await, 0, "nothing sent");
}

/// A compressed body is refused by its header (415 naming
/// `content-encoding`), on the chat, Responses and write paths alike,
/// before it is parsed: nothing is recorded or sent. `identity` is no
/// coding at all and passes.
#[tokio::test]
async fn compressed_bodies_are_refused_naming_the_header() {
    let (gw, provider) = setup().await;
    // The first bytes of a gzip stream, then what a client compressed.
    let gzip = [&[0x1f, 0x8b, 0x08, 0x00][..], &chat("default")].concat();
    let cases = [
        ("/v1/chat/completions", "gzip"),
        ("/v1/responses", "br"),
        ("/v1/operations", "identity, deflate"),
    ];
    for (path, coding) in cases {
        let resp = gw
            .http
            .post(gw.url(path))
            .bearer_auth(CLIENT_A)
            .header("content-type", "application/json")
            .header("content-encoding", coding)
            .header("Idempotency-Key", "K-1")
            .body(gzip.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE, "{path}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(
            body["error"]["code"], "unsupported_content_encoding",
            "{body}"
        );
        assert_eq!(body["error"]["param"], "content-encoding", "{body}");
        let named = coding.rsplit(", ").next().unwrap();
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(named), "{path}: {message}");
    }
    assert_eq!(gw.all_operations().await, 0, "nothing recorded");
    assert_eq!(provider.requests().await, 0, "nothing sent");
    let resp = gw
        .http
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_A)
        .header("content-type", "application/json")
        .header("content-encoding", "Identity")
        .body(chat("default"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK, "identity is no coding");
    assert_eq!(provider.requests().await, 1);
}
