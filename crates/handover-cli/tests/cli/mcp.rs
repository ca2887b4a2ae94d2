//! `handover mcp` over stdio with real parts: the official MCP Python SDK
//! as the client and as the upstream server (a small shipping server that
//! writes every applied shipment to a file before answering), the real
//! binary, a real SQLite ledger. Effects are counted in the server's file.
//!
//! The interpreter comes from `HANDOVER_TEST_PYTHON` (a virtualenv with
//! `mcp` installed; `.ci/run` creates it). Unset: the tests say they were
//! skipped; set but broken: they fail.

use crate::mcp_world;
use crate::support;

use mcp_world::raw::RawSession;
use mcp_world::{
    LOOKUP, SCRIPTS, World, applied_fifo, applied_pid, assert_replays_the_one_shipment, kill_9,
    open_and_ship, python, ship, status,
};
use serde_json::json;

#[test]
fn tools_prompts_and_resources_pass_through_unchanged() {
    let Some(python) = python() else { return };
    let w = World::new(python, "");
    let server = format!("{SCRIPTS}/shipping_server.py");
    let direct = w.client("ok", &["fidelity"], &[&w.python, &server]);
    let proxied_cmd = w.through_handover();
    let proxied_cmd: Vec<&str> = proxied_cmd.iter().map(String::as_str).collect();
    let proxied = w.client("ok", &["fidelity"], &proxied_cmd);
    assert_eq!(
        direct.len(),
        6,
        "tools, prompts, resources, rate, prompt, resource"
    );
    let tools: Vec<&str> = direct[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"create_shipment") && tools.contains(&"get_rate"));
    assert_eq!(proxied, direct, "what the client sees through the proxy");
    assert!(w.shipments().is_empty(), "nothing applied");
}

