//! JSON-RPC lines as the proxy sees them: most are forwarded byte for byte,
//! so only the few fields that route a message are read (`id`, `method`,
//! a `tools/call`'s tool name). Messages the proxy writes itself are built
//! from the SDK's types.

use std::borrow::Cow;

use rmcp::model::ErrorData;
use serde::Deserialize;
use serde_json::value::RawValue;

/// The routing fields of a JSON-RPC message.
#[derive(Debug, Deserialize)]
pub(crate) struct Peek<'a> {
    /// The id, unless absent or `null` (see `null_id`).
    #[serde(borrow, default, deserialize_with = "present")]
    pub(crate) id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(crate) method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(crate) params: Option<&'a RawValue>,
    /// The message has `"id": null` (MCP forbids it in a request; a
    /// response may carry it when the request's id could not be read).
    #[serde(skip)]
    pub(crate) null_id: bool,
}

/// A member that is present, `null` included (an `Option` alone reads
/// `null` as absent).
fn present<'de, D>(d: D) -> Result<Option<&'de RawValue>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    <&RawValue>::deserialize(d).map(Some)
}

impl<'a> Peek<'a> {
    /// `None` for a line that is not one JSON object (an array would
    /// otherwise be read as the struct's fields in order).
    pub(crate) fn of(line: &'a str) -> Option<Self> {
        if !line.trim_start_matches(JSON_WHITESPACE).starts_with('{') {
            return None;
        }
        let mut peek: Self = serde_json::from_str(line).ok()?;
        if peek.id.is_some_and(|id| id.get() == "null") {
            peek.id = None;
            peek.null_id = true;
        }
        Some(peek)
    }

    /// For a `tools/call` (request or not): the tool it names, or `Err`
    /// when `params.name` cannot be read as one string (missing, not a
    /// string, or given twice — another parser would take the last).
    pub(crate) fn called_tool(&self) -> Option<Result<String, ()>> {
        #[derive(Deserialize)]
        struct Name {
            name: String,
        }
        if self.method.as_deref() != Some("tools/call") {
            return None;
        }
        let params = self.params.map_or("null", RawValue::get);
        Some(
            serde_json::from_str::<Name>(params)
                .map(|n| n.name)
                .map_err(drop),
        )
    }
}

/// What JSON allows around a value (RFC 8259): nothing else is trimmed.
const JSON_WHITESPACE: [char; 4] = [' ', '\t', '\n', '\r'];

/// The byte order mark some writers put before a text (RFC 8259 lets a
/// parser ignore it; the SDKs' parsers do not).
const BOM: char = '\u{feff}';

/// `line` without a leading byte order mark.
pub(crate) fn without_bom(line: &str) -> &str {
    line.strip_prefix(BOM).unwrap_or(line)
}

/// A client's message as the proxy takes it in, before routing. Only a
/// [`Incoming::Message`] may reach the upstream: anything else is answered
/// by the proxy (or, for a blank line or a batch of notifications,
/// ignored), never forwarded, so no line the proxy could not read — and
/// so could not guard — is executed by an upstream that reads it
/// differently (Python's parser takes `NaN`; an older server runs a batch).
pub(crate) enum Incoming<'a> {
    /// One JSON-RPC object, its routing members read unambiguously.
    Message(Peek<'a>),
    /// A line with nothing on it.
    Blank,
    /// A JSON-RPC batch, refused whole: the id of each request in it
    /// (`None` for an element that is not a readable message); a
    /// notification in it has none, as JSON-RPC answers no notification.
    Batch(Vec<Option<Box<RawValue>>>),
    /// Not one readable JSON-RPC message: answer `error` to `id` (`None`:
    /// `null`, no id could be read).
    Refused {
        id: Option<Box<RawValue>>,
        error: ErrorData,
    },
}

