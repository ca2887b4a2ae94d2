//! The reconciler and the operator queue, against a real mock destination
//! with a lookup endpoint and real SQLite ledger files.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{AttemptKind, AttemptOutcome, Owner, ResolvedAs, State, StateKind, Terminal};
use handover_router::gate::{PerformOptions, PerformOutcome};
use handover_router::reconcile::{FoundRecord, LookupContext, Reconciler};
use handover_testkit::{Behaviour, MockDestination};
use serde_json::json;
use support::*;

const SHIP: &str = r#"
[actions.create_shipment]
block = "scope"
timeout = "1s"
[actions.create_shipment.lookup]
visibility_lag = "30s"
check_every = "5s"
max_check_every = "1m"
"#;

struct Setup {
    _dir: tempfile::TempDir,
    clock: handover_ledger::ManualClock,
    dest: MockDestination,
    gate: handover_router::gate::WriteGate,
}

async fn setup(actions: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let dest = MockDestination::builder()
        .visibility_lag(Duration::from_secs(30))
        .clock(Arc::new(clock.clone()))
        .start()
        .await;
    let gate = gate(
        sqlite(&dir.path().join("l.db"), &clock).await,
        &config(actions),
        &clock,
        "g",
    );
    Setup {
        _dir: dir,
        clock,
        dest,
        gate,
    }
}

#[tokio::test]
async fn lookup_inside_the_lag_is_not_proof_then_confirms_with_evidence() {
    let s = setup(SHIP).await;
    s.dest.script([Behaviour::ApplyAndDrop]);
    let req = s
        .gate
        .request("t", "K-701", "create_shipment", &json!({"sku": "A"}))
        .unwrap();
    let first = s
        .gate
        .perform(&req, &http_executor(&s.dest), PerformOptions::default())
        .await
        .unwrap();
    let PerformOutcome::Unresolved(info) = first else {
        panic!("{first:?}")
    };
    assert_eq!(info.owner, Owner::Reconciler);

    let rec = Reconciler::new(s.gate.clone(), Arc::new(s.clock.clone()))
        .with_lookup("create_shipment", http_lookup(&s.dest));
    // Not due yet: nothing looked up.
    assert_eq!(rec.run_once().await.unwrap().checked, 0);
    s.clock.advance(Duration::from_secs(5));
    let r = rec.run_once().await.unwrap();
    assert_eq!(
        (r.checked, r.still_unknown),
        (1, 1),
        "empty inside the lag: still unknown"
    );
    let state = s.gate.ledger().get(req.id()).await.unwrap().unwrap().state;
    assert_eq!(state.kind(), StateKind::Unknown);

    s.clock.advance(Duration::from_secs(30));
    let r = rec.run_once().await.unwrap();
    assert_eq!(r.confirmed, 1, "{r:?}");
    let record = s.gate.ledger().get(req.id()).await.unwrap().unwrap();
    let State::Confirmed { result, .. } = &record.state else {
        panic!("{:?}", record.state)
    };
    assert_eq!(result["id"], "rec-1");
    let lookups: Vec<_> = s
        .gate
        .ledger()
        .attempts(req.id())
        .await
        .unwrap()
        .into_iter()
        .filter(|a| a.kind == AttemptKind::Lookup)
        .map(|a| a.outcome)
        .collect();
    assert_eq!(lookups, [AttemptOutcome::NotFound, AttemptOutcome::Found]);
    assert_eq!(s.dest.lookup_requests().await, 2);
    assert_eq!(
        s.dest.action_requests().await,
        1,
        "reconciliation never re-sent"
    );

    // The user's retry now gets the confirmed outcome replayed.
    let replay = s
        .gate
        .perform(&req, &http_executor(&s.dest), PerformOptions::default())
        .await
        .unwrap();
    assert!(
        matches!(replay, PerformOutcome::Replayed(Terminal::Confirmed { .. })),
        "{replay:?}"
    );
}

