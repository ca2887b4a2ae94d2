//! An approval binds its parameters; numbers are recorded exactly (I-JSON).

use std::sync::Arc;

use serde_json::json;

use super::{Setup, Subject, env, req};
use crate::{
    ApproveOutcome, BeginOutcome, Dispatch, Limits, NewAttempt, OperationRequest, Owner,
    ReleaseReason, Resolution, ResolvedAs, Retention, StateKind, Terminal, UnknownReport,
};

fn already(o: ApproveOutcome) -> StateKind {
    match o {
        ApproveOutcome::AlreadyApproved { state } => state,
        other => panic!("expected already approved, got {other:?}"),
    }
}

/// approve → planned (durable, fingerprinted, nothing claimed); the same
/// parameters again (in any member order) change nothing; other parameters
/// are a conflict for `approve` and for `begin`, in every state, and never
/// replace the approved ones; the approved parameters then run once and
/// are replayed.
pub async fn approval_binds_parameters<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let a = req("tenant-1", "K-701", json!({"sku": "KETTLE", "qty": 1}));
    let reordered = req("tenant-1", "K-701", json!({"qty": 1, "sku": "KETTLE"}));
    let changed = req("tenant-1", "K-701", json!({"sku": "KETTLE", "qty": 2}));
    let conflict = |o: ApproveOutcome| match o {
        ApproveOutcome::Conflict {
            recorded,
            requested,
        } => assert_eq!(
            (recorded, requested),
            (a.fingerprint(), changed.fingerprint())
        ),
        other => panic!("expected conflict, got {other:?}"),
    };

    assert_eq!(
        e.ledger.approve(&a).await.expect("approve"),
        ApproveOutcome::Planned
    );
    let planned = e.get(&a).await.expect("recorded");
    assert_eq!(planned.state.kind(), StateKind::Planned);
    assert_eq!(planned.params, Some(json!({"qty": 1, "sku": "KETTLE"})));
    assert_eq!(planned.fingerprint, a.fingerprint());
    assert_eq!((planned.epoch.0, planned.dispatch_count), (0, 0));
    assert_eq!(
        already(e.ledger.approve(&reordered).await.expect("again")),
        StateKind::Planned
    );
    conflict(e.ledger.approve(&changed).await.expect("approve changed"));
    let before = e.snapshot(&a).await;
    assert!(matches!(
        e.begin(&changed, "fallback").await,
        BeginOutcome::Conflict { .. }
    ));
    assert_eq!(e.snapshot(&a).await, before, "a conflict changes nothing");
    assert!(before.1.is_empty(), "an approval sends nothing");

    // Through the lifecycle: the approval answers where it is.
    let claim = e.start(&reordered, "primary").await;
    assert_eq!(claim.epoch.0, 1);
    assert_eq!(
        already(e.ledger.approve(&a).await.expect("claimed")),
        StateKind::Claimed
    );
    e.dispatch(&claim).await;
    assert_eq!(
        already(e.ledger.approve(&a).await.expect("dispatched")),
        StateKind::Dispatched
    );
    conflict(
        e.ledger
            .approve(&changed)
            .await
            .expect("changed, dispatched"),
    );
    e.ledger
        .confirm(&claim, json!({"shipment": "S-1"}), None)
        .await
        .expect("confirm");
    match e.ledger.approve(&a).await.expect("confirmed") {
        ApproveOutcome::Replayed(Terminal::Confirmed { result, .. }) => {
            assert_eq!(result, json!({"shipment": "S-1"}));
        }
        other => panic!("expected a replay, got {other:?}"),
    }
    conflict(
        e.ledger
            .approve(&changed)
            .await
            .expect("changed, confirmed"),
    );
    let done = e.get(&a).await.expect("stored");
    assert_eq!(done.params, planned.params, "the approved parameters ran");
    assert_eq!(done.dispatch_count, 1);
}

