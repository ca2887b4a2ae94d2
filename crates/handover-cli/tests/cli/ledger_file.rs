//! The SQLite ledger file as an operator handles it: after a clean stop of
//! `handover serve` (SIGTERM) or a `handover demo` run, the `.db` file
//! alone, copied without its `-wal` and `-shm`, holds every record; and
//! `serve` refuses to start on a ledger it cannot write, naming the file.

use crate::support;

use std::path::Path;

use serde_json::{Value, json};
use support::{is_root, ok, run, run_unprivileged, signal, start_with};

const TOKEN: &str = "example-client-token";
const TOKEN_SHA256: &str = "50f88aa457efc9d22985f9f0efd335f30b8fd187a999b69a70f11e6a8be39f4f";

fn config(dir: &Path, ledger: &Path) -> std::path::PathBuf {
    let config = dir.join("handover.toml");
    std::fs::write(
        &config,
        format!(
            "[ledger]\nbackend = \"sqlite\"\npath = \"{}\"\n\n[providers.primary]\nkind = \"openai_compatible\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n\n[policies.default]\nchain = [\"primary\"]\n\n[gateway]\nlisten = \"127.0.0.1:0\"\n\n[gateway.clients.app]\ntoken_sha256 = \"{TOKEN_SHA256}\"\nscope = \"tenant-1\"\n",
            ledger.display(),
        ),
    )
    .unwrap();
    config
}

/// `ledger` copied alone (no `-wal`, no `-shm`) into a fresh directory.
fn copy_alone(ledger: &Path) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.db");
    std::fs::copy(ledger, &copy).unwrap();
    let copy = copy.display().to_string();
    (dir, copy)
}

async fn post(base: &str, path: &str, key: Option<&str>, body: Value) -> Value {
    let mut req = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .bearer_auth(TOKEN)
        .json(&body);
    if let Some(key) = key {
        req = req.header("Idempotency-Key", key);
    }
    let resp = req.send().await.unwrap();
    assert!(resp.status().is_success(), "{path}: {}", resp.status());
    resp.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_sigterm_the_ledger_file_alone_holds_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.db");
    let config = config(dir.path(), &ledger);
    let (mut child, base, _lines) =
        tokio::task::spawn_blocking(move || start_with(&config, &[], None, &[]))
            .await
            .unwrap();
    let begin = json!({"action": "ship", "params": {"order": 42}});
    let started = post(&base, "/v1/operations", Some("K-701"), begin).await;
    let epoch = started["claim"]["epoch"].as_u64().unwrap();
    post(
        &base,
        "/v1/operations/K-701/dispatch",
        None,
        json!({"epoch": epoch}),
    )
    .await;
    let outcome = json!({"epoch": epoch, "outcome": "confirmed", "result": {"id": "S-1"}});
    post(&base, "/v1/operations/K-701/outcome", None, outcome).await;

    signal(&child, "TERM");
    let exit = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(exit.success(), "serve exited with {exit:?}");
    let wal = dir.path().join("ledger.db-wal");
    assert_eq!(
        wal.metadata().map(|m| m.len()).unwrap_or(0),
        0,
        "the write-ahead log was folded into the file"
    );
    let (_copy_dir, copy) = copy_alone(&ledger);
    let out = ok(&run(&["ops", "list", "--ledger", &copy]));
    assert!(
        out.contains("K-701") && out.contains("confirmed"),
        "the copy holds the record:\n{out}"
    );
}

#[test]
fn after_a_demo_the_ledger_file_alone_holds_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("demo.db");
    ok(&run(&["demo", "--ledger", ledger.to_str().unwrap()]));
    let (_copy_dir, copy) = copy_alone(&ledger);
    let out = ok(&run(&["ops", "list", "--ledger", &copy]));
    assert!(
        out.contains("K-701") && out.contains("confirmed"),
        "the copy holds the demo's operation:\n{out}"
    );
}

/// `serve` on a ledger file it may open but not write (root-owned, mode
/// 0644, run as an unprivileged user: SQLite then opens it read-only
/// without a word) exits 1 naming the file and the cause, instead of
/// answering `/healthz` ok and every write 503; `ops list` still reads it.
/// As root, the unprivileged user is `nobody` through `setpriv`.
#[test]
fn serve_refuses_a_ledger_it_cannot_write() {
    let dir = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
    let ledger = dir.path().join("ledger.db");
    let config = config(dir.path(), &ledger);
    // A real ledger, closed cleanly (no -wal left), then made read-only.
    ok(&run(&["demo", "--ledger", ledger.to_str().unwrap()]));
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ledger, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();

    let unprivileged = |args: &[&str]| run_unprivileged(dir.path(), args);

    let out = unprivileged(&["serve", "--config", config.to_str().unwrap()]);
    let err = support::stderr(&out);
    assert!(!out.status.success(), "serve started:\n{err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("listening"), "{err}");
    assert!(
        err.contains(&ledger.display().to_string()),
        "the error names the file and the cause:\n{err}"
    );
    assert!(err.contains("readonly"), "{err}");

    let listed = unprivileged(&["ops", "list", "--ledger", ledger.to_str().unwrap()]);
    assert!(
        listed.status.success(),
        "ops list reads a read-only ledger:\n{}",
        support::stderr(&listed)
    );
}

/// A Handover ledger left in WAL mode (by a process that did not close
/// it) in a directory the reader may not write cannot be read (SQLite
/// needs a `-shm` file for it): `ops list` says so, instead of calling a
/// good ledger "not a SQLite database". Only as root (through `setpriv`).
#[test]
fn a_ledger_in_wal_mode_that_cannot_be_read_here_is_not_called_foreign() {
    if !is_root() {
        println!("skipped: needs root to run `ops list` as nobody");
        return;
    }
    let dir = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
    let ledger = dir.path().join("ledger.db");
    ok(&run(&["demo", "--ledger", ledger.to_str().unwrap()]));
    // The demo closed it (rollback journal); back to WAL mode, which
    // stays in the file's header once its connection is gone.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mode: String = rt.block_on(async {
        use sqlx::{ConnectOptions, Connection};
        let mut c = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&ledger)
            .connect()
            .await
            .unwrap();
        let mode = sqlx::query_scalar("PRAGMA journal_mode=WAL")
            .fetch_one(&mut c)
            .await
            .unwrap();
        c.close().await.unwrap();
        mode
    });
    assert_eq!(mode, "wal");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = run_unprivileged(
        dir.path(),
        &["ops", "list", "--ledger", ledger.to_str().unwrap()],
    );
    let err = support::stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("not a SQLite database"), "{err}");
    assert!(err.contains("WAL mode") && err.contains("-shm"), "{err}");
}
