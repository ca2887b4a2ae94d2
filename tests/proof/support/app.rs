//! The application's side, as a real agent backend would write it: the
//! router configuration, the user's approval, and the executor and lookup
//! that talk HTTP to the (mock) destination. This glue needs router types,
//! so it lives here and not in `handover-testkit` (the router's own tests
//! depend on the testkit; a testkit → router dependency would give them two
//! copies of the router's types).

use handover::providers::{ChatRequest, Message, Tool, ToolCall};
use handover::router::config::Config;
use handover::router::gate::{FixedApproval, HttpJsonExecutor, ProposedCall};
use handover::router::reconcile::{FoundRecord, Lookup, LookupContext};
use handover::router::route::{Completion, Router};
use handover_testkit::MockDestination;
use serde_json::{Value, json};

/// The scope (customer) of every scenario.
pub const SCOPE: &str = "customer-42";
/// The business action.
pub const SHIP: &str = "create_shipment";

/// The shipment the user approved as `K-701`.
pub fn shipment() -> Value {
    json!({"order": "O-1001", "sku": "REPLACEMENT-KETTLE", "qty": 1, "address": "12 Rue Cler, Paris"})
}

/// The same shipment as another model writes it: members in another order.
pub fn shipment_reordered() -> Value {
    json!({"address": "12 Rue Cler, Paris", "qty": 1, "sku": "REPLACEMENT-KETTLE", "order": "O-1001"})
}

/// What the user approved: `create_shipment` under `key` in [`SCOPE`].
pub fn approval(key: &str) -> FixedApproval {
    FixedApproval::new(SCOPE, key, SHIP)
}

/// The user's message, offering the shipping tool.
pub fn user_turn() -> ChatRequest {
    ChatRequest::new(vec![
        Message::system("You are the support assistant of a kitchen shop."),
        Message::user("My kettle arrived broken. Please send a replacement."),
    ])
    .with_tools(vec![Tool::function(
        SHIP,
        Some("Create a shipment at the warehouse.".into()),
        json!({"type": "object"}),
    )])
}

/// The model's proposed tool call in a completion, as the gate takes it.
pub fn proposed(done: &Completion) -> ProposedCall {
    let call: &ToolCall = done.response.tool_calls.first().unwrap_or_else(|| {
        panic!(
            "{} proposed no tool call: {:?}",
            done.provider, done.response
        )
    });
    ProposedCall::from_tool_call(call, Some(&done.provider), Some(&done.response.model))
        .expect("valid tool call")
}

/// A configuration with providers `primary` (OpenAI adapter) and `fallback`
/// (DeepSeek adapter) at the given base URLs, policy `default` over both,
/// the extra policy lines, and `tables` (`[actions.*]`, more policies).
/// `timeouts` is the providers' timeouts table body.
pub fn config(primary: &str, fallback: &str, policy: &str, timeouts: &str, tables: &str) -> Config {
    let provider = |name: &str, kind: &str, url: &str, model: &str| {
        format!(
            "[providers.{name}]\nkind = \"{kind}\"\nbase_url = \"{url}\"\nmodel = \"{model}\"\n\
             [providers.{name}.timeouts]\n{timeouts}\n\
             [providers.{name}.breaker]\nfailure_threshold = 100\n"
        )
    };
    let text = format!(
        "[ledger]\nbackend = \"memory\"\n{}{}\
         [policies.default]\nchain = [\"primary\", \"fallback\"]\n{policy}\n\
         [policies.default.backoff]\ninitial = \"20ms\"\nmax = \"100ms\"\njitter = false\n{tables}",
        provider("primary", "openai", primary, "gpt-4o-mini"),
        provider("fallback", "deepseek", fallback, "deepseek-chat"),
    );
    Config::parse(&text, &|_| None).unwrap_or_else(|e| panic!("test config: {e}\n{text}"))
}

/// Generous timeouts for real-time scenarios where no provider is slow.
pub const RELAXED: &str = "connect = \"2s\"\nfirst_byte = \"10s\"\nfirst_token = \"10s\"\nidle = \"10s\"\ntotal = \"30s\"";

/// A router over `config` (no API keys: the mocks do not check them).
pub fn router(config: &Config) -> Router {
    Router::with_env(config, &|_| None).expect("router")
}

/// The shipping action: block the scope while unknown, 1 s per call.
pub const SHIP_NO_RECOVERY: &str = "
[actions.create_shipment]
block = \"scope\"
timeout = \"1s\"
";

/// The shipping action with an authoritative lookup (visibility lag 30 s).
pub const SHIP_WITH_LOOKUP: &str = "
[actions.create_shipment]
block = \"scope\"
timeout = \"1s\"
[actions.create_shipment.lookup]
visibility_lag = \"30s\"
check_every = \"5s\"
max_check_every = \"1m\"
";

/// The shipping action with an idempotency-key contract (10 min retention).
pub const SHIP_WITH_KEYS: &str = "
[actions.create_shipment]
block = \"scope\"
timeout = \"1s\"
[actions.create_shipment.idempotency]
header = \"Idempotency-Key\"
retention = \"10m\"
";

/// The application's executor: the router's [`HttpJsonExecutor`] (2xx →
/// confirmed, definitive 4xx → rejected, 5xx and transport errors after
/// connecting → unknown, connect errors → not sent), adding
/// `reference = destination key` to the body.
pub fn executor(dest: &MockDestination) -> HttpJsonExecutor {
    HttpJsonExecutor::new(reqwest::Client::new(), dest.records_url())
        .with_reference_field("reference")
}

/// The application's authoritative lookup: records by destination key,
/// mapped back to the params form (without the `reference` it added).
pub fn lookup(dest: &MockDestination) -> impl Lookup + 'static {
    let base = dest.uri();
    let client = reqwest::Client::new();
    move |ctx: LookupContext| {
        let (client, base) = (client.clone(), base.clone());
        async move {
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
