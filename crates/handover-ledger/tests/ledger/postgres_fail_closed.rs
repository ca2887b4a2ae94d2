//! Fail closed: when the ledger's store cannot be reached or a transaction
//! is cut off, the call fails with `Unavailable` and nothing is reported as
//! started, dispatched or confirmed that was not committed.
//!
//! * a closed port → `Unavailable` at connect;
//! * bad settings → a validation error naming the field (never echoing a password);
//! * `pg_terminate_backend` of the ledger's connection while its
//!   transaction waits on a row lock (during begin, mark_dispatched,
//!   confirm) → `Unavailable`, and the row is exactly as before;
//! * a statement that waits past `statement_timeout` → `Unavailable`;
//! * the network to the server is cut between claim and dispatch (a small
//!   in-test TCP proxy) → `mark_dispatched` fails, so nothing is sent, and
//!   the operation stays pre-dispatch (re-claimable after its lease).

use crate::postgres_support;

use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use handover_ledger::{
    BeginOptions, BeginOutcome, Claim, Dispatch, Ledger, Limits, ListFilter, ManualClock,
    OperationRequest, PostgresLedger, PostgresOptions, ReleaseReason, State, StateKind, Timestamp,
};
use postgres_support as pg;
use serde_json::json;
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection, Row};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

const LEASE: Duration = Duration::from_secs(30);

fn request(key: &str) -> OperationRequest {
    OperationRequest::new(
        "fail",
        key,
        "create_shipment",
        &json!({"key": key}),
        &Limits::default(),
    )
    .expect("request")
}

fn dispatch() -> Dispatch {
    Dispatch {
        executor: "exec".into(),
        metadata: None,
    }
}

async fn claim(l: &PostgresLedger, req: &OperationRequest) -> Claim {
    match l
        .begin(req, &BeginOptions::new("exec", LEASE))
        .await
        .expect("begin")
    {
        BeginOutcome::Started(c) => c,
        other => panic!("expected started, got {other:?}"),
    }
}

#[tokio::test]
async fn closed_port_is_unavailable() {
    // A port nobody listens on: bound, not listening, held for the test
    // (a port closed again could be taken by another test's server).
    let closed = tokio::net::TcpSocket::new_v4().expect("socket");
    closed.bind("127.0.0.1:0".parse().unwrap()).expect("bind");
    let port = closed.local_addr().expect("addr").port();
    let url = format!("postgres://postgres@127.0.0.1:{port}/handover");
    let e = PostgresLedger::connect(
        &url,
        PostgresOptions {
            connect_timeout: Duration::from_secs(2),
            ..PostgresOptions::default()
        },
    )
    .await
    .expect_err("nothing listens there");
    assert!(e.is_unavailable(), "{e}");
}

/// A server that refuses the connection (here: no such database) is
/// unavailable, in the server's words: no driver wrapper, no "at line N"
/// (a line of PostgreSQL's C source, which sqlx's text appends).
#[tokio::test]
async fn a_refused_connection_is_reported_in_the_servers_words() {
    let Some(url) = pg::url() else { return };
    let (server, _) = url.rsplit_once('/').expect("a URL with a database");
    let e = PostgresLedger::connect(
        &format!("{server}/handover_no_such_database"),
        PostgresOptions::default(),
    )
    .await
    .expect_err("no such database");
    assert!(e.is_unavailable(), "{e}");
    assert_eq!(
        e.to_string(),
        "ledger store unavailable while connecting to PostgreSQL: database \"handover_no_such_database\" does not exist"
    );
}

#[tokio::test]
async fn bad_settings_name_the_field() {
    let e = PostgresLedger::connect(
        "postgres://app:s3cret@db:notaport/ledger",
        PostgresOptions::default(),
    )
    .await
    .expect_err("bad url");
    assert_eq!(e.field(), Some("url"));
    assert!(!e.to_string().contains("s3cret"), "{e}");
    let e = PostgresLedger::connect(
        "postgres://app@127.0.0.1:1/ledger",
        PostgresOptions {
            schema: Some("Robert'); DROP TABLE".into()),
            ..PostgresOptions::default()
        },
    )
    .await
    .expect_err("bad schema");
    assert_eq!(e.field(), Some("schema"));
}

/// A connection of the test that locks the row of `req` until dropped or
/// rolled back, and can terminate whoever waits on it.
struct Locker {
    conn: PgConnection,
    /// Outside the lock's transaction: a transaction sees one snapshot of
    /// `pg_stat_activity` for its whole duration.
    watcher: PgConnection,
}

