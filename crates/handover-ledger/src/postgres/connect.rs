//! Opening a PostgreSQL ledger: options, schema, migrations, pool.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, Executor, PgConnection};

use super::conns::Conns;
use super::error::{describe, describe_migration};

use crate::clock::{Clock, SystemClock};
use crate::error::{LedgerError, ValidationError};
use crate::identity::Limits;
use crate::retention::Retention;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// How to open a [`PostgresLedger`](super::PostgresLedger).
#[derive(Clone, Debug)]
pub struct PostgresOptions {
    /// Time source for leases and retention. Replicas sharing a database
    /// should have synchronised clocks (see `docs/ledger.md`).
    pub clock: Arc<dyn Clock>,
    /// Retention windows.
    pub retention: Retention,
    /// Size/depth limits for results and metadata.
    pub limits: Limits,
    /// Pool size (default 8).
    pub max_connections: u32,
    /// Server-side limit per statement, including waiting for a row lock
    /// (default 5 s). A call that hits it fails with `Unavailable`.
    pub statement_timeout: Duration,
    /// How long to wait for a connection, including (re)connecting (default 5 s).
    pub connect_timeout: Duration,
    /// Client-side deadline of one ledger call, from start to answer,
    /// whatever the network does (default 10 s). Past it the call fails with
    /// `Unavailable` and its connection is closed, so the server rolls back
    /// whatever it has not committed. Without it a partition that swallows
    /// packets on a connection already in use would hold the call until TCP
    /// gives up (minutes). A COMMIT that was already on its way may still
    /// land: see `docs/ledger.md`, "When PostgreSQL does not answer".
    /// It also bounds the open's schema check and migrations (a session
    /// holding a lock on the ledger's tables fails the open).
    pub call_timeout: Duration,
    /// Schema holding the ledger's tables (created if missing); `None` uses
    /// the server's `search_path` (normally `public`). Lowercase ASCII
    /// letters, digits and `_`, at most 63 bytes, not starting with a digit.
    pub schema: Option<String>,
    /// Open only a ledger that is already there, at this version's schema:
    /// create no schema, apply no migration, and refuse (a validation
    /// error on `url`, "not a Handover ledger") a database without one, or
    /// with an older or newer schema (default off). For tools that inspect
    /// or resolve operations, which must not create an empty ledger in a
    /// mistyped database and then report nothing to review. Writes are
    /// not refused.
    pub existing_only: bool,
    /// Open for reading only (default off): everything `existing_only`
    /// checks, and then nothing is ever written. Reads answer as a
    /// read-write ledger would, a lease that has run out read as the
    /// `unknown` it has become but not recorded so (the replica holding
    /// it, or the next read-write call, records that); every write fails
    /// with `Unavailable` ("opened read-only"), and the connections are
    /// read-only on the server too (`default_transaction_read_only`).
    /// For inspection tools such as `handover ops list`.
    pub read_only: bool,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            retention: Retention::default(),
            limits: Limits::default(),
            max_connections: 8,
            statement_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            call_timeout: Duration::from_secs(10),
            schema: None,
            existing_only: false,
            read_only: false,
        }
    }
}

fn validate_schema(schema: &str) -> Result<(), ValidationError> {
    let bad = |why: &str| Err(ValidationError::new("schema", why.to_owned()));
    if schema.is_empty() || schema.len() > 63 {
        return bad("must be 1 to 63 bytes long");
    }
    if schema.starts_with(|c: char| c.is_ascii_digit()) {
        return bad("must not start with a digit");
    }
    if !schema
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return bad("may contain only lowercase ASCII letters, digits and '_'");
    }
    Ok(())
}

fn millis(d: Duration) -> u128 {
    d.as_millis().max(1)
}

