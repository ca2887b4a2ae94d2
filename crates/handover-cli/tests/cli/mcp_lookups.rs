//! An MCP lookup must be about this operation before the reconciler acts on
//! it. Two principals (scopes) ship the same order id through the proxy on
//! one ledger: the first ship is confirmed, the second's call is held past
//! its deadline (unknown, nothing applied). A lookup that does not search
//! by the operation's name finds the first principal's shipment, which must
//! never confirm the second's operation. The real binary over stdio, the
//! official Python SDK's server as the upstream, a real SQLite ledger;
//! effects counted in the server's own log. Skipped without
//! `HANDOVER_TEST_PYTHON`.

use crate::mcp_world;

use mcp_world::raw::RawSession;
use mcp_world::{World, python, ship, status};
use serde_json::{Value, json};

/// A lookup through `tool`, with `{destination_key}` in `reference`.
fn lookup_by(tool: &str) -> String {
    format!(
        r#"
[actions.create_shipment.lookup]
visibility_lag = "30s"
check_every = "100ms"
max_check_every = "200ms"
mcp_tool = "{tool}"
arguments = {{ order_id = "{{params.order_id}}", reference = "{{destination_key}}" }}
"#
    )
}

/// Tenant A's shipment of `order`, confirmed; then the stdio scope is
/// tenant B's.
fn tenant_a_ships(w: &World, order: &str) {
    let a = w.calls("ok", &json!([ship(order, 1)]));
    assert_eq!(a[0]["isError"], false, "{}", a[0]);
    w.set_scope("tenant-b");
}

fn lookups(shown: &Value) -> Vec<&Value> {
    shown["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "lookup")
        .collect()
}

/// `find_by_order` takes only `order_id`: the SDK's server drops the
/// `reference` it is sent, and finds tenant A's shipment for tenant B's
/// operation (which the reconciler confirmed with it, and replayed A's
/// reference to B). The proxy now reads the tool's schema first: the
/// lookup fails naming the undeclared argument, and B's operation stays
/// unknown.
#[test]
fn a_lookup_tool_that_does_not_declare_the_naming_argument_proves_nothing() {
    let Some(python) = python() else { return };
    let w = World::with_lookup(python, r#"timeout = "1s""#, &lookup_by("find_by_order"));
    tenant_a_ships(&w, "X-1");
    let mut s = RawSession::start_with(&w, "hold", None);
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_shipment","arguments":{"order_id":"X-1","sku":"KETTLE","qty":1}}}"#;
    let a = s.answer(call);
    assert_eq!(status(&a["result"]), "outcome_unknown", "{a}");
    s.logged(r#"does not declare argument "reference""#);
    s.close();
    let shown = w.show("tenant-b", "create_shipment:X-1");
    assert_eq!(shown["operation"]["state"]["state"], "unknown", "{shown}");
    let lookups = lookups(&shown);
    assert!(!lookups.is_empty(), "{shown}");
    for l in lookups {
        assert_eq!(l["outcome"], "error", "{l}");
        let evidence = l["evidence"].as_str().unwrap_or_default();
        assert!(
            evidence.contains(r#"does not declare argument "reference""#),
            "{evidence}"
        );
    }
    assert_eq!(w.shipments().len(), 1, "tenant A's shipment only");
}

/// `find_by_order_and_ref` declares `reference` but searches by order id
/// alone: it answers tenant A's shipment, whose `reference` (the
/// `key_argument`) is A's destination key, not B's. That record is another
/// operation's: B's operation is diverged and handed to review, never
/// confirmed with it (B's retries are never told A's shipment is theirs).
#[test]
fn a_record_carrying_another_operations_key_never_confirms_this_one() {
    let Some(python) = python() else { return };
    let w = World::with_lookup(
        python,
        r#"timeout = "1s""#,
        &lookup_by("find_by_order_and_ref"),
    );
    tenant_a_ships(&w, "X-2");
    let mut retry = ship("X-2", 1);
    retry["retry_while_owner"] = json!("reconciler");
    let b = w.calls("hold", &json!([ship("X-2", 1), retry]));
    assert_eq!(status(&b[0]), "outcome_unknown", "{}", b[0]);
    assert_eq!(
        status(&b[1]),
        "outcome_unknown",
        "not A's shipment: {}",
        b[1]
    );
    assert_eq!(b[1]["structuredContent"]["owner"], "review", "{}", b[1]);
    let shown = w.show("tenant-b", "create_shipment:X-2");
    let a_reference = w.shipments()[0]["reference"].clone();
    let diverged = lookups(&shown)
        .into_iter()
        .find(|l| l["outcome"] == "diverged")
        .unwrap_or_else(|| panic!("a diverged lookup: {shown}"));
    let evidence = diverged["evidence"].as_str().unwrap_or_default();
    assert!(
        evidence.contains(a_reference.as_str().unwrap()),
        "{evidence}"
    );
    assert_eq!(w.shipments().len(), 1, "tenant A's shipment only");
}
