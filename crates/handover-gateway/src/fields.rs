//! The top-level fields of a JSON object body, named in `param` whatever
//! is wrong with them: given twice, missing, unknown or of the wrong type.
//! serde_path_to_error names the path of a value that fails, but a field
//! that is missing or unknown fails at the object, and serde_json keeps
//! its name only in the message. serde itself passes the name to the
//! error type (`de::Error::missing_field`, `unknown_field`), so a body
//! that failed its one-pass parse is read again as a map whose error type
//! is [`FieldError`], which keeps those names as fields: one mechanism for
//! every body, with no message read back and no list of required fields
//! per struct (the struct's own derive says what it requires).

use std::fmt;

use serde::de::value::MapDeserializer;
use serde::de::{self, DeserializeOwned, IntoDeserializer, Visitor};
use serde_json::{Map, Value};

use crate::api_error::ApiError;

/// Parses a JSON object body as `T` in one pass; a body that does not
/// parse is read again (see the module docs) so that its error names what
/// is wrong: the JSON, a member given twice, a missing, unknown or
/// wrongly-typed field (`param` the field, or the path inside it), or a
/// body that is no object (`param` `body`).
///
/// Only an object is one: serde's derive would also read a struct from an
/// array, by position (`["ship", {}]` as `action` and `params`), which no
/// client is told it may send and which names no field at all.
pub(crate) fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let object = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    if object
        && let Ok(value) = T::deserialize(&mut *de)
        && de.end().is_ok()
    {
        return Ok(value);
    }
    match read_once_each(bytes)? {
        Value::Object(map) => from_map(map),
        _ => Err(not_an_object()),
    }
}

/// A body that is JSON but no object (400 naming `body`).
pub(crate) fn not_an_object() -> ApiError {
    ApiError::invalid("invalid_field", "body", "the body must be a JSON object")
}

/// `T` from the members of an object body, its error naming the field
/// (or the path inside one) that is wrong.
pub(crate) fn from_map<T: DeserializeOwned>(map: Map<String, Value>) -> Result<T, ApiError> {
    let members = MapDeserializer::new(map.into_iter().map(|(k, v)| (k, Member(v))));
    serde_path_to_error::deserialize(members).map_err(|e| {
        let path = e.path().to_string();
        let (param, message) = match e.into_inner() {
            // Only the object's own fields fail with these (a value's
            // errors are serde_json's, below), so the field is top-level.
            FieldError::Missing(field) => (field.to_owned(), format!("{field}: required")),
            FieldError::Unknown(field, expected) => {
                let message = match expected {
                    [] => format!("{field}: unknown field; this body has no fields"),
                    _ => format!(
                        "{field}: unknown field; expected one of {}",
                        expected.join(", ")
                    ),
                };
                (field, message)
            }
            FieldError::Value(message) if path == "." => {
                return ApiError::invalid(
                    "invalid_field",
                    "body",
                    format!("invalid body: {message}"),
                );
            }
            FieldError::Value(message) => (path.clone(), format!("{path}: {message}")),
        };
        ApiError::invalid("invalid_field", param, message)
    })
}

/// The error type the object's fields are read with: serde's reports of
/// a missing or unknown field keep the field; anything else (a value of
/// the wrong type, from serde_json inside a [`Member`]) is its message.
#[derive(Debug)]
enum FieldError {
    Missing(&'static str),
    Unknown(String, &'static [&'static str]),
    Value(String),
}

