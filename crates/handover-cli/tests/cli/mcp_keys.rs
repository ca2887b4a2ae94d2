//! The operation key of a guarded tool with `key_from`: one value, one key,
//! however the agent spells it. The real binary over stdio, the official
//! Python SDK's server as the upstream (its `charge` tool declares
//! `order_no: int` and, as the SDK does, reads `"01"` or `" 1"` as 1), a
//! real SQLite ledger; effects counted in the server's own log. Skipped
//! without `HANDOVER_TEST_PYTHON`.

use crate::mcp_world;

use mcp_world::raw::RawSession;
use mcp_world::{World, python, status};
use serde_json::json;

/// `charge` guarded, keyed by `order_no`.
const CHARGE: &str = r#"
[actions.charge]
mcp = { server = "shipping", tool = "charge", key_from = ["order_no"] }
"#;

fn charge(id: u32, order_no: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"charge","arguments":{{"order_no":{order_no},"amount_cents":500}}}}}}"#
    )
}

/// `1`, `1.0`, `1e0` and `1E0` are one JSON number: one operation, keyed
/// `charge:1` (what the integer always gave), performed once and replayed.
/// A string the tool would read as that integer (`"1"`, `"01"`, `" 1"`,
/// `"+1"`, `"1.0"`) is refused naming the argument and the type the tool
/// declares: as its own key it would charge the order again.
#[test]
fn one_number_however_spelled_is_one_operation_and_a_string_for_an_integer_is_refused() {
    let Some(python) = python() else { return };
    let w = World::configured(python, "", "", CHARGE);
    let mut s = RawSession::start(&w);
    let first = s.answer(&charge(10, "1"));
    assert_eq!(first["result"]["isError"], false, "{first}");
    for (id, spelling) in [(11, "1.0"), (12, "1e0"), (13, "1E0"), (14, "10e-1")] {
        let a = s.answer(&charge(id, spelling));
        let handover = &a["result"]["_meta"]["handover"];
        assert_eq!(handover["replayed"], true, "{spelling}: {a}");
        assert_eq!(handover["operation"]["key"], "charge:1", "{spelling}: {a}");
    }
    for (id, spelling) in [
        (20, r#""1""#),
        (21, r#""01""#),
        (22, r#"" 1""#),
        (23, r#""+1""#),
        (24, r#""1.0""#),
    ] {
        let a = s.answer(&charge(id, spelling));
        assert_eq!(status(&a["result"]), "refused", "{spelling}: {a}");
        let text = a["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(
            text.contains(r#""order_no" is a JSON string, but the tool declares it integer"#),
            "{spelling}: {text}"
        );
    }
    // Another order is another operation.
    let a = s.answer(&charge(30, "2.0"));
    assert_eq!(a["result"]["isError"], false, "{a}");
    s.close();
    let charges: Vec<_> = w
        .shipments()
        .iter()
        .map(|c| c["order_no"].clone())
        .collect();
    assert_eq!(charges, [1, 2], "order 1 charged once, order 2 once");
}

/// The types pydantic's schemas give through a `$ref`: a `RootModel[int]`
/// (`{"$ref": "#/$defs/OrderNo"}`), an optional one (`anyOf` of that
/// `$ref` and `null`), an `IntEnum` (a `$ref` to an integer `enum`). The
/// SDK's server reads `"01"`, `"+1"` and `"1"` as 1 for each: every string
/// spelling used to be a charge of its own. Now each is refused naming
/// the type, and each tool charges order 1 once.
#[test]
fn key_types_are_read_through_refs_and_combinators_as_sdk_servers_write_them() {
    let Some(python) = python() else { return };
    let tools = ["charge_ref", "charge_opt", "charge_tier"];
    let actions: String = tools
        .iter()
        .map(|t| {
            format!("[actions.{t}]\nmcp = {{ server = \"shipping\", tool = \"{t}\", key_from = [\"order_no\"] }}\n")
        })
        .collect();
    let w = World::configured(python, "", "", &actions);
    let mut s = RawSession::start(&w);
    let mut id = 100;
    for tool in tools {
        for order_no in ["1", r#""01""#, r#""+1""#, r#""1""#] {
            id += 1;
            let call = charge(id, order_no).replacen(r#""charge""#, &format!("{tool:?}"), 1);
            let a = s.answer(&call);
            if order_no == "1" {
                assert_eq!(a["result"]["isError"], false, "{tool} {order_no}: {a}");
                continue;
            }
            assert_eq!(status(&a["result"]), "refused", "{tool} {order_no}: {a}");
            let text = a["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default();
            assert!(text.contains("but the tool declares it"), "{text}");
            assert!(text.contains("integer"), "{text}");
        }
    }
    s.close();
    let charges: Vec<_> = w
        .shipments()
        .iter()
        .map(|c| (c["tool"].clone(), c["order_no"].clone()))
        .collect();
    let once: Vec<_> = tools.iter().map(|t| (json!(t), json!(1))).collect();
    assert_eq!(charges, once, "order 1 charged once by each tool");
}

/// The upstream's `tools/list` errs, never answers (within the action's
/// timeout, at least 10 s), leaves the tool out, or pages forever: the `key_from` type
/// check has no schema to read. The call is not sent (`not_sent`, saying
/// why; nothing recorded) rather than taken unchecked — where `"01"`
/// would be a charge of its own. With a healthy list the same call
/// charges once.
#[test]
fn a_key_from_call_is_not_sent_while_the_tools_schema_cannot_be_read() {
    let Some(python) = python() else { return };
    let short = CHARGE.replace("mcp = ", "timeout = \"1s\"\nmcp = ");
    let w = World::configured(python, "", "", &short);
    for mode in ["list-error", "list-slow", "list-omit", "list-loop"] {
        let mut s = RawSession::start_with(&w, mode, None);
        // A list that never comes is waited for 10 s: once is enough.
        let calls: &[_] = match mode {
            "list-slow" => &[(10, "1")],
            _ => &[(10, "1"), (11, r#""01""#)],
        };
        for &(id, order_no) in calls {
            let a = s.answer(&charge(id, order_no));
            assert_eq!(status(&a["result"]), "not_sent", "{mode} {order_no}: {a}");
            let text = a["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default();
            assert!(
                text.contains(r#"the input schema of "charge" could not be read"#),
                "{mode}: {text}"
            );
        }
        s.close();
        assert!(w.shipments().is_empty(), "{mode}: nothing charged");
    }
    let mut s = RawSession::start(&w);
    let a = s.answer(&charge(12, "1"));
    assert_eq!(a["result"]["isError"], false, "{a}");
    s.close();
    assert_eq!(w.shipments().len(), 1);
    let shown = w.show("agent-1", "charge:1");
    assert_eq!(shown["operation"]["state"]["state"], "confirmed", "{shown}");
}
