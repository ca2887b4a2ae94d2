//! `handover mcp` in front of a Streamable HTTP upstream
//! (`[mcp.servers.NAME] url = ...`): the official Python SDK's shipping
//! server served over HTTP, the proxy on stdio, the SDK's client. Effects
//! are counted in the server's log (or, for a redirect, at wiremock).
//! Skipped without `HANDOVER_TEST_PYTHON`.

use crate::mcp_world;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use mcp_world::raw::RawSession;
use mcp_world::{LOOKUP, SCRIPTS, World, assert_replays_the_one_shipment, python, ship, status};
use serde_json::json;

/// The Python shipping server on Streamable HTTP, killed on drop.
struct HttpShipping {
    child: Child,
    url: String,
}

impl HttpShipping {
    fn start(w: &World, mode: &str) -> Self {
        Self::start_on(w, mode, free_port())
    }

    fn start_on(w: &World, mode: &str, port: u16) -> Self {
        let mut child = Command::new(&w.python)
            .arg(format!("{SCRIPTS}/shipping_server.py"))
            .args(["--http", &port.to_string()])
            .env("SHIPPING_LOG", w.path("shipments.jsonl"))
            .env("SHIPPING_MODE", mode)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Uvicorn says when it accepts connections.
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while !line.contains("Uvicorn running on") {
            line.clear();
            assert!(stderr.read_line(&mut line).unwrap() > 0, "server exited");
        }
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpShipping {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn an_http_upstream_passes_through_unchanged() {
    let Some(python) = python() else { return };
    let w = World::new(python, "");
    let server = HttpShipping::start(&w, "ok");
    w.over_http(&server.url);
    for mode in ["auto", "legacy"] {
        let env = [("MCP_MODE", mode)];
        let direct = w.client_with("ok", &["fidelity"], &[&server.url], &env);
        let proxied = w.through_handover();
        let proxied: Vec<&str> = proxied.iter().map(String::as_str).collect();
        let proxied = w.client_with("ok", &["fidelity"], &proxied, &env);
        assert_eq!(direct.len(), 6);
        assert_eq!(proxied, direct, "mode {mode}");
    }
    assert!(w.shipments().is_empty());
}

#[test]
fn a_lost_answer_from_an_http_upstream_is_unknown_then_found_and_replayed() {
    let Some(python) = python() else { return };
    let w = World::with_lookup(python, r#"timeout = "1s""#, LOOKUP);
    // The server applies, then never answers: the proxy's deadline passes.
    let server = HttpShipping::start(&w, "stall");
    w.over_http(&server.url);
    let mut retry = ship("U-1", 1);
    retry["retry_while"] = json!("outcome_unknown");
    let r = w.calls("stall", &json!([ship("U-1", 1), retry]));
    assert_eq!(status(&r[0]), "outcome_unknown", "{}", r[0]);
    assert_replays_the_one_shipment(&w, &r[1]);
}

#[test]
fn an_http_upstream_that_dies_after_applying_is_unknown_and_one_that_is_down_is_a_clear_error() {
    let Some(python) = python() else { return };
    let w = World::new(python, "");
    let server = HttpShipping::start(&w, "drop");
    w.over_http(&server.url);
    // Applied, then the server process exits mid-answer: unknown, and the
    // retry (the server is gone now) sends nothing.
    let r = w.calls("drop", &json!([ship("V-1", 1), ship("V-1", 1)]));
    for result in &r {
        assert_eq!(status(result), "outcome_unknown", "{result}");
    }
    assert_eq!(w.shipments().len(), 1);
    // With the server down, a client gets a clear error saying so (the
    // connection was refused: nothing was sent), not a session.
    drop(server);
    let proxy = w.through_handover();
    let proxy: Vec<&str> = proxy.iter().map(String::as_str).collect();
    let r = w.client("ok", &["refused"], &proxy);
    let e = r[0].as_str().unwrap();
    assert!(e.contains("unreachable (not sent)"), "{e}");
    assert_eq!(w.shipments().len(), 1, "nothing else applied");
}

/// The upstream restarts between two calls of one session (an `initialize`
/// session, with an `Mcp-Session-Id`): it answers the next call 404, as
/// the transport says a server does for a session it does not know, and
/// does not process it. That call is not sent (safe to call again with the
/// same key, not "may have acted" for an operator to review) and the
/// session ends, as when a child server exits; in a new session the same
/// call is performed, once.
#[test]
fn an_http_upstream_that_forgot_the_session_ends_it_and_the_call_was_not_sent() {
    let Some(python) = python() else { return };
    let w = World::new(python, "");
    let port = free_port();
    let server = HttpShipping::start_on(&w, "ok", port);
    w.over_http(&server.url);
    let mut s = RawSession::start(&w);
    let call = |id: u32, order: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"create_shipment","arguments":{{"order_id":"{order}","sku":"KETTLE","qty":1}}}}}}"#
        )
    };
    let a = s.answer(&call(2, "N-1"));
    assert_eq!(a["result"]["isError"], false, "{a}");
    drop(server);
    let _restarted = HttpShipping::start_on(&w, "ok", port);
    let a = s.answer(&call(3, "N-2"));
    assert_eq!(status(&a["result"]), "not_sent", "{a}");
    assert!(s.ended(), "the session ends with its upstream session");
    s.close();
    let r = w.calls("ok", &json!([ship("N-2", 1)]));
    assert_eq!(
        r[0]["isError"], false,
        "performed in a new session: {}",
        r[0]
    );
    let orders: Vec<_> = w
        .shipments()
        .iter()
        .map(|s| s["order_id"].clone())
        .collect();
    assert_eq!(orders, ["N-1", "N-2"], "each once");
}