impl de::Error for FieldError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self::Value(msg.to_string())
    }

    fn missing_field(field: &'static str) -> Self {
        Self::Missing(field)
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        Self::Unknown(field.to_owned(), expected)
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing(field) => write!(f, "missing field `{field}`"),
            Self::Unknown(field, _) => write!(f, "unknown field `{field}`"),
            Self::Value(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for FieldError {}

/// One member's value, read as serde_json reads a `Value` (every method
/// forwarded, so `Option`, enums and the rest read as they always have),
/// with serde_json's error carried as a [`FieldError`].
struct Member(Value);

impl<'de> IntoDeserializer<'de, FieldError> for Member {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

macro_rules! forward {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, FieldError> {
            de::Deserializer::$method(self.0, $($arg,)* visitor)
                .map_err(|e| FieldError::Value(e.to_string()))
        }
    )*};
}

impl<'de> de::Deserializer<'de> for Member {
    type Error = FieldError;

    forward! {
        deserialize_any();
        deserialize_bool();
        deserialize_i8();
        deserialize_i16();
        deserialize_i32();
        deserialize_i64();
        deserialize_i128();
        deserialize_u8();
        deserialize_u16();
        deserialize_u32();
        deserialize_u64();
        deserialize_u128();
        deserialize_f32();
        deserialize_f64();
        deserialize_char();
        deserialize_str();
        deserialize_string();
        deserialize_bytes();
        deserialize_byte_buf();
        deserialize_option();
        deserialize_unit();
        deserialize_unit_struct(name: &'static str);
        deserialize_newtype_struct(name: &'static str);
        deserialize_seq();
        deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_map();
        deserialize_struct(name: &'static str, fields: &'static [&'static str]);
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
        deserialize_identifier();
        deserialize_ignored_any();
    }
}

/// A body read as JSON on the path that names a bad body's problem,
/// refused if it names a top-level member twice (readers disagree on which
/// copy counts: a proxy that checks the first `model` would not see the
/// one that runs). Shared by every body read here: their one-pass parses
/// refuse such a body without naming the member.
pub(crate) fn read_once_each(bytes: &[u8]) -> Result<Value, ApiError> {
    let body: Value = crate::body::parse(bytes)?;
    match named_twice(bytes) {
        Some(key) => Err(ApiError::invalid(
            "invalid_field",
            key.clone(),
            format!("{key}: given twice; send it once"),
        )),
        None => Ok(body),
    }
}

/// The first top-level member `bytes` names twice, if it is an object
/// that does.
fn named_twice(bytes: &[u8]) -> Option<String> {
    struct Twice;
    impl<'de> serde::de::Visitor<'de> for Twice {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut m: A,
        ) -> Result<Self::Value, A::Error> {
            let mut seen = std::collections::HashSet::new();
            let mut twice = None;
            while let Some(k) = m.next_key::<String>()? {
                m.next_value::<serde::de::IgnoredAny>()?;
                if !seen.insert(k.clone()) && twice.is_none() {
                    twice = Some(k);
                }
            }
            Ok(twice)
        }
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde::Deserializer::deserialize_map(de, Twice)
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Body {
        epoch: u64,
        outcome: Kind,
        note: Option<String>,
        #[serde(default)]
        items: Vec<Item>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Kind {
        Confirmed,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Item {
        id: u32,
    }

    fn refusal(body: &str) -> (Option<String>, String) {
        match parse::<Body>(body.as_bytes()) {
            Ok(b) => (None, format!("parsed {b:?}")),
            Err(e) => (e.param, e.message),
        }
    }

    /// Every problem of a top-level field is named in `param`, whichever
    /// it is; a problem inside one names its path, as before; a body that
    /// parses reads as the one-pass parse reads it.
    #[test]
    fn each_top_level_problem_names_its_field() {
        for (body, want) in [
            (r#"{"outcome": "confirmed"}"#, "epoch"),
            (r#"{"epoch": 1}"#, "outcome"),
            (r#"{"epoch": "1", "outcome": "confirmed"}"#, "epoch"),
            (r#"{"epoch": 1, "outcome": "maybe"}"#, "outcome"),
            (r#"{"epoch": 1, "outcome": "confirmed", "note": 7}"#, "note"),
            (
                r#"{"epoch": 1, "outcome": "confirmed", "extra": 7}"#,
                "extra",
            ),
            (
                r#"{"epoch": 1, "epoch": 2, "outcome": "confirmed"}"#,
                "epoch",
            ),
            (
                r#"{"epoch": 1, "outcome": "confirmed", "items": [{}]}"#,
                "items[0]",
            ),
            (
                r#"{"epoch": 1, "outcome": "confirmed", "items": [{"id": "x"}]}"#,
                "items[0].id",
            ),
            (r#"[1]"#, "body"),
            (r#"[1, "confirmed"]"#, "body"),
            (r#"null"#, "body"),
        ] {
            let (param, message) = refusal(body);
            assert_eq!(param.as_deref(), Some(want), "{body}: {message}");
            assert!(
                message.starts_with(want) || want == "body",
                "{body}: {message}"
            );
        }
        let (param, message) = refusal(r#"{"epoch": 1}"#);
        assert_eq!(
            (param.as_deref(), message.as_str()),
            (Some("outcome"), "outcome: required")
        );
        let (_, message) = refusal(r#"{"epoch": 1, "outcome": "confirmed", "x": 7}"#);
        assert_eq!(
            message,
            "x: unknown field; expected one of epoch, outcome, note, items"
        );
        let (param, message) =
            refusal(r#"{"epoch": 7, "outcome": "confirmed", "note": null, "items": [{"id": 3}]}"#);
        assert_eq!(param, None);
        assert_eq!(
            message,
            r#"parsed Body { epoch: 7, outcome: Confirmed, note: None, items: [Item { id: 3 }] }"#
        );
    }
}
