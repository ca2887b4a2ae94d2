//! The operations API end to end over HTTP, on a real SQLite ledger file:
//! the lifecycle, replay, the IETF-draft status codes, unresolved
//! operations, scope isolation between client tokens, and operator-only
//! resolution.

use crate::support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, CLIENT_B, OPERATOR, Running};

fn config() -> String {
    let mut c = support::provider("p", "http://127.0.0.1:9/v1");
    c.push_str(&support::policy("default", &["p"], "first_token"));
    c.push_str(
        r#"
[actions.ship]
block = "scope"
lease = "30s"
"#,
    );
    c.push_str(&support::gateway_section(64 * 1024, "5s", ""));
    c
}

async fn begin(gw: &Running, token: &str, key: &str, params: Value) -> (StatusCode, Value) {
    let resp = gw
        .http
        .post(gw.url("/v1/operations"))
        .bearer_auth(token)
        .header("Idempotency-Key", key)
        .json(&json!({"action": "ship", "params": params}))
        .send()
        .await
        .unwrap();
    (resp.status(), resp.json().await.unwrap())
}

async fn post(gw: &Running, token: &str, path: &str, body: Value) -> (StatusCode, Value) {
    let resp = gw
        .http
        .post(gw.url(path))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    (resp.status(), resp.json().await.unwrap())
}

async fn get(gw: &Running, token: &str, path: &str) -> (StatusCode, Value) {
    let resp = gw
        .http
        .get(gw.url(path))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (resp.status(), resp.json().await.unwrap())
}

fn epoch(started: &Value) -> u64 {
    started["claim"]["epoch"].as_u64().expect("epoch")
}

