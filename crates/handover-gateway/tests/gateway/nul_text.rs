//! A NUL character (`\u0000`, which PostgreSQL `text` cannot hold) in the
//! operations API's text fields, on a real SQLite file and on real
//! PostgreSQL (when `HANDOVER_TEST_POSTGRES_URL` is set; in a fresh schema
//! dropped afterwards). Both backends answer alike: a caller's own text
//! (the dispatch `executor`, an operator's `evidence` or `reason`) is a 400
//! naming the field with nothing recorded, never a retryable 503; a
//! destination's refusal whose text holds a NUL is still recorded as
//! `rejected` (the NUL shown as U+FFFD), not left for review.

use crate::support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, OPERATOR, Running};

const NUL: &str = "refused: bad\u{0}body";
const SHOWN: &str = "refused: bad\u{FFFD}body";

fn config() -> String {
    let mut c = support::provider("p", "http://127.0.0.1:9/v1");
    c.push_str(&support::policy("default", &["p"], "first_token"));
    c.push_str(&support::gateway_section(64 * 1024, "5s", ""));
    c
}

/// Begun and (unless `executor` is refused) dispatched; the claim's epoch.
async fn started(gw: &Running, key: &str) -> u64 {
    let begin = json!({"action": "ship", "params": {"order": key}});
    let (st, body) = gw
        .post_json(CLIENT_A, "/v1/operations", Some(key), begin)
        .await;
    assert_eq!(st, StatusCode::CREATED, "{body}");
    body["claim"]["epoch"].as_u64().expect("epoch")
}

fn refused(what: &str, st: StatusCode, body: &Value, field: &str) {
    assert_eq!(st, StatusCode::BAD_REQUEST, "{what}: {body}");
    assert_eq!(body["error"]["code"], "invalid_field", "{what}: {body}");
    assert_eq!(body["error"]["param"], field, "{what}: {body}");
}

async fn scenario(gw: &Running) {
    // A client's executor name: 400, nothing dispatched.
    let epoch = started(gw, "K-1").await;
    let dispatch = "/v1/operations/K-1/dispatch";
    let (st, body) = gw
        .post_json(
            CLIENT_A,
            dispatch,
            None,
            json!({"epoch": epoch, "executor": NUL}),
        )
        .await;
    refused("dispatch", st, &body, "executor");
    let op = gw.operation("K-1").await;
    assert_eq!(op["status"], "claimed", "{op}");
    assert_eq!(op["operation"]["dispatch_count"], 0, "{op}");

    // The destination's refusal, its body holding a NUL: recorded and replayed.
    let (st, body) = gw
        .post_json(CLIENT_A, dispatch, None, json!({"epoch": epoch}))
        .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    let outcome = json!({"epoch": epoch, "outcome": "rejected", "reason": NUL, "evidence": NUL});
    let (st, body) = gw
        .post_json(CLIENT_A, "/v1/operations/K-1/outcome", None, outcome)
        .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "rejected", "{body}");
    let op = gw.operation("K-1").await;
    assert_eq!(op["status"], "rejected", "{op}");
    assert_eq!(op["operation"]["state"]["reason"], SHOWN, "{op}");
    let begin = json!({"action": "ship", "params": {"order": "K-1"}});
    let (st, body) = gw
        .post_json(CLIENT_A, "/v1/operations", Some("K-1"), begin)
        .await;
    assert_eq!(st, StatusCode::OK, "a replay: {body}");
    assert!(body.to_string().contains(SHOWN), "{body}");

    // An unknown outcome's reason likewise; then an operator's own words.
    let epoch = started(gw, "K-2").await;
    let (st, body) = gw
        .post_json(
            CLIENT_A,
            "/v1/operations/K-2/dispatch",
            None,
            json!({"epoch": epoch}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    let outcome = json!({"epoch": epoch, "outcome": "unknown", "reason": NUL});
    let (st, body) = gw
        .post_json(CLIENT_A, "/v1/operations/K-2/outcome", None, outcome)
        .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "unknown", "{body}");
    let resolve = "/v1/admin/operations/tenant-a/K-2/resolve";
    let (st, body) = gw
        .post_json(
            OPERATOR,
            resolve,
            None,
            json!({"outcome": "confirmed", "evidence": NUL}),
        )
        .await;
    refused("resolve evidence", st, &body, "evidence");
    let (st, body) = gw
        .post_json(
            OPERATOR,
            resolve,
            None,
            json!({"outcome": "rejected", "reason": NUL, "evidence": "checked"}),
        )
        .await;
    refused("resolve reason", st, &body, "reason");
    let op = gw.operation("K-2").await;
    assert_eq!(op["status"], "unknown", "{op}");
    assert_eq!(op["operation"]["state"]["reason"], SHOWN, "{op}");
    assert_eq!(
        op["attempts"].as_array().map(Vec::len),
        Some(1),
        "no operator attempt recorded: {op}"
    );
}

#[tokio::test]
async fn nul_in_text_on_sqlite() {
    let gw = Running::start(&config()).await;
    scenario(&gw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nul_in_text_on_postgres() {
    let Some(pg) = support::PgSchema::create("gw_nul").await else {
        return;
    };
    let in_schema = pg.url();
    let ledger = "[ledger]\nbackend = \"postgres\"\nurl_env = \"NUL_TEST_URL\"\n";
    let gw = Running::start_with_env(ledger, &config(), tempfile::tempdir().unwrap(), move |v| {
        (v == "NUL_TEST_URL").then(|| in_schema.clone())
    })
    .await;
    scenario(&gw).await;
    drop(gw);
    pg.drop().await;
}