#[test]
fn a_guarded_tool_is_performed_once_replayed_and_conflicts_on_other_arguments() {
    let Some(python) = python() else { return };
    let w = World::new(python, "");
    let rate = json!({ "tool": "get_rate", "arguments": { "sku": "KETTLE" } });
    let plan = json!([
        ship("A-1", 1),
        ship("A-1", 1),
        ship("A-1", 3),
        // A framework that stamps each attempt with its own key.
        { "tool": "create_shipment", "arguments": { "order_id": "A-1", "sku": "KETTLE", "qty": 1 },
          "meta": { "idempotencyKey": "attempt-2" } },
        rate,
    ]);
    let r = w.calls("ok", &plan);
    let applied = w.shipments();
    assert_eq!(applied.len(), 1, "A-1 once: {applied:?}");

    // Confirmed: the upstream's own result, with the destination key it got.
    assert_eq!(r[0]["isError"], false);
    let reference = applied[0]["reference"].as_str().unwrap();
    assert!(
        reference.starts_with("ho"),
        "destination key as key_argument: {reference}"
    );
    assert!(
        r[0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("SHP-1")
    );
    // Replayed: the recorded result, marked as such; nothing sent.
    assert_eq!(r[1]["content"], r[0]["content"]);
    assert_eq!(r[1]["_meta"]["handover"]["replayed"], true);
    assert_eq!(
        r[1]["_meta"]["handover"]["operation"]["key"],
        "create_shipment:A-1"
    );
    // Conflict: an error naming the differing argument; nothing sent.
    assert_eq!(r[2]["isError"], true);
    assert_eq!(status(&r[2]), "conflict");
    assert_eq!(r[2]["structuredContent"]["differing"], json!(["qty"]));
    // `key_from` is the identity: a client's own key on a retry does not
    // make it a second shipment.
    assert_eq!(r[3]["content"], r[0]["content"], "{}", r[3]);
    assert_eq!(r[3]["_meta"]["handover"]["replayed"], true);
    // A read-only tool passes through.
    assert!(
        r[4]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("price_cents")
    );
}

/// A guarded tool without `key_from`: the client's `_meta.idempotencyKey`
/// is the identity — the same key with other arguments is a conflict, not a
/// second shipment — and a call without one is refused, nothing sent.
#[test]
fn without_key_from_the_clients_idempotency_key_is_the_identity() {
    let Some(python) = python() else { return };
    let w = World::new(python, "");
    w.unbind_key_from();
    let plan = json!([
        { "tool": "create_shipment", "arguments": { "order_id": "A-2", "sku": "KETTLE", "qty": 1 },
          "meta": { "idempotencyKey": "K-9" } },
        { "tool": "create_shipment", "arguments": { "order_id": "A-3", "sku": "KETTLE", "qty": 1 },
          "meta": { "idempotencyKey": "K-9" } },
        ship("A-4", 1),
    ]);
    let r = w.calls("ok", &plan);
    let applied = w.shipments();
    assert_eq!(applied.len(), 1, "K-9 once: {applied:?}");
    assert_eq!(applied[0]["order_id"], "A-2");
    assert_eq!(r[0]["isError"], false, "{}", r[0]);
    assert_eq!(status(&r[1]), "conflict");
    assert_eq!(r[1]["structuredContent"]["differing"], json!(["order_id"]));
    assert_eq!(status(&r[2]), "refused", "{}", r[2]);
    assert!(
        r[2].to_string().contains("_meta.idempotencyKey"),
        "{}",
        r[2]
    );
}

/// The SDK answers `isError` for any exception, also one raised after the
/// effect (the shipment written, then the carrier call timed out). That
/// is not "not done": the call is unknown ("being verified", the
/// upstream's error text after it), the retry sends nothing, and another
/// call of the action under a new key (B-2) is suspended while it is
/// unknown (`block = "action"`). Without a lookup an operator resolves it.
#[test]
fn an_upstream_error_result_is_unknown_and_nothing_is_sent_again() {
    let Some(python) = python() else { return };
    let w = World::new(python, r#"block = "action""#);
    let r = w.calls(
        "raise",
        &json!([ship("B-1", 1), ship("B-1", 1), ship("B-2", 1)]),
    );
    assert_eq!(w.shipments().len(), 1, "applied once, never re-sent");
    assert_eq!(status(&r[0]), "outcome_unknown", "{}", r[0]);
    assert_eq!(r[0]["structuredContent"]["owner"], "review", "{}", r[0]);
    let texts: Vec<&str> = r[0]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    assert!(texts[0].contains("being verified"), "{texts:?}");
    assert!(
        texts[1].contains("does not show that the action was not performed")
            && texts[1].contains("carrier API timed out"),
        "the upstream's text, not as a refusal: {texts:?}"
    );
    assert!(
        r[0]["structuredContent"]["upstream_error"]
            .as_str()
            .unwrap()
            .contains("carrier API timed out")
    );
    assert_eq!(status(&r[1]), "outcome_unknown", "{}", r[1]);
    assert_eq!(status(&r[2]), "suspended", "{}", r[2]);
}

/// With the action's MCP lookup, the reconciler finds the shipment that an
/// `isError` answer hid: the retry gets it replayed as confirmed.
#[test]
fn the_lookup_finds_what_an_error_result_hid_and_the_retry_replays_it() {
    let Some(python) = python() else { return };
    let w = World::with_lookup(python, "", LOOKUP);
    let mut retry = ship("B-2", 1);
    retry["retry_while"] = json!("outcome_unknown");
    let r = w.calls("raise", &json!([ship("B-2", 1), retry]));
    assert_eq!(status(&r[0]), "outcome_unknown", "{}", r[0]);
    assert_eq!(r[0]["structuredContent"]["owner"], "reconciler", "{}", r[0]);
    assert_replays_the_one_shipment(&w, &r[1]);
}

/// `is_error = "rejected"`: for a tool whose `isError` always means it did
/// nothing, the error result is a rejection, replayed to retries.
#[test]
fn is_error_rejected_makes_an_error_result_a_rejection_replayed_to_retries() {
    let Some(python) = python() else { return };
    let w = World::new(python, "");
    w.bind(r#"is_error = "rejected""#);
    let r = w.calls("reject", &json!([ship("B-3", 1), ship("B-3", 1)]));
    assert!(w.shipments().is_empty());
    assert_eq!(r[0]["isError"], true);
    assert!(
        r[0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("not shippable")
    );
    assert_eq!(status(&r[0]), "", "the upstream's own result: {}", r[0]);
    assert_eq!(r[1]["content"], r[0]["content"]);
    assert_eq!(r[1]["_meta"]["handover"]["replayed"], true);
}

#[test]
fn a_stalled_answer_is_unknown_and_the_retry_sends_nothing() {
    let Some(python) = python() else { return };
    let w = World::new(python, r#"timeout = "1s""#);
    let r = w.calls("stall", &json!([ship("C-1", 1), ship("C-1", 1)]));
    assert_eq!(w.shipments().len(), 1, "applied once, never re-sent");
    for (i, result) in r.iter().enumerate() {
        assert_eq!(result["isError"], true, "call {i}");
        assert_eq!(status(result), "outcome_unknown", "call {i}: {result}");
        assert_eq!(
            result["structuredContent"]["operation"]["key"],
            "create_shipment:C-1"
        );
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("being verified") && text.contains("another key"),
            "{text}"
        );
    }
}

#[test]
fn a_dropped_connection_after_applying_stays_unknown_across_sessions() {
    let Some(python) = python() else { return };
    let w = World::new(python, "");
    // The server applies, then dies before answering: the session ends.
    let first = w.calls("drop", &json!([ship("D-1", 1)]));
    assert_eq!(status(&first[0]), "outcome_unknown", "{}", first[0]);
    // A new session, a healthy server, a new JSON-RPC id: nothing is sent.
    let again = w.calls("ok", &json!([ship("D-1", 1)]));
    assert_eq!(status(&again[0]), "outcome_unknown", "{}", again[0]);
    assert_eq!(w.shipments().len(), 1, "one effect at the upstream");
}

#[test]
fn the_lookup_tool_confirms_a_lost_answer_and_the_retry_replays_it() {
    let Some(python) = python() else { return };
    let w = World::with_lookup(python, r#"timeout = "1s""#, LOOKUP);
    // The answer stalls: unknown. The agent keeps retrying while it is
    // being verified; the proxy's reconciler calls find_shipment, finds the
    // record with the approved arguments, and the retry gets the replay.
    let mut retry = ship("E-1", 1);
    retry["retry_while"] = json!("outcome_unknown");
    let r = w.calls("stall", &json!([ship("E-1", 1), retry]));
    assert_eq!(status(&r[0]), "outcome_unknown", "{}", r[0]);
    assert_replays_the_one_shipment(&w, &r[1]);
}

#[test]
fn kill_9_between_dispatch_and_answer_leaves_the_call_unresolved_after_restart() {
    let Some(python) = python() else { return };
    let w = World::new(python, "lease = \"1s\"\ntimeout = \"1s\"");
    let fifo = applied_fifo(&w);
    let mut proxy = w.proxy("stall", Some(&fifo));
    open_and_ship(proxy.stdin.as_mut().unwrap(), "kill-test", "F-1");
    // The server applied the shipment (its signal); the answer is pending.
    let upstream_pid = applied_pid(&fifo);
    proxy.kill().unwrap(); // SIGKILL: no drop guard, no cleanup
    proxy.wait().unwrap();
    kill_9(&upstream_pid);
    assert_eq!(w.shipments().len(), 1);

    // Restart with a healthy upstream: the agent retries the same call.
    // While the dead holder's lease runs it is in progress; then unknown.
    // Never sent again.
    let mut retry = ship("F-1", 1);
    retry["retry_while"] = json!("in_progress");
    // The action has no lookup: the proxy's reconciler hands the unknown
    // the crash left (owner "reconciler") to review, where an operator
    // sees it; nothing else would ever take it.
    let mut reviewed = ship("F-1", 1);
    reviewed["retry_while_owner"] = json!("reconciler");
    let r = w.calls("ok", &json!([retry, ship("F-1", 1), reviewed]));
    for result in &r {
        assert_eq!(status(result), "outcome_unknown", "{result}");
    }
    assert_eq!(r[2]["structuredContent"]["owner"], "review", "{}", r[2]);
    assert_eq!(w.shipments().len(), 1, "not re-sent after the restart");
}

/// A `tools/call` of a guarded tool that the proxy cannot read
/// unambiguously — a member given twice (`name`, `method`) — is refused,
/// never forwarded: the upstream's parser takes the last of duplicate
/// members and would run the guarded tool with no ledger record. A
/// guarded call sent as a notification (no id, so no answer to record)
/// is not forwarded either. Counted in the server's own log.
#[test]
fn a_guarded_call_the_proxy_cannot_read_unambiguously_is_refused_not_forwarded() {
    use std::io::{BufRead, BufReader, Write};
    let Some(python) = python() else { return };
    let w = World::new(python, "");
    let mut proxy = w.proxy("ok", None);
    let mut stdin = proxy.stdin.take().unwrap();
    let mut stdout = BufReader::new(proxy.stdout.take().unwrap());
    let mut answer = |stdin: &mut std::process::ChildStdin, line: &str| -> serde_json::Value {
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        let mut out = String::new();
        stdout.read_line(&mut out).unwrap();
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out:?}"))
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "smuggler", "version": "1"}}});
    assert!(answer(&mut stdin, &init.to_string())["result"].is_object());
    let args = r#"{"order_id": "DUP-1", "sku": "KETTLE", "qty": 1}"#;
    let twice_name = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"get_rate","name":"create_shipment","arguments":{args}}}}}"#
    );
    let twice_method = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/list","method":"tools/call","params":{{"name":"create_shipment","arguments":{args}}}}}"#
    );
    // Arguments that cannot be recorded exactly as sent: a member named
    // twice, a number the parser would round. Refused naming the argument,
    // as the gateway refuses the same parameters.
    let twice_argument = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"create_shipment","arguments":{"order_id":"DUP-2","sku":"KETTLE","qty":1,"qty":100}}}"#;
    let rounded = r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"create_shipment","arguments":{"order_id":"DUP-3","sku":"KETTLE","qty":3.14159265358979323846}}}"#;
    for line in [
        twice_name,
        twice_method,
        twice_argument.into(),
        rounded.into(),
    ] {
        let a = answer(&mut stdin, &line);
        assert!(a["error"]["message"].is_string(), "refused: {a}");
    }
    for line in [twice_argument, rounded] {
        let a = answer(&mut stdin, line);
        let message = a["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("arguments.qty"), "names the argument: {a}");
    }
    // A notification naming the guarded tool is dropped; the next request
    // is answered normally (the session goes on).
    let notification = format!(
        r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":"create_shipment","arguments":{args}}}}}"#
    );
    writeln!(stdin, "{notification}").unwrap();
    let rate = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "get_rate", "arguments": {"sku": "KETTLE"}}});
    let a = answer(&mut stdin, &rate.to_string());
    assert_eq!(a["id"], 4, "{a}");
    drop(stdin);
    proxy.wait().unwrap();
    assert_eq!(
        w.shipments(),
        Vec::<serde_json::Value>::new(),
        "nothing ran unguarded"
    );
}

