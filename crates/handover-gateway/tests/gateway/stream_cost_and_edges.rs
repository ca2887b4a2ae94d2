//! Fixes from an outside probe of the gateway, each through real HTTP:
//! streamed calls charged to their task's cost budget (chat and
//! Responses, at the default and the `complete` commit point), a doubled
//! task header named once, a completed Responses answer's `completed_at`,
//! and an empty Responses `input` named. Effects are counted at the mocks.

use crate::support;

use handover_testkit::{After, Flavor, Plan, TcpProvider, bodies};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, Running};

/// What one `POST` answered: status, `x-handover-budget-remaining`, and
/// the body (the SSE text of a stream, the JSON text otherwise).
struct Answered {
    status: StatusCode,
    remaining: Option<String>,
    body: String,
}

impl Answered {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

async fn post(gw: &Running, path: &str, task: &str, body: Value) -> Answered {
    let resp = gw
        .http
        .post(gw.url(path))
        .bearer_auth(CLIENT_A)
        .header("x-handover-task", task)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let remaining = resp
        .headers()
        .get("x-handover-budget-remaining")
        .map(|v| v.to_str().unwrap().to_owned());
    Answered {
        status,
        remaining,
        body: resp.text().await.unwrap(),
    }
}

// ---------------------------------------------------------------------------
// 1. Streamed calls are charged to the task's cost budget.

/// The mock's streams report 16 prompt tokens: at 1,000,000 USD per million
/// input tokens, 16 USD each; the policy's 20 USD are spent by two.
const PER_STREAM: f64 = 16.0;

fn priced_config(provider: &str, url: &str) -> String {
    format!(
        "\n[providers.{provider}]\nkind = \"openai_compatible\"\nbase_url = \"{url}\"\n\
         model = \"m\"\nprice_input_per_mtok = 1000000.0\nprice_output_per_mtok = 0.0\n\
         [policies.priced]\nchain = [\"{provider}\"]\ncommit_point = \"first_token\"\n\
         max_cost = 20.0\nmax_requests = 10\ndeadline = \"30s\"\n{}",
        support::gateway_section(1 << 20, "5s", "")
    )
}

fn streamed() -> Plan {
    Plan::sse(
        bodies::text_stream(Flavor::OpenAi, &["on ", "its way"], true, true),
        After::Close,
    )
}

fn chat(stream: bool) -> Value {
    json!({"model": "priced", "stream": stream,
        "messages": [{"role": "user", "content": "where is my parcel?"}]})
}

fn responses(stream: bool) -> Value {
    json!({"model": "priced", "stream": stream, "input": "where is my parcel?"})
}

fn cost_left(a: &Answered) -> String {
    let h = a
        .remaining
        .as_deref()
        .unwrap_or_else(|| panic!("{}", a.body));
    h.rsplit("cost=").next().unwrap().to_owned()
}

/// After `a` was refused for its task's cost: 502 `budget_exhausted`.
fn assert_cost_refused(a: &Answered, what: &str) {
    assert_eq!(a.status, StatusCode::BAD_GATEWAY, "{what}: {}", a.body);
    let v = a.json();
    assert_eq!(v["error"]["code"], "budget_exhausted", "{what}: {v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("max_cost"), "{what}: {message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_calls_spend_the_tasks_cost_budget() {
    let mock = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    mock.set_default(streamed());
    let gw = Running::start(&priced_config("streampriced", mock.base_url())).await;

    for (path, body) in [
        ("/v1/chat/completions", chat as fn(bool) -> Value),
        ("/v1/responses", responses),
    ] {
        let task = format!("job{path}");
        let before = mock.requests();
        let first = post(&gw, path, &task, body(true)).await;
        assert_eq!(first.status, StatusCode::OK, "{}", first.body);
        assert_eq!(cost_left(&first), "20.000000", "nothing spent yet");
        // The second call is let through (16 < 20), and sees the charge.
        let second = post(&gw, path, &task, body(true)).await;
        assert_eq!(second.status, StatusCode::OK, "{}", second.body);
        assert_eq!(
            cost_left(&second),
            "4.000000",
            "{path}: the first stream was charged"
        );
        assert!(
            second.body.contains("its way"),
            "{path}: the answer streamed: {}",
            second.body
        );
        assert_eq!(mock.requests(), before + 2);
        // The ceiling is spent: plain and streamed calls, on either API,
        // are refused before anything is sent.
        for (p, b) in [
            ("/v1/chat/completions", chat(false)),
            ("/v1/chat/completions", chat(true)),
            ("/v1/responses", responses(false)),
            ("/v1/responses", responses(true)),
        ] {
            let refused = post(&gw, p, &task, b).await;
            assert_cost_refused(&refused, &format!("{path} then {p}"));
            assert_eq!(cost_left(&refused), "0.000000");
        }
        assert_eq!(
            mock.requests(),
            before + 2,
            "{path}: nothing sent once spent"
        );
    }

    let text = gw.metrics().await;
    let series = "handover_provider_cost_micro_usd_total{provider=\"streampriced\"}";
    assert_eq!(
        support::metric(&text, series),
        Some(4.0 * PER_STREAM * 1e6),
        "four streams counted: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_committed_complete_spends_the_tasks_cost_budget() {
    let mock = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    mock.set_default(streamed());
    let gw = Running::start(&priced_config("completepriced", mock.base_url())).await;
    let complete = |body: Value| {
        let req = gw
            .http
            .post(gw.url("/v1/chat/completions"))
            .bearer_auth(CLIENT_A)
            .header("x-handover-task", "job-complete")
            .header("x-handover-commit-point", "complete")
            .json(&body);
        async move {
            let resp = req.send().await.unwrap();
            let status = resp.status();
            let left = resp
                .headers()
                .get("x-handover-budget-remaining")
                .map(|v| v.to_str().unwrap().to_owned());
            (status, left, resp.text().await.unwrap())
        }
    };
    let (s, left, body) = complete(chat(true)).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    // Whole before its commit: charged when the stream opened.
    assert!(left.unwrap().ends_with("cost=4.000000"));
    let (s, _, body) = complete(chat(true)).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let (s, _, body) = complete(chat(true)).await;
    assert_eq!(s, StatusCode::BAD_GATEWAY, "{body}");
    assert!(body.contains("budget_exhausted"), "{body}");
    assert_eq!(mock.requests(), 2);
}

// ---------------------------------------------------------------------------
// 4. Rough edges.

#[tokio::test]
async fn a_task_header_given_twice_is_named_once_in_the_error() {
    let mock = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    mock.set_default(streamed());
    let gw = Running::start(&priced_config("twicepriced", mock.base_url())).await;
    let resp = gw
        .http
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_A)
        .header("x-handover-task", "job-1")
        .header("x-handover-task", "job-2")
        .json(&chat(false))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["code"], "invalid_header", "{v}");
    assert_eq!(v["error"]["param"], "x-handover-task", "{v}");
    assert_eq!(
        v["error"]["message"], "x-handover-task is given twice; send it once",
        "{v}"
    );
    assert_eq!(mock.requests(), 0, "nothing sent");
}

#[tokio::test]
async fn a_completed_response_says_when_it_completed() {
    let mock = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    mock.set_default(Plan::text(Flavor::OpenAi, "on its way"));
    let gw = Running::start(&priced_config("whenpriced", mock.base_url())).await;
    let plain = post(&gw, "/v1/responses", "job-when", responses(false)).await;
    assert_eq!(plain.status, StatusCode::OK, "{}", plain.body);
    let v = plain.json();
    assert_eq!(v["status"], "completed", "{v}");
    let (created, completed) = (v["created_at"].as_u64(), v["completed_at"].as_u64());
    assert!(created.is_some() && completed >= created, "{v}");

    mock.set_default(streamed());
    let stream = post(&gw, "/v1/responses", "job-when", responses(true)).await;
    let events: Vec<Value> = stream
        .body
        .lines()
        .filter_map(|l| serde_json::from_str(l.strip_prefix("data: ")?).ok())
        .collect();
    let created = &events[0]["response"];
    assert_eq!(created["status"], "in_progress", "{created}");
    assert_eq!(created["completed_at"], Value::Null, "not yet: {created}");
    let done = events.last().unwrap();
    assert_eq!(done["type"], "response.completed", "{done}");
    let r = &done["response"];
    assert!(
        r["completed_at"].as_u64() >= r["created_at"].as_u64(),
        "{r}"
    );
    assert!(r["completed_at"].is_u64(), "{r}");
}

#[tokio::test]
async fn an_empty_responses_input_names_input() {
    let mock = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    let gw = Running::start(&priced_config("emptypriced", mock.base_url())).await;
    let body = json!({"model": "priced", "input": []});
    let a = post(&gw, "/v1/responses", "job-empty", body).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.body);
    let v = a.json();
    assert_eq!(v["error"]["param"], "input", "{v}");
    assert_eq!(v["error"]["message"], "input: must not be empty", "{v}");
    assert_eq!(mock.requests(), 0, "nothing sent");
}
