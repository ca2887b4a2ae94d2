//! Approvals and exact numbers over HTTP, on a real SQLite ledger file:
//! `POST /v1/operations/{key}/approve` binds the parameters (a later begin
//! with others gets 422, nothing claimed); a number that cannot be
//! recorded exactly is refused with 400 naming its path, nothing written;
//! the first caller and every replay see the one recorded result.

use crate::support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, CLIENT_B, Running};

fn config() -> String {
    let mut c = support::provider("p", "http://127.0.0.1:9/v1");
    c.push_str(&support::policy("default", &["p"], "first_token"));
    c.push_str("\n[actions.ship]\nblock = \"operation\"\nlease = \"30s\"\n");
    c.push_str(&support::gateway_section(64 * 1024, "5s", ""));
    c
}

/// POSTs `body` (raw JSON text, as a client wrote it) to `path`.
async fn send(
    gw: &Running,
    path: &str,
    key: Option<&str>,
    body: &str,
) -> (StatusCode, Value, bool) {
    let mut req = gw
        .http
        .post(gw.url(path))
        .bearer_auth(CLIENT_A)
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(k) = key {
        req = req.header("Idempotency-Key", k);
    }
    let resp = req.send().await.unwrap();
    let replayed = resp.headers().contains_key("idempotent-replayed");
    (resp.status(), resp.json().await.unwrap(), replayed)
}

