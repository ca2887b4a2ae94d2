//! `Deserialize` for wire structs that read a few fields and keep every
//! other key as it came (`extra`), which a drop-in passes on.
//!
//! Why not `#[serde(flatten)] extra: Map<String, Value>`: serde buffers a
//! struct with a flattened field as a tree of `Content` values and then
//! deserializes that tree again, at every level that flattens. A stream
//! chunk flattens at three levels (chunk, choice, delta), so each one was
//! parsed about four times; decoding chunks cost more than anything else
//! the gateway did with a streamed answer. This reads each key once: a
//! known field straight into its type, any other key into `extra`.
//!
//! Every field is read as an `Option` and defaults when absent or `null`
//! (as `#[serde(default)]` did, and a `null` list reads as empty rather
//! than failing); a value of the wrong type is an error naming what was
//! expected, as before. A key given twice keeps its last value.

use std::borrow::Cow;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value, value::RawValue};

/// A string borrowed from the input when it has no escapes (map keys, a
/// chunk's model): serde's own `Cow<str>` always copies.
pub(crate) struct Text<'de>(pub(crate) Cow<'de, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

/// Where a wire struct keeps the keys it does not read.
pub(crate) trait Extra<'de>: Default {
    /// Reads the value of `key` (the next value of `map`) and keeps it.
    fn keep<A: MapAccess<'de>>(&mut self, key: Text<'de>, map: &mut A) -> Result<(), A::Error>;
}

/// Kept as JSON values (answers: a drop-in passes them on).
impl<'de> Extra<'de> for Map<String, Value> {
    fn keep<A: MapAccess<'de>>(&mut self, key: Text<'de>, map: &mut A) -> Result<(), A::Error> {
        let v = map.next_value::<Value>()?;
        self.insert(key.0.into_owned(), v);
        Ok(())
    }
}

/// Kept as their JSON text (answers: a drop-in passes them on as they
/// came, and a value is validated, not built).
impl<'de> Extra<'de> for crate::fields::Fields {
    fn keep<A: MapAccess<'de>>(&mut self, key: Text<'de>, map: &mut A) -> Result<(), A::Error> {
        let v = map.next_value::<Box<RawValue>>()?;
        self.insert_raw(key.0, v);
        Ok(())
    }
}

/// Kept as the JSON text they came as, borrowed from the input (stream
/// chunks: most of their unread keys repeat the last chunk's or are
/// `null`, and are compared or dropped without being parsed into values).
/// Only for input read with `serde_json::from_str` or `from_slice`.
pub(crate) type RawExtra<'de> = Vec<(Cow<'de, str>, &'de RawValue)>;

impl<'de> Extra<'de> for RawExtra<'de> {
    fn keep<A: MapAccess<'de>>(&mut self, key: Text<'de>, map: &mut A) -> Result<(), A::Error> {
        let v = map.next_value::<&'de RawValue>()?;
        self.push((key.0, v));
        Ok(())
    }
}

/// `keep_extra!(Struct { field: Type, field | "alias": Type, ... })`, or
/// `keep_extra!(Struct<'de> { ... })` for a struct that borrows from the
/// input: the struct must also have an `extra` field of a type that is
/// [`Extra`], and every `Type` must be `Default`.
macro_rules! keep_extra {
    ($name:ident<$lt:lifetime> { $($fields:tt)* }) => {
        $crate::extra::keep_extra!(@impl $name [$name<$lt>] $lt { $($fields)* });
    };
    ($name:ident { $($fields:tt)* }) => {
        $crate::extra::keep_extra!(@impl $name [$name] 'de { $($fields)* });
    };
    (@impl $name:ident [$($ty_head:tt)*] $lt:lifetime {
        $($field:ident $(| $alias:literal)* : $ty:ty),* $(,)?
    }) => {
        impl<$lt> serde::Deserialize<$lt> for $($ty_head)* {
            fn deserialize<D: serde::Deserializer<$lt>>(d: D) -> Result<Self, D::Error> {
                struct Fields<$lt>(std::marker::PhantomData<&$lt ()>);
                impl<$lt> serde::de::Visitor<$lt> for Fields<$lt> {
                    type Value = $($ty_head)*;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("struct ", stringify!($name)))
                    }
                    fn visit_map<A: serde::de::MapAccess<$lt>>(
                        self,
                        mut map: A,
                    ) -> Result<Self::Value, A::Error> {
                        $(let mut $field: Option<$ty> = None;)*
                        let mut extra = Default::default();
                        while let Some(key) = map.next_key::<$crate::extra::Text<$lt>>()? {
                            match key.0.as_ref() {
                                $(stringify!($field) $(| $alias)* => {
                                    $field = map.next_value::<Option<$ty>>()?;
                                })*
                                _ => $crate::extra::Extra::keep(&mut extra, key, &mut map)?,
                            }
                        }
                        Ok($name {
                            $($field: $field.unwrap_or_default(),)*
                            extra,
                        })
                    }
                }
                d.deserialize_map(Fields(std::marker::PhantomData))
            }
        }
    };
}

