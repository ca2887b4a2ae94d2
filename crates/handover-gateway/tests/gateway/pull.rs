//! The pull API: agents that run a destination's lookup themselves lease
//! the due unknown operations of their own scope, report what they found,
//! and the reconciler's rules decide; a lease that passes makes the
//! operation due again; `serve`'s own reconciler leaves these actions alone.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{ManualClock, Timestamp};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, CLIENT_B, Running};

fn config() -> String {
    let mut c = support::provider("p", "http://127.0.0.1:9/v1");
    c.push_str(&support::policy("default", &["p"], "first_token"));
    c.push_str(
        r#"
[actions.ship]
timeout = "2s"
[actions.ship.lookup]
visibility_lag = "30s"
check_every = "5s"
max_check_every = "1m"
"#,
    );
    c.push_str(&support::gateway_section(64 * 1024, "5s", ""));
    c.replace("[gateway]\n", "[gateway]\nreconcile_every = \"10ms\"\n")
}

fn params(key: &str) -> Value {
    json!({"order": key, "sku": "A", "quantity": 1})
}

/// begin → dispatch → the agent's call is lost → unknown.
async fn unknown(gw: &Running, token: &str, key: &str) {
    let body = json!({"action": "ship", "params": params(key)});
    let (status, started) = gw.post_json(token, "/v1/operations", Some(key), body).await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    let epoch = started["claim"]["epoch"].as_u64().unwrap();
    let (status, _) = gw
        .post_json(
            token,
            &format!("/v1/operations/{key}/dispatch"),
            None,
            json!({"epoch": epoch}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, rec) = gw
        .post_json(
            token,
            &format!("/v1/operations/{key}/outcome"),
            None,
            json!({"epoch": epoch, "outcome": "unknown", "reason": "timeout after send"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{rec}");
}

async fn lease(gw: &Running, token: &str) -> Vec<String> {
    let (status, v) = gw
        .post_json(token, "/v1/reconcile/lease", None, json!({"limit": 10}))
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let mut keys: Vec<String> = v["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["key"].as_str().unwrap().to_owned())
        .collect();
    keys.sort();
    keys
}

async fn report(gw: &Running, token: &str, key: &str, body: Value) -> (StatusCode, Value) {
    gw.post_json(token, &format!("/v1/reconcile/{key}/report"), None, body)
        .await
}

#[tokio::test]
async fn agents_lease_their_own_due_operations_and_report_under_the_reconcilers_rules() {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_700_000_000_000)));
    let mut gw = Running::start_on_clock(&config(), clock.clone()).await;
    unknown(&gw, CLIENT_A, "K-1").await;
    unknown(&gw, CLIENT_A, "K-2").await;
    unknown(&gw, CLIENT_B, "K-3").await;

    assert!(lease(&gw, CLIENT_A).await.is_empty(), "nothing due yet");
    clock.advance(Duration::from_secs(5));
    // serve's own reconciler runs meanwhile, and must leave them alone.
    gw.passes(2).await;
    assert_eq!(
        lease(&gw, CLIENT_A).await,
        ["K-1", "K-2"],
        "only the caller's scope"
    );
    assert!(
        lease(&gw, CLIENT_A).await.is_empty(),
        "leased: not handed out twice"
    );
    assert_eq!(lease(&gw, CLIENT_B).await, ["K-3"]);

    // Found with the approved parameters: confirmed, and begin replays it.
    let found = json!({"outcome": "found",
        "records": [{"params": params("K-1"), "result": {"id": "S-1"}}]});
    let (status, v) = report(&gw, CLIENT_A, "K-1", found.clone()).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["reconciliation"], "confirmed");
    let body = json!({"action": "ship", "params": params("K-1")});
    let (status, replay) = gw
        .post_json(CLIENT_A, "/v1/operations", Some("K-1"), body)
        .await;
    assert_eq!(
        (status, replay["status"].as_str()),
        (StatusCode::OK, Some("replayed"))
    );
    assert_eq!(replay["outcome"]["result"]["id"], "S-1");

    // Another client cannot report on it: not in its scope.
    let (status, _) = report(&gw, CLIENT_B, "K-1", found).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Not found inside the visibility lag proves nothing.
    let (status, v) = report(&gw, CLIENT_A, "K-2", json!({"outcome": "not_found"})).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(
        (v["status"].as_str(), v["reconciliation"].as_str()),
        (Some("unknown"), Some("still_unknown"))
    );

    // A record with other parameters is a divergence, for review.
    let other = json!({"outcome": "found",
        "records": [{"params": {"order": "K-3", "sku": "A", "quantity": 2}, "result": {"id": "S-9"}}]});
    let (status, v) = report(&gw, CLIENT_B, "K-3", other).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["reconciliation"], "diverged");
    assert_eq!(v["operation"]["state"]["owner"], "review");
    let (status, v) = report(&gw, CLIENT_B, "K-3", json!({"outcome": "not_found"})).await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("not_reconcilable"))
    );

    // Once its lease and the lag have passed, K-2 is leased again; absent
    // now, it was not applied.
    clock.advance(Duration::from_secs(61));
    assert_eq!(
        lease(&gw, CLIENT_A).await,
        ["K-2"],
        "due again after the lease"
    );
    let (status, v) = report(&gw, CLIENT_A, "K-2", json!({"outcome": "not_found"})).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["status"], "rejected");
}