#[tokio::test]
async fn found_with_other_params_is_diverged_and_goes_to_review() {
    let s = setup(SHIP).await;
    s.dest.script([Behaviour::ApplyAndDrop]);
    let req = s
        .gate
        .request("t", "K-1", "create_shipment", &json!({"sku": "A"}))
        .unwrap();
    s.gate
        .perform(&req, &http_executor(&s.dest), PerformOptions::default())
        .await
        .unwrap();
    let other_params = |ctx: LookupContext| async move {
        Ok(vec![FoundRecord {
            params: json!({"sku": "B"}),
            result: json!({"id": "rec-1", "key": ctx.destination_key}),
        }])
    };
    let rec = Reconciler::new(s.gate.clone(), Arc::new(s.clock.clone()))
        .with_lookup("create_shipment", other_params);
    s.clock.advance(Duration::from_secs(60));
    assert_eq!(rec.run_once().await.unwrap().diverged, 1);
    let queue = s.gate.review_queue(true).await.unwrap();
    assert_eq!(queue.len(), 1);
    let State::Unknown(info) = &queue[0].record.state else {
        panic!()
    };
    assert!(info.diverged && info.owner == Owner::Review, "{info:?}");
    assert_eq!(queue[0].age, Duration::from_secs(60));
    // A diverged operation is not looked up again automatically.
    s.clock.advance(Duration::from_secs(600));
    assert_eq!(rec.run_once().await.unwrap().checked, 0);
}

#[tokio::test]
async fn failed_lookups_prove_nothing_and_absence_after_the_lag_rejects() {
    let s = setup(SHIP).await;
    // The request never reached the destination's records (it answered 503 without applying).
    s.dest.script([Behaviour::FailWithoutApplying(503)]);
    let req = s
        .gate
        .request("t", "K-1", "create_shipment", &json!({"sku": "A"}))
        .unwrap();
    let first = s
        .gate
        .perform(&req, &http_executor(&s.dest), PerformOptions::default())
        .await
        .unwrap();
    assert!(
        matches!(first, PerformOutcome::Unresolved(_)),
        "a 5xx is not proof of anything"
    );

    let broken = |_ctx: LookupContext| async {
        Err::<Vec<FoundRecord>, _>("lookup service down".to_owned())
    };
    let failing = Reconciler::new(s.gate.clone(), Arc::new(s.clock.clone()))
        .with_lookup("create_shipment", broken);
    s.clock.advance(Duration::from_secs(60));
    let r = failing.run_once().await.unwrap();
    assert_eq!((r.still_unknown, r.rejected), (1, 0));
    assert_eq!(
        s.gate
            .ledger()
            .get(req.id())
            .await
            .unwrap()
            .unwrap()
            .state
            .kind(),
        StateKind::Unknown
    );

    let working = Reconciler::new(s.gate.clone(), Arc::new(s.clock.clone()))
        .with_lookup("create_shipment", http_lookup(&s.dest));
    s.clock.advance(Duration::from_secs(60));
    assert_eq!(working.run_once().await.unwrap().rejected, 1);
    let replay = s
        .gate
        .perform(&req, &http_executor(&s.dest), PerformOptions::default())
        .await
        .unwrap();
    assert!(
        matches!(replay, PerformOutcome::Replayed(Terminal::Rejected { .. })),
        "{replay:?}"
    );
    assert_eq!(s.dest.effect_count(), 0);
    assert_eq!(s.dest.action_requests().await, 1);
}

#[tokio::test]
async fn without_lookup_or_keys_the_operator_resolves_with_evidence_and_writes_resume() {
    let s = setup("[actions.create_shipment]\nblock = \"scope\"\ntimeout = \"1s\"\n").await;
    s.dest.script([Behaviour::ApplyAndDrop]);
    let exec = http_executor(&s.dest);
    let req = s
        .gate
        .request("order-1", "K-1", "create_shipment", &json!({"sku": "A"}))
        .unwrap();
    s.gate
        .perform(&req, &exec, PerformOptions::default())
        .await
        .unwrap();
    let sibling = s
        .gate
        .request("order-1", "K-2", "create_shipment", &json!({"sku": "B"}))
        .unwrap();
    assert!(matches!(
        s.gate
            .perform(&sibling, &exec, PerformOptions::default())
            .await
            .unwrap(),
        PerformOutcome::Suspended { .. }
    ));

    let queue = s.gate.review_queue(false).await.unwrap();
    assert_eq!(queue.len(), 1);
    assert_eq!(queue[0].attempts.len(), 1);

    // Refused without evidence or actor; nothing changes.
    for (evidence, actor) in [("", "alice"), ("carrier portal shows SHP-1", "")] {
        let err = s
            .gate
            .resolve(
                req.id(),
                ResolvedAs::Confirmed {
                    result: json!({"id": "SHP-1"}),
                },
                evidence,
                actor,
            )
            .await
            .unwrap_err();
        assert!(err.field().is_some(), "{err}");
    }
    assert_eq!(
        s.gate
            .ledger()
            .get(req.id())
            .await
            .unwrap()
            .unwrap()
            .state
            .kind(),
        StateKind::Unknown
    );

    let resolved = s
        .gate
        .resolve(
            req.id(),
            ResolvedAs::Confirmed {
                result: json!({"id": "SHP-1"}),
            },
            "carrier portal shows SHP-1",
            "alice",
        )
        .await
        .unwrap();
    assert_eq!(resolved.state.kind(), StateKind::Confirmed);
    let last = s
        .gate
        .ledger()
        .attempts(req.id())
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!(
        (last.kind, last.executor.as_str()),
        (AttemptKind::Operator, "alice")
    );
    assert_eq!(last.evidence.as_deref(), Some("carrier portal shows SHP-1"));
    // A second resolve is a forbidden transition.
    assert!(
        s.gate
            .resolve(
                req.id(),
                ResolvedAs::Rejected { reason: "x".into() },
                "e",
                "bob"
            )
            .await
            .is_err()
    );

    // The blocked sibling proceeds.
    assert!(matches!(
        s.gate
            .perform(&sibling, &exec, PerformOptions::default())
            .await
            .unwrap(),
        PerformOutcome::Confirmed { .. }
    ));
    assert_eq!(s.dest.action_requests().await, 2);
    assert!(s.gate.review_queue(false).await.unwrap().is_empty());
}

