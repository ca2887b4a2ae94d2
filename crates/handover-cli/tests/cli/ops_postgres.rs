//! `handover ops` on a PostgreSQL ledger named by the config (`url_env`),
//! in a fresh schema of the database in `HANDOVER_TEST_POSTGRES_URL`.
//! Unset: skipped with a notice; set but unreachable: the test fails.

use crate::support;

use handover::ledger::{Ledger, OperationId, PostgresLedger, PostgresOptions, State, StateKind};
use support::*;

const URL_VAR: &str = "HANDOVER_TEST_POSTGRES_URL";
/// The variable the test's config names; set only for the binary.
const CLI_URL_VAR: &str = "HANDOVER_CLI_TEST_LEDGER_URL";

/// A fresh schema in the database of `HANDOVER_TEST_POSTGRES_URL`,
/// dropped afterwards; `None` (the test skipped, with a notice) when unset.
fn pg_schema(prefix: &str) -> Option<SchemaGuard> {
    let Some(url) = std::env::var(URL_VAR).ok().filter(|u| !u.trim().is_empty()) else {
        println!("skipped: {URL_VAR} not set");
        return None;
    };
    let schema = fresh_schema(prefix);
    Some(SchemaGuard { url, schema })
}

/// A ledger in `guard`'s schema; a database that is set but unusable fails the test.
async fn ledger_on(guard: &SchemaGuard, opts: PostgresOptions) -> PostgresLedger {
    let opts = PostgresOptions {
        schema: Some(guard.schema.clone()),
        ..opts
    };
    PostgresLedger::connect(&guard.url, opts)
        .await
        .unwrap_or_else(|e| panic!("{URL_VAR} is set but the database is not usable: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_list_show_and_resolve_on_a_postgres_ledger() {
    let Some(guard) = pg_schema("cli") else {
        return;
    };
    let (url, schema) = (guard.url.clone(), guard.schema.clone());
    let ledger = ledger_on(&guard, PostgresOptions::default()).await;
    prepare_ops(&ledger, "tenant-pg").await;

    let pg = PgOps::new(&url, &schema);
    let config = pg.config.clone();
    let ops = |args: &[&str]| pg.run(args);

    let out = ok(&ops(&["list", "--config", &config, "--state", "unknown"]));
    assert!(out.contains("K-1") && !out.contains("K-2"), "{out}");
    assert!(
        out.contains(&format!("postgres ${CLI_URL_VAR}")),
        "names the source, never the URL: {out}"
    );
    assert!(!out.contains(&url), "the URL may carry a password: {out}");
    let show = ok(&ops(&["show", "--config", &config, "tenant-pg", "K-1"]));
    assert!(show.contains("connection reset after sending"), "{show}");

    let id = OperationId::new("tenant-pg", "K-1").unwrap();
    let attempts_before = ledger.attempts(&id).await.unwrap().len();
    failed(&ops(&[
        "resolve",
        "--config",
        &config,
        "tenant-pg",
        "K-1",
        "--rejected",
        "--actor",
        "bob",
    ]));
    assert_eq!(
        ledger.get(&id).await.unwrap().unwrap().state.kind(),
        StateKind::Unknown
    );
    assert_eq!(ledger.attempts(&id).await.unwrap().len(), attempts_before);

    ok(&ops(&[
        "resolve",
        "--config",
        &config,
        "tenant-pg",
        "K-1",
        "--rejected",
        "--evidence",
        "no shipment in the carrier export",
        "--actor",
        "bob",
    ]));
    let State::Rejected { evidence, .. } = ledger.get(&id).await.unwrap().unwrap().state else {
        panic!("not rejected")
    };
    assert_eq!(
        evidence.as_deref(),
        Some("no shipment in the carrier export")
    );
    assert_eq!(
        ledger.attempts(&id).await.unwrap().len(),
        attempts_before + 1
    );

    // Without the URL variable: a clear error naming it.
    let out = handover()
        .env_remove(CLI_URL_VAR)
        .args(["ops", "list", "--config", &config])
        .output()
        .unwrap();
    let err = failed(&out);
    assert!(err.contains(CLI_URL_VAR), "{err}");
}

/// `ops list|show` on PostgreSQL write nothing, not even a lease expiry
/// they display as `unknown`: the stored row is still `dispatched`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_list_and_show_record_nothing_on_a_postgres_ledger() {
    let Some(guard) = pg_schema("cliro") else {
        return;
    };
    let (url, schema) = (guard.url.clone(), guard.schema.clone());
    let opts = PostgresOptions {
        clock: long_ago(),
        ..PostgresOptions::default()
    };
    let ledger = ledger_on(&guard, opts).await;
    dispatched_by_a_vanished_holder(&ledger, "tenant-ro", "K-9").await;
    ledger.close().await;

    let pg = PgOps::new(&url, &schema);
    let listed = ok(&pg.run(&["list", "--config", &pg.config, "--json"]));
    assert!(
        listed.contains("\"unknown\""),
        "read as it has become: {listed}"
    );
    let shown = ok(&pg.run(&["show", "--config", &pg.config, "tenant-ro", "K-9"]));
    assert!(shown.contains("unknown"), "{shown}");

    use sqlx::Connection as _;
    let mut db = sqlx::PgConnection::connect(&with_search_path(&url, &schema))
        .await
        .unwrap();
    let stored: String = sqlx::query_scalar("SELECT state FROM operations WHERE key = 'K-9'")
        .fetch_one(&mut db)
        .await
        .unwrap();
    assert_eq!(stored, "dispatched", "an inspection recorded the expiry");
}

/// Runs `SQL` on the test database.
/// `handover ops …` on the ledger in `schema`, through a config that names
/// the database by `url_env`, as a deployment's would.
struct PgOps {
    _dir: tempfile::TempDir,
    config: String,
    cli_url: String,
}

impl PgOps {
    fn new(url: &str, schema: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("pg.toml");
        std::fs::write(
            &config,
            format!("[ledger]\nbackend = \"postgres\"\nurl_env = \"{CLI_URL_VAR}\"\n"),
        )
        .unwrap();
        Self {
            config: config.to_str().unwrap().to_owned(),
            cli_url: with_search_path(url, schema),
            _dir: dir,
        }
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        let mut full = vec!["ops"];
        full.extend_from_slice(args);
        handover()
            .env(CLI_URL_VAR, &self.cli_url)
            .args(&full)
            .output()
            .unwrap()
    }
}

async fn exec(url: &str, sql: String) {
    use sqlx::Connection;
    let mut c = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(&mut c)
        .await
        .unwrap();
    c.close().await.unwrap();
}

async fn tables_in(url: &str, schema: &str) -> i64 {
    use sqlx::Connection;
    let mut c = sqlx::PgConnection::connect(url).await.unwrap();
    let n = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = $1",
    )
    .bind(schema)
    .fetch_one(&mut c)
    .await
    .unwrap();
    c.close().await.unwrap();
    n
}

