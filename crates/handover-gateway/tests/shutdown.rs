//! Graceful shutdown: a request in flight when the signal comes is answered
//! in full, new connections are refused, and `run` returns.

mod support;

use handover_testkit::{Flavor, bodies};
use serde_json::{Value, json};
use support::{CLIENT_A, Running};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

/// A provider that reports each request and answers only when released.
async fn held_provider() -> (String, mpsc::Receiver<oneshot::Sender<()>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // Read headers and the Content-Length body.
                loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                let (release, released) = oneshot::channel();
                let _ = tx.send(release).await;
                let _ = released.await;
                let body = bodies::answer(Flavor::OpenAi, "finished after the signal").to_string();
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    (url, rx)
}

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