#[tokio::test]
async fn reconciler_resends_with_the_same_key_while_the_destination_remembers_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let dest = MockDestination::builder()
        .idempotency("Idempotency-Key", Duration::from_secs(600))
        .clock(Arc::new(clock.clone()))
        .start()
        .await;
    dest.script([Behaviour::ApplyAndDrop]);
    let config = config(
        "[actions.pay]\ntimeout = \"1s\"\n[actions.pay.idempotency]\nheader = \"Idempotency-Key\"\nretention = \"10m\"\n",
    );
    let g = gate(
        sqlite(&dir.path().join("l.db"), &clock).await,
        &config,
        &clock,
        "g",
    );
    let req = g
        .request("t", "P-1", "pay", &json!({"amount": 10}))
        .unwrap();
    g.perform(&req, &http_executor(&dest), PerformOptions::default())
        .await
        .unwrap();
    let rec = Reconciler::new(g.clone(), Arc::new(clock.clone()))
        .with_resender("pay", http_executor(&dest));
    clock.advance(Duration::from_secs(10));
    let r = rec.run_once().await.unwrap();
    assert_eq!((r.resent, r.confirmed), (1, 1), "{r:?}");
    assert_eq!(dest.effect_count(), 1);
    assert_eq!(dest.action_requests().await, 2);
}

#[tokio::test]
async fn after_the_idempotency_window_the_reconciler_hands_over_to_review() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let dest = MockDestination::builder().start().await;
    dest.script([Behaviour::ApplyAndDrop]);
    let config = config(
        "[actions.pay]\ntimeout = \"1s\"\n[actions.pay.idempotency]\nheader = \"Idempotency-Key\"\nretention = \"10m\"\n",
    );
    let g = gate(
        sqlite(&dir.path().join("l.db"), &clock).await,
        &config,
        &clock,
        "g",
    );
    let req = g
        .request("t", "P-1", "pay", &json!({"amount": 10}))
        .unwrap();
    g.perform(&req, &http_executor(&dest), PerformOptions::default())
        .await
        .unwrap();
    clock.advance(Duration::from_secs(11 * 60));
    let rec = Reconciler::new(g.clone(), Arc::new(clock.clone()))
        .with_resender("pay", http_executor(&dest));
    let r = rec.run_once().await.unwrap();
    assert_eq!((r.resent, r.to_review), (0, 1), "{r:?}");
    assert_eq!(
        dest.action_requests().await,
        1,
        "no automatic re-send after the window"
    );
    let State::Unknown(info) = g.ledger().get(req.id()).await.unwrap().unwrap().state else {
        panic!()
    };
    assert_eq!(info.owner, Owner::Review);
}

