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

/// `keep_extra!(Struct { field: Type, field | "alias": Type, ... })`: the
/// struct must also have `extra: Map<String, Value>`, and every `Type`
/// must be `Default`.
macro_rules! keep_extra {
    ($name:ident { $($field:ident $(| $alias:literal)* : $ty:ty),* $(,)? }) => {
        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct Fields;
                impl<'de> serde::de::Visitor<'de> for Fields {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("struct ", stringify!($name)))
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(
                        self,
                        mut map: A,
                    ) -> Result<$name, A::Error> {
                        $(let mut $field: Option<$ty> = None;)*
                        let mut extra = serde_json::Map::new();
                        while let Some(key) = map.next_key::<String>()? {
                            match key.as_str() {
                                $(stringify!($field) $(| $alias)* => {
                                    $field = map.next_value::<Option<$ty>>()?;
                                })*
                                _ => {
                                    let v = map.next_value::<serde_json::Value>()?;
                                    extra.insert(key, v);
                                }
                            }
                        }
                        Ok($name {
                            $($field: $field.unwrap_or_default(),)*
                            extra,
                        })
                    }
                }
                d.deserialize_map(Fields)
            }
        }
    };
}

pub(crate) use keep_extra;

#[cfg(test)]
mod tests {
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
}
