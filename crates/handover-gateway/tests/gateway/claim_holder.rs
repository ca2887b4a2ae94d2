//! Two clients of one scope racing on one key: the one that got
//! `in_progress` cannot write under the winner's claim by presenting its
//! epoch (a small counter it can read in the record). Probe finding: a
//! second client dispatched and confirmed — or could have rejected, so an
//! agent retried under a new key — an operation another client was sending.

use crate::support;

use handover_gateway::hash_token;
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, Running};

/// A second client of client A's scope.
const CLIENT_A2: &str = "token-client-a2";

fn config() -> String {
    let mut c = support::provider("p", "http://127.0.0.1:9/v1");
    c.push_str(&support::policy("default", &["p"], "first_token"));
    c.push_str("\n[actions.ship]\nlease = \"30s\"\n");
    let extra = format!(
        "\n[gateway.clients.a2]\ntoken_sha256 = \"{}\"\nscope = \"tenant-a\"\n",
        hash_token(CLIENT_A2)
    );
    c.push_str(&support::gateway_section(64 * 1024, "5s", &extra));
    c
}

/// The operation's state and dispatch count, read back from the ledger file.
async fn recorded(gw: &Running, key: &str) -> (String, u64, Value) {
    let v = gw.operation(key).await;
    let op = &v["operation"];
    (
        op["state"]["state"].as_str().unwrap().to_owned(),
        op["dispatch_count"].as_u64().unwrap(),
        v["attempts"].clone(),
    )
}

fn assert_not_holder(st: StatusCode, v: &Value) {
    assert_eq!(st, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"]["code"], "not_holder", "{v}");
    assert_eq!(v["error"]["param"], "epoch", "{v}");
}

#[tokio::test]
async fn a_racing_client_cannot_write_under_the_winners_epoch() {
    let gw = Running::start(&config()).await;
    let body = json!({"action": "ship", "params": {"order": 7}});
    let (st, won) = gw
        .post_json(CLIENT_A, "/v1/operations", Some("K-1"), body.clone())
        .await;
    assert_eq!(st, StatusCode::CREATED, "{won}");
    let epoch = won["claim"]["epoch"].as_u64().unwrap();
    let (st, lost) = gw
        .post_json(CLIENT_A2, "/v1/operations", Some("K-1"), body)
        .await;
    assert_eq!(st, StatusCode::CONFLICT, "{lost}");
    assert_eq!(lost["status"], "in_progress");

    // Before dispatch: the loser can neither dispatch nor give the claim back.
    let before = recorded(&gw, "K-1").await;
    for (path, body) in [
        ("dispatch", json!({"epoch": epoch})),
        ("outcome", json!({"epoch": epoch, "outcome": "abandoned"})),
        (
            "outcome",
            json!({"epoch": epoch, "outcome": "not_sent", "evidence": "made up"}),
        ),
    ] {
        let (st, v) = gw
            .post_json(CLIENT_A2, &format!("/v1/operations/K-1/{path}"), None, body)
            .await;
        assert_not_holder(st, &v);
    }
    assert_eq!(recorded(&gw, "K-1").await, before, "nothing changed");

    // After the winner's dispatch: the loser cannot finish it either.
    let (st, v) = gw
        .post_json(
            CLIENT_A,
            "/v1/operations/K-1/dispatch",
            None,
            json!({"epoch": epoch}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let before = recorded(&gw, "K-1").await;
    assert_eq!((before.0.as_str(), before.1), ("dispatched", 1));
    for body in [
        json!({"epoch": epoch, "outcome": "rejected", "reason": "made up"}),
        json!({"epoch": epoch, "outcome": "confirmed", "result": {"by": "a2"}}),
        json!({"epoch": epoch, "outcome": "unknown", "reason": "made up"}),
    ] {
        let (st, v) = gw
            .post_json(CLIENT_A2, "/v1/operations/K-1/outcome", None, body)
            .await;
        assert_not_holder(st, &v);
    }
    assert_eq!(recorded(&gw, "K-1").await, before, "nothing changed");

    // The holder's own outcome is the one recorded.
    let (st, v) = gw
        .post_json(
            CLIENT_A,
            "/v1/operations/K-1/outcome",
            None,
            json!({"epoch": epoch, "outcome": "confirmed", "result": {"by": "a"}}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let after = gw.operation("K-1").await;
    assert_eq!(after["operation"]["state"]["result"], json!({"by": "a"}));
}

/// A dispatch's `executor` is the client's own label, recorded under the
/// client's name: a client cannot write `operator:olga` or `reconciler`
/// into the attempt log a reviewer reads (probe finding).
#[tokio::test]
async fn a_dispatch_executor_is_recorded_under_the_clients_name() {
    let gw = Running::start(&config()).await;
    for (key, executor, expected) in [
        ("K-2", Some("operator:olga"), "client:a/operator:olga"),
        ("K-3", None, "client:a"),
    ] {
        let body = json!({"action": "ship", "params": {"order": key}});
        let (st, v) = gw
            .post_json(CLIENT_A, "/v1/operations", Some(key), body)
            .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        let mut dispatch = json!({"epoch": v["claim"]["epoch"]});
        if let Some(e) = executor {
            dispatch["executor"] = json!(e);
        }
        let path = format!("/v1/operations/{key}/dispatch");
        let (st, v) = gw.post_json(CLIENT_A, &path, None, dispatch).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        let (_, _, attempts) = recorded(&gw, key).await;
        assert_eq!(attempts[0]["executor"], expected, "{attempts}");
    }
}
