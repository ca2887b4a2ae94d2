//! Integer parameters given as JSON floats. OpenAI's server reads
//! `"max_tokens": 64.0` as 64, and clients that compute in floats (Python
//! code passing `1.0`, JavaScript) send such values, so a float with no
//! fraction is read as that integer (and sent on as one); a fraction, a
//! value out of range or anything but a number is refused as before,
//! naming the field.

use serde::Deserialize;
use serde::de::{Deserializer, Error, Unexpected};
use serde_json::Number;

/// The integer `n` is, if it is a whole number: an integer, or a float
/// with no fraction below 2^64 in magnitude (every such float converts
/// exactly). Public for servers that read OpenAI request bodies (the
/// gateway reads `n` and the Responses API's integer fields by this rule
/// too, so there is one).
pub fn whole(n: &Number) -> Option<i128> {
    if let Some(u) = n.as_u64() {
        return Some(u.into());
    }
    if let Some(i) = n.as_i64() {
        return Some(i.into());
    }
    let f = n.as_f64()?;
    (f.fract() == 0.0 && f.abs() < 18_446_744_073_709_551_616.0).then_some(f as i128)
}

/// `deserialize_with` for an optional integer parameter of type `T`:
/// absent or `null` is `None`, a whole number ([`whole`]) that fits `T` is
/// that number, anything else is an error.
pub fn optional<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i128>,
{
    let Some(n) = Option::<Number>::deserialize(d)? else {
        return Ok(None);
    };
    match whole(&n).and_then(|w| T::try_from(w).ok()) {
        Some(v) => Ok(Some(v)),
        None => {
            let expected = format!("a whole number that fits {}", std::any::type_name::<T>());
            let unexpected = match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => Unexpected::Unsigned(u),
                (None, Some(i)) => Unexpected::Signed(i),
                (None, None) => Unexpected::Float(n.as_f64().unwrap_or_default()),
            };
            Err(D::Error::invalid_value(unexpected, &expected.as_str()))
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::ChatRequest;
    use serde_json::{Value, json};

    fn parse(field: &str, v: Value) -> Result<Value, String> {
        let body = json!({"messages": [{"role": "user", "content": "hi"}], field: v});
        serde_json::from_value::<ChatRequest>(body)
            .map(|r| serde_json::to_value(&r).unwrap()[field].clone())
            .map_err(|e| e.to_string())
    }

    /// A whole float is that integer, sent back as an integer; what is no
    /// whole number of the field's type is refused as it was.
    #[test]
    fn whole_floats_are_integers() {
        for field in ["max_tokens", "max_completion_tokens", "seed"] {
            for (given, read) in [
                (json!(64.0), json!(64)),
                (json!(64), json!(64)),
                (json!(1e2), json!(100)),
                (json!(0.0), json!(0)),
                (json!(4294967295.0), json!(4294967295_u32)),
            ] {
                let got = parse(field, given.clone()).unwrap();
                assert_eq!(got, read, "{field}: {given}");
                assert!(got.is_u64(), "{field}: {given} sent as {got}");
            }
            for bad in [json!(1.5), json!("64"), json!(true), json!(1e300)] {
                assert!(parse(field, bad.clone()).is_err(), "{field}: {bad}");
            }
        }
        for bad in [
            json!(-1),
            json!(-1.0),
            json!(4294967296.0),
            json!(4294967296_u64),
        ] {
            let err = parse("max_tokens", bad.clone()).unwrap_err();
            assert!(err.contains("a whole number that fits u32"), "{bad}: {err}");
        }
        assert_eq!(parse("seed", json!(-7.0)).unwrap(), json!(-7));
        assert_eq!(parse("max_tokens", Value::Null).unwrap(), Value::Null);
    }
}
