//! The main lifecycle: start, in progress, conflict, confirm, replay.

use serde_json::json;

use super::{Setup, Subject, env, opts, req};
use crate::{
    AttemptKind, AttemptOutcome, BeginOutcome, Dispatch, NewAttempt, Owner, ReleaseReason,
    Retention, State, StateKind, Terminal, UnknownReport, destination_key,
};

/// begin → begin → begin(changed) → confirm → begin =
/// started, in_progress, conflict, confirmed, replayed (with the result).
pub async fn seed_timeline<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(make: F) {
    let e = env(make, Retention::default()).await;
    let a = req("tenant-1", "K-701", json!({"order": 42, "carrier": "dhl"}));
    let changed = req("tenant-1", "K-701", json!({"order": 42, "carrier": "ups"}));

    let claim = e.start(&a, "primary").await;
    assert_eq!(claim.epoch.0, 1);
    assert_eq!(claim.attempt_number, 1);
    assert_eq!(claim.destination_key, destination_key(a.id()));

    match e.begin(&a, "fallback").await {
        BeginOutcome::InProgress { holder, state, .. } => {
            assert_eq!(holder, "primary");
            assert_eq!(state, StateKind::Claimed);
        }
        other => panic!("second begin: expected in_progress, got {other:?}"),
    }
    match e.begin(&changed, "fallback").await {
        BeginOutcome::Conflict {
            recorded,
            requested,
        } => {
            assert_eq!(recorded, a.fingerprint());
            assert_eq!(requested, changed.fingerprint());
        }
        other => panic!("changed params: expected conflict, got {other:?}"),
    }
    e.dispatch(&claim).await;
    let rec = e
        .ledger
        .confirm(
            &claim,
            json!({"shipment": "S-1"}),
            Some("dest id S-1".into()),
        )
        .await
        .expect("confirm");
    assert!(matches!(rec.state, State::Confirmed { .. }));
    match e.begin(&a, "fallback").await {
        BeginOutcome::Replayed(Terminal::Confirmed {
            result, evidence, ..
        }) => {
            assert_eq!(result, json!({"shipment": "S-1"}));
            assert_eq!(evidence.as_deref(), Some("dest id S-1"));
        }
        other => panic!("after confirm: expected replayed, got {other:?}"),
    }
    let stored = e.get(&a).await.expect("stored");
    assert_eq!(stored.params, Some(json!({"carrier": "dhl", "order": 42})));
    assert_eq!(stored.dispatch_count, 1);
    assert_eq!(stored.epoch.0, 1);
}

/// Changed parameters conflict in every state, and never replace the approved ones.
pub async fn conflict_after_completion<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let changed = |k: &str| req("t", k, json!({"n": 2}));
    // planned (after release), claimed, dispatched, confirmed, rejected, unknown, cancelled
    let mk = |k: &str| req("t", k, json!({"n": 1}));
    let planned = mk("planned");
    let c = e.start(&planned, "a").await;
    e.ledger
        .release(&c, ReleaseReason::Abandoned)
        .await
        .expect("release");
    let claimed = mk("claimed");
    e.start(&claimed, "a").await;
    let dispatched = mk("dispatched");
    e.in_flight(&dispatched).await;
    let confirmed = mk("confirmed");
    let c = e.in_flight(&confirmed).await;
    e.ledger.confirm(&c, json!(1), None).await.expect("confirm");
    let rejected = mk("rejected");
    let c = e.in_flight(&rejected).await;
    e.ledger
        .reject(&c, "out of stock".into(), None)
        .await
        .expect("reject");
    let unknown = mk("unknown");
    let c = e.in_flight(&unknown).await;
    e.ledger
        .mark_unknown(
            &c,
            UnknownReport {
                reason: "timeout".into(),
                evidence: None,
                owner: Owner::Reconciler,
                next_check_at: None,
            },
        )
        .await
        .expect("mark_unknown");
    let cancelled = mk("cancelled");
    e.start(&cancelled, "a").await;
    e.ledger
        .cancel(cancelled.id(), "approval withdrawn".into())
        .await
        .expect("cancel");

    for r in [
        &planned,
        &claimed,
        &dispatched,
        &confirmed,
        &rejected,
        &unknown,
        &cancelled,
    ] {
        let before = e.snapshot(r).await;
        let other = changed(r.id().key.as_str());
        match e.begin(&other, "fallback").await {
            BeginOutcome::Conflict {
                recorded,
                requested,
            } => {
                assert_eq!(recorded, r.fingerprint());
                assert_eq!(requested, other.fingerprint());
            }
            o => panic!("{}: expected conflict, got {o:?}", r.id()),
        }
        assert_eq!(
            e.snapshot(r).await,
            before,
            "{}: conflict changed state",
            r.id()
        );
        let stored = before.0.expect("stored");
        assert_eq!(stored.params, Some(json!({"n": 1})));
    }
}

