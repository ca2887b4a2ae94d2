//! [`Fields`]: the members of a JSON object that Handover passes on
//! without reading them, each kept as the JSON text it came as.
//!
//! Why not `serde_json::Map<String, Value>`: a provider's answer carries a
//! dozen such members (`id`, `system_fingerprint`, `logprobs`, the usage
//! details, ...), and building each as a `Value` (an `IndexMap` per object,
//! hashed per key, an allocation per string) only to write it out again
//! cost more than everything else in decoding the answer: about a tenth of
//! a gateway request's instructions. Kept as text, a member is read once
//! (validated, not built), written back as it came (numbers keep their
//! exact spelling) and parsed only where someone asks for its value.

use serde_json::{Map, Value, value::RawValue};

/// JSON object members as the provider sent them, in its order; each value
/// is its JSON text. A key given twice keeps its last value, in the first
/// one's place.
#[derive(Clone, Default)]
pub struct Fields(Vec<(String, Box<RawValue>)>);

impl Fields {
    /// No members.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many members.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The JSON text of `key`'s value.
    pub fn get(&self, key: &str) -> Option<&RawValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| &**v)
    }

    /// Whether `key` is a member.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// `key`'s value, parsed.
    pub fn value(&self, key: &str) -> Option<Value> {
        serde_json::from_str(self.get(key)?.get()).ok()
    }

    /// Sets `key` to `value` (in place of an earlier value of `key`).
    pub fn insert(&mut self, key: impl Into<String>, value: &Value) {
        // Serializing a `Value` cannot fail: its keys are strings and its
        // numbers finite.
        if let Ok(raw) = serde_json::value::to_raw_value(value) {
            self.insert_raw(key.into(), raw);
        }
    }

    /// Removes `key`, returning its JSON text.
    pub fn remove(&mut self, key: &str) -> Option<Box<RawValue>> {
        let at = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(at).1)
    }

    /// The members in order: key and JSON text.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &RawValue)> {
        self.0.iter().map(|(k, v)| (k.as_str(), &**v))
    }

    /// The members as `Value`s.
    pub fn to_map(&self) -> Map<String, Value> {
        self.iter()
            .filter_map(|(k, v)| Some((k.to_owned(), serde_json::from_str(v.get()).ok()?)))
            .collect()
    }

    /// Sets `key` to a value that is JSON text already (in place of an
    /// earlier value of `key`).
    pub fn insert_raw(&mut self, key: impl Into<String>, value: Box<RawValue>) {
        let key = key.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => *v = value,
            None => self.0.push((key, value)),
        }
    }

    /// Sets `key` to `text`, which must be JSON (a member is left out if it
    /// is not).
    pub(crate) fn push_text(&mut self, key: &str, text: &str) {
        if let Ok(raw) = RawValue::from_string(text.to_owned()) {
            self.insert_raw(key, raw);
        }
    }
}

impl From<Map<String, Value>> for Fields {
    fn from(map: Map<String, Value>) -> Self {
        let mut f = Fields(Vec::with_capacity(map.len()));
        for (k, v) in map {
            f.insert(k, &v);
        }
        f
    }
}

impl PartialEq for Fields {
    /// The same members in the same order with the same JSON text.
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self
                .iter()
                .zip(other.iter())
                .all(|((ka, va), (kb, vb))| ka == kb && va.get() == vb.get())
    }
}

impl Eq for Fields {}

/// As the JSON object of the members, each value written as it came.
impl serde::Serialize for Fields {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl std::fmt::Debug for Fields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.iter().map(|(k, v)| (k, v.get())))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Fields;

    #[test]
    fn a_member_keeps_its_text_and_a_repeated_key_its_first_place() {
        let mut f = Fields::new();
        f.push_text("b", "1.50");
        f.push_text("a", r#"{"z":1,"y":2}"#);
        f.push_text("b", "2");
        assert_eq!(f.len(), 2);
        assert_eq!(f.get("b").map(|v| v.get()), Some("2"));
        assert_eq!(f.get("a").map(|v| v.get()), Some(r#"{"z":1,"y":2}"#));
        let keys: Vec<&str> = f.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["b", "a"]);
        assert_eq!(f.value("a"), Some(json!({"z": 1, "y": 2})));
        assert!(f.remove("b").is_some());
        assert!(!f.contains_key("b"));
    }
}
