//! `handover ops`: list, show, resolve and purge on a real SQLite ledger
//! file prepared through the ledger library, checked afterwards through the
//! ledger library again (as a fresh process would see it).

use crate::support;

use handover::ledger::{
    AttemptKind, Ledger, OperationId, SqliteLedger, SqliteOptions, State, StateKind,
};
use serde_json::{Value, json};
use std::path::Path;
use support::*;

const SCOPE: &str = "customer-42";

async fn open(path: &Path) -> SqliteLedger {
    SqliteLedger::open(path, SqliteOptions::default())
        .await
        .unwrap()
}

async fn prepare(path: &Path) {
    let ledger = open(path).await;
    prepare_ops(&ledger, SCOPE).await;
    ledger.close().await;
}

async fn state_and_attempts(path: &Path, key: &str) -> (State, usize) {
    let ledger = open(path).await;
    let id = OperationId::new(SCOPE, key).unwrap();
    let rec = ledger.get(&id).await.unwrap().unwrap();
    let n = ledger.attempts(&id).await.unwrap().len();
    ledger.close().await;
    (rec.state, n)
}

#[tokio::test]
async fn list_and_show_an_unknown_operation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    prepare(&path).await;
    let p = path.to_str().unwrap();

    let out = ok(&run(&["ops", "list", "--ledger", p, "--state", "unknown"]));
    assert!(
        out.contains("K-1") && out.contains("review: destination outcome unknown"),
        "{out}"
    );
    assert!(!out.contains("K-2"), "filtered by state: {out}");

    let all = ok(&run(&["ops", "list", "--ledger", p]));
    assert!(all.contains("K-1") && all.contains("K-2"), "{all}");

    let json: Value = serde_json::from_str(&ok(&run(&[
        "ops", "list", "--ledger", p, "--state", "unknown", "--scope", SCOPE, "--json",
    ])))
    .unwrap();
    let items = json.as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["id"]["key"], "K-1");
    assert_eq!(items[0]["state"]["state"], "unknown");

    let old = ok(&run(&[
        "ops",
        "list",
        "--ledger",
        p,
        "--state",
        "unknown",
        "--older-than",
        "1h",
    ]));
    assert!(old.contains("no operations match"), "{old}");
    let other = ok(&run(&[
        "ops",
        "list",
        "--ledger",
        p,
        "--scope",
        "customer-7",
    ]));
    assert!(other.contains("no operations match"), "{other}");

    let show = ok(&run(&["ops", "show", "--ledger", p, SCOPE, "K-1"]));
    for needle in [
        "create_shipment",
        r#""order_id":"1042""#,
        "unknown since",
        "owner           review",
        "dispatch",
        "connection reset after sending",
        "call_abc",
    ] {
        assert!(show.contains(needle), "missing {needle:?} in:\n{show}");
    }
    let shown: Value = serde_json::from_str(&ok(&run(&[
        "ops", "show", "--ledger", p, SCOPE, "K-1", "--json",
    ])))
    .unwrap();
    assert_eq!(shown["operation"]["params"]["sku"], "MUG");
    assert_eq!(shown["attempts"].as_array().unwrap().len(), 1);

    let err = failed(&run(&["ops", "show", "--ledger", p, SCOPE, "K-404"]));
    assert!(err.contains("no operation"), "{err}");
    let err = failed(&run(&["ops", "list", "--ledger", p, "--state", "lost"]));
    assert!(err.contains("--state"), "{err}");
}

