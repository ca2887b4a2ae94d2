//! Leases and retention, driven by the scenario's manual clock.

use std::time::Duration;

use serde_json::json;

use super::{LEASE, Setup, Subject, T0, env, opts, req};
use crate::{
    AttemptOutcome, BeginOutcome, Dispatch, LEASE_EXPIRED_AFTER_DISPATCH, LedgerError, ListFilter,
    Owner, PurgeReport, RESEND_CLAIM_LAPSED, ReleaseReason, Retention, State, StateKind, Terminal,
    UnknownReport,
};

fn dispatch_of(c: &crate::Claim) -> Dispatch {
    Dispatch {
        executor: c.holder.clone(),
        metadata: None,
    }
}

/// A claim that lapses before dispatch can be taken over (epoch + 1); the
/// old holder can then record nothing.
pub async fn lease_expiry_before_dispatch<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let r = req("t", "k", json!({"n": 1}));
    let old = e.start(&r, "a").await;
    assert_eq!(old.lease_until, T0.plus(LEASE));
    e.clock.advance(LEASE - Duration::from_millis(1));
    assert!(matches!(
        e.begin(&r, "b").await,
        BeginOutcome::InProgress { .. }
    ));
    e.clock.advance(Duration::from_millis(1));
    // Lapsed but not yet taken over: the holder's own write is refused.
    let err = e
        .ledger
        .mark_dispatched(&old, dispatch_of(&old))
        .await
        .expect_err("lapsed");
    assert!(
        matches!(err, LedgerError::LeaseExpired { .. }),
        "got {err:?}"
    );
    assert!(err.is_stale());
    let new = e.start(&r, "b").await;
    assert_eq!(new.epoch.0, old.epoch.0 + 1);
    assert_eq!(
        new.destination_key, old.destination_key,
        "same destination key on every claim"
    );
    assert!(
        e.ledger
            .mark_dispatched(&old, dispatch_of(&old))
            .await
            .expect_err("stale")
            .is_stale()
    );
    e.dispatch(&new).await;
    let rec = e.get(&r).await.expect("stored");
    assert_eq!(rec.dispatch_count, 1);
    assert!(matches!(rec.state, State::Dispatched { ref holder, .. } if holder == "b"));
}

/// A dispatched operation whose lease passes becomes `unknown` (owner
/// reconciler), is never claimable again, and never expires.
pub async fn lease_expiry_after_dispatch<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let r = req("t", "k", json!({"n": 1}));
    let quiet = req("t", "quiet", json!({"n": 1}));
    let c = e.in_flight(&r).await;
    e.in_flight(&quiet).await;
    match e.begin(&r, "b").await {
        BeginOutcome::InProgress { state, holder, .. } => {
            assert_eq!(state, StateKind::Dispatched);
            assert_eq!(holder, "exec-a");
        }
        other => panic!("expected in_progress, got {other:?}"),
    }
    e.clock.advance(LEASE);
    let expected = crate::UnknownInfo {
        owner: Owner::Reconciler,
        reason: LEASE_EXPIRED_AFTER_DISPATCH.into(),
        since: T0.plus(LEASE),
        next_check_at: Some(T0.plus(LEASE)),
        diverged: false,
    };
    match e.begin(&r, "b").await {
        BeginOutcome::Unresolved(info) => assert_eq!(info, expected),
        other => panic!("expected unresolved, got {other:?}"),
    }
    let err = e
        .ledger
        .confirm(&c, json!(1), None)
        .await
        .expect_err("late confirm");
    assert!(
        matches!(err, LedgerError::LeaseExpired { .. }),
        "got {err:?}"
    );
    let rec = e.get(&r).await.expect("stored");
    assert_eq!(rec.state, State::Unknown(expected.clone()));
    let attempts = e.ledger.attempts(r.id()).await.expect("attempts");
    assert_eq!(attempts[0].outcome, AttemptOutcome::Unknown);
    // Untouched operations are reported unknown by list as well.
    let unknown = e
        .ledger
        .list(&ListFilter {
            state: Some(StateKind::Unknown),
            ..Default::default()
        })
        .await
        .expect("list");
    let keys: Vec<_> = unknown
        .iter()
        .map(|r| r.id.key.as_str().to_owned())
        .collect();
    assert_eq!(keys, ["k", "quiet"]);
    // Never expires, never claimable.
    e.clock.advance(Duration::from_secs(365 * 24 * 3600));
    assert_eq!(
        e.ledger.purge().await.expect("purge"),
        PurgeReport::default()
    );
    assert!(matches!(
        e.begin(&r, "c").await,
        BeginOutcome::Unresolved(_)
    ));
    assert!(e.ledger.cancel(r.id(), "x".into()).await.is_err());
    assert_eq!(e.get(&r).await.expect("stored").dispatch_count, 1);
}

