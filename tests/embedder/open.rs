//! `Handover::open` / `HandoverOptions::open`: one call from a validated
//! config to the ledger `[ledger]` names (with its retention and limits),
//! the router and the write gate, on one clock. Every backend is opened for
//! real: a SQLite file, a PostgreSQL schema (when
//! `HANDOVER_TEST_POSTGRES_URL` is set; it fails, not skips, when set but
//! unreachable).

use std::sync::Arc;
use std::time::Duration;

use handover::ledger::{Clock, ListFilter, ManualClock, OperationId, Timestamp};
use handover::router::RouterError;
use handover::{Config, ExecutorOutcome, HandoverOptions, Ledger, PerformOptions, PerformOutcome};
use serde_json::json;

use crate::support::{PROVIDERS, sqlite_ledger};

fn config(ledger: &str) -> Config {
    Config::parse(&format!("{ledger}{PROVIDERS}"), &|_| None).expect("test config")
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(Timestamp::from_millis(1_000_000)))
}

fn ship(id: &'static str) -> impl handover::router::gate::Executor {
    move |_ctx| async move { Ok(ExecutorOutcome::Confirmed(json!({ "id": id }))) }
}

#[tokio::test]
async fn sqlite_from_config_is_durable_on_the_shared_clock_with_the_configured_retention() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let cfg = config(&format!(
        "{}replay_window = \"1h\"\ntombstone_horizon = \"2h\"\n",
        sqlite_ledger(&path)
    ));
    let clock = clock();
    let open = || {
        HandoverOptions::new()
            .clock(clock.clone())
            .env(|_| None)
            .holder("replica-1")
            .open(&cfg)
    };

    let first = open().await.unwrap();
    assert!(path.is_file(), "the ledger file is the one [ledger] names");
    let gate = first.gate();
    let req = gate
        .request("tenant-1", "K-1", "create_shipment", &json!({"sku": "A"}))
        .unwrap();
    let done = gate
        .perform(&req, &ship("rec-1"), PerformOptions::default())
        .await
        .unwrap();
    assert!(matches!(done, PerformOutcome::Confirmed { .. }), "{done:?}");
    let id = OperationId::new("tenant-1", "K-1").unwrap();
    let rec = first.ledger().get(&id).await.unwrap().unwrap();
    assert_eq!(
        rec.created_at,
        clock.now(),
        "the ledger runs on the given clock"
    );
    drop(first);

    // A new process on the same file replays what the first one recorded.
    let second = open().await.unwrap();
    let again = second
        .gate()
        .perform(&req, &ship("rec-2"), PerformOptions::default())
        .await
        .unwrap();
    assert!(matches!(again, PerformOutcome::Replayed(_)), "{again:?}");

    // The configured replay window (1 h), not the 72 h default, applies.
    clock.advance(Duration::from_secs(3601));
    second.ledger().purge().await.unwrap();
    let rec = second.ledger().get(&id).await.unwrap().unwrap();
    assert!(
        rec.tombstone,
        "tombstoned after the configured 1 h: {rec:?}"
    );
}

#[tokio::test]
async fn the_reconciler_shares_the_gate_and_the_clock() {
    let cfg = config(
        "[ledger]\nbackend = \"memory\"\n[actions.create_shipment.lookup]\nvisibility_lag = \"30s\"\ncheck_every = \"10s\"\n",
    );
    let clock = clock();
    let handover = HandoverOptions::new()
        .clock(clock.clone())
        .env(|_| None)
        .open(&cfg)
        .await
        .unwrap();
    let gate = handover.gate();
    let req = gate
        .request("tenant-1", "K-2", "create_shipment", &json!({"sku": "B"}))
        .unwrap();
    let lost = |_ctx| async {
        Err::<ExecutorOutcome, _>(handover::ExecutorError::maybe_sent("connection reset"))
    };
    let out = gate
        .perform(&req, &lost, PerformOptions::default())
        .await
        .unwrap();
    let PerformOutcome::Unresolved(info) = out else {
        panic!("expected unresolved, got {out:?}")
    };
    // Nothing is due until the shared clock reaches the next check.
    let reconciler = handover.reconciler();
    assert_eq!(reconciler.run_once().await.unwrap().checked, 0);
    clock.set(info.next_check_at.expect("the reconciler owns it"));
    assert_eq!(reconciler.run_once().await.unwrap().checked, 1);
}

