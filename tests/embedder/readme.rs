//! README's usage example, run against mock providers: the answer names
//! its provider and model, the approval binds the parameters, the lost
//! answer is unresolved, a fallback model's re-proposal under a new
//! tool-call id is refused, a changed proposal is a conflict — and the
//! reconciler from `Handover::reconciler` has the configured lookup.

use handover::ledger::ApproveOutcome;
use handover::{
    ChatRequest, ExecutorError, FixedApproval, Message, PerformOptions, PerformOutcome,
    ProposedCall,
};
use handover_testkit::{Flavor, MockProvider, Reply};

use crate::support::{App, Backend, counted, two_providers};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_usage_runs_as_it_says() {
    let primary = MockProvider::start(Flavor::OpenAi).await;
    let fallback = MockProvider::start(Flavor::DeepSeek).await;
    let approved = serde_json::json!({"order": "O-17", "sku": "KETTLE", "qty": 1});
    primary.script([
        Reply::tool_call("call_oa_1", "create_shipment", approved.clone()),
        Reply::overloaded(),
        Reply::overloaded(),
    ]);
    fallback.script([
        Reply::tool_call(
            "call_ds_2",
            "create_shipment",
            serde_json::json!({"qty": 1, "sku": "KETTLE", "order": "O-17"}),
        ),
        Reply::tool_call(
            "call_ds_3",
            "create_shipment",
            serde_json::json!({"qty": 2, "sku": "KETTLE", "order": "O-17"}),
        ),
    ]);
    let extra = format!(
        r#"{}
[policies.assist]
chain = ["openai", "deepseek"]
[actions.create_shipment]
block = "scope"
[actions.create_shipment.lookup]
visibility_lag = "30s"
url = "http://127.0.0.1:9/records?key={{destination_key}}"
"#,
        two_providers(("openai", &primary), ("deepseek", &fallback))
    );
    let app = App::open(Backend::Sqlite, "", &extra).await.unwrap();
    let (router, gate) = (app.handover.router(), app.handover.gate());

    let req = gate
        .request("customer-42", "K-701", "create_shipment", &approved)
        .unwrap();
    assert_eq!(gate.approve(&req).await.unwrap(), ApproveOutcome::Planned);
    let approval =
        FixedApproval::new("customer-42", "K-701", "create_shipment").with_params(approved.clone());
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let ship = counted(&sent, |_ctx| {
        Err(ExecutorError::maybe_sent(
            "timeout after the request was written",
        ))
    });
    let mut told = Vec::new();
    for _turn in 0..3 {
        let task = router.task("assist").unwrap();
        let request = ChatRequest::new(vec![Message::user("Ship a replacement for order O-17")]);
        let answer = router.chat(&task, &request).await.unwrap();
        for call in &answer.response.tool_calls {
            let call = ProposedCall::from_tool_call(
                call,
                Some(&answer.provider),
                Some(&answer.response.model),
            )
            .unwrap();
            let out = gate
                .perform_call(&call, &approval, &ship, PerformOptions::default())
                .await
                .unwrap();
            told.push((answer.provider.clone(), out));
        }
    }
    assert_eq!(
        sent.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "sent once"
    );
    assert_eq!(told.len(), 3, "{told:?}");
    assert!(
        matches!(&told[0], (p, PerformOutcome::Unresolved(_)) if p == "openai"),
        "{told:?}"
    );
    assert!(
        matches!(&told[1], (p, PerformOutcome::Unresolved(_)) if p == "deepseek"),
        "{told:?}"
    );
    assert!(
        matches!(&told[2], (p, PerformOutcome::Conflict { .. }) if p == "deepseek"),
        "{told:?}"
    );
    let reconciler = app.handover.reconciler();
    assert!(
        format!("{reconciler:?}").contains("create_shipment"),
        "{reconciler:?}"
    );
    app.finish().await;
}
