//! Issue 12: what was approved is what runs. An explicit approval binds
//! its parameters across a restart and whatever model proposes first; and
//! numbers are never changed silently (I-JSON): refused with their path
//! before anything is written or sent, and what is recorded is what every
//! caller is told.

use std::sync::Arc;

use handover::ledger::{ApproveOutcome, Owner, State, StateKind, Terminal};
use handover::router::RouterError;
use handover::router::gate::{DispatchContext, ExecutorOutcome, FixedApproval, HttpJsonExecutor};
use handover::{PerformOptions, PerformOutcome};
use handover_testkit::{Flavor, MockDestination, MockProvider, Reply};
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::*;

per_backend! {
    #[tokio::test] the_approved_parameters_run_and_nothing_else,
    #[tokio::test] numbers_are_never_changed_silently;
    across_restart:
    #[tokio::test] the_approved_parameters_run_and_nothing_else,
}

/// The user approves the shipment with quantity 1 (recorded durably); the
/// process restarts (the application keeps only the key: the primary's
/// proposal never reached the gate); the fallback model proposes quantity
/// 2 under the same key. It is refused — 0 requests at the destination,
/// nothing claimed — with the light approval (key only: the ledger's
/// approval binds) and with the explicit one (params named: refused before
/// the ledger is asked). The approved quantity 1 then runs once.
pub async fn the_approved_parameters_run_and_nothing_else(run: Run) {
    let mut store = run.store().await;
    let primary = MockProvider::start(Flavor::OpenAi).await;
    let fallback = MockProvider::start(Flavor::DeepSeek).await;
    let dest = MockDestination::builder()
        .clock(Arc::new(store.clock.clone()))
        .start()
        .await;
    let mut two = shipment();
    two["qty"] = json!(2);
    // The primary is overloaded: every turn tries it once (a single 503
    // does not open its breaker) and falls back.
    primary.set_default(Reply::overloaded());
    fallback.script([
        Reply::tool_call("call_fallback_1", SHIP, two.clone()),
        Reply::tool_call("call_fallback_2", SHIP, two.clone()),
        Reply::tool_call("call_fallback_3", SHIP, shipment_reordered()),
    ]);
    // Three turns, each trying the primary first, share the task's budget.
    let config = config(
        &primary.base_url(),
        &fallback.base_url(),
        "max_requests = 10",
        RELAXED,
        SHIP_NO_RECOVERY,
    );
    let router = router(&config);
    let exec = executor(&dest);

    // The user approves quantity 1.
    let gate = store.gate(&config, "agent-backend-1");
    let approved = gate.request(SCOPE, "K-701", SHIP, &shipment()).unwrap();
    assert_eq!(
        gate.approve(&approved).await.unwrap(),
        ApproveOutcome::Planned
    );
    let planned = store.record(SCOPE, "K-701").await;
    assert_eq!(planned.state.kind(), StateKind::Planned);

    // Restart: everything built on the old ledger instance is dropped.
    drop(gate);
    let gate = if run.maybe_restart(&mut store).await {
        store.gate(&config, "agent-backend-2")
    } else {
        store.gate(&config, "agent-backend-1")
    };
    let task = router.task("default").unwrap();
    let opts = PerformOptions {
        budget: Some(task.budget()),
        metadata: None,
    };
    let turn = async || proposed(&router.chat(&task, &user_turn()).await.unwrap());

    // The fallback proposes quantity 2; the application knows only the key.
    let call = turn().await;
    assert_eq!(call.provider.as_deref(), Some("fallback"));
    let light = approval("K-701");
    let refused = gate.perform_call(&call, &light, &exec, opts).await.unwrap();
    let PerformOutcome::Conflict {
        recorded,
        requested,
    } = refused
    else {
        panic!("expected a conflict, got {refused:?}")
    };
    assert_eq!(recorded, approved.fingerprint());
    assert_ne!(requested, recorded);
    // Again, with the approval naming its parameters.
    let explicit = FixedApproval::new(SCOPE, "K-701", SHIP).with_params(shipment());
    let call = turn().await;
    let refused = gate
        .perform_call(&call, &explicit, &exec, opts)
        .await
        .unwrap();
    assert!(
        matches!(refused, PerformOutcome::Conflict { recorded: r, .. } if r == recorded),
        "{refused:?}"
    );
    assert_eq!(dest.action_requests().await, 0, "nothing was sent");
    let rec = store.record(SCOPE, "K-701").await;
    assert_eq!(
        (rec.state.kind(), rec.epoch.0, rec.dispatch_count),
        (StateKind::Planned, 0, 0),
        "nothing was claimed"
    );
    assert_eq!(rec.params, Some(shipment()), "the approval is unchanged");
    assert!(store.ledger().attempts(&rec.id).await.unwrap().is_empty());

    // The approved shipment (another model's member order) runs once.
    let call = turn().await;
    let done = gate
        .perform_call(&call, &explicit, &exec, opts)
        .await
        .unwrap();
    assert!(matches!(done, PerformOutcome::Confirmed { .. }), "{done:?}");
    let again = gate.perform_call(&call, &light, &exec, opts).await.unwrap();
    assert!(
        matches!(again, PerformOutcome::Replayed(Terminal::Confirmed { .. })),
        "{again:?}"
    );
    assert_eq!(dest.action_requests().await, 1);
    assert_eq!(dest.effect_count(), 1);
    assert_eq!(
        dest.records()[0].body["qty"],
        1,
        "exactly what was approved"
    );
    assert_eq!(
        (primary.requests().await, fallback.requests().await),
        (3, 3)
    );

    run.score.task(true);
    run.settle(&store, Some(&dest)).await;
}

