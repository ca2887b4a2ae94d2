//! An embedder's setup: `Handover` opened from a config text on each
//! backend — memory, a SQLite file in a temp dir, a fresh PostgreSQL schema
//! of `HANDOVER_TEST_POSTGRES_URL` (reached through the URL's search path,
//! as an operator would configure it) — on one manual clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use handover::router::gate::Executor;
use handover::{DispatchContext, ExecutorError, ExecutorOutcome};
use handover_testkit::MockProvider;

use handover::ledger::{ListFilter, ManualClock, OperationId, OperationRecord, Timestamp};
use handover::router::gate::HttpJsonExecutor;
use handover::{Config, Handover, HandoverOptions};
use handover_testkit::MockDestination;
use serde_json::json;

/// Which store `[ledger]` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Memory,
    Sqlite,
    Postgres,
}

/// 2023-11-14, so ages read naturally.
pub(crate) const T0: i64 = 1_700_000_000_000;

/// A `[ledger]` section naming the SQLite file at `path`.
pub(crate) fn sqlite_ledger(path: &std::path::Path) -> String {
    format!(
        "[ledger]\nbackend = \"sqlite\"\npath = {:?}\n",
        path.display().to_string()
    )
}

pub(crate) const PROVIDERS: &str = r#"
[providers.local]
kind = "openai_compatible"
base_url = "http://127.0.0.1:9/v1"
model = "m"
[policies.default]
chain = ["local"]
"#;

/// The secret every lookup header and API key in these tests holds: no
/// Debug, error or log may show it.
pub(crate) const SENTINEL: &str = "sk-SENTINEL-e7b1c04d9a";

/// The process environment the tests give Handover.
pub(crate) fn test_env(var: &str, ledger_url: Option<&str>) -> Option<String> {
    match var {
        "APP_LEDGER_URL" => ledger_url.map(str::to_owned),
        "DEST_TOKEN" | "PROVIDER_KEY" => Some(SENTINEL.to_owned()),
        _ => None,
    }
}

/// One opened application: the facade, its clock and where its store lives.
pub(crate) struct App {
    pub(crate) handover: Handover,
    pub(crate) clock: Arc<ManualClock>,
    pub(crate) config: Config,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) pg: Option<Pg>,
}

/// A PostgreSQL schema of the test database, dropped by [`App::finish`].
pub(crate) struct Pg {
    pub(crate) url: String,
    pub(crate) schema: String,
    pub(crate) scoped_url: String,
}

fn fresh_schema() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "embedder_{}_{nanos}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The test database, if `HANDOVER_TEST_POSTGRES_URL` is set.
pub(crate) fn postgres_url() -> Option<String> {
    std::env::var("HANDOVER_TEST_POSTGRES_URL").ok()
}

pub(crate) async fn exec_sql(url: &str, sql: String) {
    use sqlx::Connection;
    let mut c = sqlx::PgConnection::connect(url)
        .await
        .unwrap_or_else(|e| panic!("HANDOVER_TEST_POSTGRES_URL is set but unreachable: {e}"));
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(&mut c)
        .await
        .unwrap();
}

impl App {
    /// Opens `backend` with `extra` config (actions, `[ledger]` overrides
    /// as `ledger_extra`). `None` when PostgreSQL is asked for but not set.
    pub(crate) async fn open(backend: Backend, ledger_extra: &str, extra: &str) -> Option<App> {
        let dir = tempfile::tempdir().unwrap();
        let mut pg = None;
        let ledger = match backend {
            Backend::Memory => "backend = \"memory\"".to_owned(),
            Backend::Sqlite => format!(
                "backend = \"sqlite\"\npath = {:?}",
                dir.path().join("ledger.db").display().to_string()
            ),
            Backend::Postgres => {
                let Some(url) = postgres_url() else {
                    println!("skipped: HANDOVER_TEST_POSTGRES_URL not set");
                    return None;
                };
                let schema = fresh_schema();
                exec_sql(&url, format!("CREATE SCHEMA \"{schema}\"")).await;
                let sep = if url.contains('?') { '&' } else { '?' };
                let scoped_url = format!("{url}{sep}options=-c%20search_path%3D{schema}");
                pg = Some(Pg {
                    url,
                    schema,
                    scoped_url,
                });
                "backend = \"postgres\"\nurl_env = \"APP_LEDGER_URL\"".to_owned()
            }
        };
        let text = format!("[ledger]\n{ledger}\n{ledger_extra}\n{PROVIDERS}\n{extra}");
        let config =
            Config::parse(&text, &|v| test_env(v, None)).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let clock = Arc::new(ManualClock::new(Timestamp::from_millis(T0)));
        let handover = Self::options(&clock, pg.as_ref())
            .open(&config)
            .await
            .unwrap();
        Some(App {
            handover,
            clock,
            config,
            dir,
            pg,
        })
    }

