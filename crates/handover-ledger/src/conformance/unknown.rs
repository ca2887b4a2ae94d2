//! Unresolved operations: listing and blocking.

use std::time::Duration;

use serde_json::json;

use super::{LEASE, Setup, Subject, T0, env, req};
use crate::{
    ActionName, BeginOptions, BeginOutcome, BlockWidth, LedgerError, Limits, ListFilter,
    OperationRequest, Owner, Resolution, ResolvedAs, Retention, Scope, State, StateKind,
    UnknownReport, UnknownUpdate,
};

fn report(owner: Owner, next: Option<crate::Timestamp>) -> UnknownReport {
    UnknownReport {
        reason: "timeout after send".into(),
        evidence: Some("read timed out".into()),
        owner,
        next_check_at: next,
    }
}

fn keys(recs: &[crate::OperationRecord]) -> Vec<String> {
    recs.iter().map(|r| r.id.key.as_str().to_owned()).collect()
}

/// Unknown operations are listed with owner, reason, since (age) and next check.
pub async fn list_unknown_with_owner_and_age<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let min = Duration::from_secs(60);
    let u1 = req("s1", "u1", json!({"n": 1}));
    let c = e.in_flight(&u1).await;
    e.ledger
        .mark_unknown(&c, report(Owner::Reconciler, Some(T0.plus(min))))
        .await
        .expect("u1");
    e.clock.advance(10 * min);
    let u2 = req("s2", "u2", json!({"n": 1}));
    let c = e.in_flight(&u2).await;
    e.ledger
        .mark_unknown(&c, report(Owner::Reconciler, None))
        .await
        .expect("u2");
    let done = req("s1", "done", json!({"n": 1}));
    let c = e.in_flight(&done).await;
    e.ledger.confirm(&c, json!(1), None).await.expect("done");
    e.start(&req("s1", "busy", json!({"n": 1})), "x").await;
    let err = e
        .ledger
        .update_unknown(
            u2.id(),
            UnknownUpdate {
                owner: Owner::Review,
                reason: "".into(),
                next_check_at: None,
                diverged: true,
            },
        )
        .await
        .expect_err("empty reason");
    assert_eq!(err.field(), Some("reason"));
    let upd = e
        .ledger
        .update_unknown(
            u2.id(),
            UnknownUpdate {
                owner: Owner::Review,
                reason: "lookup found other params".into(),
                next_check_at: None,
                diverged: true,
            },
        )
        .await
        .expect("update");
    assert!(
        matches!(&upd.state, State::Unknown(i) if i.since == T0.plus(10 * min) && i.diverged && i.owner == Owner::Review)
    );
    assert!(matches!(
        e.ledger
            .update_unknown(
                done.id(),
                UnknownUpdate {
                    owner: Owner::Review,
                    reason: "x".into(),
                    next_check_at: None,
                    diverged: false
                }
            )
            .await,
        Err(LedgerError::IllegalTransition {
            from: StateKind::Confirmed,
            ..
        })
    ));
    e.clock.advance(5 * min);
    let now = T0.plus(15 * min);

    let unknown = e
        .ledger
        .list(&ListFilter {
            state: Some(StateKind::Unknown),
            ..Default::default()
        })
        .await
        .expect("list");
    assert_eq!(keys(&unknown), ["u1", "u2"]);
    let info = |r: &crate::OperationRecord| match &r.state {
        State::Unknown(i) => i.clone(),
        other => panic!("not unknown: {other:?}"),
    };
    let (i1, i2) = (info(&unknown[0]), info(&unknown[1]));
    assert_eq!(
        (i1.owner, i1.since, i1.next_check_at, i1.diverged),
        (Owner::Reconciler, T0, Some(T0.plus(min)), false)
    );
    assert_eq!(i1.reason, "timeout after send");
    assert_eq!(
        (i2.owner, i2.since, i2.diverged),
        (Owner::Review, T0.plus(10 * min), true)
    );
    assert_eq!(now.saturating_since(i1.since), 15 * min, "age");

    let q = |f: ListFilter| {
        let ledger = e.ledger.clone();
        async move { keys(&ledger.list(&f).await.expect("list")) }
    };
    let unk = || ListFilter {
        state: Some(StateKind::Unknown),
        ..Default::default()
    };
    assert_eq!(
        q(ListFilter {
            older_than: Some(15 * min),
            ..unk()
        })
        .await,
        ["u1"]
    );
    assert!(
        q(ListFilter {
            older_than: Some(15 * min + Duration::from_millis(1)),
            ..unk()
        })
        .await
        .is_empty()
    );
    assert_eq!(
        q(ListFilter {
            older_than: Some(5 * min),
            ..unk()
        })
        .await,
        ["u1", "u2"]
    );
    assert_eq!(
        q(ListFilter {
            diverged: Some(true),
            ..Default::default()
        })
        .await,
        ["u2"]
    );
    assert_eq!(
        q(ListFilter {
            diverged: Some(false),
            ..unk()
        })
        .await,
        ["u1"]
    );
    assert_eq!(
        q(ListFilter {
            due_at: Some(now),
            ..Default::default()
        })
        .await,
        ["u1"]
    );
    assert!(
        q(ListFilter {
            due_at: Some(T0),
            ..Default::default()
        })
        .await
        .is_empty()
    );
    assert_eq!(
        q(ListFilter {
            scope: Some(Scope::new("s2").expect("scope")),
            ..Default::default()
        })
        .await,
        ["u2"]
    );
    assert_eq!(
        q(ListFilter {
            limit: Some(1),
            ..unk()
        })
        .await,
        ["u1"]
    );
    assert!(
        q(ListFilter {
            action: Some(ActionName::new("other").expect("action")),
            ..Default::default()
        })
        .await
        .is_empty()
    );
    assert_eq!(
        q(ListFilter {
            state: Some(StateKind::Claimed),
            ..Default::default()
        })
        .await,
        ["busy"]
    );
    assert_eq!(q(ListFilter::default()).await.len(), 4);
}

