//! Rewriting a message's `id` (the HTTP door's `ho-http-N` on the way
//! upstream, the client's own on the way back) with every other member
//! kept as it was: its value byte for byte, its place in the object. A
//! member name written with an escape (`"m\u0065thod"`) is a member like
//! any other (a map of borrowed names could not hold it).

use std::fmt;

use serde::Deserialize;
use serde::de::{MapAccess, Visitor};
use serde_json::value::RawValue;

/// An object's members in order, values unparsed.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry::<String, &'de RawValue>()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(V)
    }
}

/// `line` with its `id` replaced; `None` if it is not a JSON object with
/// an `id`.
pub(super) fn with_id(line: &str, id: &RawValue) -> Option<String> {
    let Members(members) = serde_json::from_str(line).ok()?;
    if !members.iter().any(|(name, _)| name == "id") {
        return None;
    }
    let mut out = String::with_capacity(line.len() + id.get().len());
    out.push('{');
    for (i, (name, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(name).ok()?);
        out.push(':');
        out.push_str(if name == "id" { id.get() } else { value.get() });
    }
    out.push('}');
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn the_id_is_replaced_and_every_other_member_kept_in_place() {
        let line = r#"{"jsonrpc":"2.0","m\u0065thod":"tools/list","id":7,"params":{"b":1.0,"a":[1e0]},"x\u0041":1}"#;
        let rewritten = with_id(line, &raw(r#""ho-http-0""#)).unwrap();
        assert_eq!(
            rewritten,
            r#"{"jsonrpc":"2.0","method":"tools/list","id":"ho-http-0","params":{"b":1.0,"a":[1e0]},"xA":1}"#
        );
        let back = with_id(&rewritten, &raw("7")).unwrap();
        assert!(back.contains(r#""id":7,"#), "{back}");
        // An escaped `id` is the id.
        let escaped = with_id(r#"{"\u0069d":1,"method":"ping"}"#, &raw("2")).unwrap();
        assert_eq!(escaped, r#"{"id":2,"method":"ping"}"#);
        assert_eq!(with_id(r#"{"method":"ping"}"#, &raw("2")), None);
        assert_eq!(with_id("[1]", &raw("2")), None);
    }
}
