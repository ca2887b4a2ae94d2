//! What a tool's `inputSchema` says about one argument, as far as the
//! proxy needs it: whether the tool declares the argument at all
//! ([`declares`], for a lookup that must read the arguments naming the
//! operation) and which JSON types it admits ([`admitted`], for `key_from`
//! values).
//!
//! Schemas as SDK servers emit them: local `$ref`s (`#/$defs/OrderNo`,
//! pydantic's `RootModel` and `IntEnum`) are followed, to a bounded depth
//! (a cycle ends there); `allOf` intersects its members' types, `anyOf`
//! and `oneOf` unite theirs; `enum` and `const` admit the types of their
//! values; and a schema that states no type otherwise takes it from its
//! type-specific keywords (`minimum`, `maximum`, `exclusiveMinimum`,
//! `exclusiveMaximum`, `multipleOf`: a number; `minLength`, `maxLength`,
//! `pattern`: a string). What stays unread — a remote `$ref`, `not`,
//! `if`/`then`/`else`, `$dynamicRef`, a `$ref` chain past the bound — admits
//! any type. See `docs/decisions.md`, "Key types through `$ref`, `allOf`,
//! `enum`".

use std::collections::BTreeSet;

use serde_json::Value;

/// How deep `$ref`s and combinators are followed.
const MAX_DEPTH: usize = 32;

/// A JSON Schema type (`integer` is a number without a fraction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    Null,
    Boolean,
    Integer,
    Number,
    String,
    Array,
    Object,
}

impl Kind {
    fn named(name: &str) -> Option<Self> {
        Some(match name {
            "null" => Self::Null,
            "boolean" => Self::Boolean,
            "integer" => Self::Integer,
            "number" => Self::Number,
            "string" => Self::String,
            "array" => Self::Array,
            "object" => Self::Object,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Boolean => "boolean",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::String => "string",
            Self::Array => "array",
            Self::Object => "object",
        }
    }

    /// The narrowest type of a value (`1` and `1.0` are integers).
    fn of(value: &Value) -> Self {
        match value {
            Value::Null => Self::Null,
            Value::Bool(_) => Self::Boolean,
            Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => Self::Integer,
            Value::Number(_) => Self::Number,
            Value::String(_) => Self::String,
            Value::Array(_) => Self::Array,
            Value::Object(_) => Self::Object,
        }
    }

    /// What both admit: the same type, or an integer for integer and number.
    fn meet(self, other: Self) -> Option<Self> {
        match (self, other) {
            (a, b) if a == b => Some(a),
            (Self::Integer, Self::Number) | (Self::Number, Self::Integer) => Some(Self::Integer),
            _ => None,
        }
    }
}

/// The types a schema admits; `None`: it says nothing the proxy can read
/// (any type).
pub(crate) type Kinds = Option<BTreeSet<Kind>>;

/// Whether `value` is of a type in `kinds` (`None` admits everything).
pub(crate) fn fits(value: &Value, kinds: &Kinds) -> bool {
    let Some(kinds) = kinds else { return true };
    let own = Kind::of(value);
    kinds
        .iter()
        .any(|k| *k == own || (*k == Kind::Number && own == Kind::Integer))
}

/// The schema of argument `name` in the tool's input schema `root`, if
/// the tool declares it (in `properties`, also through a `$ref` or an
/// `allOf` member of the root).
pub(crate) fn property<'a>(root: &'a Value, name: &str) -> Option<&'a Value> {
    member(root, root, name, 0)
}

fn member<'a>(root: &'a Value, schema: &'a Value, name: &str, depth: usize) -> Option<&'a Value> {
    if depth > MAX_DEPTH {
        return None;
    }
    if let Some(p) = schema.get("properties").and_then(|p| p.get(name)) {
        return Some(p);
    }
    let referenced = reference(root, schema).and_then(|s| member(root, s, name, depth + 1));
    referenced.or_else(|| {
        schema
            .get("allOf")?
            .as_array()?
            .iter()
            .find_map(|s| member(root, s, name, depth + 1))
    })
}

