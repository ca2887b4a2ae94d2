//! Refused writes: each is an error that changes nothing.

use serde_json::json;

use super::{Setup, Subject, T0, env, req};
use crate::{
    Claim, Dispatch, Epoch, Fingerprint, LedgerError, Limits, Owner, Retention, StateKind,
    UnknownReport, destination_key,
};

fn unknown_report() -> UnknownReport {
    UnknownReport {
        reason: "timeout".into(),
        evidence: None,
        owner: Owner::Reconciler,
        next_check_at: None,
    }
}

/// Finishing twice (any finish after any finish) is refused and changes nothing.
pub async fn second_finish_cannot_overwrite<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let r = req("t", "k", json!({"n": 1}));
    let c = e.in_flight(&r).await;
    e.ledger
        .confirm(&c, json!("first"), None)
        .await
        .expect("first");
    let before = e.snapshot(&r).await;
    let errs = [
        e.ledger
            .confirm(&c, json!("second"), None)
            .await
            .expect_err("confirm again"),
        e.ledger
            .reject(&c, "nope".into(), None)
            .await
            .expect_err("reject after confirm"),
        e.ledger
            .mark_unknown(&c, unknown_report())
            .await
            .expect_err("unknown after confirm"),
        e.ledger
            .mark_dispatched(
                &c,
                Dispatch {
                    executor: "a".into(),
                    metadata: None,
                },
            )
            .await
            .expect_err("dispatch after confirm"),
    ];
    for err in errs {
        assert!(
            matches!(
                err,
                LedgerError::IllegalTransition {
                    from: StateKind::Confirmed,
                    ..
                }
            ),
            "got {err:?}"
        );
    }
    assert_eq!(e.snapshot(&r).await, before);

    // Same for a rejection, and for confirming without a dispatch.
    let r2 = req("t", "k2", json!({"n": 1}));
    let c2 = e.start(&r2, "a").await;
    let err = e
        .ledger
        .confirm(&c2, json!(1), None)
        .await
        .expect_err("confirm before dispatch");
    assert!(matches!(
        err,
        LedgerError::IllegalTransition {
            from: StateKind::Claimed,
            ..
        }
    ));
    e.dispatch(&c2).await;
    e.ledger
        .reject(&c2, "no".into(), None)
        .await
        .expect("reject");
    let before = e.snapshot(&r2).await;
    assert!(e.ledger.confirm(&c2, json!(1), None).await.is_err());
    assert_eq!(e.snapshot(&r2).await, before);
}

/// Finishing an identity that was never begun is `NotFound` and writes nothing.
pub async fn finish_unknown_identity_changes_nothing<
    F: Fn(Setup) -> Fut,
    Fut: Future<Output = Subject>,
>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let r = req("t", "never-begun", json!({"n": 1}));
    let forged = Claim {
        id: r.id().clone(),
        fingerprint: r.fingerprint(),
        epoch: Epoch(1),
        holder: "forger".into(),
        lease_until: T0.plus(super::LEASE),
        destination_key: destination_key(r.id()),
        attempt_number: 1,
        block: crate::ledger::BlockWidth::Operation,
    };
    let errs = [
        e.ledger
            .confirm(&forged, json!(1), None)
            .await
            .expect_err("confirm"),
        e.ledger
            .reject(&forged, "x".into(), None)
            .await
            .expect_err("reject"),
        e.ledger
            .mark_unknown(&forged, unknown_report())
            .await
            .expect_err("unknown"),
        e.ledger
            .mark_dispatched(
                &forged,
                Dispatch {
                    executor: "a".into(),
                    metadata: None,
                },
            )
            .await
            .expect_err("dispatch"),
        e.ledger
            .renew(&forged, super::LEASE)
            .await
            .expect_err("renew"),
        e.ledger
            .cancel(r.id(), "x".into())
            .await
            .expect_err("cancel"),
    ];
    for err in errs {
        assert!(matches!(err, LedgerError::NotFound { .. }), "got {err:?}");
    }
    assert_eq!(e.snapshot(&r).await, (None, vec![]));
    assert!(
        e.ledger
            .list(&Default::default())
            .await
            .expect("list")
            .is_empty()
    );
}

/// A claim whose parameters differ from the recorded ones is refused.
pub async fn finish_mismatched_params_changes_nothing<
    F: Fn(Setup) -> Fut,
    Fut: Future<Output = Subject>,
