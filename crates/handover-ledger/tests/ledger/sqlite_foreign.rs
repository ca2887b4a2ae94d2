//! Opening read-write never adopts a file that is not a Handover ledger:
//! another application's SQLite database or a file that is not SQLite is
//! refused, naming the path, and left byte for byte as it was (no tables
//! added, no journal mode changed). A missing file, an empty one and an
//! SQLite database without tables become a ledger; an existing ledger opens.

use std::path::Path;

use handover_ledger::{Ledger, Limits, OperationRequest, SqliteLedger, SqliteOptions};
use serde_json::json;
use sqlx::{ConnectOptions, Executor};

async fn sqlite_file(path: &Path, sql: &'static str) {
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .connect()
        .await
        .expect("create");
    conn.execute(sql).await.expect("sql");
    sqlx::Connection::close(conn).await.expect("close");
}

async fn refused(path: &Path) -> String {
    let before = std::fs::read(path).expect("read");
    let err = SqliteLedger::open(path, SqliteOptions::default())
        .await
        .expect_err("not a Handover ledger");
    assert!(
        err.to_string().contains("not a Handover ledger"),
        "got {err}"
    );
    assert_eq!(
        std::fs::read(path).expect("read"),
        before,
        "the file is left byte for byte as it was"
    );
    let dir = path.parent().expect("dir");
    let extra: Vec<_> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .filter(|n| n != path.file_name().expect("name"))
        .collect();
    assert!(extra.is_empty(), "no -wal or -shm files: {extra:?}");
    err.to_string()
}

#[tokio::test]
async fn another_applications_database_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("app.db");
    sqlite_file(
        &path,
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers (name) VALUES ('Ada');",
    )
    .await;
    refused(&path).await;
}

#[tokio::test]
async fn a_database_with_a_table_named_like_ours_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("app.db");
    sqlite_file(
        &path,
        "CREATE TABLE operations (id INTEGER PRIMARY KEY, note TEXT); INSERT INTO operations (note) VALUES ('x');",
    )
    .await;
    refused(&path).await;
}

#[tokio::test]
async fn a_file_that_is_not_sqlite_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("notes.db");
    std::fs::write(&path, "my important notes\n").expect("write");
    refused(&path).await;
}

#[tokio::test]
async fn new_empty_and_table_less_files_become_ledgers_and_ledgers_reopen() {
    let dir = tempfile::tempdir().expect("dir");
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, "").expect("write");
    let bare = dir.path().join("bare.db");
    sqlite_file(&bare, "PRAGMA user_version = 0").await;
    let req =
        OperationRequest::new("t", "K-1", "a", &json!({}), &Limits::default()).expect("request");
    for path in [dir.path().join("new.db"), empty, bare] {
        let ledger = SqliteLedger::open(&path, SqliteOptions::default())
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        ledger.approve(&req).await.expect("approve");
        ledger.close().await;
        let again = SqliteLedger::open(&path, SqliteOptions::default())
            .await
            .expect("reopen");
        assert!(again.get(req.id()).await.expect("get").is_some());
    }
}

#[tokio::test]
async fn a_directory_is_refused_saying_so() {
    let dir = tempfile::tempdir().expect("dir");
    let err = SqliteLedger::open(dir.path(), SqliteOptions::default())
        .await
        .expect_err("a directory is not a ledger file");
    assert!(err.to_string().contains("directory"), "got {err}");
}

/// A ledger a newer Handover migrated (a rollback, an old `handover ops`
/// next to a new `serve`): refused, read-only or read-write, as a newer
/// schema (not "unavailable", which a caller would retry forever), and
/// its records left as they were.
#[tokio::test]
async fn a_ledger_with_a_newer_schema_is_refused_saying_so() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("ledger.db");
    let req =
        OperationRequest::new("t", "K-1", "a", &json!({}), &Limits::default()).expect("request");
    let ledger = SqliteLedger::open(&path, SqliteOptions::default())
        .await
        .expect("open");
    ledger.approve(&req).await.expect("approve");
    ledger.close().await;
    sqlite_file(
        &path,
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) VALUES (9999, 'from a newer version', TRUE, x'00', 1)",
    )
    .await;
    let read_only = SqliteOptions {
        read_only: true,
        ..SqliteOptions::default()
    };
    for opts in [read_only, SqliteOptions::default()] {
        let read_only = opts.read_only;
        let err = SqliteLedger::open(&path, opts)
            .await
            .err()
            .unwrap_or_else(|| panic!("read_only={read_only}: opened a newer ledger"));
        assert!(!err.is_unavailable(), "read_only={read_only}: {err}");
        assert_eq!(err.field(), Some("path"), "read_only={read_only}: {err}");
        assert!(
            err.to_string().contains("newer"),
            "read_only={read_only}: {err}"
        );
    }
    sqlite_file(&path, "DELETE FROM _sqlx_migrations WHERE version = 9999").await;
    let again = SqliteLedger::open(&path, SqliteOptions::default())
        .await
        .expect("reopen");
    assert!(again.get(req.id()).await.expect("get").is_some(), "kept");
}

/// SQLite takes UTF-8 file names: another name is refused on `path`,
/// before anything is created (it was `Unavailable`, the class a caller
/// retries, with the driver's message).
#[cfg(unix)]
#[tokio::test]
async fn a_path_that_is_not_utf8_is_refused_and_creates_nothing() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().expect("dir");
    let path = dir
        .path()
        .join(std::ffi::OsStr::from_bytes(b"ledger-\xff.db"));
    let read_only = SqliteOptions {
        read_only: true,
        ..SqliteOptions::default()
    };
    for opts in [SqliteOptions::default(), read_only] {
        let err = SqliteLedger::open(&path, opts).await.expect_err("refused");
        assert_eq!(err.field(), Some("path"), "{err}");
        assert!(err.to_string().contains("UTF-8"), "{err}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("list").collect();
        assert!(left.is_empty(), "files left: {left:?}");
    }
}
