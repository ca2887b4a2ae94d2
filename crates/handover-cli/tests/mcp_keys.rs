//! The operation key of a guarded tool with `key_from`: one value, one key,
//! however the agent spells it. The real binary over stdio, the official
//! Python SDK's server as the upstream (its `charge` tool declares
//! `order_no: int` and, as the SDK does, reads `"01"` or `" 1"` as 1), a
//! real SQLite ledger; effects counted in the server's own log. Skipped
//! without `HANDOVER_TEST_PYTHON`.

mod mcp_world;

use mcp_world::raw::RawSession;
use mcp_world::{World, python, status};

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
