//! The router as an embedder uses it: one task's budget across retries,
//! fallback and processes (counted at the mock providers), and the API key
//! from the environment never in a Debug, an error or a result.

use std::sync::Arc;

use handover::ledger::TaskId;
use handover::router::RouterError;
use handover::{ChatRequest, Config, HandoverOptions, Message};
use handover_testkit::{Flavor, MockProvider, Reply};

use crate::support::{App, Backend, SENTINEL, test_env, two_providers};

fn providers(primary: &MockProvider, fallback: &MockProvider, max_requests: u32) -> String {
    let entries = two_providers(("primary", primary), ("fallback", fallback));
    format!(
        r#"{entries}
[policies.task]
chain = ["primary", "fallback"]
deadline = "30s"
max_requests = {max_requests}
max_attempts_per_provider = 5
[policies.task.backoff]
initial = "1ms"
max = "2ms"
jitter = false
[policies.task.on]
server_error = "retry"
overloaded = "next"
"#
    )
}

fn no_leak(what: &str, text: &str) {
    assert!(!text.contains(SENTINEL), "{what} shows the API key: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_budget_across_retries_fallback_and_processes() {
    let primary = MockProvider::start(Flavor::OpenAi).await;
    let fallback = MockProvider::start(Flavor::DeepSeek).await;
    primary.set_default(Reply::server_error());
    fallback.set_default(Reply::server_error());
    let app = App::open(Backend::Sqlite, "", &providers(&primary, &fallback, 4))
        .await
        .unwrap();
    let other = app.reopen().await;
    let req = ChatRequest::new(vec![Message::user("hello")]);
    let id = TaskId::new("tenant-1", "refund-1042").unwrap();
    let mut errors = Vec::new();
    for h in [&app.handover, &other, &app.handover] {
        let store: Arc<dyn handover::ledger::TaskBudgets> = h.ledger().clone();
        let task = h.router().join_task("task", store, &id).await.unwrap();
        let err = h.router().chat(&task, &req).await.unwrap_err();
        no_leak("the task failure", &format!("{err} {err:?}"));
        errors.push(err);
    }
    let sent = primary.requests().await + fallback.requests().await;
    assert_eq!(
        sent, 4,
        "max_requests = 4 for the one task, across both processes"
    );
    assert!(
        errors.iter().all(|e| e.task_failure().is_some()),
        "{errors:?}"
    );
    // The key went to the providers, and nowhere else.
    let auth = primary.received().await[0]
        .headers
        .get("authorization")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(auth, format!("Bearer {SENTINEL}"));
    drop(other);
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_of_every_public_handle_hides_the_key() {
    let primary = MockProvider::start(Flavor::OpenAi).await;
    let fallback = MockProvider::start(Flavor::DeepSeek).await;
    primary.script([Reply::text("hi")]);
    let dest = handover_testkit::MockDestination::builder().start().await;
    let extra = format!(
        "{}\n[actions.ship.lookup]\nvisibility_lag = \"30s\"\nurl = \"{}/records?key={{destination_key}}\"\n[actions.ship.lookup.headers]\nAuthorization = {{ env = \"DEST_TOKEN\", prefix = \"Bearer \" }}\n[telemetry]\notlp_endpoint = \"http://127.0.0.1:9\"\n[telemetry.headers]\nauthorization = {{ env = \"DEST_TOKEN\", prefix = \"Bearer \" }}\n",
        providers(&primary, &fallback, 4),
        dest.uri()
    );
    let app = App::open(Backend::Memory, "", &extra).await.unwrap();
    let h = &app.handover;
    no_leak("Config", &format!("{:?}", h.config()));
    no_leak("Handover", &format!("{h:?}"));
    no_leak("Router", &format!("{:?}", h.router()));
    no_leak("WriteGate", &format!("{:?}", h.gate()));
    no_leak("Reconciler", &format!("{:?}", h.reconciler()));
    no_leak(
        "HandoverOptions",
        &format!("{:?}", HandoverOptions::new().env(|v| test_env(v, None))),
    );
    for (name, p) in h.config().providers() {
        no_leak(name, &format!("{p:?}"));
    }
    no_leak("telemetry", &format!("{:?}", h.config().telemetry()));
    no_leak("actions", &format!("{:?}", h.config().actions()));
    let lookups =
        handover::router::reconcile::HttpLookup::from_config(h.config(), &|v| test_env(v, None))
            .unwrap();
    no_leak("HttpLookup", &format!("{lookups:?}"));
    let task = h.router().task("task").unwrap();
    no_leak("Task", &format!("{task:?}"));
    let done = h
        .router()
        .chat(&task, &ChatRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap();
    no_leak("Completion", &format!("{done:?}"));
    // A provider that echoes the key back in its error.
    primary.script([Reply::status(401, serde_json::json!({"error": {"message": format!("Incorrect API key provided: {SENTINEL}"), "type": "invalid_request_error"}}))]);
    fallback.script([Reply::status(
        401,
        serde_json::json!({"error": {"message": format!("bad key {SENTINEL}")}}),
    )]);
    let task = h.router().task("task").unwrap();
    let err: RouterError = h
        .router()
        .chat(&task, &ChatRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap_err();
    no_leak("auth failure", &format!("{err} {err:?}"));
    // A config that cannot be parsed.
    let bad = Config::parse("[ledger]\nbackend = \"memory\"\nbogus = 1\n", &|v| {
        test_env(v, None)
    })
    .unwrap_err();
    no_leak("config error", &format!("{bad} {bad:?}"));
    app.finish().await;
}