#[tokio::test]
async fn bad_pull_requests_name_the_field_and_change_nothing() {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_700_000_000_000)));
    let gw = Running::start_on_clock(&config(), clock.clone()).await;
    unknown(&gw, CLIENT_A, "K-1").await;
    clock.advance(Duration::from_secs(5));
    for (body, field) in [
        (json!({"limit": 0}), "limit"),
        (json!({"limit": 101}), "limit"),
        (json!({"lease_s": 0}), "lease_s"),
        (json!({"surprise": 1}), "body"),
    ] {
        let (status, v) = gw
            .post_json(CLIENT_A, "/v1/reconcile/lease", None, body)
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
        if field != "body" {
            assert_eq!(v["error"]["param"], field, "{v}");
        }
    }
    for (body, field) in [
        (json!({"outcome": "found"}), "records"),
        (json!({"outcome": "error"}), "error"),
        // What the outcome does not record is refused, not dropped.
        (
            json!({"outcome": "not_found", "records": [{"params": params("K-1"), "result": {}}]}),
            "records",
        ),
        (
            json!({"outcome": "error", "error": "timeout", "records": [{"params": params("K-1"), "result": {}}]}),
            "records",
        ),
        (
            json!({"outcome": "not_found", "error": "lookup flaky"}),
            "error",
        ),
    ] {
        let (status, v) = report(&gw, CLIENT_A, "K-1", body).await;
        assert_eq!(
            (status, v["error"]["param"].as_str()),
            (StatusCode::BAD_REQUEST, Some(field)),
            "{v}"
        );
    }
    let (status, v) = report(
        &gw,
        CLIENT_A,
        "K-1",
        json!({"outcome": "error", "error": "timeout"}),
    )
    .await;
    assert_eq!(
        (status, v["status"].as_str()),
        (StatusCode::OK, Some("unknown")),
        "{v}"
    );
    assert_eq!(v["reconciliation"], "still_unknown");
    assert_eq!(v["operation"]["state"]["owner"], "reconciler");
}

/// Lookup attempts of `key` (client A's scope) in the ledger.
async fn lookups(gw: &Running, key: &str) -> usize {
    let id = handover_ledger::OperationId::new("tenant-a", key).unwrap();
    gw.ledger
        .attempts(&id)
        .await
        .unwrap()
        .iter()
        .filter(|a| a.kind == handover_ledger::AttemptKind::Lookup)
        .count()
}

/// A report that proves nothing (an error, a miss inside the lag) is
/// recorded once per `check_every`: sent again and again, it no longer
/// grows the operation's attempt log (fourth probe: 30 error reports made
/// a 1.8 MB operation). A report that proves something always counts.
#[tokio::test]
async fn reports_that_prove_nothing_are_recorded_once_per_check_interval() {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_700_000_000_000)));
    let gw = Running::start_on_clock(&config(), clock.clone()).await;
    unknown(&gw, CLIENT_A, "K-1").await;
    clock.advance(Duration::from_secs(5));
    assert_eq!(lease(&gw, CLIENT_A).await, ["K-1"]);

    let error = json!({"outcome": "error", "error": "x".repeat(60 * 1024)});
    for _ in 0..30 {
        let (status, v) = report(&gw, CLIENT_A, "K-1", error.clone()).await;
        assert_eq!(status, StatusCode::OK, "{v}");
        assert_eq!(v["reconciliation"], "still_unknown");
        let (status, v) = report(&gw, CLIENT_A, "K-1", json!({"outcome": "not_found"})).await;
        assert_eq!(
            (status, v["reconciliation"].as_str()),
            (StatusCode::OK, Some("still_unknown"))
        );
    }
    assert_eq!(lookups(&gw, "K-1").await, 1, "one inconclusive report kept");

    // One interval later, a report that proves nothing is recorded again.
    clock.advance(Duration::from_secs(5));
    let (status, _) = report(&gw, CLIENT_A, "K-1", error).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(lookups(&gw, "K-1").await, 2);

    // Within the interval, a report that proves something still decides.
    let found = json!({"outcome": "found",
        "records": [{"params": params("K-1"), "result": {"id": "S-1"}}]});
    let (status, v) = report(&gw, CLIENT_A, "K-1", found).await;
    assert_eq!(
        (status, v["reconciliation"].as_str()),
        (StatusCode::OK, Some("confirmed")),
        "{v}"
    );
    assert_eq!(lookups(&gw, "K-1").await, 3);
}
