//! `handover serve` runs the reconciler: a confirmation lost through the
//! HTTP door against a real HTTP destination (wiremock) is resolved by the
//! configured HTTP lookup, with the rules of the library's `Reconciler` —
//! an empty lookup inside the visibility lag proves nothing, a record with
//! other parameters goes to review. The ledger's clock is a manual one the
//! test advances; the reconciler's passes are awaited through its pass
//! counter, never by sleeping.

mod support;

use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{ManualClock, Timestamp};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, Running};
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const TOKEN: &str = "s3cret-lookup-token";

fn env(var: &str) -> Option<String> {
    (var == "SHIP_LOOKUP_TOKEN").then(|| TOKEN.to_owned())
}

fn config(dest: &str) -> String {
    let mut c = support::provider("p", "http://127.0.0.1:9/v1");
    c.push_str(&support::policy("default", &["p"], "first_token"));
    c.push_str(&format!(
        r#"
[actions.ship]
timeout = "2s"
[actions.ship.lookup]
visibility_lag = "30s"
check_every = "5s"
max_check_every = "1m"
method = "GET"
url = "{dest}/shipments?reference={{destination_key}}&order={{params.order}}"
records = "/items"
[actions.ship.lookup.headers]
Authorization = {{ env = "SHIP_LOOKUP_TOKEN", prefix = "Bearer " }}
[actions.ship.lookup.match]
sku = "/sku"
quantity = "/qty"
"#
    ));
    c.push_str(&support::gateway_section(64 * 1024, "5s", ""));
    c.replace("[gateway]\n", "[gateway]\nreconcile_every = \"10ms\"\n")
}

async fn call(gw: &Running, path: &str, key: Option<&str>, body: Value) -> (StatusCode, Value) {
    let mut req = gw.http.post(gw.url(path)).bearer_auth(CLIENT_A);
    if let Some(key) = key {
        req = req.header("Idempotency-Key", key);
    }
    let resp = req.json(&body).send().await.unwrap();
    (resp.status(), resp.json().await.unwrap())
}

async fn state(gw: &Running, key: &str) -> Value {
    let resp = gw
        .http
        .get(gw.url(&format!("/v1/operations/{key}")))
        .bearer_auth(CLIENT_A)
        .send()
        .await
        .unwrap();
    let v: Value = resp.json().await.unwrap();
    v["operation"]["state"].clone()
}

