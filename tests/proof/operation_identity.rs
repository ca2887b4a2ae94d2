//! Scenarios 5 and 9: an operation's identity is `(scope, key)` from the
//! user's approval, its parameters are what was approved, and the check and
//! claim is one atomic step.

use std::sync::Arc;

use handover::ledger::{ResolvedAs, StateKind, Terminal};
use handover::router::gate::ProposedCall;
use handover::{PerformOptions, PerformOutcome};
use handover_testkit::{Behaviour, Flavor, MockDestination, MockProvider, Reply};
use serde_json::json;
use tokio::sync::Barrier;

use crate::support::*;

per_backend! {
    #[tokio::test] changed_parameters_from_the_fallback_are_a_conflict_and_never_executed,
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)] concurrent_identical_requests_cause_one_effect,
    #[tokio::test] other_content_conflicts_and_another_scope_or_key_is_independent,
}

/// Scenario 5: after the approved shipment's answer was lost, the fallback
/// model proposes it with another quantity. That is a conflict — in the
/// unknown state and after an operator confirmed it — nothing is executed,
/// and the approved parameters stay what the user approved.
pub async fn changed_parameters_from_the_fallback_are_a_conflict_and_never_executed(run: Run) {
    let store = run.store().await;
    let primary = MockProvider::start(Flavor::OpenAi).await;
    let fallback = MockProvider::start(Flavor::DeepSeek).await;
    let dest = MockDestination::builder()
        .clock(Arc::new(store.clock.clone()))
        .start()
        .await;
    dest.script([Behaviour::ApplyAndDrop]);
    let mut changed = shipment();
    changed["qty"] = json!(2);
    // After its first answer the primary stays overloaded: every later turn
    // tries it once (a single 503 does not open its breaker) and falls back.
    primary.script([Reply::tool_call("call_primary_1", SHIP, shipment())]);
    primary.set_default(Reply::overloaded());
    fallback.script([
        Reply::tool_call("call_fallback_1", SHIP, changed.clone()),
        Reply::tool_call("call_fallback_2", SHIP, changed.clone()),
        Reply::tool_call("call_fallback_3", SHIP, shipment_reordered()),
    ]);
    // Four turns, three of them trying the primary first, and one dispatch
    // share the task's budget.
    let config = config(
        &primary.base_url(),
        &fallback.base_url(),
        "max_requests = 10",
        RELAXED,
        SHIP_NO_RECOVERY,
    );
    let router = router(&config);
    let gate = store.gate(&config, "agent-backend");
    let exec = executor(&dest);
    let approved = approval("K-701");
    let task = router.task("default").unwrap();
    let opts = PerformOptions {
        budget: Some(task.budget()),
        metadata: None,
    };
    let turn =
        async || -> ProposedCall { proposed(&router.chat(&task, &user_turn()).await.unwrap()) };

    let first = gate
        .perform_call(&turn().await, &approved, &exec, opts)
        .await
        .unwrap();
    assert!(matches!(first, PerformOutcome::Unresolved(_)), "{first:?}");
    let approved_rec = store.record(SCOPE, "K-701").await;

    // While unknown.
    let call = turn().await;
    assert_eq!(call.provider.as_deref(), Some("fallback"));
    let outcome = gate
        .perform_call(&call, &approved, &exec, opts)
        .await
        .unwrap();
    let PerformOutcome::Conflict {
        recorded,
        requested,
    } = &outcome
    else {
        panic!("expected a conflict, got {outcome:?}")
    };
    assert_eq!(*recorded, approved_rec.fingerprint);
    assert_ne!(requested, recorded);
    assert_eq!(
        store.record(SCOPE, "K-701").await.state.kind(),
        StateKind::Unknown
    );

    // After an operator confirmed it from the warehouse's records.
    store.advance(std::time::Duration::from_secs(15 * 60));
    gate.resolve(
        &approved_rec.id,
        ResolvedAs::Confirmed {
            result: json!({"id": "rec-1"}),
        },
        "warehouse record rec-1, qty 1",
        "ops@shop",
    )
    .await
    .unwrap();
    let again = gate
        .perform_call(&turn().await, &approved, &exec, opts)
        .await
        .unwrap();
    assert!(
        matches!(again, PerformOutcome::Conflict { .. }),
        "{again:?}"
    );
    // The approved shipment itself, re-proposed: the recorded outcome.
    let same = gate
        .perform_call(&turn().await, &approved, &exec, opts)
        .await
        .unwrap();
    assert!(
        matches!(same, PerformOutcome::Replayed(Terminal::Confirmed { .. })),
        "{same:?}"
    );

    assert_eq!(dest.action_requests().await, 1, "nothing else was executed");
    assert_eq!(
        (primary.requests().await, fallback.requests().await),
        (4, 3)
    );
    assert_eq!(dest.effect_count(), 1);
    assert_eq!(dest.records()[0].body["qty"], 1);
    let rec = store.record(SCOPE, "K-701").await;
    assert_eq!(
        rec.params,
        Some(shipment()),
        "the approved parameters are unchanged"
    );
    assert_eq!(rec.fingerprint, approved_rec.fingerprint);
    assert_eq!(rec.dispatch_count, 1);

    run.score.task(true);
    run.settle(&store, Some(&dest)).await;
}

