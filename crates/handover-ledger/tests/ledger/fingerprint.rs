//! Properties of identity under I-JSON (RFC 7493): two parameter documents
//! get the same fingerprint exactly when they are equal as I-JSON values
//! (member order and number spelling do not matter; every value does), and
//! numbers that cannot be recorded exactly are refused with their path.

use handover_ledger::{
    Fingerprint, Limits, MAX_EXACT_INTEGER, OperationRequest, validate_json_text,
};
use proptest::prelude::*;
use serde_json::{Map, Value};

fn fingerprint(v: &Value) -> Result<Fingerprint, String> {
    OperationRequest::new("t", "k", "act", v, &Limits::default())
        .map(|r| r.fingerprint())
        .map_err(|e| e.to_string())
}

/// Equality as I-JSON, written independently of the ledger: numbers are
/// doubles (`1` = `1.0`, `-0` = `0`), objects are sets of members.
fn ijson_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| ijson_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| ijson_eq(v, w)))
        }
        _ => a == b,
    }
}

fn exact_integer() -> impl Strategy<Value = i64> {
    let max = i64::try_from(MAX_EXACT_INTEGER).unwrap();
    prop_oneof![-3i64..=3, -max..=max, Just(max), Just(-max)]
}

/// Finite doubles I-JSON can record (integral ones within ±(2^53−1), or
/// at least 1e21 where canonical text uses an exponent).
fn double() -> impl Strategy<Value = f64> {
    prop_oneof![
        (-1000i32..1000).prop_map(|n| f64::from(n) / 8.0),
        any::<f64>().prop_filter("recordable", |x| {
            x.is_finite()
                && (x.fract() != 0.0 || x.abs() <= 9_007_199_254_740_991.0 || x.abs() >= 1e21)
        }),
        Just(0.1),
        Just(-0.0),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        exact_integer().prop_map(Value::from),
        double().prop_map(Value::from),
        "[a-c]{0,3}".prop_map(Value::from),
        Just(Value::from("é\u{1F69A}\"\\")),
    ]
}

fn document() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-d]{1,2}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// The same value as another program might write it: members in another
/// order, integers as `n.0` or `ne0`, doubles in exponent notation.
fn respell(v: &Value, salt: u64) -> String {
    match v {
        Value::Number(n) => match (n.as_i64(), salt % 3) {
            (Some(i), 1) => format!("{i}.0"),
            (Some(i), 2) => format!("{i}e0"),
            (Some(i), _) => i.to_string(),
            (None, 1) => format!("{:e}", n.as_f64().unwrap()),
            (None, _) => n.to_string(),
        },
        Value::Array(items) => {
            let parts: Vec<String> = items
                .iter()
                .enumerate()
                .map(|(i, x)| respell(x, salt.wrapping_mul(31).wrapping_add(i as u64)))
                .collect();
            format!("[{}]", parts.join(" , "))
        }
        Value::Object(map) => {
            let mut parts: Vec<String> = map
                .iter()
                .enumerate()
                .map(|(i, (k, x))| {
                    let k = serde_json::to_string(k).unwrap();
                    format!(
                        "{k}: {}",
                        respell(x, salt.wrapping_mul(17).wrapping_add(i as u64))
                    )
                })
                .collect();
            if salt.is_multiple_of(2) {
                parts.reverse();
            }
            format!("{{{}}}", parts.join(", "))
        }
        other => other.to_string(),
    }
}

