//! A ledger starts a holder's write from the record it last committed:
//! `PostgresLedger` without `SELECT … FOR UPDATE` (the write is conditional
//! on the row version), `SqliteLedger`'s group-commit writer from its cache
//! (emptied when `PRAGMA data_version` says another connection committed,
//! read in the statement text that opens the batch). These tests make that
//! cache stale through another replica on the same database and check that
//! nothing stale is written or answered.

use crate::postgres_support;

use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{
    AttemptKind, BeginOptions, BeginOutcome, Claim, Dispatch, Ledger, Limits, ManualClock,
    OperationRequest, SqliteLedger, SqliteOptions, State, StateKind, Timestamp,
};
use postgres_support as pg;
use serde_json::json;

const LEASE: Duration = Duration::from_secs(30);

fn request(key: &str) -> OperationRequest {
    OperationRequest::new(
        "cache",
        key,
        "create_shipment",
        &json!({"key": key}),
        &Limits::default(),
    )
    .expect("request")
}

fn dispatch(who: &str) -> Dispatch {
    Dispatch {
        executor: who.into(),
        metadata: None,
    }
}

fn start() -> ManualClock {
    ManualClock::new(Timestamp::from_millis(1_700_000_000_000))
}

/// Two replicas of one ledger on one schema, with the guard that drops it.
async fn two_on_postgres() -> Option<(
    Box<dyn Ledger>,
    Box<dyn Ledger>,
    ManualClock,
    pg::SchemaGuard,
)> {
    pg::url()?;
    let clock = start();
    let (a, b, guard) = pg::replicas(&clock).await;
    Some((Box::new(a), Box::new(b), clock, guard))
}

/// Two group-commit ledgers on one SQLite file, with the directory holding it.
async fn two_on_sqlite() -> (
    Box<dyn Ledger>,
    Box<dyn Ledger>,
    ManualClock,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().expect("dir");
    let clock = start();
    let open = || {
        SqliteLedger::open(
            dir.path().join("l.db"),
            SqliteOptions {
                clock: Arc::new(clock.clone()),
                group_commit: true,
                ..SqliteOptions::default()
            },
        )
    };
    let a = open().await.expect("open a");
    let b = open().await.expect("open b");
    (Box::new(a), Box::new(b), clock, dir)
}

async fn claim(l: &dyn Ledger, req: &OperationRequest, who: &str) -> Claim {
    match l
        .begin(req, &BeginOptions::new(who, LEASE))
        .await
        .expect("begin")
    {
        BeginOutcome::Started(c) => c,
        other => panic!("expected started, got {other:?}"),
    }
}

/// Runs `scenario` on two PostgreSQL replicas (when configured) and on two
/// SQLite ledgers sharing a file.
macro_rules! on_both {
    ($postgres:ident, $sqlite:ident, $scenario:ident) => {
        #[tokio::test]
        async fn $postgres() {
            let Some((a, b, clock, _guard)) = two_on_postgres().await else {
                return;
            };
            $scenario(&*a, &*b, &clock).await;
        }

        #[tokio::test]
        async fn $sqlite() {
            let (a, b, clock, _dir) = two_on_sqlite().await;
            $scenario(&*a, &*b, &clock).await;
        }
    };
}

on_both!(
    postgres_stale_cache_does_not_overwrite_a_newer_row,
    sqlite_stale_cache_does_not_overwrite_a_newer_row,
    stale_cache_does_not_overwrite_a_newer_row
);
on_both!(
    postgres_stale_cache_cannot_dispatch_a_taken_over_claim,
    sqlite_stale_cache_cannot_dispatch_a_taken_over_claim,
    stale_cache_cannot_dispatch_a_taken_over_claim
);
on_both!(
    postgres_stale_cache_cannot_finish_twice,
    sqlite_stale_cache_cannot_finish_twice,
    stale_cache_cannot_finish_twice
);

/// Replica B renews A's claim; A's cached copy still has the old lease.
/// A's dispatch must apply to the current row (B's lease), not overwrite it.
async fn stale_cache_does_not_overwrite_a_newer_row(
    a: &dyn Ledger,
    b: &dyn Ledger,
    clock: &ManualClock,
) {
    let req = request("K-renewed");
    let c = claim(a, &req, "a").await;
    clock.advance(Duration::from_secs(10));
    let renewed = b.renew(&c, Duration::from_secs(300)).await.expect("renew");
    a.mark_dispatched(&c, dispatch("a"))
        .await
        .expect("dispatch");
    let rec = b.get(req.id()).await.expect("get").expect("stored");
    match rec.state {
        State::Dispatched { lease_until, .. } => assert_eq!(lease_until, renewed.lease_until),
        other => panic!("expected dispatched, got {other:?}"),
    }
    assert_eq!(rec.dispatch_count, 1);
}

/// A's claim was taken over by B after its lease; A's cache still says A
/// holds it. A's late dispatch is refused and records nothing.
async fn stale_cache_cannot_dispatch_a_taken_over_claim(
    a: &dyn Ledger,
    b: &dyn Ledger,
    clock: &ManualClock,
) {
    let req = request("K-taken");
    let old = claim(a, &req, "a").await;
    clock.advance(LEASE);
    let new = claim(b, &req, "b").await;
    assert_eq!(new.epoch.0, 2);
    b.mark_dispatched(&new, dispatch("b"))
        .await
        .expect("dispatch");
    // Within the new lease the old claim's own lease has passed; refuse
    // either way (stale epoch or expired lease), from the row, not the cache.
    let e = a
        .mark_dispatched(&old, dispatch("a"))
        .await
        .expect_err("superseded claim");
    assert!(e.is_stale(), "{e}");
    let e = a
        .confirm(&old, json!({"shipment": "S-a"}), None)
        .await
        .expect_err("superseded claim");
    assert!(e.is_stale(), "{e}");
    let rec = b.get(req.id()).await.expect("get").expect("stored");
    assert_eq!(rec.state.kind(), StateKind::Dispatched);
    assert_eq!(rec.dispatch_count, 1, "only B dispatched");
    let attempts = b.attempts(req.id()).await.expect("attempts");
    let dispatches = attempts
        .iter()
        .filter(|x| x.kind == AttemptKind::Dispatch)
        .count();
    assert_eq!(dispatches, 1);
}

/// B records the outcome; A's cache still says dispatched. A's confirm with
/// the same claim is a second finish and is refused; the recorded result stays.
async fn stale_cache_cannot_finish_twice(a: &dyn Ledger, b: &dyn Ledger, _clock: &ManualClock) {
    let req = request("K-finished");
    let c = claim(a, &req, "a").await;
    a.mark_dispatched(&c, dispatch("a"))
        .await
        .expect("dispatch");
    b.reject(&c, "declined by destination".into(), None)
        .await
        .expect("reject");
    let e = a
        .confirm(&c, json!({"shipment": "S-1"}), None)
        .await
        .expect_err("already finished");
    assert!(!e.is_unavailable(), "{e}");
    let rec = a.get(req.id()).await.expect("get").expect("stored");
    assert_eq!(rec.state.kind(), StateKind::Rejected);
}
