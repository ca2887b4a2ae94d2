//! The write gate against a real HTTP destination (testkit) and real SQLite
//! ledger files: effects are counted at the destination.

use crate::support;

use std::time::Duration;

use handover_ledger::{AttemptKind, AttemptOutcome, Owner, State, StateKind, Terminal};
use handover_router::gate::{
    ExecutorError, FixedApproval, PerformOptions, PerformOutcome, ProposedCall,
};
use handover_testkit::{Behaviour, MockDestination};
use serde_json::json;
use support::*;

const SHIP: &str = r#"
[actions.create_shipment]
block = "scope"
timeout = "300ms"
"#;

fn opts() -> PerformOptions<'static> {
    PerformOptions::default()
}

#[tokio::test]
async fn lost_confirmation_is_unknown_and_never_sent_twice() {
    for lose in [
        Behaviour::ConfirmAfter(Duration::from_secs(5)),
        Behaviour::ApplyAndDrop,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let clock = clock();
        let dest = MockDestination::builder().start().await;
        dest.script([lose.clone()]);
        let config = config(SHIP);
        let exec = http_executor(&dest);
        let params = json!({"order": "O-1", "sku": "A", "qty": 1});

        let primary = gate(sqlite(&path, &clock).await, &config, &clock, "primary");
        let req = primary
            .request("tenant-1", "K-701", "create_shipment", &params)
            .unwrap();
        let first = primary.perform(&req, &exec, opts()).await.unwrap();
        let PerformOutcome::Unresolved(info) = &first else {
            panic!("{lose:?}: expected unresolved, got {first:?}")
        };
        assert_eq!(
            info.owner,
            Owner::Review,
            "no lookup, no idempotency: an operator owns it"
        );

        // Same process retries.
        let again = primary.perform(&req, &exec, opts()).await.unwrap();
        assert!(matches!(again, PerformOutcome::Unresolved(_)), "{again:?}");

        // A new process on the same file.
        drop(primary);
        let reopened = gate(sqlite(&path, &clock).await, &config, &clock, "restarted");
        let after_restart = reopened.perform(&req, &exec, opts()).await.unwrap();
        assert!(matches!(after_restart, PerformOutcome::Unresolved(_)));

        // A fallback model re-proposes the action with a new tool-call id.
        let approval = FixedApproval::new("tenant-1", "K-701", "create_shipment");
        let call = ProposedCall {
            tool_call_id: "call_fallback_9".into(),
            action: "create_shipment".into(),
            arguments: json!({"qty": 1, "sku": "A", "order": "O-1"}),
            provider: Some("deepseek".into()),
            model: Some("deepseek-chat".into()),
        };
        let fallback = reopened
            .perform_call(&call, &approval, &exec, opts())
            .await
            .unwrap();
        assert!(
            matches!(fallback, PerformOutcome::Unresolved(_)),
            "{fallback:?}"
        );

        assert_eq!(
            dest.action_requests().await,
            1,
            "{lose:?}: exactly one request reached the destination"
        );
        assert_eq!(dest.effect_count(), 1);
        let rec = reopened.ledger().get(req.id()).await.unwrap().unwrap();
        assert_eq!(rec.state.kind(), StateKind::Unknown);
        assert_eq!(rec.dispatch_count, 1);
    }
}

#[tokio::test]
async fn fallback_with_changed_params_gets_a_conflict_and_nothing_runs() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let dest = MockDestination::builder().start().await;
    let config = config(SHIP);
    let g = gate(
        sqlite(&dir.path().join("l.db"), &clock).await,
        &config,
        &clock,
        "g",
    );
    let exec = http_executor(&dest);
    let approved = g
        .request(
            "t",
            "K-701",
            "create_shipment",
            &json!({"sku": "A", "qty": 1}),
        )
        .unwrap();
    assert!(matches!(
        g.perform(&approved, &exec, opts()).await.unwrap(),
        PerformOutcome::Confirmed { .. }
    ));

    let approval = FixedApproval::new("t", "K-701", "create_shipment");
    let changed = ProposedCall {
        tool_call_id: "call_2".into(),
        action: "create_shipment".into(),
        arguments: json!({"sku": "A", "qty": 2}),
        provider: None,
        model: None,
    };
    let outcome = g
        .perform_call(&changed, &approval, &exec, opts())
        .await
        .unwrap();
    assert!(
        matches!(outcome, PerformOutcome::Conflict { .. }),
        "{outcome:?}"
    );
    assert_eq!(dest.action_requests().await, 1);
    let rec = g.ledger().get(approved.id()).await.unwrap().unwrap();
    assert_eq!(
        rec.params,
        Some(json!({"sku": "A", "qty": 1})),
        "approved params unchanged"
    );
}

