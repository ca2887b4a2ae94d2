//! The `Ledger` trait used directly, as an embedder with its own door
//! would: the same key with other parameters in every state, finishing
//! twice / with a stale epoch / never begun, leases that lapse before and
//! after dispatch, retention. Every refusal changes nothing (checked by
//! reading the record back).

use std::sync::Arc;
use std::time::Duration;

use handover::Ledger;
use handover::ledger::{
    ApproveOutcome, BeginOptions, BeginOutcome, Claim, Clock, Dispatch, Epoch, LedgerError,
    OperationRequest, Owner, ReleaseReason, Resolution, ResolvedAs, StateKind, Terminal,
    UnknownReport,
};
use serde_json::json;

use crate::per_backend;
use crate::support::{App, Backend};

fn req(app: &App, key: &str, n: i64) -> OperationRequest {
    app.handover
        .gate()
        .request("tenant-1", key, "ship", &json!({"n": n, "sku": "A"}))
        .unwrap()
}

fn opts(holder: &str) -> BeginOptions {
    BeginOptions::new(holder, Duration::from_secs(30))
}

fn dispatch() -> Dispatch {
    Dispatch {
        executor: "exec-a".into(),
        metadata: None,
    }
}

fn unknown() -> UnknownReport {
    UnknownReport {
        reason: "timeout".into(),
        evidence: Some("no answer".into()),
        owner: Owner::Review,
        next_check_at: None,
    }
}

async fn started(l: &Arc<dyn Ledger>, r: &OperationRequest, holder: &str) -> Claim {
    match l.begin(r, &opts(holder)).await.unwrap() {
        BeginOutcome::Started(c) => c,
        other => panic!("expected started, got {other:?}"),
    }
}

/// Brings `key` into `state` and returns the live claim, if any.
async fn into_state(app: &App, key: &str, state: &str) -> Option<Claim> {
    let l = app.handover.ledger();
    let r = req(app, key, 1);
    match state {
        "planned" => {
            assert_eq!(l.approve(&r).await.unwrap(), ApproveOutcome::Planned);
            None
        }
        "claimed" => Some(started(l, &r, "a").await),
        "dispatched" => {
            let c = started(l, &r, "a").await;
            l.mark_dispatched(&c, dispatch()).await.unwrap();
            Some(c)
        }
        "unknown" => {
            let c = started(l, &r, "a").await;
            l.mark_dispatched(&c, dispatch()).await.unwrap();
            l.mark_unknown(&c, unknown()).await.unwrap();
            None
        }
        "confirmed" => {
            let c = started(l, &r, "a").await;
            l.mark_dispatched(&c, dispatch()).await.unwrap();
            l.confirm(&c, json!({"id": "rec-1"}), None).await.unwrap();
            None
        }
        "rejected" => {
            let c = started(l, &r, "a").await;
            l.mark_dispatched(&c, dispatch()).await.unwrap();
            l.reject(&c, "address invalid".into(), None).await.unwrap();
            None
        }
        "cancelled" => {
            l.approve(&r).await.unwrap();
            l.cancel(r.id(), "user withdrew".into()).await.unwrap();
            None
        }
        _ => unreachable!(),
    }
}

const STATES: [&str; 7] = [
    "planned",
    "claimed",
    "dispatched",
    "unknown",
    "confirmed",
    "rejected",
    "cancelled",
];

