//! An outcome report's field that the outcome does not record is refused
//! (400 naming it) and the operation is left as it was: a destination's
//! id sent with `rejected`, a reason with `confirmed`, anything with
//! `abandoned` used to be dropped while the caller believed it recorded.

use crate::support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, Running};

fn config() -> String {
    let mut c = support::provider("p", "http://127.0.0.1:9/v1");
    c.push_str(&support::policy("default", &["p"], "first_token"));
    c.push_str("\n[actions.ship]\nlease = \"30s\"\n");
    c.push_str(&support::gateway_section(64 * 1024, "5s", ""));
    c
}

/// Begins `key` and dispatches it if asked to; the claim's epoch.
async fn claimed(gw: &Running, key: &str, dispatch: bool) -> u64 {
    let body = json!({"action": "ship", "params": {"order": key}});
    let (st, started) = gw
        .post_json(CLIENT_A, "/v1/operations", Some(key), body)
        .await;
    assert_eq!(st, StatusCode::CREATED, "{started}");
    let epoch = started["claim"]["epoch"].as_u64().unwrap();
    if dispatch {
        let path = format!("/v1/operations/{key}/dispatch");
        let (st, v) = gw
            .post_json(CLIENT_A, &path, None, json!({"epoch": epoch}))
            .await;
        assert_eq!(st, StatusCode::OK, "{v}");
    }
    epoch
}

#[tokio::test]
async fn fields_an_outcome_does_not_record_are_refused_by_name() {
    let gw = Running::start(&config()).await;
    // (outcome, its own fields, the misplaced field, whether dispatched)
    let cases: [(&str, Value, &str, bool); 8] = [
        (
            "confirmed",
            json!({"result": {"id": "S-1"}}),
            "reason",
            true,
        ),
        (
            "rejected",
            json!({"reason": "out of stock"}),
            "result",
            true,
        ),
        ("unknown", json!({"reason": "timeout"}), "result", true),
        (
            "not_sent",
            json!({"evidence": "refused at connect"}),
            "reason",
            false,
        ),
        (
            "not_sent",
            json!({"evidence": "refused at connect"}),
            "result",
            false,
        ),
        ("abandoned", json!({}), "reason", false),
        ("abandoned", json!({}), "result", false),
        ("abandoned", json!({}), "evidence", false),
    ];
    for (i, (outcome, own, field, dispatch)) in cases.into_iter().enumerate() {
        let key = format!("K-{i}");
        let epoch = claimed(&gw, &key, dispatch).await;
        let before = gw.operation(&key).await;
        let mut body = json!({"epoch": epoch, "outcome": outcome});
        let map = body.as_object_mut().unwrap();
        map.extend(own.as_object().unwrap().clone());
        map.insert(field.to_owned(), json!({"id": "maybe-created"}));
        if field != "result" {
            map.insert(field.to_owned(), json!("said"));
        }
        let path = format!("/v1/operations/{key}/outcome");
        let (st, v) = gw.post_json(CLIENT_A, &path, None, body).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{outcome} with {field}: {v}");
        assert_eq!(v["error"]["param"], field, "{v}");
        assert_eq!(v["error"]["code"], "invalid_field", "{v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains(outcome), "{msg}");
        assert_eq!(
            gw.operation(&key).await,
            before,
            "{outcome}: nothing changes"
        );

        // The same report without the misplaced field is recorded.
        let mut body = json!({"epoch": epoch, "outcome": outcome});
        body.as_object_mut()
            .unwrap()
            .extend(own.as_object().unwrap().clone());
        let (st, v) = gw.post_json(CLIENT_A, &path, None, body).await;
        assert_eq!(st, StatusCode::OK, "{outcome}: {v}");
    }
    // A `null` is an absent field, as everywhere.
    let epoch = claimed(&gw, "K-null", true).await;
    let body =
        json!({"epoch": epoch, "outcome": "confirmed", "result": {"id": "S-2"}, "reason": null});
    let (st, v) = gw
        .post_json(CLIENT_A, "/v1/operations/K-null/outcome", None, body)
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["status"], "confirmed", "{v}");
    assert!(v["operation"].to_string().contains("S-2"), "{v}");
}
