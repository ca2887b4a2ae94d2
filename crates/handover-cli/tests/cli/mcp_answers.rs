//! What a guarded call answers when the answer is not the upstream's own:
//! replays of what an operator recorded, replays to a session on another
//! protocol version than the one that recorded, a client key that belongs
//! to another action. The real binary over stdio, the official Python SDK
//! as the client (which validates every result it reads) and as the
//! upstream, a real SQLite ledger; effects counted in the server's own
//! log. Skipped without `HANDOVER_TEST_PYTHON`.

use crate::mcp_world;

use std::process::Command;

use mcp_world::{World, python, ship, status};
use serde_json::{Value, json};

/// `handover ops resolve ... --confirmed`, as an operator runs it.
fn resolve_confirmed(w: &World, key: &str, result: Option<&str>) {
    let config = w.path("handover.toml");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_handover"));
    cmd.args(["ops", "resolve", "--config"])
        .arg(&config)
        .args(["agent-1", key, "--confirmed"])
        .args(["--evidence", "carrier portal shows it", "--actor", "op"]);
    if let Some(result) = result {
        cmd.args(["--result", result]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The SDK client in `mode` ("auto": 2026-07-28; "legacy": 2025-11-25).
fn calls_in(w: &World, mode: &str, plan: &Value) -> Vec<Value> {
    calls_in_mode(w, "ok", mode, plan)
}

/// [`calls_in`] with the shipping server in `shipping`.
fn calls_in_mode(w: &World, shipping: &str, mode: &str, plan: &Value) -> Vec<Value> {
    let proxy = w.through_handover();
    let proxy: Vec<&str> = proxy.iter().map(String::as_str).collect();
    w.client_with(
        shipping,
        &["calls", &plan.to_string()],
        &proxy,
        &[("MCP_MODE", mode)],
    )
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// Three shipments stall past the deadline (unknown); an operator confirms
/// each with `ops resolve`: without `--result` (`null`), with arbitrary
/// JSON (the `--help` example), and with a full tool result whose
/// `structuredContent` is an array (valid at 2026-07-28 only). Every retry,
/// from a 2026-07-28 client and from a 2025-11-25 one, gets a successful
/// tool result its SDK accepts — the `null` one used to hang the client —
/// and nothing is sent again.
#[test]
fn an_operators_confirmation_is_replayed_as_a_valid_tool_result_to_every_session() {
    let Some(python) = python() else { return };
    let w = World::new(python, r#"timeout = "1s""#);
    let plan = json!([ship("R-1", 1), ship("R-2", 1), ship("R-3", 1)]);
    for r in w.calls("stall", &plan) {
        assert_eq!(status(&r), "outcome_unknown", "{r}");
    }
    resolve_confirmed(&w, "create_shipment:R-1", None);
    resolve_confirmed(&w, "create_shipment:R-2", Some(r#"{"shipment":"SHP-2"}"#));
    let full = r#"{"content":[{"type":"text","text":"SHP-3"}],"structuredContent":["SHP-3"]}"#;
    resolve_confirmed(&w, "create_shipment:R-3", Some(full));
    for mode in ["auto", "legacy"] {
        let r = calls_in(&w, mode, &plan);
        for result in &r {
            assert_eq!(result["isError"], false, "{mode}: {result}");
            assert_eq!(
                result["_meta"]["handover"]["replayed"], true,
                "{mode}: {result}"
            );
        }
        assert!(text(&r[0]).contains("performed and confirmed"), "{}", r[0]);
        assert!(r[0].get("structuredContent").is_none(), "{}", r[0]);
        assert!(text(&r[1]).contains("SHP-2"), "{}", r[1]);
        assert_eq!(r[1]["structuredContent"], json!({"shipment": "SHP-2"}));
        assert_eq!(text(&r[2]), "SHP-3", "the recorded tool result as it is");
        let structured = match mode {
            "auto" => json!(["SHP-3"]),
            _ => json!({"result": ["SHP-3"]}),
        };
        assert_eq!(r[2]["structuredContent"], structured, "{mode}");
    }
    assert_eq!(w.shipments().len(), 3, "each applied once, never re-sent");
}

/// The tool applies the shipment and then raises: its `isError` answer
/// makes the call unknown, with that answer as the evidence. The operator
/// confirms, pasting that answer as `--result`. A confirmed action is
/// never replayed as a failure (an agent told "failed" ships again under
/// a new order id): every retry, in both protocol versions, gets
/// `isError: false`, a note that the action was confirmed, and the
/// recorded text kept after it; nothing is sent again.
#[test]
fn a_confirmation_recorded_with_the_tools_error_result_is_replayed_as_done() {
    let Some(python) = python() else { return };
    let w = World::new(python, "");
    let first = calls_in_mode(&w, "raise", "auto", &json!([ship("E-1", 1)]));
    assert_eq!(status(&first[0]), "outcome_unknown", "{}", first[0]);
    let error = r#"{"content":[{"type":"text","text":"carrier API timed out after the shipment was created"}],"isError":true}"#;
    resolve_confirmed(&w, "create_shipment:E-1", Some(error));
    for mode in ["auto", "legacy"] {
        let r = calls_in(&w, mode, &json!([ship("E-1", 1)]));
        assert_eq!(r[0]["isError"], false, "{mode}: {}", r[0]);
        assert_eq!(r[0]["_meta"]["handover"]["replayed"], true, "{}", r[0]);
        assert!(text(&r[0]).contains("performed and confirmed"), "{}", r[0]);
        assert_eq!(
            r[0]["content"][1]["text"], "carrier API timed out after the shipment was created",
            "the recorded content kept: {}",
            r[0]
        );
    }
    assert_eq!(w.shipments().len(), 1, "applied once, never re-sent");
}

/// A shipment performed by a 2025-11-25 client is recorded without
/// `resultType`, which a 2026-07-28 result must carry; one performed by a
/// 2026-07-28 client carries it. Each is replayed, valid, to the other.
#[test]
fn a_result_recorded_under_one_protocol_version_is_replayed_valid_under_the_other() {
    let Some(python) = python() else { return };
    let w = World::new(python, "");
    let legacy = calls_in(&w, "legacy", &json!([ship("V-1", 1)]));
    let modern = calls_in(&w, "auto", &json!([ship("V-2", 1)]));
    assert_eq!(legacy[0]["isError"], false, "{}", legacy[0]);
    assert_eq!(modern[0]["isError"], false, "{}", modern[0]);
    let to_modern = calls_in(&w, "auto", &json!([ship("V-1", 1)]));
    let to_legacy = calls_in(&w, "legacy", &json!([ship("V-2", 1)]));
    for (replay, first) in [(&to_modern[0], &legacy[0]), (&to_legacy[0], &modern[0])] {
        assert_eq!(replay["_meta"]["handover"]["replayed"], true, "{replay}");
        assert_eq!(replay["content"], first["content"], "{replay}");
        assert_eq!(replay["structuredContent"], first["structuredContent"]);
    }
    assert_eq!(w.shipments().len(), 2);
}

/// Two guarded tools without `key_from`, one client key: the second call
/// is a conflict that names the action the key belongs to (the arguments
/// may well be equal), and nothing is charged.
#[test]
fn a_client_key_of_another_action_is_a_conflict_naming_that_action() {
    let Some(python) = python() else { return };
    let charge = "[actions.charge]\nmcp = { server = \"shipping\", tool = \"charge\" }\n";
    let w = World::configured(python, "", "", charge);
    w.unbind_key_from();
    let meta = json!({ "idempotencyKey": "K-7" });
    let plan = json!([
        { "tool": "create_shipment", "arguments": { "order_id": "A-7", "sku": "KETTLE", "qty": 1 }, "meta": meta },
        { "tool": "charge", "arguments": { "order_no": 7, "amount_cents": 500 }, "meta": meta },
    ]);
    let r = w.calls("ok", &plan);
    assert_eq!(r[0]["isError"], false, "{}", r[0]);
    assert_eq!(status(&r[1]), "conflict", "{}", r[1]);
    assert_eq!(r[1]["structuredContent"]["action"], "create_shipment");
    assert!(
        text(&r[1]).contains(r#"another action ("create_shipment")"#),
        "{}",
        r[1]
    );
    let applied = w.shipments();
    assert_eq!(applied.len(), 1, "the shipment only: {applied:?}");
}
