//! Scenario 10: retention. A terminal outcome replays in full for the
//! replay window (72 h by default); after it a tombstone (identity,
//! fingerprint, terminal state) answers late retries for the tombstone
//! horizon (30 days) — answered, never re-executed. Past the horizon the
//! record is gone and a retry is a new operation: the documented limit.

use std::sync::Arc;
use std::time::Duration;

use handover::ledger::{StateKind, Terminal};
use handover::{PerformOptions, PerformOutcome};
use handover_testkit::MockDestination;
use serde_json::json;

use crate::support::*;

const HOUR: Duration = Duration::from_secs(3600);

per_backend! {
    #[tokio::test] within_the_window_a_retry_replays_and_after_it_meets_the_tombstone,
    #[tokio::test] past_the_tombstone_horizon_a_retry_is_a_new_operation;
    across_restart:
    #[tokio::test] within_the_window_a_retry_replays_and_after_it_meets_the_tombstone,
}

/// Scenario 10: retried at 71 h the confirmation is replayed with its
/// result; at 73 h (after a restart, possibly) the retry meets the
/// tombstone, before and after `purge` dropped the parameters and result.
/// The destination is called once in all.
pub async fn within_the_window_a_retry_replays_and_after_it_meets_the_tombstone(run: Run) {
    let mut store = run.store().await;
    let dest = MockDestination::builder()
        .clock(Arc::new(store.clock.clone()))
        .start()
        .await;
    let config = config(
        "http://127.0.0.1:9/v1",
        "http://127.0.0.1:9/v1",
        "",
        RELAXED,
        SHIP_NO_RECOVERY,
    );
    let mut gate = store.gate(&config, "agent-backend-1");
    let exec = executor(&dest);
    let req = gate.request(SCOPE, "K-701", SHIP, &shipment()).unwrap();

    let first = gate
        .perform(&req, &exec, PerformOptions::default())
        .await
        .unwrap();
    let PerformOutcome::Confirmed { result, .. } = first else {
        panic!("{first:?}")
    };

    store.advance(71 * HOUR);
    let replay = gate
        .perform(&req, &exec, PerformOptions::default())
        .await
        .unwrap();
    let PerformOutcome::Replayed(Terminal::Confirmed {
        result: replayed, ..
    }) = &replay
    else {
        panic!("inside the replay window: {replay:?}")
    };
    assert_eq!(*replayed, result, "the recorded result, in full");

    if run.maybe_restart(&mut store).await {
        gate = store.gate(&config, "agent-backend-2");
    }
    store.advance(2 * HOUR);
    let tombstone = gate
        .perform(&req, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(
        matches!(
            tombstone,
            PerformOutcome::Replayed(Terminal::Tombstone {
                state: StateKind::Confirmed,
                ..
            })
        ),
        "past the replay window, before purge: {tombstone:?}"
    );
    assert!(
        tombstone.is_confirmed(),
        "a confirmed tombstone still says done"
    );

    let purged = store.ledger().purge().await.unwrap();
    assert_eq!(purged.tombstoned, 1);
    let rec = store.record(SCOPE, "K-701").await;
    assert!(rec.tombstone);
    assert_eq!(rec.params, None, "parameters dropped after the window");
    let after_purge = gate
        .perform(&req, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(
        matches!(
            after_purge,
            PerformOutcome::Replayed(Terminal::Tombstone { .. })
        ),
        "{after_purge:?}"
    );
    let mut changed = shipment();
    changed["qty"] = json!(3);
    let other = gate.request(SCOPE, "K-701", SHIP, &changed).unwrap();
    let conflict = gate
        .perform(&other, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(
        matches!(conflict, PerformOutcome::Conflict { .. }),
        "the tombstone keeps the fingerprint: {conflict:?}"
    );

    assert_eq!(
        dest.action_requests().await,
        1,
        "executed once, answered four times"
    );
    assert_eq!(dest.effect_count(), 1);

    run.score.task(true);
    run.settle(&store, Some(&dest)).await;
}

/// The limit of retention, shown rather than hidden: past the tombstone
/// horizon `purge` deletes the record, and a retry of the same key is a new
/// operation that executes again. An application whose retries can arrive
/// that late must configure a longer `tombstone_horizon`. (Not part of the
/// metrics run: it is a duplicate by construction.)
pub async fn past_the_tombstone_horizon_a_retry_is_a_new_operation(run: Run) {
    let store = run.store().await;
    let dest = MockDestination::builder()
        .clock(Arc::new(store.clock.clone()))
        .start()
        .await;
    let config = config(
        "http://127.0.0.1:9/v1",
        "http://127.0.0.1:9/v1",
        "",
        RELAXED,
        SHIP_NO_RECOVERY,
    );
    let gate = store.gate(&config, "agent-backend");
    let exec = executor(&dest);
    let req = gate.request(SCOPE, "K-701", SHIP, &shipment()).unwrap();

    let first = gate
        .perform(&req, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(matches!(first, PerformOutcome::Confirmed { .. }));
    store.advance(30 * 24 * HOUR + HOUR);
    let purged = store.ledger().purge().await.unwrap();
    assert_eq!(purged.deleted, 1);
    assert!(store.all().await.is_empty());

    let again = gate
        .perform(&req, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(
        matches!(again, PerformOutcome::Confirmed { .. }),
        "{again:?}"
    );
    assert_eq!(
        dest.effect_count(),
        2,
        "the documented limit: a new operation"
    );
}