/// Classifies one client line (a leading BOM already removed).
pub(crate) fn incoming(line: &str) -> Incoming<'_> {
    let text = line.trim_matches(JSON_WHITESPACE);
    if text.is_empty() {
        return Incoming::Blank;
    }
    if text.starts_with('[') {
        return batch(text);
    }
    let Some(peek) = Peek::of(text) else {
        return refused_unreadable(text);
    };
    if peek.null_id && peek.method.is_some() {
        return Incoming::Refused {
            id: None,
            error: ErrorData::invalid_request(
                "a request's id must be a string or an integer, not null (MCP): nothing was sent",
                None,
            ),
        };
    }
    // An object, array or boolean id: MCP allows a string or a number, and
    // the answer could not name the request the client waits on.
    if peek.method.is_some()
        && peek
            .id
            .is_some_and(|id| id.get().starts_with(['{', '[', 't', 'f']))
    {
        return Incoming::Refused {
            id: None,
            error: ErrorData::invalid_request(
                "a request's id must be a string or an integer (MCP), not an object, an array or a boolean: nothing was sent",
                None,
            ),
        };
    }
    if peek.id.is_none() && peek.method.is_none() && !peek.null_id {
        return Incoming::Refused {
            id: None,
            error: ErrorData::invalid_request(
                "not a JSON-RPC message: it has neither a method nor an id",
                None,
            ),
        };
    }
    Incoming::Message(peek)
}

/// Why a line that is not one readable message was refused.
fn refused_unreadable(text: &str) -> Incoming<'_> {
    if let Err(e) = serde_json::from_str::<&RawValue>(text) {
        // serde_json's words say where and what ("trailing characters" for
        // two messages on one line, "expected value" for `NaN`).
        return Incoming::Refused {
            id: lenient_id(text),
            error: ErrorData::parse_error(
                format!(
                    "not valid JSON ({e}; one message per line, and NaN and Infinity are not JSON numbers): nothing was sent"
                ),
                None,
            ),
        };
    }
    let message = if text.starts_with('{') {
        "unreadable message: id, method and params must each be given once, with their JSON-RPC types"
    } else {
        "not a JSON-RPC message: send one JSON object"
    };
    Incoming::Refused {
        id: None,
        error: ErrorData::invalid_request(message, None),
    }
}

fn batch(text: &str) -> Incoming<'_> {
    let Ok(elements) = serde_json::from_str::<Vec<&RawValue>>(text) else {
        return Incoming::Refused {
            id: None,
            error: ErrorData::parse_error("not valid JSON: nothing was sent", None),
        };
    };
    if elements.is_empty() {
        return Incoming::Refused {
            id: None,
            error: ErrorData::invalid_request("an empty batch", None),
        };
    }
    let ids = elements
        .iter()
        .filter_map(|e| match Peek::of(e.get()) {
            Some(p) if p.method.is_some() && p.id.is_none() && !p.null_id => None,
            Some(p) if p.method.is_some() => Some(p.id.map(ToOwned::to_owned)),
            _ => Some(None),
        })
        .collect();
    Incoming::Batch(ids)
}

/// The `id` of an object that is not JSON only because of Python's
/// `NaN`, `Infinity` or `-Infinity` (what `json.dumps` writes by default),
/// so that its error answer reaches the request that is waiting for it.
/// Only a string or an integer is taken (what a request id may be).
pub(crate) fn lenient_id(text: &str) -> Option<Box<RawValue>> {
    if !text.starts_with('{') {
        return None;
    }
    let mut json = String::with_capacity(text.len());
    let mut chars = text.char_indices();
    let mut in_string = false;
    while let Some((at, c)) = chars.next() {
        if in_string {
            json.push(c);
            match c {
                '\\' => json.extend(chars.next().map(|(_, c)| c)),
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        let token = ["-Infinity", "Infinity", "NaN"]
            .into_iter()
            .find(|t| text[at..].starts_with(t));
        match token {
            Some(t) => {
                json.push_str("null");
                // The token's other characters (all ASCII).
                for _ in 1..t.len() {
                    chars.next();
                }
            }
            None => {
                in_string = c == '"';
                json.push(c);
            }
        }
    }
    let id = Peek::of(&json)?.id?;
    let usable = id.get().starts_with('"') || id.get().parse::<i64>().is_ok();
    usable.then(|| id.to_owned())
}

/// A response line: `{"jsonrpc":"2.0","id":ID,"result":RESULT}`.
pub(crate) fn result_line(id: &RawValue, result: &serde_json::Value) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{}}}"#,
        id.get(),
        serde_json::to_string(result).unwrap_or_else(|_| "null".into())
    )
}

