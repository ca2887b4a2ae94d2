//! Unresolved operations: resolution, re-send; cancellation before dispatch.

use std::time::Duration;

use serde_json::json;

use super::{Setup, Subject, T0, env, opts, req};
use crate::{
    AttemptKind, AttemptOutcome, BeginOutcome, LedgerError, Owner, ReleaseReason, Resolution,
    ResolvedAs, Retention, State, StateKind, Terminal, UnknownReport, UnknownUpdate,
};

fn report(owner: Owner, next: Option<crate::Timestamp>) -> UnknownReport {
    UnknownReport {
        reason: "timeout after send".into(),
        evidence: Some("read timed out".into()),
        owner,
        next_check_at: next,
    }
}

/// Approval can be withdrawn while nothing was sent, never after.
pub async fn cancel_before_dispatch_only<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let planned = req("t", "planned", json!({}));
    let c = e.start(&planned, "x").await;
    e.ledger
        .release(&c, ReleaseReason::Abandoned)
        .await
        .expect("release");
    let rec = e
        .ledger
        .cancel(planned.id(), "user withdrew".into())
        .await
        .expect("cancel planned");
    assert!(
        matches!(rec.state, State::Cancelled { ref reason, at } if reason == "user withdrew" && at == T0)
    );

    let claimed = req("t", "claimed", json!({}));
    let holder = e.start(&claimed, "x").await;
    assert_eq!(
        e.ledger
            .cancel(claimed.id(), " ".into())
            .await
            .expect_err("empty")
            .field(),
        Some("reason")
    );
    e.ledger
        .cancel(claimed.id(), "withdrawn".into())
        .await
        .expect("cancel claimed");
    let err = e
        .ledger
        .mark_dispatched(
            &holder,
            crate::Dispatch {
                executor: "x".into(),
                metadata: None,
            },
        )
        .await
        .expect_err("holder after cancel");
    assert!(
        matches!(
            err,
            LedgerError::IllegalTransition {
                from: StateKind::Cancelled,
                ..
            }
        ),
        "got {err:?}"
    );
    assert_eq!(
        e.begin(&claimed, "y").await,
        BeginOutcome::Cancelled {
            reason: "withdrawn".into()
        }
    );
    assert!(matches!(
        e.ledger.cancel(claimed.id(), "again".into()).await,
        Err(LedgerError::IllegalTransition { .. })
    ));

    let sent = req("t", "sent", json!({}));
    e.in_flight(&sent).await;
    let before = e.snapshot(&sent).await;
    assert!(matches!(
        e.ledger.cancel(sent.id(), "too late".into()).await,
        Err(LedgerError::IllegalTransition {
            from: StateKind::Dispatched,
            ..
        })
    ));
    assert_eq!(e.snapshot(&sent).await, before);
}

/// Resolution needs evidence and an actor; it appends an operator attempt
/// and the outcome is replayed afterwards.
pub async fn resolve_needs_actor_and_evidence<
    F: Fn(Setup) -> Fut,
    Fut: Future<Output = Subject>,
