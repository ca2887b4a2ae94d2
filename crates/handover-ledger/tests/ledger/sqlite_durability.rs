//! Durability at each boundary: after claim, after dispatch, after outcome,
//! drop every handle and reopen the same file. The state is exactly what was
//! committed; a dispatched operation becomes `unknown` once its lease passes;
//! nothing that may have been sent becomes claimable.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{
    AttemptOutcome, AttemptRecord, BeginOptions, BeginOutcome, Claim, Dispatch, Ledger, Limits,
    ManualClock, OperationRecord, OperationRequest, SqliteLedger, SqliteOptions, State, StateKind,
    Terminal, Timestamp,
};
use serde_json::json;

const LEASE: Duration = Duration::from_secs(30);

async fn open(path: &Path, clock: &ManualClock) -> SqliteLedger {
    SqliteLedger::open(
        path,
        SqliteOptions {
            clock: Arc::new(clock.clone()),
            ..SqliteOptions::default()
        },
    )
    .await
    .expect("open")
}

fn request() -> OperationRequest {
    OperationRequest::new(
        "tenant-1",
        "K-701",
        "create_shipment",
        &json!({"order": 42, "carrier": "dhl"}),
        &Limits::default(),
    )
    .expect("request")
}

fn opts(holder: &str) -> BeginOptions {
    BeginOptions::new(holder, LEASE)
}

async fn snapshot(l: &SqliteLedger, r: &OperationRequest) -> (OperationRecord, Vec<AttemptRecord>) {
    let rec = l.get(r.id()).await.expect("get").expect("record");
    (rec, l.attempts(r.id()).await.expect("attempts"))
}

async fn claim(l: &SqliteLedger, r: &OperationRequest) -> Claim {
    match l.begin(r, &opts("primary")).await.expect("begin") {
        BeginOutcome::Started(c) => c,
        other => panic!("expected started, got {other:?}"),
    }
}

fn primary_dispatch() -> Dispatch {
    Dispatch {
        executor: "primary".into(),
        metadata: Some(json!({"tool_call_id": "call_1"})),
    }
}

async fn dispatch(l: &SqliteLedger, c: &Claim) {
    l.mark_dispatched(c, primary_dispatch())
        .await
        .expect("dispatch");
}

/// Claimed and dispatched: in two commits, or in the write gate's one.
async fn in_flight(l: &SqliteLedger, r: &OperationRequest, combined: bool) -> Claim {
    if !combined {
        let c = claim(l, r).await;
        dispatch(l, &c).await;
        return c;
    }
    match l
        .begin_dispatched(r, &opts("primary"), primary_dispatch())
        .await
        .expect("begin_dispatched")
    {
        BeginOutcome::Started(c) => c,
        other => panic!("expected started, got {other:?}"),
    }
}

fn setup() -> (tempfile::TempDir, std::path::PathBuf, ManualClock) {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("ledger.db");
    (
        dir,
        path,
        ManualClock::new(Timestamp::from_millis(1_700_000_000_000)),
    )
}

#[tokio::test]
async fn after_claim_the_claim_survives_and_lapses_back_to_claimable() {
    let (_dir, path, clock) = setup();
    let r = request();
    let (c, before) = {
        let l = open(&path, &clock).await;
        let c = claim(&l, &r).await;
        (c, snapshot(&l, &r).await)
    }; // dropped without close: nothing but the file remains

    let l = open(&path, &clock).await;
    assert_eq!(snapshot(&l, &r).await, before);
    assert!(
        matches!(before.0.state, State::Claimed { ref holder, epoch, .. } if holder == "primary" && epoch == c.epoch)
    );
    assert!(matches!(
        l.begin(&r, &opts("fallback")).await.expect("begin"),
        BeginOutcome::InProgress { .. }
    ));
    clock.advance(LEASE);
    // Nothing was sent: the lapsed claim may be taken over, with a new epoch.
    match l.begin(&r, &opts("fallback")).await.expect("begin") {
        BeginOutcome::Started(c2) => assert_eq!(c2.epoch.0, c.epoch.0 + 1),
        other => panic!("expected started, got {other:?}"),
    }
    assert!(
        l.mark_dispatched(
            &c,
            Dispatch {
                executor: "primary".into(),
                metadata: None
            }
        )
        .await
        .expect_err("stale")
        .is_stale()
    );
}

