//! Slow, idle and greedy clients against the real server socket: a
//! trickled header, a stalled body, an idle keep-alive connection, a
//! stream the client stops reading, one request too many for a client. Each limit is
//! set short in the config; the test's own deadline is far longer, so a
//! missing limit fails the test instead of hanging it.

use crate::support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use support::{CLIENT_A, CLIENT_B, Running, held_provider, held_provider_counted};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::oneshot;

/// Far longer than any limit under test, far shorter than the defaults.
const DEADLINE: Duration = Duration::from_secs(5);

async fn gateway(settings: &str) -> Running {
    let mut c = support::provider("p", "http://127.0.0.1:9/v1");
    c.push_str(&support::policy("default", &["p"], "first_token"));
    c.push_str(&support::gateway_section_with(settings, ""));
    Running::start(&c).await
}

/// Reads until the peer closes (or resets) the connection; what it sent.
async fn read_to_close(sock: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let closed = tokio::time::timeout(DEADLINE, async {
        loop {
            match sock.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "the gateway kept the connection open past the limit"
    );
    String::from_utf8_lossy(&got).into_owned()
}

const HEALTH: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: gw\r\n\r\n";

/// One keep-alive request on `sock`; the response head and body.
async fn health_on(sock: &mut TcpStream) -> String {
    sock.write_all(HEALTH).await.unwrap();
    let mut buf = [0u8; 4096];
    let n = tokio::time::timeout(DEADLINE, sock.read(&mut buf))
        .await
        .expect("an answer")
        .unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[tokio::test]
async fn a_trickled_header_is_cut_off_after_header_read_timeout() {
    let gw = gateway("header_read_timeout = \"300ms\"\nidle_timeout = \"60s\"").await;
    let mut sock = TcpStream::connect(gw.addr).await.unwrap();
    let (mut rd, mut wr) = sock.split();
    // One header byte every 50 ms: each byte arrives well within any
    // per-read timeout, but the header never completes.
    let header = b"GET /healthz HTTP/1.1\r\nhost: gw\r\nx-slow: ".repeat(8);
    let trickle = async {
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        for b in &header {
            tick.tick().await;
            if wr.write_all(&[*b]).await.is_err() {
                return true;
            }
        }
        false
    };
    let mut buf = [0u8; 64];
    let closed = async {
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    let cut = tokio::time::timeout(DEADLINE, async {
        tokio::select! {
            () = closed => true,
            write_failed = trickle => write_failed,
        }
    })
    .await;
    assert_eq!(
        cut,
        Ok(true),
        "a client trickling its header was not cut off"
    );
    // The gateway still serves everyone else.
    let mut fresh = TcpStream::connect(gw.addr).await.unwrap();
    assert!(health_on(&mut fresh).await.starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn a_stalled_body_is_answered_408_and_nothing_is_recorded() {
    let gw = gateway("body_read_timeout = \"300ms\"").await;
    let mut sock = TcpStream::connect(gw.addr).await.unwrap();
    let head = format!(
        "POST /v1/operations HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer {CLIENT_A}\r\n\
         idempotency-key: K-1\r\ncontent-type: application/json\r\ncontent-length: 200\r\n\r\n"
    );
    sock.write_all(head.as_bytes()).await.unwrap();
    sock.write_all(br#"{"action": "ship", "#).await.unwrap();
    let answer = read_to_close(&mut sock).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"body_timeout\""), "{answer}");
    assert_eq!(gw.all_operations().await, 0);
}

/// A declared length over `max_body_bytes` is answered 413 at once, from
/// the header alone: no body is waited for (the body deadline here is far
/// beyond the test's), and the connection is closed.
#[tokio::test]
async fn a_declared_length_over_the_limit_is_answered_413_without_waiting() {
    let gw = gateway("body_read_timeout = \"60s\"").await;
    let mut sock = TcpStream::connect(gw.addr).await.unwrap();
    let head = format!(
        "POST /v1/operations HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer {CLIENT_A}\r\n\
         idempotency-key: K-1\r\ncontent-type: application/json\r\ncontent-length: 100000000\r\n\r\n"
    );
    sock.write_all(head.as_bytes()).await.unwrap();
    let answer = read_to_close(&mut sock).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("\"body_too_large\""), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert_eq!(gw.all_operations().await, 0);
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_idle_timeout() {
    let gw = gateway("idle_timeout = \"300ms\"").await;
    let mut sock = TcpStream::connect(gw.addr).await.unwrap();
    assert!(health_on(&mut sock).await.starts_with("HTTP/1.1 200"));
    // Kept alive after the answer, then closed once idle for too long.
    assert_eq!(read_to_close(&mut sock).await, "");
}

#[tokio::test]
async fn a_client_over_its_in_flight_limit_gets_429_and_others_do_not() {
    let (url, mut arrivals) = held_provider().await;
    let mut c = support::provider("held", &url);
    c.push_str(&support::policy("default", &["held"], "first_token"));
    c.push_str(&support::gateway_section_with(
        "max_in_flight_per_client = 1",
        "",
    ));
    let gw = Running::start(&c).await;
    let ask = json!({"model": "default", "messages": [{"role": "user", "content": "hi"}]});
    let send = |token: &'static str| {
        let req = gw
            .http
            .post(gw.url("/v1/chat/completions"))
            .bearer_auth(token)
            .json(&ask);
        tokio::spawn(req.send())
    };

    let a1 = send(CLIENT_A);
    let release_a1 = arrivals.recv().await.expect("a1 reached the provider");
    let a2 = send(CLIENT_A).await.unwrap().unwrap();
    assert_eq!(a2.status(), 429);
    assert_eq!(a2.headers()["retry-after"], "1");
    let body: serde_json::Value = a2.json().await.unwrap();
    assert_eq!(body["error"]["code"], "client_concurrency_limit");
    assert!(
        arrivals.try_recv().is_err(),
        "the refused request reached the provider"
    );

    // Another client is not held back by A.
    let b1 = send(CLIENT_B);
    let release_b1 = arrivals.recv().await.expect("b1 reached the provider");
    release_a1.send(()).unwrap();
    release_b1.send(()).unwrap();
    let a1 = a1.await.unwrap().unwrap();
    assert_eq!(a1.status(), 200);
    a1.text().await.unwrap();
    assert_eq!(b1.await.unwrap().unwrap().status(), 200);

    // A's slot came back with its answer.
    let a3 = send(CLIENT_A);
    arrivals
        .recv()
        .await
        .expect("a3 reached the provider")
        .send(())
        .unwrap();
    assert_eq!(a3.await.unwrap().unwrap().status(), 200);
}

/// A stalled provider gets at most its `max_concurrency` connections: the
/// next request waits in the provider's queue without a socket, one more
/// than the queue holds is refused, and a freed slot lets exactly one
/// queued request connect. Connections are counted by the provider.
#[tokio::test]
async fn a_stalled_provider_gets_no_more_connections_than_its_max_concurrency() {
    let (url, mut arrivals, accepted) = held_provider_counted().await;
    let provider = support::provider("held", &url).replacen(
        "[providers.held.breaker]",
        "max_concurrency = 2\nmax_queue = 1\n[providers.held.breaker]",
        1,
    );
    let mut c = provider;
    c.push_str(&support::policy("default", &["held"], "first_token"));
    c.push_str(&support::gateway_section_with("", ""));
    let gw = Running::start(&c).await;
    let ask = json!({"model": "default", "messages": [{"role": "user", "content": "hi"}]});
    let send = || {
        let req = gw
            .http
            .post(gw.url("/v1/chat/completions"))
            .bearer_auth(CLIENT_A)
            .json(&ask);
        tokio::spawn(req.send())
    };

    let r1 = send();
    let r2 = send();
    let release_1 = arrivals.recv().await.expect("r1 reached the provider");
    let release_2 = arrivals.recv().await.expect("r2 reached the provider");
    // Two more: one takes the queue's place, the other is refused. The
    // refusal says admission has decided both.
    let (mut r3, mut r4) = (send(), send());
    let (refused, queued) = tokio::time::timeout(DEADLINE, async {
        tokio::select! {
            r = &mut r3 => (r, r4),
            r = &mut r4 => (r, r3),
        }
    })
    .await
    .expect("one of the two overflowing requests is refused at once");
    let refused = refused.unwrap().unwrap();
    assert_eq!(refused.status(), 502);
    let why = refused.text().await.unwrap();
    assert!(why.contains("admission queue full"), "{why}");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "a queued or refused request opened a connection to the stalled provider"
    );
    assert!(arrivals.try_recv().is_err());

    // A freed slot lets the queued request through, on one new connection.
    release_1.send(()).unwrap();
    assert_eq!(r1.await.unwrap().unwrap().status(), 200);
    let release_3 = arrivals
        .recv()
        .await
        .expect("the queued request reached the provider");
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
    release_2.send(()).unwrap();
    release_3.send(()).unwrap();
    assert_eq!(r2.await.unwrap().unwrap().status(), 200);
    assert_eq!(queued.await.unwrap().unwrap().status(), 200);
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

/// A provider whose one answer is `events` chunks of 1 MiB of text each
/// (more than the sockets between the gateway and a client that reads
/// nothing can hold), then 48 MiB of SSE comments (more than the sockets
/// between it and the gateway hold, and cheap to read past), then
/// the finish and `[DONE]`. It reports whether it wrote all of it.
async fn flooding_provider(events: usize) -> (String, oneshot::Receiver<bool>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let (done, written) = oneshot::channel();
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        // The request: its head, then its Content-Length body.
        let body_len = loop {
            let n = sock.read(&mut buf).await.unwrap();
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
            if let Some(end) = text.find("\r\n\r\n") {
                let len = text
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                break end + 4 + len;
            }
        };
        while got.len() < body_len {
            let n = sock.read(&mut buf).await.unwrap();
            got.extend_from_slice(&buf[..n]);
        }
        let chunk = |delta: serde_json::Value, finish: Option<&str>| {
            let c = json!({"id": "c", "object": "chat.completion.chunk", "created": 1,
                "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
            format!("data: {c}\n\n")
        };
        let mut answer =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
                .to_owned();
        for _ in 0..events {
            answer.push_str(&chunk(json!({"content": "y".repeat(1 << 20)}), None));
        }
        let padding = format!(": {}\n", "p".repeat(1022));
        answer.push_str(&padding.repeat(48 * 1024));
        answer.push_str(&chunk(json!({}), Some("stop")));
        answer.push_str("data: [DONE]\n\n");
        let all = sock.write_all(answer.as_bytes()).await.is_ok();
        let _ = done.send(all);
    });
    (url, written)
}

/// A client that stops reading its stream (its window full) is cut off
/// once it has taken no byte for `idle_timeout`: hyper has no write
/// timeout and a body that cannot be written is not polled, so before
/// this the connection, the client's slot and the provider's connection
/// were held for as long as the client liked, past every deadline. Once
/// cut off, the rest of the provider's stream is read and discarded (as
/// for any client that leaves), so the provider gets to write it all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_its_stream_is_cut_off_after_idle_timeout() {
    let (url, written) = flooding_provider(4).await;
    let mut c = support::provider("flood", &url);
    c.push_str(&support::policy("default", &["flood"], "first_token"));
    c.push_str(&support::gateway_section_with(
        "idle_timeout = \"300ms\"",
        "",
    ));
    let gw = Running::start(&c).await;

    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut sock = socket.connect(gw.addr).await.unwrap();
    let body = json!({"model": "default", "stream": true,
                      "messages": [{"role": "user", "content": "flood me"}]})
    .to_string();
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer {CLIENT_A}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    sock.write_all(req.as_bytes()).await.unwrap();
    let mut head = [0u8; 64];
    let n = tokio::time::timeout(DEADLINE, sock.read(&mut head))
        .await
        .expect("the stream starts")
        .unwrap();
    assert!(head[..n].starts_with(b"HTTP/1.1 200"));

    // The client reads no more. The provider can only finish writing if
    // the gateway let the client go and read its stream on.
    let all = tokio::time::timeout(Duration::from_secs(20), written)
        .await
        .expect("the gateway still holds the provider's stream for a client that stopped reading")
        .unwrap();
    assert!(all, "the provider's stream was read to its end");
    let rest = read_to_close(&mut sock).await;
    assert!(!rest.contains("[DONE]"), "a cut stream is never complete");
}
