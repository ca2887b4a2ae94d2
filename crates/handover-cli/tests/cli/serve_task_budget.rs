//! Two real `handover serve` processes on one PostgreSQL ledger (a fresh
//! schema of `HANDOVER_TEST_POSTGRES_URL`) serve calls of one user task
//! (`x-handover-task`): together they never send more than the task's
//! `max_requests`, counted at the mock providers. Unset: skipped with a
//! notice; set but unreachable: the test fails.

use crate::support;

use handover::ledger::{PostgresLedger, PostgresOptions};
use handover_testkit::{Flavor, MockProvider, Reply};
use serde_json::{Value, json};
use support::*;

const URL_VAR: &str = "HANDOVER_TEST_POSTGRES_URL";
const CLI_URL_VAR: &str = "HANDOVER_CLI_TEST_LEDGER_URL";
const TOKEN: &str = "example-client-token";
const TOKEN_SHA256: &str = "50f88aa457efc9d22985f9f0efd335f30b8fd187a999b69a70f11e6a8be39f4f";

async fn call(http: &reqwest::Client, base: &str, task: &str) -> (u16, Option<String>, Value) {
    let resp = http
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(TOKEN)
        .header("x-handover-task", task)
        .json(&json!({"model": "default", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let remaining = resp
        .headers()
        .get("x-handover-budget-remaining")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, remaining, resp.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_serve_processes_share_one_task_budget_on_postgres() {
    let Some(url) = std::env::var(URL_VAR).ok().filter(|u| !u.trim().is_empty()) else {
        println!("skipped: {URL_VAR} not set");
        return;
    };
    let schema = fresh_schema("budget");
    let _guard = SchemaGuard {
        url: url.clone(),
        schema: schema.clone(),
    };
    // Creates the schema and applies the migrations once, before either process.
    let opts = PostgresOptions {
        schema: Some(schema.clone()),
        ..PostgresOptions::default()
    };
    PostgresLedger::connect(&url, opts)
        .await
        .unwrap_or_else(|e| panic!("{URL_VAR} is set but the database is not usable: {e}"));

    let primary = MockProvider::start(Flavor::OpenAi).await;
    primary.set_default(Reply::overloaded());
    let fallback = MockProvider::start(Flavor::OpenAi).await;
    fallback.set_default(Reply::text("from the fallback"));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("handover.toml");
    let provider = |name: &str, url: &str| {
        format!(
            "[providers.{name}]\nkind = \"openai_compatible\"\nbase_url = \"{url}\"\nmodel = \"m\"\n\
             [providers.{name}.breaker]\nfailure_threshold = 1000\n"
        )
    };
    std::fs::write(
        &config,
        format!(
            "[ledger]\nbackend = \"postgres\"\nurl_env = \"{CLI_URL_VAR}\"\n\n{}{}\n\
             [policies.default]\nchain = [\"primary\", \"fallback\"]\ndeadline = \"60s\"\n\
             max_requests = 5\n\n[gateway]\nlisten = \"127.0.0.1:0\"\n\n\
             [gateway.clients.app]\ntoken_sha256 = \"{TOKEN_SHA256}\"\nscope = \"tenant-1\"\n",
            provider("primary", &primary.base_url()),
            provider("fallback", &fallback.base_url()),
        ),
    )
    .unwrap();
    let cli_url = with_search_path(&url, &schema);
    let env = [(CLI_URL_VAR, cli_url.as_str())];
    let servers = [Served::start(&config, &env), Served::start(&config, &env)];
    let http = reqwest::Client::new();
    let total = || async { primary.requests().await + fallback.requests().await };

    // Alternating: each answered call costs 2 requests (primary 503, fallback).
    let (s, left, _) = call(&http, &servers[0].base, "trip-1").await;
    assert_eq!(
        (s, left.as_deref().map(|l| &l[..10])),
        (200, Some("requests=3"))
    );
    let (s, left, _) = call(&http, &servers[1].base, "trip-1").await;
    assert_eq!(
        (s, left.as_deref().map(|l| &l[..10])),
        (200, Some("requests=1"))
    );
    // The fifth request goes to the primary; the fallback gets none.
    let (s, _, body) = call(&http, &servers[0].base, "trip-1").await;
    assert_eq!(
        (s, &body["error"]["code"]),
        (502, &json!("budget_exhausted"))
    );
    assert_eq!(total().await, 5);
    for server in servers.iter().rev() {
        let (s, left, body) = call(&http, &server.base, "trip-1").await;
        assert_eq!(
            (s, &body["error"]["code"]),
            (502, &json!("budget_exhausted"))
        );
        assert_eq!(left.as_deref().map(|l| &l[..10]), Some("requests=0"));
    }
    assert_eq!(
        total().await,
        5,
        "an exhausted task sends nothing, on either process"
    );

    // A burst of concurrent calls of one new task on both processes.
    let burst = (0..8).map(|i| {
        let (http, base) = (http.clone(), servers[i % 2].base.clone());
        tokio::spawn(async move { call(&http, &base, "trip-burst").await.0 })
    });
    let mut answered = 0;
    for h in burst.collect::<Vec<_>>() {
        if h.await.unwrap() == 200 {
            answered += 1;
        }
    }
    let burst_sent = total().await - 5;
    assert_eq!(
        burst_sent, 5,
        "both processes together send exactly the task's 5 requests, never more"
    );
    assert!(
        answered <= 2,
        "{answered} calls answered with 2 requests each"
    );
}