/// Renewal moves the lease; it needs a live claim and a positive lease.
pub async fn renew_extends_lease<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(make: F) {
    let e = env(make, Retention::default()).await;
    let r = req("t", "k", json!({"n": 1}));
    let c = e.start(&r, "a").await;
    e.clock.advance(Duration::from_secs(20));
    let err = e
        .ledger
        .renew(&c, Duration::ZERO)
        .await
        .expect_err("zero lease");
    assert_eq!(err.field(), Some("lease"));
    let renewed = e.ledger.renew(&c, LEASE).await.expect("renew");
    assert_eq!(renewed.lease_until, T0.plus(Duration::from_secs(50)));
    assert_eq!(renewed.epoch, c.epoch);
    e.clock.advance(Duration::from_secs(20));
    assert!(matches!(
        e.begin(&r, "b").await,
        BeginOutcome::InProgress { .. }
    ));
    e.dispatch(&renewed).await;
    e.clock.advance(Duration::from_secs(10));
    assert!(matches!(
        e.begin(&r, "b").await,
        BeginOutcome::Unresolved(_)
    ));
    let err = e
        .ledger
        .renew(&renewed, LEASE)
        .await
        .expect_err("renew after expiry");
    assert!(err.is_stale(), "got {err:?}");
}

/// A re-send claim that lapses or is given back returns to `unknown`,
/// never to `planned`: the earlier dispatch may have happened.
pub async fn resend_claim_lapse_returns_to_unknown<
    F: Fn(Setup) -> Fut,
    Fut: Future<Output = Subject>,
>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let window = Duration::from_secs(3600);
    let r = req("t", "k", json!({"n": 1}));
    let c = e.in_flight(&r).await;
    let report = UnknownReport {
        reason: "timeout".into(),
        evidence: None,
        owner: Owner::Reconciler,
        next_check_at: None,
    };
    e.ledger.mark_unknown(&c, report).await.expect("unknown");
    let c2 = e
        .ledger
        .claim_for_resend(r.id(), &opts("re"), window)
        .await
        .expect("resend")
        .expect("inside window");
    assert_eq!(c2.epoch.0, 2);
    assert_eq!(c2.attempt_number, 2);
    assert_eq!(c2.destination_key, c.destination_key);
    e.clock.advance(LEASE);
    match e.begin(&r, "x").await {
        BeginOutcome::Unresolved(info) => assert_eq!(info.reason, RESEND_CLAIM_LAPSED),
        other => panic!("expected unresolved, got {other:?}"),
    }
    assert!(
        e.ledger
            .mark_dispatched(&c2, dispatch_of(&c2))
            .await
            .expect_err("lapsed")
            .is_stale()
    );

    let c3 = e
        .ledger
        .claim_for_resend(r.id(), &opts("re"), window)
        .await
        .expect("resend")
        .expect("inside");
    let rec = e
        .ledger
        .release(&c3, ReleaseReason::Abandoned)
        .await
        .expect("abandon");
    assert_eq!(rec.state.kind(), StateKind::Unknown);
    assert!(e.ledger.cancel(r.id(), "x".into()).await.is_err());

    let c4 = e
        .ledger
        .claim_for_resend(r.id(), &opts("re"), window)
        .await
        .expect("resend")
        .expect("inside");
    e.dispatch(&c4).await;
    assert_eq!(e.get(&r).await.expect("stored").dispatch_count, 2);
    let rec = e
        .ledger
        .release(
            &c4,
            ReleaseReason::NotSent {
                evidence: "connect refused".into(),
            },
        )
        .await
        .expect("not sent");
    assert_eq!(rec.state.kind(), StateKind::Unknown);
    assert_eq!(rec.dispatch_count, 1);
    assert!(rec.first_dispatched_at.is_some());
    assert!(matches!(
        e.begin(&r, "x").await,
        BeginOutcome::Unresolved(_)
    ));
}

/// Full replay inside the window, tombstone after it (even before purge),
/// purge drops data then deletes past the horizon; unresolved never expires.
pub async fn retention_replay_tombstone_purge<
    F: Fn(Setup) -> Fut,
    Fut: Future<Output = Subject>,