#[tokio::test]
async fn after_dispatch_the_operation_is_never_claimable_again() {
    dispatched_is_never_claimable_again(false).await;
}

/// The write gate's claim-and-dispatch commit: a holder that vanishes
/// right after it (before or while sending) leaves what a separate
/// dispatch mark leaves.
#[tokio::test]
async fn after_combined_claim_and_dispatch_the_operation_is_never_claimable_again() {
    dispatched_is_never_claimable_again(true).await;
}

async fn dispatched_is_never_claimable_again(combined: bool) {
    let (_dir, path, clock) = setup();
    let r = request();
    let (c, before) = {
        let l = open(&path, &clock).await;
        let c = in_flight(&l, &r, combined).await;
        let s = snapshot(&l, &r).await;
        drop(l); // no close: nothing but the file remains
        (c, s)
    };

    let l = open(&path, &clock).await;
    let after = snapshot(&l, &r).await;
    assert_eq!(after, before);
    assert_eq!(after.0.state.kind(), StateKind::Dispatched);
    assert_eq!(after.0.dispatch_count, 1);
    assert_eq!(after.1.len(), 1);
    assert_eq!(after.1[0].outcome, AttemptOutcome::Pending);
    assert_eq!(after.1[0].metadata, Some(json!({"tool_call_id": "call_1"})));
    assert!(matches!(
        l.begin(&r, &opts("fallback")).await.expect("begin"),
        BeginOutcome::InProgress {
            state: StateKind::Dispatched,
            ..
        }
    ));
    drop(l);

    // The holder vanished; its lease passes while nobody has the file open.
    clock.advance(LEASE);
    let l = open(&path, &clock).await;
    for holder in ["fallback", "another", "third"] {
        match l.begin(&r, &opts(holder)).await.expect("begin") {
            BeginOutcome::Unresolved(info) => {
                assert_eq!(info.reason, handover_ledger::LEASE_EXPIRED_AFTER_DISPATCH);
                assert_eq!(info.since, c.lease_until);
            }
            other => panic!("a dispatched operation became claimable: {other:?}"),
        }
    }
    assert!(l.cancel(r.id(), "x".into()).await.is_err());
    assert!(
        l.confirm(&c, json!(1), None).await.is_err(),
        "the vanished holder cannot record"
    );
    drop(l);

    // The recorded unknown is itself durable.
    let l = open(&path, &clock).await;
    let (rec, attempts) = snapshot(&l, &r).await;
    assert_eq!(rec.state.kind(), StateKind::Unknown);
    assert_eq!(attempts[0].outcome, AttemptOutcome::Unknown);
    let listed = l
        .list(&handover_ledger::ListFilter {
            state: Some(StateKind::Unknown),
            ..Default::default()
        })
        .await
        .expect("list");
    assert_eq!(listed.len(), 1);
}

#[tokio::test]
async fn after_outcome_the_result_is_replayed() {
    let (_dir, path, clock) = setup();
    let r = request();
    let before = {
        let l = open(&path, &clock).await;
        let c = claim(&l, &r).await;
        dispatch(&l, &c).await;
        l.confirm(&c, json!({"shipment": "S-1"}), Some("201 Created".into()))
            .await
            .expect("confirm");
        snapshot(&l, &r).await
    };

    let l = open(&path, &clock).await;
    assert_eq!(snapshot(&l, &r).await, before);
    clock.advance(LEASE * 10);
    match l.begin(&r, &opts("fallback")).await.expect("begin") {
        BeginOutcome::Replayed(Terminal::Confirmed {
            result, evidence, ..
        }) => {
            assert_eq!(result, json!({"shipment": "S-1"}));
            assert_eq!(evidence.as_deref(), Some("201 Created"));
        }
        other => panic!("expected replay, got {other:?}"),
    }
    let (rec, attempts) = snapshot(&l, &r).await;
    assert_eq!(rec.dispatch_count, 1, "replays never dispatch");
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].outcome, AttemptOutcome::Confirmed);
}

