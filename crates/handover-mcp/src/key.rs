//! The operation key of a guarded call: `TOOL:` and its `key_from`
//! argument values, or the client's `_meta.idempotencyKey` for a tool
//! without `key_from` — never the JSON-RPC id, which changes on every retry.
//!
//! One value, one key: a number is keyed by its canonical text (RFC 8785,
//! as the ledger writes parameters), so `1`, `1.0` and `1e0` are one
//! operation; and a value whose JSON type the tool's input schema does not
//! declare is refused, so an upstream that reads `"01"`, `" 1"` and `"+1"`
//! as the integer 1 cannot take one order under many keys ([`crate::schema`]
//! reads the types through `$ref`, `allOf`, `enum` and the like). See
//! `docs/decisions.md`, "One key for one key_from value".

use handover_router::config::McpTool;
use rmcp::model::CallToolRequestParams;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::guard::IDEMPOTENCY_KEY;
use crate::schema;

/// The key of the operation a call belongs to, or why the call is refused.
/// `schema` is the tool's `inputSchema` (the guard refuses a `key_from`
/// call whose schema it could not read before it gets here; `None` checks
/// no type).
pub(crate) fn operation_key(
    tool: &McpTool,
    params: &CallToolRequestParams,
    arguments: &Map<String, Value>,
    schema: Option<&Value>,
) -> Result<String, String> {
    if tool.key_from.is_empty() {
        let from_meta = params
            .meta
            .as_ref()
            .and_then(|m| serde_json::to_value(m).ok())
            .and_then(|m| m.get(IDEMPOTENCY_KEY).cloned());
        return match from_meta {
            Some(Value::String(key)) => Ok(key),
            Some(_) => Err(format!("_meta.{IDEMPOTENCY_KEY} must be a string")),
            None => Err(format!(
                "{:?} performs a business action: send _meta.{IDEMPOTENCY_KEY} (the same on every retry of this action)",
                tool.tool
            )),
        };
    }
    // The configured identity wins over a client's key: a framework that
    // stamps each attempt with a fresh `_meta.idempotencyKey` must not turn
    // one order into two shipments.
    let parts = tool
        .key_from
        .iter()
        .map(|field| key_part(field, arguments.get(field), schema))
        .collect::<Result<Vec<_>, _>>()?;
    let readable = format!("{}:{}", tool.tool, parts.join("/"));
    if readable.len() <= 255 && readable.bytes().all(|b| b.is_ascii_graphic()) {
        return Ok(readable);
    }
    // Values with spaces or non-ASCII text (a free-text reason) or too long
    // for a key: the same values always give the same digest.
    let digest = Sha256::digest(Value::from(parts).to_string().as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{}:sha256:{hex}", tool.tool))
}

/// One `key_from` value's text in the key.
fn key_part(field: &str, value: Option<&Value>, schema: Option<&Value>) -> Result<String, String> {
    let value = match value {
        Some(Value::String(s)) if s.is_empty() => {
            return Err(format!(
                "argument {field:?} must not be empty: it identifies this action"
            ));
        }
        Some(v @ (Value::String(_) | Value::Number(_) | Value::Bool(_))) => v,
        Some(_) => {
            return Err(format!(
                "argument {field:?} must be a string, number or boolean: it identifies this action"
            ));
        }
        None => {
            return Err(format!(
                "argument {field:?} is required: it identifies this action"
            ));
        }
    };
    let kinds =
        schema.and_then(|root| Some(schema::admitted(root, schema::property(root, field)?)));
    if let Some(kinds) = kinds
        && !schema::fits(value, &kinds)
    {
        let declared: Vec<&str> = kinds.iter().flatten().map(|k| k.name()).collect();
        let declared = match declared.is_empty() {
            true => "no value at all".to_owned(),
            false => declared.join(" or "),
        };
        return Err(format!(
            "argument {field:?} is a JSON {}, but the tool declares it {}: send it as that type (it identifies this action, and the tool may read other spellings of one value, such as \"01\" and \"1\", as the same value)",
            kind(value),
            declared
        ));
    }
    Ok(match value {
        Value::String(s) => s.clone(),
        // Integers written as integers keep the text they always had.
        other => handover_ledger::canonical_text(other),
    })
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "string",
        Value::Number(_) => "number",
        _ => "boolean",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(key_from: &[&str]) -> McpTool {
        McpTool {
            action: "refund".into(),
            server: "billing".into(),
            tool: "refund".into(),
            key_from: key_from.iter().map(|s| (*s).to_owned()).collect(),
            key_argument: None,
            is_error_rejects: false,
            lookup: None,
        }
    }

    fn key_with(
        t: &McpTool,
        args: Value,
        meta: Option<Value>,
        schema: Option<&Value>,
    ) -> Result<String, String> {
        let mut params = CallToolRequestParams::new("refund");
        params.meta = meta.map(|m| serde_json::from_value(m).unwrap());
        let Value::Object(args) = args else { panic!() };
        operation_key(t, &params, &args, schema)
    }

    fn key(t: &McpTool, args: Value, meta: Option<Value>) -> Result<String, String> {
        key_with(t, args, meta, None)
    }

    #[test]
    fn the_key_comes_from_the_key_from_arguments_or_meta_never_from_elsewhere() {
        let t = tool(&["order_id", "n"]);
        let args = json!({"order_id": "A-1", "n": 2, "amount": 5});
        assert_eq!(key(&t, args.clone(), None).unwrap(), "refund:A-1/2");
        // A client's per-attempt key does not split one order in two.
        let meta = Some(json!({"idempotencyKey": "K-701"}));
        assert_eq!(key(&t, args.clone(), meta.clone()).unwrap(), "refund:A-1/2");
        assert_eq!(key(&tool(&[]), args.clone(), meta).unwrap(), "K-701");
        let e = key(&t, json!({"order_id": "A-1"}), None).unwrap_err();
        assert!(e.contains("\"n\" is required"), "{e}");
        let e = key(&t, json!({"order_id": "", "n": 2}), None).unwrap_err();
        assert!(e.contains("\"order_id\" must not be empty"), "{e}");
        let e = key(&tool(&[]), args, None).unwrap_err();
        assert!(e.contains("_meta.idempotencyKey"), "{e}");
    }

    #[test]
    fn free_text_values_give_a_stable_digest_key() {
        let t = tool(&["order_id", "reason"]);
        let damaged = json!({"order_id": "A-1", "reason": "damaged in transit"});
        let k1 = key(&t, damaged.clone(), None).unwrap();
        assert!(k1.starts_with("refund:sha256:") && k1.len() == "refund:sha256:".len() + 64);
        assert_eq!(key(&t, damaged, None).unwrap(), k1);
        let late = json!({"order_id": "A-1", "reason": "arrived late"});
        assert_ne!(key(&t, late, None).unwrap(), k1);
    }

    #[test]
    fn a_number_is_keyed_by_its_canonical_text_and_integers_keep_theirs() {
        let t = tool(&["n"]);
        let of = |text: &str| {
            let args: Value = serde_json::from_str(&format!(r#"{{"n":{text}}}"#)).unwrap();
            key(&t, args, None).unwrap()
        };
        for same in ["1", "1.0", "1e0", "10E-1", "0.1e1"] {
            assert_eq!(of(same), "refund:1", "{same}");
        }
        assert_eq!(of("100"), "refund:100");
        assert_eq!(of("1E2"), "refund:100");
        assert_eq!(of("-0"), "refund:0");
        assert_eq!(of("-0.0"), "refund:0");
        assert_eq!(of("9007199254740991"), "refund:9007199254740991");
        assert_eq!(of("1.5"), "refund:1.5");
        assert_eq!(of("-17"), "refund:-17");
    }

    #[test]
    fn a_value_of_a_type_the_schema_does_not_declare_is_refused() {
        let t = tool(&["order_no"]);
        let schema = json!({"type": "object", "properties": {
            "order_no": {"type": "integer"},
            "ref": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "free": {"$ref": "#/$defs/Free"},
            "no": {"anyOf": [{"$ref": "#/$defs/OrderNo"}, {"type": "null"}]},
        }, "$defs": {"OrderNo": {"type": "integer"}}});
        let with = |args: Value| key_with(&t, args, None, Some(&schema));
        assert_eq!(with(json!({"order_no": 1})).unwrap(), "refund:1");
        assert_eq!(with(json!({"order_no": 1.0})).unwrap(), "refund:1");
        for spelling in ["1", "01", " 1", "+1", "1.0"] {
            let e = with(json!({ "order_no": spelling })).unwrap_err();
            assert!(
                e.contains("\"order_no\" is a JSON string, but the tool declares it integer"),
                "{e}"
            );
        }
        let e = with(json!({"order_no": 1.5})).unwrap_err();
        assert!(e.contains("JSON number"), "{e}");
        let e = with(json!({"order_no": true})).unwrap_err();
        assert!(e.contains("JSON boolean"), "{e}");
        // anyOf: each alternative's type; a $ref is followed; an unknown
        // field or a $ref to nowhere says nothing: unchecked.
        let t = tool(&["ref"]);
        assert!(key_with(&t, json!({"ref": "R-1"}), None, Some(&schema)).is_ok());
        assert!(key_with(&t, json!({"ref": 7}), None, Some(&schema)).is_err());
        let t = tool(&["no"]);
        let e = key_with(&t, json!({"no": "01"}), None, Some(&schema)).unwrap_err();
        assert!(e.contains("declares it null or integer"), "{e}");
        for field in ["free", "other"] {
            let t = tool(&[field]);
            let args = json!({ field: "7" });
            assert!(key_with(&t, args, None, Some(&schema)).is_ok(), "{field}");
        }
        // Without a schema (the upstream did not list it): not checked.
        assert!(key(&tool(&["order_no"]), json!({"order_no": "01"}), None).is_ok());
    }
}
