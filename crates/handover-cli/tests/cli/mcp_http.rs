//! `handover mcp --listen`: MCP's Streamable HTTP transport in front of the
//! same upstream, with the official MCP Python SDK's HTTP client (both its
//! session-less 2026-07-28 mode and the `initialize` session mode), the
//! real binary, a real SQLite ledger. Callers authenticate with the
//! gateway's `[gateway.clients]` tokens; effects are counted in the
//! shipping server's log. Skipped without `HANDOVER_TEST_PYTHON`, as the
//! stdio tests are.

use crate::mcp_world;

use std::process::{Command, Stdio};

use mcp_world::listening::Listening;
use mcp_world::{
    LOOKUP, SCRIPTS, World, applied_fifo, applied_pid, assert_replays_the_one_shipment, kill_9,
    python, ship, status,
};
use serde_json::{Value, json};

const TOKEN: &str = "agent-http-token";

/// A world whose configuration has one client token (scope `http-agent`).
fn world(python: String, action: &str, lookup: &str) -> World {
    let clients = format!(
        r#"
[gateway]
max_body_bytes = 4096

[gateway.clients.agent]
token_sha256 = "{}"
scope = "http-agent"
"#,
        handover_gateway::hash_token(TOKEN)
    );
    World::configured(python, action, lookup, &clients)
}

fn auth() -> String {
    format!("authorization: Bearer {TOKEN}")
}

#[test]
fn the_lost_confirmation_story_over_http() {
    let Some(python) = python() else { return };
    let w = world(python, "", LOOKUP);
    // The upstream applies create_shipment, then dies before answering.
    let server = Listening::start(&w, "drop");
    let mut retry = ship("H-1", 1);
    retry["retry_while"] = json!("outcome_unknown");
    let r = w.client_with(
        "drop",
        &["calls", &json!([ship("H-1", 1), retry]).to_string()],
        &[&server.url],
        &[("MCP_TOKEN", TOKEN)],
    );
    // The first answer is "being verified", with the operation in the
    // caller's scope (from its token, not from the request).
    assert_eq!(status(&r[0]), "outcome_unknown", "{}", r[0]);
    let text = r[0]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("being verified"), "{text}");
    assert_eq!(
        r[0]["structuredContent"]["operation"],
        json!({"scope": "http-agent", "key": "create_shipment:H-1"})
    );
    // Retries (new JSON-RPC ids, on a new upstream connection) send
    // nothing; the lookup finds the shipment; the next call replays it.
    assert_replays_the_one_shipment(&w, &r[1]);
}

#[test]
fn a_session_keeps_its_upstream_and_a_stalled_call_is_not_sent_twice() {
    let Some(python) = python() else { return };
    let w = world(python, r#"timeout = "1s""#, "");
    let server = Listening::start(&w, "stall");
    // The initialize handshake: a session (Mcp-Session-Id) of its own.
    let r = w.client_with(
        "stall",
        &[
            "calls",
            &json!([ship("S-1", 1), ship("S-1", 1)]).to_string(),
        ],
        &[&server.url],
        &[("MCP_TOKEN", TOKEN), ("MCP_MODE", "legacy")],
    );
    for (i, result) in r.iter().enumerate() {
        assert_eq!(status(result), "outcome_unknown", "call {i}: {result}");
    }
    assert_eq!(w.shipments().len(), 1, "applied once, never re-sent");
}

#[test]
fn tools_prompts_and_resources_over_http_equal_a_direct_connection() {
    let Some(python) = python() else { return };
    let w = world(python, "", "");
    let server = Listening::start(&w, "ok");
    let shipping = format!("{SCRIPTS}/shipping_server.py");
    for mode in ["auto", "legacy"] {
        let direct = w.client_with(
            "ok",
            &["fidelity"],
            &[&w.python, &shipping],
            &[("MCP_MODE", mode)],
        );
        let proxied = w.client_with(
            "ok",
            &["fidelity"],
            &[&server.url],
            &[("MCP_TOKEN", TOKEN), ("MCP_MODE", mode)],
        );
        assert_eq!(proxied, direct, "mode {mode}");
    }
}

#[test]
fn a_missing_or_wrong_token_is_refused_and_nothing_is_sent() {
    let Some(python) = python() else { return };
    let w = world(python, "", "");
    let server = Listening::start(&w, "ok");
    for token in [None, Some("not-the-token")] {
        let env: Vec<(&str, &str)> = token.map(|t| ("MCP_TOKEN", t)).into_iter().collect();
        let r = w.client_with("ok", &["refused"], &[&server.url], &env);
        let e = r[0].as_str().unwrap();
        assert!(e.contains("bearer token"), "{token:?}: {e}");
    }
    // The same refusal for a guarded call sent by hand: 401, nothing applied.
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "create_shipment", "arguments": {"order_id": "T-1", "sku": "KETTLE", "qty": 1}}})
    .to_string();
    let (code, _) = server.raw("POST", &["authorization: Bearer wrong"], &call);
    assert_eq!(code, 401);
    assert!(w.shipments().is_empty());
}

