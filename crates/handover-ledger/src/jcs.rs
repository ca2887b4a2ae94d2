//! RFC 8785 (JSON Canonicalization Scheme) text of a `serde_json::Value`,
//! written in one pass into one buffer.
//!
//! Why our own: the canonical text is on the write path of every operation
//! (the fingerprint and the validation of a request, and every record the
//! SQL backends store), and the general serde-based canonicalizer we used
//! allocates per token and re-parses every object key; this writer knows
//! it is given a `Value` and does neither. The output is the same byte for
//! byte (a test compares the two on generated documents):
//!
//! * numbers are written as IEEE-754 doubles in ECMAScript's shortest form
//!   (RFC 8785 §3.2.2.3) — integers beyond ±(2^53−1) are refused before
//!   this by [`crate::ijson`];
//! * strings escape `"`, `\` and the C0 controls (`\b \f \n \r \t`, else
//!   `\u00xx` in lower case) and nothing else (§3.2.2.2), which is what
//!   `serde_json` writes;
//! * object members are sorted by their keys' UTF-16 code units (§3.2.3),
//!   not by the UTF-8 bytes a `Map` iterates in.

use serde_json::{Map, Number, Value};

/// The canonical text of `v` (RFC 8785): what the ledger stores and
/// fingerprints. Re-exported as `canonical_text`: a door that derives text
/// from a value (the MCP proxy's `key_from` keys) writes it as the ledger
/// does, so `1`, `1.0` and `1e0` read alike.
pub fn to_string(v: &Value) -> String {
    let mut out = Vec::with_capacity(128);
    write(&mut out, v);
    // Only `serde_json`'s string writer, ASCII and numbers' ASCII go in.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn write(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => number(out, n),
        Value::String(s) => serde_text(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => object(out, map),
    }
}

/// The largest integer a double holds exactly, and so the largest an
/// integer's decimal digits and ECMAScript's rendering agree on.
const EXACT: u64 = (1 << 53) - 1;

fn number(out: &mut Vec<u8>, n: &Number) {
    let exact = match (n.as_u64(), n.as_i64()) {
        (Some(u), _) => u <= EXACT,
        (None, Some(i)) => i.unsigned_abs() <= EXACT,
        (None, None) => false,
    };
    if exact {
        // Integers: their digits, as `serde_json` writes them.
        serde_text(out, n);
        return;
    }
    // Any other number is the double it denotes (finite: a `Value` holds
    // no NaN or infinity), in ECMAScript's `Number.prototype.toString`.
    let f = n.as_f64().unwrap_or_default();
    out.extend_from_slice(ryu_js::Buffer::new().format_finite(f).as_bytes());
}

/// `serde_json`'s own writer for a string or an integer: the escapes RFC
/// 8785 asks for and nothing else. Writing into a `Vec` cannot fail.
fn serde_text<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    let _infallible = serde_json::to_writer(&mut *out, v);
}

fn object(out: &mut Vec<u8>, map: &Map<String, Value>) {
    let utf16 = |a: &str, b: &str| a.encode_utf16().cmp(b.encode_utf16());
    out.push(b'{');
    // A map iterates in UTF-8 byte order, which is UTF-16 order unless a
    // key holds characters above U+FFFF next to ones at U+E000..U+FFFF:
    // sort only then.
    let sorted = map
        .keys()
        .zip(map.keys().skip(1))
        .all(|(a, b)| utf16(a, b).is_le());
    if sorted {
        members(out, map.iter());
    } else {
        let mut entries: Vec<(&String, &Value)> = map.iter().collect();
        entries.sort_by(|a, b| utf16(a.0, b.0));
        members(out, entries.into_iter());
    }
    out.push(b'}');
}

fn members<'a>(out: &mut Vec<u8>, entries: impl Iterator<Item = (&'a String, &'a Value)>) {
    for (i, (k, v)) in entries.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_text(out, k);
        out.push(b':');
        write(out, v);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::to_string;

    fn reference(v: &Value) -> String {
        serde_json_canonicalizer::to_string(v).expect("the reference canonicalizer writes it")
    }

    #[test]
    fn rfc_8785_examples_come_out_as_the_rfc_writes_them() {
        // RFC 8785 §3.2.2.3's number samples and §3.2.3's sorting sample.
        let numbers: Value = serde_json::from_str(
            "[333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001]",
        )
        .unwrap();
        assert_eq!(
            to_string(&numbers),
            "[333333333.3333333,1e+30,4.5,0.002,1e-27]"
        );
        let keys: Value = serde_json::from_str(
            r#"{"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control", "\u00f6": "Latin Small Letter O With Diaeresis"}"#,
        )
        .unwrap();
        assert_eq!(
            to_string(&keys),
            "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\
             \"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\
             \"\u{1f600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}"
        );
        assert_eq!(to_string(&keys), reference(&keys));
    }

    #[test]
    fn edge_numbers_and_escapes_match_the_reference() {
        for v in [
            json!(0),
            json!(-0.0),
            json!(9007199254740991_u64),
            json!(-9007199254740991_i64),
            json!(9007199254740993_u64),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(1e21),
            json!(1e20),
            json!(123456789012345680000.0),
            json!(1e-6),
            json!(1e-7),
            json!(5e-324),
            json!(f64::MAX),
            json!(-1.5),
            json!("\u{0}\u{1f}\u{7f}\"\\/\u{8}\u{c}\n\r\t é\u{2028}😀"),
            json!({"": [], "a": {}, "b": [null, true, false]}),
        ] {
            assert_eq!(to_string(&v), reference(&v), "{v}");
        }
    }

    fn key() -> impl Strategy<Value = String> {
        // Mostly short ASCII, with the characters whose UTF-8 and UTF-16
        // orders differ (U+E000..U+FFFF against those above U+FFFF).
        prop_oneof![
            "[a-c]{0,3}",
            proptest::collection::vec(
                prop_oneof![
                    Just('a'),
                    Just('\u{7f}'),
                    Just('\u{e000}'),
                    Just('\u{ffff}'),
                    Just('\u{10000}'),
                    Just('😀'),
                    Just('\n'),
                ],
                0..4
            )
            .prop_map(|cs| cs.into_iter().collect()),
        ]
    }

    fn document() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            any::<u64>().prop_map(|u| json!(u)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            (-1_000_000i64..1_000_000, 0u32..30)
                .prop_map(|(m, e)| json!(m as f64 / 10f64.powi(e as i32))),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec((key(), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_document_matches_the_reference_canonicalizer(v in document()) {
            let text = to_string(&v);
            prop_assert_eq!(&text, &reference(&v));
            // What the ledger stores and reads back writes the same text
            // again (numbers are re-parsed exactly: `float_roundtrip`).
            let again: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(to_string(&again), text);
        }
    }
}
