//! Graceful shutdown: a request in flight when the signal comes is answered
//! in full, new connections are refused, and `run` returns.

mod support;

use serde_json::{Value, json};
use support::{CLIENT_A, Running, held_provider};

#[tokio::test]
async fn an_in_flight_request_finishes_after_the_shutdown_signal() {
    let (url, mut arrivals) = held_provider().await;
    let mut c = support::provider("held", &url);
    c.push_str(&support::policy("default", &["held"], "first_token"));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    let mut gw = Running::start(&c).await;

    let http = gw.http.clone();
    let url = gw.url("/v1/chat/completions");
    let in_flight = tokio::spawn(async move {
        http.post(url)
            .bearer_auth(CLIENT_A)
            .json(&json!({"model": "default", "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
    });
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