>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let r = req("t", "k", json!({"n": 1}));
    let c = e.in_flight(&r).await;
    let live = req("t", "live", json!({"n": 1}));
    e.in_flight(&live).await;
    let res = |evidence: &str, actor: &str, outcome| Resolution {
        outcome,
        evidence: evidence.into(),
        actor: actor.into(),
    };
    let confirmed = || ResolvedAs::Confirmed {
        result: json!({"shipment": "S-9"}),
    };
    assert!(matches!(
        e.ledger
            .resolve(live.id(), res("e", "a", confirmed()))
            .await,
        Err(LedgerError::IllegalTransition {
            from: StateKind::Dispatched,
            ..
        })
    ));
    e.ledger
        .mark_unknown(&c, report(Owner::Review, None))
        .await
        .expect("unknown");
    let before = e.snapshot(&r).await;
    for (bad, field) in [
        (res("", "ops", confirmed()), "evidence"),
        (res("seen in portal", " ", confirmed()), "actor"),
        (
            res("seen", "ops", ResolvedAs::Rejected { reason: "".into() }),
            "reason",
        ),
    ] {
        let err = e
            .ledger
            .resolve(r.id(), bad)
            .await
            .expect_err("invalid resolution");
        assert_eq!(err.field(), Some(field));
    }
    assert_eq!(e.snapshot(&r).await, before);
    e.clock.advance(Duration::from_secs(5));
    let rec = e
        .ledger
        .resolve(
            r.id(),
            res(
                "shipment S-9 found in carrier portal",
                "ops@example",
                confirmed(),
            ),
        )
        .await
        .expect("resolve");
    assert_eq!(
        rec.state,
        State::Confirmed {
            result: json!({"shipment": "S-9"}),
            evidence: Some("shipment S-9 found in carrier portal".into()),
            at: T0.plus(Duration::from_secs(5))
        }
    );
    let log = e.ledger.attempts(r.id()).await.expect("attempts");
    let op = log.last().expect("operator attempt");
    assert_eq!(
        (op.kind, op.outcome, op.executor.as_str()),
        (
            AttemptKind::Operator,
            AttemptOutcome::Confirmed,
            "ops@example"
        )
    );
    assert_eq!(
        op.evidence.as_deref(),
        Some("shipment S-9 found in carrier portal")
    );
    assert!(
        matches!(e.begin(&r, "y").await, BeginOutcome::Replayed(Terminal::Confirmed { ref result, .. }) if *result == json!({"shipment": "S-9"}))
    );
    assert!(matches!(
        e.ledger
            .resolve(r.id(), res("again", "ops", confirmed()))
            .await,
        Err(LedgerError::IllegalTransition {
            from: StateKind::Confirmed,
            ..
        })
    ));
    let missing = req("t", "missing", json!({}));
    assert!(matches!(
        e.ledger
            .resolve(missing.id(), res("e", "a", confirmed()))
            .await,
        Err(LedgerError::NotFound { .. })
    ));
}

/// An unknown operation may be re-sent (same destination key) only inside
/// the destination's idempotency window, and never when diverged.
pub async fn claim_for_resend_window<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(make: F) {
    let e = env(make, Retention::default()).await;
    let window = Duration::from_secs(600);
    let inside = req("t", "inside", json!({"n": 1}));
    let outside = req("t", "outside", json!({"n": 1}));
    let diverged = req("t", "diverged", json!({"n": 1}));
    for r in [&inside, &outside, &diverged] {
        let c = e.in_flight(r).await;
        e.ledger
            .mark_unknown(&c, report(Owner::Reconciler, None))
            .await
            .expect("unknown");
    }
    e.ledger
        .update_unknown(
            diverged.id(),
            UnknownUpdate {
                owner: Owner::Review,
                reason: "other params found".into(),
                next_check_at: None,
                diverged: true,
            },
        )
        .await
        .expect("diverge");
    e.clock.advance(window - Duration::from_millis(1));
    assert_eq!(
        e.ledger
            .claim_for_resend(diverged.id(), &opts("re"), window)
            .await
            .expect("diverged"),
        None
    );
    let c2 = e
        .ledger
        .claim_for_resend(inside.id(), &opts("re"), window)
        .await
        .expect("resend")
        .expect("inside window");
    assert_eq!(c2.epoch.0, 2);
    assert_eq!(c2.attempt_number, 2);
    assert_eq!(c2.destination_key, crate::destination_key(inside.id()));
    e.dispatch(&c2).await;
    e.ledger
        .confirm(&c2, json!({"ok": 1}), None)
        .await
        .expect("confirm re-send");
    let log = e.ledger.attempts(inside.id()).await.expect("attempts");
    let outcomes: Vec<_> = log
        .iter()
        .map(|a| (a.epoch.map(|x| x.0), a.outcome))
        .collect();
    assert_eq!(
        outcomes,
        [
            (Some(1), AttemptOutcome::Unknown),
            (Some(2), AttemptOutcome::Confirmed)
        ]
    );
    assert!(log.iter().all(|a| a.destination_key == c2.destination_key));

    e.clock.advance(Duration::from_millis(1));
    let before = e.snapshot(&outside).await;
    assert_eq!(
        e.ledger
            .claim_for_resend(outside.id(), &opts("re"), window)
            .await
            .expect("outside"),
        None
    );
    assert_eq!(
        e.snapshot(&outside).await,
        before,
        "nothing changes outside the window"
    );
    assert!(matches!(
        e.ledger
            .claim_for_resend(inside.id(), &opts("re"), window)
            .await,
        Err(LedgerError::IllegalTransition {
            from: StateKind::Confirmed,
            ..
        })
    ));
    let missing = req("t", "missing", json!({}));
    assert!(matches!(
        e.ledger
            .claim_for_resend(missing.id(), &opts("re"), window)
            .await,
        Err(LedgerError::NotFound { .. })
    ));
}