#[tokio::test]
async fn a_missing_api_key_fails_before_the_ledger_file_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("never.db");
    let text = format!("{}{PROVIDERS}", sqlite_ledger(&path)).replace(
        "model = \"m\"",
        "model = \"m\"\napi_key_env = \"HANDOVER_TEST_UNSET_KEY\"",
    );
    let (cfg, _missing) = Config::check(&text, &|_| None).unwrap();
    let err = HandoverOptions::new()
        .env(|_| None)
        .open(&cfg)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RouterError::MissingApiKey { variable, .. } if variable == "HANDOVER_TEST_UNSET_KEY"),
        "{err:?}"
    );
    assert!(!path.exists(), "nothing was created");
}

#[tokio::test]
async fn a_blank_holder_is_refused_at_open_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("never.db");
    let cfg = config(&sqlite_ledger(&path));
    let err = HandoverOptions::new()
        .env(|_| None)
        .holder(" ")
        .open(&cfg)
        .await
        .unwrap_err();
    assert_eq!(err.field(), Some("holder"), "{err:?}");
    assert!(!path.exists(), "nothing was created");
}

#[tokio::test]
async fn an_unset_postgres_url_variable_is_named() {
    let cfg = config("[ledger]\nbackend = \"postgres\"\nurl_env = \"HANDOVER_TEST_NO_SUCH_URL\"\n");
    let err = HandoverOptions::new()
        .env(|_| None)
        .open(&cfg)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("HANDOVER_TEST_NO_SUCH_URL"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_from_config_opens_the_database_the_variable_names() {
    let Ok(url) = std::env::var("HANDOVER_TEST_POSTGRES_URL") else {
        println!("skipped: HANDOVER_TEST_POSTGRES_URL not set");
        return;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let schema = format!("facade_{}_{nanos}", std::process::id());
    // The ledger lives in its own schema, chosen the way an operator would:
    // the session's search path in the URL.
    let sep = if url.contains('?') { '&' } else { '?' };
    let scoped = format!("{url}{sep}options=-c%20search_path%3D{schema}");
    let admin = handover::ledger::PostgresLedger::connect(
        &url,
        handover::ledger::PostgresOptions {
            schema: Some(schema.clone()),
            ..Default::default()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("HANDOVER_TEST_POSTGRES_URL is set but not usable: {e}"));

    let cfg = config("[ledger]\nbackend = \"postgres\"\nurl_env = \"APP_LEDGER_URL\"\n");
    let handover = HandoverOptions::new()
        .env(move |var| (var == "APP_LEDGER_URL").then(|| scoped.clone()))
        .open(&cfg)
        .await
        .unwrap();
    let req = handover
        .gate()
        .request("tenant-pg", "K-3", "create_shipment", &json!({"sku": "C"}))
        .unwrap();
    let done = handover
        .gate()
        .perform(&req, &ship("rec-3"), PerformOptions::default())
        .await
        .unwrap();
    assert!(matches!(done, PerformOutcome::Confirmed { .. }), "{done:?}");
    // Counted in the database, through a separate connection to the schema.
    let rows = admin.list(&ListFilter::default()).await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    drop(handover);
    drop_schema(&url, &schema).await;
}

async fn drop_schema(url: &str, schema: &str) {
    use sqlx::Connection;
    let mut c = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
    )))
    .execute(&mut c)
    .await
    .unwrap();
}
