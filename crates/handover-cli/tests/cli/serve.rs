//! `handover serve` as an operator runs it: a real process, a real port, a
//! real OpenAI-style request, and a graceful stop on SIGINT and on SIGTERM
//! (the latter in the middle of a stream, which must still end whole).

use crate::support;

use support::{signal, start, start_with};

use std::path::Path;

use futures::StreamExt;
use handover_testkit::{Flavor, MockProvider, Reply, bodies};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

const TOKEN: &str = "example-client-token";
/// A prompt that must never reach the log.
const PROMPT: &str = "ship order 4411 to the secret address";
const TOKEN_SHA256: &str = "50f88aa457efc9d22985f9f0efd335f30b8fd187a999b69a70f11e6a8be39f4f";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_an_openai_request_and_stops_gracefully() {
    let provider = MockProvider::start(Flavor::OpenAi).await;
    provider.script([Reply::text("Hello through the gateway.")]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("handover.toml");
    std::fs::write(
        &config,
        format!(
            "[ledger]\nbackend = \"sqlite\"\npath = \"{}\"\n\n[providers.primary]\nkind = \"openai_compatible\"\nbase_url = \"{}\"\nmodel = \"m\"\n\n[policies.default]\nchain = [\"primary\"]\n\n[gateway]\nlisten = \"127.0.0.1:0\"\n\n[gateway.clients.app]\ntoken_sha256 = \"{TOKEN_SHA256}\"\nscope = \"tenant-1\"\n",
            dir.path().join("ledger.db").display(),
            provider.base_url()
        ),
    )
    .unwrap();

    let (mut child, addr, mut lines) = tokio::task::spawn_blocking(move || {
        start_with(&config, &["--log-format", "json"], None, &[])
    })
    .await
    .unwrap();

    let client = reqwest::Client::new();
    let health = client.get(format!("{addr}/healthz")).send().await.unwrap();
    assert!(health.status().is_success());
    let resp = client
        .post(format!("{addr}/v1/chat/completions"))
        .bearer_auth(TOKEN)
        .json(&json!({"model": "default", "messages": [{"role": "user", "content": PROMPT}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-handover-provider"], "primary");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "Hello through the gateway."
    );
    assert_eq!(provider.requests().await, 1);

    // SIGINT: the gateway finishes and exits cleanly.
    signal(&child, "INT");
    let exit = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(exit.success(), "serve exited with {exit:?}");

    // One JSON line per request at info: method, route, status, latency,
    // policy, provider, attempts; never the token or the prompt.
    let mut logged = Vec::new();
    while let Some(line) = lines.recv().await {
        logged.push(line);
    }
    let requests: Vec<Value> = logged
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"] == "handover::request")
        .collect();
    assert_eq!(requests.len(), 2, "{logged:#?}");
    let chat = &requests[1];
    assert_eq!(chat["level"], "INFO");
    assert_eq!(chat["span"]["method"], "POST");
    assert_eq!(chat["span"]["route"], "/v1/chat/completions");
    assert_eq!(chat["span"]["policy"], "default");
    assert_eq!(chat["fields"]["status"], 200);
    assert_eq!(chat["fields"]["provider"], "primary");
    assert_eq!(chat["fields"]["attempts"], "primary=answered");
    assert!(chat["fields"]["latency_ms"].as_f64().unwrap() >= 0.0);
    for line in &logged {
        assert!(!line.contains(TOKEN) && !line.contains(PROMPT), "{line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_log_filters_the_request_lines_and_a_startup_error_is_said_once() {
    let provider = MockProvider::start(Flavor::OpenAi).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("handover.toml");
    let write = |ledger: &Path| {
        std::fs::write(
            &config,
            format!(
                "[ledger]\nbackend = \"sqlite\"\npath = \"{}\"\n\n[providers.primary]\nkind = \"openai_compatible\"\nbase_url = \"{}\"\nmodel = \"m\"\n\n[policies.default]\nchain = [\"primary\"]\n\n[gateway]\nlisten = \"127.0.0.1:0\"\n\n[gateway.clients.app]\ntoken_sha256 = \"{TOKEN_SHA256}\"\nscope = \"tenant-1\"\n",
                ledger.display(),
                provider.base_url()
            ),
        )
        .unwrap();
    };

    write(&dir.path().join("ledger.db"));
    let cfg = config.clone();
    let (child, addr, mut lines) =
        tokio::task::spawn_blocking(move || start_with(&cfg, &[], Some("warn"), &[]))
            .await
            .unwrap();
    let health = reqwest::get(format!("{addr}/healthz")).await.unwrap();
    assert!(health.status().is_success());
    signal(&child, "TERM");
    let mut logged = Vec::new();
    while let Some(line) = lines.recv().await {
        logged.push(line);
    }
    assert!(
        logged.iter().all(|l| !l.contains("route=")),
        "RUST_LOG=warn still printed request lines: {logged:#?}"
    );
    let mut child = child;
    assert!(child.wait().unwrap().success());

    // A ledger that cannot be opened: one line, named for the ledger, with
    // the driver's cause once.
    write(&dir.path().join("no-such-dir").join("ledger.db"));
    let out = support::handover()
        .args(["serve", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.matches("unable to open database file").count(),
        1,
        "{err}"
    );
    assert!(err.contains("while opening the ledger"), "{err}");
    assert!(!err.contains("router"), "{err}");
}

/// A provider that streams the first half of an answer, waits to be
/// released, then streams the rest and `[DONE]`.
async fn half_stream_provider() -> (String, oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let (release, released) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let mut got = Vec::new();
        // The request: its header, then Content-Length bytes of body.
        loop {
            let n = sock.read(&mut buf).await.unwrap();
            assert!(n > 0, "the gateway closed before sending its request");
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
            if let Some(end) = text.find("\r\n\r\n") {
                let len: usize = text[..end]
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                if got.len() >= end + 4 + len {
                    break;
                }
            }
        }
        let events =
            bodies::text_stream(Flavor::OpenAi, &["first half, ", "second half"], true, true);
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
        sock.write_all(head.as_bytes()).await.unwrap();
        for e in &events[..2] {
            sock.write_all(e.as_bytes()).await.unwrap();
        }
        let _ = released.await;
        for e in &events[2..] {
            sock.write_all(e.as_bytes()).await.unwrap();
        }
    });
    (url, release)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_stream_lets_the_stream_finish_then_exits_0() {
    let (url, release) = half_stream_provider().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("handover.toml");
    std::fs::write(
        &config,
        format!(
            "[ledger]\nbackend = \"sqlite\"\npath = \"{}\"\n\n[providers.primary]\nkind = \"openai_compatible\"\nbase_url = \"{url}\"\nmodel = \"m\"\n\n[policies.default]\nchain = [\"primary\"]\ncommit_point = \"first_token\"\n\n[gateway]\nlisten = \"127.0.0.1:0\"\nshutdown_grace = \"60s\"\n\n[gateway.clients.app]\ntoken_sha256 = \"{TOKEN_SHA256}\"\nscope = \"tenant-1\"\n",
            dir.path().join("ledger.db").display(),
        ),
    )
    .unwrap();
    let (child, addr, mut lines) = tokio::task::spawn_blocking(move || start(&config))
        .await
        .unwrap();

    let resp = reqwest::Client::new()
        .post(format!("{addr}/v1/chat/completions"))
        .bearer_auth(TOKEN)
        .json(&json!({"model": "default", "stream": true, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut stream = resp.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("first half") {
        let chunk = stream
            .next()
            .await
            .expect("the stream ended early")
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }

    signal(&child, "TERM");
    // The gateway has taken the signal before the provider goes on.
    while let Some(line) = lines.recv().await {
        if line.contains("SIGTERM received") {
            break;
        }
    }
    release.send(()).unwrap();
    while let Some(chunk) = stream.next().await {
        seen.push_str(&String::from_utf8_lossy(
            &chunk.expect("the stream was cut"),
        ));
    }
    assert!(seen.contains("second half"), "{seen}");
    assert!(seen.trim_end().ends_with("data: [DONE]"), "{seen}");

    let mut child = child;
    let exit = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(exit.success(), "serve exited with {exit:?}");
}
