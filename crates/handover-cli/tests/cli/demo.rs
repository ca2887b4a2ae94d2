//! `handover demo`: the story's output, its JSON, and a second run on the
//! same ledger file, checked against the ledger file itself.

use crate::support;

use std::sync::Arc;

use handover::ledger::{
    AttemptKind, Ledger, ListFilter, OperationId, SqliteLedger, SqliteOptions, StateKind,
};
use serde_json::Value;
use support::*;

/// The value after `label` on its summary line.
fn summary_value(out: &str, label: &str) -> String {
    out.lines()
        .find(|l| l.trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no summary line {label:?} in:\n{out}"))
        .trim_start()[label.len()..]
        .trim()
        .to_owned()
}

#[test]
fn demo_prints_the_timeline_and_a_summary_with_one_effect_and_no_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    // The default ledger path is ./handover-demo.db.
    let out = ok(&run_in(dir.path(), &["demo"]));
    assert!(dir.path().join("handover-demo.db").is_file());
    assert!(out.contains("Timeline"), "{out}");
    for needle in [
        "gpt-4o-mini answered",
        "proposes create_shipment",
        "[claimed -> dispatched]",
        "connection dropped",
        "[dispatched -> unknown]",
        "failed: overloaded",
        "under a NEW tool-call id",
        "REFUSES to execute it again",
        "visibility lag has not passed",
        "[unknown -> confirmed]",
        "replays the recorded confirmation",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in:\n{out}");
    }
    assert!(!out.contains('\x1b'), "no colour when not on a terminal");
    assert_eq!(summary_value(&out, "effects at destination"), "1");
    assert_eq!(summary_value(&out, "duplicates"), "0");
    assert_eq!(summary_value(&out, "unresolved"), "0");
    assert_eq!(summary_value(&out, "final state"), "confirmed");
    assert_eq!(summary_value(&out, "re-executions refused"), "1");
    assert_eq!(
        summary_value(&out, "destination requests"),
        "1 action, 2 lookups"
    );
}

fn demo_json(ledger: &std::path::Path) -> Value {
    let out = ok(&run(&[
        "demo",
        "--ledger",
        ledger.to_str().unwrap(),
        "--json",
    ]));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[tokio::test]
async fn demo_json_parses_and_a_second_run_on_the_same_ledger_is_safe() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo.db");

    let first = demo_json(&path);
    assert_eq!(first["run"], 1);
    assert_eq!(first["key"], "K-701");
    let s = &first["summary"];
    assert_eq!(s["effects"], 1, "{s}");
    assert_eq!(s["duplicates"], 0);
    assert_eq!(s["unresolved"], 0);
    assert_eq!(s["destination_requests"], 1);
    assert_eq!(s["final_state"], "confirmed");
    let events = first["timeline"].as_array().unwrap();
    let actors: Vec<&str> = events
        .iter()
        .map(|e| e["actor"].as_str().unwrap())
        .collect();
    for actor in [
        "user",
        "provider",
        "ledger",
        "destination",
        "gate",
        "reconciler",
    ] {
        assert!(actors.contains(&actor), "no {actor} event: {actors:?}");
    }
    let at: Vec<u64> = events
        .iter()
        .map(|e| e["at_ms"].as_u64().unwrap())
        .collect();
    assert!(
        at.windows(2).all(|w| w[0] <= w[1]),
        "timeline in time order: {at:?}"
    );
    assert!(
        *at.last().unwrap() >= 30_000,
        "the story spans the 30 s visibility lag"
    );

    let second = demo_json(&path);
    assert_eq!(second["run"], 2);
    assert_eq!(second["key"], "K-701-2");
    assert_eq!(second["summary"]["effects"], 1, "one effect per run");
    assert_eq!(second["summary"]["duplicates"], 0);
    assert_eq!(second["earlier"][0]["key"], "K-701");
    assert_eq!(second["earlier"][0]["state"], "confirmed");
    let said = second["timeline"][0]["what"].as_str().unwrap();
    assert!(
        said.contains("already has customer-42 K-701 confirmed")
            && said.contains("0 request(s) sent"),
        "{said}"
    );

    // The ledger file agrees: two operations, each confirmed after exactly one dispatch.
    let ledger = Arc::new(
        SqliteLedger::open(&path, SqliteOptions::default())
            .await
            .unwrap(),
    );
    let all = ledger.list(&ListFilter::default()).await.unwrap();
    assert_eq!(all.len(), 2);
    for rec in &all {
        assert_eq!(rec.state.kind(), StateKind::Confirmed, "{rec:?}");
        assert_eq!(rec.dispatch_count, 1, "{rec:?}");
    }
    let attempts = ledger
        .attempts(&OperationId::new("customer-42", "K-701").unwrap())
        .await
        .unwrap();
    let dispatches = attempts
        .iter()
        .filter(|a| a.kind == AttemptKind::Dispatch)
        .count();
    assert_eq!(
        dispatches, 1,
        "the replay in run 2 sent nothing: {attempts:?}"
    );
}