/// Same key in another scope, same params under another key: independent operations.
pub async fn other_scope_and_other_key_are_independent<
    F: Fn(Setup) -> Fut,
    Fut: Future<Output = Subject>,
>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let p = json!({"order": 7});
    let a = req("tenant-1", "K-1", p.clone());
    let other_scope = req("tenant-2", "K-1", p.clone());
    let other_key = req("tenant-1", "K-2", p.clone());
    let ca = e.start(&a, "x").await;
    let cs = e.start(&other_scope, "x").await;
    let ck = e.start(&other_key, "x").await;
    assert_ne!(ca.destination_key, cs.destination_key);
    assert_ne!(ca.destination_key, ck.destination_key);
    assert_ne!(cs.destination_key, ck.destination_key);
    for c in [&ca, &cs, &ck] {
        e.dispatch(c).await;
        e.ledger
            .confirm(c, json!({"k": c.id.key.as_str()}), None)
            .await
            .expect("confirm");
    }
    let all = e.ledger.list(&Default::default()).await.expect("list");
    assert_eq!(all.len(), 3, "three independent operations");
    assert!(
        all.iter()
            .all(|r| r.state.kind() == StateKind::Confirmed && r.dispatch_count == 1)
    );
}

/// Parameter member order never changes identity.
pub async fn member_order_irrelevant<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(make: F) {
    let e = env(make, Retention::default()).await;
    let a = req("t", "k", json!({"a": 1, "b": {"y": [1, 2], "x": true}}));
    let b = req("t", "k", json!({"b": {"x": true, "y": [1, 2]}, "a": 1}));
    assert_eq!(a.fingerprint(), b.fingerprint());
    assert_eq!(a.canonical_params(), b.canonical_params());
    e.start(&a, "x").await;
    assert!(matches!(
        e.begin(&b, "y").await,
        BeginOutcome::InProgress { .. }
    ));
    // An array's order *is* meaningful.
    let c = req("t", "k", json!({"a": 1, "b": {"x": true, "y": [2, 1]}}));
    assert!(matches!(
        e.begin(&c, "y").await,
        BeginOutcome::Conflict { .. }
    ));
}

/// Mutating what the caller passed in or got back never changes what is stored.
pub async fn mutation_cannot_change_stored<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let r = req("t", "k", json!({"n": 1}));
    let c = e.in_flight(&r).await;
    let mut result = json!({"shipment": "S-1", "items": [1, 2]});
    let mut rec = e
        .ledger
        .confirm(&c, result.clone(), None)
        .await
        .expect("confirm");
    result["shipment"] = json!("S-2");
    if let State::Confirmed { result, .. } = &mut rec.state {
        result["items"] = json!([]);
    }
    rec.params = Some(json!({"n": 999}));
    let mut replay = e.begin(&r, "y").await;
    if let BeginOutcome::Replayed(Terminal::Confirmed { result, .. }) = &mut replay {
        *result = json!("tampered");
    }
    let mut got = e.get(&r).await.expect("stored");
    got.params = None;
    let stored = e.get(&r).await.expect("stored");
    assert_eq!(stored.params, Some(json!({"n": 1})));
    match e.begin(&r, "z").await {
        BeginOutcome::Replayed(Terminal::Confirmed { result, .. }) => {
            assert_eq!(result, json!({"shipment": "S-1", "items": [1, 2]}));
        }
        other => panic!("expected replayed, got {other:?}"),
    }
}

/// A definitive rejection is terminal and replayed.
pub async fn reject_is_replayed<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(make: F) {
    let e = env(make, Retention::default()).await;
    let r = req("t", "k", json!({"n": 1}));
    let c = e.in_flight(&r).await;
    e.ledger
        .reject(&c, "address invalid".into(), Some("HTTP 422".into()))
        .await
        .expect("reject");
    match e.begin(&r, "other").await {
        BeginOutcome::Replayed(Terminal::Rejected {
            reason, evidence, ..
        }) => {
            assert_eq!(reason, "address invalid");
            assert_eq!(evidence.as_deref(), Some("HTTP 422"));
        }
        other => panic!("expected replayed rejection, got {other:?}"),
    }
}

