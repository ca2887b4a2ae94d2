//! The demo's "application": its configuration, and the executor and
//! lookup an agent backend would write for its shipping API (here the
//! testkit's mock destination on loopback).

use handover::ledger::OperationId;
use handover::router::gate::{DispatchContext, Executor, ExecutorError, ExecutorOutcome};
use handover::router::reconcile::{FoundRecord, Lookup, LookupContext};
use handover_testkit::MockDestination;
use serde_json::{Value, json};

/// The action the model proposes.
pub(super) const ACTION: &str = "create_shipment";
/// The scope the user's approval lives in.
pub(super) const SCOPE: &str = "customer-42";
/// The policy the assistant's task runs under.
pub(super) const POLICY: &str = "assistant";

/// The demo's configuration: an OpenAI-like primary and a DeepSeek-like
/// fallback (both mocks, no keys), and a shipping action whose destination
/// offers an authoritative lookup with a 30 s visibility lag but no
/// idempotency key, so an unknown shipment is never re-sent automatically.
pub(super) fn config_toml(primary: &str, fallback: &str) -> String {
    format!(
        r#"
[ledger]
backend = "memory"   # the demo opens its own SQLite file (--ledger)

[providers.openai]
kind = "openai"
base_url = "{primary}"
model = "gpt-4o-mini"

[providers.deepseek]
kind = "deepseek"
base_url = "{fallback}"
model = "deepseek-chat"

[policies.{POLICY}]
chain = ["openai", "deepseek"]
deadline = "30s"
max_requests = 6

[actions.{ACTION}]
block = "operation"
lease = "30s"
timeout = "5s"

[actions.{ACTION}.lookup]
visibility_lag = "30s"
check_every = "15s"
max_check_every = "1m"
"#
    )
}

/// The approved shipment.
pub(super) fn shipment() -> Value {
    json!({
        "order_id": "1042",
        "sku": "MUG-CERAMIC-12",
        "quantity": 1,
        "address_id": "addr-7",
        "reason": "replacement for damaged item"
    })
}

/// POSTs the approved params (plus `reference` = destination key) to the
/// destination: 2xx confirmed, 4xx rejected, 5xx and transport errors after
/// connecting unknown, connect errors not sent.
pub(super) fn executor(dest: &MockDestination) -> impl Executor + 'static {
    let url = dest.records_url();
    let client = reqwest::Client::new();
    move |ctx: DispatchContext| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let mut body = ctx.params.clone();
            body["reference"] = json!(ctx.destination_key);
            let mut req = client.post(&url).timeout(ctx.remaining).json(&body);
            if let Some(header) = &ctx.idempotency_header {
                req = req.header(header.as_str(), ctx.destination_key.as_str());
            }
            let resp = req.send().await.map_err(|e| transport_error(&e))?;
            let status = resp.status();
            let text = resp.text().await.map_err(|e| transport_error(&e))?;
            if status.is_success() {
                Ok(ExecutorOutcome::Confirmed(
                    serde_json::from_str(&text).unwrap_or(Value::Null),
                ))
            } else if status.is_client_error() {
                Ok(ExecutorOutcome::Rejected {
                    reason: format!("destination answered {status}"),
                    evidence: Some(text),
                })
            } else {
                Err(ExecutorError::maybe_sent(format!(
                    "destination answered {status}: {text}"
                )))
            }
        }
    }
}

/// The router's classification (only a connect error proves nothing was
/// sent), with the whole error chain as evidence ("connection closed before
/// message completed" is what the operator needs to read).
fn transport_error(e: &reqwest::Error) -> ExecutorError {
    let mut chain = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        chain.push_str(": ");
        chain.push_str(&s.to_string());
        source = s.source();
    }
    if ExecutorError::from_reqwest(e).was_sent() {
        ExecutorError::maybe_sent(format!("transport error after connecting: {chain}"))
    } else {
        ExecutorError::not_sent(format!("connect error: {chain}"))
    }
}

/// Looks records up by destination key. It answers only for `this_run`'s
/// operation: the mock destination lives in this process and knows nothing
/// of earlier runs, so for any other operation the lookup fails (which is
/// never evidence of anything) instead of wrongly reporting "not found".
pub(super) fn lookup(dest: &MockDestination, this_run: OperationId) -> impl Lookup + 'static {
    let base = dest.uri();
    let client = reqwest::Client::new();
    move |ctx: LookupContext| {
        let (client, base, this_run) = (client.clone(), base.clone(), this_run.clone());
        async move {
            if ctx.operation != this_run {
                return Err("the demo's destination only knows this run's shipment".to_owned());
            }
            let url = format!("{base}/records?key={}", ctx.destination_key);
            let resp = client.get(url).send().await.map_err(|e| e.to_string())?;
            if !resp.status().is_success() {
                return Err(format!("lookup answered {}", resp.status()));
            }
            let body: Value = resp.json().await.map_err(|e| e.to_string())?;
            Ok(body["records"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|r| {
                    let mut params = r["record"].clone();
                    if let Some(obj) = params.as_object_mut() {
                        obj.remove("reference");
                    }
                    FoundRecord { params, result: r }
                })
                .collect())
        }
    }
}