#[test]
fn demo_mcp_tells_the_story_through_handover_mcp_with_one_effect() {
    let dir = tempfile::tempdir().unwrap();
    let out = ok(&run_in(dir.path(), &["demo", "--mcp"]));
    for needle in [
        "then the process died before answering",
        "being verified",
        "sends nothing: the server received 0 more create_shipment call(s)",
        "[unknown -> confirmed]",
        "replayed from the ledger",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in:\n{out}");
    }
    assert_eq!(summary_value(&out, "effects at server"), "1");
    assert_eq!(summary_value(&out, "duplicates"), "0");
    assert_eq!(summary_value(&out, "final state"), "confirmed");
    // Counted where it happened: the shipping server's own log.
    let log = dir.path().join("handover-demo.db.mcp-shipments.jsonl");
    let applied = std::fs::read_to_string(&log).unwrap();
    assert_eq!(applied.lines().count(), 1, "{applied}");

    // A second run on the same ledger is a new order, and as safe.
    let json: Value =
        serde_json::from_str(&ok(&run_in(dir.path(), &["demo", "--mcp", "--json"]))).unwrap();
    assert_eq!(json["key"], "create_shipment:A-1002");
    let s = &json["summary"];
    assert_eq!(s["effects"], 1, "{s}");
    assert_eq!(s["duplicates"], 0);
    assert_eq!(s["create_calls"], 1);
    assert_eq!(s["final_state"], "confirmed");
}

#[test]
fn a_second_demo_on_a_ledger_in_play_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("busy.db");
    // A first demo playing on the file holds its advisory lock.
    let first = std::fs::File::create(&ledger).unwrap();
    first.lock().unwrap();
    let out = run(&["demo", "--ledger", ledger.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another `handover demo` is playing"), "{err}");
    assert_eq!(
        std::fs::metadata(&ledger).unwrap().len(),
        0,
        "nothing written"
    );
    // Once it ends, the next demo plays.
    drop(first);
    let out = ok(&run(&["demo", "--ledger", ledger.to_str().unwrap()]));
    assert_eq!(summary_value(&out, "final state"), "confirmed");
}

/// An operation an interrupted earlier run left unknown stays honestly
/// unknown (that run's destination is gone), but it is not this run's
/// broken guarantee: this run succeeds and says how to settle it.
#[tokio::test]
async fn an_earlier_runs_unknown_operation_is_reported_apart_and_does_not_fail_this_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo.db");
    {
        let ledger = SqliteLedger::open(&path, SqliteOptions::default())
            .await
            .unwrap();
        prepare_ops(&ledger, "customer-42").await;
        ledger.close().await;
    }
    let report = demo_json(&path);
    let s = &report["summary"];
    assert_eq!(s["unresolved"], 0, "{s}");
    assert_eq!(s["left_unknown_earlier"], 1, "{s}");
    assert_eq!(s["final_state"], "confirmed", "{s}");
    let text = ok(&run(&["demo", "--ledger", path.to_str().unwrap()]));
    assert!(
        text.contains("An interrupted earlier run left 1 operation(s) unknown"),
        "{text}"
    );
}

