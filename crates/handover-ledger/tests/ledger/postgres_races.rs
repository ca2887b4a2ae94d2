//! Check-and-claim is one atomic step across replicas: 4 independent
//! ledgers (4 pools, as 4 processes would have) × 16 tasks begin one key,
//! 200 rounds → exactly one `started` per round, and the database holds one
//! claim at epoch 1 by the winner. A second race takes over an expired
//! claim: exactly one new claim, epoch 2. (Separate OS processes race in
//! `postgres_processes.rs`.)

use crate::postgres_support;

use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{
    BeginOptions, BeginOutcome, Ledger, Limits, ManualClock, OperationRequest, PostgresLedger,
    PostgresOptions, State, StateKind, Timestamp,
};
use postgres_support as pg;
use serde_json::json;
use sqlx::Row;
use tokio::sync::Barrier;

const REPLICAS: usize = 4;
const TASKS_PER_REPLICA: usize = 16;
const ROUNDS: usize = 200;

fn request(round: usize) -> Arc<OperationRequest> {
    Arc::new(
        OperationRequest::new(
            "race",
            &format!("K-{round}"),
            "create_shipment",
            &json!({"round": round}),
            &Limits::default(),
        )
        .expect("request"),
    )
}

async fn replicas(clock: &ManualClock) -> (Vec<Arc<PostgresLedger>>, pg::SchemaGuard) {
    let opts = || PostgresOptions {
        clock: Arc::new(clock.clone()),
        max_connections: 8,
        ..PostgresOptions::default()
    };
    let (first, guard) = pg::ledger(opts()).await;
    let mut all = vec![Arc::new(first)];
    for _ in 1..REPLICAS {
        all.push(Arc::new(
            pg::on_schema(&guard.url, &guard.schema, opts()).await,
        ));
    }
    (all, guard)
}

/// Every task of every replica begins `req` at once; returns the outcomes.
async fn race(ledgers: &[Arc<PostgresLedger>], req: &Arc<OperationRequest>) -> Vec<BeginOutcome> {
    let n = ledgers.len() * TASKS_PER_REPLICA;
    let barrier = Arc::new(Barrier::new(n));
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let ledger = ledgers[i % ledgers.len()].clone();
        let (req, barrier) = (req.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            let opts = BeginOptions::new(
                format!("replica-{}-task-{i}", i % REPLICAS),
                Duration::from_secs(60),
            );
            barrier.wait().await;
            ledger.begin(&req, &opts).await.expect("begin")
        }));
    }
    let mut out = Vec::with_capacity(n);
    for t in tasks {
        out.push(t.await.expect("task"));
    }
    out
}

fn winners(outcomes: Vec<BeginOutcome>, round: usize) -> Vec<handover_ledger::Claim> {
    let mut started = Vec::new();
    for o in outcomes {
        match o {
            BeginOutcome::Started(c) => started.push(c),
            BeginOutcome::InProgress { state, .. } => assert_eq!(state, StateKind::Claimed),
            other => panic!("round {round}: unexpected {other:?}"),
        }
    }
    started
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_started_across_four_pools() {
    if pg::url().is_none() {
        return;
    }
    let clock = ManualClock::new(Timestamp::from_millis(1_700_000_000_000));
    let (ledgers, guard) = replicas(&clock).await;
    for round in 0..ROUNDS {
        let req = request(round);
        let started = winners(race(&ledgers, &req).await, round);
        assert_eq!(started.len(), 1, "round {round}: exactly one started");
        // Any replica reads the single claim, held by the winner.
        let rec = ledgers[round % REPLICAS]
            .get(req.id())
            .await
            .expect("get")
            .expect("stored");
        assert_eq!(rec.epoch.0, 1, "round {round}");
        assert!(
            matches!(rec.state, State::Claimed { ref holder, .. } if *holder == started[0].holder)
        );
    }
    // The database agrees: one row per round, each claimed once.
    let mut c = pg::inspect(&guard.url, &guard.schema).await;
    let row =
        sqlx::query("SELECT COUNT(*), MAX(epoch), MIN(epoch) FROM operations WHERE scope = 'race'")
            .fetch_one(&mut c)
            .await
            .expect("count");
    let (n, max, min): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    assert_eq!((n, max, min), (ROUNDS as i64, 1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_takeover_of_an_expired_claim() {
    if pg::url().is_none() {
        return;
    }
    let clock = ManualClock::new(Timestamp::from_millis(1_700_000_000_000));
    let (ledgers, _guard) = replicas(&clock).await;
    const TAKEOVER_ROUNDS: usize = 25;
    let mut first = Vec::new();
    for round in 0..TAKEOVER_ROUNDS {
        let req = request(round);
        let opts = BeginOptions::new("crashed", Duration::from_secs(30));
        match ledgers[0].begin(&req, &opts).await.expect("begin") {
            BeginOutcome::Started(c) => first.push((req, c)),
            other => panic!("unexpected {other:?}"),
        }
    }
    // The first holder vanished before dispatch; its lease passes.
    clock.advance(Duration::from_secs(31));
    for (round, (req, old)) in first.iter().enumerate() {
        let started = winners(race(&ledgers, req).await, round);
        assert_eq!(started.len(), 1, "round {round}: exactly one takeover");
        assert_eq!(started[0].epoch.0, 2);
        // The old holder is fenced off.
        let e = ledgers[1]
            .mark_dispatched(
                old,
                handover_ledger::Dispatch {
                    executor: "crashed".into(),
                    metadata: None,
                },
            )
            .await
            .expect_err("stale claim");
        assert!(e.is_stale(), "{e}");
    }
}