#[tokio::test]
async fn lifecycle_then_replay_conflict_and_in_progress() {
    let gw = Running::start(&config()).await;
    let (st, started) = begin(&gw, CLIENT_A, "K-701", json!({"order": 42, "sku": "A"})).await;
    assert_eq!(st, StatusCode::CREATED, "{started}");
    assert_eq!(started["status"], "started");
    assert_eq!(started["operation"]["scope"], "tenant-a");
    let e = epoch(&started);
    let dest_key = started["claim"]["destination_key"]
        .as_str()
        .unwrap()
        .to_owned();

    // A second request while the first holds the claim: 409, nothing claimed.
    let (st, body) = begin(&gw, CLIENT_A, "K-701", json!({"sku": "A", "order": 42})).await;
    assert_eq!(st, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["status"], "in_progress");
    // The same key with other parameters: 422 in every state.
    let (st, body) = begin(&gw, CLIENT_A, "K-701", json!({"order": 43, "sku": "A"})).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["status"], "conflict");
    assert_eq!(body["error"]["code"], "params_mismatch");

    let (st, body) = post(
        &gw,
        CLIENT_A,
        "/v1/operations/K-701/dispatch",
        json!({"epoch": e}),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body["destination_key"], dest_key.as_str());
    let (st, body) = post(
        &gw,
        CLIENT_A,
        "/v1/operations/K-701/outcome",
        json!({"epoch": e, "outcome": "confirmed", "result": {"shipment": "S-1"}}),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "confirmed");

    // A retry (member order changed) replays the recorded result.
    let resp = gw
        .http
        .post(gw.url("/v1/operations"))
        .bearer_auth(CLIENT_A)
        .header("Idempotency-Key", "K-701")
        .json(&json!({"params": {"sku": "A", "order": 42}, "action": "ship"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["idempotent-replayed"], "true");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["status"], "replayed");
    assert_eq!(body["outcome"]["result"]["shipment"], "S-1");
    // Finishing twice changes nothing.
    let (st, body) = post(
        &gw,
        CLIENT_A,
        "/v1/operations/K-701/outcome",
        json!({"epoch": e, "outcome": "rejected", "reason": "late"}),
    )
    .await;
    assert_eq!(st, StatusCode::CONFLICT, "{body}");
    let (_, shown) = get(&gw, CLIENT_A, "/v1/operations/K-701").await;
    assert_eq!(shown["status"], "confirmed");
    assert_eq!(shown["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(gw.all_operations().await, 1);
}

#[tokio::test]
async fn a_stale_epoch_and_writes_before_dispatch_are_refused() {
    let gw = Running::start(&config()).await;
    let (_, started) = begin(&gw, CLIENT_A, "K-1", json!({"n": 1})).await;
    let e = epoch(&started);
    let (st, body) = post(
        &gw,
        CLIENT_A,
        "/v1/operations/K-1/dispatch",
        json!({"epoch": e + 1}),
    )
    .await;
    assert_eq!(st, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "stale_claim");
    // Confirming something never dispatched is an illegal transition.
    let (st, body) = post(
        &gw,
        CLIENT_A,
        "/v1/operations/K-1/outcome",
        json!({"epoch": e, "outcome": "confirmed"}),
    )
    .await;
    assert_eq!(st, StatusCode::CONFLICT, "{body}");
    let (_, shown) = get(&gw, CLIENT_A, "/v1/operations/K-1").await;
    assert_eq!(shown["status"], "claimed");
    // Proof of not having sent gives the operation back.
    let (st, body) = post(
        &gw,
        CLIENT_A,
        "/v1/operations/K-1/outcome",
        json!({"epoch": e, "outcome": "not_sent", "evidence": "connection refused"}),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "planned");
    let (st, again) = begin(&gw, CLIENT_A, "K-1", json!({"n": 1})).await;
    assert_eq!(st, StatusCode::CREATED);
    assert!(epoch(&again) > e);
}

#[tokio::test]
async fn unknown_blocks_the_scope_until_an_operator_resolves_it() {
    let gw = Running::start(&config()).await;
    let (_, started) = begin(&gw, CLIENT_A, "K-9", json!({"order": 9})).await;
    let e = epoch(&started);
    post(
        &gw,
        CLIENT_A,
        "/v1/operations/K-9/dispatch",
        json!({"epoch": e}),
    )
    .await;
    let (st, body) = post(
        &gw,
        CLIENT_A,
        "/v1/operations/K-9/outcome",
        json!({"epoch": e, "outcome": "unknown", "reason": "timeout after send"}),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "unknown");

    let (st, body) = begin(&gw, CLIENT_A, "K-9", json!({"order": 9})).await;
    assert_eq!(st, StatusCode::LOCKED, "{body}");
    assert_eq!(body["status"], "unresolved");
    // block = "scope": another shipment in the same scope is suspended...
    let (st, body) = begin(&gw, CLIENT_A, "K-10", json!({"order": 10})).await;
    assert_eq!(st, StatusCode::LOCKED, "{body}");
    assert_eq!(body["status"], "suspended");
    assert_eq!(body["blocked_by"]["key"], "K-9");
    // ...but another scope is independent.
    let (st, _) = begin(&gw, CLIENT_B, "K-10", json!({"order": 10})).await;
    assert_eq!(st, StatusCode::CREATED);

    let (_, listed) = get(&gw, CLIENT_A, "/v1/operations").await;
    let keys: Vec<_> = listed["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"]["key"].clone())
        .collect();
    assert_eq!(keys, vec![json!("K-9")]);

    // A client cannot resolve, even its own operation.
    let resolve = json!({"outcome": "confirmed", "result": {"shipment": "S-9"}, "evidence": "carrier portal shows S-9"});
    let (st, body) = post(
        &gw,
        CLIENT_A,
        "/v1/admin/operations/tenant-a/K-9/resolve",
        resolve.clone(),
    )
    .await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{body}");
    let (_, shown) = get(&gw, CLIENT_A, "/v1/operations/K-9").await;
    assert_eq!(shown["status"], "unknown");
    // An operator sees it across scopes and resolves it with evidence.
    let (_, queue) = get(&gw, OPERATOR, "/v1/admin/operations").await;
    assert_eq!(queue["operations"].as_array().unwrap().len(), 1);
    let (st, body) = post(
        &gw,
        OPERATOR,
        "/v1/admin/operations/tenant-a/K-9/resolve",
        resolve,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "confirmed");
    let (st, body) = begin(&gw, CLIENT_A, "K-9", json!({"order": 9})).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(body["outcome"]["result"]["shipment"], "S-9");
    let (_, shown) = get(&gw, CLIENT_A, "/v1/operations/K-9").await;
    let actors: Vec<_> = shown["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["executor"].clone())
        .collect();
    assert!(actors.contains(&json!("operator:olga")), "{actors:?}");
}

#[tokio::test]
async fn one_client_never_sees_replays_or_writes_another_clients_operation() {
    let gw = Running::start(&config()).await;
    let (_, started) = begin(&gw, CLIENT_A, "K-701", json!({"order": 1})).await;
    let e = epoch(&started);
    // Client B with A's key and epoch: a different operation (its own scope).
    let (st, body) = post(
        &gw,
        CLIENT_B,
        "/v1/operations/K-701/dispatch",
        json!({"epoch": e}),
    )
    .await;
    assert_eq!(st, StatusCode::NOT_FOUND, "{body}");
    let (st, _) = get(&gw, CLIENT_B, "/v1/operations/K-701").await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (_, listed) = get(&gw, CLIENT_B, "/v1/operations?state=all").await;
    assert_eq!(listed["operations"], json!([]));
    // Naming a scope is refused, in the query and in the body.
    let (st, body) = get(&gw, CLIENT_B, "/v1/operations?scope=tenant-a").await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{body}");
    let (st, body) = post(
        &gw,
        CLIENT_B,
        "/v1/operations",
        json!({"scope": "tenant-a", "action": "ship", "params": {"order": 1}}),
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("scope"),
        "{body}"
    );
    // The same key under B is B's own, independent operation.
    let (st, b) = begin(&gw, CLIENT_B, "K-701", json!({"order": 1})).await;
    assert_eq!(st, StatusCode::CREATED);
    assert_eq!(b["operation"]["scope"], "tenant-b");
    let (_, a) = get(&gw, CLIENT_A, "/v1/operations/K-701").await;
    assert_eq!(a["status"], "claimed");
    assert_eq!(gw.all_operations().await, 2);
}

#[tokio::test]
async fn inside_the_destinations_idempotency_window_an_unknown_operation_may_be_resent_with_the_same_key()
 {
    let mut c = config();
    c = c.replace(
        "[actions.ship]\nblock = \"scope\"\nlease = \"30s\"\n",
        "[actions.ship]\nblock = \"scope\"\nlease = \"30s\"\n[actions.ship.idempotency]\nheader = \"Idempotency-Key\"\nretention = \"24h\"\n",
    );
    let gw = Running::start(&c).await;
    let (_, first) = begin(&gw, CLIENT_A, "K-5", json!({"order": 5})).await;
    assert_eq!(first["contract"]["idempotency_header"], "Idempotency-Key");
    let e = epoch(&first);
    post(
        &gw,
        CLIENT_A,
        "/v1/operations/K-5/dispatch",
        json!({"epoch": e}),
    )
    .await;
    post(
        &gw,
        CLIENT_A,
        "/v1/operations/K-5/outcome",
        json!({"epoch": e, "outcome": "unknown", "reason": "connection reset after send"}),
    )
    .await;
    let (st, again) = begin(&gw, CLIENT_A, "K-5", json!({"order": 5})).await;
    assert_eq!(st, StatusCode::CREATED, "{again}");
    assert_eq!(again["resend"], true);
    assert_eq!(
        again["claim"]["destination_key"],
        first["claim"]["destination_key"]
    );
    assert_eq!(again["claim"]["attempt_number"], 2);
    assert!(epoch(&again) > e);
    // The old claim is fenced off.
    let (st, body) = post(
        &gw,
        CLIENT_A,
        "/v1/operations/K-5/dispatch",
        json!({"epoch": e}),
    )
    .await;
    assert_eq!(st, StatusCode::CONFLICT, "{body}");
}

/// `block = "action"` suspends every scope's writes of the action while one
/// is unknown; another tenant is told so, and nothing more: not the
/// blocking operation's key, nor the reason its own client reported (free
/// text that may carry that tenant's data), nor when it happened.
#[tokio::test]
async fn an_action_wide_block_tells_another_scope_nothing_of_the_blocking_operation() {
    let mut c = support::provider("p", "http://127.0.0.1:9/v1");
    c.push_str(&support::policy("default", &["p"], "first_token"));
    c.push_str("\n[actions.ship]\nblock = \"action\"\n");
    c.push_str(&support::gateway_section(64 * 1024, "5s", ""));
    let gw = Running::start(&c).await;
    let (_, started) = begin(&gw, CLIENT_A, "ORDER-4711", json!({"order": 4711})).await;
    let e = epoch(&started);
    post(
        &gw,
        CLIENT_A,
        "/v1/operations/ORDER-4711/dispatch",
        json!({"epoch": e}),
    )
    .await;
    let secret = "timeout calling carrier for customer Ada Lovelace";
    let (st, _) = post(
        &gw,
        CLIENT_A,
        "/v1/operations/ORDER-4711/outcome",
        json!({"epoch": e, "outcome": "unknown", "reason": secret}),
    )
    .await;
    assert_eq!(st, StatusCode::OK);

    // The same tenant sees what blocks it.
    let (st, own) = begin(&gw, CLIENT_A, "ORDER-4712", json!({"order": 4712})).await;
    assert_eq!(st, StatusCode::LOCKED, "{own}");
    assert_eq!(own["blocked_by"]["key"], "ORDER-4711");
    assert_eq!(own["unknown"]["reason"], secret);

    let (st, other) = begin(&gw, CLIENT_B, "K-1", json!({"order": 1})).await;
    assert_eq!(st, StatusCode::LOCKED, "{other}");
    assert_eq!(other["status"], "suspended");
    let text = other.to_string();
    for leaked in ["ORDER-4711", "tenant-a", secret] {
        assert!(
            !text.contains(leaked),
            "{leaked:?} leaked to another scope: {text}"
        );
    }
    assert!(other["unknown"].get("since").is_none(), "{text}");
}

#[tokio::test]
async fn a_bad_list_query_is_refused_naming_the_parameter() {
    let gw = Running::start(&config()).await;
    for k in ["K-1", "K-2"] {
        begin(&gw, CLIENT_A, k, json!({"order": 1})).await;
    }
    let (st, listed) = get(&gw, CLIENT_A, "/v1/operations?state=all&limit=1").await;
    assert_eq!(st, StatusCode::OK, "{listed}");
    assert_eq!(listed["operations"].as_array().unwrap().len(), 1);
    // Each query parameter that is wrong is named: out of range, no
    // number, too big for one, given twice, unknown.
    for (who, path, param) in [
        (CLIENT_A, "/v1/operations?state=all&limit=0", "limit"),
        (CLIENT_A, "/v1/operations?state=all&limit=1001", "limit"),
        (OPERATOR, "/v1/admin/operations?limit=0", "limit"),
        (OPERATOR, "/v1/admin/operations?limit=5000", "limit"),
        (CLIENT_A, "/v1/operations?limit=abc", "limit"),
        (
            OPERATOR,
            "/v1/admin/operations?limit=99999999999999999999",
            "limit",
        ),
        (CLIENT_A, "/v1/operations?state=all&state=unknown", "state"),
        (OPERATOR, "/v1/admin/operations?limit=5&limit=6", "limit"),
        (CLIENT_A, "/v1/operations?page=2", "page"),
        (OPERATOR, "/v1/admin/operations?scope=a&scope=b", "scope"),
    ] {
        let (st, body) = get(&gw, who, path).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert_eq!(body["error"]["param"], param, "{path}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(param), "{path}: {message}");
    }
}

/// An operator's resolution keeps everything it was sent, or refuses it:
/// a `reason` with `confirmed` (or a `result` with `rejected`) used to be
/// dropped silently. Refused with 400 naming the field, nothing changed;
/// what a resolution records (evidence, result or reason, the operator) is
/// shown in the operation's JSON.
#[tokio::test]
async fn a_resolution_field_the_decision_has_no_place_for_is_refused_not_dropped() {
    let gw = Running::start(&config()).await;
    let cases = [
        (
            "K-20",
            json!({"outcome": "confirmed", "reason": "seen in the carrier portal", "evidence": "portal S-20"}),
            "reason",
            json!({"outcome": "confirmed", "result": {"shipment": "S-20"}, "evidence": "seen in the carrier portal: S-20"}),
        ),
        (
            "K-21",
            json!({"outcome": "rejected", "reason": "not in the export", "result": {"shipment": "S-21"}, "evidence": "export 12:00"}),
            "result",
            json!({"outcome": "rejected", "reason": "not in the export", "evidence": "export 12:00"}),
        ),
    ];
    let mut shown_all = String::new();
    // One after the other: `block = "scope"` suspends a second shipment
    // while the first is unknown.
    for (key, misplaced, field, proper) in cases {
        let (_, started) = begin(&gw, CLIENT_A, key, json!({"order": key})).await;
        let e = epoch(&started);
        post(
            &gw,
            CLIENT_A,
            &format!("/v1/operations/{key}/dispatch"),
            json!({"epoch": e}),
        )
        .await;
        let (st, body) = post(
            &gw,
            CLIENT_A,
            &format!("/v1/operations/{key}/outcome"),
            json!({"epoch": e, "outcome": "unknown", "reason": "timeout after send"}),
        )
        .await;
        assert_eq!(st, StatusCode::OK, "{body}");
        let path = format!("/v1/admin/operations/tenant-a/{key}/resolve");
        // A field in the wrong place, and a required one missing: each
        // refusal names its field.
        let missing = [
            (json!({"outcome": "confirmed", "result": {}}), "evidence"),
            (json!({"evidence": "portal"}), "outcome"),
        ];
        for (bad, field) in std::iter::once((misplaced, field)).chain(missing) {
            let (st, answer) = post(&gw, OPERATOR, &path, bad).await;
            assert_eq!(st, StatusCode::BAD_REQUEST, "{answer}");
            assert_eq!(answer["error"]["code"], "invalid_field", "{answer}");
            assert_eq!(answer["error"]["param"], field, "{answer}");
        }
        let (_, shown) = get(&gw, CLIENT_A, &format!("/v1/operations/{key}")).await;
        assert_eq!(shown["status"], "unknown", "nothing changed: {shown}");
        // Said where it has a place, all of it is recorded and shown.
        let (st, body) = post(&gw, OPERATOR, &path, proper).await;
        assert_eq!(st, StatusCode::OK, "{body}");
        let (_, shown) = get(&gw, CLIENT_A, &format!("/v1/operations/{key}")).await;
        shown_all.push_str(&shown.to_string());
    }
    for needle in [
        "seen in the carrier portal: S-20",
        "\"shipment\":\"S-20\"",
        "not in the export",
        "export 12:00",
        "operator:olga",
    ] {
        assert!(
            shown_all.contains(needle),
            "{needle} not shown: {shown_all}"
        );
    }
}

/// A claim taken while its sibling was still in flight may not be sent
/// once the sibling's outcome is lost: the block is checked again at
/// `dispatch` (the HTTP door claims and sends in two requests), with the
/// answer `begin` would give, and nothing is recorded as sent.
#[tokio::test]
async fn a_claim_is_suspended_at_dispatch_when_a_sibling_became_unknown() {
    let gw = Running::start(&config()).await;
    let (_, x) = begin(&gw, CLIENT_A, "K-X", json!({"order": 1})).await;
    let ex = epoch(&x);
    let (st, _) = post(
        &gw,
        CLIENT_A,
        "/v1/operations/K-X/dispatch",
        json!({"epoch": ex}),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    // K-Y is claimed while K-X is in flight.
    let (st, y) = begin(&gw, CLIENT_A, "K-Y", json!({"order": 2})).await;
    assert_eq!(st, StatusCode::CREATED, "{y}");
    let ey = epoch(&y);
    let (st, _) = post(
        &gw,
        CLIENT_A,
        "/v1/operations/K-X/outcome",
        json!({"epoch": ex, "outcome": "unknown", "reason": "timeout after send"}),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let (st, body) = post(
        &gw,
        CLIENT_A,
        "/v1/operations/K-Y/dispatch",
        json!({"epoch": ey}),
    )
    .await;
    assert_eq!(st, StatusCode::LOCKED, "{body}");
    assert_eq!(body["status"], "suspended");
    assert_eq!(body["blocked_by"]["key"], "K-X");
    let (_, shown) = get(&gw, CLIENT_A, "/v1/operations/K-Y").await;
    assert_eq!(shown["status"], "claimed", "{shown}");
    assert_eq!(shown["operation"]["dispatch_count"], 0, "{shown}");
    // The claim is given back with not_sent, as after any refused dispatch.
    let (st, body) = post(
        &gw,
        CLIENT_A,
        "/v1/operations/K-Y/outcome",
        json!({"epoch": ey, "outcome": "not_sent", "evidence": "suspended at dispatch"}),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "planned");
}

/// A list is read in pages: each full page says how to ask for the next
/// (`next`), and following it lists every operation once, in order. A
/// client cannot page into another scope; an operator pages across them.
#[tokio::test]
async fn lists_are_read_in_pages() {
    let gw = Running::start(&config()).await;
    for i in 0..5 {
        let (st, _) = begin(&gw, CLIENT_A, &format!("P-{i}"), json!({"order": i})).await;
        assert_eq!(st, StatusCode::CREATED);
    }
    let (st, _) = begin(&gw, CLIENT_B, "P-B", json!({"order": 9})).await;
    assert_eq!(st, StatusCode::CREATED);
    let mut seen = Vec::new();
    let mut path = "/v1/operations?state=all&limit=2".to_owned();
    loop {
        let (st, page) = get(&gw, CLIENT_A, &path).await;
        assert_eq!(st, StatusCode::OK, "{page}");
        for op in page["operations"].as_array().unwrap() {
            seen.push(op["id"]["key"].as_str().unwrap().to_owned());
        }
        match page["next"]["after_key"].as_str() {
            Some(after) => path = format!("/v1/operations?state=all&limit=2&after_key={after}"),
            None => break,
        }
    }
    assert_eq!(seen, ["P-0", "P-1", "P-2", "P-3", "P-4"]);
    let (st, body) = get(
        &gw,
        CLIENT_A,
        "/v1/operations?after_scope=tenant-b&after_key=P-B",
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["param"], "after_scope");

    // An operator's pages span scopes; the cursor names both halves.
    let (_, first) = get(&gw, OPERATOR, "/v1/admin/operations?state=all&limit=5").await;
    let next = &first["next"];
    let path = format!(
        "/v1/admin/operations?state=all&limit=5&after_scope={}&after_key={}",
        next["after_scope"].as_str().unwrap(),
        next["after_key"].as_str().unwrap()
    );
    let (_, rest) = get(&gw, OPERATOR, &path).await;
    let rest: Vec<_> = rest["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"]["key"].clone())
        .collect();
    assert_eq!(rest, [json!("P-B")]);
    let (st, body) = get(&gw, OPERATOR, "/v1/admin/operations?after_key=P-1").await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["param"], "after_scope");
    // A cursor whose operation is gone is no end of the list.
    let (st, body) = get(
        &gw,
        CLIENT_A,
        "/v1/operations?state=all&after_key=never-begun",
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["param"], "after_key");
}
