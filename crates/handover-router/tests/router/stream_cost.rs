//! A streamed answer's cost reaches its task's budget: charged from the
//! usage the stream reports when it ends (complete, broken after its usage,
//! or whole at a `complete` commit point), so the task's next call is
//! refused before anything is sent once the ceiling is spent. Requests are
//! counted at the mock provider; cost is read from the budget, the store
//! and a real Prometheus recorder.

use std::sync::Arc;

use futures::StreamExt;
use handover_ledger::{MemoryLedger, TaskBudgets, TaskId};
use handover_router::RouterError;
use handover_router::budget::Exhausted;
use handover_router::config::CommitPoint;
use handover_router::route::{FailureReason, RoutedStream, Router, Task};
use handover_testkit::{After, Flavor, Plan, TcpProvider, bodies};
use metrics_exporter_prometheus::PrometheusBuilder;

use crate::support;

use support::chain::hello;

/// The mock's usage chunk reports 16 prompt tokens: at 1,000,000 USD per
/// million input tokens each streamed answer costs 16 USD; the policy's
/// ceiling of 20 USD is spent by two of them.
const PER_STREAM: f64 = 16.0;

fn router(url: &str) -> Router {
    support::chain::router(&format!(
        "[ledger]\nbackend = \"memory\"\n\
         [providers.priced]\nkind = \"openai_compatible\"\nbase_url = \"{url}\"\nmodel = \"m\"\n\
         price_input_per_mtok = 1000000.0\nprice_output_per_mtok = 0.0\n\
         [policies.p]\nchain = [\"priced\"]\ncommit_point = \"first_token\"\n\
         max_cost = 20.0\nmax_requests = 10\ndeadline = \"30s\"\n"
    ))
}

/// A complete streamed answer with its usage chunk and `[DONE]`.
fn streamed() -> Plan {
    Plan::sse(
        bodies::text_stream(Flavor::OpenAi, &["on ", "its way"], true, true),
        After::Close,
    )
}

/// A stream that reports its usage, then breaks (a malformed event).
fn broken_after_usage() -> Plan {
    let mut events = bodies::text_stream(Flavor::OpenAi, &["on ", "its"], false, false);
    events.push(bodies::usage_chunk(Flavor::OpenAi));
    events.push("data: {not json\n\n".to_owned());
    Plan::sse(events, After::Close)
}

/// Reads `stream` to its end: whether it ended with an error.
async fn read(mut stream: RoutedStream) -> bool {
    while let Some(item) = stream.next().await {
        if item.is_err() {
            assert!(stream.next().await.is_none(), "the error ends the stream");
            return true;
        }
    }
    false
}

fn refused_for_cost(e: &RouterError) -> bool {
    matches!(
        e.task_failure().map(|f| &f.reason),
        Some(FailureReason::Budget(Exhausted::Cost))
    )
}

#[tokio::test]
async fn streams_of_a_local_task_spend_its_cost_ceiling() {
    let mock = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    mock.set_default(streamed());
    let r = router(mock.base_url());
    let task = r.task("p").unwrap();
    let stream = r.chat_stream(&task, &hello()).await.unwrap();
    assert_eq!(
        task.budget().spent().cost,
        0.0,
        "nothing known before the usage"
    );
    assert!(!read(stream).await);
    assert_eq!(task.budget().spent().cost, PER_STREAM);
    two_streams_then_refused_after_one(&mock, &r, &task).await;
}

/// The task has spent one stream already: one more, then refusals.
async fn two_streams_then_refused_after_one(mock: &TcpProvider, r: &Router, task: &Task) {
    let stream = r.chat_stream(task, &hello()).await.unwrap();
    assert!(!read(stream).await);
    assert_eq!(task.budget().spent().cost, 2.0 * PER_STREAM);
    let plain = r.chat(task, &hello()).await.unwrap_err();
    assert!(refused_for_cost(&plain), "{plain}");
    let streamed = r.chat_stream(task, &hello()).await.unwrap_err();
    assert!(refused_for_cost(&streamed), "{streamed}");
    assert_eq!(mock.requests(), 2, "an exhausted task sends nothing");
}