/// An error line with the SDK's error shape.
pub(crate) fn error_line(id: Option<&RawValue>, error: &ErrorData) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{},"error":{}}}"#,
        id.map_or("null", RawValue::get),
        serde_json::to_string(error).unwrap_or_else(|_| "null".into())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(line: &str) -> (Option<String>, i32) {
        match incoming(line) {
            Incoming::Refused { id, error } => (id.map(|i| i.get().to_owned()), error.code.0),
            _ => panic!("not refused: {line}"),
        }
    }

    #[test]
    fn only_one_readable_object_is_a_message() {
        let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ship"}}"#;
        assert!(matches!(incoming(call), Incoming::Message(p) if p.id.unwrap().get() == "7"));
        assert!(matches!(
            incoming(&format!(" {call}\r")),
            Incoming::Message(_)
        ));
        assert!(matches!(incoming(" \t"), Incoming::Blank));
        // Python's json.dumps: not JSON; the id is read for the answer.
        let nan = r#"{"id":"a\"NaN","method":"tools/call","params":{"x":NaN,"y":-Infinity,"z":[Infinity]}}"#;
        assert_eq!(refused(nan), (Some(r#""a\"NaN""#.into()), -32700));
        assert_eq!(refused(r#"{"id":1.5,"x":NaN}"#), (None, -32700));
        assert_eq!(refused(r#"{"id":1,"x":nul"#), (None, -32700));
        // A BOM is not JSON; the doors strip it before classifying.
        let bom = format!("\u{feff}{call}");
        assert_eq!(refused(&bom), (None, -32700));
        assert!(matches!(incoming(without_bom(&bom)), Incoming::Message(_)));
        // JSON, but not one JSON-RPC object.
        assert_eq!(refused("42"), (None, -32600));
        assert_eq!(refused(r#""tools/call""#), (None, -32600));
        assert_eq!(refused("{}"), (None, -32600));
        assert_eq!(refused(r#"{"id":1,"id":2,"method":"x"}"#), (None, -32600));
        // A request with a null id: neither a request nor a notification.
        assert_eq!(
            refused(r#"{"id":null,"method":"tools/call"}"#),
            (None, -32600)
        );
        // Nor with an id that is an object, an array or a boolean.
        for id in [r#"{"x":1}"#, "[1]", "true", "false"] {
            let line = format!(r#"{{"id":{id},"method":"tools/call","params":{{"name":"ship"}}}}"#);
            assert_eq!(refused(&line), (None, -32600), "{line}");
        }
        // A response with a null id (the client could not read a request) passes.
        let response = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#;
        assert!(matches!(incoming(response), Incoming::Message(p) if p.null_id));
    }

    #[test]
    fn a_batch_is_refused_with_an_answer_for_each_request_in_it() {
        let batch = r#"[{"id":1,"method":"tools/call"},{"method":"notifications/x"},3,{"id":"b","method":"ping"},{"id":null,"method":"ping"}]"#;
        let Incoming::Batch(ids) = incoming(batch) else {
            panic!()
        };
        let ids: Vec<Option<&str>> = ids
            .iter()
            .map(|i| i.as_deref().map(RawValue::get))
            .collect();
        assert_eq!(ids, [Some("1"), None, Some(r#""b""#), None]);
        assert_eq!(refused("[]"), (None, -32600));
        assert_eq!(refused("[{\"id\":1,\"x\":NaN}]"), (None, -32700));
        // An array is never read as a message's fields in order.
        assert!(Peek::of(r#"[1,"tools/call",{"name":"ship"}]"#).is_none());
    }
}
