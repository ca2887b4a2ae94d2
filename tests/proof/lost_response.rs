//! Scenarios 2 and 8: the destination applied the action but its answer was
//! lost. The outcome is unknown — not failed, not succeeded — and nothing,
//! not a retry, not a restart, not a fallback model with a new tool-call
//! id, executes it a second time.

use std::sync::Arc;
use std::time::Duration;

use handover::ledger::{AttemptKind, AttemptOutcome, Owner, StateKind, Terminal};
use handover::router::reconcile::Reconciler;
use handover::{PerformOptions, PerformOutcome};
use handover_testkit::{Behaviour, Flavor, MockDestination, MockProvider, Reply};

use crate::support::*;

per_backend! {
    #[tokio::test] a_lost_confirmation_is_unresolved_and_never_executed_twice,
    #[tokio::test] the_same_key_retried_after_a_lost_response_gets_the_same_outcome_and_one_effect,
    #[tokio::test] a_regenerated_key_for_the_same_intent_is_a_new_operation;
    across_restart:
    #[tokio::test] a_lost_confirmation_is_unresolved_and_never_executed_twice,
}

/// Scenario 2: the primary model proposes the approved shipment; the
/// destination applies it and the answer is lost (connection dropped, a 5xx
/// after applying, or an answer later than the timeout). The operation is
/// unknown; the conversation is handed to the fallback model, which
/// re-proposes the shipment under a new tool-call id (members in another
/// order) and is told "unresolved" — never an execution, never a failure.
pub async fn a_lost_confirmation_is_unresolved_and_never_executed_twice(run: Run) {
    for lose in [
        Behaviour::ApplyAndDrop,
        Behaviour::ApplyAndFail(502),
        Behaviour::ConfirmAfter(Duration::from_secs(3)),
    ] {
        let mut store = run.store().await;
        let primary = MockProvider::start(Flavor::OpenAi).await;
        let fallback = MockProvider::start(Flavor::DeepSeek).await;
        let dest = MockDestination::builder()
            .clock(Arc::new(store.clock.clone()))
            .start()
            .await;
        dest.script([lose.clone()]);
        primary.script([
            Reply::tool_call("call_primary_1", SHIP, shipment()),
            Reply::overloaded(),
        ]);
        fallback.script([Reply::tool_call(
            "call_fallback_7",
            SHIP,
            shipment_reordered(),
        )]);
        let config = config(
            &primary.base_url(),
            &fallback.base_url(),
            "",
            RELAXED,
            SHIP_NO_RECOVERY,
        );
        let router = router(&config);
        let exec = executor(&dest);
        let approved = approval("K-701");
        let task = router.task("default").unwrap();
        let opts = PerformOptions {
            budget: Some(task.budget()),
            metadata: None,
        };

        // Turn 1: the primary proposes the shipment; the answer is lost.
        let mut gate = store.gate(&config, "agent-backend-1");
        let done = router.chat(&task, &user_turn()).await.unwrap();
        assert_eq!(done.provider, "primary");
        let first = gate
            .perform_call(&proposed(&done), &approved, &exec, opts)
            .await
            .unwrap();
        let PerformOutcome::Unresolved(info) = &first else {
            panic!("{lose:?}: expected unresolved, got {first:?}")
        };
        assert!(!first.is_confirmed(), "never reported as done");
        assert_eq!(
            info.owner,
            Owner::Review,
            "no lookup, no keys: an operator owns it"
        );

        // Recovery, possibly in a new process: the primary is now
        // overloaded and the fallback model takes over the conversation.
        if run.maybe_restart(&mut store).await {
            gate = store.gate(&config, "agent-backend-2");
        }
        let recovered = router.chat(&task, &user_turn()).await.unwrap();
        assert_eq!(recovered.provider, "fallback");
        let call = proposed(&recovered);
        assert_eq!(call.tool_call_id, "call_fallback_7");
        let second = gate
            .perform_call(&call, &approved, &exec, opts)
            .await
            .unwrap();
        assert!(
            matches!(second, PerformOutcome::Unresolved(_)),
            "{lose:?}: the fallback's re-proposal must be refused as unresolved, got {second:?}"
        );
        // The user's own retry gets the same answer.
        let req = gate.request(SCOPE, "K-701", SHIP, &shipment()).unwrap();
        let third = gate.perform(&req, &exec, opts).await.unwrap();
        assert!(matches!(third, PerformOutcome::Unresolved(_)), "{third:?}");

        // One request reached the destination; one effect exists.
        assert_eq!(dest.action_requests().await, 1, "{lose:?}");
        assert_eq!(dest.effect_count(), 1, "{lose:?}");
        assert_eq!(
            (primary.requests().await, fallback.requests().await),
            (2, 1)
        );
        // The ledger says unknown, with the one dispatch and its evidence.
        let rec = store.record(SCOPE, "K-701").await;
        assert_eq!(rec.state.kind(), StateKind::Unknown, "{lose:?}");
        assert_eq!(rec.dispatch_count, 1);
        assert_eq!(rec.params, Some(shipment()), "the approved parameters");
        let attempts = store.ledger().attempts(&rec.id).await.unwrap();
        let dispatches: Vec<_> = attempts
            .iter()
            .filter(|a| a.kind == AttemptKind::Dispatch)
            .collect();
        assert_eq!(dispatches.len(), 1);
        assert_eq!(dispatches[0].outcome, AttemptOutcome::Unknown);
        assert_eq!(
            dispatches[0].metadata.as_ref().unwrap()["tool_call_id"],
            "call_primary_1"
        );
        let queue = gate.review_queue(false).await.unwrap();
        assert_eq!(queue.len(), 1, "waiting for an operator");
        assert_eq!(queue[0].record.id, rec.id);

        run.score.task(false);
        run.settle(&store, Some(&dest)).await;
    }
}

