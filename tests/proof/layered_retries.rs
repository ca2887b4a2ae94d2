//! Scenario 11: layered retries do not multiply. The budget belongs to the
//! user task: every attempt, retry, backoff and provider switch of that
//! task draws from it, however many layers retry above the router. An
//! application that retries by reusing its `Task` cannot exceed the
//! policy's `max_requests`; one that makes a new task per retry gets a new
//! budget each time — which is why the budget is per *user* task, and the
//! application must reuse the task for retries of the same request.

use handover::providers::ErrorClass;
use handover::router::budget::Exhausted;
use handover::router::route::{AttemptResult, FailureReason};
use handover_testkit::{Flavor, Plan, TcpProvider, bodies};

use crate::support::*;

per_backend! {
    #[tokio::test] an_application_retrying_the_same_task_sends_at_most_the_budget,
    #[tokio::test] a_new_task_per_retry_gets_a_new_budget_each_time,
}

const APP_RETRIES: usize = 3;
const MAX_REQUESTS: usize = 3;

const TIMEOUTS: &str =
    "connect = \"1s\"\nfirst_byte = \"10s\"\nfirst_token = \"5s\"\nidle = \"5s\"\ntotal = \"60s\"";

async fn failing_providers() -> (TcpProvider, TcpProvider) {
    let server_error = Plan::json(
        500,
        &bodies::error("The server had an error.", Some("server_error"), None),
    );
    let primary = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    let fallback = TcpProvider::start(Flavor::DeepSeek).await.unwrap();
    primary.set_default(server_error.clone());
    fallback.set_default(server_error);
    (primary, fallback)
}

/// Both providers answer 500 to everything. The router retries each
/// provider (server errors are retryable) and falls back; the application
/// retries the whole call three times, reusing its task. At most
/// `max_requests` requests reach the providers in total.
pub async fn an_application_retrying_the_same_task_sends_at_most_the_budget(run: Run) {
    let store = run.store().await;
    tokio::time::pause(); // backoff sleeps in virtual time
    let (primary, fallback) = failing_providers().await;
    let config = config(
        primary.base_url(),
        fallback.base_url(),
        &format!("max_requests = {MAX_REQUESTS}"),
        TIMEOUTS,
        "",
    );
    let router = router(&config);

    let task = router.task("default").unwrap();
    let mut failures = Vec::new();
    for _ in 0..APP_RETRIES {
        let err = router.chat(&task, &user_turn()).await.unwrap_err();
        failures.push(err.task_failure().expect("a task failure").clone());
    }

    let sent = primary.requests() + fallback.requests();
    assert_eq!(sent, MAX_REQUESTS, "three layers of retries, one budget");
    assert_eq!(task.budget().requests_sent() as usize, MAX_REQUESTS);
    // The first call spent the budget on real attempts...
    let first: Vec<_> = failures[0]
        .attempts
        .iter()
        .filter(|a| a.sent)
        .map(|a| a.result)
        .collect();
    assert_eq!(
        first,
        vec![AttemptResult::Failed(ErrorClass::ServerError); MAX_REQUESTS]
    );
    // ...and the application's retries were refused before sending anything.
    for retry in &failures[1..] {
        assert_eq!(retry.reason, FailureReason::Budget(Exhausted::Requests));
        assert!(retry.attempts.iter().all(|a| !a.sent), "{retry:?}");
    }

    tokio::time::resume();
    run.score.task(false);
    run.settle(&store, None).await;
}

/// The same application, but it starts a new task for each retry: each
/// task has its own budget, so the requests multiply by the number of
/// application retries. The budget is per user task — reuse it.
pub async fn a_new_task_per_retry_gets_a_new_budget_each_time(run: Run) {
    let store = run.store().await;
    tokio::time::pause();
    let (primary, fallback) = failing_providers().await;
    let config = config(
        primary.base_url(),
        fallback.base_url(),
        &format!("max_requests = {MAX_REQUESTS}"),
        TIMEOUTS,
        "",
    );
    let router = router(&config);

    for _ in 0..APP_RETRIES {
        let task = router.task("default").unwrap();
        let err = router.chat(&task, &user_turn()).await.unwrap_err();
        assert!(err.task_failure().is_some());
        assert_eq!(task.budget().requests_sent() as usize, MAX_REQUESTS);
    }

    let sent = primary.requests() + fallback.requests();
    assert_eq!(
        sent,
        APP_RETRIES * MAX_REQUESTS,
        "a new task per retry multiplies the requests"
    );

    tokio::time::resume();
    run.score.task(false);
    run.settle(&store, None).await;
}