#[tokio::test]
async fn the_visibility_lag_counts_from_when_the_dispatch_ended_not_when_it_was_recorded() {
    let s = setup(SHIP).await;
    s.dest.script([Behaviour::ApplyAndDrop]);
    let req = s
        .gate
        .request("t", "K-7", "create_shipment", &json!({"sku": "A"}))
        .unwrap();
    // The request reaches the destination 1 s after the dispatch was recorded
    // (a slow network): its record is created at t0 + 1 s.
    let (clock, inner) = (s.clock.clone(), http_executor(&s.dest));
    let slow = move |ctx: handover_router::gate::DispatchContext| {
        clock.advance(Duration::from_secs(1));
        handover_router::gate::Executor::execute(&inner, ctx)
    };
    let first = s
        .gate
        .perform(&req, &slow, PerformOptions::default())
        .await
        .unwrap();
    assert!(matches!(first, PerformOutcome::Unresolved(_)), "{first:?}");

    let rec = Reconciler::new(s.gate.clone(), Arc::new(s.clock.clone()))
        .with_lookup("create_shipment", http_lookup(&s.dest));
    // 30 s after the dispatch was *recorded* the record is still invisible
    // (it appears at t0 + 31 s): an empty lookup here must not reject.
    s.clock.advance(Duration::from_secs(29));
    let r = rec.run_once().await.unwrap();
    assert_eq!(r.rejected, 0, "{r:?}");
    assert_eq!(
        s.gate
            .ledger()
            .get(req.id())
            .await
            .unwrap()
            .unwrap()
            .state
            .kind(),
        StateKind::Unknown
    );
    s.clock.advance(Duration::from_secs(5));
    assert_eq!(rec.run_once().await.unwrap().confirmed, 1);
    assert_eq!(s.dest.effect_count(), 1);
}

#[tokio::test]
async fn one_failing_operation_is_recorded_and_skipped_and_the_pass_goes_on() {
    let s = setup(SHIP).await;
    s.dest
        .script([Behaviour::ApplyAndDrop, Behaviour::ApplyAndDrop]);
    let bad = s
        .gate
        .request(
            "t",
            "K-bad",
            "create_shipment",
            &json!({"sku": "A".repeat(200)}),
        )
        .unwrap();
    let good = s
        .gate
        .request("t2", "K-good", "create_shipment", &json!({"sku": "B"}))
        .unwrap();
    for req in [&bad, &good] {
        let out = s
            .gate
            .perform(req, &http_executor(&s.dest), PerformOptions::default())
            .await
            .unwrap();
        assert!(matches!(out, PerformOutcome::Unresolved(_)), "{out:?}");
    }
    let lookup = |ctx: LookupContext| async move {
        Ok(vec![FoundRecord {
            params: ctx.params,
            result: json!({"id": "rec"}),
        }])
    };
    // The reconciler runs under a configuration whose parameter limit was
    // lowered since K-bad was recorded: reconciling K-bad fails. K-good
    // must still be resolved. (A found record whose result cannot be
    // recorded is no failure: it goes to review, see the gateway's tests.)
    let lowered = handover_router::config::Config::parse(
        &format!("[ledger]\nbackend = \"memory\"\nmax_params_bytes = 100\n{SHIP}"),
        &|_| None,
    )
    .unwrap();
    let strict = handover_router::gate::WriteGate::new(
        s.gate.ledger().clone(),
        lowered,
        Arc::new(s.clock.clone()),
    );
    let hold = Duration::from_secs(60);
    let rec = Reconciler::new(strict, Arc::new(s.clock.clone()))
        .with_lookup("create_shipment", lookup)
        .with_hold(hold)
        .with_batch(1);
    s.clock.advance(Duration::from_secs(5));
    let r = rec.run_once().await.unwrap();
    assert_eq!((r.checked, r.failed, r.confirmed), (2, 1, 1), "{r:?}");
    let state = |req: &handover_ledger::OperationRequest| {
        let ledger = s.gate.ledger().clone();
        let id = req.id().clone();
        async move { ledger.get(&id).await.unwrap().unwrap().state.kind() }
    };
    assert_eq!(state(&good).await, StateKind::Confirmed);
    assert_eq!(state(&bad).await, StateKind::Unknown);

    // The failed one is skipped until its hold passes, then tried again.
    assert_eq!(rec.run_once().await.unwrap().checked, 0);
    s.clock.advance(hold);
    let r = rec.run_once().await.unwrap();
    assert_eq!((r.checked, r.failed), (1, 1), "{r:?}");
    assert_eq!(s.dest.action_requests().await, 2, "nothing was re-sent");
}

