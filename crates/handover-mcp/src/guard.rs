//! A guarded `tools/call`: MCP in, the write protocol, MCP out. This file
//! only maps — identity from the request ([`crate::key`]), the upstream
//! call as the gate's executor, the gate's answer as a tool result
//! ([`crate::result`]); every rule of the protocol is the gate's.

use futures::future::BoxFuture;
use handover_router::config::McpTool;
use handover_router::gate::{
    DispatchContext, Executor, ExecutorError, ExecutorOutcome, PerformOptions, PerformOutcome,
    WriteGate,
};
use rmcp::model::{CallToolRequestParams, CallToolResult, ErrorData};
use serde_json::{Map, Value, json};
use std::sync::{Arc, Mutex, PoisonError};

use crate::result::{self, refusal, tool_result, with_upstream_error};
use crate::upstream::{Lost, Upstream, split_response};

/// `_meta` member carrying the operation key (client → proxy) and the
/// destination key (proxy → upstream).
pub(crate) const IDEMPOTENCY_KEY: &str = "idempotencyKey";
/// `_meta` member of the proxy's own answers.
pub(crate) const HANDOVER_META: &str = "handover";

/// Runs one guarded call; `Err` is a JSON-RPC error (nothing was sent).
/// The answer is valid for the protocol version the call was made in.
pub(crate) async fn call(
    gate: &WriteGate,
    upstream: &Upstream,
    tool: &McpTool,
    scope: &str,
    params: CallToolRequestParams,
) -> Result<Value, ErrorData> {
    let meta = params
        .meta
        .as_ref()
        .and_then(|m| serde_json::to_value(m).ok());
    let modern = result::modern(meta.as_ref());
    let answer = perform(gate, upstream, tool, scope, params).await?;
    Ok(result::for_session(answer, modern))
}

async fn perform(
    gate: &WriteGate,
    upstream: &Upstream,
    tool: &McpTool,
    scope: &str,
    params: CallToolRequestParams,
) -> Result<Value, ErrorData> {
    let arguments = params.arguments.clone().unwrap_or_default();
    // The tool's input schema, to refuse a key value of another type than
    // it declares. Without it the call is not made: the type check would
    // be skipped, and one order could be taken under many keys.
    let schema = if tool.key_from.is_empty() {
        None
    } else {
        let wait = gate.contract(&tool.action).timeout;
        match upstream.input_schema(&tool.tool, wait).await {
            Ok(schema) => Some(schema),
            Err(why) => return Ok(result::schema_unread(&tool.tool, &why)),
        }
    };
    let key = match crate::key::operation_key(tool, &params, &arguments, schema.as_ref()) {
        Ok(key) => key,
        Err(message) => return Ok(refusal(&message)),
    };
    let args = Value::Object(arguments);
    let req = match gate.request(scope, &key, &tool.action, &args) {
        Ok(req) => req,
        Err(e) => return Ok(refusal(&e.to_string())),
    };
    let executor = UpstreamCall {
        upstream: upstream.clone(),
        tool: tool.clone(),
        params,
        error_result: Arc::default(),
    };
    let outcome = gate
        .perform(&req, &executor, PerformOptions::default())
        .await
        .map_err(|e| {
            ErrorData::internal_error(
                format!("{e} (the call was not recorded, so nothing was sent)"),
                None,
            )
        })?;
    let unresolved = matches!(outcome, PerformOutcome::Unresolved(_));
    let answer = tool_result(gate, req.id(), &tool.action, &args, outcome).await;
    let error_result = executor
        .error_result
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    Ok(match error_result {
        Some(error) if unresolved => with_upstream_error(answer, &error),
        _ => answer,
    })
}

/// The upstream `tools/call` as the gate's executor.
struct UpstreamCall {
    upstream: Upstream,
    tool: McpTool,
    params: CallToolRequestParams,
    /// The upstream's `isError` result when it was recorded `unknown`, for
    /// the caller's answer (the ledger keeps it as the evidence).
    error_result: Arc<Mutex<Option<Value>>>,
}

impl Executor for UpstreamCall {
    fn execute(
        &self,
        ctx: DispatchContext,
    ) -> BoxFuture<'static, Result<ExecutorOutcome, ExecutorError>> {
        let upstream = self.upstream.clone();
        let params = upstream_params(&self.tool, &self.params, &ctx);
        let is_error_rejects = self.tool.is_error_rejects;
        let error_result = self.error_result.clone();
        Box::pin(async move {
            let line =
                upstream
                    .request("tools/call", &params)
                    .await
                    .map_err(|lost| match lost {
                        Lost::NotSent => ExecutorError::not_sent("the upstream MCP server is gone"),
                        Lost::SessionEnded => ExecutorError::not_sent(
                            "the upstream MCP server answered 404 to its session id: it no longer knows the session (it restarted), so it did not process the call",
                        ),
                        Lost::AfterSend => ExecutorError::maybe_sent(
                            "the upstream MCP server went away before answering",
                        ),
                    })?;
            classify(&line, is_error_rejects, &error_result)
        })
    }
}

/// What the upstream gets: the approved arguments (plus the destination
/// key in `key_argument`), the client's `_meta` with the destination key.
fn upstream_params(tool: &McpTool, client: &CallToolRequestParams, ctx: &DispatchContext) -> Value {
    let mut arguments = match &ctx.params {
        Value::Object(o) => o.clone(),
        _ => Map::new(),
    };
    if let Some(field) = &tool.key_argument {
        arguments.insert(field.clone(), Value::String(ctx.destination_key.clone()));
    }
    let mut meta = client
        .meta
        .as_ref()
        .and_then(|m| serde_json::to_value(m).ok())
        .and_then(|m| match m {
            Value::Object(o) => Some(o),
            _ => None,
        })
        .unwrap_or_default();
    meta.insert(
        IDEMPOTENCY_KEY.into(),
        Value::String(ctx.destination_key.clone()),
    );
    json!({ "name": tool.tool, "arguments": arguments, "_meta": meta })
}

/// A result without `isError` is a confirmation. An `isError` result is
/// `unknown` — the SDKs turn any exception into one, including one raised
/// after the effect was applied (the shipment written, then the carrier
/// call timed out), and "rejected" would tell the model it was not done —
/// unless the tool is configured `is_error = "rejected"`. A JSON-RPC error
/// or an unreadable line is not an answer either: the tool may have run.
fn classify(
    line: &str,
    is_error_rejects: bool,
    error_result: &Mutex<Option<Value>>,
) -> Result<ExecutorOutcome, ExecutorError> {
    let answer = split_response(line)
        .map_err(|e| ExecutorError::maybe_sent(format!("unreadable upstream answer: {e}")))?;
    let result = answer.map_err(|e| {
        ExecutorError::maybe_sent(format!(
            "upstream answered JSON-RPC error {}: {}",
            e.code.0, e.message
        ))
    })?;
    let parsed: CallToolResult = serde_json::from_value(result.clone())
        .map_err(|e| ExecutorError::maybe_sent(format!("not a tool result: {e}")))?;
    if parsed.is_error != Some(true) {
        return Ok(ExecutorOutcome::Confirmed(result));
    }
    if is_error_rejects {
        return Ok(ExecutorOutcome::Rejected {
            reason: "the tool answered isError".into(),
            evidence: Some(result.to_string()),
        });
    }
    let evidence = format!(
        "the tool answered isError, which may follow its effect (is_error = \"unknown\"): {result}"
    );
    *error_result.lock().unwrap_or_else(PoisonError::into_inner) = Some(result);
    Err(ExecutorError::maybe_sent(evidence))
}
