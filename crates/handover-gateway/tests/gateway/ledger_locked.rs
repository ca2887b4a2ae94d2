//! A SQLite ledger another process holds locked: the operations API
//! answers 503 `ledger_unavailable` saying what was being done and what
//! that means — never SQLite's own text or code — and once the lock is
//! gone the same key starts.

use crate::support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::Connection as _;
use support::{CLIENT_A, Running};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_sqlite_ledger_answers_503_without_driver_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let ledger = format!(
        "[ledger]\nbackend = \"sqlite\"\npath = {:?}\n",
        path.display().to_string()
    );
    let mut config = support::provider("p", "http://127.0.0.1:9/v1");
    config.push_str(&support::policy("default", &["p"], "first_token"));
    config.push_str("\n[actions.ship]\nblock = \"scope\"\nlease = \"30s\"\n");
    config.push_str(&support::gateway_section(64 * 1024, "5s", ""));
    let gw = Running::start_with_env(&ledger, &config, dir, |_| None).await;

    // Another process's exclusive write transaction on the same file.
    let mut other = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    sqlx::query("BEGIN EXCLUSIVE")
        .execute(&mut other)
        .await
        .unwrap();

    let begin = || async {
        let resp = gw
            .http
            .post(gw.url("/v1/operations"))
            .bearer_auth(CLIENT_A)
            .header("Idempotency-Key", "K-locked")
            .json(&json!({"action": "ship", "params": {"n": 1}}))
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let body: Value = resp.json().await.unwrap();
        (status, body)
    };
    let (status, body) = begin().await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "ledger_unavailable", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    for driver in [
        "locked",
        "code",
        "SQLITE",
        "sqlite",
        "error returned from database",
    ] {
        assert!(
            !message.contains(driver),
            "driver text reached the client: {message}"
        );
    }

    // A model call under a task cannot open the task's budget: 503, to be
    // retried after Retry-After (nothing was sent, no budget was spent), so
    // the answer does not also tell SDKs not to retry.
    let resp = gw
        .http
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_A)
        .header("x-handover-task", "t-locked")
        .json(&json!({"model": "default", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(resp.headers()["retry-after"], "1");
    let should_retry = resp.headers().get("x-should-retry").cloned();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "ledger_unavailable", "{body}");
    assert_ne!(
        should_retry.as_ref().map(|v| v.to_str().unwrap()),
        Some("false"),
        "Retry-After and x-should-retry: false contradict each other"
    );

    // The lock goes away: the same key starts (nothing was claimed).
    sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
    other.close().await.unwrap();
    let (status, body) = begin().await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}