#[tokio::test]
async fn with_a_key_but_no_lookup_the_reconciler_waits_out_the_window_then_hands_over() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let dest = MockDestination::builder().start().await;
    dest.script([Behaviour::ApplyAndDrop]);
    let config = config(
        "[actions.pay]\ntimeout = \"1s\"\n[actions.pay.idempotency]\nheader = \"Idempotency-Key\"\nretention = \"10m\"\n",
    );
    let g = gate(
        sqlite(&dir.path().join("l.db"), &clock).await,
        &config,
        &clock,
        "g",
    );
    let req = g
        .request("t", "P-1", "pay", &json!({"amount": 10}))
        .unwrap();
    let first = g
        .perform(&req, &http_executor(&dest), PerformOptions::default())
        .await
        .unwrap();
    let PerformOutcome::Unresolved(info) = first else {
        panic!("{first:?}")
    };
    assert_eq!(
        info.owner,
        Owner::Reconciler,
        "a key lets a re-send prove it"
    );
    let window_ends = info.since.plus(Duration::from_secs(600));
    // No re-send executor (as in `handover serve`: the caller re-sends).
    let rec = Reconciler::new(g.clone(), Arc::new(clock.clone()));
    clock.advance(Duration::from_secs(60));
    let r = rec.run_once().await.unwrap();
    assert_eq!((r.still_unknown, r.to_review), (1, 0), "{r:?}");
    let State::Unknown(info) = g.ledger().get(req.id()).await.unwrap().unwrap().state else {
        panic!()
    };
    assert_eq!(info.owner, Owner::Reconciler);
    assert!(
        info.next_check_at
            .is_some_and(|t| t <= window_ends && t > window_ends.minus(Duration::from_secs(2))),
        "next check when the window ends: {info:?}"
    );
    clock.advance(Duration::from_secs(600));
    let r = rec.run_once().await.unwrap();
    assert_eq!(r.to_review, 1, "{r:?}");
    assert_eq!(dest.action_requests().await, 1);
}

/// An HTTP lookup whose URL redirects (say, to a login page that answers
/// 404): following it would read "no record" and allow a re-send. The
/// redirect is not followed; the lookup fails, which is evidence of
/// nothing, and its target sees no request.
#[tokio::test]
async fn a_redirected_lookup_fails_and_is_not_read_as_no_record() {
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};

    let elsewhere = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(404))
        .mount(&elsewhere)
        .await;
    let dest = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(302)
                .insert_header("location", format!("{}/login", elsewhere.uri())),
        )
        .mount(&dest)
        .await;
    let answer = configured_lookup(&dest.uri()).await;
    assert!(
        answer.is_err(),
        "a redirect must not read as an answer: {answer:?}"
    );
    assert!(elsewhere.received_requests().await.unwrap().is_empty());
}

/// A key (or scope) may be `.` or `..`; in a path segment the URL's parser
/// would remove it (and, for `..`, the segment before), so
/// `/{scope}/shipments/{key}` would ask for `/tenant-1/` and the answer
/// could confirm the operation from another one's record. Such a lookup
/// fails before anything is sent (the operation stays unknown); a value
/// that only contains dots is sent as it is.
#[tokio::test]
async fn a_key_that_is_a_dot_segment_is_not_sent_in_a_lookup_path() {
    use handover_router::reconcile::{HttpLookup, Lookup};
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};

    let dest = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"order": "O-1"})))
        .mount(&dest)
        .await;
    let config = config(&format!(
        "[actions.ship.lookup]\nvisibility_lag = \"1s\"\nurl = \"{}/{{scope}}/shipments/{{key}}\"\n",
        dest.uri()
    ));
    let lookups = HttpLookup::from_config(&config, &|_| None).unwrap();
    let (_, lookup) = lookups.into_iter().find(|(a, _)| a == "ship").unwrap();
    let ctx = |key: &str| LookupContext {
        operation: handover_ledger::OperationId::new("tenant-1", key).unwrap(),
        action: handover_ledger::ActionName::new("ship").unwrap(),
        params: json!({"order": "O-1"}),
        destination_key: "ho1-abc".into(),
    };
    for key in ["..", "."] {
        let answer = lookup.lookup(ctx(key)).await;
        let e = answer.expect_err(key);
        assert!(e.contains("'.' or '..'"), "{key}: {e}");
    }
    assert!(dest.received_requests().await.unwrap().is_empty());
    lookup.lookup(ctx("...")).await.unwrap();
    let sent = dest.received_requests().await.unwrap();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].url.path(), "/tenant-1/shipments/...");
}