#[tokio::test]
async fn resolve_needs_evidence_and_actor_and_refusals_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    prepare(&path).await;
    let p = path.to_str().unwrap();
    let before = state_and_attempts(&path, "K-1").await;
    assert_eq!(before.0.kind(), StateKind::Unknown);

    // No evidence, empty evidence, no actor: refused, nothing written.
    for args in [
        vec!["--confirmed", "--actor", "alice"],
        vec!["--confirmed", "--actor", "alice", "--evidence", "  "],
        vec!["--rejected", "--evidence", "carrier export has no shipment"],
        vec!["--evidence", "x", "--actor", "alice"],
        vec![
            "--confirmed",
            "--actor",
            "alice",
            "--evidence",
            "x",
            "--result",
            "{not json",
        ],
    ] {
        let mut full = vec!["ops", "resolve", "--ledger", p, SCOPE, "K-1"];
        full.extend(args.iter().copied());
        failed(&run(&full));
        assert_eq!(
            state_and_attempts(&path, "K-1").await,
            before,
            "{args:?} changed the ledger"
        );
    }
    let err = failed(&run(&[
        "ops",
        "resolve",
        "--ledger",
        p,
        SCOPE,
        "K-1",
        "--confirmed",
        "--actor",
        "alice",
    ]));
    assert!(err.contains("evidence"), "{err}");
    // A field the decision has no place for is refused, never dropped (a
    // confirmation records a result, a rejection a reason), as the
    // gateway's admin endpoint refuses it.
    for (decision, field, value) in [
        ("--confirmed", "--reason", "seen in the carrier portal"),
        ("--rejected", "--result", r#"{"shipment":"SHP-88"}"#),
    ] {
        let err = failed(&run(&[
            "ops",
            "resolve",
            "--ledger",
            p,
            SCOPE,
            "K-1",
            decision,
            field,
            value,
            "--evidence",
            "x",
            "--actor",
            "alice",
        ]));
        assert!(
            err.contains(&format!("'{field} ")) && err.contains("cannot be used with"),
            "{err}"
        );
        assert_eq!(state_and_attempts(&path, "K-1").await, before, "{field}");
    }
    // A result that cannot be recorded exactly as written: a member named
    // twice (which one counts?), a number a parser would round. Refused
    // naming where, as the gateway refuses the same text.
    let confirm = |result: &str| {
        let args = ["--confirmed", "--evidence", "x", "--actor", "alice"];
        let mut full = vec!["ops", "resolve", "--ledger", p, SCOPE, "K-1"];
        full.extend(args.iter().chain(&["--result", result]));
        run(&full)
    };
    for (result, at) in [
        (
            r#"{"shipment": "SHP-1", "shipment": "SHP-2"}"#,
            "result.shipment",
        ),
        (r#"{"weight": 3.14159265358979323846}"#, "result.weight"),
    ] {
        let err = failed(&confirm(result));
        assert!(err.contains(at), "{result}: {err}");
        assert_eq!(state_and_attempts(&path, "K-1").await, before, "{result}");
    }

    // With evidence and actor: confirmed, recorded as an operator attempt.
    let out = ok(&run(&[
        "ops",
        "resolve",
        "--ledger",
        p,
        SCOPE,
        "K-1",
        "--confirmed",
        "--evidence",
        "carrier portal shows SHP-88",
        "--actor",
        "alice",
        "--result",
        r#"{"shipment":"SHP-88"}"#,
    ]));
    assert!(out.contains("unknown -> confirmed"), "{out}");
    let (state, attempts) = state_and_attempts(&path, "K-1").await;
    let State::Confirmed {
        result, evidence, ..
    } = &state
    else {
        panic!("{state:?}")
    };
    assert_eq!(result, &json!({"shipment": "SHP-88"}));
    assert_eq!(evidence.as_deref(), Some("carrier portal shows SHP-88"));
    assert_eq!(attempts, before.1 + 1);
    {
        let ledger = open(&path).await;
        let log = ledger
            .attempts(&OperationId::new(SCOPE, "K-1").unwrap())
            .await
            .unwrap();
        let last = log.last().unwrap();
        assert_eq!(
            (last.kind, last.executor.as_str()),
            (AttemptKind::Operator, "alice")
        );
        ledger.close().await;
    }

    // A transition the state machine forbids is refused and changes nothing.
    for key in ["K-1", "K-2"] {
        let before = state_and_attempts(&path, key).await;
        let err = failed(&run(&[
            "ops",
            "resolve",
            "--ledger",
            p,
            SCOPE,
            key,
            "--rejected",
            "--evidence",
            "changed my mind",
            "--actor",
            "bob",
        ]));
        assert!(
            err.contains("confirmed") && err.contains("refused"),
            "{err}"
        );
        assert_eq!(state_and_attempts(&path, key).await, before);
    }
    let err = failed(&run(&[
        "ops",
        "resolve",
        "--ledger",
        p,
        SCOPE,
        "K-404",
        "--rejected",
        "--evidence",
        "e",
        "--actor",
        "bob",
    ]));
    assert!(err.contains("no operation"), "{err}");
}

#[tokio::test]
async fn ops_open_the_ledger_a_config_names_and_never_create_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    prepare(&path).await;
    let config = dir.path().join("handover.toml");
    std::fs::write(
        &config,
        "[ledger]\nbackend = \"sqlite\"\npath = \"ledger.db\"\nreplay_window = \"1h\"\n",
    )
    .unwrap();

    // Relative to the current directory, as the library opens it.
    let out = ok(&run_in(
        dir.path(),
        &[
            "ops",
            "list",
            "--config",
            "handover.toml",
            "--state",
            "unknown",
        ],
    ));
    assert!(out.contains("K-1"), "{out}");
    let purge = ok(&run_in(
        dir.path(),
        &["ops", "purge", "--config", "handover.toml"],
    ));
    assert!(
        purge.contains("replay window 1h") && purge.contains("tombstoned 0"),
        "{purge}"
    );
    // Retention is the configuration's: a bare file would get the
    // defaults, which could drop results the deployment keeps longer.
    let before = std::fs::read(&path).unwrap();
    let err = failed(&run(&[
        "ops",
        "purge",
        "--ledger",
        path.to_str().unwrap(),
        "--json",
    ]));
    assert!(
        err.contains("needs --config") && err.contains("nothing was changed"),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before, "nothing was changed");

    let missing = dir.path().join("missing.db");
    let err = failed(&run(&[
        "ops",
        "list",
        "--ledger",
        missing.to_str().unwrap(),
    ]));
    assert!(err.contains("no ledger file"), "{err}");
    assert!(!missing.exists(), "an inspection never creates a ledger");

    let memory = dir.path().join("memory.toml");
    std::fs::write(&memory, "[ledger]\nbackend = \"memory\"\n").unwrap();
    let err = failed(&run(&["ops", "list", "--config", memory.to_str().unwrap()]));
    assert!(err.contains("memory"), "{err}");

    // Neither or both sources: a usage error.
    failed(&run(&["ops", "list"]));
    failed(&run(&[
        "ops", "list", "--ledger", "a.db", "--config", "b.toml",
    ]));
}