/// The three ways a number used to change silently, through the public API:
/// an approved integer beyond 2^53 (stored and sent rounded), two such
/// integers sharing one fingerprint (replaying each other), and a result
/// told exactly to the first caller but replayed rounded. Now the first two
/// are refused with their path before anything is written or sent, and an
/// unrecordable result is never recorded rounded: the operation is
/// `unknown` for a human, never re-executed. A recordable result is told
/// in its recorded form to the first caller and to every replay.
pub async fn numbers_are_never_changed_silently(run: Run) {
    let store = run.store().await;
    let dest = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/shipments"))
        .respond_with(ResponseTemplate::new(201).set_body_raw(
            r#"{"id": 12345678901234567891, "status": "created"}"#,
            "application/json",
        ))
        .mount(&dest)
        .await;
    let config = config(
        "http://127.0.0.1:9/v1",
        "http://127.0.0.1:9/v1",
        "",
        RELAXED,
        SHIP_NO_RECOVERY,
    );
    let gate = store.gate(&config, "agent-backend");
    let exec = HttpJsonExecutor::new(reqwest::Client::new(), format!("{}/shipments", dest.uri()));

    // 1 and 2: beyond ±(2^53−1), refused by path, for approvals and proposals alike.
    for batch in [9_007_199_254_740_993_u64, 9_007_199_254_740_992_u64] {
        let params = json!({"items": [{"sku": "A"}, {"sku": "B"}, {"sku": "C", "batch": batch}]});
        let err = gate.request(SCOPE, "K-big", SHIP, &params).unwrap_err();
        let RouterError::Ledger(e) = &err else {
            panic!("expected a validation error, got {err:?}")
        };
        assert_eq!(e.field(), Some("params.items[2].batch"), "{err}");
        assert!(err.to_string().contains(&batch.to_string()), "{err}");
    }
    assert!(store.all().await.is_empty(), "nothing was written");
    assert!(dest.received_requests().await.unwrap().is_empty());

    // A result spelled differently from its recorded form: one answer for all.
    let ship = |_ctx: DispatchContext| async {
        Ok(ExecutorOutcome::Confirmed(
            json!({"total": 10.0, "rate": 0.1}),
        ))
    };
    let req = gate.request(SCOPE, "K-4", SHIP, &shipment()).unwrap();
    let first = gate
        .perform(&req, &ship, PerformOptions::default())
        .await
        .unwrap();
    let PerformOutcome::Confirmed { result, .. } = first else {
        panic!("expected confirmed, got {first:?}")
    };
    assert_eq!(result, json!({"total": 10, "rate": 0.1}));
    let State::Confirmed { at, .. } = store.record(SCOPE, "K-4").await.state else {
        panic!("expected confirmed")
    };
    let replay = gate
        .perform(&req, &ship, PerformOptions::default())
        .await
        .unwrap();
    assert_eq!(
        replay,
        PerformOutcome::Replayed(Terminal::Confirmed {
            result,
            evidence: None,
            at,
        })
    );

    // 3: the destination answers with an id beyond 2^53.
    let req = gate.request(SCOPE, "K-3", SHIP, &shipment()).unwrap();
    let first = gate.perform(&req, &exec, PerformOptions::default()).await;
    let Err(RouterError::OutcomeNotRecorded { outcome, source }) = &first else {
        panic!("expected the answer not to be recorded, got {first:?}")
    };
    assert_eq!((*outcome, source.field()), ("confirmed", Some("result.id")));
    let rec = store.record(SCOPE, "K-3").await;
    let State::Unknown(info) = &rec.state else {
        panic!("expected unknown, got {:?}", rec.state)
    };
    assert_eq!(
        info.owner,
        Owner::Review,
        "a human decides, with the evidence"
    );
    let retry = gate
        .perform(&req, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(matches!(retry, PerformOutcome::Unresolved(_)), "{retry:?}");
    assert_eq!(
        dest.received_requests().await.unwrap().len(),
        1,
        "sent once"
    );

    run.score.task(true);
    run.settle(&store, None).await;
}