/// Scenario 9: the primary's and the fallback's executors — on two ledger
/// instances over one store, as two replicas would have — race on the same
/// approved operation, released together by a barrier. Each round, exactly
/// one executes; the destination sees one request and one effect per key.
pub async fn concurrent_identical_requests_cause_one_effect(run: Run) {
    const ROUNDS: usize = 20;
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
    let one = Arc::new(store.gate(&config, "replica-a"));
    let two = Arc::new(
        handover::WriteGate::new(
            store.second_instance().await,
            config.clone(),
            Arc::new(store.clock.clone()),
        )
        .with_holder("replica-b"),
    );
    let exec = Arc::new(executor(&dest));

    for round in 0..ROUNDS {
        let key = format!("K-{}", 800 + round);
        let barrier = Arc::new(Barrier::new(2));
        let racers = [one.clone(), two.clone()].map(|gate| {
            let (barrier, exec, key) = (barrier.clone(), exec.clone(), key.clone());
            tokio::spawn(async move {
                let req = gate.request(SCOPE, &key, SHIP, &shipment()).unwrap();
                barrier.wait().await;
                gate.perform(&req, exec.as_ref(), PerformOptions::default())
                    .await
                    .unwrap()
            })
        });
        let mut executed = 0;
        for racer in racers {
            match racer.await.unwrap() {
                PerformOutcome::Confirmed { .. } => executed += 1,
                PerformOutcome::InProgress { .. }
                | PerformOutcome::Replayed(Terminal::Confirmed { .. }) => {}
                other => panic!("round {round}: unexpected {other:?}"),
            }
        }
        assert_eq!(executed, 1, "round {round}: exactly one executor ran it");
        let rec = store.record(SCOPE, &key).await;
        assert_eq!(
            (rec.state.kind(), rec.dispatch_count),
            (StateKind::Confirmed, 1)
        );
        assert_eq!(dest.effects_for(&rec.destination_key), 1, "round {round}");
    }
    assert_eq!(dest.action_requests().await, ROUNDS);
    assert_eq!(dest.effect_count(), ROUNDS);

    for _ in 0..ROUNDS {
        run.score.task(true);
    }
    run.settle(&store, Some(&dest)).await;
}

/// Scenario 9: the same key with other content is a conflict; the same key
/// in another scope, and the same content under another key, are
/// independent operations that each execute once.
pub async fn other_content_conflicts_and_another_scope_or_key_is_independent(run: Run) {
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
    let perform = async |scope: &str, key: &str, params: &serde_json::Value| {
        let req = gate.request(scope, key, SHIP, params).unwrap();
        gate.perform(&req, &exec, PerformOptions::default())
            .await
            .unwrap()
    };
    let mut other = shipment();
    other["sku"] = json!("TEAPOT");

    let approved = perform(SCOPE, "K-701", &shipment()).await;
    assert!(matches!(approved, PerformOutcome::Confirmed { .. }));
    let conflict = perform(SCOPE, "K-701", &other).await;
    assert!(
        matches!(conflict, PerformOutcome::Conflict { .. }),
        "{conflict:?}"
    );
    let other_scope = perform("customer-77", "K-701", &shipment()).await;
    assert!(
        matches!(other_scope, PerformOutcome::Confirmed { .. }),
        "{other_scope:?}"
    );
    let other_key = perform(SCOPE, "K-702", &shipment()).await;
    assert!(
        matches!(other_key, PerformOutcome::Confirmed { .. }),
        "{other_key:?}"
    );

    assert_eq!(dest.action_requests().await, 3);
    assert_eq!(dest.effect_count(), 3, "three operations, one effect each");
    let keys: Vec<_> = store
        .all()
        .await
        .into_iter()
        .map(|r| r.destination_key)
        .collect();
    assert_eq!(keys.len(), 3);
    for k in &keys {
        assert_eq!(dest.effects_for(k), 1);
    }
    assert_eq!(
        store.record(SCOPE, "K-701").await.params,
        Some(shipment()),
        "the conflict replaced nothing"
    );

    for _ in 0..3 {
        run.score.task(true);
    }
    run.settle(&store, Some(&dest)).await;
}
