//! One budget per user task through the gateway (`x-handover-task`), with
//! the official `openai` Python client (see `tests/python/task_budget.py`).
//! Requests are counted at the mock providers.
//!
//! The interpreter comes from `HANDOVER_TEST_PYTHON`, as in
//! `openai_python.rs`: unset → skipped (said so); set but broken → fails.

use crate::support;

use std::time::Duration;

use handover_testkit::{After, Flavor, MockProvider, Plan, Reply, TcpProvider, bodies};
use serde_json::Value;
use support::{CLIENT_A, CLIENT_B, Running};

fn policy(name: &str, chain: &str, extra: &str) -> String {
    format!(
        "\n[policies.{name}]\nchain = [{chain}]\ncommit_point = \"first_token\"\n{extra}\n\
         [policies.{name}.backoff]\ninitial = \"1ms\"\nmax = \"2ms\"\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_under_one_task_share_one_budget() {
    let Ok(python) = std::env::var("HANDOVER_TEST_PYTHON") else {
        println!("SKIPPED: set HANDOVER_TEST_PYTHON to a python with the `openai` package");
        return;
    };

    let down = MockProvider::start(Flavor::OpenAi).await;
    down.set_default(Reply::overloaded());
    let up = MockProvider::start(Flavor::OpenAi).await;
    up.set_default(Reply::text("fallback answer"));
    let plain = MockProvider::start(Flavor::OpenAi).await;
    plain.set_default(Reply::text("plain answer"));
    // The first call gets a quick answer; every later one a stream that
    // would take 8 s (20 parts, 400 ms apart).
    let slow = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    slow.script([Plan::text(Flavor::OpenAi, "quick")]);
    let parts = ["tick "; 20];
    slow.set_default(
        Plan::sse(
            bodies::text_stream(Flavor::OpenAi, &parts, true, true),
            After::Close,
        )
        .gap(Duration::from_millis(400)),
    );

    let mut c = String::new();
    for (name, url) in [
        ("down", down.base_url()),
        ("up", up.base_url()),
        ("plain", plain.base_url()),
        ("slow", slow.base_url().to_owned()),
    ] {
        c.push_str(&support::provider(name, &url));
    }
    c.push_str(&policy(
        "tasked",
        "\"down\", \"up\"",
        "deadline = \"20s\"\nmax_requests = 3",
    ));
    c.push_str(&policy("plain", "\"plain\"", "deadline = \"20s\""));
    c.push_str(&policy("short", "\"slow\"", "deadline = \"3s\""));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    let gw = Running::start(&c).await;

    let scenarios =
        support::python_scenarios(&python, "task_budget.py", &[&gw.base, CLIENT_A, CLIENT_B]).await;
    let r = |name: &str| scenarios.get(name);
    let requests_left = |v: &Value| -> String {
        let h = v["remaining"].as_str().unwrap_or_else(|| panic!("{v}"));
        h.split(", ").next().unwrap().to_owned()
    };

    // Call 1: primary 503, fallback answers — 2 of the task's 3 requests.
    let first = r("trip_call_1");
    assert_eq!(first["content"], "fallback answer", "{first}");
    assert_eq!(first["attempts"], "down=overloaded, up=answered");
    assert_eq!(requests_left(first), "requests=1");
    assert!(
        first["remaining"]
            .as_str()
            .unwrap()
            .ends_with("cost=unlimited")
    );
    // Call 2: the last request goes to the primary; nothing left for the fallback.
    // Calls 3 and 4: refused without a request.
    for n in 2..=4 {
        let v = r(&format!("trip_call_{n}"));
        assert_eq!(v["status"], 502, "{v}");
        assert_eq!(v["code"], "budget_exhausted", "{v}");
        assert_eq!(v["should_retry"], "false");
        assert_eq!(requests_left(v), "requests=0");
    }
    // Other task, other client: 2 requests each, from budgets of their own.
    for name in ["other_task", "other_client"] {
        let v = r(name);
        assert_eq!(v["content"], "fallback answer", "{name}: {v}");
        assert_eq!(requests_left(v), "requests=1", "{name}: {v}");
    }
    // Counted at the mocks: trip-1 sent 3 (per-call budgets would have sent 8).
    assert_eq!(
        (down.requests().await, up.requests().await),
        (4, 3),
        "trip-1: 2 + 1; other task: 2; other client: 2"
    );

    let mismatch = r("policy_mismatch");
    assert_eq!(mismatch["status"], 409, "{mismatch}");
    assert_eq!(mismatch["code"], "task_policy_mismatch");
    assert_eq!(mismatch["param"], "x-handover-task");
    assert!(
        mismatch["message"].as_str().unwrap().contains("\"tasked\""),
        "names the task's policy: {mismatch}"
    );
    assert_eq!(plain.requests().await, 0);
    let bad = r("bad_task_header");
    assert_eq!(bad["status"], 400, "{bad}");
    assert_eq!(bad["code"], "invalid_header");
    assert_eq!(bad["param"], "x-handover-task");

    // Deadline: the first call's 3 s bound the later stream and refuse the last call.
    assert_eq!(r("slow_first")["content"], "quick");
    let stream = r("slow_stream");
    assert!(stream["error"].is_object(), "cut at the deadline: {stream}");
    let got = stream["content"].as_str().unwrap();
    assert!(got.starts_with("tick") && got.len() < 5 * 20, "{stream}");
    let late = r("slow_after_deadline");
    assert_eq!(late["status"], 504, "{late}");
    assert_eq!(late["code"], "budget_exhausted");
    let total = r("slow_total")["seconds"].as_f64().unwrap();
    assert!(
        total < 5.0,
        "the whole task ended near its 3 s deadline: {total}s"
    );
    assert_eq!(slow.requests(), 2, "nothing sent after the deadline");
}

/// The operations API under a task: the executor's time between begin,
/// dispatch and outcome runs on the task's one deadline (the ledger's
/// clock), shared with the task's model calls.
#[tokio::test]
async fn operations_under_a_task_run_on_its_deadline() {
    use std::sync::Arc;

    use handover_ledger::{ManualClock, OperationId, StateKind, Timestamp};
    use reqwest::StatusCode;
    use serde_json::json;

    let model = MockProvider::start(Flavor::OpenAi).await;
    model.set_default(Reply::text("ship it"));
    let mut c = support::provider("model", &model.base_url());
    c.push_str(&policy(
        "tasked",
        "\"model\"",
        "deadline = \"60s\"\nmax_requests = 3",
    ));
    c.push_str("\n[actions.ship]\nlease = \"120s\"\n");
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    let clock = ManualClock::new(Timestamp::from_millis(1_700_000_000_000));
    let gw = Running::start_on_clock(&c, Arc::new(clock.clone())).await;

    let post = |token: &'static str, path: &str, task: &'static str, key: &str, body: Value| {
        let mut req = gw
            .http
            .post(gw.url(path))
            .bearer_auth(token)
            .header("x-handover-task", task)
            .json(&body);
        if !key.is_empty() {
            req = req.header("Idempotency-Key", key);
        }
        async move {
            let resp = req.send().await.unwrap();
            let status = resp.status();
            let left = resp
                .headers()
                .get("x-handover-budget-remaining")
                .map(|v| v.to_str().unwrap().to_owned());
            (status, left, resp.json::<Value>().await.unwrap())
        }
    };
    let chat = json!({"model": "tasked", "messages": [{"role": "user", "content": "hi"}]});
    let ship = |n: u32| json!({"action": "ship", "params": {"order": n}});

    // An operation under a task no model call has opened: no budget yet to
    // run on, so nothing to report or enforce.
    let (s, left, _) = post(CLIENT_A, "/v1/operations", "job-1", "K-0", ship(0)).await;
    assert_eq!((s, left), (StatusCode::CREATED, None));

    // The task's first model call opens it (60 s); the agent begins K-1.
    let (s, _, _) = post(CLIENT_A, "/v1/chat/completions", "job-1", "", chat.clone()).await;
    assert_eq!(s, StatusCode::OK);
    let (s, left, body) = post(CLIENT_A, "/v1/operations", "job-1", "K-1", ship(1)).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    assert_eq!(
        left.as_deref(),
        Some("requests=2, ms=60000, cost=unlimited")
    );
    let epoch = body["claim"]["epoch"].clone();
    // The executor takes 30 s before dispatching, and 10 s at the destination.
    clock.advance(Duration::from_secs(30));
    let dispatch = json!({"epoch": epoch});
    let (s, left, _) = post(
        CLIENT_A,
        "/v1/operations/K-1/dispatch",
        "job-1",
        "",
        dispatch,
    )
    .await;
    assert_eq!(
        (s, left.as_deref()),
        (StatusCode::OK, Some("requests=2, ms=30000, cost=unlimited"))
    );
    clock.advance(Duration::from_secs(10));
    let done = json!({"epoch": epoch, "outcome": "confirmed", "result": {"shipment": "S-1"}});
    let (s, left, _) = post(CLIENT_A, "/v1/operations/K-1/outcome", "job-1", "", done).await;
    assert_eq!(
        (s, left.as_deref()),
        (StatusCode::OK, Some("requests=2, ms=20000, cost=unlimited"))
    );
    // The next model call of the task gets what the executor left.
    let (s, left, _) = post(CLIENT_A, "/v1/chat/completions", "job-1", "", chat.clone()).await;
    assert_eq!(s, StatusCode::OK);
    let ms: u64 = left
        .unwrap()
        .split("ms=")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(ms <= 20_000, "{ms} ms left after the executor's 40 s");

    // Another client naming the id has no such task: it neither sees nor
    // uses client A's budget.
    let (s, left, _) = post(CLIENT_B, "/v1/operations", "job-1", "K-9", ship(9)).await;
    assert_eq!((s, left), (StatusCode::CREATED, None));

    // K-2 begun in time; the deadline passes before it is dispatched.
    let (s, _, body) = post(CLIENT_A, "/v1/operations", "job-1", "K-2", ship(2)).await;
    assert_eq!(s, StatusCode::CREATED);
    let epoch = body["claim"]["epoch"].clone();
    clock.advance(Duration::from_secs(20));
    let (s, left, body) = post(
        CLIENT_A,
        "/v1/operations/K-2/dispatch",
        "job-1",
        "",
        json!({"epoch": epoch}),
    )
    .await;
    assert_eq!(
        (s, &body["error"]["code"]),
        (StatusCode::GATEWAY_TIMEOUT, &json!("budget_exhausted"))
    );
    assert_eq!(left.as_deref(), Some("requests=1, ms=0, cost=unlimited"));
    let k2 = OperationId::new("tenant-a", "K-2").unwrap();
    let rec = gw.ledger.get(&k2).await.unwrap().unwrap();
    assert_eq!(rec.state.kind(), StateKind::Claimed, "nothing dispatched");
    // Past the deadline nothing new is claimed, and no model is called.
    let (s, _, _) = post(CLIENT_A, "/v1/operations", "job-1", "K-3", ship(3)).await;
    assert_eq!(s, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(
        gw.ledger
            .get(&OperationId::new("tenant-a", "K-3").unwrap())
            .await
            .unwrap(),
        None
    );
    let (s, _, body) = post(CLIENT_A, "/v1/chat/completions", "job-1", "", chat).await;
    assert_eq!(
        (s, &body["error"]["code"]),
        (StatusCode::GATEWAY_TIMEOUT, &json!("budget_exhausted"))
    );
    assert_eq!(model.requests().await, 2);
}