#[tokio::test]
async fn streams_of_a_shared_task_are_charged_in_the_store_before_they_end() {
    let mock = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    mock.set_default(streamed());
    let r = router(mock.base_url());
    let store: Arc<dyn TaskBudgets> = Arc::new(MemoryLedger::default());
    let id = TaskId::new("client-a", "job-1").unwrap();

    // Each call joins the task anew, as each gateway request does.
    let first = r.join_task("p", store.clone(), &id).await.unwrap();
    assert!(!read(r.chat_stream(&first, &hello()).await.unwrap()).await);
    let view = store.task_budget(&id).await.unwrap().unwrap();
    assert_eq!(view.cost, PER_STREAM, "in the store once the stream ended");
    assert_eq!(first.budget().task_budget().unwrap().cost, PER_STREAM);

    let second = r.join_task("p", store.clone(), &id).await.unwrap();
    assert!(!read(r.chat_stream(&second, &hello()).await.unwrap()).await);
    let view = store.task_budget(&id).await.unwrap().unwrap();
    assert_eq!(view.cost, 2.0 * PER_STREAM);
    assert_eq!(view.requests, 2, "the charge gave no reservation back");

    let third = r.join_task("p", store.clone(), &id).await.unwrap();
    let plain = r.chat(&third, &hello()).await.unwrap_err();
    assert!(refused_for_cost(&plain), "{plain}");
    let fourth = r.join_task("p", store.clone(), &id).await.unwrap();
    let streamed = r.chat_stream(&fourth, &hello()).await.unwrap_err();
    assert!(refused_for_cost(&streamed), "{streamed}");
    assert_eq!(mock.requests(), 2, "an exhausted task sends nothing");
}

#[tokio::test]
async fn a_stream_broken_after_its_usage_is_charged() {
    let mock = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    mock.script([broken_after_usage()]);
    mock.set_default(streamed());
    let r = router(mock.base_url());
    let task = r.task("p").unwrap();
    assert!(
        read(r.chat_stream(&task, &hello()).await.unwrap()).await,
        "broken"
    );
    assert_eq!(task.budget().spent().cost, PER_STREAM);
    two_streams_then_refused_after_one(&mock, &r, &task).await;
}

#[tokio::test]
async fn a_stream_committed_complete_is_charged_with_its_answer() {
    let mock = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    mock.set_default(streamed());
    let r = router(mock.base_url());
    let task = r
        .task("p")
        .unwrap()
        .with_commit_point(CommitPoint::Complete);
    let stream = r.chat_stream(&task, &hello()).await.unwrap();
    assert!(stream.is_complete());
    assert_eq!(
        task.budget().spent().cost,
        PER_STREAM,
        "charged at the commit"
    );
    assert!(!read(stream).await);
    assert_eq!(task.budget().spent().cost, PER_STREAM, "and only once");
    two_streams_then_refused_after_one(&mock, &r, &task).await;

    // Under a shared budget too: the store has it when the stream opens.
    let mock = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    mock.set_default(streamed());
    let r = router(mock.base_url());
    let store: Arc<dyn TaskBudgets> = Arc::new(MemoryLedger::default());
    let id = TaskId::new("client-a", "job-2").unwrap();
    let joined = || async {
        r.join_task("p", store.clone(), &id)
            .await
            .unwrap()
            .with_commit_point(CommitPoint::Complete)
    };
    let first = joined().await;
    let stream = r.chat_stream(&first, &hello()).await.unwrap();
    let view = store.task_budget(&id).await.unwrap().unwrap();
    assert_eq!(view.cost, PER_STREAM);
    assert!(!read(stream).await);
    let view = store.task_budget(&id).await.unwrap().unwrap();
    assert_eq!(view.cost, PER_STREAM, "and only once");
}

#[test]
fn a_streamed_answer_is_counted_in_the_cost_metric() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let mock = TcpProvider::start(Flavor::OpenAi).await.unwrap();
                mock.set_default(streamed());
                let r = router(mock.base_url());
                let stream = r.chat_stream(&r.task("p").unwrap(), &hello()).await;
                assert!(!read(stream.unwrap()).await);
                let complete = r
                    .task("p")
                    .unwrap()
                    .with_commit_point(CommitPoint::Complete);
                assert!(!read(r.chat_stream(&complete, &hello()).await.unwrap()).await);
                assert_eq!(mock.requests(), 2);
            });
    });
    let text = handle.render();
    let line = "handover_provider_cost_micro_usd_total{provider=\"priced\"} ";
    let value = text
        .lines()
        .find_map(|l| l.strip_prefix(line)?.parse::<f64>().ok());
    assert_eq!(value, Some(2.0 * PER_STREAM * 1e6), "{text}");
}
