//! A model's tool call as the write gate receives it: arguments are JSON
//! *text* written by a model (or by whoever injected the prompt). What is
//! executed must be exactly one reading of it, the approved one.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use handover::providers::ToolCall;
use handover::{ExecutorOutcome, FixedApproval, PerformOptions, PerformOutcome, ProposedCall};
use serde_json::json;

use crate::support::{App, Backend, confirming, counted};
use handover::router::RouterError;

fn call(args: &str) -> ToolCall {
    ToolCall {
        id: "call_1".into(),
        name: "ship".into(),
        arguments: args.into(),
        ..ToolCall::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_that_cannot_be_read_exactly_are_refused_naming_the_path() {
    let app = App::open(Backend::Memory, "", "").await.unwrap();
    let gate = app.handover.gate();
    let runs = Arc::new(AtomicUsize::new(0));
    let exec = confirming(&runs);
    let cases: [(&str, Option<&str>); 6] = [
        // The exact value of the double 0.1, which a parser reads as 0.1.
        (
            r#"{"amount": 0.1000000000000000055511151231257827}"#,
            Some("params.amount"),
        ),
        // An order number a parser turns into 1.2345678901234568e23.
        (
            r#"{"order": 123456789012345678901234}"#,
            Some("params.order"),
        ),
        (
            r#"{"items": [{"id": 9007199254740993}]}"#,
            Some("params.items[0].id"),
        ),
        // Two readings: serde_json keeps 100, other parsers keep 1.
        (r#"{"qty": 1, "qty": 100}"#, Some("params.qty")),
        (r#"{"a": {"q\u0074y": 1, "qty": 2}}"#, Some("params.a.qty")),
        (r#"{"n": 1e400}"#, None),
    ];
    for (i, (args, field)) in cases.iter().enumerate() {
        let tc = call(args);
        let approval = FixedApproval::new("tenant-1", format!("K-{i}"), "ship");
        let outcome = match ProposedCall::from_tool_call(&tc, Some("p"), Some("m")) {
            Err(e) => Err(e),
            Ok(c) => {
                gate.perform_call(&c, &approval, &exec, PerformOptions::default())
                    .await
            }
        };
        let err = outcome.expect_err(args);
        assert_eq!(err.field(), *field, "{args}: {err}");
        if field.is_none() {
            assert!(
                matches!(err, RouterError::InvalidToolCall(_)),
                "{args}: {err:?}"
            );
        }
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0, "nothing executed");
    assert!(app.all().await.is_empty(), "nothing recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_approval_refuses_other_arguments_whatever_their_spelling() {
    let app = App::open(Backend::Memory, "", "").await.unwrap();
    let gate = app.handover.gate();
    let runs = Arc::new(AtomicUsize::new(0));
    let exec = counted(&runs, |ctx| {
        assert_eq!(ctx.params, json!({"sku": "A", "qty": 1}));
        Ok(ExecutorOutcome::Confirmed(json!({"id": "rec-1"})))
    });
    let approval =
        FixedApproval::new("tenant-1", "K-1", "ship").with_params(json!({"sku": "A", "qty": 1}));
    for args in [
        r#"{"sku": "A", "qty": 2}"#,
        r#"{"sku": "A"}"#,
        r#"{"sku": "A", "qty": 1, "x": null}"#,
    ] {
        let c = ProposedCall::from_tool_call(&call(args), None, None).unwrap();
        let out = gate
            .perform_call(&c, &approval, &exec, PerformOptions::default())
            .await
            .unwrap();
        assert!(
            matches!(out, PerformOutcome::Conflict { .. }),
            "{args}: {out:?}"
        );
    }
    for args in [r#"{"qty": 1.0, "sku": "A"}"#, r#"{"qty":1e0,"sku":"A"}"#] {
        let c = ProposedCall::from_tool_call(&call(args), None, None).unwrap();
        let out = gate
            .perform_call(&c, &approval, &exec, PerformOptions::default())
            .await
            .unwrap();
        assert!(out.is_confirmed(), "{args}: {out:?}");
    }
    // Another tool is not covered by the approval.
    let mut other = call(r#"{"sku": "A", "qty": 1}"#);
    other.name = "refund".into();
    let c = ProposedCall::from_tool_call(&other, None, None).unwrap();
    let err = gate
        .perform_call(&c, &approval, &exec, PerformOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, handover::router::RouterError::NotApproved { .. }),
        "{err:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}