>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let r = req("t", "k", json!({"amount": 10}));
    let c = e.in_flight(&r).await;
    let before = e.snapshot(&r).await;
    let other = req("t", "k", json!({"amount": 1000}));
    let mut forged = c.clone();
    forged.fingerprint = other.fingerprint();
    let err = e
        .ledger
        .confirm(&forged, json!(1), None)
        .await
        .expect_err("mismatch");
    match err {
        LedgerError::ParamsMismatch {
            recorded, given, ..
        } => {
            assert_eq!(recorded, r.fingerprint());
            assert_eq!(given, other.fingerprint());
        }
        other => panic!("expected params mismatch, got {other:?}"),
    }
    forged.fingerprint = Fingerprint([0; 32]);
    assert!(matches!(
        e.ledger.reject(&forged, "x".into(), None).await,
        Err(LedgerError::ParamsMismatch { .. })
    ));
    assert_eq!(e.snapshot(&r).await, before);
}

/// An invalid result (too deep, too large) or empty evidence is refused;
/// the operation stays dispatched and can still be confirmed properly.
pub async fn finish_invalid_result_changes_nothing<
    F: Fn(Setup) -> Fut,
    Fut: Future<Output = Subject>,
>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let limits = Limits::default();
    let r = req("t", "k", json!({"n": 1}));
    let c = e.in_flight(&r).await;
    let before = e.snapshot(&r).await;
    let mut deep = json!(1);
    for _ in 0..=limits.max_depth {
        deep = json!([deep]);
    }
    let huge = json!("x".repeat(limits.max_params_bytes));
    for (bad, field) in [(deep, "result"), (huge, "result")] {
        let err = e
            .ledger
            .confirm(&c, bad, None)
            .await
            .expect_err("invalid result");
        assert_eq!(err.field(), Some(field), "got {err:?}");
    }
    let err = e
        .ledger
        .confirm(&c, json!(1), Some(String::new()))
        .await
        .expect_err("evidence");
    assert_eq!(err.field(), Some("evidence"));
    let err = e
        .ledger
        .reject(&c, "  ".into(), None)
        .await
        .expect_err("reason");
    assert_eq!(err.field(), Some("reason"));
    assert_eq!(e.snapshot(&r).await, before);
    let rec = e
        .ledger
        .confirm(&c, json!({"ok": true}), None)
        .await
        .expect("valid confirm");
    assert_eq!(rec.state.kind(), StateKind::Confirmed);
}

/// A holder whose claim was superseded cannot record anything.
pub async fn stale_epoch_refused<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(make: F) {
    let e = env(make, Retention::default()).await;
    let r = req("t", "k", json!({"n": 1}));
    let old = e.start(&r, "slow").await;
    e.clock.advance(super::LEASE);
    let new = e.start(&r, "fast").await;
    assert_eq!(new.epoch, Epoch(old.epoch.0 + 1));
    let before = e.snapshot(&r).await;
    let err = e
        .ledger
        .mark_dispatched(
            &old,
            Dispatch {
                executor: "slow".into(),
                metadata: None,
            },
        )
        .await
        .expect_err("stale dispatch");
    assert!(err.is_stale(), "got {err:?}");
    match err {
        LedgerError::StaleEpoch { given, current, .. } => {
            assert_eq!(given, old.epoch);
            assert_eq!(current, new.epoch);
        }
        other => panic!("expected stale epoch, got {other:?}"),
    }
    assert!(
        e.ledger
            .renew(&old, super::LEASE)
            .await
            .expect_err("stale renew")
            .is_stale()
    );
    assert!(
        e.ledger
            .release(&old, crate::ReleaseReason::Abandoned)
            .await
            .expect_err("stale release")
            .is_stale()
    );
    assert_eq!(e.snapshot(&r).await, before);
    // A forged future epoch is refused too.
    let mut future = new.clone();
    future.epoch = Epoch(99);
    assert!(
        e.ledger
            .mark_dispatched(
                &future,
                Dispatch {
                    executor: "x".into(),
                    metadata: None
                }
            )
            .await
            .expect_err("future")
            .is_stale()
    );
    e.dispatch(&new).await;
    assert!(
        e.ledger
            .confirm(&old, json!(1), None)
            .await
            .expect_err("stale confirm")
            .is_stale()
    );
    e.ledger
        .confirm(&new, json!(1), None)
        .await
        .expect("current holder confirms");
}
