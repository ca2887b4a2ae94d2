//! `begin_dispatched`: check, claim and mark dispatched in one step.

use std::sync::Arc;

use serde_json::json;

use super::{LEASE, Setup, Subject, T0, env, opts, req, started};
use crate::{
    AttemptKind, AttemptOutcome, BeginOutcome, Dispatch, LEASE_EXPIRED_AFTER_DISPATCH, Retention,
    State, StateKind, Terminal,
};

fn dispatch(executor: &str) -> Dispatch {
    Dispatch {
        executor: executor.into(),
        metadata: Some(json!({"tool_call_id": "call_1", "b": 2, "a": 1})),
    }
}

/// A started `begin_dispatched` leaves the operation `dispatched` with one
/// pending dispatch attempt; later callers get `begin`'s answers and write
/// nothing; a crash before the send ends `unknown` when the lease passes;
/// an invalid dispatch claims nothing.
pub async fn begin_dispatched_claims_and_dispatches<
    F: Fn(Setup) -> Fut,
    Fut: Future<Output = Subject>,
>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let r = req("t", "K-1", json!({"order": 7}));
    let claim = started(
        e.ledger
            .begin_dispatched(&r, &opts("exec-a"), dispatch("exec-a"))
            .await
            .expect("begin_dispatched"),
    );
    assert_eq!((claim.epoch.0, claim.attempt_number), (1, 1));
    let (rec, attempts) = e.snapshot(&r).await;
    let rec = rec.expect("recorded");
    match &rec.state {
        State::Dispatched {
            holder,
            epoch,
            lease_until,
            dispatched_at,
        } => {
            assert_eq!(holder, "exec-a");
            assert_eq!(*epoch, claim.epoch);
            assert_eq!(*lease_until, T0.plus(LEASE));
            assert_eq!(*dispatched_at, T0);
        }
        other => panic!("expected dispatched, got {other:?}"),
    }
    assert_eq!(rec.dispatch_count, 1);
    assert_eq!(rec.first_dispatched_at, Some(T0));
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    let a = &attempts[0];
    assert_eq!(a.kind, AttemptKind::Dispatch);
    assert_eq!(a.outcome, AttemptOutcome::Pending);
    assert_eq!(a.epoch, Some(claim.epoch));
    assert_eq!(a.executor, "exec-a");
    assert_eq!(a.destination_key, claim.destination_key);
    assert_eq!(
        a.metadata,
        Some(json!({"a": 1, "b": 2, "tool_call_id": "call_1"}))
    );

    // A racing fallback is told who holds it; nothing is written.
    let before = e.snapshot(&r).await;
    match e
        .ledger
        .begin_dispatched(&r, &opts("exec-b"), dispatch("exec-b"))
        .await
        .expect("second")
    {
        BeginOutcome::InProgress { holder, state, .. } => {
            assert_eq!((holder.as_str(), state), ("exec-a", StateKind::Dispatched));
        }
        other => panic!("second: expected in_progress, got {other:?}"),
    }
    assert_eq!(e.snapshot(&r).await, before);

    // Changed parameters: a conflict, nothing written.
    let changed = req("t", "K-1", json!({"order": 8}));
    let conflict = e
        .ledger
        .begin_dispatched(&changed, &opts("exec-b"), dispatch("exec-b"))
        .await
        .expect("conflict");
    assert!(
        matches!(conflict, BeginOutcome::Conflict { .. }),
        "{conflict:?}"
    );
    assert_eq!(e.snapshot(&r).await, before);

    // The holder records the outcome with the claim; a retry replays it.
    e.ledger
        .confirm(&claim, json!({"shipment": "S-1"}), None)
        .await
        .expect("confirm");
    match e
        .ledger
        .begin_dispatched(&r, &opts("exec-b"), dispatch("exec-b"))
        .await
        .expect("replay")
    {
        BeginOutcome::Replayed(Terminal::Confirmed { result, .. }) => {
            assert_eq!(result, json!({"shipment": "S-1"}));
        }
        other => panic!("after confirm: expected replayed, got {other:?}"),
    }
    let attempts = e.ledger.attempts(r.id()).await.expect("attempts");
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].outcome, AttemptOutcome::Confirmed);

    // Crash between the commit and the send: unknown once the lease passes,
    // never planned (the effect may have happened).
    let crashed = req("t", "K-crash", json!({"order": 9}));
    e.ledger
        .begin_dispatched(&crashed, &opts("exec-a"), dispatch("exec-a"))
        .await
        .expect("crash begin");
    e.clock.advance(LEASE);
    match e
        .ledger
        .begin_dispatched(&crashed, &opts("exec-b"), dispatch("exec-b"))
        .await
        .expect("after crash")
    {
        BeginOutcome::Unresolved(info) => {
            assert_eq!(info.reason, LEASE_EXPIRED_AFTER_DISPATCH);
        }
        other => panic!("after lease: expected unresolved, got {other:?}"),
    }
    assert_eq!(
        e.get(&crashed).await.expect("stored").state.kind(),
        StateKind::Unknown
    );

    // An invalid dispatch is refused before anything is claimed.
    let fresh = req("t", "K-invalid", json!({"order": 1}));
    let bad = Dispatch {
        executor: String::new(),
        metadata: None,
    };
    let err = e
        .ledger
        .begin_dispatched(&fresh, &opts("exec-a"), bad)
        .await
        .expect_err("empty executor");
    assert!(err.to_string().contains("executor"), "{err}");
    assert_eq!(e.snapshot(&fresh).await, (None, Vec::new()));
}