impl Locker {
    async fn lock(url: &str, schema: &str, req: &OperationRequest) -> Self {
        let mut conn = pg::inspect(url, schema).await;
        sqlx::raw_sql("BEGIN")
            .execute(&mut conn)
            .await
            .expect("begin");
        let n = sqlx::query("SELECT 1 FROM operations WHERE scope = $1 AND key = $2 FOR UPDATE")
            .bind(req.id().scope.as_str())
            .bind(req.id().key.as_str())
            .fetch_all(&mut conn)
            .await
            .expect("lock")
            .len();
        assert_eq!(n, 1, "row to lock exists");
        let watcher = pg::inspect(url, schema).await;
        Self { conn, watcher }
    }

    /// Waits (polling the server, no sleeps) until a backend is blocked by
    /// this lock, then terminates it.
    async fn terminate_waiter(&mut self) {
        let me: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut self.conn)
            .await
            .expect("pid");
        let waiter = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let pid: Option<i32> = sqlx::query_scalar(
                    "SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid)) LIMIT 1",
                )
                .bind(me)
                .fetch_optional(&mut self.watcher)
                .await
                .expect("poll");
                if let Some(pid) = pid {
                    return pid;
                }
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("a ledger transaction waits on the lock");
        let done: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
            .bind(waiter)
            .fetch_one(&mut self.watcher)
            .await
            .expect("terminate");
        assert!(done);
    }

    async fn release(mut self) {
        sqlx::raw_sql("ROLLBACK")
            .execute(&mut self.conn)
            .await
            .expect("rollback");
        let _ = self.conn.close().await;
        let _ = self.watcher.close().await;
    }
}

/// The call's result, which must come promptly once its backend is
/// terminated: not retried on another connection until the lock (or the
/// statement timeout) lets it through.
async fn answer<T>(call: tokio::task::JoinHandle<T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .expect("a terminated call fails at once")
        .expect("task")
}

