//! A `PostgresLedger` starts a holder's write from the record it last
//! committed (no `SELECT … FOR UPDATE`); the write is conditional on the
//! row version. These tests make that cache stale through another replica
//! and check that nothing stale is written or answered.

use crate::postgres_support;

use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{
    AttemptKind, BeginOptions, BeginOutcome, Claim, Dispatch, Ledger, Limits, ManualClock,
    OperationRequest, PostgresLedger, PostgresOptions, State, StateKind, Timestamp,
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

async fn two_replicas() -> Option<(PostgresLedger, PostgresLedger, ManualClock, pg::SchemaGuard)> {
    pg::url()?;
    let clock = ManualClock::new(Timestamp::from_millis(1_700_000_000_000));
    let opts = || PostgresOptions {
        clock: Arc::new(clock.clone()),
        max_connections: 2,
        ..PostgresOptions::default()
    };
    let (a, guard) = pg::ledger(opts()).await;
    let b = pg::on_schema(&guard.url, &guard.schema, opts()).await;
    Some((a, b, clock, guard))
}

async fn claim(l: &PostgresLedger, req: &OperationRequest, who: &str) -> Claim {
    match l
        .begin(req, &BeginOptions::new(who, LEASE))
        .await
        .expect("begin")
    {
        BeginOutcome::Started(c) => c,
        other => panic!("expected started, got {other:?}"),
    }
}

/// Replica B renews A's claim; A's cached copy still has the old lease.
/// A's dispatch must apply to the current row (B's lease), not overwrite it.
#[tokio::test]
async fn stale_cache_does_not_overwrite_a_newer_row() {
    let Some((a, b, clock, _guard)) = two_replicas().await else {
        return;
    };
    let req = request("K-renewed");
    let c = claim(&a, &req, "a").await;
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
#[tokio::test]
async fn stale_cache_cannot_dispatch_a_taken_over_claim() {
    let Some((a, b, clock, _guard)) = two_replicas().await else {
        return;
    };
    let req = request("K-taken");
    let old = claim(&a, &req, "a").await;
    clock.advance(LEASE);
    let new = claim(&b, &req, "b").await;
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
#[tokio::test]
async fn stale_cache_cannot_finish_twice() {
    let Some((a, b, _clock, _guard)) = two_replicas().await else {
        return;
    };
    let req = request("K-finished");
    let c = claim(&a, &req, "a").await;
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