pub(crate) use keep_extra;

#[cfg(test)]
mod tests {
    use super::Text;
    use serde_json::{Map, Value, json};

    #[derive(Debug)]
    struct Probe {
        name: Option<String>,
        items: Vec<u32>,
        count: u64,
        extra: Map<String, Value>,
    }
    keep_extra!(Probe {
        name | "title": Option<String>,
        items: Vec<u32>,
        count: u64,
    });

    fn read(v: Value) -> Result<Probe, String> {
        serde_json::from_value::<Probe>(v).map_err(|e| e.to_string())
    }

    #[test]
    fn known_fields_are_typed_and_every_other_key_is_kept_as_sent() {
        let p =
            read(json!({"title": "a", "items": [1, 2], "count": 3, "x": {"y": [null]}, "z": 1.5}))
                .unwrap();
        assert_eq!(p.name.as_deref(), Some("a"));
        assert_eq!(p.items, [1, 2]);
        assert_eq!(p.count, 3);
        assert_eq!(
            Value::Object(p.extra),
            json!({"x": {"y": [null]}, "z": 1.5})
        );
    }

    #[test]
    fn absent_or_null_fields_default_and_a_repeated_key_keeps_its_last_value() {
        let p = read(json!({"items": null, "name": null})).unwrap();
        assert_eq!((p.name, p.items, p.count), (None, vec![], 0));
        let p: Probe = serde_json::from_str(r#"{"name":"a","name":"b"}"#).unwrap();
        assert_eq!(p.name.as_deref(), Some("b"));
    }

    #[test]
    fn a_field_of_the_wrong_type_or_a_non_object_is_an_error() {
        let e = read(json!({"items": "no"})).unwrap_err();
        assert!(e.contains("expected a sequence"), "{e}");
        let e = read(json!({"count": -1})).unwrap_err();
        assert!(e.contains("u64"), "{e}");
        let e = read(json!([1])).unwrap_err();
        assert!(e.contains("struct Probe"), "{e}");
    }

    struct Chunkish<'de> {
        id: Option<Text<'de>>,
        extra: super::RawExtra<'de>,
    }
    keep_extra!(Chunkish<'de> {
        id: Option<Text<'de>>,
    });

    #[test]
    fn a_borrowing_struct_keeps_other_keys_as_their_text_and_borrows_plain_strings() {
        let data = r#"{"id": "c-1", "created": 7, "x": {"y": [null]}, "e\u0073c": "a\nb"}"#;
        let c: Chunkish<'_> = serde_json::from_str(data).unwrap();
        let id = c.id.unwrap().0;
        assert!(matches!(id, std::borrow::Cow::Borrowed("c-1")));
        let kept: Vec<(&str, &str)> = c.extra.iter().map(|(k, v)| (k.as_ref(), v.get())).collect();
        assert_eq!(
            kept,
            [
                ("created", "7"),
                ("x", r#"{"y": [null]}"#),
                ("esc", r#""a\nb""#)
            ]
        );
    }
}
