//! The operations API counts in the write protocol's metrics, as the Rust
//! `perform` does: `handover_operations_total{action,outcome}` moves by
//! exactly one per operation driven over HTTP, and
//! `handover_review_queue_size` follows the unknown operations — both read
//! from the gateway's own `/metrics`.

mod support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, Running, metric};

/// An action no other test counts: the recorder is the process's.
const ACTION: &str = "parcel";

fn config() -> String {
    let mut c = support::provider("p", "http://127.0.0.1:9/v1");
    c.push_str(&support::policy("default", &["p"], "first_token"));
    c.push_str(&format!("\n[actions.{ACTION}]\nlease = \"30s\"\n"));
    c.push_str(&support::gateway_section(64 * 1024, "5s", ""));
    c
}

async fn begin(gw: &Running, key: &str, params: Value) -> (StatusCode, Value) {
    gw.post_json(
        CLIENT_A,
        "/v1/operations",
        Some(key),
        json!({"action": ACTION, "params": params}),
    )
    .await
}

/// Begins `key`, dispatches it and reports `outcome` (with `extra` fields).
async fn perform(gw: &Running, key: &str, outcome: &str, extra: Value) {
    let (st, started) = begin(gw, key, json!({"n": 1})).await;
    assert_eq!(st, StatusCode::CREATED, "{started}");
    let epoch = started["claim"]["epoch"].as_u64().unwrap();
    if outcome != "abandoned" {
        let path = format!("/v1/operations/{key}/dispatch");
        let (st, body) = gw
            .post_json(CLIENT_A, &path, None, json!({"epoch": epoch}))
            .await;
        assert_eq!(st, StatusCode::OK, "{body}");
    }
    let mut body = json!({"epoch": epoch, "outcome": outcome});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let path = format!("/v1/operations/{key}/outcome");
    let (st, answer) = gw.post_json(CLIENT_A, &path, None, body).await;
    assert_eq!(st, StatusCode::OK, "{answer}");
}

const OUTCOMES: [&str; 5] = [
    "confirmed",
    "replayed",
    "conflict",
    "abandoned",
    "unresolved",
];

/// `handover_operations_total` of [`ACTION`] by outcome, 0 where absent.
async fn counted(gw: &Running) -> Vec<f64> {
    let text = gw.metrics().await;
    OUTCOMES
        .iter()
        .map(|o| {
            let series =
                format!("handover_operations_total{{action=\"{ACTION}\",outcome=\"{o}\"}}");
            metric(&text, &series).unwrap_or(0.0)
        })
        .collect()
}

#[tokio::test]
async fn operations_over_http_are_counted_once_each_and_the_review_queue_is_measured() {
    let mut gw = Running::start(&config()).await;
    let before = counted(&gw).await;

    perform(&gw, "K-1", "confirmed", json!({"result": {"id": 1}})).await;
    let (st, _) = begin(&gw, "K-1", json!({"n": 1})).await;
    assert_eq!(st, StatusCode::OK, "a replay");
    let (st, body) = gw
        .post_json(
            CLIENT_A,
            "/v1/operations/K-2/approve",
            None,
            json!({"action": ACTION, "params": {"n": 2}}),
        )
        .await;
    assert!(st.is_success(), "{body}");
    let (st, _) = begin(&gw, "K-2", json!({"n": 3})).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "a conflict");
    perform(&gw, "K-3", "abandoned", json!({})).await;
    perform(
        &gw,
        "K-4",
        "unknown",
        json!({"reason": "timeout after send"}),
    )
    .await;
    let (st, _) = begin(&gw, "K-4", json!({"n": 1})).await;
    assert!(!st.is_success(), "writes blocked while unresolved");

    let after = counted(&gw).await;
    let moved: Vec<f64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    // confirmed, replayed, conflict, abandoned, unresolved (the outcome
    // and the blocked begin after it). Approvals are not operations.
    assert_eq!(moved, vec![1.0, 1.0, 1.0, 1.0, 2.0], "{OUTCOMES:?}");

    // The reconciler's pass measures the review queue: one unknown.
    gw.passes(2).await;
    let text = gw.metrics().await;
    assert_eq!(
        metric(&text, "handover_review_queue_size"),
        Some(1.0),
        "{text}"
    );
}

/// Action names come from clients; only the configuration's become label
/// values. Operations of actions the file does not declare are counted
/// under `action="undeclared"`, so a client inventing names cannot grow
/// the series without bound or publish its names on `/metrics`.
#[tokio::test]
async fn undeclared_action_names_share_one_label() {
    let gw = Running::start(&config()).await;
    let label = "handover_operations_total{action=\"undeclared\",outcome=\"confirmed\"}";
    let before = metric(&gw.metrics().await, label).unwrap_or(0.0);
    for i in 0..20 {
        let key = format!("U-{i}");
        let action = format!("invented-action-{i}");
        let (st, started) = gw
            .post_json(
                CLIENT_A,
                "/v1/operations",
                Some(&key),
                json!({"action": action, "params": {}}),
            )
            .await;
        assert_eq!(st, StatusCode::CREATED, "{started}");
        let epoch = started["claim"]["epoch"].as_u64().unwrap();
        for (path, body) in [
            ("dispatch", json!({"epoch": epoch})),
            (
                "outcome",
                json!({"epoch": epoch, "outcome": "confirmed", "result": {}}),
            ),
        ] {
            let (st, answer) = gw
                .post_json(
                    CLIENT_A,
                    &format!("/v1/operations/{key}/{path}"),
                    None,
                    body,
                )
                .await;
            assert_eq!(st, StatusCode::OK, "{answer}");
        }
    }
    let text = gw.metrics().await;
    assert!(!text.contains("invented-action"), "{text}");
    assert_eq!(metric(&text, label), Some(before + 20.0), "{text}");
}
