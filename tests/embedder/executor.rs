//! Executors that misbehave: panics, hangs, garbage. Whatever they do after
//! the dispatch was recorded, the operation is `unknown` and never
//! executed again.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use handover::ledger::StateKind;
use handover::{DispatchContext, ExecutorError, ExecutorOutcome, PerformOptions, PerformOutcome};
use serde_json::json;

use crate::per_backend;
use crate::support::{App, Backend, counted};

const SHIP: &str = "[actions.ship]\ntimeout = \"2s\"\n";

async fn garbage_panics_and_empty_answers_leave_it_unknown(backend: Backend) {
    let Some(app) = App::open(backend, "", SHIP).await else {
        return;
    };
    let gate = app.handover.gate();
    let calls = Arc::new(AtomicUsize::new(0));
    let cases: Vec<(&str, Box<dyn handover::router::gate::Executor>)> = vec![
        (
            "huge-int",
            Box::new(counted(&calls, |_| {
                Ok(ExecutorOutcome::Confirmed(
                    json!({"id": 9_007_199_254_740_993u64}),
                ))
            })),
        ),
        (
            "deep",
            Box::new(counted(&calls, |_| {
                let mut v = json!(1);
                for _ in 0..40 {
                    v = json!([v]);
                }
                Ok(ExecutorOutcome::Confirmed(v))
            })),
        ),
        (
            "big",
            Box::new(counted(&calls, |_| {
                Ok(ExecutorOutcome::Confirmed(json!("x".repeat(70_000))))
            })),
        ),
        (
            "empty-reason",
            Box::new(counted(&calls, |_| {
                Ok(ExecutorOutcome::Rejected {
                    reason: String::new(),
                    evidence: None,
                })
            })),
        ),
        (
            "empty-maybe",
            Box::new(counted(&calls, |_| Err(ExecutorError::maybe_sent("")))),
        ),
        (
            "blank-maybe",
            Box::new(counted(&calls, |_| Err(ExecutorError::maybe_sent(" \n")))),
        ),
        (
            "panic-in-future",
            Box::new({
                let calls = calls.clone();
                move |_ctx: DispatchContext| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    async move {
                        if true {
                            panic!("executor bug")
                        }
                        Ok::<_, ExecutorError>(ExecutorOutcome::Confirmed(json!(1)))
                    }
                }
            }),
        ),
    ];
    for (key, exec) in &cases {
        let req = gate
            .request("tenant-1", key, "ship", &json!({"k": key}))
            .unwrap();
        let before = calls.load(Ordering::SeqCst);
        let first = gate
            .perform(&req, exec.as_ref(), PerformOptions::default())
            .await;
        assert_eq!(calls.load(Ordering::SeqCst), before + 1, "{key}");
        match &first {
            Ok(PerformOutcome::Unresolved(_)) => {}
            // An answer the ledger cannot record is told as such
            // (docs/decisions.md), and recorded unknown at once.
            Err(e) if e.outcome_unknown() && !e.is_ledger_unavailable() => {}
            other => panic!("{key}: expected Unresolved, got {other:?}"),
        }
        let rec = app.record("tenant-1", key).await.unwrap();
        assert_eq!(
            rec.state.kind(),
            StateKind::Unknown,
            "{key}: {first:?} {rec:?}"
        );
        let again = gate
            .perform(&req, exec.as_ref(), PerformOptions::default())
            .await
            .unwrap();
        assert!(
            matches!(again, PerformOutcome::Unresolved(_)),
            "{key}: {again:?}"
        );
        assert_eq!(
            calls.load(Ordering::SeqCst),
            before + 1,
            "{key}: never executed again"
        );
    }
    app.finish().await;
}