/// One leaf of `v` changed (if it has one that can change).
fn changed(v: &Value, pick: usize) -> Value {
    match v {
        Value::Array(items) if !items.is_empty() => {
            let mut items = items.clone();
            let i = pick % items.len();
            items[i] = changed(&items[i], pick / 7);
            Value::Array(items)
        }
        Value::Object(map) if !map.is_empty() => {
            let mut map = map.clone();
            let key = map.keys().nth(pick % map.len()).cloned().unwrap();
            let new = changed(&map[&key], pick / 7);
            map.insert(key, new);
            Value::Object(map)
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap();
            Value::from(if x.abs() < 1e15 { x + 1.0 } else { x / 2.0 })
        }
        Value::String(s) => Value::from(format!("{s}x")),
        Value::Bool(b) => Value::Bool(!b),
        Value::Null => Value::from(0),
        other => Value::Array(vec![other.clone()]),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Respelled (member order, number notation): the same fingerprint.
    #[test]
    fn the_same_value_written_differently_has_one_fingerprint(v in document(), salt in any::<u64>()) {
        let text = respell(&v, salt);
        prop_assert!(validate_json_text(&text).is_ok(), "{text}");
        let w: Value = serde_json::from_str(&text).unwrap();
        prop_assert!(ijson_eq(&v, &w));
        prop_assert_eq!(fingerprint(&v).unwrap(), fingerprint(&w).unwrap());
    }

    /// fingerprint(a) == fingerprint(b) iff a and b are equal as I-JSON.
    #[test]
    fn fingerprints_are_equal_iff_values_are(
        a in document(),
        other in document(),
        pick in any::<usize>(),
        how in 0u8..3,
    ) {
        let b = match how {
            0 => changed(&a, pick),
            1 => serde_json::from_str(&respell(&a, pick as u64)).unwrap(),
            _ => other,
        };
        prop_assert_eq!(fingerprint(&a).unwrap() == fingerprint(&b).unwrap(), ijson_eq(&a, &b), "{} vs {}", a, b);
    }

    /// Integers beyond ±(2^53−1) are refused, with their path, as values and as text.
    #[test]
    fn integers_beyond_two_to_the_53_are_refused(n in (MAX_EXACT_INTEGER + 1)..=u64::MAX, neg in any::<bool>()) {
        let (v, text) = if neg && n <= i64::MAX as u64 {
            let i = -(n as i64);
            (Value::from(i), i.to_string())
        } else {
            (Value::from(n), n.to_string())
        };
        let doc = serde_json::json!({"items": [{"batch": v}]});
        let err = OperationRequest::new("t", "k", "act", &doc, &Limits::default()).unwrap_err();
        prop_assert_eq!(err.field(), "params.items[0].batch");
        let text = format!(r#"{{"params": {{"items": [{{"batch": {text}}}]}}}}"#);
        let err = validate_json_text(&text).unwrap_err();
        prop_assert_eq!(err.field(), "params.items[0].batch");
    }

    /// A number text is accepted exactly when it reads back as itself.
    #[test]
    fn number_text_is_accepted_iff_it_is_recorded_exactly(
        digits in "[1-9][0-9]{0,24}",
        point in 0usize..26,
        exp in -30i32..30,
    ) {
        let point = point.min(digits.len());
        let text = format!("{}.{}e{exp}", &digits[..point.max(1)], &digits[point.max(1)..]);
        let text = text.replace(".e", "e");
        let x: f64 = text.parse().unwrap();
        // Either shortest spelling of a double halfway between two (Rust's
        // formatter writes the upper one, serde_json the even one).
        let exact = decimal_eq(&text, &format!("{x:e}"))
            || decimal_eq(&text, &serde_json::to_string(&x).unwrap());
        let integral_literal = x.fract() == 0.0 && x.abs() < 1e21;
        let recordable = exact && !(integral_literal && x.abs() > 9_007_199_254_740_991.0);
        let doc = format!(r#"{{"n": {text}}}"#);
        prop_assert_eq!(validate_json_text(&doc).is_ok(), recordable, "{}", text);
    }
}

/// Exact decimal equality of two number texts, by big-decimal arithmetic
/// on digit strings (independent of the ledger's own comparison).
fn decimal_eq(a: &str, b: &str) -> bool {
    fn norm(t: &str) -> (bool, String, i64) {
        let (neg, t) = t.strip_prefix('-').map_or((false, t), |r| (true, r));
        let (m, e) = t.split_once(['e', 'E']).unwrap_or((t, "0"));
        let e: i64 = e.parse().unwrap();
        let (i, f) = m.split_once('.').unwrap_or((m, ""));
        // value = int(i f) * 10^(e - len(f))
        let all = format!("{i}{f}");
        let trimmed = all.trim_start_matches('0');
        if trimmed.is_empty() {
            return (false, String::new(), 0);
        }
        let zeros = trimmed.len() - trimmed.trim_end_matches('0').len();
        let exp = e - f.len() as i64 + zeros as i64;
        (neg, trimmed.trim_end_matches('0').to_owned(), exp)
    }
    norm(a) == norm(b)
}

/// A double exactly halfway between two shortest spellings has two of
/// them: V8, Python and serde_json write the even one (as ECMAScript asks,
/// and as the ledger records it), Rust's own formatter the upper one. Both
/// are the number exactly: accepted, with one fingerprint. Python's
/// `json.dumps(2.8890457153320312)` used to be refused as "would become
/// 2.8890457153320313".
#[test]
fn a_halfway_double_is_accepted_in_either_shortest_spelling() {
    for even in [
        "1892525631526180.2",
        "2.8890457153320312",
        "19.369705200195312",
        "0.019701004028320312",
        "2.9802322387695312e-8",
    ] {
        let x: f64 = even.parse().unwrap();
        let upper = format!("{x:e}");
        assert!(!decimal_eq(even, &upper), "{even} is not a halfway case");
        assert_eq!(serde_json::to_string(&x).unwrap(), even);
        let mut prints = Vec::new();
        for text in [even, upper.as_str()] {
            let doc = format!(r#"{{"n": {text}}}"#);
            validate_json_text(&doc).unwrap_or_else(|e| panic!("{text}: {e}"));
            let v: Value = serde_json::from_str(&doc).unwrap();
            prints.push(fingerprint(&v).unwrap());
        }
        assert_eq!(prints[0], prints[1], "{even}");
    }
    // Any other spelling is still refused, the exact expansion included
    // (it is not what the ledger records).
    for other in ["2.88904571533203125", "2.8890457153320311"] {
        assert!(
            validate_json_text(&format!("[{other}]")).is_err(),
            "{other}"
        );
    }
}

#[test]
fn the_issue_s_three_numbers() {
    // 2^53 + 1 was stored (and sent) as 2^53.
    let e = fingerprint(&serde_json::json!({"qty": 9_007_199_254_740_993_u64})).unwrap_err();
    assert!(e.contains("params.qty"), "{e}");
    // Two large integers shared a fingerprint.
    assert!(fingerprint(&serde_json::json!(9_007_199_254_740_992_u64)).is_err());
    // 12345678901234567891 was replayed rounded.
    let e = validate_json_text(r#"{"result": {"id": 12345678901234567891}}"#).unwrap_err();
    assert_eq!(e.field(), "result.id");
    // Beyond u64: serde_json would parse it as a rounded double.
    let e = validate_json_text(r#"{"params": [123456789012345678901234]}"#).unwrap_err();
    assert_eq!(e.field(), "params[0]");
    let e = validate_json_text(r#"{"x": {"odd key": 3.14159265358979323846}}"#).unwrap_err();
    assert_eq!(e.field(), r#"x["odd key"]"#);
    for ok in [
        "0.1",
        "-0",
        "1.5e300",
        "1e21",
        "9007199254740991",
        "-9007199254740991",
        "1E2",
    ] {
        validate_json_text(&format!("[{ok}]")).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
}