    fn options(clock: &Arc<ManualClock>, pg: Option<&Pg>) -> HandoverOptions {
        let url = pg.map(|p| p.scoped_url.clone());
        HandoverOptions::new()
            .clock(clock.clone())
            .env(move |var| test_env(var, url.as_deref()))
    }

    /// Another process on the same store (memory: a fresh, empty one).
    pub(crate) async fn reopen(&self) -> Handover {
        Self::options(&self.clock, self.pg.as_ref())
            .open(&self.config)
            .await
            .unwrap()
    }

    pub(crate) async fn record(&self, scope: &str, key: &str) -> Option<OperationRecord> {
        let id = OperationId::new(scope, key).unwrap();
        self.handover.ledger().get(&id).await.unwrap()
    }

    pub(crate) async fn all(&self) -> Vec<OperationRecord> {
        self.handover
            .ledger()
            .list(&ListFilter::default())
            .await
            .unwrap()
    }

    /// Drops the PostgreSQL schema (the other stores go with the temp dir).
    pub(crate) async fn finish(self) {
        let pg = self.pg;
        drop(self.handover);
        if let Some(pg) = pg {
            exec_sql(
                &pg.url,
                format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", pg.schema),
            )
            .await;
        }
    }
}

/// The application's executor: POST the params to the mock destination,
/// with the destination key as `reference`.
pub(crate) fn executor(dest: &MockDestination) -> HttpJsonExecutor {
    HttpJsonExecutor::new(reqwest::Client::new(), dest.records_url())
        .with_reference_field("reference")
}

/// Runs a test body on every backend.
#[macro_export]
macro_rules! per_backend {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                use $crate::support::Backend;
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn memory() { super::$name(Backend::Memory).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() { super::$name(Backend::Sqlite).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() { super::$name(Backend::Postgres).await }
            }
        )*
    };
}

/// An executor whose calls are counted in `calls` and answered by `f`.
pub(crate) fn counted<F>(calls: &Arc<AtomicUsize>, f: F) -> impl Executor
where
    F: Fn(DispatchContext) -> Result<ExecutorOutcome, ExecutorError> + Send + Sync,
{
    let calls = calls.clone();
    move |ctx: DispatchContext| {
        calls.fetch_add(1, Ordering::SeqCst);
        let r = f(ctx);
        async move { r }
    }
}

/// An executor that confirms every call, counting them in `calls`.
pub(crate) fn confirming(calls: &Arc<AtomicUsize>) -> impl Executor {
    counted(calls, |_| {
        Ok(ExecutorOutcome::Confirmed(json!({"id": "rec-1"})))
    })
}

/// `[providers.NAME]` entries for an OpenAI-like and a DeepSeek-like mock,
/// with the sentinel key.
pub(crate) fn two_providers(
    (openai, primary): (&str, &MockProvider),
    (deepseek, fallback): (&str, &MockProvider),
) -> String {
    format!(
        "[providers.{openai}]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-4o-mini\"\napi_key_env = \"PROVIDER_KEY\"\n\
         [providers.{deepseek}]\nkind = \"deepseek\"\nbase_url = \"{}\"\nmodel = \"deepseek-chat\"\napi_key_env = \"PROVIDER_KEY\"\n",
        primary.base_url(),
        fallback.base_url()
    )
}