/// Scenario 8: the user's retry under the same logical key (`K-701`) after a
/// lost response gets the same outcome — unresolved while it is unknown,
/// the recorded confirmation once the reconciler found the record — and the
/// destination holds one effect.
pub async fn the_same_key_retried_after_a_lost_response_gets_the_same_outcome_and_one_effect(
    run: Run,
) {
    let store = run.store().await;
    let dest = MockDestination::builder()
        .visibility_lag(Duration::from_secs(30))
        .clock(Arc::new(store.clock.clone()))
        .start()
        .await;
    dest.script([Behaviour::ApplyAndDrop]);
    let config = config(
        "http://127.0.0.1:9/v1",
        "http://127.0.0.1:9/v1",
        "",
        RELAXED,
        SHIP_WITH_LOOKUP,
    );
    let gate = store.gate(&config, "agent-backend");
    let exec = executor(&dest);
    let req = gate.request(SCOPE, "K-701", SHIP, &shipment()).unwrap();

    let first = gate
        .perform(&req, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(matches!(first, PerformOutcome::Unresolved(_)), "{first:?}");
    let retry = gate
        .perform(&req, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert_eq!(retry, first, "the same outcome, word for word");

    let reconciler = Reconciler::new(gate.clone(), Arc::new(store.clock.clone()))
        .with_lookup(SHIP, lookup(&dest));
    store.advance(Duration::from_secs(30));
    let report = reconciler.run_once().await.unwrap();
    assert_eq!(report.confirmed, 1, "{report:?}");

    let after = gate
        .perform(&req, &exec, PerformOptions::default())
        .await
        .unwrap();
    let PerformOutcome::Replayed(Terminal::Confirmed { result, .. }) = &after else {
        panic!("{after:?}")
    };
    assert_eq!(result["id"], "rec-1", "the record the destination created");
    assert_eq!(dest.action_requests().await, 1);
    assert_eq!(dest.effect_count(), 1);
    let rec = store.record(SCOPE, "K-701").await;
    assert_eq!(
        (rec.state.kind(), rec.dispatch_count),
        (StateKind::Confirmed, 1)
    );

    run.score.task(true);
    run.settle(&store, Some(&dest)).await;
}

/// Scenario 8, the other half: an application that regenerates the key for
/// the same intent (`K-999` instead of `K-701`) has created a new, separate
/// operation, and the destination a second shipment. Handover cannot tell
/// the two intents apart — two identical shipments authorised separately
/// must stay two — so key discipline belongs to the application: choose the
/// key when the user approves, and keep it across every retry.
pub async fn a_regenerated_key_for_the_same_intent_is_a_new_operation(run: Run) {
    let store = run.store().await;
    let dest = MockDestination::builder()
        .clock(Arc::new(store.clock.clone()))
        .start()
        .await;
    dest.script([Behaviour::ApplyAndDrop]);
    let config = config(
        "http://127.0.0.1:9/v1",
        "http://127.0.0.1:9/v1",
        "",
        RELAXED,
        SHIP_NO_RECOVERY,
    );
    let gate = store.gate(&config, "agent-backend");
    let exec = executor(&dest);

    let kept = gate.request(SCOPE, "K-701", SHIP, &shipment()).unwrap();
    let first = gate
        .perform(&kept, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(matches!(first, PerformOutcome::Unresolved(_)));

    let regenerated = gate.request(SCOPE, "K-999", SHIP, &shipment()).unwrap();
    let second = gate
        .perform(&regenerated, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(
        matches!(second, PerformOutcome::Suspended { .. }),
        "with block = \"scope\", an unresolved shipment suspends the next one: {second:?}"
    );
    assert_eq!(dest.action_requests().await, 1);

    // Twenty minutes later an operator confirms K-701 from the warehouse's
    // records; the new key is then an independent operation and ships again.
    store.advance(Duration::from_secs(20 * 60));
    let rec = store.record(SCOPE, "K-701").await;
    gate.resolve(
        &rec.id,
        handover::ledger::ResolvedAs::Confirmed {
            result: serde_json::json!({"id": "rec-1"}),
        },
        "warehouse shows rec-1 for order O-1001",
        "ops@shop",
    )
    .await
    .unwrap();
    let third = gate
        .perform(&regenerated, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(
        matches!(third, PerformOutcome::Confirmed { .. }),
        "{third:?}"
    );
    assert_eq!(
        dest.effect_count(),
        2,
        "two keys, two operations, two shipments"
    );
    assert_eq!(dest.effects_for(&rec.destination_key), 1);
    let other = store.record(SCOPE, "K-999").await;
    assert_ne!(other.destination_key, rec.destination_key);
    assert_eq!(dest.effects_for(&other.destination_key), 1);

    run.score.task(true);
    run.settle(&store, Some(&dest)).await;
}
