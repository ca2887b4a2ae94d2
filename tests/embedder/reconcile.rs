//! The reconciler with the HTTP lookup the config declares and with an
//! application `Lookup`, against the mock destination on the ledger's
//! clock: a lost confirmation is confirmed once the record is visible, a
//! record with other parameters goes to review, an effect that never
//! happened is rejected once the visibility lag has passed — and nothing is
//! ever sent twice.

use std::sync::Arc;
use std::time::Duration;

use handover::ledger::{Owner, State, StateKind, Terminal};
use handover::router::gate::HttpJsonExecutor;
use handover::router::reconcile::{FoundRecord, LookupContext};
use handover::{DispatchContext, ExecutorError, ExecutorOutcome, PerformOptions, PerformOutcome};
use handover_testkit::{Behaviour, MockDestination};
use serde_json::json;

use crate::per_backend;
use crate::support::{App, Backend, SENTINEL, executor};

fn lookup_config(dest: &MockDestination) -> String {
    format!(
        r#"
[actions.ship]
timeout = "2s"
[actions.ship.lookup]
visibility_lag = "30s"
check_every = "10s"
url = "{}/records?key={{destination_key}}"
records = "/records"
[actions.ship.lookup.headers]
Authorization = {{ env = "DEST_TOKEN", prefix = "Bearer " }}
[actions.ship.lookup.match]
sku = "/record/sku"
n = "/record/n"
"#,
        dest.uri()
    )
}