>(
    make: F,
) {
    let hour = Duration::from_secs(3600);
    let retention = Retention {
        replay_window: hour,
        tombstone_horizon: 24 * hour,
    };
    let e = env(make, retention).await;
    let a = req("t", "confirmed", json!({"n": 1}));
    let b = req("t", "rejected", json!({"n": 1}));
    let c = req("t", "cancelled", json!({"n": 1}));
    let d = req("t", "unknown", json!({"n": 1}));
    let p = req("t", "planned", json!({"n": 1}));
    let claim = e.in_flight(&a).await;
    e.ledger
        .confirm(&claim, json!({"shipment": "S-1"}), Some("ev".into()))
        .await
        .expect("confirm");
    let claim = e.in_flight(&b).await;
    e.ledger
        .reject(&claim, "refused".into(), Some("ev".into()))
        .await
        .expect("reject");
    e.start(&c, "x").await;
    e.ledger
        .cancel(c.id(), "withdrawn".into())
        .await
        .expect("cancel");
    e.in_flight(&d).await; // lease lapses: unknown
    let claim = e.start(&p, "x").await;
    e.ledger
        .release(&claim, ReleaseReason::Abandoned)
        .await
        .expect("release");

    e.clock.advance(hour - Duration::from_millis(1));
    assert!(matches!(
        e.begin(&a, "r").await,
        BeginOutcome::Replayed(Terminal::Confirmed { .. })
    ));
    assert_eq!(
        e.ledger.purge().await.expect("purge"),
        PurgeReport::default()
    );

    e.clock.advance(Duration::from_millis(1));
    let tomb = |state| BeginOutcome::Replayed(Terminal::Tombstone { state, at: T0 });
    assert_eq!(
        e.begin(&a, "r").await,
        tomb(StateKind::Confirmed),
        "tombstone before purge"
    );
    assert_eq!(e.begin(&b, "r").await, tomb(StateKind::Rejected));
    assert_eq!(
        e.begin(&c, "r").await,
        BeginOutcome::Cancelled {
            reason: "withdrawn".into()
        }
    );
    assert!(
        e.get(&a).await.expect("stored").params.is_some(),
        "data kept until purge"
    );

    let report = e.ledger.purge().await.expect("purge");
    assert_eq!(
        report,
        PurgeReport {
            tombstoned: 3,
            deleted: 0,
            tasks_expired: 0
        }
    );
    let ra = e.get(&a).await.expect("tombstone kept");
    assert!(ra.tombstone);
    assert_eq!(ra.params, None);
    assert_eq!(ra.fingerprint, a.fingerprint());
    assert!(
        matches!(ra.state, State::Confirmed { ref result, evidence: None, at } if result.is_null() && at == T0)
    );
    assert_eq!(e.begin(&a, "r").await, tomb(StateKind::Confirmed));
    let changed = req("t", "confirmed", json!({"n": 2}));
    assert!(matches!(
        e.begin(&changed, "r").await,
        BeginOutcome::Conflict { .. }
    ));
    assert_eq!(
        e.ledger.purge().await.expect("purge"),
        PurgeReport::default(),
        "idempotent"
    );

    e.clock.advance(23 * hour - Duration::from_millis(1));
    assert_eq!(
        e.ledger.purge().await.expect("purge"),
        PurgeReport::default()
    );
    assert_eq!(e.begin(&b, "r").await, tomb(StateKind::Rejected));
    e.clock.advance(Duration::from_millis(1));
    assert_eq!(
        e.ledger.purge().await.expect("purge"),
        PurgeReport {
            tombstoned: 0,
            deleted: 3,
            tasks_expired: 0
        }
    );
    assert_eq!(e.get(&a).await, None);
    assert!(
        e.ledger
            .attempts(a.id())
            .await
            .expect("attempts")
            .is_empty()
    );
    // Unresolved and planned operations never expire.
    let left: Vec<_> = e
        .ledger
        .list(&ListFilter::default())
        .await
        .expect("list")
        .into_iter()
        .map(|r| (r.id.key.as_str().to_owned(), r.state.kind()))
        .collect();
    assert_eq!(
        left,
        [
            ("planned".to_owned(), StateKind::Planned),
            ("unknown".to_owned(), StateKind::Unknown)
        ]
    );
    assert!(matches!(
        e.begin(&d, "r").await,
        BeginOutcome::Unresolved(_)
    ));
}