async fn other_params_conflict_in_every_state_and_change_nothing(backend: Backend) {
    let Some(app) = App::open(backend, "", "").await else {
        return;
    };
    let l = app.handover.ledger().clone();
    for state in STATES {
        let key = format!("K-{state}");
        into_state(&app, &key, state).await;
        let before = app.record("tenant-1", &key).await.unwrap();
        let other = req(&app, &key, 2);
        let begun = l.begin(&other, &opts("b")).await.unwrap();
        assert!(
            matches!(begun, BeginOutcome::Conflict { .. }),
            "{state}: begin {begun:?}"
        );
        let approved = l.approve(&other).await.unwrap();
        assert!(
            matches!(approved, ApproveOutcome::Conflict { .. }),
            "{state}: approve {approved:?}"
        );
        let begun = l
            .begin_dispatched(&other, &opts("b"), dispatch())
            .await
            .unwrap();
        assert!(
            matches!(begun, BeginOutcome::Conflict { .. }),
            "{state}: begin_dispatched {begun:?}"
        );
        let after = app.record("tenant-1", &key).await.unwrap();
        assert_eq!(before, after, "{state}: nothing changed");
        // Member order and number spelling are not other parameters.
        let same = app
            .handover
            .gate()
            .request("tenant-1", &key, "ship", &json!({"sku": "A", "n": 1.0}))
            .unwrap();
        let begun = l.begin(&same, &opts("b")).await.unwrap();
        assert!(
            !matches!(begun, BeginOutcome::Conflict { .. }),
            "{state}: {begun:?}"
        );
    }
    // Past the replay window the tombstone still refuses other parameters.
    app.clock.advance(Duration::from_secs(73 * 3600));
    l.purge().await.unwrap();
    for state in ["confirmed", "rejected", "cancelled"] {
        let key = format!("K-{state}");
        let rec = app.record("tenant-1", &key).await.unwrap();
        assert!(rec.tombstone, "{state}: {rec:?}");
        let begun = l.begin(&req(&app, &key, 2), &opts("b")).await.unwrap();
        assert!(
            matches!(begun, BeginOutcome::Conflict { .. }),
            "{state}: {begun:?}"
        );
        let begun = l.begin(&req(&app, &key, 1), &opts("b")).await.unwrap();
        assert!(
            matches!(
                begun,
                BeginOutcome::Replayed(Terminal::Tombstone { .. }) | BeginOutcome::Cancelled { .. }
            ),
            "{state}: {begun:?}"
        );
    }
    app.finish().await;
}

async fn finishing_wrongly_is_refused_and_changes_nothing(backend: Backend) {
    let Some(app) = App::open(backend, "", "").await else {
        return;
    };
    let l = app.handover.ledger().clone();
    // Never begun.
    let ghost = Claim {
        id: req(&app, "K-ghost", 1).id().clone(),
        fingerprint: req(&app, "K-ghost", 1).fingerprint(),
        epoch: Epoch(1),
        holder: "a".into(),
        lease_until: app.clock.now().plus(Duration::from_secs(30)),
        destination_key: "x".into(),
        attempt_number: 1,
        block: handover::ledger::BlockWidth::Operation,
    };
    let e = l.confirm(&ghost, json!(1), None).await.unwrap_err();
    assert!(matches!(e, LedgerError::NotFound { .. }), "{e:?}");
    let e = l.mark_dispatched(&ghost, dispatch()).await.unwrap_err();
    assert!(matches!(e, LedgerError::NotFound { .. }), "{e:?}");
    assert!(
        app.record("tenant-1", "K-ghost").await.is_none(),
        "nothing created"
    );

    // Finishing twice, and every other finish after the first.
    let c = into_state(&app, "K-2", "dispatched").await.unwrap();
    l.confirm(&c, json!({"id": "rec-1"}), None).await.unwrap();
    let done = app.record("tenant-1", "K-2").await.unwrap();
    for e in [
        l.confirm(&c, json!({"id": "rec-2"}), None)
            .await
            .unwrap_err(),
        l.reject(&c, "no".into(), None).await.unwrap_err(),
        l.mark_unknown(&c, unknown()).await.unwrap_err(),
        l.release(
            &c,
            ReleaseReason::NotSent {
                evidence: "refused".into(),
            },
        )
        .await
        .unwrap_err(),
        l.mark_dispatched(&c, dispatch()).await.unwrap_err(),
    ] {
        assert!(matches!(e, LedgerError::IllegalTransition { .. }), "{e:?}");
    }
    assert_eq!(
        app.record("tenant-1", "K-2").await.unwrap(),
        done,
        "confirmed stays"
    );

    // A stale epoch: the first claim lapsed before dispatch and was taken over.
    let r3 = req(&app, "K-3", 1);
    let old = started(&l, &r3, "a").await;
    app.clock.advance(Duration::from_secs(31));
    let e = l.mark_dispatched(&old, dispatch()).await.unwrap_err();
    assert!(e.is_stale(), "lapsed: {e:?}");
    let new = started(&l, &r3, "b").await;
    assert_eq!(new.epoch, Epoch(old.epoch.0 + 1));
    let e = l.mark_dispatched(&old, dispatch()).await.unwrap_err();
    assert!(e.is_stale(), "superseded: {e:?}");
    let e = l.confirm(&old, json!(1), None).await.unwrap_err();
    assert!(e.is_stale(), "superseded: {e:?}");
    // A forged claim with other parameters.
    let forged = Claim {
        fingerprint: req(&app, "K-3", 9).fingerprint(),
        ..new.clone()
    };
    let e = l.mark_dispatched(&forged, dispatch()).await.unwrap_err();
    assert!(matches!(e, LedgerError::ParamsMismatch { .. }), "{e:?}");
    let rec = app.record("tenant-1", "K-3").await.unwrap();
    assert_eq!(rec.state.kind(), StateKind::Claimed, "{rec:?}");
    assert_eq!(rec.dispatch_count, 0);

    // A lease that lapses after dispatch: unknown, never claimable again,
    // and its holder can record nothing.
    l.mark_dispatched(&new, dispatch()).await.unwrap();
    app.clock.advance(Duration::from_secs(31));
    let begun = l.begin(&r3, &opts("c")).await.unwrap();
    assert!(matches!(begun, BeginOutcome::Unresolved(_)), "{begun:?}");
    let e = l
        .confirm(&new, json!({"late": true}), None)
        .await
        .unwrap_err();
    assert!(
        e.is_stale() || matches!(e, LedgerError::IllegalTransition { .. }),
        "{e:?}"
    );
    let rec = app.record("tenant-1", "K-3").await.unwrap();
    assert_eq!(rec.state.kind(), StateKind::Unknown, "{rec:?}");
    // Resolution needs evidence and an actor; a second one is refused.
    let bad = Resolution {
        outcome: ResolvedAs::Confirmed {
            result: json!({"id": "rec-9"}),
        },
        evidence: " ".into(),
        actor: "alice".into(),
    };
    let e = l.resolve(r3.id(), bad).await.unwrap_err();
    assert_eq!(e.field(), Some("evidence"), "{e:?}");
    let good = Resolution {
        outcome: ResolvedAs::Confirmed {
            result: json!({"id": "rec-9"}),
        },
        evidence: "carrier portal shows rec-9".into(),
        actor: "alice".into(),
    };
    l.resolve(r3.id(), good.clone()).await.unwrap();
    let e = l.resolve(r3.id(), good).await.unwrap_err();
    assert!(matches!(e, LedgerError::IllegalTransition { .. }), "{e:?}");
    // Cancelling after dispatch is refused.
    let c4 = into_state(&app, "K-4", "dispatched").await.unwrap();
    let e = l.cancel(&c4.id, "too late".into()).await.unwrap_err();
    assert!(matches!(e, LedgerError::IllegalTransition { .. }), "{e:?}");
    app.finish().await;
}