#[test]
fn origins_sessions_and_malformed_messages_are_checked() {
    let Some(python) = python() else { return };
    let w = world(python, "", "");
    let server = Listening::start(&w, "ok");
    let auth = auth();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string();
    // A page on another origin (DNS rebinding) is refused; loopback is not.
    let (code, _) = server.raw("POST", &[&auth, "origin: http://evil.example"], &init);
    assert_eq!(code, 403);
    let (code, answer) = server.raw("POST", &[&auth, "origin: http://localhost:3000"], &init);
    assert_eq!(code, 200, "{answer}");
    let sid = answer
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id: "))
        .expect("a session id")
        .trim()
        .to_owned();
    assert!(answer.contains(r#""serverInfo""#), "{answer}");
    let session = format!("mcp-session-id: {sid}");
    // Another client's view of the session, a batch, a non-message.
    let (code, _) = server.raw("POST", &[&auth, "mcp-session-id: nope"], &init);
    assert_eq!(code, 404);
    let (code, _) = server.raw("POST", &[&auth, &session], &format!("[{init}]"));
    assert_eq!(code, 400);
    let (code, _) = server.raw("POST", &[&auth, &session], "{\"x\": 1}");
    assert_eq!(code, 400);
    // A body over gateway.max_body_bytes is refused before anything is sent.
    let huge = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "create_shipment", "arguments": {"order_id": "X".repeat(8000), "sku": "KETTLE", "qty": 1}}})
    .to_string();
    let (code, answer) = server.raw("POST", &[&auth, &session], &huge);
    assert_eq!(code, 413);
    // As a JSON-RPC error an MCP client can show, not axum's plain text.
    let body = answer.split("\r\n\r\n").nth(1).unwrap();
    let error: Value = serde_json::from_str(body).unwrap();
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("gateway.max_body_bytes"), "{answer}");
    assert!(w.shipments().is_empty());
    // GET needs a session; DELETE ends it; then it is gone.
    let (code, _) = server.raw("GET", &[&auth], "");
    assert_eq!(code, 405);
    let (code, _) = server.raw("DELETE", &[&auth, &session], "");
    assert_eq!(code, 204);
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let (code, _) = server.raw("POST", &[&auth, &session], &ping);
    assert_eq!(code, 404);
    // Each configured server is also at /mcp/NAME; an unknown name is 404.
    let (code, answer) = server.raw_at("/mcp/shipping", "POST", &[&auth], &init);
    assert_eq!(code, 200, "{answer}");
    let (code, _) = server.raw_at("/mcp/billing", "POST", &[&auth], &init);
    assert_eq!(code, 404);
}

#[test]
fn kill_9_between_dispatch_and_answer_over_http_leaves_the_call_unresolved_after_restart() {
    let Some(python) = python() else { return };
    let w = world(python, "lease = \"1s\"\ntimeout = \"1s\"", "");
    let fifo = applied_fifo(&w);
    let mut server = Listening::start_with(&w, "stall", &[("SHIPPING_APPLIED", &fifo)]);
    // The agent's call: the upstream applies it and stalls.
    let mut agent = Command::new(&w.python)
        .arg(format!("{SCRIPTS}/mcp_client.py"))
        .args(["calls", &json!([ship("K-1", 1)]).to_string(), &server.url])
        .env("MCP_TOKEN", TOKEN)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let upstream_pid = applied_pid(&fifo);
    server.child.kill().unwrap(); // SIGKILL between dispatch and answer
    server.child.wait().unwrap();
    kill_9(&upstream_pid);
    let _ = agent.kill();
    let _ = agent.wait();
    assert_eq!(w.shipments().len(), 1);

    // Restart with a healthy upstream; the agent retries: in progress while
    // the dead holder's lease runs, then unknown. Never sent again.
    let server = Listening::start(&w, "ok");
    let mut retry = ship("K-1", 1);
    retry["retry_while"] = json!("in_progress");
    let r = w.client_with(
        "ok",
        &["calls", &json!([retry, ship("K-1", 1)]).to_string()],
        &[&server.url],
        &[("MCP_TOKEN", TOKEN)],
    );
    for result in &r {
        assert_eq!(status(result), "outcome_unknown", "{result}");
    }
    assert_eq!(w.shipments().len(), 1, "not re-sent after the restart");
}