/// Whether the tool declares the argument at `pointer` (a JSON Pointer
/// into `template`, the arguments it is sent): each member on the way is
/// in the `properties` of the schema above it; an array element is read
/// by its array's `items`.
pub(crate) fn declares(root: &Value, template: &Value, pointer: &str) -> bool {
    let mut schema = root;
    let mut at = template;
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        let next = match at {
            Value::Array(a) => token
                .parse::<usize>()
                .ok()
                .and_then(|i| a.get(i))
                .zip(items(root, schema)),
            _ => at.get(&token).zip(member(root, schema, &token, 0)),
        };
        let Some((value, sub)) = next else {
            return false;
        };
        (at, schema) = (value, sub);
    }
    true
}

fn items<'a>(root: &'a Value, schema: &'a Value) -> Option<&'a Value> {
    schema
        .get("items")
        .or_else(|| reference(root, schema).and_then(|s| s.get("items")))
}

/// The types the schema admits (see the module docs for what is read).
pub(crate) fn admitted(root: &Value, schema: &Value) -> Kinds {
    kinds(root, schema, 0)
}

fn kinds(root: &Value, schema: &Value, depth: usize) -> Kinds {
    let o = match schema {
        _ if depth > MAX_DEPTH => return None,
        Value::Bool(false) => return Some(BTreeSet::new()),
        Value::Object(o) => o,
        _ => return None,
    };
    let mut all: Kinds = o.get("type").and_then(type_names);
    if o.contains_key("$ref") {
        let target = reference(root, schema).and_then(|s| kinds(root, s, depth + 1));
        all = intersect(all, target);
    }
    for sub in o
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        all = intersect(all, kinds(root, sub, depth + 1));
    }
    for alternatives in ["anyOf", "oneOf"]
        .iter()
        .filter_map(|k| o.get(*k)?.as_array())
    {
        let union = alternatives
            .iter()
            .map(|s| kinds(root, s, depth + 1))
            .try_fold(BTreeSet::new(), |mut acc, k| {
                acc.extend(k?);
                Some(acc)
            });
        all = intersect(all, union);
    }
    if let Some(values) = o.get("enum").and_then(Value::as_array) {
        all = intersect(all, Some(values.iter().map(Kind::of).collect()));
    }
    if let Some(value) = o.get("const") {
        all = intersect(all, Some(BTreeSet::from([Kind::of(value)])));
    }
    all.or_else(|| implied(o))
}

/// The type a schema without one implies by its keywords.
fn implied(o: &serde_json::Map<String, Value>) -> Kinds {
    const NUMBER: [&str; 5] = [
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
    ];
    const STRING: [&str; 3] = ["minLength", "maxLength", "pattern"];
    let mut kinds = BTreeSet::new();
    if NUMBER.iter().any(|k| o.contains_key(*k)) {
        kinds.insert(Kind::Number);
    }
    if STRING.iter().any(|k| o.contains_key(*k)) {
        kinds.insert(Kind::String);
    }
    (!kinds.is_empty()).then_some(kinds)
}

fn type_names(t: &Value) -> Kinds {
    match t {
        Value::String(s) => Kind::named(s).map(|k| BTreeSet::from([k])),
        Value::Array(a) => a
            .iter()
            .map(|n| n.as_str().and_then(Kind::named))
            .collect::<Option<BTreeSet<_>>>(),
        _ => None,
    }
}

fn intersect(a: Kinds, b: Kinds) -> Kinds {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some(a), Some(b)) => Some(
            a.iter()
                .flat_map(|x| b.iter().filter_map(move |y| x.meet(*y)))
                .collect(),
        ),
    }
}