async fn retention_replays_then_tombstones_and_never_re_executes(backend: Backend) {
    let Some(app) = App::open(
        backend,
        "replay_window = \"1h\"\ntombstone_horizon = \"2h\"",
        "",
    )
    .await
    else {
        return;
    };
    let gate = app.handover.gate();
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let exec = crate::support::confirming(&calls);
    let r = req(&app, "K-1", 1);
    let o = handover::PerformOptions::default();
    assert!(gate.perform(&r, &exec, o).await.unwrap().is_confirmed());
    app.clock.advance(Duration::from_secs(3599));
    let again = gate.perform(&r, &exec, o).await.unwrap();
    assert!(
        matches!(&again, handover::PerformOutcome::Replayed(Terminal::Confirmed { result, .. }) if result["id"] == "rec-1"),
        "{again:?}"
    );
    app.clock.advance(Duration::from_secs(2));
    // Past the window, before and after purge: a tombstone, not a re-run.
    for purge in [false, true] {
        if purge {
            let p = app.handover.ledger().purge().await.unwrap();
            assert_eq!(p.tombstoned, 1);
        }
        let again = gate.perform(&r, &exec, o).await.unwrap();
        assert!(
            matches!(
                again,
                handover::PerformOutcome::Replayed(Terminal::Tombstone { .. })
            ),
            "{again:?}"
        );
        assert!(again.is_confirmed(), "a confirmed tombstone says so");
    }
    let reopened = app.reopen().await;
    if backend != Backend::Memory {
        let again = reopened.gate().perform(&r, &exec, o).await.unwrap();
        assert!(
            matches!(
                again,
                handover::PerformOutcome::Replayed(Terminal::Tombstone { .. })
            ),
            "{again:?}"
        );
    }
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "executed once"
    );
    app.finish().await;
}

per_backend!(
    other_params_conflict_in_every_state_and_change_nothing,
    finishing_wrongly_is_refused_and_changes_nothing,
    retention_replays_then_tombstones_and_never_re_executes
);
