//! Request ids at the stdio door: the ids the proxy uses for its own
//! upstream requests are refused from clients, and an id MCP does not allow
//! is refused before a guarded call is recorded or sent. The real binary,
//! the official Python SDK's server as the upstream, a real SQLite ledger;
//! effects counted in the server's own log. Skipped without
//! `HANDOVER_TEST_PYTHON`.

use crate::mcp_world;

use mcp_world::raw::RawSession;
use mcp_world::{World, applied_fifo, applied_pid, python, ship, status};
use serde_json::json;

fn call(id: &str, tool: &str, arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}"#
    )
}

/// The proxy sends a guarded call upstream as `handover-N`. A client
/// request with that id (or the same string spelled with an escape) would
/// be answered by the upstream under it, and its answer taken for the
/// guarded call's: the shipment recorded confirmed with a rate quote as
/// its result, though nothing was shipped. Such a request is refused
/// (`-32600` naming the id, nothing sent); the guarded call keeps its own
/// outcome (the upstream holds it past the deadline: unknown).
#[test]
fn a_client_request_with_a_reserved_id_is_refused_and_cannot_answer_a_guarded_call() {
    let Some(python) = python() else { return };
    let w = World::new(python, r#"timeout = "2s""#);
    let fifo = applied_fifo(&w);
    let mut s = RawSession::start_with(&w, "hold", Some(&fifo));
    let order = r#"{"order_id":"H-1","sku":"KETTLE","qty":1}"#;
    s.send(&call("2", "create_shipment", order));
    // The upstream holds the guarded call. Whichever own id it has (the
    // proxy may have sent a tools/list of its own first), one of these
    // would be answered under it.
    applied_pid(&fifo);
    let reserved = [
        (r#""handover-0""#, "handover-0"),
        (r#""handover\u002d1""#, "handover-1"),
        (r#""handover-2""#, "handover-2"),
    ];
    for (id, _) in reserved {
        s.send(&call(id, "get_rate", r#"{"sku":"KETTLE"}"#));
    }
    let answers: Vec<_> = std::iter::from_fn(|| s.next()).take(4).collect();
    let guarded = answers.iter().find(|a| a["id"] == 2);
    let guarded = guarded.expect("the guarded call is answered");
    assert_eq!(
        status(&guarded["result"]),
        "outcome_unknown",
        "not a rate quote taken for a shipment: {guarded}"
    );
    for (_, own) in reserved {
        let a = answers.iter().find(|a| a["id"] == own);
        let a = a.unwrap_or_else(|| panic!("{own} answered: {answers:?}"));
        assert_eq!(a["error"]["code"], -32600, "{a}");
        let message = a["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(own) && message.contains("reserved"), "{a}");
    }
    // Another id is a request like any other.
    let a = s.answer(&call(r#""handover""#, "get_rate", r#"{"sku":"KETTLE"}"#));
    assert!(a["result"]["content"].is_array(), "{a}");
    s.close();
    let r = w.calls("ok", &json!([ship("H-1", 1)]));
    assert_eq!(status(&r[0]), "outcome_unknown", "{}", r[0]);
    assert!(w.shipments().is_empty(), "nothing was shipped");
}

/// A client's `notifications/cancelled` naming one of the proxy's own
/// request ids would cancel the proxy's guarded call upstream (the SDK's
/// server stops the tool and answers nothing: unknown, though nothing
/// was done). Such notifications are dropped: the upstream holds the
/// call until the test releases it — after a `ping` behind the
/// cancellations proved the server read them — and the call is performed
/// and confirmed, once.
#[test]
fn a_client_cannot_cancel_the_proxys_own_requests() {
    let Some(python) = python() else { return };
    let w = World::new(python, r#"timeout = "10s""#);
    let arrived = applied_fifo(&w);
    let release = w.path("release.fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&release)
            .status()
            .unwrap()
            .success()
    );
    let mut command = w.proxy_command("release", Some(&arrived));
    command.env("SHIPPING_RELEASE", &release);
    let mut s = RawSession::start_command(command);
    s.send(&call(
        "2",
        "create_shipment",
        r#"{"order_id":"C-1","sku":"KETTLE","qty":1}"#,
    ));
    applied_pid(&arrived);
    for id in [
        r#""handover-0""#,
        r#""handover-1""#,
        r#""handover-2""#,
        r#""handover-3""#,
    ] {
        s.send(&format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id},"reason":"x"}}}}"#
        ));
    }
    let pong = s.answer(r#"{"jsonrpc":"2.0","id":99,"method":"ping"}"#);
    assert_eq!(pong["id"], 99, "{pong}");
    std::fs::write(&release, "go\n").unwrap();
    let a = s.next().expect("the guarded call is answered");
    assert_eq!(a["id"], 2, "{a}");
    assert_eq!(
        a["result"]["isError"], false,
        "performed, not cancelled: {a}"
    );
    s.close();
    assert_eq!(w.shipments().len(), 1);
}

/// MCP request ids are strings or integers. A guarded call whose id is an
/// object or a boolean is refused as one with `"id": null` is: `-32600`,
/// nothing recorded or sent; the session goes on.
#[test]
fn a_guarded_call_whose_id_is_an_object_or_a_boolean_is_refused() {
    let Some(python) = python() else { return };
    let w = World::new(python, "");
    let mut s = RawSession::start(&w);
    for (id, order) in [(r#"{"x":1}"#, "ID-1"), ("true", "ID-2"), ("[3]", "ID-3")] {
        let arguments = format!(r#"{{"order_id":"{order}","sku":"KETTLE","qty":1}}"#);
        let a = s.answer(&call(id, "create_shipment", &arguments));
        assert_eq!(a["id"], serde_json::Value::Null, "{a}");
        assert_eq!(a["error"]["code"], -32600, "{a}");
    }
    let a = s.answer(&call(
        "7",
        "create_shipment",
        r#"{"order_id":"ID-4","sku":"KETTLE","qty":1}"#,
    ));
    assert_eq!(a["result"]["isError"], false, "{a}");
    s.close();
    let applied = w.shipments();
    assert_eq!(
        applied.len(),
        1,
        "only the call with an integer id: {applied:?}"
    );
    assert_eq!(applied[0]["order_id"], "ID-4");
}