/// Connects, creates the schema if asked, applies migrations, opens the pool.
pub(super) async fn open(url: &str, opts: &PostgresOptions) -> Result<Conns, LedgerError> {
    if let Some(s) = &opts.schema {
        validate_schema(s)?;
    }
    if opts.max_connections == 0 {
        return Err(ValidationError::new("max_connections", "must be at least 1").into());
    }
    if opts.statement_timeout.is_zero() {
        return Err(ValidationError::new("statement_timeout", "must be positive").into());
    }
    if opts.call_timeout.is_zero() {
        return Err(ValidationError::new("call_timeout", "must be positive").into());
    }
    // The URL is not echoed: it may carry a password.
    let base = PgConnectOptions::from_str(url)
        .map_err(|_| {
            ValidationError::new(
                "url",
                "not a PostgreSQL connection URL (postgres://user[:password]@host[:port]/database)",
            )
        })?
        .application_name("handover-ledger");
    let base = match &opts.schema {
        Some(s) => base.options([("search_path", s.as_str())]),
        None => base,
    };

    // Schema and migrations on a dedicated connection, closed afterwards, so
    // the migrator's session advisory lock never outlives it.
    let mut conn = tokio::time::timeout(opts.connect_timeout, PgConnection::connect_with(&base))
        .await
        .map_err(|_| LedgerError::unavailable("connecting to PostgreSQL", "timed out"))?
        .map_err(|e| LedgerError::unavailable("connecting to PostgreSQL", describe(&e)))?;
    // Bounded like any ledger call: a session holding a lock on the
    // ledger's tables or the migrator's advisory lock, or a server that
    // stopped answering, fails the open instead of hanging it.
    let Ok(prepared) = tokio::time::timeout(opts.call_timeout, prepare(&mut conn, opts)).await
    else {
        return Err(LedgerError::unavailable(
            "opening the ledger",
            format!(
                "the schema check and migrations did not finish within call_timeout ({:?}); another session may hold a lock on the ledger's tables",
                opts.call_timeout
            ),
        ));
    };
    prepared?;
    let _ = tokio::time::timeout(opts.call_timeout, conn.close()).await;

    let idle_in_tx = opts
        .statement_timeout
        .saturating_mul(2)
        .max(Duration::from_secs(1));
    let pooled = base.options([
        (
            "statement_timeout",
            millis(opts.statement_timeout).to_string(),
        ),
        (
            "idle_in_transaction_session_timeout",
            millis(idle_in_tx).to_string(),
        ),
    ]);
    let pooled = if opts.read_only {
        pooled.options([("default_transaction_read_only", "on")])
    } else {
        pooled
    };
    let conns = Conns::new(pooled, opts.max_connections, opts.connect_timeout);
    // One connection now, so bad settings fail here rather than on first use.
    conns.get().await?.done();
    Ok(conns)
}

/// Checks (`existing_only`) or creates and migrates the ledger's tables.
async fn prepare(conn: &mut PgConnection, opts: &PostgresOptions) -> Result<(), LedgerError> {
    if opts.existing_only || opts.read_only {
        return existing(conn).await;
    }
    if let Some(s) = &opts.schema {
        create_schema(conn, s).await?;
    }
    // sqlx's migrator takes a database-wide advisory lock, so processes
    // that start together apply each migration once.
    MIGRATOR.run(conn).await.map_err(|e| match e {
        // A version in the database that this build does not know.
        sqlx::migrate::MigrateError::VersionMissing(_) => not_a_ledger(crate::schema::NEWER),
        e => LedgerError::unavailable("applying migrations", describe_migration(&e)),
    })
}

/// The ledger at `conn`'s search path, at this version's schema.
async fn existing(conn: &mut PgConnection) -> Result<(), LedgerError> {
    let unavailable =
        |e: sqlx::Error| LedgerError::unavailable("reading the ledger's schema", describe(&e));
    let tables: bool = sqlx::query_scalar(
        "SELECT to_regclass('operations') IS NOT NULL AND to_regclass('attempts') IS NOT NULL AND to_regclass('_sqlx_migrations') IS NOT NULL",
    )
    .fetch_one(&mut *conn)
    .await
    .map_err(unavailable)?;
    if !tables {
        return Err(not_a_ledger(
            "no Handover ledger tables (operations, attempts) in this database and schema; nothing was created",
        ));
    }
    let applied: Option<i64> =
        sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations WHERE success")
            .fetch_one(&mut *conn)
            .await
            .map_err(unavailable)?;
    match crate::schema::version_problem(applied, &MIGRATOR) {
        Some(why) => Err(not_a_ledger(why)),
        None => Ok(()),
    }
}

fn not_a_ledger(why: &str) -> LedgerError {
    ValidationError::new("url", format!("not a Handover ledger: {why}")).into()
}

/// `CREATE SCHEMA IF NOT EXISTS` can still fail with a unique violation
/// when two sessions create the same schema at once; the loser is fine.
async fn create_schema(conn: &mut PgConnection, schema: &str) -> Result<(), LedgerError> {
    // `schema` is validated: lowercase letters, digits, '_'.
    let sql = format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"");
    match conn.execute(sqlx::AssertSqlSafe(sql)).await {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(db))
            if matches!(db.code().as_deref(), Some("23505" | "42P06")) =>
        {
            Ok(())
        }
        Err(e) => Err(LedgerError::unavailable(
            "creating the ledger schema",
            describe(&e),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::validate_schema;

    #[test]
    fn schema_names() {
        assert!(validate_schema("t_0190abcd_ef").is_ok());
        for bad in ["", "9abc", "Upper", "with-dash", "quote\"", &"a".repeat(64)] {
            let e = validate_schema(bad).expect_err(bad);
            assert_eq!(e.field(), "schema");
        }
    }
}
