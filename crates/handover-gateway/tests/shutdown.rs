//! Graceful shutdown: a request in flight when the signal comes is answered
//! in full, new connections are refused, and `run` returns within one
//! `shutdown_grace` of the signal, whatever is stuck.

mod support;

use serde_json::{Value, json};
use support::{CLIENT_A, Running, held_provider};

/// A chat request as client A, in flight on a task of its own.
fn send_chat(gw: &Running) -> tokio::task::JoinHandle<reqwest::Result<reqwest::Response>> {
    let req = gw
        .http
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_A)
        .json(&json!({"model": "default", "messages": [{"role": "user", "content": "hi"}]}));
    tokio::spawn(req.send())
}

#[tokio::test]
async fn an_in_flight_request_finishes_after_the_shutdown_signal() {
    let (url, mut arrivals) = held_provider().await;
    let mut c = support::provider("held", &url);
    c.push_str(&support::policy("default", &["held"], "first_token"));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    let mut gw = Running::start(&c).await;

    let in_flight = send_chat(&gw);
    let release = arrivals
        .recv()
        .await
        .expect("the request reached the provider");
    gw.shutdown();
    // Stopped accepting: a new connection is refused (or closed unanswered).
    let fresh = reqwest::Client::new();
    let mut refused = false;
    for _ in 0..50 {
        match fresh.get(gw.url("/healthz")).send().await {
            Err(_) => {
                refused = true;
                break;
            }
            Ok(_) => tokio::task::yield_now().await,
        }
    }
    assert!(
        refused,
        "the gateway still accepts new connections after the signal"
    );
    assert!(
        !gw.done.is_finished(),
        "shutdown must wait for the request in flight"
    );

    release.send(()).unwrap();
    let resp = in_flight
        .await
        .unwrap()
        .expect("the in-flight request is answered");
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "finished after the signal"
    );
    (&mut gw.done).await.unwrap().expect("run returns cleanly");
}

/// A request still in flight when the shutdown's grace runs out is dropped
/// by the gateway, not by its client: it is counted as 503 (and logged as
/// dropped at shutdown), never as a 499 hang-up.
#[tokio::test]
async fn a_request_dropped_when_the_grace_runs_out_is_not_called_a_hang_up() {
    let (url, mut arrivals) = held_provider().await;
    let mut c = support::provider("held", &url);
    c.push_str(&support::policy("default", &["held"], "first_token"));
    let gateway = support::gateway_section_with("", "");
    c.push_str(&gateway.replace("shutdown_grace = \"10s\"", "shutdown_grace = \"50ms\""));
    let mut gw = Running::start(&c).await;
    let in_flight = send_chat(&gw);
    let _never_released = arrivals
        .recv()
        .await
        .expect("the request reached the provider");
    gw.shutdown();
    let done = tokio::time::timeout(std::time::Duration::from_secs(10), &mut gw.done).await;
    done.expect("run returns once the grace elapsed")
        .unwrap()
        .unwrap();
    assert!(
        in_flight.await.unwrap().is_err(),
        "the client got no answer"
    );

    // The recorder is the process's: a second gateway's /metrics shows it.
    let mut other = Running::start(&c).await;
    let text = other.metrics().await;
    let route = "handover_gateway_requests_total{route=\"/v1/chat/completions\"";
    assert!(
        text.contains(&format!("{route},status=\"503\"}} 1")),
        "{text}"
    );
    assert!(
        !text.contains(&format!("{route},status=\"499\"}}")),
        "{text}"
    );
    other.shutdown();
}

/// What follows the signal cannot stretch the shutdown: the drain, the
/// reconciler's last pass (here stuck in a lookup that never answers) and
/// the ledger's close all end within one `shutdown_grace` from the signal
/// (they took a grace each, one after the other), so an orchestrator's
/// kill timeout just above it holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_pass_and_a_stuck_request_end_within_one_grace() {
    let (provider_url, mut calls) = held_provider().await;
    let (lookup_url, mut lookups) = held_provider().await;
    let mut config = support::provider("held", &provider_url);
    config.push_str(&support::policy("default", &["held"], "first_token"));
    config.push_str(&format!(
        "\n[actions.ship]\nlease = \"30s\"\n[actions.ship.lookup]\nurl = \"{lookup_url}/records?key={{destination_key}}\"\nvisibility_lag = \"1ms\"\ncheck_every = \"1ms\"\n"
    ));
    let gateway = support::gateway_section_with("reconcile_every = \"10ms\"", "");
    config.push_str(&gateway.replace("shutdown_grace = \"10s\"", "shutdown_grace = \"1s\""));
    let mut gw = Running::start(&config).await;
    // An unknown operation, so the reconciler's pass looks it up.
    let (st, started) = gw
        .post_json(
            CLIENT_A,
            "/v1/operations",
            Some("K-1"),
            json!({"action": "ship", "params": {}}),
        )
        .await;
    assert_eq!(st, reqwest::StatusCode::CREATED, "{started}");
    let epoch = started["claim"]["epoch"].as_u64().unwrap();
    for (path, body) in [
        ("dispatch", json!({"epoch": epoch})),
        (
            "outcome",
            json!({"epoch": epoch, "outcome": "unknown", "reason": "timed out"}),
        ),
    ] {
        let (st, answer) = gw
            .post_json(CLIENT_A, &format!("/v1/operations/K-1/{path}"), None, body)
            .await;
        assert_eq!(st, reqwest::StatusCode::OK, "{answer}");
    }
    let _held_lookup = lookups.recv().await.expect("the pass is in its lookup");
    let chat = gw
        .http
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_A)
        .json(&json!({"model": "default", "messages": [{"role": "user", "content": "hi"}]}))
        .send();
    let chat = tokio::spawn(chat);
    let _held_call = calls.recv().await.expect("a request is in flight");

    let signalled = std::time::Instant::now();
    gw.shutdown();
    (&mut gw.done).await.unwrap().expect("run returns");
    let took = signalled.elapsed();
    assert!(
        took < std::time::Duration::from_millis(1600),
        "shutdown took {took:?} with a 1 s grace"
    );
    assert!(chat.await.unwrap().is_err(), "dropped at the grace's end");
}