/// The demo's story jumps ahead (the visibility lag, the reconciler's
/// schedule) but is dated in the past: the ledger it leaves holds no time
/// after the wall clock, run after run, and each run starts after what the
/// previous one recorded.
#[tokio::test]
async fn the_demos_ledger_holds_no_time_ahead_of_the_wall_clock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo.db");
    for _ in 0..3 {
        demo_json(&path);
    }
    let now_ms = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap();
    let ledger = SqliteLedger::open(&path, SqliteOptions::default())
        .await
        .unwrap();
    let all = ledger.list(&ListFilter::default()).await.unwrap();
    assert_eq!(all.len(), 3);
    let mut previous_end = None;
    for rec in &all {
        let mut times = vec![rec.created_at, rec.updated_at];
        times.extend(rec.state.decided_at());
        for a in ledger.attempts(&rec.id).await.unwrap() {
            times.push(a.sent_at);
            times.extend(a.finished_at);
        }
        for t in &times {
            assert!(
                t.as_millis() <= now_ms,
                "{} {}: {} is {} ms ahead of the wall clock",
                rec.id.scope,
                rec.id.key,
                t.as_millis(),
                t.as_millis() - now_ms
            );
        }
        if let Some(end) = previous_end {
            assert!(rec.created_at > end, "runs follow each other: {rec:?}");
        }
        previous_end = Some(rec.updated_at);
    }
    ledger.close().await;
    // What a user sees: no operation created "in" some time from now.
    let listed = ok(&run(&["ops", "list", "--ledger", path.to_str().unwrap()]));
    // (an operation ahead of the wall clock shows its AGE as "in 30s").
    assert!(!listed.contains("  in "), "{listed}");
    assert!(
        listed.contains("confirmed  8m") || listed.contains("confirmed  9m"),
        "{listed}"
    );
}

/// A ledger path that is not UTF-8 (SQLite takes UTF-8 names) is refused
/// naming the option, and no file is left behind (the demo's lock used to
/// create an empty one before the ledger refused the name).
#[cfg(unix)]
#[test]
fn a_ledger_path_that_is_not_utf8_is_refused_and_leaves_no_file() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let name = std::ffi::OsStr::from_bytes(b"ledger-\xff.db");
    let out = handover()
        .current_dir(dir.path())
        .arg("demo")
        .arg("--ledger")
        .arg(name)
        .output()
        .unwrap();
    let err = failed(&out);
    assert!(err.contains("--ledger") && err.contains("UTF-8"), "{err}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "files left: {left:?}");
}

/// A ledger the demo cannot write (in a directory the user may not write
/// to, or a missing one) is refused at once, naming the path and the
/// cause, and the demo plays nothing. SQLite said only "unable to open
/// database file".
#[test]
fn a_ledger_the_demo_cannot_write_is_named_with_its_cause() {
    let dir = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    let out = run_unprivileged(dir.path(), &["demo"]);
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = failed(&out);
    assert!(
        err.contains("handover-demo.db") && err.contains("Permission denied"),
        "{err}"
    );
    assert!(!err.contains("unable to open database file"), "{err}");
    assert!(stdout(&out).is_empty(), "played: {out:?}");

    let missing = dir.path().join("no-such-dir").join("demo.db");
    let err = failed(&run(&["demo", "--ledger", missing.to_str().unwrap()]));
    assert!(
        err.contains(missing.to_str().unwrap()) && err.contains("No such file or directory"),
        "{err}"
    );
}

/// `--ledger` pointed at a deployment's ledger: the demo would add its
/// shipments to real records. Both stories refuse it, name the ledger and
/// the scope they found, and the ledger's operations are as they were.
#[tokio::test]
async fn a_ledger_holding_operations_the_demo_did_not_write_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("production.db");
    let snapshot = || async {
        let ledger = SqliteLedger::open(&path, SqliteOptions::default())
            .await
            .unwrap();
        let rows: Vec<String> = ledger
            .list(&ListFilter::default())
            .await
            .unwrap()
            .iter()
            .map(|r| format!("{:?} {:?} {:?}", r.id, r.state, r.updated_at))
            .collect();
        ledger.close().await;
        rows
    };
    {
        let ledger = SqliteLedger::open(&path, SqliteOptions::default())
            .await
            .unwrap();
        prepare_ops(&ledger, "acme-prod").await;
        ledger.close().await;
    }
    let before = snapshot().await;
    assert_eq!(before.len(), 2);
    for extra in [&[][..], &["--mcp"][..]] {
        let mut args = vec!["demo", "--ledger", path.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = run(&args);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("holds operations the demo did not write")
                && err.contains("acme-prod")
                && err.contains(path.to_str().unwrap()),
            "{extra:?}: {err}"
        );
        assert_eq!(snapshot().await, before, "{extra:?}: the ledger changed");
    }
}
