//! JSON-RPC lines as the proxy sees them: most are forwarded byte for byte,
//! so only the few fields that route a message are read (`id`, `method`,
//! a `tools/call`'s tool name). Messages the proxy writes itself are built
//! from the SDK's types.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio_util::codec::LinesCodec;

/// Longest accepted message line (the SDK's default as well).
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// One line per message, bounded.
pub(crate) fn codec() -> LinesCodec {
    LinesCodec::new_with_max_length(MAX_LINE_BYTES)
}

/// The routing fields of a JSON-RPC message.
#[derive(Debug, Deserialize)]
pub(crate) struct Peek<'a> {
    #[serde(borrow, default)]
    pub(crate) id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(crate) method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(crate) params: Option<&'a RawValue>,
}

impl<'a> Peek<'a> {
    /// `None` for a line that is not a JSON object (forwarded as is: the
    /// receiver answers it as the protocol says).
    pub(crate) fn of(line: &'a str) -> Option<Self> {
        serde_json::from_str(line).ok()
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

/// Whether `line` is one JSON object (whatever its members).
pub(crate) fn is_object(line: &str) -> bool {
    line.trim_start().starts_with('{') && serde_json::from_str::<&RawValue>(line).is_ok()
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
pub(crate) fn error_line(id: Option<&RawValue>, error: &rmcp::model::ErrorData) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{},"error":{}}}"#,
        id.map_or("null", RawValue::get),
        serde_json::to_string(error).unwrap_or_else(|_| "null".into())
    )
}