/// Proof of non-sending returns a first claim to `planned`; it can start again
/// with a new epoch. Abandon works only before dispatch.
pub async fn release_not_sent_and_abandoned<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let r = req("t", "k", json!({"n": 1}));
    let c1 = e.in_flight(&r).await;
    let err = e
        .ledger
        .release(&c1, ReleaseReason::Abandoned)
        .await
        .expect_err("abandon after dispatch");
    assert!(matches!(
        err,
        crate::LedgerError::IllegalTransition {
            from: StateKind::Dispatched,
            ..
        }
    ));
    let err = e
        .ledger
        .release(
            &c1,
            ReleaseReason::NotSent {
                evidence: " ".into(),
            },
        )
        .await
        .expect_err("empty evidence");
    assert_eq!(err.field(), Some("evidence"));
    let rec = e
        .ledger
        .release(
            &c1,
            ReleaseReason::NotSent {
                evidence: "connect refused".into(),
            },
        )
        .await
        .expect("release not sent");
    assert_eq!(rec.state, State::Planned);
    assert_eq!(rec.dispatch_count, 0);
    assert_eq!(rec.first_dispatched_at, None);
    let attempts = e.ledger.attempts(r.id()).await.expect("attempts");
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].outcome, AttemptOutcome::NotSent);
    assert_eq!(attempts[0].evidence.as_deref(), Some("connect refused"));

    let c2 = e.start(&r, "b").await;
    assert_eq!(c2.epoch.0, 2);
    let rec = e
        .ledger
        .release(&c2, ReleaseReason::Abandoned)
        .await
        .expect("abandon");
    assert_eq!(rec.state, State::Planned);
    let c3 = e.start(&r, "c").await;
    assert_eq!(c3.epoch.0, 3);
    assert!(
        e.ledger
            .mark_dispatched(
                &c2,
                Dispatch {
                    executor: "b".into(),
                    metadata: None
                }
            )
            .await
            .is_err()
    );
}

/// Attempts: dispatch attempts carry epoch, executor, destination key and
/// metadata (a provider's tool-call id is metadata, never identity);
/// lookups are appended unfenced.
pub async fn attempt_log<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(make: F) {
    let e = env(make, Retention::default()).await;
    let r = req("t", "k", json!({"n": 1}));
    let c = e.start(&r, "exec-a").await;
    let id = e
        .ledger
        .mark_dispatched(
            &c,
            Dispatch {
                executor: "exec-a".into(),
                metadata: Some(json!({"tool_call_id": "call_1"})),
            },
        )
        .await
        .expect("dispatch");
    e.clock.advance(std::time::Duration::from_millis(5));
    e.ledger
        .mark_unknown(
            &c,
            UnknownReport {
                reason: "connection reset".into(),
                evidence: Some("ECONNRESET".into()),
                owner: Owner::Reconciler,
                next_check_at: None,
            },
        )
        .await
        .expect("unknown");
    let lookup = e
        .ledger
        .append_attempt(
            r.id(),
            NewAttempt {
                kind: AttemptKind::Lookup,
                executor: "reconciler".into(),
                outcome: AttemptOutcome::NotFound,
                evidence: Some("GET /shipments?key=… → []".into()),
                metadata: None,
                // Sent before it is appended (when the answer came).
                sent_at: Some(super::T0),
            },
        )
        .await
        .expect("lookup");
    let missing = req("t", "never", json!({}));
    assert!(matches!(
        e.ledger
            .append_attempt(
                missing.id(),
                NewAttempt {
                    kind: AttemptKind::Lookup,
                    executor: "reconciler".into(),
                    outcome: AttemptOutcome::NotFound,
                    evidence: None,
                    metadata: None,
                    sent_at: None,
                },
            )
            .await,
        Err(crate::LedgerError::NotFound { .. })
    ));
    let log = e.ledger.attempts(r.id()).await.expect("attempts");
    assert_eq!(log.len(), 2);
    let d = &log[0];
    assert_eq!(d.attempt_id, id);
    assert_eq!(d.kind, AttemptKind::Dispatch);
    assert_eq!(d.epoch, Some(c.epoch));
    assert_eq!(d.executor, "exec-a");
    assert_eq!(d.destination_key, c.destination_key);
    assert_eq!(d.sent_at, super::T0);
    assert_eq!(
        d.finished_at,
        Some(super::T0.plus(std::time::Duration::from_millis(5)))
    );
    assert_eq!(d.outcome, AttemptOutcome::Unknown);
    assert_eq!(d.evidence.as_deref(), Some("ECONNRESET"));
    assert_eq!(d.metadata, Some(json!({"tool_call_id": "call_1"})));
    assert_eq!(log[1].attempt_id, lookup);
    assert_eq!(log[1].kind, AttemptKind::Lookup);
    assert_eq!(log[1].outcome, AttemptOutcome::NotFound);
    assert_eq!(log[1].epoch, None);
    assert_eq!(
        (log[1].sent_at, log[1].finished_at),
        (super::T0, d.finished_at),
        "a lookup is logged from when it was sent to when it answered"
    );
    // The same action re-proposed by a fallback model with another tool-call id
    // is the same operation: it is unresolved, not started.
    assert!(matches!(
        e.ledger.begin(&r, &opts("fallback")).await.expect("begin"),
        BeginOutcome::Unresolved(_)
    ));
}