/// `block = "action"`: one tenant's unknown shipment suspends another
/// tenant's (both over HTTP, each with its own token and scope). The other
/// tenant learns that it is blocked and nothing of the blocking operation:
/// not its scope or key (which carries that tenant's order id), nor the
/// reason, nor when. Its own caller still sees everything.
#[test]
fn an_action_wide_block_tells_another_tenant_nothing_of_the_blocking_call() {
    let Some(python) = python() else { return };
    let clients = format!(
        r#"
[gateway]
[gateway.clients.agent]
token_sha256 = "{}"
scope = "http-agent"
[gateway.clients.other]
token_sha256 = "{}"
scope = "other-tenant"
"#,
        handover_gateway::hash_token(TOKEN),
        handover_gateway::hash_token("other-tenant-token"),
    );
    let w = World::configured(python, "timeout = \"1s\"\nblock = \"action\"", "", &clients);
    let server = Listening::start(&w, "stall");
    let call = |token: &str, order: &str| {
        w.client_with(
            "stall",
            &["calls", &json!([ship(order, 1)]).to_string()],
            &[&server.url],
            &[("MCP_TOKEN", token)],
        )
        .remove(0)
    };
    assert_eq!(status(&call(TOKEN, "ADA-4711")), "outcome_unknown");
    let own = call(TOKEN, "ADA-4712");
    assert_eq!(status(&own), "suspended", "{own}");
    assert_eq!(
        own["structuredContent"]["blocked_by"]["key"],
        "create_shipment:ADA-4711"
    );

    let other = call("other-tenant-token", "B-1");
    assert_eq!(status(&other), "suspended", "{other}");
    let text = other.to_string();
    for leaked in ["ADA-4711", "http-agent", "timed out", "since_ms"] {
        assert!(
            !text.contains(leaked),
            "{leaked:?} leaked to another tenant: {text}"
        );
    }
    assert_eq!(w.shipments().len(), 1, "only the first call was sent");
}

/// The HTTP door takes in what the stdio door does: a body that is not
/// one JSON object (`NaN`, `Infinity`, a batch with a guarded call in it)
/// is refused `400` with a JSON-RPC error — the `NaN` one to its request's
/// id — and nothing reaches the upstream; a guarded call with `"id": null`
/// is refused too; a leading byte order mark is ignored and the call is
/// guarded as usual. Effects counted in the shipping server's log.
#[test]
fn bodies_that_are_not_one_json_object_are_refused_and_never_forwarded() {
    let Some(python) = python() else { return };
    let w = world(python, "", "");
    let server = Listening::start(&w, "ok");
    let auth = auth();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string();
    let (code, answer) = server.raw("POST", &[&auth], &init);
    assert_eq!(code, 200, "{answer}");
    let sid = answer
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id: "))
        .expect("a session id")
        .trim()
        .to_owned();
    let session = format!("mcp-session-id: {sid}");
    let call = |id: &str, order: &str, extra: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"create_shipment","arguments":{{"order_id":"{order}","sku":"KETTLE","qty":1{extra}}}}}}}"#
        )
    };
    let body = |answer: &str| -> serde_json::Value {
        let json = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {answer}"))
    };
    for (id, line) in [
        (10, call("10", "NAN-1", r#","weight":NaN"#)),
        (11, call("11", "INF-1", r#","weight":Infinity"#)),
    ] {
        let (code, answer) = server.raw("POST", &[&auth, &session], &line);
        assert_eq!(code, 400, "{answer}");
        let a = body(&answer);
        assert_eq!(
            (&a["id"], &a["error"]["code"]),
            (&json!(id), &json!(-32700)),
            "{a}"
        );
    }
    for line in [
        format!("[{}]", call("12", "BATCH-1", "")),
        format!("\n [{}]", call("12", "BATCH-2", "")),
        call("null", "NULL-1", ""),
    ] {
        let (code, answer) = server.raw("POST", &[&auth, &session], &line);
        assert_eq!(code, 400, "{line}: {answer}");
        assert_eq!(body(&answer)["error"]["code"], -32600, "{answer}");
    }
    let bom = format!("\u{feff}{}", call("13", "BOM-1", ""));
    let (code, answer) = server.raw("POST", &[&auth, &session], &bom);
    assert_eq!(code, 200, "{answer}");
    assert!(answer.contains("SHP-1"), "{answer}");
    let applied = w.shipments();
    assert_eq!(applied.len(), 1, "only the BOM call, guarded: {applied:?}");
    assert_eq!(applied[0]["order_id"], "BOM-1");
    assert!(applied[0]["reference"].as_str().unwrap().starts_with("ho"));
}