/// An executor that panics while making its future (a plain `Fn` that
/// panics before `async`), after the dispatch was recorded: the caller is
/// told `Unresolved`, as for a panic inside the future, not unwound.
async fn a_synchronous_panic_is_unresolved_not_a_crash(backend: Backend) {
    let Some(app) = App::open(backend, "", SHIP).await else {
        return;
    };
    let gate = app.handover.gate().clone();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let req = gate
        .request("tenant-1", "K-panic", "ship", &json!({"k": 1}))
        .unwrap();
    let r2 = req.clone();
    let joined = tokio::spawn(async move {
        let exec = move |_ctx: DispatchContext| -> futures::future::Ready<Result<ExecutorOutcome, ExecutorError>> {
            c.fetch_add(1, Ordering::SeqCst);
            panic!("executor bug before its future")
        };
        gate.perform(&r2, &exec, PerformOptions::default()).await
    })
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let out = joined.expect("perform must not panic").unwrap();
    assert!(matches!(out, PerformOutcome::Unresolved(_)), "{out:?}");
    let rec = app.record("tenant-1", "K-panic").await.unwrap();
    assert_eq!(rec.state.kind(), StateKind::Unknown, "{rec:?}");
    app.finish().await;
}

/// `ExecutorError::not_sent` without evidence still releases the claim (the
/// executor's word is what counts; the log says none was given), at once.
async fn not_sent_without_evidence_releases_the_claim(backend: Backend) {
    let Some(app) = App::open(backend, "", SHIP).await else {
        return;
    };
    let gate = app.handover.gate();
    let req = gate
        .request("tenant-1", "K-refused", "ship", &json!({"k": 1}))
        .unwrap();
    let refused = |_ctx| async { Err::<ExecutorOutcome, _>(ExecutorError::not_sent("")) };
    let out = gate
        .perform(&req, &refused, PerformOptions::default())
        .await
        .unwrap();
    assert!(matches!(out, PerformOutcome::NotSent { .. }), "{out:?}");
    let rec = app.record("tenant-1", "K-refused").await.unwrap();
    assert_eq!(rec.state.kind(), StateKind::Planned, "{rec:?}");
    let ok = |_ctx| async { Ok(ExecutorOutcome::Confirmed(json!({"id": "rec-1"}))) };
    let out = gate
        .perform(&req, &ok, PerformOptions::default())
        .await
        .unwrap();
    assert!(out.is_confirmed(), "claimable again: {out:?}");
    app.finish().await;
}

/// A destination URL may carry a credential (`https://KEY:@api…`, a token
/// in the query or the path): what a transport error records and tells
/// names the host, never the URL.
async fn a_transport_error_records_the_host_not_the_url(backend: Backend) {
    use handover::router::gate::HttpJsonExecutor;
    use handover_testkit::{Behaviour, MockDestination};
    let Some(app) = App::open(backend, "", SHIP).await else {
        return;
    };
    let dest = MockDestination::builder()
        .default_behaviour(Behaviour::ApplyAndDrop)
        .start()
        .await;
    let url = dest
        .records_url()
        .replace("http://", "http://sk_hunter8:hunter9@")
        + "?token=hunter10";
    let exec = HttpJsonExecutor::new(reqwest::Client::new(), url);
    let gate = app.handover.gate();
    let req = gate
        .request("tenant-1", "K-1", "ship", &json!({"sku": "A"}))
        .unwrap();
    let out = gate
        .perform(&req, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(matches!(out, PerformOutcome::Unresolved(_)), "{out:?}");
    assert_eq!(
        dest.effect_count(),
        1,
        "the request reached the destination"
    );
    let id = req.id();
    let told = format!("{out:?}");
    let recorded = serde_json::to_string(&(
        app.handover.ledger().get(id).await.unwrap(),
        app.handover.ledger().attempts(id).await.unwrap(),
    ))
    .unwrap();
    for text in [&told, &recorded] {
        assert!(!text.contains("hunter"), "{text}");
    }
    assert!(
        recorded.contains("127.0.0.1"),
        "the host is named: {recorded}"
    );
    app.finish().await;
}

per_backend!(
    garbage_panics_and_empty_answers_leave_it_unknown,
    a_synchronous_panic_is_unresolved_not_a_crash,
    not_sent_without_evidence_releases_the_claim,
    a_transport_error_records_the_host_not_the_url
);