#[tokio::test]
async fn the_file_is_created_in_wal_mode() {
    let (_dir, path, clock) = setup();
    let l = open(&path, &clock).await;
    claim(&l, &request()).await;
    l.close().await;
    assert!(path.exists());
    let opened = SqliteLedger::open(&path, SqliteOptions::default())
        .await
        .expect("reopen");
    drop(opened);
    let mut header = [0u8; 20];
    use std::io::Read;
    std::fs::File::open(&path)
        .expect("db")
        .read_exact(&mut header)
        .expect("header");
    // Bytes 18 and 19 of the header are 2 in WAL mode.
    assert_eq!((header[18], header[19]), (2, 2), "journal mode is WAL");
}

/// Two ledgers on one file see each other's writes at once (the group-commit
/// writer's record cache is dropped when another connection commits).
#[tokio::test]
async fn two_ledgers_on_one_file_see_each_others_writes() {
    let (_dir, path, clock) = setup();
    let a = open(&path, &clock).await;
    let b = open(&path, &clock).await;
    let r = request();
    let c = claim(&a, &r).await;
    b.cancel(r.id(), "withdrawn by operator".into())
        .await
        .expect("cancel via the other ledger");
    let err = a
        .mark_dispatched(
            &c,
            Dispatch {
                executor: "primary".into(),
                metadata: None,
            },
        )
        .await
        .expect_err("cancelled elsewhere");
    assert!(matches!(
        err,
        handover_ledger::LedgerError::IllegalTransition {
            from: StateKind::Cancelled,
            ..
        }
    ));
    assert_eq!(
        a.begin(&r, &opts("x")).await.expect("begin"),
        BeginOutcome::Cancelled {
            reason: "withdrawn by operator".into()
        }
    );
}

/// A clean close (through `Ledger::close`, as `handover serve` and
/// `handover demo` close it) folds SQLite's write-ahead log into the main
/// file: a copy of the `.db` file alone, without `-wal`/`-shm`, holds every
/// record. Dropping the ledger instead left them all in `-wal` when the
/// process exited, and the copy was an empty database. After the close,
/// every call fails closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_ledger_file_alone_holds_every_record() {
    for group_commit in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let clock = ManualClock::new(Timestamp::from_millis(1_700_000_000_000));
        let ledger: Arc<dyn Ledger> = Arc::new(
            SqliteLedger::open(
                &path,
                SqliteOptions {
                    clock: Arc::new(clock.clone()),
                    group_commit,
                    ..SqliteOptions::default()
                },
            )
            .await
            .expect("open"),
        );
        let r = request();
        let BeginOutcome::Started(c) = ledger.begin(&r, &opts("primary")).await.expect("begin")
        else {
            panic!("fresh ledger");
        };
        ledger
            .mark_dispatched(&c, primary_dispatch())
            .await
            .expect("dispatch");
        ledger
            .confirm(&c, json!({"shipment": "S-1"}), Some("201".into()))
            .await
            .expect("confirm");
        let wal = dir.path().join("ledger.db-wal");
        assert!(
            wal.metadata().map(|m| m.len()).unwrap_or(0) > 0,
            "the commits are in the write-ahead log before the close"
        );

        ledger.close().await;
        ledger.close().await; // a second close does nothing
        assert!(
            !wal.exists(),
            "the write-ahead log was folded in and removed"
        );
        let err = ledger.get(r.id()).await.expect_err("read after close");
        assert!(err.is_unavailable(), "{err:?}");
        let err = ledger
            .begin(&request_for("K-702"), &opts("primary"))
            .await
            .expect_err("write after close");
        assert!(err.is_unavailable(), "{err:?}");

        let copy_dir = tempfile::tempdir().unwrap();
        let copy = copy_dir.path().join("ledger.db");
        std::fs::copy(&path, &copy).unwrap();
        let copied = SqliteLedger::open(
            &copy,
            SqliteOptions {
                clock: Arc::new(clock.clone()),
                read_only: true,
                ..SqliteOptions::default()
            },
        )
        .await
        .expect("the main file alone is a Handover ledger");
        let rec = copied.get(r.id()).await.expect("get").expect("record");
        assert!(
            matches!(&rec.state, State::Confirmed { result, .. } if result == &json!({"shipment": "S-1"})),
            "group_commit {group_commit}: {:?}",
            rec.state
        );
        assert_eq!(copied.attempts(r.id()).await.expect("attempts").len(), 1);
    }
}

fn request_for(key: &str) -> OperationRequest {
    OperationRequest::new(
        "tenant-1",
        key,
        "create_shipment",
        &json!({"order": 43}),
        &Limits::default(),
    )
    .expect("request")
}