#[tokio::test]
async fn primary_and_fallback_racing_on_one_operation_send_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("race.db");
    let clock = clock();
    let dest = MockDestination::builder().start().await;
    let config = config(SHIP);
    // Two independent ledgers on one file, as two processes would have.
    let primary = gate(sqlite(&path, &clock).await, &config, &clock, "primary");
    let fallback = gate(sqlite(&path, &clock).await, &config, &clock, "fallback");
    let exec = http_executor(&dest);
    for round in 0..20 {
        let key = format!("K-{round}");
        let params = json!({"sku": "A"});
        let a = primary
            .request("t", &key, "create_shipment", &params)
            .unwrap();
        let b = fallback
            .request("t", &key, "create_shipment", &params)
            .unwrap();
        let (ra, rb) = tokio::join!(
            primary.perform(&a, &exec, opts()),
            fallback.perform(&b, &exec, opts())
        );
        let confirmed = [ra.unwrap(), rb.unwrap()]
            .iter()
            .filter(|o| matches!(o, PerformOutcome::Confirmed { .. }))
            .count();
        assert_eq!(confirmed, 1, "round {round}");
    }
    assert_eq!(dest.action_requests().await, 20);
    assert_eq!(dest.effect_count(), 20);
}

#[tokio::test]
async fn unknown_shipment_blocks_its_scope_not_others() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let dest = MockDestination::builder().start().await;
    dest.script([Behaviour::ApplyAndDrop]);
    let config = config(SHIP);
    let g = gate(
        sqlite(&dir.path().join("b.db"), &clock).await,
        &config,
        &clock,
        "g",
    );
    let exec = http_executor(&dest);
    let first = g
        .request("order-1", "K-1", "create_shipment", &json!({"sku": "A"}))
        .unwrap();
    assert!(matches!(
        g.perform(&first, &exec, opts()).await.unwrap(),
        PerformOutcome::Unresolved(_)
    ));

    let second = g
        .request("order-1", "K-2", "create_shipment", &json!({"sku": "B"}))
        .unwrap();
    let outcome = g.perform(&second, &exec, opts()).await.unwrap();
    let PerformOutcome::Suspended { blocked_by, .. } = outcome else {
        panic!("expected suspended, got {outcome:?}")
    };
    assert_eq!(&blocked_by, first.id());
    assert!(
        g.ledger().get(second.id()).await.unwrap().is_none(),
        "nothing written for the blocked one"
    );

    let elsewhere = g
        .request("order-2", "K-3", "create_shipment", &json!({"sku": "B"}))
        .unwrap();
    assert!(matches!(
        g.perform(&elsewhere, &exec, opts()).await.unwrap(),
        PerformOutcome::Confirmed { .. }
    ));
    assert_eq!(dest.action_requests().await, 2);
}

