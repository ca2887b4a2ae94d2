//! `gateway.max_connections` against the real server socket: connections
//! that send nothing cannot lock other clients out (the connection idle
//! longest is closed to admit a new one), and a connection with a request
//! in flight is never cut — only when every connection has one is a new
//! connection refused. `idle_timeout` is far longer than the test's own
//! deadline, so only eviction can close a silent connection in time.

use crate::support;

use std::time::Duration;

use support::{CLIENT_A, CLIENT_B, Running, held_provider};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Far shorter than `idle_timeout` below.
const DEADLINE: Duration = Duration::from_secs(5);

const HEALTH: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: gw\r\n\r\n";

async fn gateway(upstream: &str, max_connections: u32) -> Running {
    let mut c = support::provider("p", upstream);
    c.push_str(&support::policy("default", &["p"], "first_token"));
    c.push_str(&support::gateway_section_with(
        &format!("max_connections = {max_connections}\nidle_timeout = \"60s\""),
        "",
    ));
    Running::start(&c).await
}

/// Reads until the peer closes the connection; what it sent.
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
    assert!(closed.is_ok(), "the gateway kept the connection open");
    String::from_utf8_lossy(&got).into_owned()
}

/// One keep-alive request on `sock`; the first bytes of the answer.
async fn health_on(sock: &mut TcpStream) -> String {
    sock.write_all(HEALTH).await.unwrap();
    let mut buf = [0u8; 4096];
    let n = tokio::time::timeout(DEADLINE, sock.read(&mut buf))
        .await
        .expect("an answer")
        .unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// A chat request written on a fresh connection (its answer not read).
async fn chat_on_new(gw: &Running, token: &str) -> TcpStream {
    let body = r#"{"model": "default", "messages": [{"role": "user", "content": "hi"}]}"#;
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut sock = TcpStream::connect(gw.addr).await.unwrap();
    sock.write_all(head.as_bytes()).await.unwrap();
    sock
}

async fn answer_of(sock: &mut TcpStream) -> String {
    let mut buf = [0u8; 4096];
    let n = tokio::time::timeout(DEADLINE, sock.read(&mut buf))
        .await
        .expect("an answer")
        .unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[tokio::test]
async fn silent_connections_do_not_lock_out_healthz() {
    let gw = gateway("http://127.0.0.1:9/v1", 3).await;
    // The cap filled by connections that never send a byte (accepted in
    // this order: the listen queue is first in, first out).
    let mut first = TcpStream::connect(gw.addr).await.unwrap();
    let mut second = TcpStream::connect(gw.addr).await.unwrap();
    let mut third = TcpStream::connect(gw.addr).await.unwrap();

    let mut orchestrator = TcpStream::connect(gw.addr).await.unwrap();
    let answer = health_on(&mut orchestrator).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(
        read_to_close(&mut first).await,
        "",
        "the idlest was not closed"
    );

    // `second` is used now; `third` has been idle longest since.
    assert!(health_on(&mut second).await.starts_with("HTTP/1.1 200"));
    let mut next = TcpStream::connect(gw.addr).await.unwrap();
    assert!(health_on(&mut next).await.starts_with("HTTP/1.1 200"));
    assert_eq!(read_to_close(&mut third).await, "");
    // The recently used connections were kept.
    assert!(health_on(&mut second).await.starts_with("HTTP/1.1 200"));
    assert!(
        health_on(&mut orchestrator)
            .await
            .starts_with("HTTP/1.1 200")
    );
    // Both closings were counted (the scrape's own connection may make a
    // third room).
    let evicted = support::metric(
        &gw.metrics().await,
        "handover_gateway_connections_evicted_total",
    );
    assert!(evicted.is_some_and(|n| n >= 2.0), "{evicted:?}");
}

#[tokio::test]
async fn a_connection_with_a_request_in_flight_is_never_cut() {
    let (url, mut arrivals) = held_provider().await;
    let gw = gateway(&url, 2).await;
    let mut in_flight = chat_on_new(&gw, CLIENT_A).await;
    let release = arrivals
        .recv()
        .await
        .expect("the request reached the provider");
    let mut silent = TcpStream::connect(gw.addr).await.unwrap();

    // Two newcomers: each takes an idle connection's slot (the silent one,
    // then the first newcomer's, idle after its answer), never the busy one.
    let mut a = TcpStream::connect(gw.addr).await.unwrap();
    assert!(health_on(&mut a).await.starts_with("HTTP/1.1 200"));
    assert_eq!(read_to_close(&mut silent).await, "");
    let mut b = TcpStream::connect(gw.addr).await.unwrap();
    assert!(health_on(&mut b).await.starts_with("HTTP/1.1 200"));
    assert_eq!(read_to_close(&mut a).await, "");

    release.send(()).unwrap();
    let answer = answer_of(&mut in_flight).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test]
async fn a_connection_over_max_connections_is_refused_when_none_is_idle() {
    let (url, mut arrivals) = held_provider().await;
    let gw = gateway(&url, 2).await;
    let mut first = chat_on_new(&gw, CLIENT_A).await;
    let release_first = arrivals.recv().await.expect("first reached the provider");
    let mut second = chat_on_new(&gw, CLIENT_B).await;
    let release_second = arrivals.recv().await.expect("second reached the provider");

    let mut third = TcpStream::connect(gw.addr).await.unwrap();
    let refusal = read_to_close(&mut third).await;
    assert!(refusal.starts_with("HTTP/1.1 503"), "{refusal}");
    assert!(refusal.contains("\"too_many_connections\""), "{refusal}");

    release_first.send(()).unwrap();
    release_second.send(()).unwrap();
    assert!(answer_of(&mut first).await.starts_with("HTTP/1.1 200"));
    assert!(answer_of(&mut second).await.starts_with("HTTP/1.1 200"));
    // Idle again: a newcomer is admitted.
    let mut fourth = TcpStream::connect(gw.addr).await.unwrap();
    assert!(health_on(&mut fourth).await.starts_with("HTTP/1.1 200"));
}