/// Another unresolved operation blocks new ones within the block width;
/// nothing is written for the suspended request.
pub async fn suspended_by_block_width<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(make: F) {
    let e = env(make, Retention::default()).await;
    let ship = |scope: &str, key: &str| req(scope, key, json!({"order": 1}));
    let width = |block| BeginOptions {
        holder: "w".into(),
        lease: LEASE,
        block,
    };
    let a1 = ship("order-1", "ship-a");
    let c = e.in_flight(&a1).await;
    let unknown = e
        .ledger
        .mark_unknown(&c, report(Owner::Reconciler, None))
        .await
        .expect("unknown");
    let State::Unknown(info) = unknown.state else {
        panic!("not unknown")
    };

    let a2 = ship("order-1", "ship-b");
    assert!(matches!(
        e.ledger
            .begin(&a2, &width(BlockWidth::Operation))
            .await
            .expect("begin"),
        BeginOutcome::Started(_)
    ));
    let a3 = ship("order-1", "ship-c");
    match e
        .ledger
        .begin(&a3, &width(BlockWidth::Scope))
        .await
        .expect("begin")
    {
        BeginOutcome::Suspended {
            blocked_by,
            info: i,
        } => {
            assert_eq!(&blocked_by, a1.id());
            assert_eq!(i, info);
        }
        other => panic!("expected suspended, got {other:?}"),
    }
    assert_eq!(
        e.get(&a3).await,
        None,
        "nothing written for a suspended request"
    );
    assert!(matches!(
        e.ledger
            .begin(&a1, &width(BlockWidth::Scope))
            .await
            .expect("begin"),
        BeginOutcome::Unresolved(_)
    ));
    let other_action = OperationRequest::new(
        "order-1",
        "refund-1",
        "refund",
        &json!({}),
        &Limits::default(),
    )
    .expect("req");
    assert!(matches!(
        e.ledger
            .begin(&other_action, &width(BlockWidth::Scope))
            .await
            .expect("begin"),
        BeginOutcome::Started(_)
    ));
    let other_scope = ship("order-2", "ship-a");
    assert!(matches!(
        e.ledger
            .begin(&other_scope, &width(BlockWidth::Scope))
            .await
            .expect("begin"),
        BeginOutcome::Started(_)
    ));
    let wide = ship("order-3", "ship-a");
    assert!(matches!(
        e.ledger
            .begin(&wide, &width(BlockWidth::Action))
            .await
            .expect("begin"),
        BeginOutcome::Suspended { .. }
    ));

    // A dispatched operation whose lease lapsed blocks too.
    let r1 = OperationRequest::new(
        "order-9",
        "refund-a",
        "refund",
        &json!({}),
        &Limits::default(),
    )
    .expect("req");
    e.in_flight(&r1).await;
    e.clock.advance(LEASE);
    let r2 = OperationRequest::new(
        "order-9",
        "refund-b",
        "refund",
        &json!({}),
        &Limits::default(),
    )
    .expect("req");
    match e
        .ledger
        .begin(&r2, &width(BlockWidth::Scope))
        .await
        .expect("begin")
    {
        BeginOutcome::Suspended { blocked_by, .. } => assert_eq!(&blocked_by, r1.id()),
        other => panic!("expected suspended, got {other:?}"),
    }

    // Resolution lifts the block.
    e.ledger
        .resolve(
            a1.id(),
            Resolution {
                outcome: ResolvedAs::Rejected {
                    reason: "not found at carrier".into(),
                },
                evidence: "carrier lookup empty after 1h".into(),
                actor: "ops".into(),
            },
        )
        .await
        .expect("resolve");
    assert!(matches!(
        e.ledger
            .begin(&a3, &width(BlockWidth::Scope))
            .await
            .expect("begin"),
        BeginOutcome::Started(_)
    ));
}

