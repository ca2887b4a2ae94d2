//! An outcome refused because its claim's lease passed is kept once in the
//! attempt log for review — once per outcome, not once per try: a probe's
//! client that retried its late `confirmed` 20 times left 20 copies (each
//! up to 64 KiB of evidence and 64 KiB of result), and nothing bounded
//! them or the `GET` that returns them.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{ManualClock, Timestamp};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, Running};

fn config() -> String {
    let mut c = support::provider("p", "http://127.0.0.1:9/v1");
    c.push_str(&support::policy("default", &["p"], "first_token"));
    c.push_str("\n[actions.ship]\nlease = \"30s\"\n");
    c.push_str(&support::gateway_section(256 * 1024, "5s", ""));
    c
}

async fn attempts(gw: &Running, key: &str) -> Vec<Value> {
    gw.operation(key).await["attempts"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn a_late_outcome_sent_again_is_kept_once() {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_700_000_000_000)));
    let gw = Running::start_on_clock(&config(), clock.clone()).await;
    let body = json!({"action": "ship", "params": {"order": 1}});
    let (st, v) = gw
        .post_json(CLIENT_A, "/v1/operations", Some("K-1"), body)
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let epoch = v["claim"]["epoch"].as_u64().unwrap();
    let (st, _) = gw
        .post_json(
            CLIENT_A,
            "/v1/operations/K-1/dispatch",
            None,
            json!({"epoch": epoch}),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    clock.advance(Duration::from_secs(31));
    let blob = "y".repeat(20_000);
    let confirmed = json!({"epoch": epoch, "outcome": "confirmed",
        "result": {"id": "S-1", "blob": blob}, "evidence": blob});
    let rejected = json!({"epoch": epoch, "outcome": "rejected", "reason": "out of stock"});
    for (body, kept) in [
        (&confirmed, 1),
        (&confirmed, 1),
        (&confirmed, 1),
        (&rejected, 2),
        (&rejected, 2),
        (&confirmed, 2),
    ] {
        let (st, v) = gw
            .post_json(CLIENT_A, "/v1/operations/K-1/outcome", None, body.clone())
            .await;
        assert_eq!(st, StatusCode::CONFLICT, "{v}");
        assert_eq!(v["error"]["code"], "lease_expired", "{v}");
        let late: Vec<Value> = attempts(&gw, "K-1")
            .await
            .into_iter()
            .filter(|a| a["metadata"]["late_report"] == true)
            .collect();
        assert_eq!(late.len(), kept, "{late:?}");
    }
    let late = attempts(&gw, "K-1").await;
    let outcomes: Vec<&str> = late
        .iter()
        .map(|a| a["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["unknown", "confirmed", "rejected"], "{late:?}");
    assert_eq!(
        late[1]["metadata"]["result"]["id"], "S-1",
        "the result is kept"
    );
    assert_eq!(gw.operation("K-1").await["status"], "unknown");
}