/// The schema a local `$ref` (`#`, `#/$defs/X`) points to; `None` for a
/// remote one or one that points nowhere.
fn reference<'a>(root: &'a Value, schema: &Value) -> Option<&'a Value> {
    let r = schema.get("$ref")?.as_str()?.strip_prefix('#')?;
    if r.is_empty() {
        return Some(root);
    }
    root.pointer(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(schema: &Value) -> Option<Vec<&'static str>> {
        let root = json!({"type": "object", "properties": {"x": schema}, "$defs": {
            "OrderNo": {"type": "integer"},
            "Code": {"type": "integer", "enum": [1, 2, 3]},
            "Loop": {"$ref": "#/$defs/Loop"},
            "Alias": {"$ref": "#/$defs/OrderNo"},
        }});
        let kinds = admitted(&root, property(&root, "x").unwrap());
        kinds.map(|k| k.into_iter().map(Kind::name).collect())
    }

    #[test]
    fn types_are_read_through_refs_combinators_values_and_keywords() {
        let cases = [
            (json!({"type": "integer"}), Some(vec!["integer"])),
            (
                json!({"type": ["integer", "null"]}),
                Some(vec!["null", "integer"]),
            ),
            (json!({"$ref": "#/$defs/OrderNo"}), Some(vec!["integer"])),
            (json!({"$ref": "#/$defs/Alias"}), Some(vec!["integer"])),
            (json!({"$ref": "#/$defs/Code"}), Some(vec!["integer"])),
            (
                json!({"anyOf": [{"$ref": "#/$defs/OrderNo"}, {"type": "null"}]}),
                Some(vec!["null", "integer"]),
            ),
            (
                json!({"allOf": [{"type": "integer"}, {"minimum": 1}]}),
                Some(vec!["integer"]),
            ),
            (
                json!({"allOf": [{"type": "number"}, {"type": "integer"}]}),
                Some(vec!["integer"]),
            ),
            (json!({"enum": [1, 2, 3]}), Some(vec!["integer"])),
            (json!({"enum": ["a", 1.5]}), Some(vec!["number", "string"])),
            (json!({"const": 1}), Some(vec!["integer"])),
            (json!({"minimum": 1}), Some(vec!["number"])),
            (json!({"maxLength": 8}), Some(vec!["string"])),
            (
                json!({"anyOf": [{"type": "number"}, {"type": "string"}]}),
                Some(vec!["number", "string"]),
            ),
            // Nothing readable: any type.
            (json!({}), None),
            (json!({"description": "an order"}), None),
            (json!({"$ref": "#/$defs/Loop"}), None),
            (json!({"$ref": "https://example.com/order.json"}), None),
            (json!({"anyOf": [{"type": "integer"}, {}]}), None),
            (json!({"not": {"type": "string"}}), None),
        ];
        for (schema, want) in cases {
            assert_eq!(names(&schema), want, "{schema}");
        }
    }

    #[test]
    fn a_value_fits_when_its_type_is_admitted() {
        let int = Some(BTreeSet::from([Kind::Integer, Kind::Null]));
        assert!(fits(&json!(1), &int));
        assert!(fits(&json!(1.0), &int));
        assert!(!fits(&json!(1.5), &int));
        assert!(!fits(&json!("1"), &int));
        let num = Some(BTreeSet::from([Kind::Number]));
        assert!(fits(&json!(1), &num) && fits(&json!(1.5), &num));
        assert!(!fits(&json!(true), &num));
        assert!(fits(&json!("x"), &None));
        assert!(!fits(&json!("x"), &Some(BTreeSet::new())));
    }

    #[test]
    fn an_argument_is_declared_when_every_member_on_its_way_is() {
        let root = json!({"type": "object", "$defs": {"F": {"type": "object", "properties": {"ref": {"type": "string"}}}},
        "properties": {
            "order_id": {"type": "string"},
            "filter": {"$ref": "#/$defs/F"},
            "refs": {"type": "array", "items": {"type": "string"}},
            "loose": {"type": "object"},
        }});
        let template = json!({"order_id": "x", "reference": "x", "filter": {"ref": "x", "other": "x"},
            "refs": ["x"], "loose": {"ref": "x"}});
        for ok in ["/order_id", "/filter/ref", "/refs/0"] {
            assert!(declares(&root, &template, ok), "{ok}");
        }
        for undeclared in ["/reference", "/filter/other", "/loose/ref", "/missing"] {
            assert!(!declares(&root, &template, undeclared), "{undeclared}");
        }
    }
}