/// Unknown and cancelled approvals answer as such; an approval is as good
/// as the first `begin`'s record for every other command.
pub async fn approval_in_unknown_and_cancelled<
    F: Fn(Setup) -> Fut,
    Fut: Future<Output = Subject>,
>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let lost = req("t", "K-lost", json!({"n": 1}));
    e.ledger.approve(&lost).await.expect("approve");
    let c = e.start(&lost, "a").await;
    e.dispatch(&c).await;
    let report = UnknownReport {
        reason: "connection reset".into(),
        evidence: None,
        owner: Owner::Review,
        next_check_at: None,
    };
    e.ledger.mark_unknown(&c, report).await.expect("unknown");
    assert_eq!(
        already(e.ledger.approve(&lost).await.expect("unknown")),
        StateKind::Unknown
    );

    let withdrawn = req("t", "K-withdrawn", json!({"n": 1}));
    e.ledger.approve(&withdrawn).await.expect("approve");
    e.ledger
        .cancel(withdrawn.id(), "customer changed their mind".into())
        .await
        .expect("cancel a planned approval");
    match e.ledger.approve(&withdrawn).await.expect("cancelled") {
        ApproveOutcome::Cancelled { reason } => assert_eq!(reason, "customer changed their mind"),
        other => panic!("expected cancelled, got {other:?}"),
    }
    assert!(matches!(
        e.begin(&withdrawn, "a").await,
        BeginOutcome::Cancelled { .. }
    ));

    // Released back to planned: still bound to the approved parameters.
    let back = req("t", "K-back", json!({"n": 1}));
    e.ledger.approve(&back).await.expect("approve");
    let c = e.start(&back, "a").await;
    e.ledger
        .release(&c, ReleaseReason::Abandoned)
        .await
        .expect("release");
    assert_eq!(
        already(e.ledger.approve(&back).await.expect("released")),
        StateKind::Planned
    );
    assert!(matches!(
        e.begin(&req("t", "K-back", json!({"n": 2})), "b").await,
        BeginOutcome::Conflict { .. }
    ));
}

/// Concurrent approvals of one identity with different parameters record
/// one plan: exactly one `Planned`, the others a conflict or "already".
pub async fn concurrent_approvals_record_one_plan<
    F: Fn(Setup) -> Fut,
    Fut: Future<Output = Subject>,
