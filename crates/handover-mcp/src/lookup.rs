//! Reconciliation through MCP: `[actions.NAME.lookup] mcp_tool = "..."`
//! is the router's [`Lookup`] for the action, calling that tool on the same
//! upstream with the configured argument template. The reconciler — the
//! same code the library and `handover serve` run — decides what a found
//! record proves.
//!
//! Its answer is used only when the tool declares, in its `inputSchema`,
//! every argument that carries `{destination_key}`, `{scope}` or `{key}`:
//! an SDK server drops arguments its tool does not declare, and a tool
//! that never saw the operation's name finds other operations' records
//! (another tenant's shipment of the same order id). Otherwise — or when
//! the schema cannot be read — the lookup fails naming the argument, and
//! proves nothing. And with `key_argument`, a record that carries that
//! argument with another value than this operation's destination key is
//! another operation's: it never confirms this one (see [`ours`]).
//!
//! What the lookup tool answers is read as a list of records: its
//! `structuredContent` (or, without one, its first text content parsed as
//! JSON) that is an array, or an object with a `records` or `result` array,
//! or one object (one record), or `null`/empty (none). A record's
//! parameters are the approved parameters' fields the record has; the
//! recorded result is the record as a tool result.

use futures::future::BoxFuture;
use handover_router::config::{LookupValues, McpLookupTool};
use handover_router::reconcile::{FoundRecord, Lookup, LookupContext};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};
use std::time::Duration;

use crate::upstream::{Upstream, split_response};

/// An MCP lookup tool on one upstream.
pub(crate) struct McpLookup {
    pub(crate) upstream: Upstream,
    pub(crate) tool: McpLookupTool,
    /// The guarded tool's `key_argument`, which records may echo.
    pub(crate) key_argument: Option<String>,
    /// How long the lookup tool's schema may take to read (the action's timeout).
    pub(crate) wait: Duration,
}

impl Lookup for McpLookup {
    fn lookup(&self, ctx: LookupContext) -> BoxFuture<'static, Result<Vec<FoundRecord>, String>> {
        let arguments = self.tool.arguments_for(LookupValues {
            scope: ctx.operation.scope.as_str(),
            key: ctx.operation.key.as_str(),
            destination_key: &ctx.destination_key,
            params: &ctx.params,
        });
        let upstream = self.upstream.clone();
        let name = self.tool.tool.clone();
        let template = Value::Object(self.tool.arguments.clone());
        let naming = self.tool.naming_pointers();
        let key_argument = self.key_argument.clone();
        let wait = self.wait;
        Box::pin(async move {
            let schema = upstream.input_schema(&name, wait).await.map_err(|why| {
                format!("lookup tool {name:?}: its input schema could not be read ({why}), so it is not known to read the arguments naming the operation; the lookup proves nothing")
            })?;
            if let Some(pointer) = naming
                .iter()
                .find(|p| !crate::schema::declares(&schema, &template, p))
            {
                let e = undeclared(&name, pointer);
                tracing::warn!(error = %e, "an MCP lookup proves nothing");
                return Err(e);
            }
            let meta = upstream.session_meta();
            let params = json!({ "name": name, "arguments": arguments, "_meta": meta });
            let line = upstream
                .request("tools/call", &params)
                .await
                .map_err(|lost| format!("lookup tool {name:?}: no answer ({lost:?})"))?;
            let result = split_response(&line)
                .map_err(|e| format!("lookup tool {name:?}: unreadable answer: {e}"))?
                .map_err(|e| format!("lookup tool {name:?}: error {}: {}", e.code.0, e.message))?;
            let parsed: CallToolResult = serde_json::from_value(result)
                .map_err(|e| format!("lookup tool {name:?}: not a tool result: {e}"))?;
            if parsed.is_error == Some(true) {
                return Err(format!("lookup tool {name:?} answered isError"));
            }
            let key = key_argument
                .as_deref()
                .map(|f| (f, ctx.destination_key.as_str()));
            let records = ours(records(&parsed), key);
            Ok(records
                .into_iter()
                .map(|r| found(r, &ctx.params, key))
                .collect())
        })
    }
}

fn undeclared(tool: &str, pointer: &str) -> String {
    let argument = pointer.trim_start_matches('/');
    format!(
        "lookup tool {tool:?} does not declare argument {argument:?} (lookup.arguments, naming the operation) in its inputSchema: a tool does not read an argument it does not declare, so a record it finds need not be this operation's; the lookup proves nothing (name the operation with an argument the tool declares and searches by)"
    )
}

/// With `key` (`key_argument` and this operation's destination key): a
/// record carrying that argument with another value is another
/// operation's.
fn another_operations(record: &Value, key: Option<(&str, &str)>) -> Option<(String, Value)> {
    let (field, destination_key) = key?;
    let value = record.get(field)?;
    (value.as_str() != Some(destination_key)).then(|| (field.to_owned(), value.clone()))
}

/// The records that may be this operation's: another operation's are
/// dropped when any other is left. When every record is another
/// operation's, one is kept — as a record whose parameters differ from the
/// approved ones ([`found`]), so the operation is diverged and goes to
/// review: the lookup answered for something else, so its answer proves
/// nothing about this operation either way (an empty answer would prove
/// absence after the visibility lag).
fn ours(records: Vec<Value>, key: Option<(&str, &str)>) -> Vec<Value> {
    let (others, mine): (Vec<Value>, Vec<Value>) = records
        .into_iter()
        .partition(|r| another_operations(r, key).is_some());
    if !mine.is_empty() || others.is_empty() {
        return mine;
    }
    others.into_iter().take(1).collect()
}

fn records(result: &CallToolResult) -> Vec<Value> {
    let body = result.structured_content.clone().or_else(|| {
        result.content.iter().find_map(|c| match c {
            ContentBlock::Text(t) => serde_json::from_str(&t.text).ok(),
            _ => None,
        })
    });
    match body {
        Some(Value::Array(a)) => a,
        Some(Value::Object(o)) => match ["records", "result"]
            .iter()
            .find_map(|k| o.get(*k).and_then(Value::as_array))
        {
            Some(a) => a.clone(),
            None if o.is_empty() => Vec::new(),
            None => vec![Value::Object(o)],
        },
        _ => Vec::new(),
    }
}

/// A record as the reconciler compares it: the approved parameters' fields
/// it has — and another operation's key, when it carries one, so that it
/// never matches.
fn found(record: Value, approved: &Value, key: Option<(&str, &str)>) -> FoundRecord {
    let mut params = match (&record, approved) {
        (Value::Object(r), Value::Object(a)) => Value::Object(
            a.keys()
                .filter_map(|k| r.get(k).map(|v| (k.clone(), v.clone())))
                .collect::<Map<_, _>>(),
        ),
        _ => record.clone(),
    };
    if let (Some((field, value)), Value::Object(p)) =
        (another_operations(&record, key), &mut params)
    {
        p.insert(field, value);
    }
    let mut result = CallToolResult::success(vec![ContentBlock::text(record.to_string())]);
    result.structured_content = Some(record);
    FoundRecord {
        params,
        result: serde_json::to_value(result).unwrap_or(Value::Null),
    }
}