/// The redirect is the upstream's answer: the proxy does not send the
/// message on to where it points (which gets no request).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_upstream_that_redirects_is_not_followed() {
    use wiremock::{Mock, MockServer, ResponseTemplate, matchers::any};
    let Some(python) = python() else { return };
    let elsewhere = MockServer::start().await;
    Mock::given(any())
        .respond_with(ResponseTemplate::new(500))
        .mount(&elsewhere)
        .await;
    let redirecting = MockServer::start().await;
    Mock::given(any())
        .respond_with(
            ResponseTemplate::new(307)
                .insert_header("location", format!("{}/mcp", elsewhere.uri())),
        )
        .mount(&redirecting)
        .await;
    let url = format!("{}/mcp", redirecting.uri());
    let r = tokio::task::spawn_blocking(move || {
        let w = World::new(python, "");
        w.over_http(&url);
        let proxy = w.through_handover();
        let proxy: Vec<&str> = proxy.iter().map(String::as_str).collect();
        w.client("ok", &["refused"], &proxy)
    })
    .await
    .unwrap();
    assert!(r[0].as_str().is_some(), "a refusal: {}", r[0]);
    assert!(
        !redirecting.received_requests().await.unwrap().is_empty(),
        "the upstream was asked"
    );
    let followed = elsewhere.received_requests().await.unwrap();
    assert!(
        followed.is_empty(),
        "the redirect was followed: {followed:?}"
    );
}

/// An upstream whose answer grows past one message's cap (16 MiB) and then
/// stalls: the proxy stops reading there and tells the client the server
/// did not answer, instead of holding the answer as it grows (or waiting
/// for the rest). Once as one SSE event, once as one JSON body.
#[test]
fn an_http_upstream_answer_past_the_message_cap_is_refused_not_held() {
    let Some(python) = python() else { return };
    for sse in [true, false] {
        let upstream = Oversized::start(sse);
        let w = World::new(python.clone(), "");
        w.over_http(&upstream.url);
        let proxy = w.through_handover();
        let proxy: Vec<&str> = proxy.iter().map(String::as_str).collect();
        let r = w.client("ok", &["refused"], &proxy);
        let e = r[0].as_str().unwrap();
        assert!(e.contains("did not answer"), "sse {sse}: {e}");
        assert!(upstream.asked(), "the upstream was asked");
    }
}

/// A raw HTTP server answering every request with more than 16 MiB of one
/// message (an unfinished SSE `data:` line, or a JSON body announced as
/// 1 GiB) and then holding the connection open without a byte more.
struct Oversized {
    url: String,
    asked: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Oversized {
    fn start(sse: bool) -> Self {
        use std::io::{Read, Write};
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let asked = std::sync::Arc::new(AtomicBool::new(false));
        let seen = asked.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let seen = seen.clone();
                std::thread::spawn(move || {
                    // The request's head is enough: the answer never depends on it.
                    let mut request = [0u8; 4096];
                    if conn.read(&mut request).unwrap_or(0) == 0 {
                        return;
                    }
                    seen.store(true, Ordering::SeqCst);
                    let (start, head) = if sse {
                        (
                            &b"data: "[..],
                            "content-type: text/event-stream\r\n".to_owned(),
                        )
                    } else {
                        let length = 1u64 << 30;
                        (
                            &br#"{"jsonrpc":"2.0","id":0,"result":{"x":""#[..],
                            format!(
                                "content-type: application/json\r\ncontent-length: {length}\r\n"
                            ),
                        )
                    };
                    let _ = write!(conn, "HTTP/1.1 200 OK\r\n{head}\r\n");
                    let _ = conn.write_all(start);
                    let piece = vec![b'x'; 1 << 20];
                    for _ in 0..17 {
                        if conn.write_all(&piece).is_err() {
                            return;
                        }
                    }
                    // Held open, silent, until the proxy lets go.
                    let _ = conn.read(&mut request);
                });
            }
        });
        Self { url, asked }
    }

    fn asked(&self) -> bool {
        self.asked.load(std::sync::atomic::Ordering::SeqCst)
    }
}
