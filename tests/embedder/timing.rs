//! Time in the write gate, under paused tokio time (memory ledger, which
//! runs on no other thread): an executor that never answers, and one that
//! answers within its timeout but after the claim's lease.

use std::sync::Arc;
use std::time::Duration;

use handover::ledger::{StateKind, Timestamp};
use handover::{
    Config, DispatchContext, ExecutorOutcome, HandoverOptions, PerformOptions, PerformOutcome,
};
use serde_json::json;

use crate::support::PROVIDERS;

/// A clock that follows tokio's (paused) time, so leases pass as the
/// executor waits.
#[derive(Debug)]
struct TokioClock(tokio::time::Instant, i64);

impl handover::ledger::Clock for TokioClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(self.1 + i64::try_from(self.0.elapsed().as_millis()).unwrap())
    }
}

async fn open(actions: &str) -> handover::Handover {
    let text = format!("[ledger]\nbackend = \"memory\"\n{PROVIDERS}\n{actions}");
    let config = Config::parse(&text, &|_| None).unwrap();
    HandoverOptions::new()
        .clock(Arc::new(TokioClock(
            tokio::time::Instant::now(),
            1_700_000_000_000,
        )))
        .env(|_| None)
        .open(&config)
        .await
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn an_executor_that_never_answers_is_unresolved_at_its_timeout() {
    let h = open("[actions.ship]\ntimeout = \"3s\"\n").await;
    let req = h
        .gate()
        .request("tenant-1", "K-1", "ship", &json!({"n": 1}))
        .unwrap();
    let hang = |_ctx: DispatchContext| {
        futures::future::pending::<Result<ExecutorOutcome, handover::ExecutorError>>()
    };
    let started = tokio::time::Instant::now();
    let out = h
        .gate()
        .perform(&req, &hang, PerformOptions::default())
        .await
        .unwrap();
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    let PerformOutcome::Unresolved(info) = out else {
        panic!("{out:?}")
    };
    assert!(info.reason.contains("timed out"), "{info:?}");
}

#[tokio::test(start_paused = true)]
async fn an_answer_within_the_timeout_is_recorded_whatever_the_lease() {
    for actions in [
        // The shortest lease the configuration allows: the timeout itself
        // (a shorter one is refused at load).
        "[actions.ship]\nlease = \"10s\"\ntimeout = \"10s\"\n",
        // The defaults: a 30 s lease and a 30 s executor timeout.
        "",
    ] {
        let h = open(actions).await;
        let req = h
            .gate()
            .request("tenant-1", "K-1", "ship", &json!({"n": 1}))
            .unwrap();
        let answer_at = if actions.is_empty() { 29_990 } else { 9_990 };
        let slow = move |_ctx: DispatchContext| async move {
            #[allow(clippy::disallowed_methods)] // paused time: the destination takes this long
            tokio::time::sleep(Duration::from_millis(answer_at)).await;
            Ok(ExecutorOutcome::Confirmed(json!({"id": "rec-1"})))
        };
        let out = h
            .gate()
            .perform(&req, &slow, PerformOptions::default())
            .await;
        assert!(
            matches!(&out, Ok(o) if o.is_confirmed()),
            "{actions:?}: {out:?}"
        );
        let rec = h.ledger().get(req.id()).await.unwrap().unwrap();
        assert_eq!(rec.state.kind(), StateKind::Confirmed, "{actions:?}");
    }
}

/// A perform under a task whose deadline has passed: the executor would get
/// no time at all, so nothing may be claimed or sent (a dispatch recorded
/// and timed out at once would be an `unknown` for an operator, with the
/// request maybe half-written).
#[tokio::test(start_paused = true)]
async fn a_spent_task_budget_sends_nothing() {
    let h = open("[policies.short]\nchain = [\"local\"]\ndeadline = \"1s\"\n[actions.ship]\ntimeout = \"10s\"\n").await;
    let task = h.router().task("short").unwrap();
    tokio::time::advance(Duration::from_secs(2)).await;
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let exec = crate::support::confirming(&calls);
    let req = h
        .gate()
        .request("tenant-1", "K-1", "ship", &json!({"n": 1}))
        .unwrap();
    let opts = PerformOptions {
        budget: Some(task.budget()),
        metadata: None,
    };
    let err = h.gate().perform(&req, &exec, opts).await.unwrap_err();
    let failure = err.task_failure().expect("the task's failure");
    assert!(
        matches!(
            failure.reason,
            handover::router::route::FailureReason::Budget(_)
        ),
        "{failure:?}"
    );
    assert!(
        !err.outcome_unknown() && !err.is_ledger_unavailable(),
        "{err:?}"
    );
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "nothing sent"
    );
    let rec = h.ledger().get(req.id()).await.unwrap();
    // What the ledger knows is still answered: a confirmed operation replays.
    let done = h
        .gate()
        .request("tenant-1", "K-2", "ship", &json!({"n": 2}))
        .unwrap();
    h.gate()
        .perform(&done, &exec, PerformOptions::default())
        .await
        .unwrap();
    let replayed = h.gate().perform(&done, &exec, opts).await.unwrap();
    assert!(
        matches!(replayed, PerformOutcome::Replayed(_)),
        "{replayed:?}"
    );
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(
        rec.as_ref().is_none_or(|r| r.dispatch_count == 0),
        "{rec:?}"
    );
}