/// An approved (`planned`) operation is started and dispatched by one
/// call, and concurrent callers on one identity get exactly one `Started`
/// and one dispatch attempt.
pub async fn begin_dispatched_races_one_winner<
    F: Fn(Setup) -> Fut,
    Fut: Future<Output = Subject>,
>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let r = req("t", "K-race", json!({"qty": 1}));
    e.ledger.approve(&r).await.expect("approve");
    let racers: Vec<_> = (0..8)
        .map(|i| {
            let ledger = Arc::clone(&e.ledger);
            let r = r.clone();
            let who = format!("exec-{i}");
            tokio::spawn(async move {
                ledger
                    .begin_dispatched(&r, &opts(&who), dispatch(&who))
                    .await
            })
        })
        .collect();
    let mut winners = Vec::new();
    for racer in racers {
        match racer.await.expect("task").expect("begin_dispatched") {
            BeginOutcome::Started(c) => winners.push(c),
            BeginOutcome::InProgress { state, .. } => assert_eq!(state, StateKind::Dispatched),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one started");
    let (rec, attempts) = e.snapshot(&r).await;
    let rec = rec.expect("recorded");
    assert_eq!(rec.state.kind(), StateKind::Dispatched);
    assert_eq!(rec.dispatch_count, 1);
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].executor, winners[0].holder);
}

/// A claim taken under a block width wider than the operation is checked
/// again when it is marked dispatched: a sibling that became unknown in
/// between (a door that claims and sends in two requests leaves time for
/// that) blocks the send, and nothing changes; the claim can still be
/// given back. A re-send claim (same destination key) is not blocked.
pub async fn block_width_is_checked_again_at_dispatch<
    F: Fn(Setup) -> Fut,
    Fut: Future<Output = Subject>,
