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
//!
//! A key is found by a linear search while there are few members (an
//! answer has a dozen), and through a hash index once there are more than
//! [`INDEXED_FROM`]: a server that sends an object with a hundred thousand
//! members (within the body cap) must not make decoding it quadratic.

use std::collections::HashMap;

use serde_json::{Map, Value, value::RawValue};

/// From this many members on, keys are found through a hash index.
const INDEXED_FROM: usize = 32;

/// JSON object members as the provider sent them, in its order; each value
/// is its JSON text. A key given twice keeps its last value, in the first
/// one's place.
#[derive(Clone, Default)]
pub struct Fields {
    members: Vec<(String, Box<RawValue>)>,
    /// Each key's place in `members`, kept once there are more than
    /// [`INDEXED_FROM`] (SipHash: keys come from the other side).
    index: Option<HashMap<String, usize>>,
}

impl Fields {
    /// No members.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Where `key` is in `members`.
    fn position(&self, key: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(key).copied(),
            None => self.members.iter().position(|(k, _)| k == key),
        }
    }

    /// The index of `members`, if there are enough of them to want one.
    fn reindex(&mut self) {
        self.index = (self.members.len() > INDEXED_FROM).then(|| {
            let keys = self.members.iter().map(|(k, _)| k.clone());
            keys.zip(0..).collect()
        });
    }

    /// The JSON text of `key`'s value.
    pub fn get(&self, key: &str) -> Option<&RawValue> {
        self.position(key).map(|at| &*self.members[at].1)
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
        let at = self.position(key)?;
        let (_, value) = self.members.remove(at);
        if self.index.is_some() {
            self.reindex();
        }
        Some(value)
    }

    /// The members in order: key and JSON text.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &RawValue)> {
        self.members.iter().map(|(k, v)| (k.as_str(), &**v))
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
        if let Some(at) = self.position(&key) {
            self.members[at].1 = value;
            return;
        }
        match &mut self.index {
            Some(index) => {
                index.insert(key.clone(), self.members.len());
                self.members.push((key, value));
            }
            None => {
                self.members.push((key, value));
                if self.members.len() > INDEXED_FROM {
                    self.reindex();
                }
            }
        }
    }
}

impl From<Map<String, Value>> for Fields {
    fn from(map: Map<String, Value>) -> Self {
        let mut f = Fields {
            members: Vec::with_capacity(map.len()),
            index: None,
        };
        for (k, v) in map {
            f.insert(k, &v);
        }
        f
    }
}

impl PartialEq for Fields {
    /// The same members in the same order with the same JSON text.
    fn eq(&self, other: &Self) -> bool {
        self.members.len() == other.members.len()
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

    use serde_json::value::RawValue;

    use super::Fields;

    impl Fields {
        fn push_text(&mut self, key: &str, text: &str) {
            self.insert_raw(key, RawValue::from_string(text.to_owned()).unwrap());
        }
    }

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

    #[test]
    fn many_members_are_found_through_the_index_and_keep_their_order() {
        let mut f = Fields::new();
        let n = 200_000;
        for i in 0..n {
            f.push_text(&format!("k{i}"), &i.to_string());
        }
        // Each repeated once: the repeat replaces in place.
        for i in (0..n).step_by(2) {
            f.push_text(&format!("k{i}"), "\"again\"");
        }
        assert_eq!(f.len(), n);
        assert_eq!(f.get("k0").map(|v| v.get()), Some("\"again\""));
        assert_eq!(f.get("k1").map(|v| v.get()), Some("1"));
        assert!(f.remove("k1").is_some());
        assert_eq!(f.get("k3").map(|v| v.get()), Some("3"));
        assert_eq!(f.iter().nth(1).map(|(k, _)| k), Some("k2"));
        assert!(f.index.is_some());
        // Back to a few: the linear search again, same answers.
        let mut few = Fields::new();
        for i in 0..40 {
            few.push_text(&format!("k{i}"), "0");
        }
        for i in 0..10 {
            few.remove(&format!("k{i}"));
        }
        assert!(few.index.is_none());
        assert_eq!(few.len(), 30);
        assert!(few.contains_key("k39") && !few.contains_key("k9"));
    }
}
