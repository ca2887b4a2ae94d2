//! A model's tool call as the write gate receives it: arguments are JSON
//! *text* written by a model (or by whoever injected the prompt). What is
//! executed must be exactly one reading of it, the approved one.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use handover::providers::ToolCall;
use handover::{
    DispatchContext, ExecutorOutcome, FixedApproval, PerformOptions, PerformOutcome, ProposedCall,
};
use serde_json::json;

use crate::support::{App, Backend};

fn call(args: &str) -> ToolCall {
    ToolCall {
        id: "call_1".into(),
        name: "ship".into(),
        arguments: args.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_approval_refuses_other_arguments_whatever_their_spelling() {
    let app = App::open(Backend::Memory, "", "").await.unwrap();
    let gate = app.handover.gate();
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let exec = move |ctx: DispatchContext| {
        r.fetch_add(1, Ordering::SeqCst);
        assert_eq!(ctx.params, json!({"sku": "A", "qty": 1}));
        async { Ok(ExecutorOutcome::Confirmed(json!({"id": "rec-1"}))) }
    };
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
