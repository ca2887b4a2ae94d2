//! A store that cannot be written fails closed: the caller gets
//! `Unavailable` (no claim, so nothing is sent) and nothing is recorded.

use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{
    BeginOptions, BeginOutcome, Ledger, Limits, OperationRequest, SqliteLedger, SqliteOptions,
};
use serde_json::json;
use sqlx::{ConnectOptions, Executor};

fn request() -> OperationRequest {
    OperationRequest::new(
        "t",
        "K-1",
        "create_shipment",
        &json!({"n": 1}),
        &Limits::default(),
    )
    .expect("request")
}

#[tokio::test]
async fn an_unopenable_file_is_unavailable() {
    let dir = tempfile::tempdir().expect("dir");
    let err = SqliteLedger::open(
        dir.path().join("missing/dir/ledger.db"),
        SqliteOptions::default(),
    )
    .await
    .expect_err("cannot create a file in a missing directory");
    assert!(err.is_unavailable(), "got {err:?}");
}

/// A ledger another process is writing when this one opens: unavailable,
/// saying it is locked (not pointing at permissions that are fine).
#[tokio::test]
async fn a_ledger_locked_at_open_says_so() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("ledger.db");
    // Another process has it open (in WAL mode) and is writing.
    let _first = SqliteLedger::open(&path, SqliteOptions::default())
        .await
        .expect("create");
    let mut other = hold_write_lock(&path).await;
    let opts = SqliteOptions {
        busy_timeout: Duration::from_millis(50),
        ..SqliteOptions::default()
    };
    let err = SqliteLedger::open(&path, opts)
        .await
        .expect_err("no read-write open while locked");
    assert!(err.is_unavailable(), "got {err:?}");
    let text = err.to_string();
    assert!(text.contains("write lock"), "{text}");
    assert!(!text.contains("permissions"), "{text}");
    other.execute("ROLLBACK").await.expect("unlock");
}

/// Another process's connection to `path`, holding its write lock until
/// it is rolled back or dropped.
async fn hold_write_lock(path: &std::path::Path) -> sqlx::SqliteConnection {
    let mut other = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .connect()
        .await
        .expect("other connection");
    other.execute("BEGIN IMMEDIATE").await.expect("lock");
    other
}

async fn locked_store_fails_closed(group_commit: bool) {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("ledger.db");
    let ledger = SqliteLedger::open(
        &path,
        SqliteOptions {
            busy_timeout: Duration::from_millis(50),
            group_commit,
            ..SqliteOptions::default()
        },
    )
    .await
    .expect("open");
    let ledger: Arc<dyn Ledger> = Arc::new(ledger);

    // Another process holds the write lock.
    let mut other = hold_write_lock(&path).await;

    let req = request();
    let opts = BeginOptions::new("a", Duration::from_secs(30));
    let err = ledger
        .begin(&req, &opts)
        .await
        .expect_err("no claim while locked");
    assert!(err.is_unavailable(), "got {err:?}");
    assert_eq!(ledger.get(req.id()).await.expect("reads still work"), None);

    other.execute("ROLLBACK").await.expect("unlock");
    assert!(matches!(
        ledger.begin(&req, &opts).await.expect("begin"),
        BeginOutcome::Started(_)
    ));
}

#[tokio::test]
async fn a_locked_store_fails_closed_with_group_commit() {
    locked_store_fails_closed(true).await;
}

#[tokio::test]
async fn a_locked_store_fails_closed_without_group_commit() {
    locked_store_fails_closed(false).await;
}

/// The ledger file is deleted (or moved away) while the ledger is open.
/// SQLite would go on writing into the unlinked file, every answer a
/// success, and a restart would open an empty ledger: claims and
/// dispatches forgotten, so an action that was sent could be sent again.
/// Instead every write fails closed, and nothing claims the key.
async fn deleted_file_fails_closed(group_commit: bool, moved: bool) {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("ledger.db");
    let ledger = SqliteLedger::open(
        &path,
        SqliteOptions {
            group_commit,
            ..SqliteOptions::default()
        },
    )
    .await
    .expect("open");
    let opts = BeginOptions::new("a", Duration::from_secs(30));
    let first = OperationRequest::new("t", "K-0", "a", &json!({}), &Limits::default()).unwrap();
    assert!(matches!(
        ledger.begin(&first, &opts).await.expect("begin"),
        BeginOutcome::Started(_)
    ));

    let elsewhere = dir.path().join("moved");
    std::fs::create_dir(&elsewhere).expect("dir");
    for suffix in ["", "-wal", "-shm"] {
        let file = dir.path().join(format!("ledger.db{suffix}"));
        if moved {
            std::fs::rename(&file, elsewhere.join(format!("ledger.db{suffix}"))).expect("move");
        } else {
            std::fs::remove_file(&file).expect("delete");
        }
    }

    let req = request();
    let err = ledger
        .begin(&req, &opts)
        .await
        .expect_err("no claim once the ledger file is gone");
    assert!(err.is_unavailable(), "got {err:?}");
    assert!(
        err.to_string().contains("ledger.db"),
        "the error names the file: {err}"
    );
    assert!(!path.exists(), "nothing created at the path: {err}");
}

#[tokio::test]
async fn a_deleted_ledger_file_fails_closed_with_group_commit() {
    deleted_file_fails_closed(true, false).await;
}

#[tokio::test]
async fn a_deleted_ledger_file_fails_closed_without_group_commit() {
    deleted_file_fails_closed(false, false).await;
}

#[tokio::test]
async fn a_moved_ledger_file_fails_closed() {
    deleted_file_fails_closed(true, true).await;
}

/// Only the write-ahead log is deleted while the ledger is open. In WAL
/// mode it holds every commit since the last checkpoint: SQLite would go
/// on committing into the unlinked log, every answer a success, and a
/// crash would lose every one of those records (a confirmed or dispatched
/// operation forgotten, so it could run again). Instead writes fail
/// closed, naming the log; reads still answer.
async fn deleted_wal_fails_closed(group_commit: bool) {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("ledger.db");
    let ledger = SqliteLedger::open(
        &path,
        SqliteOptions {
            group_commit,
            ..SqliteOptions::default()
        },
    )
    .await
    .expect("open");
    let opts = BeginOptions::new("a", Duration::from_secs(30));
    let first = OperationRequest::new("t", "K-0", "a", &json!({}), &Limits::default()).unwrap();
    assert!(matches!(
        ledger.begin(&first, &opts).await.expect("begin"),
        BeginOutcome::Started(_)
    ));
    std::fs::remove_file(dir.path().join("ledger.db-wal")).expect("delete the log");

    let req = request();
    let err = ledger
        .begin(&req, &opts)
        .await
        .expect_err("no claim once the log is gone");
    assert!(err.is_unavailable(), "got {err:?}");
    assert!(
        err.to_string().contains("ledger.db-wal"),
        "the error names the log: {err}"
    );
    assert!(
        !dir.path().join("ledger.db-wal").exists(),
        "no new log made"
    );
}

#[tokio::test]
async fn a_deleted_write_ahead_log_fails_closed_with_group_commit() {
    deleted_wal_fails_closed(true).await;
}

#[tokio::test]
async fn a_deleted_write_ahead_log_fails_closed_without_group_commit() {
    deleted_wal_fails_closed(false).await;
}