>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let racers: Vec<_> = (0..8)
        .map(|i| {
            let ledger = Arc::clone(&e.ledger);
            let r = req("t", "K-race", json!({"qty": i % 2}));
            tokio::spawn(async move { (r.fingerprint(), ledger.approve(&r).await) })
        })
        .collect();
    let mut planned = Vec::new();
    let mut others = Vec::new();
    for racer in racers {
        let (fp, outcome) = racer.await.expect("task");
        match outcome.expect("approve") {
            ApproveOutcome::Planned => planned.push(fp),
            other => others.push((fp, other)),
        }
    }
    assert_eq!(planned.len(), 1, "one plan: {others:?}");
    let stored = e
        .get(&req("t", "K-race", json!({})))
        .await
        .expect("recorded");
    assert_eq!(stored.fingerprint, planned[0]);
    for (fp, outcome) in others {
        match outcome {
            ApproveOutcome::AlreadyApproved { .. } => assert_eq!(fp, planned[0]),
            ApproveOutcome::Conflict { recorded, .. } => {
                assert_eq!(recorded, planned[0]);
                assert_ne!(fp, planned[0]);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// I-JSON: an integer outside ±(2^53−1) is refused with its JSON path in
/// params, results, resolutions and metadata, and nothing is written; two
/// such integers can no longer share a fingerprint. What is recorded reads
/// back (and replays) as exactly the recorded value.
pub async fn numbers_are_recorded_exactly<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let new = |p: serde_json::Value| OperationRequest::new("t", "k", "act", &p, &Limits::default());
    let big = json!({"items": [{}, {}, {"batch": 9_007_199_254_740_993_u64}]});
    let err = new(big).expect_err("2^53 + 1 accepted");
    assert_eq!(err.field(), "params.items[2].batch");
    assert!(err.reason().contains("9007199254740993"), "{err}");
    // Before I-JSON, these two shared a fingerprint.
    for p in [
        json!({"n": 9_007_199_254_740_992_u64}),
        json!({"n": -9_007_199_254_740_992_i64}),
        json!({"n": 1e19}),
    ] {
        assert_eq!(new(p).expect_err("outside ±(2^53−1)").field(), "params.n");
    }
    for p in [
        json!({"n": 9_007_199_254_740_991_u64}),
        json!({"n": -9_007_199_254_740_991_i64}),
        json!({"n": 0.1}),
        json!({"n": 1.5e300}),
        json!({"n": 1e21}),
    ] {
        new(p.clone()).unwrap_or_else(|err| panic!("{p}: {err}"));
    }
    assert!(
        e.ledger
            .list(&Default::default())
            .await
            .expect("list")
            .is_empty()
    );

    // Results and metadata: refused by path, nothing changed.
    let r = req("t", "K-n", json!({"n": 1}));
    let c = e.start(&r, "a").await;
    let odd = Dispatch {
        executor: "a".into(),
        metadata: Some(json!({"tool_call": {"seq": 12_345_678_901_234_567_891_u64}})),
    };
    let before = e.snapshot(&r).await;
    let err = e
        .ledger
        .mark_dispatched(&c, odd)
        .await
        .expect_err("metadata");
    assert_eq!(err.field(), Some("metadata.tool_call.seq"));
    assert_eq!(e.snapshot(&r).await, before);
    e.dispatch(&c).await;
    let before = e.snapshot(&r).await;
    let big = json!({"id": 12_345_678_901_234_567_891_u64});
    let err = e.ledger.confirm(&c, big, None).await.expect_err("result");
    assert_eq!(err.field(), Some("result.id"));
    assert_eq!(e.snapshot(&r).await, before, "nothing recorded");
    let lookup = NewAttempt {
        kind: crate::AttemptKind::Lookup,
        executor: "reconciler".into(),
        outcome: crate::AttemptOutcome::Found,
        evidence: None,
        metadata: Some(json!([9_007_199_254_740_993_u64])),
        sent_at: None,
    };
    let err = e
        .ledger
        .append_attempt(r.id(), lookup)
        .await
        .expect_err("attempt");
    assert_eq!(err.field(), Some("metadata[0]"));

    // The recorded form is the answer, now and on every replay.
    let rec = e
        .ledger
        .confirm(&c, json!({"price": 1.0, "ratio": 0.1}), None)
        .await
        .expect("confirm");
    let crate::State::Confirmed { result, .. } = rec.state else {
        panic!("expected confirmed, got {:?}", rec.state)
    };
    assert_eq!(result, json!({"price": 1, "ratio": 0.1}));
    match e.begin(&r, "b").await {
        BeginOutcome::Replayed(Terminal::Confirmed { result: again, .. }) => {
            assert_eq!(again, result);
        }
        other => panic!("expected a replay, got {other:?}"),
    }

    // An operator's resolution is held to the same rule.
    let u = req("t", "K-u", json!({"n": 2}));
    let c = e.in_flight(&u).await;
    let report = UnknownReport {
        reason: "timeout".into(),
        evidence: None,
        owner: Owner::Review,
        next_check_at: None,
    };
    e.ledger.mark_unknown(&c, report).await.expect("unknown");
    let resolution = Resolution {
        outcome: ResolvedAs::Confirmed {
            result: json!({"total": -12_345_678_901_234_567_i64}),
        },
        evidence: "warehouse record".into(),
        actor: "ops".into(),
    };
    let err = e
        .ledger
        .resolve(u.id(), resolution)
        .await
        .expect_err("resolve");
    assert_eq!(err.field(), Some("result.total"));
    assert_eq!(
        e.get(&u).await.expect("stored").state.kind(),
        StateKind::Unknown
    );
}