/// What Python's `json.dumps` writes by default (`NaN`, `Infinity`) is not
/// JSON; a JSON-RPC batch is not one message. Neither may reach the
/// upstream — the SDK's server parses `NaN` and would run the guarded tool
/// with no ledger record, and a 2025-03-26 server runs each call of a
/// batch — so each is answered by the proxy with a JSON-RPC error (to the
/// request's id where it can be read) and nothing is sent. A leading byte
/// order mark is ignored (RFC 8259 allows it): the call is guarded as
/// usual. A guarded call with `"id": null` is refused with an answer, not
/// dropped in silence. Effects counted in the shipping server's log.
#[test]
fn lines_that_are_not_one_json_object_are_answered_and_never_forwarded() {
    let Some(python) = python() else { return };
    let w = World::new(python, "");
    let mut s = RawSession::start(&w);
    let call = |id: &str, order: &str, extra: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"create_shipment","arguments":{{"order_id":"{order}","sku":"KETTLE","qty":1{extra}}}}}}}"#
        )
    };
    for (id, line) in [
        (10, call("10", "NAN-1", r#","weight":NaN"#)),
        (11, call("11", "INF-1", r#","weight":Infinity"#)),
        (12, call("12", "INF-2", r#","weight":-Infinity"#)),
    ] {
        let a = s.answer(&line);
        assert_eq!(a["id"], id, "{a}");
        assert_eq!(a["error"]["code"], -32700, "{a}");
    }
    // A batch with a guarded call, and one without: each request in it
    // gets an error with its id, in one batch answer.
    let rate = r#"{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"get_rate","arguments":{"sku":"KETTLE"}}}"#;
    let a = s.answer(&format!("[{},{rate}]", call("13", "BATCH-1", "")));
    let ids: Vec<&serde_json::Value> = a.as_array().unwrap().iter().map(|e| &e["id"]).collect();
    assert_eq!(ids, [&json!(13), &json!(14)], "{a}");
    assert!(
        a.as_array()
            .unwrap()
            .iter()
            .all(|e| e["error"]["code"] == -32600),
        "{a}"
    );
    let a = s.answer(&format!("[{rate}]"));
    assert_eq!(a[0]["id"], 14, "{a}");
    assert_eq!(a[0]["error"]["code"], -32600, "{a}");
    // Two messages on one line: refused, the answer saying what it saw.
    let a = s.answer(&format!(
        "{}{}",
        call("18", "TWO-1", ""),
        call("19", "TWO-2", "")
    ));
    assert_eq!(a["error"]["code"], -32700, "{a}");
    let message = a["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("trailing characters"), "{a}");
    // Arguments that are not an object: the error names them.
    let a = s.answer(
        r#"{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"create_shipment","arguments":"ship TWO-3"}}"#,
    );
    assert_eq!(a["id"], 20, "{a}");
    let message = a["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("params.arguments: "), "{a}");
    // A guarded call with a null id: refused with an answer.
    let a = s.answer(&call("null", "NULL-1", ""));
    assert_eq!(a["id"], serde_json::Value::Null, "{a}");
    assert_eq!(a["error"]["code"], -32600, "{a}");
    // A BOM before the call: guarded as usual, once, then replayed.
    let first = s.answer(&format!("\u{feff}{}", call("15", "BOM-1", "")));
    assert_eq!(first["id"], 15, "{first}");
    assert_eq!(first["result"]["isError"], false, "{first}");
    let again = s.answer(&format!("\u{feff}{}", call("16", "BOM-1", "")));
    assert_eq!(
        again["result"]["_meta"]["handover"]["replayed"], true,
        "{again}"
    );
    // The session goes on.
    let a = s.answer(&rate.replace("\"id\":14", "\"id\":17"));
    assert_eq!(a["id"], 17, "{a}");
    assert!(a["result"]["content"].is_array(), "{a}");
    s.close();
    let applied = w.shipments();
    assert_eq!(applied.len(), 1, "only the BOM call, guarded: {applied:?}");
    assert_eq!(applied[0]["order_id"], "BOM-1");
    assert!(applied[0]["reference"].as_str().unwrap().starts_with("ho"));
}

/// A line that is not UTF-8, or longer than 16 MiB, costs that line: it is
/// answered `-32700` (to its id when it can still be read), nothing of it
/// is sent, and the session goes on (it used to end, calls in flight and
/// all). Effects counted in the shipping server's log.
#[test]
fn an_unreadable_line_is_answered_and_the_session_goes_on() {
    let Some(python) = python() else { return };
    let w = World::new(python, "");
    let mut s = RawSession::start(&w);
    let not_utf8 = b"{\"jsonrpc\":\"2.0\",\"id\":20,\"method\":\"tools/call\",\"params\":{\"name\":\"create_shipment\",\"arguments\":{\"order_id\":\"U-1\",\"sku\":\"\xff\xfe\",\"qty\":1}}}";
    let a = s.answer_bytes(not_utf8);
    assert_eq!(
        (&a["id"], &a["error"]["code"]),
        (&json!(20), &json!(-32700)),
        "{a}"
    );
    assert!(
        a["error"]["message"].as_str().unwrap().contains("UTF-8"),
        "{a}"
    );
    let mut long = br#"{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"create_shipment","arguments":{"order_id":"U-2","sku":""#.to_vec();
    long.resize(long.len() + 17 * 1024 * 1024, b'x');
    long.extend_from_slice(br#"","qty":1}}}"#);
    let a = s.answer_bytes(&long);
    assert_eq!(
        (&a["id"], &a["error"]["code"]),
        (&json!(null), &json!(-32700)),
        "{a}"
    );
    let ok = r#"{"jsonrpc":"2.0","id":22,"method":"tools/call","params":{"name":"create_shipment","arguments":{"order_id":"U-3","sku":"KETTLE","qty":1}}}"#;
    let a = s.answer(ok);
    assert_eq!(
        (&a["id"], &a["result"]["isError"]),
        (&json!(22), &json!(false)),
        "{a}"
    );
    s.close();
    let applied = w.shipments();
    assert_eq!(applied.len(), 1, "only the readable call: {applied:?}");
    assert_eq!(applied[0]["order_id"], "U-3");
}

/// SIGTERM while a guarded call waits for its answer (stdin still open):
/// the proxy reads no further line, lets the call reach its deadline,
/// records it unknown and answers it, then exits cleanly. The retry is
/// unknown at once (recorded, not left to a lease running out) and nothing
/// is sent again.
#[test]
fn sigterm_during_a_guarded_call_records_and_answers_it_before_exiting() {
    use std::io::BufRead;
    let Some(python) = python() else { return };
    let w = World::new(python, "timeout = \"1s\"");
    let fifo = applied_fifo(&w);
    let mut proxy = w.proxy("stall", Some(&fifo));
    let mut stdin = proxy.stdin.take().unwrap();
    open_and_ship(&mut stdin, "term-test", "T-1");
    let upstream_pid = applied_pid(&fifo);
    support::signal(&proxy, "TERM");
    // stdin stays open: the proxy must end on the signal, not on EOF.
    let out = std::io::BufReader::new(proxy.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let lines: Vec<String> = out.lines().map_while(Result::ok).collect();
        let _ = tx.send(lines);
    });
    let lines = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the proxy ended after SIGTERM");
    let answers: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let call = answers
        .iter()
        .find(|a| a["id"] == 2)
        .expect("call 2 answered");
    assert!(proxy.wait().unwrap().success(), "exits cleanly");
    drop(stdin);
    // The proxy ends its upstream on exit; this only makes sure.
    let _ = std::process::Command::new("kill")
        .args(["-9", upstream_pid.trim()])
        .status();
    assert!(call.to_string().contains("unknown"), "{call}");
    let r = w.calls("ok", &json!([ship("T-1", 1)]));
    assert_eq!(status(&r[0]), "outcome_unknown", "{}", r[0]);
    let applied = w.shipments();
    assert_eq!(applied.len(), 1, "T-1 once: {applied:?}");
}
