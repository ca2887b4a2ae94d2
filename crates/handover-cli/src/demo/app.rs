//! The demo's "application": its configuration, and the executor and
//! lookup an agent backend would write for its shipping API (here the
//! testkit's mock destination on loopback).

use handover::ledger::OperationId;
use handover::router::gate::HttpJsonExecutor;
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

/// The router's JSON-POST executor, adding `reference` = destination key to
/// the body: 2xx confirmed, definitive 4xx rejected, 5xx and transport errors
/// after connecting unknown, connect errors not sent.
pub(super) fn executor(dest: &MockDestination) -> HttpJsonExecutor {
    HttpJsonExecutor::new(reqwest::Client::new(), dest.records_url())
        .with_reference_field("reference")
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
            let found =
                handover_testkit::lookup_records(&client, &base, &ctx.destination_key).await?;
            Ok(found
                .into_iter()
                .map(|r| FoundRecord {
                    params: r.params,
                    result: r.record,
                })
                .collect())
        }
    }
}