/// Another application's SQLite database, an empty file, a missing one:
/// `ops list|show` refuse them and leave them exactly as they were (no
/// tables added, nothing created); `resolve|purge` too.
#[tokio::test]
async fn ops_refuse_files_that_are_not_handover_ledgers_and_change_nothing() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("crm.db");
    let url = format!("sqlite://{}?mode=rwc", foreign.display());
    let mut c = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::raw_sql("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers (name) VALUES ('Ada');")
        .execute(&mut c)
        .await
        .unwrap();
    c.close().await.unwrap();
    let before = std::fs::read(&foreign).unwrap();
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let text = dir.path().join("notes.db");
    std::fs::write(&text, b"not a database at all, just some text").unwrap();

    for cmd in [
        vec!["ops", "list"],
        vec!["ops", "show", "s", "k"],
        vec![
            "ops",
            "resolve",
            "s",
            "k",
            "--rejected",
            "--evidence",
            "e",
            "--actor",
            "a",
        ],
    ] {
        for (file, expect) in [
            (&foreign, "not a Handover ledger"),
            (&empty, "is empty"),
            (&text, "not a Handover ledger"),
        ] {
            let mut args = cmd.clone();
            args.extend(["--ledger", file.to_str().unwrap()]);
            let err = failed(&run(&args));
            assert!(err.contains(expect), "{args:?}: {err}");
            assert!(!err.contains("code:"), "driver code in {err}");
        }
    }
    assert_eq!(
        std::fs::read(&foreign).unwrap(),
        before,
        "the foreign file changed"
    );
    assert_eq!(
        std::fs::read(&empty).unwrap(),
        b"",
        "the empty file changed"
    );
}