/// As with a SQLite path, `ops` never creates a ledger: a config whose URL
/// names a database (here a schema) without one is refused and gains no
/// tables (an operator would otherwise read "no operations" from a
/// mistyped URL), and a ledger a newer version migrated is refused as such.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_never_create_or_migrate_a_postgres_ledger() {
    let Some(guard) = pg_schema("cli_empty") else {
        return;
    };
    let (url, schema) = (guard.url.clone(), guard.schema.clone());
    exec(&url, format!("CREATE SCHEMA \"{schema}\"")).await;
    let pg = PgOps::new(&url, &schema);
    let config = pg.config.clone();
    let ops = |args: &[&str]| pg.run(args);
    let resolve = [
        "resolve",
        "--config",
        &config,
        "t",
        "K-1",
        "--rejected",
        "--evidence",
        "e",
        "--actor",
        "a",
    ];
    for args in [
        &["list", "--config", &config][..],
        &["purge", "--config", &config],
        &resolve,
    ] {
        let err = failed(&ops(args));
        assert!(err.contains("not a Handover ledger"), "{args:?}: {err}");
        assert_eq!(tables_in(&url, &schema).await, 0, "{args:?} created tables");
    }

    PostgresLedger::connect(
        &url,
        PostgresOptions {
            schema: Some(schema.clone()),
            ..PostgresOptions::default()
        },
    )
    .await
    .unwrap();
    ok(&ops(&["list", "--config", &config]));
    exec(
        &url,
        format!(
            "INSERT INTO \"{schema}\"._sqlx_migrations (version, description, success, checksum, execution_time) VALUES (9999, 'from a newer version', TRUE, '\\x00', 1)"
        ),
    )
    .await;
    for args in [
        &["list", "--config", &config][..],
        &["purge", "--config", &config],
    ] {
        let err = failed(&ops(args));
        assert!(err.contains("schema is newer"), "{args:?}: {err}");
    }
}
