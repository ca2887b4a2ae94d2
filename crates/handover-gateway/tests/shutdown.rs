//! Graceful shutdown: a request in flight when the signal comes is answered
//! in full, new connections are refused, and `run` returns.

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
