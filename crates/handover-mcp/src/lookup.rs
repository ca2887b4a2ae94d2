//! Reconciliation through MCP: `[actions.NAME.lookup] mcp_tool = "..."`
//! is the router's [`Lookup`] for the action, calling that tool on the same
//! upstream with the configured argument template. The reconciler — the
//! same code the library and `handover serve` run — decides what a found
//! record proves.
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

use crate::upstream::{Upstream, split_response};

/// An MCP lookup tool on one upstream.
pub(crate) struct McpLookup {
    pub(crate) upstream: Upstream,
    pub(crate) tool: McpLookupTool,
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
        Box::pin(async move {
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
            Ok(records(&parsed)
                .into_iter()
                .map(|r| found(r, &ctx.params))
                .collect())
        })
    }
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

fn found(record: Value, approved: &Value) -> FoundRecord {
    let params = match (&record, approved) {
        (Value::Object(r), Value::Object(a)) => Value::Object(
            a.keys()
                .filter_map(|k| r.get(k).map(|v| (k.clone(), v.clone())))
                .collect::<Map<_, _>>(),
        ),
        _ => record.clone(),
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(record.to_string())]);
    result.structured_content = Some(record);
    FoundRecord {
        params,
        result: serde_json::to_value(result).unwrap_or(Value::Null),
    }
}
