//! `WriteGate::perform` raced, dropped and timed out: exactly one
//! execution per key, counted at the mock destination, and never a second
//! one once a dispatch was recorded.

use std::time::Duration;

use handover::ledger::{AttemptKind, OperationId, StateKind};
use handover::{PerformOptions, PerformOutcome};
use handover_testkit::MockDestination;
use serde_json::json;

use crate::per_backend;
use crate::support::{App, Backend, executor};

const SHIP: &str = "[actions.ship]\nlease = \"30s\"\ntimeout = \"5s\"\n";

async fn concurrent_performs_on_one_key_execute_once(backend: Backend) {
    let Some(app) = App::open(backend, "", SHIP).await else {
        return;
    };
    let dest = MockDestination::builder().start().await;
    // A second process on the same store (memory has no second process).
    let second = match backend {
        Backend::Memory => app.handover.clone(),
        _ => app.reopen().await,
    };
    let gates = [app.handover.gate().clone(), second.gate().clone()];
    for round in 0..3 {
        let key = format!("K-race-{round}");
        let req = gates[0]
            .request("tenant-1", &key, "ship", &json!({"n": round}))
            .unwrap();
        let exec = executor(&dest);
        let outs = futures::future::join_all((0..16).map(|i| {
            let (gate, req, exec) = (gates[i % 2].clone(), req.clone(), exec.clone());
            async move {
                gate.perform(&req, &exec, PerformOptions::default())
                    .await
                    .unwrap()
            }
        }))
        .await;
        let started = outs
            .iter()
            .filter(|o| matches!(o, PerformOutcome::Confirmed { .. }))
            .count();
        assert_eq!(started, 1, "{outs:?}");
        for o in &outs {
            assert!(
                matches!(
                    o,
                    PerformOutcome::Confirmed { .. }
                        | PerformOutcome::InProgress { .. }
                        | PerformOutcome::Replayed(_)
                ),
                "{o:?}"
            );
        }
    }
    assert_eq!(dest.effect_count(), 3, "one effect per key");
    drop(second);
    app.finish().await;
}

async fn dropping_perform_anywhere_never_makes_it_re_executable(backend: Backend) {
    let Some(app) = App::open(backend, "", SHIP).await else {
        return;
    };
    let dest = MockDestination::builder().start().await;
    let gate = app.handover.gate().clone();
    let exec = executor(&dest);
    let mut keys = Vec::new();
    for polls in 0..40usize {
        let key = format!("K-drop-{polls}");
        let req = gate
            .request("tenant-1", &key, "ship", &json!({"n": polls}))
            .unwrap();
        {
            let mut fut = Box::pin(gate.perform(&req, &exec, PerformOptions::default()));
            for _ in 0..polls {
                if futures::poll!(&mut fut).is_ready() {
                    break;
                }
                tokio::task::yield_now().await;
            }
        } // dropped here, wherever it was
        keys.push((key, req));
    }
    // The holders are gone; every lease passes. A claim committed after
    // its caller left is held by nobody: its lease passes too.
    for (key, req) in &keys {
        let id = OperationId::new("tenant-1", key).unwrap();
        let retry = loop {
            app.clock.advance(Duration::from_secs(31));
            let dispatched_before = dispatches(&app, &id).await;
            let retry = gate
                .perform(req, &exec, PerformOptions::default())
                .await
                .unwrap();
            if !matches!(retry, PerformOutcome::InProgress { .. }) {
                break (dispatched_before, retry);
            }
        };
        match retry {
            (0, PerformOutcome::Confirmed { .. }) => {}
            (n, PerformOutcome::Unresolved(_)) if n > 0 => {}
            (n, PerformOutcome::Replayed(_)) if n > 0 => {}
            other => panic!("{key}: {other:?}"),
        }
        let rec = app.record("tenant-1", key).await.unwrap();
        assert!(
            matches!(rec.state.kind(), StateKind::Unknown | StateKind::Confirmed),
            "{key}: {rec:?}"
        );
    }
    for (key, req) in &keys {
        let dk = handover::ledger::destination_key(req.id());
        assert!(
            dest.effects_for(&dk) <= 1,
            "{key}: {} effects",
            dest.effects_for(&dk)
        );
    }
    app.finish().await;
}

async fn dispatches(app: &App, id: &OperationId) -> usize {
    app.handover
        .ledger()
        .attempts(id)
        .await
        .unwrap()
        .iter()
        .filter(|a| a.kind == AttemptKind::Dispatch)
        .count()
}

per_backend!(
    concurrent_performs_on_one_key_execute_once,
    dropping_perform_anywhere_never_makes_it_re_executable
);
