//! Scenarios 6 and 7: what the destination offers decides how an unknown
//! operation is resolved — a lookup with a visibility lag, an idempotency
//! key with a retention window — and nothing is re-sent that the
//! destination would not deduplicate.

use std::sync::Arc;
use std::time::Duration;

use handover::ledger::{AttemptKind, AttemptOutcome, Owner, State, StateKind, Terminal};
use handover::router::reconcile::Reconciler;
use handover::{PerformOptions, PerformOutcome};
use handover_testkit::{Behaviour, Flavor, MockDestination, MockProvider, Reply};

use crate::support::*;

per_backend! {
    #[tokio::test] an_operation_briefly_invisible_to_the_lookup_stays_unknown_then_is_confirmed,
    #[tokio::test] after_the_dedup_window_nothing_is_resent_and_the_operation_goes_to_review;
    across_restart:
    #[tokio::test] an_operation_briefly_invisible_to_the_lookup_stays_unknown_then_is_confirmed,
}

/// Scenario 6: the shipment was applied and its answer lost. The
/// warehouse's lookup shows new records only after 30 s: an empty answer
/// inside that lag is not proof of anything, so the operation stays unknown
/// (the fallback model's re-proposal meanwhile gets "unresolved"); after the
/// lag the reconciler finds the record and confirms it — possibly in a new
/// process — and the retry gets the confirmation replayed.
pub async fn an_operation_briefly_invisible_to_the_lookup_stays_unknown_then_is_confirmed(
    run: Run,
) {
    let mut store = run.store().await;
    let primary = MockProvider::start(Flavor::OpenAi).await;
    let fallback = MockProvider::start(Flavor::DeepSeek).await;
    let dest = MockDestination::builder()
        .visibility_lag(Duration::from_secs(30))
        .clock(Arc::new(store.clock.clone()))
        .start()
        .await;
    dest.script([Behaviour::ApplyAndDrop]);
    // After its first answer the primary stays overloaded.
    primary.script([Reply::tool_call("call_primary_1", SHIP, shipment())]);
    primary.set_default(Reply::overloaded());
    fallback.set_default(Reply::tool_call(
        "call_fallback_1",
        SHIP,
        shipment_reordered(),
    ));
    let config = config(
        &primary.base_url(),
        &fallback.base_url(),
        "",
        RELAXED,
        SHIP_WITH_LOOKUP,
    );
    let router = router(&config);
    let exec = executor(&dest);
    let approved = approval("K-701");
    let task = router.task("default").unwrap();
    let mut gate = store.gate(&config, "agent-backend-1");
    let reconciler = |gate: &handover::WriteGate, store: &Store| {
        Reconciler::new(gate.clone(), Arc::new(store.clock.clone()))
            .with_lookup(SHIP, lookup(&dest))
    };

    let done = router.chat(&task, &user_turn()).await.unwrap();
    let first = gate
        .perform_call(
            &proposed(&done),
            &approved,
            &exec,
            PerformOptions::default(),
        )
        .await
        .unwrap();
    let PerformOutcome::Unresolved(info) = &first else {
        panic!("{first:?}")
    };
    assert_eq!(
        info.owner,
        Owner::Reconciler,
        "a lookup exists: the reconciler owns it"
    );

    let mut rec = reconciler(&gate, &store);
    assert_eq!(rec.run_once().await.unwrap().checked, 0, "not due yet");
    store.advance(Duration::from_secs(5));
    let report = rec.run_once().await.unwrap();
    assert_eq!(
        (report.checked, report.still_unknown),
        (1, 1),
        "empty inside the lag"
    );
    assert_eq!(
        store.record(SCOPE, "K-701").await.state.kind(),
        StateKind::Unknown
    );

    // The fallback model, meanwhile, re-proposes the shipment.
    let meanwhile = router.chat(&task, &user_turn()).await.unwrap();
    assert_eq!(meanwhile.provider, "fallback");
    let refused = gate
        .perform_call(
            &proposed(&meanwhile),
            &approved,
            &exec,
            PerformOptions::default(),
        )
        .await
        .unwrap();
    assert!(
        matches!(refused, PerformOutcome::Unresolved(_)),
        "{refused:?}"
    );

    if run.maybe_restart(&mut store).await {
        gate = store.gate(&config, "agent-backend-2");
        rec = reconciler(&gate, &store);
    }
    store.advance(Duration::from_secs(25));
    let report = rec.run_once().await.unwrap();
    assert_eq!(report.confirmed, 1, "{report:?}");

    let record = store.record(SCOPE, "K-701").await;
    let State::Confirmed { result, .. } = &record.state else {
        panic!("{:?}", record.state)
    };
    assert_eq!(result["id"], "rec-1");
    let lookups: Vec<_> = store
        .ledger()
        .attempts(&record.id)
        .await
        .unwrap()
        .into_iter()
        .filter(|a| a.kind == AttemptKind::Lookup)
        .map(|a| a.outcome)
        .collect();
    assert_eq!(lookups, [AttemptOutcome::NotFound, AttemptOutcome::Found]);

    let retry = router.chat(&task, &user_turn()).await.unwrap();
    let replayed = gate
        .perform_call(
            &proposed(&retry),
            &approved,
            &exec,
            PerformOptions::default(),
        )
        .await
        .unwrap();
    assert!(
        matches!(
            replayed,
            PerformOutcome::Replayed(Terminal::Confirmed { .. })
        ),
        "{replayed:?}"
    );
    assert_eq!(dest.lookup_requests().await, 2);
    assert_eq!(
        dest.action_requests().await,
        1,
        "reconciliation never re-sent"
    );
    assert_eq!(dest.effect_count(), 1);
    assert_eq!(
        (primary.requests().await, fallback.requests().await),
        (3, 2),
        "each later turn tries the overloaded primary once, then the fallback"
    );

    run.score.task(true);
    run.settle(&store, Some(&dest)).await;
}