async fn approve(gw: &Running, key: &str, params: &str) -> (StatusCode, Value) {
    let body = format!(r#"{{"action": "ship", "params": {params}}}"#);
    let (st, v, _) = send(gw, &format!("/v1/operations/{key}/approve"), None, &body).await;
    (st, v)
}

async fn begin(gw: &Running, key: &str, params: &str) -> (StatusCode, Value, bool) {
    let body = format!(r#"{{"action": "ship", "params": {params}}}"#);
    send(gw, "/v1/operations", Some(key), &body).await
}

async fn record(gw: &Running, key: &str) -> Value {
    let resp = gw
        .http
        .get(gw.url(&format!("/v1/operations/{key}")))
        .bearer_auth(CLIENT_A)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    resp.json::<Value>().await.unwrap()["operation"].clone()
}

#[tokio::test]
async fn an_approval_binds_the_parameters_of_every_later_begin() {
    let gw = Running::start(&config()).await;
    let (st, body) = approve(&gw, "K-701", r#"{"sku": "KETTLE", "qty": 1}"#).await;
    assert_eq!(st, StatusCode::CREATED, "{body}");
    assert_eq!(body["status"], "planned");
    assert_eq!(body["operation"]["key"], "K-701");
    let fingerprint = body["operation"]["fingerprint"].clone();
    // Again, members in another order: nothing changes.
    let (st, body) = approve(&gw, "K-701", r#"{"qty": 1.0, "sku": "KETTLE"}"#).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(
        (&body["status"], &body["state"]),
        (&json!("already_approved"), &json!("planned"))
    );
    // Other parameters: refused, for approve and for begin, nothing claimed.
    let (st, body) = approve(&gw, "K-701", r#"{"sku": "KETTLE", "qty": 2}"#).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["recorded"], fingerprint);
    let (st, body, _) = begin(&gw, "K-701", r#"{"sku": "KETTLE", "qty": 2}"#).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "params_mismatch");
    let rec = record(&gw, "K-701").await;
    assert_eq!(
        (&rec["state"]["state"], &rec["epoch"]),
        (&json!("planned"), &json!(0))
    );
    assert_eq!(rec["params"], json!({"qty": 1, "sku": "KETTLE"}));
    // Another client's scope is another operation.
    let other = gw
        .http
        .post(gw.url("/v1/operations/K-701/approve"))
        .bearer_auth(CLIENT_B)
        .json(&json!({"action": "ship", "params": {"sku": "KETTLE", "qty": 2}}))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), StatusCode::CREATED);

    // The approved parameters run; the recorded result is every answer.
    let (st, started, _) = begin(&gw, "K-701", r#"{"sku": "KETTLE", "qty": 1}"#).await;
    assert_eq!(st, StatusCode::CREATED, "{started}");
    let epoch = started["claim"]["epoch"].as_u64().unwrap();
    let (st, body, _) = send(
        &gw,
        "/v1/operations/K-701/dispatch",
        None,
        &json!({"epoch": epoch}).to_string(),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    let outcome =
        format!(r#"{{"epoch": {epoch}, "outcome": "confirmed", "result": {{"total": 10.0}}}}"#);
    let (st, body, _) = send(&gw, "/v1/operations/K-701/outcome", None, &outcome).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    let told = body["operation"]["state"]["result"].clone();
    assert_eq!(told, json!({"total": 10}));
    let (st, body, replayed) = begin(&gw, "K-701", r#"{"sku": "KETTLE", "qty": 1}"#).await;
    assert_eq!((st, replayed), (StatusCode::OK, true), "{body}");
    assert_eq!(body["outcome"]["result"], told);
    let (st, body) = approve(&gw, "K-701", r#"{"sku": "KETTLE", "qty": 1}"#).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(
        (&body["status"], &body["outcome"]["result"]),
        (&json!("replayed"), &told)
    );
}

#[tokio::test]
async fn numbers_that_cannot_be_recorded_exactly_are_refused_by_path() {
    let gw = Running::start(&config()).await;
    let refused = [
        (
            r#"{"items": [{}, {}, {"batch": 9007199254740993}]}"#,
            "params.items[2].batch",
        ),
        (r#"{"id": 12345678901234567891}"#, "params.id"),
        (r#"{"id": 123456789012345678901234}"#, "params.id"),
        (r#"{"pi": 3.14159265358979323846}"#, "params.pi"),
        (r#"{"n": 1e19}"#, "params.n"),
        // Past a double: serde_json cannot parse it at all.
        (r#"{"n": [1, 1e400]}"#, "params.n[1]"),
        (r#"{"n": -1E400}"#, "params.n"),
        (r#"{"n": 1e-400}"#, "params.n"),
    ];
    for (params, path) in refused {
        for (st, body) in [approve(&gw, "K-n", params).await, {
            let (st, body, _) = begin(&gw, "K-n", params).await;
            (st, body)
        }] {
            assert_eq!(st, StatusCode::BAD_REQUEST, "{params}: {body}");
            assert_eq!(body["error"]["param"], path, "{params}: {body}");
            assert_eq!(body["error"]["code"], "invalid_field");
        }
    }
    assert_eq!(gw.all_operations().await, 0, "nothing was written");

    // A result: refused by path, nothing recorded; then recorded as a string.
    let (st, started, _) = begin(&gw, "K-r", r#"{"n": 0.1}"#).await;
    assert_eq!(st, StatusCode::CREATED, "{started}");
    let epoch = started["claim"]["epoch"].as_u64().unwrap();
    let (st, _, _) = send(
        &gw,
        "/v1/operations/K-r/dispatch",
        None,
        &format!(r#"{{"epoch": {epoch}, "metadata": {{"seq": 18446744073709551615}}}}"#),
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert_eq!(record(&gw, "K-r").await["state"]["state"], "claimed");
    let (st, body, _) = send(
        &gw,
        "/v1/operations/K-r/dispatch",
        None,
        &format!(r#"{{"epoch": {epoch}}}"#),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    let big = format!(
        r#"{{"epoch": {epoch}, "outcome": "confirmed", "result": {{"id": 12345678901234567891}}}}"#
    );
    let (st, body, _) = send(&gw, "/v1/operations/K-r/outcome", None, &big).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["param"], "result.id");
    assert_eq!(record(&gw, "K-r").await["state"]["state"], "dispatched");
    let text = format!(
        r#"{{"epoch": {epoch}, "outcome": "confirmed", "result": {{"id": "12345678901234567891"}}}}"#
    );
    let (st, body, _) = send(&gw, "/v1/operations/K-r/outcome", None, &text).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    let (_, replay, _) = begin(&gw, "K-r", r#"{"n": 0.1}"#).await;
    assert_eq!(
        replay["outcome"]["result"],
        json!({"id": "12345678901234567891"})
    );
    assert_eq!(record(&gw, "K-r").await["params"], json!({"n": 0.1}));
}
