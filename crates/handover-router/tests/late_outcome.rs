//! An executor that outlives its lease: the ledger has closed the dispatch
//! (the reconciler proved it absent) when the executor's answer arrives.
//! The caller must not be told the action failed, and the late answer must
//! be kept where a human reviewing the operation sees it. Real SQLite file,
//! real HTTP destination counting its effects, the real reconciler.

mod support;

use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{AttemptKind, AttemptOutcome, StateKind};
use handover_router::gate::{DispatchContext, Executor, PerformOptions};
use handover_router::reconcile::Reconciler;
use handover_testkit::MockDestination;
use serde_json::json;
use support::*;

const LK: &str = r#"
[actions.lk]
lease = "3s"
timeout = "2s"
[actions.lk.lookup]
visibility_lag = "5s"
check_every = "1s"
max_check_every = "2s"
"#;

#[tokio::test]
async fn an_answer_after_the_reconciler_rejected_is_not_reported_as_not_done_and_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let dest = Arc::new(MockDestination::builder().start().await);
    let gate = gate(
        sqlite(&dir.path().join("l.db"), &clock).await,
        &config(LK),
        &clock,
        "g",
    );
    let reconciler = Arc::new(
        Reconciler::new(gate.clone(), Arc::new(clock.clone()))
            .with_lookup("lk", http_lookup(&dest)),
    );
    let req = gate
        .request("t", "SLOW-2", "lk", &json!({"order": "SLOW-2"}))
        .unwrap();

    // The executor stalls past its lease (the ledger's clock moves on while
    // it runs): the reconciler finds nothing after the lag and rejects;
    // only then does the executor's request reach the destination.
    let (c, r, d) = (clock.clone(), Arc::clone(&reconciler), Arc::clone(&dest));
    let g = gate.clone();
    let slow = move |ctx: DispatchContext| {
        let (clock, reconciler, dest) = (c.clone(), Arc::clone(&r), Arc::clone(&d));
        let g2 = g.clone();
        async move {
            clock.advance(Duration::from_secs(20));
            // Any read records the lapsed lease (`Reconciler::run` lists
            // after each pass); the operation is then unknown.
            let now = g2.ledger().get(&ctx.operation).await.unwrap().unwrap();
            assert_eq!(now.state.kind(), StateKind::Unknown);
            let pass = reconciler.run_once().await.expect("reconcile");
            assert_eq!(pass.rejected, 1, "the lookup proved it absent: {pass:?}");
            http_executor(&dest).execute(ctx).await
        }
    };
    let err = gate
        .perform(&req, &slow, PerformOptions::default())
        .await
        .expect_err("a late answer cannot be recorded");
    assert!(
        err.outcome_unknown(),
        "told as unknown, never as failed: {err}"
    );
    assert_eq!(dest.effect_count(), 1, "the effect exists");

    let rec = gate.ledger().get(req.id()).await.unwrap().unwrap();
    assert_eq!(
        rec.state.kind(),
        StateKind::Rejected,
        "a decided operation stays decided"
    );
    let attempts = gate.ledger().attempts(req.id()).await.unwrap();
    let late: Vec<_> = attempts
        .iter()
        .filter(|a| {
            a.metadata
                .as_ref()
                .is_some_and(|m| m["late_report"] == true)
        })
        .collect();
    assert_eq!(late.len(), 1, "the late answer is kept: {attempts:#?}");
    let kept = late[0];
    assert_eq!(
        (kept.kind, kept.outcome),
        (AttemptKind::Dispatch, AttemptOutcome::Confirmed)
    );
    let evidence = kept.evidence.as_deref().unwrap();
    assert!(
        evidence.contains("rejected") && evidence.contains("review"),
        "names the state it is in and asks for review: {evidence}"
    );
    let record = &dest.records()[0];
    assert_eq!(
        kept.metadata.as_ref().unwrap()["result"]["id"],
        json!(record.id),
        "the destination's answer is kept with it"
    );
}
