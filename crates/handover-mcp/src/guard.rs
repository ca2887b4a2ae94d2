//! A guarded `tools/call`: MCP in, the write protocol, MCP out. This file
//! only maps — identity from the request, the upstream call as the gate's
//! executor, the gate's answer as a tool result; every rule of the
//! protocol is the gate's.
//!
//! Identity is `(session scope, key)`, the key being the configured
//! `key_from` argument values or, for a tool without `key_from`, the
//! client's `_meta.idempotencyKey` — never the JSON-RPC id, which changes
//! on every retry.

use futures::future::BoxFuture;
use handover_ledger::{OperationId, Terminal, UnknownInfo};
use handover_router::config::McpTool;
use handover_router::gate::{
    DispatchContext, Executor, ExecutorError, ExecutorOutcome, PerformOptions, PerformOutcome,
    WriteGate,
};
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, ErrorData};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::sync::{Arc, Mutex, PoisonError};

use crate::upstream::{Lost, Upstream, split_response};

/// `_meta` member carrying the operation key (client → proxy) and the
/// destination key (proxy → upstream).
pub(crate) const IDEMPOTENCY_KEY: &str = "idempotencyKey";
/// `_meta` member of the proxy's own answers.
pub(crate) const HANDOVER_META: &str = "handover";

