//! Check-and-claim is one atomic step: 64 concurrent `begin`s of one key
//! yield exactly one `started`, over many rounds, with a multi-connection
//! pool (one transaction per command, racing for SQLite's write lock), with
//! group commit, and with two independent ledgers opened on the same file.

use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{
    BeginOptions, BeginOutcome, Ledger, Limits, OperationRequest, SqliteLedger, SqliteOptions,
    StateKind,
};
use serde_json::json;
use tokio::sync::Barrier;

const TASKS: usize = 64;
const ROUNDS: usize = 200;

async fn open(path: &std::path::Path, group_commit: bool) -> SqliteLedger {
    SqliteLedger::open(
        path,
        SqliteOptions {
            max_connections: 4,
            group_commit,
            busy_timeout: Duration::from_secs(30),
            ..SqliteOptions::default()
        },
    )
    .await
    .expect("open")
}

/// Runs the rounds; task `i` uses `ledgers[i % ledgers.len()]`.
async fn race(ledgers: Vec<Arc<dyn Ledger>>) {
    for round in 0..ROUNDS {
        let req = Arc::new(
            OperationRequest::new(
                "race",
                &format!("K-{round}"),
                "create_shipment",
                &json!({"round": round}),
                &Limits::default(),
            )
            .expect("request"),
        );
        let barrier = Arc::new(Barrier::new(TASKS));
        let mut tasks = Vec::with_capacity(TASKS);
        for i in 0..TASKS {
            let ledger = ledgers[i % ledgers.len()].clone();
            let (req, barrier) = (req.clone(), barrier.clone());
            tasks.push(tokio::spawn(async move {
                let opts = BeginOptions::new(format!("executor-{i}"), Duration::from_secs(60));
                barrier.wait().await;
                ledger.begin(&req, &opts).await.expect("begin")
            }));
        }
        let mut started = Vec::new();
        for t in tasks {
            match t.await.expect("task") {
                BeginOutcome::Started(c) => started.push(c),
                BeginOutcome::InProgress { state, .. } => assert_eq!(state, StateKind::Claimed),
                other => panic!("round {round}: unexpected {other:?}"),
            }
        }
        assert_eq!(started.len(), 1, "round {round}: exactly one started");
        // The database agrees: one claim, epoch 1, held by the winner.
        let rec = ledgers[0]
            .get(req.id())
            .await
            .expect("get")
            .expect("stored");
        assert_eq!(rec.epoch.0, 1, "round {round}");
        assert!(
            matches!(rec.state, handover_ledger::State::Claimed { ref holder, .. } if *holder == started[0].holder)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_started_with_a_connection_pool() {
    let dir = tempfile::tempdir().expect("dir");
    let ledger = open(&dir.path().join("l.db"), false).await;
    race(vec![Arc::new(ledger)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_started_with_group_commit() {
    let dir = tempfile::tempdir().expect("dir");
    let ledger = open(&dir.path().join("l.db"), true).await;
    race(vec![Arc::new(ledger)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_started_with_two_ledgers_on_one_file() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("l.db");
    let a = open(&path, true).await;
    let b = open(&path, true).await;
    race(vec![Arc::new(a), Arc::new(b)]).await;
}

/// Processes opening one new ledger at the same time (two `serve`s, a
/// `demo` started twice) each find it whole: none collides with another's
/// half-applied migration or takes the half-made schema for another
/// application's. Independent pools behave as processes here (the open
/// lock is per open file, not per process).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledgers_opened_at_once_on_a_new_file_all_open() {
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let path = Arc::new(dir.path().join("new.db"));
        let barrier = Arc::new(Barrier::new(8));
        let opens: Vec<_> = (0..8)
            .map(|_| {
                let (path, barrier) = (path.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    SqliteLedger::open(&*path, SqliteOptions::default()).await
                })
            })
            .collect();
        let mut ledgers: Vec<Arc<dyn Ledger>> = Vec::new();
        for open in opens {
            let ledger = open.await.unwrap();
            let ledger = ledger.unwrap_or_else(|e| panic!("round {round}: {e}"));
            ledgers.push(Arc::new(ledger));
        }
        // One schema, shared: what one wrote, another reads.
        let req =
            OperationRequest::new("t", "K-1", "ship", &json!({}), &Limits::default()).unwrap();
        let opts = BeginOptions::new("a", Duration::from_secs(30));
        assert!(matches!(
            ledgers[0].begin(&req, &opts).await.unwrap(),
            BeginOutcome::Started(_)
        ));
        assert!(matches!(
            ledgers[7].begin(&req, &opts).await.unwrap(),
            BeginOutcome::InProgress { .. }
        ));
    }
}