/// The agent's side of a write whose confirmation is lost: begin, mark
/// dispatched, call the destination, time out, report unknown. Returns the
/// destination key.
async fn lost_confirmation(gw: &Running, dest: &MockServer, key: &str, params: Value) -> String {
    let (status, started) = call(
        gw,
        "/v1/operations",
        Some(key),
        json!({"action": "ship", "params": params}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    let epoch = started["claim"]["epoch"].as_u64().unwrap();
    let dkey = started["claim"]["destination_key"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, _) = call(
        gw,
        &format!("/v1/operations/{key}/dispatch"),
        None,
        json!({"epoch": epoch}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let sent = reqwest::Client::new()
        .post(format!("{}/shipments", dest.uri()))
        .header("Idempotency-Key", &dkey)
        .json(&params)
        .timeout(Duration::from_millis(300))
        .send()
        .await;
    let err = sent.expect_err("the destination's answer is lost");
    let (status, rec) = call(
        gw,
        &format!("/v1/operations/{key}/outcome"),
        None,
        json!({"epoch": epoch, "outcome": "unknown", "reason": "timeout after send",
               "evidence": err.to_string()}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{rec}");
    assert_eq!(rec["operation"]["state"]["owner"], "reconciler");
    dkey
}

/// A destination that applies a shipment but whose answer never arrives
/// in time (the client gives up long before it).
async fn losing_destination() -> MockServer {
    let dest = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/shipments"))
        .respond_with(ResponseTemplate::new(201).set_delay(Duration::from_secs(30)))
        .mount(&dest)
        .await;
    dest
}

async fn lookups(dest: &MockServer) -> usize {
    dest.received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.method.as_str() == "GET")
        .count()
}

async fn sends(dest: &MockServer) -> usize {
    dest.received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.method.as_str() == "POST")
        .count()
}

#[tokio::test]
async fn serve_reconciles_a_lost_confirmation_through_the_configured_http_lookup() {
    let dest = losing_destination().await;
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_700_000_000_000)));
    let mut gw = Running::start_on_clock_with_env(&config(&dest.uri()), clock.clone(), env).await;

    let params = json!({"order": "O-1", "sku": "A", "quantity": 1});
    let dkey = lost_confirmation(&gw, &dest, "K-1", params.clone()).await;
    let record = json!({"id": "S-1", "reference": dkey, "sku": "A", "qty": 1});
    let lookup = || {
        Mock::given(method("GET"))
            .and(path("/shipments"))
            .and(query_param("reference", dkey.as_str()))
            .and(query_param("order", "O-1"))
            .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
    };
    // Not visible yet at the first lookup, visible afterwards.
    lookup()
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": []})))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&dest)
        .await;
    lookup()
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": [record]})))
        .with_priority(2)
        .mount(&dest)
        .await;

    // Writes are blocked while unknown; nothing is due before check_every.
    let (status, _) = call(
        &gw,
        "/v1/operations",
        Some("K-1"),
        json!({"action": "ship", "params": params}),
    )
    .await;
    assert_eq!(status, StatusCode::LOCKED);
    gw.passes(2).await;
    assert_eq!(lookups(&dest).await, 0, "not due yet");

    // Due, but inside the visibility lag: empty proves nothing.
    clock.advance(Duration::from_secs(5));
    gw.passes(2).await;
    assert_eq!(lookups(&dest).await, 1);
    let s = state(&gw, "K-1").await;
    assert_eq!(
        s["state"], "unknown",
        "an empty lookup inside the lag does not reject: {s}"
    );
    assert_eq!(s["owner"], "reconciler");

    // The record is visible now: confirmed with it.
    clock.advance(Duration::from_secs(40));
    gw.passes(2).await;
    let s = state(&gw, "K-1").await;
    assert_eq!(s["state"], "confirmed", "{s}");
    assert_eq!(s["result"]["id"], "S-1");
    assert_eq!(lookups(&dest).await, 2, "looked up once per due check");

    // The agent's next begin replays the confirmed outcome.
    let (status, replay) = call(
        &gw,
        "/v1/operations",
        Some("K-1"),
        json!({"action": "ship", "params": params}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{replay}");
    assert_eq!(replay["status"], "replayed");
    assert_eq!(replay["outcome"]["result"]["id"], "S-1");
    assert_eq!(sends(&dest).await, 1, "the shipment was sent once");

    let metrics = gw.http.get(gw.url("/metrics")).send().await.unwrap();
    let text = metrics.text().await.unwrap();
    for needle in [
        "handover_lookups_total{action=\"ship\",outcome=\"found\"}",
        "handover_lookups_total{action=\"ship\",outcome=\"not_found\"}",
        "handover_reconciliations_total{outcome=\"confirmed\"}",
        "handover_oldest_unknown_age_seconds{action=\"ship\"}",
    ] {
        assert!(text.contains(needle), "missing {needle} in:\n{text}");
    }
    gw.shutdown();
    gw.done.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_record_with_other_parameters_goes_to_review() {
    let dest = losing_destination().await;
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_700_000_000_000)));
    let mut gw = Running::start_on_clock_with_env(&config(&dest.uri()), clock.clone(), env).await;
    let params = json!({"order": "O-2", "sku": "A", "quantity": 1});
    let dkey = lost_confirmation(&gw, &dest, "K-2", params).await;
    Mock::given(method("GET"))
        .and(path("/shipments"))
        .and(query_param("reference", dkey.as_str()))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"items": [{"id": "S-9", "sku": "A", "qty": 2}]})),
        )
        .mount(&dest)
        .await;
    clock.advance(Duration::from_secs(5));
    gw.passes(2).await;
    let s = state(&gw, "K-2").await;
    assert_eq!(s["state"], "unknown", "{s}");
    assert_eq!(s["owner"], "review");
    assert_eq!(s["diverged"], true);
    // Review items are not looked up again.
    clock.advance(Duration::from_secs(600));
    gw.passes(2).await;
    assert_eq!(lookups(&dest).await, 1);
    assert_eq!(sends(&dest).await, 1);
}

/// A record with the approved parameters whose result the ledger cannot
/// record (an integer beyond 2^53, nesting past the limit) proves the
/// effect: the operation goes to review saying so, once, instead of
/// staying unknown and being looked up on every pass for ever (probe
/// finding); it is neither confirmed with a made-up result nor rejected.
#[tokio::test]
async fn a_found_record_that_cannot_be_recorded_goes_to_review() {
    let dest = losing_destination().await;
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_700_000_000_000)));
    let mut gw = Running::start_on_clock_with_env(&config(&dest.uri()), clock.clone(), env).await;
    let deep = format!("{}{}", "[".repeat(40), "]".repeat(40));
    for (key, extra) in [("K-big", "9007199254740993".to_owned()), ("K-deep", deep)] {
        let params = json!({"order": key, "sku": "A", "quantity": 1});
        let dkey = lost_confirmation(&gw, &dest, key, params).await;
        let body = format!(r#"{{"items": [{{"id": "S-1", "sku": "A", "qty": 1, "x": {extra}}}]}}"#);
        Mock::given(method("GET"))
            .and(path("/shipments"))
            .and(query_param("reference", dkey.as_str()))
            .respond_with(ResponseTemplate::new(200).set_body_raw(body, "application/json"))
            .mount(&dest)
            .await;
    }
    clock.advance(Duration::from_secs(5));
    gw.passes(2).await;
    for key in ["K-big", "K-deep"] {
        let s = state(&gw, key).await;
        assert_eq!(s["state"], "unknown", "{s}");
        assert_eq!(s["owner"], "review", "{s}");
        assert_eq!(s["diverged"], false, "{s}");
        let reason = s["reason"].as_str().unwrap();
        assert!(reason.contains("cannot be recorded"), "{reason}");
    }
    // Review items are not looked up again; nothing was sent again.
    clock.advance(Duration::from_secs(600));
    gw.passes(2).await;
    assert_eq!(lookups(&dest).await, 2);
    assert_eq!(sends(&dest).await, 2);
}
