//! Shared helpers of the PostgreSQL tests: the `HANDOVER_TEST_POSTGRES_URL`
//! gate and one fresh schema per ledger, dropped when the test ends.
//!
//! Unset → the test prints `skipped: HANDOVER_TEST_POSTGRES_URL not set` and
//! passes; set but unreachable → the test fails.

use handover_ledger::{PostgresLedger, PostgresOptions};
use sqlx::Connection;

/// The variable naming the test database.
pub(crate) const URL_VAR: &str = "HANDOVER_TEST_POSTGRES_URL";

/// The test database URL, or `None` after printing the skip notice.
pub(crate) fn url() -> Option<String> {
    match std::env::var(URL_VAR) {
        Ok(u) if !u.trim().is_empty() => Some(u),
        _ => {
            println!("skipped: {URL_VAR} not set");
            None
        }
    }
}

/// Gate for `conformance_tests!(make, enabled = …)`.
pub(crate) fn enabled() -> bool {
    url().is_some()
}

/// The URL, for code that only runs when [`enabled`] said yes.
pub(crate) fn require_url() -> String {
    std::env::var(URL_VAR).expect("HANDOVER_TEST_POSTGRES_URL is set")
}

/// A fresh schema name (`t_<uuid>`).
pub(crate) fn fresh_schema() -> String {
    format!("t_{}", uuid::Uuid::now_v7().simple())
}

/// Drops its schema (and everything in it) when dropped.
#[derive(Debug)]
pub(crate) struct SchemaGuard {
    pub(crate) url: String,
    pub(crate) schema: String,
}

impl Drop for SchemaGuard {
    fn drop(&mut self) {
        let (url, schema) = (self.url.clone(), self.schema.clone());
        // Drop may run inside a runtime: use a thread with its own.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                if let Ok(mut c) = sqlx::PgConnection::connect(&url).await {
                    let sql = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
                    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                        .execute(&mut c)
                        .await;
                    let _ = c.close().await;
                }
            });
        })
        .join();
    }
}

/// A ledger on a fresh schema of the test database. Panics (fails the test)
/// if the database cannot be reached.
pub(crate) async fn ledger(opts: PostgresOptions) -> (PostgresLedger, SchemaGuard) {
    let url = require_url();
    let schema = fresh_schema();
    let ledger = on_schema(&url, &schema, opts).await;
    (ledger, SchemaGuard { url, schema })
}

/// Another ledger (another pool, as another replica would have) on `schema`.
pub(crate) async fn on_schema(url: &str, schema: &str, opts: PostgresOptions) -> PostgresLedger {
    PostgresLedger::connect(
        url,
        PostgresOptions {
            schema: Some(schema.to_owned()),
            ..opts
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{URL_VAR} is set but the database is not usable: {e}"))
}

/// Two replicas (two pools) on one fresh schema, both on `clock`, two
/// connections each.
pub(crate) async fn replicas(
    clock: &handover_ledger::ManualClock,
) -> (PostgresLedger, PostgresLedger, SchemaGuard) {
    let opts = || PostgresOptions {
        clock: std::sync::Arc::new(clock.clone()),
        max_connections: 2,
        ..PostgresOptions::default()
    };
    let (a, guard) = ledger(opts()).await;
    let b = on_schema(&guard.url, &guard.schema, opts()).await;
    (a, b, guard)
}

/// A plain connection with `search_path` set to `schema`, for inspecting rows.
pub(crate) async fn inspect(url: &str, schema: &str) -> sqlx::PgConnection {
    let mut c = sqlx::PgConnection::connect(url).await.expect("connect");
    let sql = format!("SET search_path TO \"{schema}\"");
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(&mut c)
        .await
        .expect("search_path");
    c
}