#[tokio::test]
async fn idempotency_key_resend_inside_the_window_only() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let dest = MockDestination::builder()
        .idempotency("Idempotency-Key", Duration::from_secs(3600))
        .clock(std::sync::Arc::new(clock.clone()))
        .start()
        .await;
    dest.script([Behaviour::ApplyAndDrop]);
    let config = config(
        "[actions.pay]\ntimeout = \"2s\"\n[actions.pay.idempotency]\nheader = \"Idempotency-Key\"\nretention = \"1h\"\n",
    );
    let g = gate(
        sqlite(&dir.path().join("i.db"), &clock).await,
        &config,
        &clock,
        "g",
    );
    let exec = http_executor(&dest);
    let req = g
        .request("t", "P-1", "pay", &json!({"amount": 100}))
        .unwrap();
    let first = g.perform(&req, &exec, opts()).await.unwrap();
    let PerformOutcome::Unresolved(info) = first else {
        panic!("{first:?}")
    };
    assert_eq!(info.owner, Owner::Reconciler);

    clock.advance(Duration::from_secs(60));
    let again = g.perform(&req, &exec, opts()).await.unwrap();
    assert!(
        matches!(again, PerformOutcome::Confirmed { attempt: 2, .. }),
        "{again:?}"
    );
    let sent = dest.received_actions().await;
    assert_eq!(sent.len(), 2);
    let keys: Vec<_> = sent
        .iter()
        .map(|r| r.headers["idempotency-key"].to_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        keys[0], keys[1],
        "the re-send carries the same destination key"
    );
    assert_eq!(dest.effect_count(), 1, "the destination deduplicated");

    // Outside the window: no automatic re-send.
    let late = g.request("t", "P-2", "pay", &json!({"amount": 5})).unwrap();
    dest.script([Behaviour::ApplyAndDrop]);
    assert!(matches!(
        g.perform(&late, &exec, opts()).await.unwrap(),
        PerformOutcome::Unresolved(_)
    ));
    clock.advance(Duration::from_secs(3601));
    let outcome = g.perform(&late, &exec, opts()).await.unwrap();
    assert!(
        matches!(outcome, PerformOutcome::Unresolved(_)),
        "{outcome:?}"
    );
    assert_eq!(
        dest.action_requests().await,
        3,
        "no re-send after the window"
    );
}

#[tokio::test]
async fn rejection_is_recorded_and_replayed_and_a_new_key_is_a_new_operation() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let dest = MockDestination::builder().start().await;
    dest.script([Behaviour::Reject {
        status: 422,
        reason: "address invalid".into(),
    }]);
    let config = config(SHIP);
    let g = gate(
        sqlite(&dir.path().join("r.db"), &clock).await,
        &config,
        &clock,
        "g",
    );
    let exec = http_executor(&dest);
    let req = g
        .request("t", "K-1", "create_shipment", &json!({"sku": "A"}))
        .unwrap();
    let first = g.perform(&req, &exec, opts()).await.unwrap();
    assert!(
        matches!(first, PerformOutcome::Rejected { .. }),
        "{first:?}"
    );
    let replay = g.perform(&req, &exec, opts()).await.unwrap();
    assert!(
        matches!(replay, PerformOutcome::Replayed(Terminal::Rejected { .. })),
        "{replay:?}"
    );
    assert_eq!(dest.action_requests().await, 1);

    let new_key = g
        .request("t", "K-2", "create_shipment", &json!({"sku": "A"}))
        .unwrap();
    assert!(matches!(
        g.perform(&new_key, &exec, opts()).await.unwrap(),
        PerformOutcome::Confirmed { .. }
    ));
    assert_eq!(dest.action_requests().await, 2);
}

#[tokio::test]
async fn connect_refused_releases_the_claim_and_a_retry_sends() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let config = config(SHIP);
    let g = gate(
        sqlite(&dir.path().join("c.db"), &clock).await,
        &config,
        &clock,
        "g",
    );
    // Nothing listens on this port: connection refused, provably not sent.
    // Held bound (not listening) for the test, so no other test's server
    // can take it meanwhile.
    let closed = tokio::net::TcpSocket::new_v4().unwrap();
    closed.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = closed.local_addr().unwrap().port();
    let refused = move |_ctx| async move {
        let e = reqwest::Client::new()
            .post(format!("http://127.0.0.1:{port}/records"))
            .send()
            .await
            .unwrap_err();
        Err::<handover_router::gate::ExecutorOutcome, _>(ExecutorError::from_reqwest(&e))
    };
    let req = g
        .request("t", "K-1", "create_shipment", &json!({"sku": "A"}))
        .unwrap();
    let outcome = g.perform(&req, &refused, opts()).await.unwrap();
    assert!(
        matches!(outcome, PerformOutcome::NotSent { .. }),
        "{outcome:?}"
    );
    assert_eq!(
        g.ledger().get(req.id()).await.unwrap().unwrap().state,
        State::Planned
    );

    let dest = MockDestination::builder().start().await;
    let retried = g
        .perform(&req, &http_executor(&dest), opts())
        .await
        .unwrap();
    assert!(
        matches!(retried, PerformOutcome::Confirmed { .. }),
        "{retried:?}"
    );
    assert_eq!(dest.action_requests().await, 1);
    let outcomes: Vec<_> = g
        .ledger()
        .attempts(req.id())
        .await
        .unwrap()
        .iter()
        .map(|a| a.outcome)
        .collect();
    assert_eq!(
        outcomes,
        [AttemptOutcome::NotSent, AttemptOutcome::Confirmed]
    );
}

