//! Integer request fields given as JSON floats (`"n": 1.0`,
//! `"max_output_tokens": 64.0`): a float with no fraction is that integer,
//! as OpenAI reads it and as `ChatRequest` reads its own integer fields
//! (`max_tokens`, `max_completion_tokens`, `seed`; this is the same rule,
//! kept here because that one is private to `handover-providers`).

use serde::Deserialize;
use serde::de::{Deserializer, Error, Unexpected};
use serde_json::Number;

/// The integer `n` is, if it is a whole number: an integer, or a float
/// with no fraction below 2^64 in magnitude (every such float converts
/// exactly).
pub(super) fn whole(n: &Number) -> Option<i128> {
    if let Some(u) = n.as_u64() {
        return Some(u.into());
    }
    if let Some(i) = n.as_i64() {
        return Some(i.into());
    }
    let f = n.as_f64()?;
    (f.fract() == 0.0 && f.abs() < 18_446_744_073_709_551_616.0).then_some(f as i128)
}

/// `deserialize_with` for an optional integer field of type `T`: absent
/// or `null` is `None`, a whole number that fits `T` is that number,
/// anything else is an error (named by its path, as every field's).
pub(super) fn optional<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
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