async fn the_configured_http_lookup_resolves_lost_answers(backend: Backend) {
    let dest_clock = Arc::new(handover::ledger::ManualClock::new(
        handover::ledger::Timestamp::from_millis(crate::support::T0),
    ));
    let dest = MockDestination::builder()
        .visibility_lag(Duration::from_secs(30))
        .clock(dest_clock.clone())
        .start()
        .await;
    let Some(app) = App::open(backend, "", &lookup_config(&dest)).await else {
        return;
    };
    let tick = |d: Duration| {
        app.clock.advance(d);
        dest_clock.advance(d);
    };
    let gate = app.handover.gate();
    let exec = executor(&dest);
    let params = json!({"sku": "A", "n": 1});
    // 1: applied, answer lost.  2: applied with other parameters, lost.
    // 3: never applied, answer lost.
    dest.script([Behaviour::ApplyAndDrop]);
    let r1 = gate.request("tenant-1", "K-1", "ship", &params).unwrap();
    let o1 = gate
        .perform(&r1, &exec, PerformOptions::default())
        .await
        .unwrap();
    let PerformOutcome::Unresolved(info) = o1 else {
        panic!("{o1:?}")
    };
    assert_eq!(info.owner, Owner::Reconciler);
    dest.script([Behaviour::ApplyAndDrop]);
    let r2 = gate.request("tenant-1", "K-2", "ship", &params).unwrap();
    let url = dest.records_url();
    let tampered = move |ctx: DispatchContext| {
        let exec = HttpJsonExecutor::new(reqwest::Client::new(), url.clone())
            .with_reference_field("reference");
        let mut ctx = ctx;
        ctx.params["n"] = json!(99);
        handover::router::gate::Executor::execute(&exec, ctx)
    };
    let o2 = gate
        .perform(&r2, &tampered, PerformOptions::default())
        .await
        .unwrap();
    assert!(matches!(o2, PerformOutcome::Unresolved(_)), "{o2:?}");
    dest.script([Behaviour::FailWithoutApplying(503)]);
    let r3 = gate.request("tenant-1", "K-3", "ship", &params).unwrap();
    let o3 = gate
        .perform(&r3, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(matches!(o3, PerformOutcome::Unresolved(_)), "{o3:?}");
    assert_eq!(dest.effect_count(), 2);

    let reconciler = app.handover.reconciler();
    assert_eq!(
        reconciler.run_once().await.unwrap().checked,
        0,
        "nothing due yet"
    );
    tick(Duration::from_secs(10));
    let pass = reconciler.run_once().await.unwrap();
    assert_eq!(
        (pass.checked, pass.still_unknown),
        (3, 3),
        "{pass:?}: not visible yet, not proof"
    );
    tick(Duration::from_secs(25));
    let pass = reconciler.run_once().await.unwrap();
    assert_eq!(
        (pass.confirmed, pass.diverged, pass.rejected),
        (1, 1, 1),
        "{pass:?}"
    );
    assert_eq!(
        dest.lookup_requests().await,
        6,
        "one lookup per operation per due pass"
    );
    let rec2 = app.record("tenant-1", "K-2").await.unwrap();
    let State::Unknown(info2) = &rec2.state else {
        panic!("{rec2:?}")
    };
    assert!(info2.diverged && info2.owner == Owner::Review, "{info2:?}");
    assert!(!format!("{rec2:?}").contains(SENTINEL));
    for a in app.handover.ledger().attempts(r2.id()).await.unwrap() {
        assert!(!format!("{a:?}").contains(SENTINEL), "{a:?}");
    }
    // Every retry is answered from the ledger.
    let again = gate
        .perform(&r1, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(again.is_confirmed(), "{again:?}");
    let again = gate
        .perform(&r3, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(
        matches!(again, PerformOutcome::Replayed(Terminal::Rejected { .. })),
        "{again:?}"
    );
    let again = gate
        .perform(&r2, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(matches!(again, PerformOutcome::Unresolved(_)), "{again:?}");
    assert_eq!(dest.action_requests().await, 3, "nothing re-sent");
    app.finish().await;
}

/// `ship` with an application lookup (registered per test) whose records
/// are visible at once.
const LOOKUP_LAG_1S: &str = "[actions.ship]\ntimeout = \"2s\"\n[actions.ship.lookup]\nvisibility_lag = \"1s\"\ncheck_every = \"10s\"\n";

/// Performs `key` with an executor whose answer is lost: unknown, owned by
/// the reconciler.
async fn lose(app: &App, key: &str) -> handover::OperationRequest {
    let gate = app.handover.gate();
    let lost = |_ctx| async { Err::<ExecutorOutcome, _>(ExecutorError::maybe_sent("reset")) };
    let r = gate
        .request("tenant-1", key, "ship", &json!({"n": 1}))
        .unwrap();
    let out = gate
        .perform(&r, &lost, PerformOptions::default())
        .await
        .unwrap();
    assert!(matches!(out, PerformOutcome::Unresolved(_)), "{out:?}");
    r
}

async fn an_application_lookup_that_fails_proves_nothing(backend: Backend) {
    let Some(app) = App::open(backend, "", LOOKUP_LAG_1S).await else {
        return;
    };
    let r = lose(&app, "K-1").await;
    let failing =
        |_ctx: LookupContext| async { Err::<Vec<FoundRecord>, _>("destination 503".to_owned()) };
    let reconciler = app.handover.reconciler().with_lookup("ship", failing);
    app.clock.advance(Duration::from_secs(11));
    let pass = reconciler.run_once().await.unwrap();
    assert_eq!((pass.checked, pass.still_unknown), (1, 1), "{pass:?}");
    let rec = app.record("tenant-1", "K-1").await.unwrap();
    assert_eq!(rec.state.kind(), StateKind::Unknown, "{rec:?}");
    let lookups = app.handover.ledger().attempts(r.id()).await.unwrap();
    assert!(
        lookups
            .iter()
            .any(|a| a.kind == handover::ledger::AttemptKind::Lookup),
        "the failed lookup is on record: {lookups:?}"
    );
    app.finish().await;
}

/// A lookup that panics for one operation is a failed lookup for that one
/// (it proves nothing); the pass goes on with the others and returns.
async fn a_panicking_lookup_fails_only_its_operation(backend: Backend) {
    let Some(app) = App::open(backend, "", LOOKUP_LAG_1S).await else {
        return;
    };
    for key in ["K-1", "K-2"] {
        lose(&app, key).await;
    }
    let lookup = |ctx: LookupContext| async move {
        if ctx.operation.key.as_str() == "K-1" {
            panic!("lookup bug")
        }
        Ok::<Vec<FoundRecord>, String>(vec![])
    };
    let reconciler = app.handover.reconciler().with_lookup("ship", lookup);
    app.clock.advance(Duration::from_secs(11));
    let pass = reconciler.run_once().await.expect("the pass survives");
    assert_eq!((pass.checked, pass.rejected), (2, 1), "{pass:?}");
    let k1 = app.record("tenant-1", "K-1").await.unwrap();
    assert_eq!(k1.state.kind(), StateKind::Unknown, "{k1:?}");
    let k2 = app.record("tenant-1", "K-2").await.unwrap();
    assert_eq!(k2.state.kind(), StateKind::Rejected, "{k2:?}");
    app.finish().await;
}

per_backend!(
    the_configured_http_lookup_resolves_lost_answers,
    an_application_lookup_that_fails_proves_nothing,
    a_panicking_lookup_fails_only_its_operation
);