/// A declared HTTP lookup compares only its `match` fields, and a field
/// the approved parameters leave out agrees with a record that leaves it
/// out too (absent and `null` are the same on both sides): the lost
/// confirmation is confirmed, not sent to review as diverged.
#[tokio::test]
async fn a_match_field_absent_on_both_sides_confirms() {
    use handover_router::gate::ExecutorError;
    use handover_router::reconcile::HttpLookup;
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};

    let dest = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"data": [{"id": "rec-1", "order": "O-1"}]})),
        )
        .mount(&dest)
        .await;
    let actions = format!(
        "[actions.ship]\ntimeout = \"1s\"\n[actions.ship.lookup]\nvisibility_lag = \"1s\"\n\
         check_every = \"1s\"\nurl = \"{}/records?key={{destination_key}}\"\nrecords = \"/data\"\n\
         [actions.ship.lookup.match]\norder = \"/order\"\nqty = \"/qty\"\n",
        dest.uri()
    );
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let cfg = config(&actions);
    let gate = gate(
        sqlite(&dir.path().join("l.db"), &clock).await,
        &cfg,
        &clock,
        "g",
    );
    let (_, lookup) = HttpLookup::from_config(&cfg, &|_| None)
        .unwrap()
        .into_iter()
        .find(|(a, _)| a == "ship")
        .unwrap();
    let reconciler =
        Reconciler::new(gate.clone(), Arc::new(clock.clone())).with_lookup("ship", lookup);
    let req = gate
        .request("t", "K-1", "ship", &json!({"order": "O-1"}))
        .unwrap();
    let lost = |_ctx| async { Err(ExecutorError::maybe_sent("connection reset after sending")) };
    let first = gate
        .perform(&req, &lost, PerformOptions::default())
        .await
        .unwrap();
    assert!(matches!(first, PerformOutcome::Unresolved(_)), "{first:?}");
    clock.advance(Duration::from_secs(5));
    let pass = reconciler.run_once().await.unwrap();
    assert_eq!((pass.confirmed, pass.diverged), (1, 0), "{pass:?}");
    let rec = gate.ledger().get(req.id()).await.unwrap().unwrap();
    assert_eq!(rec.state.kind(), StateKind::Confirmed);
    assert_eq!(dest.received_requests().await.unwrap().len(), 1);
}

/// A lookup sent inside the visibility lag and answered after it proves
/// nothing: the destination may have read its records before the one
/// created at the dispatch became visible. Only a lookup *sent* after the
/// lag rejects; the attempt log says when the lookup was sent.
#[tokio::test]
async fn an_empty_lookup_sent_inside_the_lag_and_answered_after_it_is_not_proof() {
    let s = setup(SHIP).await;
    s.dest.script([Behaviour::ApplyAndDrop]);
    let req = s
        .gate
        .request("t", "K-8", "create_shipment", &json!({"sku": "A"}))
        .unwrap();
    let first = s
        .gate
        .perform(&req, &http_executor(&s.dest), PerformOptions::default())
        .await
        .unwrap();
    assert!(matches!(first, PerformOutcome::Unresolved(_)), "{first:?}");
    // The destination reads its records at once (empty: inside the lag),
    // and its answer arrives 10 s later, past the lag.
    let (clock, inner) = (s.clock.clone(), Arc::new(http_lookup(&s.dest)));
    let slow = move |ctx: LookupContext| {
        let (clock, inner) = (clock.clone(), inner.clone());
        async move {
            let found = handover_router::reconcile::Lookup::lookup(&*inner, ctx).await;
            clock.advance(Duration::from_secs(10));
            found
        }
    };
    let rec = Reconciler::new(s.gate.clone(), Arc::new(s.clock.clone()))
        .with_lookup("create_shipment", slow);
    s.clock.advance(Duration::from_secs(25));
    let r = rec.run_once().await.unwrap();
    assert_eq!((r.checked, r.rejected), (1, 0), "{r:?}");
    let record = s.gate.ledger().get(req.id()).await.unwrap().unwrap();
    assert_eq!(record.state.kind(), StateKind::Unknown);
    let lookup = s
        .gate
        .ledger()
        .attempts(req.id())
        .await
        .unwrap()
        .into_iter()
        .find(|a| a.kind == AttemptKind::Lookup)
        .unwrap();
    let took = lookup.finished_at.unwrap().saturating_since(lookup.sent_at);
    assert_eq!(took, Duration::from_secs(10), "{lookup:?}");
    // Sent after the lag, the record is there: confirmed, never rejected.
    s.clock.advance(Duration::from_secs(10));
    assert_eq!(rec.run_once().await.unwrap().confirmed, 1);
    assert_eq!(s.dest.effect_count(), 1);
}
