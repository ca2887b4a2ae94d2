//! `handover mcp --listen`'s sessions under load and odd spelling: one
//! client cannot take every session, and a message whose member names are
//! written with escapes reaches its session like any other. The real
//! binary, raw HTTP/1.1, the official Python SDK's server as the upstream
//! (a child process per session). Skipped without `HANDOVER_TEST_PYTHON`.

use crate::mcp_world;

use mcp_world::listening::Listening;
use mcp_world::{World, python};
use serde_json::{Value, json};

const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";

/// Two clients (two tenants); `[mcp]` limits from `limits`.
fn world(python: String, limits: &str) -> World {
    let extra = format!(
        r#"
[gateway]
[gateway.clients.alice]
token_sha256 = "{}"
scope = "tenant-a"
[gateway.clients.bob]
token_sha256 = "{}"
scope = "tenant-b"
"#,
        handover_gateway::hash_token(ALICE),
        handover_gateway::hash_token(BOB),
    );
    let w = World::configured(python, "", "", &extra);
    let path = w.path("handover.toml");
    let config = std::fs::read_to_string(&path).unwrap();
    let config = config.replace("[mcp]\n", &format!("[mcp]\n{limits}\n"));
    std::fs::write(path, config).unwrap();
    w
}

fn auth(token: &str) -> String {
    format!("authorization: Bearer {token}")
}

fn initialize() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string()
}

fn session_id(answer: &str) -> String {
    answer
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id: "))
        .expect("a session id")
        .trim()
        .to_owned()
}

/// The JSON-RPC message of an answer (a JSON body, or the last SSE event).
fn message(answer: &str) -> Value {
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    let json = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .next_back()
        .unwrap_or(body);
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {answer}"))
}

/// `max_sessions = 3`, `max_sessions_per_client = 2`: alice opens two
/// sessions; her third `initialize` is refused 503 naming the per-client
/// limit, and bob still gets a session. Before, alice could take all three
/// and lock every other tenant out until her sessions went idle.
#[test]
fn one_client_cannot_take_every_session() {
    let Some(python) = python() else { return };
    let w = world(python, "max_sessions = 3\nmax_sessions_per_client = 2");
    let server = Listening::start(&w, "ok");
    for _ in 0..2 {
        let (code, answer) = server.raw("POST", &[&auth(ALICE)], &initialize());
        assert_eq!(code, 200, "{answer}");
    }
    let (code, answer) = server.raw("POST", &[&auth(ALICE)], &initialize());
    assert_eq!(code, 503, "{answer}");
    assert!(answer.contains("max_sessions_per_client"), "{answer}");
    let (code, answer) = server.raw("POST", &[&auth(BOB)], &initialize());
    assert_eq!(code, 200, "bob is not locked out: {answer}");
    // The pool is now full for everyone.
    let (code, answer) = server.raw("POST", &[&auth(BOB)], &initialize());
    assert_eq!(code, 503, "{answer}");
    assert!(answer.contains("[mcp] max_sessions)"), "{answer}");
}

/// Member names written with JSON escapes (`"m\u0065thod"`, `"x\u0041"`)
/// are the same names: the request reaches its session and is answered,
/// and the session goes on (it used to be answered 404 "session ended",
/// which makes an SDK start over).
#[test]
fn a_member_name_written_with_an_escape_reaches_its_session() {
    let Some(python) = python() else { return };
    let w = world(python, "");
    let server = Listening::start(&w, "ok");
    let (code, answer) = server.raw("POST", &[&auth(ALICE)], &initialize());
    assert_eq!(code, 200, "{answer}");
    let session = format!("mcp-session-id: {}", session_id(&answer));
    let headers = [auth(ALICE), session];
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(server.raw("POST", &headers, initialized).0, 202);
    for (id, line) in [
        (
            2,
            r#"{"jsonrpc":"2.0","id":2,"m\u0065thod":"tools/list","params":{}}"#,
        ),
        (
            3,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{},"x\u0041":1}"#,
        ),
        (4, r#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#),
    ] {
        let (code, answer) = server.raw("POST", &headers, line);
        assert_eq!(code, 200, "{line}: {answer}");
        let m = message(&answer);
        assert_eq!(m["id"], id, "{m}");
        assert!(m["result"]["tools"].is_array(), "{m}");
    }
}

/// `max_sessions_per_client = 2`. The upstream refuses alice's
/// `initialize` (bad params) three times: each refusal ends its session at
/// once, so her valid `initialize` after them gets a session. Before,
/// each refused one held a slot until `session_idle` (15 min) and she was
/// locked out (503).
#[test]
fn a_refused_initialize_does_not_hold_a_session_slot() {
    let Some(python) = python() else { return };
    let w = world(python, "max_sessions_per_client = 2");
    let server = Listening::start(&w, "ok");
    let bad = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":5}}"#;
    for _ in 0..3 {
        let (_, answer) = server.raw("POST", &[&auth(ALICE)], bad);
        assert!(message(&answer)["error"].is_object(), "{answer}");
    }
    let (code, answer) = server.raw("POST", &[&auth(ALICE)], &initialize());
    assert_eq!(code, 200, "not locked out: {answer}");
    assert!(message(&answer)["result"].is_object(), "{answer}");
}