/// `take_due_unknown` hands out due unknown operations earliest first, at
/// most `limit`, moves their next check to `now + hold` in the same step (so
/// a second caller does not get them again), leaves owner, reason and
/// divergence alone, skips what is not due, and hands an operation out again
/// once its hold has passed.
pub async fn take_due_unknown_leases<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(make: F) {
    let e = env(make, Retention::default()).await;
    let sec = Duration::from_secs(1);
    let hold = Duration::from_secs(60);
    let later = req("s1", "later", json!({"n": 1}));
    let c = e.in_flight(&later).await;
    e.ledger
        .mark_unknown(&c, report(Owner::Reconciler, Some(T0.plus(5 * sec))))
        .await
        .expect("later");
    let first = req("s2", "first", json!({"n": 1}));
    let c = e.in_flight(&first).await;
    e.ledger
        .mark_unknown(&c, report(Owner::Reconciler, Some(T0.plus(sec))))
        .await
        .expect("first");
    let future = req("s1", "future", json!({"n": 1}));
    let c = e.in_flight(&future).await;
    e.ledger
        .mark_unknown(&c, report(Owner::Reconciler, Some(T0.plus(hold * 10))))
        .await
        .expect("future");
    let review = req("s1", "review", json!({"n": 1}));
    let c = e.in_flight(&review).await;
    e.ledger
        .mark_unknown(&c, report(Owner::Review, None))
        .await
        .expect("review");
    assert!(
        e.ledger
            .take_due_unknown(&crate::DueFilter::default(), 10, hold)
            .await
            .expect("take")
            .is_empty(),
        "nothing is due before its next check"
    );
    let err = e
        .ledger
        .take_due_unknown(&crate::DueFilter::default(), 10, Duration::ZERO)
        .await
        .expect_err("zero hold");
    assert_eq!(err.field(), Some("hold"));

    e.clock.advance(10 * sec);
    let now = T0.plus(10 * sec);
    let taken = e
        .ledger
        .take_due_unknown(&crate::DueFilter::default(), 1, hold)
        .await
        .expect("take 1");
    assert_eq!(
        keys(&taken),
        ["first"],
        "earliest next check first, limit kept"
    );
    let State::Unknown(info) = &taken[0].state else {
        panic!("taken operation is not unknown: {:?}", taken[0].state);
    };
    assert_eq!(info.next_check_at, Some(now.plus(hold)));
    assert_eq!(info.owner, Owner::Reconciler);
    assert_eq!(info.reason, "timeout after send");
    assert!(!info.diverged);
    assert_eq!(
        e.get(&first).await.expect("first").state,
        taken[0].state,
        "durable"
    );

    let rest = e
        .ledger
        .take_due_unknown(&crate::DueFilter::default(), 10, hold)
        .await
        .expect("take rest");
    assert_eq!(keys(&rest), ["later"], "what was taken is not due again");
    assert!(
        e.ledger
            .take_due_unknown(&crate::DueFilter::default(), 10, hold)
            .await
            .expect("take")
            .is_empty()
    );

    e.clock.advance(hold);
    let mut again = keys(
        &e.ledger
            .take_due_unknown(&crate::DueFilter::default(), 10, hold)
            .await
            .expect("again"),
    );
    again.sort();
    assert_eq!(again, ["first", "later"], "due again once the hold passed");
}

/// `take_due_unknown` hands out only what its filter admits (scope,
/// actions, excluded actions) and leaves everything else untouched.
pub async fn take_due_unknown_filters<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(make: F) {
    let e = env(make, Retention::default()).await;
    let hold = Duration::from_secs(60);
    let pay = |scope: &str, key: &str| {
        OperationRequest::new(scope, key, "pay", &json!({"n": 1}), &Limits::default())
            .expect("valid request")
    };
    let ops = [
        req("s1", "ship-1", json!({"n": 1})),
        req("s2", "ship-2", json!({"n": 1})),
        pay("s1", "pay-1"),
    ];
    for r in &ops {
        let c = e.in_flight(r).await;
        e.ledger
            .mark_unknown(&c, report(Owner::Reconciler, Some(T0)))
            .await
            .expect("unknown");
    }
    let take = |filter: crate::DueFilter| {
        let ledger = e.ledger.clone();
        async move {
            let mut k = keys(
                &ledger
                    .take_due_unknown(&filter, 10, hold)
                    .await
                    .expect("take"),
            );
            k.sort();
            k
        }
    };
    let s2 = crate::DueFilter {
        scope: Some(Scope::new("s2").expect("scope")),
        ..Default::default()
    };
    assert_eq!(take(s2).await, ["ship-2"], "scope");
    let pay_only = crate::DueFilter {
        actions: Some(vec![ActionName::new("pay").expect("action")]),
        ..Default::default()
    };
    assert_eq!(take(pay_only).await, ["pay-1"], "actions");
    // What the filters left out is still due, untouched.
    let rest = crate::DueFilter {
        except_actions: vec![ActionName::new("pay").expect("action")],
        ..Default::default()
    };
    assert_eq!(take(rest).await, ["ship-1"], "except_actions");
    assert!(take(crate::DueFilter::default()).await.is_empty());
}