#[tokio::test]
async fn executor_panic_after_dispatch_leaves_the_operation_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let config = config(SHIP);
    let g = gate(
        sqlite(&dir.path().join("p.db"), &clock).await,
        &config,
        &clock,
        "g",
    );
    let panicking = |_ctx| async { panic!("executor bug") };
    let req = g
        .request("t", "K-1", "create_shipment", &json!({"sku": "A"}))
        .unwrap();
    let outcome = g.perform(&req, &panicking, opts()).await.unwrap();
    let PerformOutcome::Unresolved(info) = outcome else {
        panic!("{outcome:?}")
    };
    assert!(info.reason.contains("panicked"), "{}", info.reason);
}

#[tokio::test]
async fn ledger_that_cannot_record_means_nothing_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locked.db");
    let clock = clock();
    let dest = MockDestination::builder().start().await;
    let config = config(SHIP);
    let opts_short = handover_ledger::SqliteOptions {
        clock: std::sync::Arc::new(clock.clone()),
        busy_timeout: Duration::from_millis(100),
        ..handover_ledger::SqliteOptions::default()
    };
    let ledger = std::sync::Arc::new(
        handover_ledger::SqliteLedger::open(&path, opts_short)
            .await
            .unwrap(),
    );
    let g = gate(ledger, &config, &clock, "g");
    // Another process holds SQLite's write lock: the ledger cannot record.
    use sqlx::Connection;
    let mut other = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    sqlx::query("BEGIN EXCLUSIVE")
        .execute(&mut other)
        .await
        .unwrap();

    let req = g
        .request("t", "K-1", "create_shipment", &json!({"sku": "A"}))
        .unwrap();
    let err = g
        .perform(&req, &http_executor(&dest), opts())
        .await
        .unwrap_err();
    assert!(err.is_ledger_unavailable(), "{err}");
    assert_eq!(dest.action_requests().await, 0, "fail closed: nothing sent");

    sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
    assert!(matches!(
        g.perform(&req, &http_executor(&dest), opts())
            .await
            .unwrap(),
        PerformOutcome::Confirmed { .. }
    ));
    assert_eq!(dest.action_requests().await, 1);
}

#[tokio::test]
async fn dispatch_is_recorded_before_the_executor_runs_with_tool_call_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let config = config(SHIP);
    let g = gate(
        sqlite(&dir.path().join("m.db"), &clock).await,
        &config,
        &clock,
        "g",
    );
    let ledger = g.ledger().clone();
    let approval = FixedApproval::new("t", "K-9", "create_shipment");
    let call = ProposedCall {
        tool_call_id: "call_abc".into(),
        action: "create_shipment".into(),
        arguments: json!({"sku": "A"}),
        provider: Some("openai".into()),
        model: Some("gpt".into()),
    };
    let id = g.request_for_call(&call, &approval).unwrap().id().clone();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let seen2 = seen.clone();
    let exec = move |ctx: handover_router::gate::DispatchContext| {
        let (ledger, seen) = (ledger.clone(), seen2.clone());
        async move {
            let rec = ledger.get(&ctx.operation).await.unwrap().unwrap();
            *seen.lock().unwrap() = Some((rec.state.kind(), ctx.destination_key.clone()));
            Ok(handover_router::gate::ExecutorOutcome::Confirmed(
                json!({"ok": true}),
            ))
        }
    };
    g.perform_call(&call, &approval, &exec, opts())
        .await
        .unwrap();
    let (state, key) = seen.lock().unwrap().clone().unwrap();
    assert_eq!(
        state,
        StateKind::Dispatched,
        "durable before the executor ran"
    );
    assert_eq!(key, handover_ledger::destination_key(&id));
    let attempts = g.ledger().attempts(&id).await.unwrap();
    assert_eq!(attempts[0].kind, AttemptKind::Dispatch);
    assert_eq!(attempts[0].outcome, AttemptOutcome::Confirmed);
    assert_eq!(
        attempts[0].metadata.as_ref().unwrap()["tool_call_id"],
        "call_abc"
    );
}

