//! The store misbehaves: a SQLite file deleted, made read-only or locked
//! under a running process, a directory that does not exist, PostgreSQL on
//! a closed port or gone after opening. Fail closed: an error that says the
//! ledger is unavailable, and nothing sent.

use handover::router::RouterError;
use handover::{PerformOptions, PerformOutcome};
use handover_testkit::MockDestination;
use serde_json::json;

use crate::support::{App, Backend, executor};

const SHIP: &str = "[actions.ship]\nlease = \"30s\"\ntimeout = \"5s\"\n";

/// `K-1`, performed and confirmed while the store is fine.
async fn confirmed(
    gate: &handover::WriteGate,
    exec: &dyn handover::router::gate::Executor,
) -> handover::OperationRequest {
    let k1 = gate
        .request("tenant-1", "K-1", "ship", &json!({"n": 1}))
        .unwrap();
    let out = gate
        .perform(&k1, exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(matches!(out, PerformOutcome::Confirmed { .. }), "{out:?}");
    k1
}

fn unavailable(r: Result<PerformOutcome, RouterError>) -> RouterError {
    match r {
        Err(e) if e.is_ledger_unavailable() && !e.outcome_unknown() => e,
        other => panic!("expected the ledger to be unavailable, got {other:?}"),
    }
}

/// SQLite in WAL mode keeps committing into a deleted file: every answer
/// would then rest on an inode nobody will open again, and the next
/// process on the path would execute it all a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_sqlite_file_fails_closed() {
    let app = App::open(Backend::Sqlite, "", SHIP).await.unwrap();
    let dest = MockDestination::builder().start().await;
    let gate = app.handover.gate();
    let exec = executor(&dest);
    confirmed(gate, &exec).await;
    for f in ["ledger.db", "ledger.db-wal", "ledger.db-shm"] {
        let _ = std::fs::remove_file(app.dir.path().join(f));
    }
    let k2 = gate
        .request("tenant-1", "K-2", "ship", &json!({"n": 2}))
        .unwrap();
    let err = unavailable(gate.perform(&k2, &exec, PerformOptions::default()).await);
    assert!(
        err.to_string().contains("ledger.db"),
        "names the file: {err}"
    );
    // Another process creates a new, empty ledger at the path: this one
    // still refuses (its file is gone), whatever the path now holds.
    let other = app.reopen().await;
    unavailable(gate.perform(&k2, &exec, PerformOptions::default()).await);
    assert_eq!(dest.action_requests().await, 1, "nothing more was sent");
    drop(other);
    app.finish().await;
}

/// SQLite says only "unable to open database file": the error must say
/// which file, and that its directory is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_directory_is_an_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no-such-dir").join("ledger.db");
    let text = format!(
        "{}{}",
        crate::support::sqlite_ledger(&path),
        crate::support::PROVIDERS
    );
    let config = handover::Config::parse(&text, &|_| None).unwrap();
    let err = handover::HandoverOptions::new()
        .env(|_| None)
        .open(&config)
        .await
        .unwrap_err();
    assert!(err.is_ledger_unavailable(), "{err:?}");
    let text = err.to_string();
    let file = path.display().to_string();
    assert!(text.contains(&file), "names the file: {text}");
    assert!(
        text.contains("no-such-dir does not exist"),
        "says why: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_on_a_closed_port_fails_to_open() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let text = format!(
        "[ledger]\nbackend = \"postgres\"\nurl_env = \"APP_LEDGER_URL\"\n{}",
        crate::support::PROVIDERS
    );
    let config = handover::Config::parse(&text, &|_| None).unwrap();
    let url = format!("postgres://postgres:sentinel-pw-123@127.0.0.1:{port}/x");
    let started = std::time::Instant::now();
    let err = handover::HandoverOptions::new()
        .env(move |v| (v == "APP_LEDGER_URL").then(|| url.clone()))
        .open(&config)
        .await
        .unwrap_err();
    println!("{err} after {:?}", started.elapsed());
    assert!(err.is_ledger_unavailable(), "{err:?}");
    assert!(
        !format!("{err}{err:?}").contains("sentinel-pw-123"),
        "no password in errors"
    );
}

/// `chattr +i`: even root cannot write the file (so the test means the
/// same as root or not). Undone on drop so the temp dir can go.
struct Immutable(Vec<std::path::PathBuf>);

impl Immutable {
    fn set(paths: &[std::path::PathBuf]) -> Option<Immutable> {
        for p in paths {
            let ok = std::process::Command::new("chattr")
                .arg("+i")
                .arg(p)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                return None;
            }
        }
        Some(Immutable(paths.to_vec()))
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .arg(p)
                .status();
        }
    }
}