/// Scenario 7: the destination deduplicates on an idempotency key for 10
/// minutes. Inside the window, a retry re-sends with the same key and the
/// destination answers with the first record (one effect). Once the window
/// has passed, nothing is re-sent automatically — not by the reconciler,
/// not by the user's retry — and the operation goes to the review queue.
pub async fn after_the_dedup_window_nothing_is_resent_and_the_operation_goes_to_review(run: Run) {
    let store = run.store().await;
    let dest = MockDestination::builder()
        .idempotency("Idempotency-Key", Duration::from_secs(600))
        .clock(Arc::new(store.clock.clone()))
        .start()
        .await;
    let config = config(
        "http://127.0.0.1:9/v1",
        "http://127.0.0.1:9/v1",
        "",
        RELAXED,
        SHIP_WITH_KEYS,
    );
    let gate = store.gate(&config, "agent-backend");
    let exec = executor(&dest);
    let reconciler = Reconciler::new(gate.clone(), Arc::new(store.clock.clone()))
        .with_resender(SHIP, executor(&dest));

    // Inside the window (another customer, so the scope block stays apart).
    dest.script([Behaviour::ApplyAndDrop]);
    let inside = gate
        .request("customer-7", "K-702", SHIP, &shipment())
        .unwrap();
    let lost = gate
        .perform(&inside, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(matches!(lost, PerformOutcome::Unresolved(_)), "{lost:?}");
    store.advance(Duration::from_secs(60));
    let resent = gate
        .perform(&inside, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(
        matches!(resent, PerformOutcome::Confirmed { attempt: 2, .. }),
        "{resent:?}"
    );
    let received = dest.received_actions().await;
    assert_eq!(received.len(), 2);
    assert_eq!(
        received[0].headers["idempotency-key"], received[1].headers["idempotency-key"],
        "the same destination key on the re-send"
    );
    assert_eq!(dest.effect_count(), 1, "the destination deduplicated");

    // Past the window.
    dest.script([Behaviour::ApplyAndDrop]);
    let late = gate.request(SCOPE, "K-701", SHIP, &shipment()).unwrap();
    let lost = gate
        .perform(&late, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(matches!(lost, PerformOutcome::Unresolved(_)), "{lost:?}");
    store.advance(Duration::from_secs(11 * 60));
    let report = reconciler.run_once().await.unwrap();
    assert_eq!((report.resent, report.to_review), (0, 1), "{report:?}");
    let retry = gate
        .perform(&late, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(matches!(retry, PerformOutcome::Unresolved(_)), "{retry:?}");

    assert_eq!(
        dest.action_requests().await,
        3,
        "no automatic re-send after the window"
    );
    assert_eq!(dest.effect_count(), 2);
    let queue = gate.review_queue(false).await.unwrap();
    assert_eq!(queue.len(), 1);
    let State::Unknown(info) = &queue[0].record.state else {
        panic!()
    };
    assert_eq!(info.owner, Owner::Review);
    assert!(info.reason.contains("window"), "{}", info.reason);
    assert_eq!(queue[0].age, Duration::from_secs(11 * 60));

    run.score.task(true);
    run.score.task(false);
    run.settle(&store, Some(&dest)).await;
}