/// Runs one guarded call; `Err` is a JSON-RPC error (nothing was sent).
pub(crate) async fn call(
    gate: &WriteGate,
    upstream: &Upstream,
    tool: &McpTool,
    scope: &str,
    params: CallToolRequestParams,
) -> Result<Value, ErrorData> {
    let arguments = params.arguments.clone().unwrap_or_default();
    let key = match operation_key(tool, &params, &arguments) {
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
    let answer = tool_result(gate, req.id(), &args, outcome).await;
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

/// The key of the operation a call belongs to.
fn operation_key(
    tool: &McpTool,
    params: &CallToolRequestParams,
    arguments: &Map<String, Value>,
) -> Result<String, String> {
    if tool.key_from.is_empty() {
        let from_meta = params
            .meta
            .as_ref()
            .and_then(|m| serde_json::to_value(m).ok())
            .and_then(|m| m.get(IDEMPOTENCY_KEY).cloned());
        return match from_meta {
            Some(Value::String(key)) => Ok(key),
            Some(_) => Err(format!("_meta.{IDEMPOTENCY_KEY} must be a string")),
            None => Err(format!(
                "{:?} performs a business action: send _meta.{IDEMPOTENCY_KEY} (the same on every retry of this action)",
                tool.tool
            )),
        };
    }
    // The configured identity wins over a client's key: a framework that
    // stamps each attempt with a fresh `_meta.idempotencyKey` must not turn
    // one order into two shipments.
    let mut parts = Vec::with_capacity(tool.key_from.len());
    for field in &tool.key_from {
        match arguments.get(field) {
            Some(Value::String(s)) if s.is_empty() => {
                return Err(format!(
                    "argument {field:?} must not be empty: it identifies this action"
                ));
            }
            Some(Value::String(s)) => parts.push(s.clone()),
            Some(v @ (Value::Number(_) | Value::Bool(_))) => parts.push(v.to_string()),
            Some(_) => {
                return Err(format!(
                    "argument {field:?} must be a string, number or boolean: it identifies this action"
                ));
            }
            None => {
                return Err(format!(
                    "argument {field:?} is required: it identifies this action"
                ));
            }
        }
    }
    let readable = format!("{}:{}", tool.tool, parts.join("/"));
    if readable.len() <= 255 && readable.bytes().all(|b| b.is_ascii_graphic()) {
        return Ok(readable);
    }
    // Values with spaces or non-ASCII text (a free-text reason) or too long
    // for a key: the same values always give the same digest.
    let digest = Sha256::digest(Value::from(parts).to_string().as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{}:sha256:{hex}", tool.tool))
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

/// The "being verified" answer with the upstream's error text after it,
/// worded so that it does not read as "not done".
fn with_upstream_error(mut answer: Value, error: &Value) -> Value {
    let text = error["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let note = ContentBlock::text(format!(
        "The tool answered with an error, which does not show that the action was not performed: {text}"
    ));
    if let (Some(content), Ok(note)) =
        (answer["content"].as_array_mut(), serde_json::to_value(note))
    {
        content.push(note);
    }
    if let Some(structured) = answer["structuredContent"].as_object_mut() {
        structured.insert("upstream_error".into(), Value::String(text));
    }
    answer
}

/// The gate's answer as a tool result the model can act on.
async fn tool_result(
    gate: &WriteGate,
    id: &OperationId,
    args: &Value,
    outcome: PerformOutcome,
) -> Value {
    let op = json!({ "scope": id.scope.as_str(), "key": id.key.as_str() });
    match outcome {
        PerformOutcome::Confirmed { result, .. } => result,
        PerformOutcome::Rejected { evidence, reason } => rejected(evidence, &reason),
        PerformOutcome::Replayed(Terminal::Confirmed { result, .. }) => {
            with_meta(result, json!({ "replayed": true, "operation": op }))
        }
        PerformOutcome::Replayed(Terminal::Rejected {
            evidence, reason, ..
        }) => with_meta(
            rejected(evidence, &reason),
            json!({ "replayed": true, "operation": op }),
        ),
        PerformOutcome::Replayed(Terminal::Tombstone { state, .. }) => status_result(
            &format!(
                "This action was already {} earlier; its result is no longer kept. Do not call it again.",
                state.as_str()
            ),
            json!({ "status": state.as_str(), "replayed": true, "operation": op }),
        ),
        PerformOutcome::Conflict { .. } => conflict(gate, id, args, op).await,
        PerformOutcome::Unresolved(info) => unknown(op, &info, None),
        PerformOutcome::Suspended { blocked_by, info } => unknown(op, &info, Some(&blocked_by)),
        PerformOutcome::InProgress { .. } => status_result(
            "This action is being performed right now. Do not call it with another key; ask again later with the same key.",
            json!({ "status": "in_progress", "operation": op }),
        ),
        PerformOutcome::Cancelled { reason } => status_result(
            &format!("The approval of this action was withdrawn: {reason}. It was not performed."),
            json!({ "status": "cancelled", "operation": op, "reason": reason }),
        ),
        PerformOutcome::NotSent { evidence } => status_result(
            &format!(
                "The action was not sent ({evidence}). It is safe to call again with the same key."
            ),
            json!({ "status": "not_sent", "operation": op }),
        ),
    }
}

fn unknown(op: Value, info: &UnknownInfo, blocked_by: Option<&OperationId>) -> Value {
    let (status, text) = match blocked_by {
        None => (
            "outcome_unknown",
            "The outcome of this action is being verified: it may have been performed. Do not call this tool again with another key; report that it is pending verification.",
        ),
        Some(_) => (
            "suspended",
            "Another action of this kind has an unverified outcome, so this one was not performed. Do not call it again with another key; report that it waits for verification.",
        ),
    };
    let mut structured = json!({
        "status": status,
        "operation": op,
        "blocked_by": null,
        "owner": info.owner.as_str(),
        "instruction": "do not call this tool again with another key",
    });
    // An `action`-wide block by another scope's operation (another
    // tenant's, over HTTP) says that it blocks, nothing of what it is: not
    // its key, nor the reason its client got (free text), nor when.
    let own = blocked_by.is_none_or(|b| structured["operation"]["scope"] == b.scope.as_str());
    if own {
        structured["blocked_by"] =
            json!(blocked_by.map(|b| json!({ "scope": b.scope.as_str(), "key": b.key.as_str() })));
        structured["reason"] = json!(info.reason);
        structured["since_ms"] = json!(info.since.as_millis());
    }
    status_result(text, structured)
}

async fn conflict(gate: &WriteGate, id: &OperationId, args: &Value, op: Value) -> Value {
    let recorded = match gate.ledger().get(id).await {
        Ok(Some(rec)) => rec.params.unwrap_or(Value::Null),
        _ => Value::Null,
    };
    let differing = differing_fields(&recorded, args);
    status_result(
        &format!(
            "This key was approved with other arguments ({}); nothing was performed. Use the approved arguments, or a new key for a different action.",
            differing.join(", ")
        ),
        json!({ "status": "conflict", "operation": op, "differing": differing }),
    )
}

/// Top-level argument names whose values differ (compared as JSON values).
fn differing_fields(recorded: &Value, proposed: &Value) -> Vec<String> {
    let empty = Map::new();
    let r = recorded.as_object().unwrap_or(&empty);
    let p = proposed.as_object().unwrap_or(&empty);
    let mut names: Vec<String> = r
        .keys()
        .chain(p.keys())
        .filter(|k| r.get(*k) != p.get(*k))
        .cloned()
        .collect();
    names.sort();
    names.dedup();
    names
}

fn rejected(evidence: Option<String>, reason: &str) -> Value {
    evidence
        .and_then(|e| serde_json::from_str::<Value>(&e).ok())
        .filter(|v| v.get("isError") == Some(&Value::Bool(true)))
        .unwrap_or_else(|| {
            status_result(
                &format!("The tool did not perform this action: {reason}."),
                json!({ "status": "rejected", "reason": reason }),
            )
        })
}

fn status_result(text: &str, structured: Value) -> Value {
    let mut r = CallToolResult::error(vec![ContentBlock::text(text)]);
    r.structured_content = Some(structured);
    serde_json::to_value(r).unwrap_or(Value::Null)
}

fn refusal(message: &str) -> Value {
    status_result(message, json!({ "status": "refused", "reason": message }))
}

fn with_meta(mut result: Value, handover: Value) -> Value {
    if let Value::Object(o) = &mut result {
        let meta = o
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(m) = meta {
            m.insert(HANDOVER_META.into(), handover);
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(key_from: &[&str]) -> McpTool {
        McpTool {
            action: "refund".into(),
            server: "billing".into(),
            tool: "refund".into(),
            key_from: key_from.iter().map(|s| (*s).to_owned()).collect(),
            key_argument: None,
            is_error_rejects: false,
            lookup: None,
        }
    }

    fn key(t: &McpTool, args: Value, meta: Option<Value>) -> Result<String, String> {
        let mut params = CallToolRequestParams::new("refund");
        params.meta = meta.map(|m| serde_json::from_value(m).unwrap());
        let Value::Object(args) = args else { panic!() };
        operation_key(t, &params, &args)
    }

    #[test]
    fn the_key_comes_from_the_key_from_arguments_or_meta_never_from_elsewhere() {
        let t = tool(&["order_id", "n"]);
        let args = json!({"order_id": "A-1", "n": 2, "amount": 5});
        assert_eq!(key(&t, args.clone(), None).unwrap(), "refund:A-1/2");
        // A client's per-attempt key does not split one order in two.
        let meta = Some(json!({"idempotencyKey": "K-701"}));
        assert_eq!(key(&t, args.clone(), meta.clone()).unwrap(), "refund:A-1/2");
        assert_eq!(key(&tool(&[]), args.clone(), meta).unwrap(), "K-701");
        let e = key(&t, json!({"order_id": "A-1"}), None).unwrap_err();
        assert!(e.contains("\"n\" is required"), "{e}");
        let e = key(&t, json!({"order_id": "", "n": 2}), None).unwrap_err();
        assert!(e.contains("\"order_id\" must not be empty"), "{e}");
        let e = key(&tool(&[]), args, None).unwrap_err();
        assert!(e.contains("_meta.idempotencyKey"), "{e}");
    }

    #[test]
    fn free_text_values_give_a_stable_digest_key() {
        let t = tool(&["order_id", "reason"]);
        let damaged = json!({"order_id": "A-1", "reason": "damaged in transit"});
        let k1 = key(&t, damaged.clone(), None).unwrap();
        assert!(k1.starts_with("refund:sha256:") && k1.len() == "refund:sha256:".len() + 64);
        assert_eq!(key(&t, damaged, None).unwrap(), k1);
        let late = json!({"order_id": "A-1", "reason": "arrived late"});
        assert_ne!(key(&t, late, None).unwrap(), k1);
    }
}