/// `ops list|show` write nothing, not even a lease expiry they display:
/// the database file and its write-ahead log are byte for byte the same
/// afterwards.
#[tokio::test]
async fn ops_list_and_show_read_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let ledger = SqliteLedger::open(
        &path,
        SqliteOptions {
            clock: long_ago(),
            ..SqliteOptions::default()
        },
    )
    .await
    .unwrap();
    dispatched_by_a_vanished_holder(&ledger, SCOPE, "K-9").await;
    ledger.close().await;
    let files = || {
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            // SQLite's shared-memory index: every reader marks it.
            .filter(|p| !p.to_string_lossy().ends_with("-shm"))
            .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
            .collect();
        v.sort();
        v
    };
    let before = files();

    let listed = ok(&run(&[
        "ops",
        "list",
        "--ledger",
        path.to_str().unwrap(),
        "--json",
    ]));
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed[0]["state"]["state"], "unknown", "{listed}");
    let shown = ok(&run(&[
        "ops",
        "show",
        "--ledger",
        path.to_str().unwrap(),
        SCOPE,
        "K-9",
    ]));
    assert!(shown.contains("unknown"), "{shown}");
    let after = files();
    let names = |v: &[(String, Vec<u8>)]| {
        v.iter()
            .map(|(n, b)| format!("{n} {}", b.len()))
            .collect::<Vec<_>>()
    };
    assert!(
        after == before,
        "a read-only inspection changed the ledger's files: {:?} -> {:?}",
        names(&before),
        names(&after)
    );

    // `purge` opens it read-write and records the expiry.
    purge_by_config(&path);
    assert!(files() != before);
}

/// A claim whose lease ran out holds nothing: the list says so instead of
/// naming its old holder as if it still held the operation.
#[tokio::test]
async fn an_expired_claim_is_not_shown_as_held() {
    use handover::ledger::{
        BeginOptions, BeginOutcome, Limits, ManualClock, OperationRequest, Timestamp,
    };
    use std::sync::Arc;
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    // Claimed long ago (the ledger's clock), with a 30 s lease.
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_000_000)));
    let options = SqliteOptions {
        clock,
        ..SqliteOptions::default()
    };
    let ledger = SqliteLedger::open(&path, options).await.unwrap();
    let req = OperationRequest::new(
        SCOPE,
        "K-9",
        "create_shipment",
        &json!({"n": 1}),
        &Limits::default(),
    )
    .unwrap();
    let opts = BeginOptions::new("agent-a", Duration::from_secs(30));
    let BeginOutcome::Started(_claim) = ledger.begin(&req, &opts).await.unwrap() else {
        panic!("fresh ledger")
    };
    ledger.close().await;

    let out = ok(&run(&["ops", "list", "--ledger", path.to_str().unwrap()]));
    assert!(out.contains("claim by agent-a expired"), "{out}");
    assert!(!out.contains("held by agent-a"), "{out}");
}

