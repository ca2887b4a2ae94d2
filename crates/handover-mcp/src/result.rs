//! The gate's answer as the MCP tool result a client gets: the upstream's
//! own result, a recorded one replayed, or the proxy's status result
//! (unknown, conflict, in progress, ...). Every answer is made valid for
//! the protocol version of the session that asked ([`for_session`]), and a
//! recorded result that is not a tool result — an operator's `ops resolve
//! --result`, another door's outcome — is replayed as one
//! ([`as_tool_result`]). See `docs/mcp.md`, "What the client gets back".

use handover_ledger::{OperationId, Terminal, UnknownInfo};
use handover_router::gate::{PerformOutcome, WriteGate};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};

use crate::guard::HANDOVER_META;

/// The `_meta` member a 2026-07-28 request states its protocol version in
/// (older sessions negotiate theirs in `initialize` and never send it).
pub(crate) const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";

/// Whether a request's `_meta` is a 2026-07-28 (or later) request's.
pub(crate) fn modern(meta: Option<&Value>) -> bool {
    meta.and_then(|m| m.get(PROTOCOL_VERSION_META)).is_some()
}

/// `result` as the session that asked can read it. A 2026-07-28 session
/// requires `resultType` (a result recorded under an older protocol has
/// none: it is `"complete"`). An older session requires `structuredContent`
/// to be an object, which a 2026-07-28 result need not be: any other value
/// is put under `result`, as the SDKs' servers do for such outputs at
/// those versions. `resultType` is left in place for an older session,
/// whose clients ignore members they do not know.
pub(crate) fn for_session(mut result: Value, modern: bool) -> Value {
    let Value::Object(o) = &mut result else {
        return result;
    };
    if modern {
        o.entry("resultType").or_insert_with(|| json!("complete"));
    } else if let Some(s) = o.get_mut("structuredContent")
        && !(s.is_object() || s.is_null())
    {
        *s = json!({ "result": s.take() });
    }
    result
}

/// A recorded confirmation as a tool result: the recorded one when it is
/// one (a `content` array the SDK's type reads); otherwise — an operator's
/// `--result` (`null` by default), another door's outcome — a successful
/// result saying the action was performed, with the recorded JSON as text
/// and, when it is an object, as `structuredContent`.
fn as_tool_result(recorded: Value) -> Value {
    let is_tool_result = recorded.get("content").is_some_and(Value::is_array)
        && serde_json::from_value::<CallToolResult>(recorded.clone()).is_ok();
    if is_tool_result && recorded.get("isError") == Some(&Value::Bool(true)) {
        return confirmed_error_result(recorded);
    }
    if is_tool_result {
        return recorded;
    }
    let text = match &recorded {
        Value::Null => "This action was performed and confirmed (no result was recorded). Do not call it again.".to_owned(),
        other => format!(
            "This action was performed and confirmed. Recorded result: {other}. Do not call it again."
        ),
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    if recorded.is_object() {
        result.structured_content = Some(recorded);
    }
    serde_json::to_value(result).unwrap_or(Value::Null)
}

/// A confirmation whose recorded result is the tool's `isError` answer
/// (an operator confirming with the evidence the call got: the tool
/// raised after its effect): never replayed as a failure, which would
/// have the agent do it again. `isError` is false; a note saying the
/// action was confirmed comes first, the recorded content after it.
fn confirmed_error_result(mut recorded: Value) -> Value {
    let note = ContentBlock::text(
        "This action was performed and confirmed. The tool's own answer, kept below, reported an error, but the action is done. Do not call it again.",
    );
    if let (Value::Object(o), Ok(note)) = (&mut recorded, serde_json::to_value(note)) {
        o.insert("isError".into(), Value::Bool(false));
        if let Some(Value::Array(content)) = o.get_mut("content") {
            content.insert(0, note);
        }
    }
    recorded
}

/// The "being verified" answer with the upstream's error text after it,
/// worded so that it does not read as "not done".
pub(crate) fn with_upstream_error(mut answer: Value, error: &Value) -> Value {
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
pub(crate) async fn tool_result(
    gate: &WriteGate,
    id: &OperationId,
    action: &str,
    args: &Value,
    outcome: PerformOutcome,
) -> Value {
    let op = json!({ "scope": id.scope.as_str(), "key": id.key.as_str() });
    match outcome {
        PerformOutcome::Confirmed { result, .. } => result,
        PerformOutcome::Rejected { evidence, reason } => rejected(evidence, &reason),
        PerformOutcome::Replayed(Terminal::Confirmed { result, .. }) => with_meta(
            as_tool_result(result),
            json!({ "replayed": true, "operation": op }),
        ),
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
        PerformOutcome::Conflict { .. } => conflict(gate, id, action, args, op).await,
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

/// The same key with other arguments — or, for a key the client chose
/// (`_meta.idempotencyKey`), the key of another action, whose arguments
/// need not differ: the message names that action.
async fn conflict(
    gate: &WriteGate,
    id: &OperationId,
    action: &str,
    args: &Value,
    op: Value,
) -> Value {
    let recorded = gate.ledger().get(id).await.ok().flatten();
    if let Some(other) = recorded
        .as_ref()
        .map(|r| r.action.as_str())
        .filter(|a| *a != action)
    {
        return status_result(
            &format!(
                "This key already belongs to another action ({other:?}); nothing was performed. Use a new key for this action."
            ),
            json!({ "status": "conflict", "operation": op, "action": other }),
        );
    }
    let recorded = recorded.and_then(|r| r.params).unwrap_or(Value::Null);
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

/// A `key_from` call made while the tool's input schema cannot be read:
/// nothing recorded or sent; the same call may be made again.
pub(crate) fn schema_unread(tool: &str, why: &str) -> Value {
    let reason = format!(
        "the input schema of {tool:?} could not be read from the upstream MCP server ({why}), so the type of its key arguments cannot be checked"
    );
    status_result(
        &format!(
            "The action was not sent: {reason}. Nothing was recorded. Call it again with the same arguments in a moment."
        ),
        json!({ "status": "not_sent", "reason": reason }),
    )
}

pub(crate) fn refusal(message: &str) -> Value {
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