/// An approval that names its parameters refuses a differing proposal
/// before the ledger is asked: nothing claimed, nothing recorded, nothing
/// sent — even though no approval was recorded in the ledger — whatever
/// model proposed first. The approved parameters (any member order, any
/// number spelling) then run once.
#[tokio::test]
async fn an_approval_with_parameters_refuses_others_before_the_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let dest = MockDestination::builder().start().await;
    let g = gate(
        sqlite(&dir.path().join("bound.db"), &clock).await,
        &config(SHIP),
        &clock,
        "gate",
    );
    let exec = http_executor(&dest);
    let approval = FixedApproval::new("t", "K-701", "create_shipment")
        .with_params(json!({"sku": "A", "qty": 1}));
    let call = |id: &str, arguments: serde_json::Value| ProposedCall {
        tool_call_id: id.into(),
        action: "create_shipment".into(),
        arguments,
        provider: Some("fallback".into()),
        model: None,
    };
    let approved = g
        .request(
            "t",
            "K-701",
            "create_shipment",
            &json!({"sku": "A", "qty": 1}),
        )
        .unwrap();
    let changed = g
        .request(
            "t",
            "K-701",
            "create_shipment",
            &json!({"sku": "A", "qty": 2}),
        )
        .unwrap();

    let outcome = g
        .perform_call(
            &call("call_1", json!({"sku": "A", "qty": 2})),
            &approval,
            &exec,
            opts(),
        )
        .await
        .unwrap();
    assert_eq!(
        outcome,
        PerformOutcome::Conflict {
            recorded: approved.fingerprint(),
            requested: changed.fingerprint(),
        }
    );
    assert!(
        g.ledger().get(approved.id()).await.unwrap().is_none(),
        "nothing recorded"
    );
    assert_eq!(dest.action_requests().await, 0);

    let outcome = g
        .perform_call(
            &call("call_2", json!({"qty": 1.0, "sku": "A"})),
            &approval,
            &exec,
            opts(),
        )
        .await
        .unwrap();
    assert!(
        matches!(outcome, PerformOutcome::Confirmed { .. }),
        "{outcome:?}"
    );
    assert_eq!(dest.action_requests().await, 1);
    assert_eq!(dest.records()[0].body["qty"], 1);
    // Another action under the same policy is not approved at all.
    let other = ProposedCall {
        action: "cancel_order".into(),
        ..call("call_3", json!({}))
    };
    let err = g
        .perform_call(&other, &approval, &exec, opts())
        .await
        .unwrap_err();
    assert!(
        matches!(err, handover_router::RouterError::NotApproved { .. }),
        "{err:?}"
    );
}

/// A destination (or a proxy in front of it) that redirects the write: a
/// client following redirects turns the POST into a GET of another page,
/// whose 200 says nothing about the shipment. The gate must not confirm
/// it, and must not send the write again.
#[tokio::test]
async fn a_redirected_write_is_unknown_not_confirmed() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    for status in [302, 303, 307] {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/shipments"))
            .respond_with(ResponseTemplate::new(status).insert_header("location", "/elsewhere"))
            .mount(&server)
            .await;
        // Whatever the redirect leads to answers 200 with JSON.
        Mock::given(path("/elsewhere"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})))
            .mount(&server)
            .await;
        let dir = tempfile::tempdir().unwrap();
        let clock = clock();
        let ledger = sqlite(&dir.path().join("ledger.db"), &clock).await;
        let g = gate(ledger.clone(), &config(SHIP), &clock, "primary");
        let exec = handover_router::gate::HttpJsonExecutor::new(
            reqwest::Client::new(),
            format!("{}/shipments", server.uri()),
        );
        let req = g
            .request(
                "tenant-1",
                "K-redirect",
                "create_shipment",
                &json!({"order": "O-9"}),
            )
            .unwrap();
        let first = g.perform(&req, &exec, opts()).await.unwrap();
        assert!(
            matches!(first, PerformOutcome::Unresolved(_)),
            "{status}: {first:?}"
        );
        let again = g.perform(&req, &exec, opts()).await.unwrap();
        assert!(matches!(again, PerformOutcome::Unresolved(_)), "{again:?}");
        let posts = server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .filter(|r| r.method.as_str() == "POST" && r.url.path() == "/shipments")
            .count();
        assert_eq!(posts, 1, "{status}: the write was sent once");
        let rec = handover_ledger::Ledger::get(&*ledger, req.id())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(rec.state.kind(), StateKind::Unknown, "{status}");
    }
}