#[tokio::test]
async fn ledger_text_is_printed_escaped_and_json_keeps_it_exact() {
    use handover::ledger::{BeginOptions, BeginOutcome, Dispatch, Limits, OperationRequest};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let reason = "r\n\x1b[31mFAKE";
    let evidence = "HTTP 422\r\n  state           confirmed\u{202e}\x07";
    {
        let ledger = open(&path).await;
        let req = OperationRequest::new(
            SCOPE,
            "K-3",
            "create_shipment",
            &json!({"note": "\u{9b}2J"}),
            &Limits::default(),
        )
        .unwrap();
        let opts = BeginOptions::new("agent\x1b[2Ja", std::time::Duration::from_secs(30));
        let BeginOutcome::Started(claim) = ledger.begin(&req, &opts).await.unwrap() else {
            panic!("fresh ledger")
        };
        let dispatch = Dispatch {
            executor: "exec\nutor".into(),
            metadata: None,
        };
        ledger.mark_dispatched(&claim, dispatch).await.unwrap();
        ledger
            .reject(&claim, reason.into(), Some(evidence.into()))
            .await
            .unwrap();
        ledger.close().await;
    }
    let p = path.to_str().unwrap();
    for out in [
        ok(&run(&["ops", "list", "--ledger", p])),
        ok(&run(&["ops", "show", "--ledger", p, SCOPE, "K-3"])),
    ] {
        for raw in ['\x1b', '\x07', '\r', '\u{202e}', '\u{9b}'] {
            assert!(!out.contains(raw), "{raw:?} printed raw: {out:?}");
        }
        assert!(
            !out.contains("\nFAKE"),
            "a reason cannot start a line: {out:?}"
        );
        assert!(out.contains(r"r\n\u{1b}[31mFAKE"), "{out:?}");
    }
    let show = ok(&run(&["ops", "show", "--ledger", p, SCOPE, "K-3"]));
    assert!(
        show.contains(r"HTTP 422\r\n  state           confirmed\u{202e}\u{7}"),
        "{show:?}"
    );
    assert!(show.contains(r"by exec\nutor"), "{show:?}");
    assert!(show.contains(r"\u{9b}2J"), "params too: {show:?}");

    let json: Value = serde_json::from_str(&ok(&run(&[
        "ops", "show", "--ledger", p, SCOPE, "K-3", "--json",
    ])))
    .unwrap();
    assert_eq!(
        json["operation"]["state"]["reason"], reason,
        "JSON is exact"
    );
    assert_eq!(json["operation"]["state"]["evidence"], evidence);
    assert_eq!(json["attempts"][0]["executor"], "exec\nutor");
}

/// A configuration naming the SQLite ledger at `path` (default retention).
fn sqlite_config(path: &Path) -> String {
    format!(
        "[ledger]\nbackend = \"sqlite\"\npath = {:?}\n",
        path.to_str().unwrap()
    )
}

/// `ops purge` on the SQLite ledger at `path`, through a configuration
/// naming it (purge applies a configuration's retention only).
fn purge_by_config(path: &Path) -> String {
    let conf = tempfile::tempdir().unwrap();
    let config = conf.path().join("handover.toml");
    std::fs::write(&config, sqlite_config(path)).unwrap();
    ok(&run(&[
        "ops",
        "purge",
        "--config",
        config.to_str().unwrap(),
    ]))
}

/// The files next to `path` (`-wal`, `-shm`, a journal).
fn beside(path: &Path) -> Vec<String> {
    let name = path.file_name().unwrap().to_str().unwrap().to_owned();
    let mut found: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_str().unwrap().to_owned())
        .filter(|n| n.starts_with(&name) && *n != name)
        .collect();
    found.sort();
    found
}

/// `ops resolve` and `ops purge` close the ledger as `serve` and `demo`
/// do: the file alone then holds every record (an operator copying the
/// `.db` after resolving has the resolution in the copy), with no write-
/// ahead log left beside it, refused or not.
#[tokio::test]
async fn resolve_and_purge_leave_the_file_alone_holding_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    prepare(&path).await;
    let ledger = path.to_str().unwrap();
    let resolve = |key: &'static str| {
        run(&[
            "ops",
            "resolve",
            "--ledger",
            ledger,
            SCOPE,
            key,
            "--rejected",
            "--evidence",
            "no shipment in the carrier export",
            "--actor",
            "bob",
        ])
    };
    failed(&resolve("K-2"));
    assert_eq!(beside(&path), Vec::<String>::new(), "after a refusal");
    ok(&resolve("K-1"));
    assert_eq!(beside(&path), Vec::<String>::new(), "after a resolution");
    purge_by_config(&path);
    assert_eq!(beside(&path), Vec::<String>::new(), "after a purge");

    let copy = dir.path().join("copy").join("ledger.db");
    std::fs::create_dir(copy.parent().unwrap()).unwrap();
    std::fs::copy(&path, &copy).unwrap();
    let (state, _) = state_and_attempts(&copy, "K-1").await;
    assert!(matches!(state, State::Rejected { .. }), "{state:?}");
}
