//! An executor that outlives its lease: the ledger has closed the dispatch
//! (the reconciler proved it absent) when the executor's answer arrives.
//! The caller must not be told the action failed, and the late answer must
//! be kept where a human reviewing the operation sees it. Real SQLite file,
//! real HTTP destination counting its effects, the real reconciler. The
//! same holds for a lookup that finds the record after an operator had
//! decided the operation otherwise.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{AttemptKind, AttemptOutcome, ResolvedAs, StateKind};
use handover_router::gate::{DispatchContext, Executor, PerformOptions};
use handover_router::reconcile::{Lookup, LookupContext, Reconciler};
use handover_testkit::{Behaviour, MockDestination};
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

/// A SQLite ledger file, its clock, the mock destination and a gate.
async fn setup() -> (
    tempfile::TempDir,
    handover_ledger::ManualClock,
    Arc<MockDestination>,
    handover_router::gate::WriteGate,
) {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let dest = Arc::new(MockDestination::builder().start().await);
    let ledger = sqlite(&dir.path().join("l.db"), &clock).await;
    let gate = gate(ledger, &config(LK), &clock, "g");
    (dir, clock, dest, gate)
}

#[tokio::test]
async fn an_answer_after_the_reconciler_rejected_is_not_reported_as_not_done_and_is_kept() {
    let (_dir, clock, dest, gate) = setup().await;
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

/// An operator rejects an unknown operation while the reconciler's lookup
/// runs, and the lookup then finds the record: the decision stands (the
/// ledger never flips a terminal state), but the finding is not a bare
/// "reconciliation failed": it is counted as late and kept in the attempt
/// log, saying the effect may have happened and a human must review it.
#[tokio::test]
async fn a_record_found_after_an_operator_rejected_is_kept_for_review() {
    let (_dir, clock, dest, gate) = setup().await;
    dest.script([Behaviour::ApplyAndDrop]);
    let req = gate
        .request("t", "RACE-1", "lk", &json!({"order": "RACE-1"}))
        .unwrap();
    let first = gate
        .perform(&req, &http_executor(&dest), PerformOptions::default())
        .await
        .unwrap();
    assert_eq!(first.as_str(), "unresolved", "{first:?}");

    // The lookup is the real HTTP one; an operator decides while it runs.
    let http = Arc::new(http_lookup(&dest));
    let g = gate.clone();
    let racing = move |ctx: LookupContext| {
        let (g, http) = (g.clone(), Arc::clone(&http));
        async move {
            let id = ctx.operation.clone();
            g.resolve(
                &id,
                ResolvedAs::Rejected {
                    reason: "customer cancelled".into(),
                },
                "phoned the customer",
                "ops@example.com",
            )
            .await
            .expect("the operator's decision");
            http.lookup(ctx).await
        }
    };
    let reconciler =
        Reconciler::new(gate.clone(), Arc::new(clock.clone())).with_lookup("lk", racing);
    clock.advance(Duration::from_secs(2));
    let pass = reconciler.run_once().await.unwrap();
    assert_eq!(
        (pass.late, pass.failed, pass.confirmed),
        (1, 0, 0),
        "{pass:?}"
    );

    let rec = gate.ledger().get(req.id()).await.unwrap().unwrap();
    assert_eq!(rec.state.kind(), StateKind::Rejected, "the decision stands");
    assert_eq!(dest.effect_count(), 1, "the effect exists");
    let attempts = gate.ledger().attempts(req.id()).await.unwrap();
    let late: Vec<_> = attempts
        .iter()
        .filter(|a| {
            a.metadata
                .as_ref()
                .is_some_and(|m| m["late_report"] == true)
        })
        .collect();
    assert_eq!(late.len(), 1, "{attempts:#?}");
    assert_eq!(
        (late[0].kind, late[0].outcome),
        (AttemptKind::Lookup, AttemptOutcome::Found)
    );
    let evidence = late[0].evidence.as_deref().unwrap();
    assert!(
        evidence.contains("rejected") && evidence.contains("review"),
        "{evidence}"
    );
}
