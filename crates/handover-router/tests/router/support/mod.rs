//! Shared helpers for the router's integration tests: real SQLite ledger
//! files, the testkit's mock destination, and an HTTP executor and lookup
//! that talk to it as an application would.

#![allow(dead_code, unreachable_pub)]

pub mod chain;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{ManualClock, SqliteLedger, SqliteOptions, Timestamp};
use handover_router::config::Config;
use handover_router::gate::{HttpJsonExecutor, WriteGate};
use handover_router::reconcile::{FoundRecord, Lookup, LookupContext};
use handover_testkit::MockDestination;

/// A clock starting at a fixed, realistic time.
pub fn clock() -> ManualClock {
    ManualClock::new(Timestamp::from_millis(1_700_000_000_000))
}

/// Opens (or reopens, as a new process would) the SQLite ledger at `path`.
pub async fn sqlite(path: &Path, clock: &ManualClock) -> Arc<SqliteLedger> {
    let opts = SqliteOptions {
        clock: Arc::new(clock.clone()),
        ..SqliteOptions::default()
    };
    Arc::new(
        SqliteLedger::open(path, opts)
            .await
            .expect("open sqlite ledger"),
    )
}

/// A config with the given `[actions.*]` TOML and a memory `[ledger]` section
/// (the ledger itself is built by the test).
pub fn config(actions: &str) -> Config {
    Config::parse(
        &format!("[ledger]\nbackend = \"memory\"\n{actions}"),
        &|_| None,
    )
    .expect("test config")
}

/// A write gate over `ledger` with `config`, named `holder`.
pub fn gate(
    ledger: Arc<SqliteLedger>,
    config: &Config,
    clock: &ManualClock,
    holder: &str,
) -> WriteGate {
    WriteGate::new(ledger, config.clone(), Arc::new(clock.clone())).with_holder(holder)
}

/// The application's executor for the mock destination: the router's
/// [`HttpJsonExecutor`], adding `reference = destination key` to the body.
pub fn http_executor(dest: &MockDestination) -> HttpJsonExecutor {
    HttpJsonExecutor::new(reqwest::Client::new(), dest.records_url())
        .with_reference_field("reference")
}

/// The application's lookup for the mock destination: finds records by
/// destination key and maps them back to the params form.
pub fn http_lookup(dest: &MockDestination) -> impl Lookup + 'static {
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

/// Runs the configured HTTP lookup (`handover_router::reconcile::HttpLookup`)
/// of an action `ship` whose `url` is `{base}/records?reference={destination_key}`,
/// for operation `tenant-1`/`K-1` approved as `{"order": "O-1"}`.
pub async fn configured_lookup(base: &str) -> Result<Vec<FoundRecord>, String> {
    let config = config(&format!(
        "[actions.ship.lookup]\nvisibility_lag = \"1s\"\nurl = \"{base}/records?reference={{destination_key}}\"\n"
    ));
    let lookups = handover_router::reconcile::HttpLookup::from_config(&config, &|_| None).unwrap();
    let (_, lookup) = lookups.into_iter().find(|(a, _)| a == "ship").unwrap();
    let ctx = LookupContext {
        operation: handover_ledger::OperationId::new("tenant-1", "K-1").unwrap(),
        action: handover_ledger::ActionName::new("ship").unwrap(),
        params: serde_json::json!({"order": "O-1"}),
        destination_key: "ho1-abc".into(),
    };
    lookup.lookup(ctx).await
}

/// Short executor timeout for lost-response scenarios (real time: the mock
/// destination answers after it, or never).
pub const SHORT: Duration = Duration::from_millis(300);
