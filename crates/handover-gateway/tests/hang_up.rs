//! A client that hangs up while the router walks its chain: the attempt in
//! flight runs to its end (its breaker hears how it ended), and nothing
//! more is sent — no retry of that provider, no fallback to the next —
//! counted as connections at the providers. The hang-up itself is a 499
//! in the gateway's metrics (it used to leave no trace at all).

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use support::{Running, held_failing_provider, held_provider_counted};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Far longer than anything under test takes.
const DEADLINE: Duration = Duration::from_secs(10);

/// A gateway whose policy `policy` walks `slow` (answers a 503 when
/// released) then `backup`, retrying each provider up to three times.
fn config(policy: &str, slow: &str, backup: &str) -> String {
    let mut c = support::provider("slow", slow);
    c.push_str(&support::provider("backup", backup));
    c.push_str(
        &support::policy(policy, &["slow", "backup"], "complete").replace(
            "commit_point",
            "max_attempts_per_provider = 3\ncommit_point",
        ),
    );
    c.push_str(&support::gateway_section_with("", ""));
    c
}

/// Sends `body` to `path` on a raw connection, as client A; the
/// connection, for the caller to drop (the hang-up).
async fn send_raw(gw: &Running, path: &str, body: &serde_json::Value) -> TcpStream {
    let body = body.to_string();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        support::CLIENT_A,
        body.len()
    );
    let mut sock = TcpStream::connect(gw.addr).await.unwrap();
    sock.write_all(head.as_bytes()).await.unwrap();
    sock.write_all(body.as_bytes()).await.unwrap();
    sock
}

/// Waits (polling `/metrics`, no sleeps) until the series starting with
/// `series` reads at least 1.
async fn metric_reaches_one(gw: &Running, series: &str) {
    let seen = tokio::time::timeout(DEADLINE, async {
        loop {
            let text = gw.metrics().await;
            let value = text
                .lines()
                .find_map(|l| l.strip_prefix(series))
                .and_then(|v| v.trim().parse::<f64>().ok());
            if value.is_some_and(|v| v >= 1.0) {
                return;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(seen.is_ok(), "{series} never reached 1");
}

async fn hang_up_while_walking(policy: &str, path: &str, body: serde_json::Value) {
    let (slow, mut arrivals, slow_accepted) = held_failing_provider().await;
    let (backup, _backup_arrivals, backup_accepted) = held_provider_counted().await;
    let gw = Running::start(&config(policy, &slow, &backup)).await;

    let sock = send_raw(&gw, path, &body).await;
    let release = tokio::time::timeout(DEADLINE, arrivals.recv())
        .await
        .expect("the request reached the first provider")
        .unwrap();
    drop(sock);
    // The gateway has noticed the hang-up (the request is counted as 499)
    // before the provider answers.
    let route = format!("handover_gateway_requests_total{{route=\"{path}\",status=\"499\"}}");
    metric_reaches_one(&gw, &route).await;

    // The attempt in flight fails; the call ends there.
    release.send(()).unwrap();
    let failed = format!("handover_failed_calls_total{{policy=\"{policy}\"}}");
    metric_reaches_one(&gw, &failed).await;
    assert_eq!(
        slow_accepted.load(Ordering::SeqCst),
        1,
        "the failed provider was retried for a client that had left"
    );
    assert!(arrivals.try_recv().is_err());
    assert_eq!(
        backup_accepted.load(Ordering::SeqCst),
        0,
        "the call fell back for a client that had left"
    );
}

#[tokio::test]
async fn a_chat_call_whose_client_hung_up_sends_no_retry_and_no_fallback() {
    let body = json!({"model": "hangup_chat", "messages": [{"role": "user", "content": "hi"}]});
    hang_up_while_walking("hangup_chat", "/v1/chat/completions", body).await;
}

#[tokio::test]
async fn a_stream_whose_client_hung_up_before_its_commit_sends_no_fallback() {
    let body = json!({"model": "hangup_stream", "input": "hi", "stream": true});
    hang_up_while_walking("hangup_stream", "/v1/responses", body).await;
}