>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let scoped = crate::BeginOptions {
        block: crate::BlockWidth::Scope,
        ..opts("exec-a")
    };
    let x = req("order-1", "ship-x", json!({"order": 1}));
    let y = req("order-1", "ship-y", json!({"order": 1}));
    let x_claim = started(e.ledger.begin(&x, &scoped).await.expect("begin x"));
    e.ledger
        .mark_dispatched(&x_claim, dispatch("exec-a"))
        .await
        .expect("dispatch x");
    // Y is claimed while X is in flight (not yet unresolved) ...
    let y_claim = started(e.ledger.begin(&y, &scoped).await.expect("begin y"));
    assert_eq!(y_claim.block, crate::BlockWidth::Scope);
    // ... then X's outcome is lost.
    let unknown = crate::UnknownReport {
        reason: "timeout after send".into(),
        evidence: None,
        owner: crate::Owner::Reconciler,
        next_check_at: None,
    };
    e.ledger
        .mark_unknown(&x_claim, unknown)
        .await
        .expect("x unknown");
    let before = e.snapshot(&y).await;
    let err = e
        .ledger
        .mark_dispatched(&y_claim, dispatch("exec-a"))
        .await
        .expect_err("y may not be sent");
    match &err {
        crate::LedgerError::Blocked { id, blocked_by, .. } => {
            assert_eq!((id, blocked_by), (y.id(), x.id()));
        }
        other => panic!("expected blocked, got {other:?}"),
    }
    assert!(err.is_blocked());
    assert_eq!(e.snapshot(&y).await, before, "nothing changed");
    assert_eq!(e.get(&y).await.expect("y").state.kind(), StateKind::Claimed);
    e.ledger
        .release(&y_claim, crate::ReleaseReason::Abandoned)
        .await
        .expect("the claim can be given back");
    assert_eq!(e.get(&y).await.expect("y").state.kind(), StateKind::Planned);

    // The same claim under the operation's own width is sent.
    let z = req("order-1", "ship-z", json!({"order": 1}));
    let z_claim = e.start(&z, "exec-a").await;
    e.ledger
        .mark_dispatched(&z_claim, dispatch("exec-a"))
        .await
        .expect("an operation-wide claim is not blocked by a sibling");
}

/// An unknown operation being re-sent with its own destination key
/// (claimed again, then dispatched again) still has an unknown first
/// outcome: it blocks its siblings within the block width, at `begin` and
/// at dispatch, until it is decided.
pub async fn a_resend_in_progress_blocks_its_siblings<
    F: Fn(Setup) -> Fut,
    Fut: Future<Output = Subject>,
>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let scoped = crate::BeginOptions {
        block: crate::BlockWidth::Scope,
        ..opts("exec-a")
    };
    let x = req("order-1", "ship-x", json!({"order": 1}));
    let c = started(e.ledger.begin(&x, &scoped).await.expect("begin x"));
    e.ledger
        .mark_dispatched(&c, dispatch("exec-a"))
        .await
        .expect("dispatch x");
    let unknown = crate::UnknownReport {
        reason: "timeout after send".into(),
        evidence: None,
        owner: crate::Owner::Reconciler,
        next_check_at: None,
    };
    e.ledger.mark_unknown(&c, unknown).await.expect("x unknown");
    let resend = e
        .ledger
        .claim_for_resend(x.id(), &scoped, std::time::Duration::from_secs(3600))
        .await
        .expect("claim for re-send")
        .expect("inside the window");
    let z = req("order-1", "ship-z", json!({"order": 1}));
    let suspended = |o: BeginOutcome| match o {
        BeginOutcome::Suspended { blocked_by, info } => {
            assert_eq!(&blocked_by, x.id());
            info
        }
        other => panic!("expected suspended, got {other:?}"),
    };
    let info = suspended(e.ledger.begin(&z, &scoped).await.expect("begin z"));
    assert!(info.reason.contains("re-sent"), "{info:?}");
    assert_eq!(e.get(&z).await, None, "nothing written for z");
    e.ledger
        .mark_dispatched(&resend, dispatch("exec-a"))
        .await
        .expect("the re-send is sent");
    suspended(e.ledger.begin(&z, &scoped).await.expect("begin z"));
    e.ledger
        .confirm(&resend, json!({"id": "S-1"}), None)
        .await
        .expect("x confirmed by its re-send");
    assert!(matches!(
        e.ledger.begin(&z, &scoped).await.expect("begin z"),
        BeginOutcome::Started(_)
    ));
}
