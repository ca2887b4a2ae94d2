//! Shared helpers for the router's integration tests: real SQLite ledger
//! files, the testkit's mock destination, and an HTTP executor and lookup
//! that talk to it as an application would.

#![allow(dead_code, unreachable_pub)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{ManualClock, SqliteLedger, SqliteOptions, Timestamp};
use handover_router::config::Config;
use handover_router::gate::{DispatchContext, Executor, ExecutorError, ExecutorOutcome, WriteGate};
use handover_router::reconcile::{FoundRecord, Lookup, LookupContext};
use handover_testkit::MockDestination;
use serde_json::{Value, json};

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

/// The application's executor for the mock destination: POSTs the approved
/// params plus `reference = destination key`, with the idempotency header
/// when the contract has one. 2xx → confirmed, 4xx → rejected, 5xx and
/// transport errors after connecting → unknown, connect errors → not sent.
pub fn http_executor(dest: &MockDestination) -> impl Executor + 'static {
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
            let resp = req
                .send()
                .await
                .map_err(|e| ExecutorError::from_reqwest(&e))?;
            let status = resp.status();
            let text = resp
                .text()
                .await
                .map_err(|e| ExecutorError::from_reqwest(&e))?;
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

/// The application's lookup for the mock destination: finds records by
/// destination key and maps them back to the params form.
pub fn http_lookup(dest: &MockDestination) -> impl Lookup + 'static {
    let base = dest.uri();
    let client = reqwest::Client::new();
    move |ctx: LookupContext| {
        let (client, base) = (client.clone(), base.clone());
        async move {
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

/// Short executor timeout for lost-response scenarios (real time: the mock
/// destination answers after it, or never).
pub const SHORT: Duration = Duration::from_millis(300);