async fn setup() -> Option<(Arc<PostgresLedger>, ManualClock, pg::SchemaGuard)> {
    pg::url()?;
    let clock = ManualClock::new(Timestamp::from_millis(1_700_000_000_000));
    let (ledger, guard) = pg::ledger(PostgresOptions {
        clock: Arc::new(clock.clone()),
        max_connections: 2,
        // Long, so a terminated call cannot pass by timing out instead
        // (see `answer`).
        statement_timeout: Duration::from_secs(120),
        ..PostgresOptions::default()
    })
    .await;
    Some((Arc::new(ledger), clock, guard))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_begin_claims_nothing() {
    let Some((ledger, _clock, guard)) = setup().await else {
        return;
    };
    let req = request("K-begin");
    let first = claim(&ledger, &req).await;
    ledger
        .release(&first, ReleaseReason::Abandoned)
        .await
        .expect("release");
    let mut locker = Locker::lock(&guard.url, &guard.schema, &req).await;
    let l = ledger.clone();
    let r = req.clone();
    let call = tokio::spawn(async move { l.begin(&r, &BeginOptions::new("exec", LEASE)).await });
    locker.terminate_waiter().await;
    let e = answer(call).await.expect_err("terminated");
    assert!(e.is_unavailable(), "{e}");
    locker.release().await;
    let rec = ledger.get(req.id()).await.expect("get").expect("stored");
    assert_eq!(rec.state, State::Planned);
    assert_eq!(rec.epoch.0, 1, "no claim was committed");
    // The ledger recovers on a fresh connection.
    assert_eq!(claim(&ledger, &req).await.epoch.0, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_dispatch_records_nothing() {
    let Some((ledger, clock, guard)) = setup().await else {
        return;
    };
    let req = request("K-dispatch");
    let c = claim(&ledger, &req).await;
    let mut locker = Locker::lock(&guard.url, &guard.schema, &req).await;
    let (l, cc) = (ledger.clone(), c.clone());
    let call = tokio::spawn(async move { l.mark_dispatched(&cc, dispatch()).await });
    locker.terminate_waiter().await;
    let e = answer(call).await.expect_err("terminated");
    assert!(e.is_unavailable(), "{e}");
    locker.release().await;
    // Not dispatched (so the caller sent nothing); re-claimable after the lease.
    let rec = ledger.get(req.id()).await.expect("get").expect("stored");
    assert_eq!(rec.state.kind(), StateKind::Claimed);
    assert_eq!(rec.dispatch_count, 0);
    assert!(
        ledger
            .attempts(req.id())
            .await
            .expect("attempts")
            .is_empty()
    );
    clock.advance(LEASE);
    assert_eq!(claim(&ledger, &req).await.epoch.0, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_confirm_is_not_confirmed() {
    let Some((ledger, _clock, guard)) = setup().await else {
        return;
    };
    let req = request("K-confirm");
    let c = claim(&ledger, &req).await;
    ledger
        .mark_dispatched(&c, dispatch())
        .await
        .expect("dispatch");
    let mut locker = Locker::lock(&guard.url, &guard.schema, &req).await;
    let (l, cc) = (ledger.clone(), c.clone());
    let call = tokio::spawn(async move { l.confirm(&cc, json!({"shipment": "S-1"}), None).await });
    locker.terminate_waiter().await;
    let e = answer(call).await.expect_err("terminated");
    assert!(e.is_unavailable(), "{e}");
    locker.release().await;
    let rec = ledger.get(req.id()).await.expect("get").expect("stored");
    assert_eq!(rec.state.kind(), StateKind::Dispatched, "not confirmed");
    // The holder may record the outcome it has once the store is back.
    let done = ledger
        .confirm(&c, json!({"shipment": "S-1"}), None)
        .await
        .expect("confirm");
    assert_eq!(done.state.kind(), StateKind::Confirmed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_timeout_is_unavailable() {
    if pg::url().is_none() {
        return;
    }
    let (ledger, guard) = pg::ledger(PostgresOptions {
        statement_timeout: Duration::from_millis(300),
        max_connections: 2,
        ..PostgresOptions::default()
    })
    .await;
    let req = request("K-timeout");
    let c = claim(&ledger, &req).await;
    let locker = Locker::lock(&guard.url, &guard.schema, &req).await;
    let e = ledger
        .mark_dispatched(&c, dispatch())
        .await
        .expect_err("lock wait exceeds the statement timeout");
    assert!(e.is_unavailable(), "{e}");
    // The server's words, without sqlx's "error returned from database"
    // and the "at line N" of PostgreSQL's own source.
    assert_eq!(
        e.to_string(),
        "ledger store unavailable while writing an operation: canceling statement due to statement timeout"
    );
    locker.release().await;
    let rec = ledger.get(req.id()).await.expect("get").expect("stored");
    assert_eq!(rec.state.kind(), StateKind::Claimed);
    assert_eq!(rec.dispatch_count, 0);
}

/// A TCP proxy to the test server that can be cut (all connections and the
/// listener dropped: the port then refuses connections).
struct Proxy {
    port: u16,
    tasks: Arc<Mutex<Vec<AbortHandle>>>,
}

impl Proxy {
    async fn start(upstream: (String, u16)) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let tasks: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let t = tasks.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut down, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let h = tokio::spawn(async move {
                    if let Ok(mut up) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                    }
                });
                t.lock().expect("lock").push(h.abort_handle());
            }
        });
        tasks.lock().expect("lock").push(accept.abort_handle());
        Self { port, tasks }
    }

    fn cut(&self) {
        for h in self.tasks.lock().expect("lock").drain(..) {
            h.abort();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_cut_between_claim_and_dispatch_sends_nothing() {
    let Some(url) = pg::url() else {
        return;
    };
    let o = PgConnectOptions::from_str(&url).expect("test url");
    let proxy = Proxy::start((o.get_host().to_owned(), o.get_port())).await;
    let via_proxy = format!(
        "postgres://{}@127.0.0.1:{}/{}",
        o.get_username(),
        proxy.port,
        o.get_database().unwrap_or("postgres")
    );
    let clock = ManualClock::new(Timestamp::from_millis(1_700_000_000_000));
    let schema = pg::fresh_schema();
    let _guard = pg::SchemaGuard {
        url: url.clone(),
        schema: schema.clone(),
    };
    let opts = || PostgresOptions {
        clock: Arc::new(clock.clone()),
        connect_timeout: Duration::from_millis(500),
        ..PostgresOptions::default()
    };
    let remote = pg::on_schema(&via_proxy, &schema, opts()).await;
    let direct = pg::on_schema(&url, &schema, opts()).await;

    let req = request("K-cut");
    let c = claim(&remote, &req).await;
    proxy.cut();
    let e = remote
        .mark_dispatched(&c, dispatch())
        .await
        .expect_err("the network is gone");
    assert!(e.is_unavailable(), "{e}");
    let e = remote
        .begin(&request("K-other"), &BeginOptions::new("exec", LEASE))
        .await
        .expect_err("no claim without the store");
    assert!(e.is_unavailable(), "{e}");

    // Another replica: still pre-dispatch, nothing recorded as sent.
    let rec = direct.get(req.id()).await.expect("get").expect("stored");
    assert_eq!(rec.state.kind(), StateKind::Claimed);
    assert_eq!(rec.dispatch_count, 0);
    assert!(
        direct
            .get(request("K-other").id())
            .await
            .expect("get")
            .is_none()
    );
    let mut c2 = pg::inspect(&url, &schema).await;
    let n: i64 = sqlx::query("SELECT COUNT(*) FROM attempts")
        .fetch_one(&mut c2)
        .await
        .expect("count")
        .get(0);
    assert_eq!(n, 0);
    clock.advance(LEASE);
    assert_eq!(claim(&direct, &req).await.epoch.0, 2);
}

/// Opening waits for nothing without a deadline: another session holding
/// a lock on the ledger's migration table (a replica stuck mid-migration,
/// an operator's open transaction) fails the open within `call_timeout`,
/// as `Unavailable`, whether it would migrate or only check the schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_blocked_by_a_lock_fails_within_call_timeout() {
    let Some(url) = pg::url() else {
        return;
    };
    let (_ledger, guard) = pg::ledger(PostgresOptions::default()).await;
    let mut holder = pg::inspect(&url, &guard.schema).await;
    sqlx::raw_sql("BEGIN; LOCK TABLE _sqlx_migrations IN ACCESS EXCLUSIVE MODE")
        .execute(&mut holder)
        .await
        .expect("lock");
    for existing_only in [false, true] {
        let opts = PostgresOptions {
            schema: Some(guard.schema.clone()),
            call_timeout: Duration::from_millis(500),
            existing_only,
            ..PostgresOptions::default()
        };
        let open = PostgresLedger::connect(&url, opts);
        // The outer bound only turns a hang into a failure of this test.
        let err = tokio::time::timeout(Duration::from_secs(30), open)
            .await
            .unwrap_or_else(|_| panic!("existing_only={existing_only}: the open hung"))
            .expect_err("no ledger while its tables are locked");
        assert!(err.is_unavailable(), "existing_only={existing_only}: {err}");
        assert!(err.to_string().contains("call_timeout"), "{err}");
    }
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut holder)
        .await
        .expect("unlock");
}

/// `read_only`: a lease that ran out reads as the `unknown` it has become,
/// by `get` and by `list`, but nothing is recorded (the stored row is still
/// the dispatched claim), and every write is refused as `Unavailable`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_ledger_answers_reads_and_records_nothing() {
    let Some((ledger, clock, guard)) = setup().await else {
        return;
    };
    let req = request("R-1");
    let c = claim(&ledger, &req).await;
    ledger
        .mark_dispatched(&c, dispatch())
        .await
        .expect("dispatch");
    clock.advance(LEASE * 2);

    let reader = pg::on_schema(
        &guard.url,
        &guard.schema,
        PostgresOptions {
            clock: Arc::new(clock.clone()),
            read_only: true,
            ..PostgresOptions::default()
        },
    )
    .await;
    let seen = reader
        .get(req.id())
        .await
        .expect("get")
        .expect("the operation");
    assert_eq!(seen.state.kind(), StateKind::Unknown, "{seen:?}");
    let listed = reader.list(&ListFilter::default()).await.expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state.kind(), StateKind::Unknown);
    assert_eq!(reader.attempts(req.id()).await.expect("attempts").len(), 1);

    let refused = reader
        .begin(&request("R-2"), &BeginOptions::new("exec", LEASE))
        .await
        .expect_err("a write on a read-only ledger");
    assert!(refused.is_unavailable(), "{refused}");
    assert!(reader.purge().await.expect_err("purge").is_unavailable());

    let mut db = pg::inspect(&guard.url, &guard.schema).await;
    let rows: Vec<(String, String)> = sqlx::query_as("SELECT key, state FROM operations")
        .fetch_all(&mut db)
        .await
        .expect("rows");
    assert_eq!(
        rows,
        vec![("R-1".to_owned(), "dispatched".to_owned())],
        "a read recorded the expiry, or a refused write landed"
    );
}