/// A file made immutable (`chattr +i`) under a running process, and opened
/// by a new one: claims are refused, nothing sent, the record still read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_sqlite_file_fails_closed() {
    let app = App::open(Backend::Sqlite, "", SHIP).await.unwrap();
    let dest = MockDestination::builder().start().await;
    let exec = executor(&dest);
    let gate = app.handover.gate().clone();
    let k1 = confirmed(&gate, &exec).await;
    // Not the -shm file: SQLite maps it, and a mapped page of an immutable
    // file is a SIGBUS, whatever the program.
    let files: Vec<_> = ["ledger.db", "ledger.db-wal"]
        .iter()
        .map(|f| app.dir.path().join(f))
        .filter(|p| p.exists())
        .collect();
    let Some(_guard) = Immutable::set(&files) else {
        println!("skipped: chattr +i is not available here");
        return;
    };
    // The running process refuses to claim, so sends nothing...
    let k2 = gate
        .request("tenant-1", "K-2", "ship", &json!({"n": 2}))
        .unwrap();
    unavailable(gate.perform(&k2, &exec, PerformOptions::default()).await);
    // ...and so does a new one on the same file.
    let reopened = handover::HandoverOptions::new()
        .clock(app.clock.clone())
        .env(|_| None)
        .open(&app.config)
        .await;
    if let Ok(h) = &reopened {
        unavailable(
            h.gate()
                .perform(&k2, &exec, PerformOptions::default())
                .await,
        );
    }
    assert_eq!(dest.action_requests().await, 1, "nothing more was sent");
    // What was recorded is still there to read.
    let k1_again = gate.perform(&k1, &exec, PerformOptions::default()).await;
    assert!(
        matches!(&k1_again, Ok(o) if o.is_confirmed())
            || matches!(&k1_again, Err(e) if e.is_ledger_unavailable()),
        "{k1_again:?}"
    );
}

/// A TCP forwarder to PostgreSQL that can be cut: every connection and the
/// listener go away at once, like a partition or a crashed server.
struct Cuttable {
    port: u16,
    tasks: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Cuttable {
    async fn start(to: std::net::SocketAddr) -> Cuttable {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let tasks = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let t = tasks.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let conn = tokio::spawn(async move {
                    if let Ok(mut out) = tokio::net::TcpStream::connect(to).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                    }
                });
                t.lock().unwrap().push(conn);
            }
        });
        tasks.lock().unwrap().push(accept);
        Cuttable { port, tasks }
    }

    fn cut(&self) {
        for t in self.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_gone_after_opening_fails_closed() {
    let Some(url) = crate::support::postgres_url() else {
        println!("skipped: HANDOVER_TEST_POSTGRES_URL not set");
        return;
    };
    let parsed = reqwest::Url::parse(&url).unwrap();
    let host = parsed.host_str().unwrap().to_owned();
    let pg_port = parsed.port().unwrap_or(5432);
    let to = tokio::net::lookup_host((host.as_str(), pg_port))
        .await
        .unwrap()
        .next()
        .unwrap();
    let proxy = Cuttable::start(to).await;
    let mut via = parsed.clone();
    via.set_host(Some("127.0.0.1")).unwrap();
    via.set_port(Some(proxy.port)).unwrap();
    let schema = format!("embedder_cut_{}", std::process::id());
    crate::support::exec_sql(
        &url,
        format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE; CREATE SCHEMA \"{schema}\""),
    )
    .await;
    let sep = if via.as_str().contains('?') { '&' } else { '?' };
    let scoped = format!("{via}{sep}options=-c%20search_path%3D{schema}");
    let text = format!(
        "[ledger]\nbackend = \"postgres\"\nurl_env = \"APP_LEDGER_URL\"\ncall_timeout = \"2s\"\n{}\n{SHIP}",
        crate::support::PROVIDERS
    );
    let config = handover::Config::parse(&text, &|_| None).unwrap();
    let handover = handover::HandoverOptions::new()
        .env(move |v| (v == "APP_LEDGER_URL").then(|| scoped.clone()))
        .open(&config)
        .await
        .unwrap();
    let dest = MockDestination::builder().start().await;
    let exec = executor(&dest);
    let gate = handover.gate();
    let k1 = confirmed(gate, &exec).await;

    proxy.cut();
    let k2 = gate
        .request("tenant-1", "K-2", "ship", &json!({"n": 2}))
        .unwrap();
    let started = std::time::Instant::now();
    let err = unavailable(gate.perform(&k2, &exec, PerformOptions::default()).await);
    println!("{err} after {:?}", started.elapsed());
    let again = unavailable(gate.perform(&k1, &exec, PerformOptions::default()).await);
    println!("{again}");
    assert_eq!(dest.action_requests().await, 1, "nothing more was sent");
    drop(handover);
    crate::support::exec_sql(&url, format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE")).await;
}

/// Another connection (as another process would) holds SQLite's write
/// lock past the busy timeout: the claim is refused as unavailable, nothing
/// is sent, and once the lock is gone the same key runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_sqlite_file_fails_closed_then_recovers() {
    use sqlx::Connection as _;
    let app = App::open(Backend::Sqlite, "", SHIP).await.unwrap();
    let dest = MockDestination::builder().start().await;
    let exec = executor(&dest);
    let gate = app.handover.gate();
    let path = app.dir.path().join("ledger.db");
    let mut other = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    sqlx::query("BEGIN EXCLUSIVE")
        .execute(&mut other)
        .await
        .unwrap();
    let k1 = gate
        .request("tenant-1", "K-1", "ship", &json!({"n": 1}))
        .unwrap();
    unavailable(gate.perform(&k1, &exec, PerformOptions::default()).await);
    assert_eq!(dest.action_requests().await, 0, "nothing sent");
    sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
    drop(other);
    let out = gate
        .perform(&k1, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(out.is_confirmed(), "{out:?}");
    assert_eq!(dest.effect_count(), 1);
    app.finish().await;
}
