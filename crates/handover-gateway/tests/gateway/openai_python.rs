//! The official `openai` Python package as a real client of the gateway.
//!
//! The interpreter comes from `HANDOVER_TEST_PYTHON` (a virtualenv with
//! `openai` installed; `.ci/run` creates it). When the variable is unset the
//! test says it was skipped; when it is set but the interpreter or the
//! package is missing, the test fails.

use crate::support;

use handover_testkit::{After, Flavor, MockProvider, Plan, Reply, TcpProvider, bodies};
use serde_json::Value;
use support::{CLIENT_A, Running};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_openai_python_client_works_against_the_gateway() {
    let Ok(python) = std::env::var("HANDOVER_TEST_PYTHON") else {
        println!("SKIPPED: set HANDOVER_TEST_PYTHON to a python with the `openai` package");
        return;
    };

    // One policy per scenario, each over its own providers.
    let plain = MockProvider::start(Flavor::OpenAi).await;
    plain.set_default(Reply::text("plain answer"));
    let down = MockProvider::start(Flavor::OpenAi).await;
    down.set_default(Reply::overloaded());
    let up = MockProvider::start(Flavor::DeepSeek).await;
    up.set_default(Reply::text("fallback answer"));
    let streaming = MockProvider::start(Flavor::OpenAi).await;
    streaming.set_default(Reply::Sse(bodies::text_stream(
        Flavor::OpenAi,
        &["stream", "ed"],
        true,
        true,
    )));
    let cut_early = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    cut_early.set_default(Plan::sse(
        bodies::text_stream(Flavor::OpenAi, &["Partial "], false, false),
        After::Close,
    ));
    let rescue = MockProvider::start(Flavor::OpenAi).await;
    rescue.set_default(Reply::Sse(bodies::text_stream(
        Flavor::OpenAi,
        &["Whole ", "answer"],
        true,
        true,
    )));
    let cut_late = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    cut_late.set_default(Plan::sse(
        bodies::text_stream(Flavor::OpenAi, &["Hel", "lo"], false, false),
        After::Close,
    ));
    let unused = MockProvider::start(Flavor::OpenAi).await;

    let mut c = String::new();
    for (name, url) in [
        ("plain", plain.base_url()),
        ("down", down.base_url()),
        ("up", up.base_url()),
        ("streaming", streaming.base_url()),
        ("cut_early", cut_early.base_url().to_owned()),
        ("rescue", rescue.base_url()),
        ("cut_late", cut_late.base_url().to_owned()),
        ("unused", unused.base_url()),
    ] {
        c.push_str(&support::provider(name, &url));
    }
    c.push_str(&support::policy("plain", &["plain"], "first_token"));
    c.push_str(&support::policy("fallback", &["down", "up"], "first_token"));
    c.push_str(&support::policy("stream", &["streaming"], "first_token"));
    c.push_str(&support::policy(
        "cut-before",
        &["cut_early", "rescue"],
        "complete",
    ));
    c.push_str(&support::policy(
        "cut-after",
        &["cut_late", "unused"],
        "first_token",
    ));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    let gw = Running::start(&c).await;

    let scenarios =
        support::python_scenarios(&python, "openai_client.py", &[&gw.base, CLIENT_A]).await;
    let r = |name: &str| scenarios.get(name);

    let p = r("non_streaming");
    assert_eq!(p["content"], "plain answer");
    assert_eq!(p["model"], Flavor::OpenAi.answering_model());
    assert_eq!(p["total_tokens"], 26);
    assert_eq!(p["provider"], "plain");

    let f = r("fallback_after_503");
    assert_eq!(f["content"], "fallback answer");
    assert_eq!(f["model"], Flavor::DeepSeek.answering_model());
    assert_eq!(f["provider"], "up");
    assert_eq!(f["attempts"], "down=overloaded, up=answered");
    assert_eq!(down.requests().await, 1);

    let s = r("streaming");
    assert_eq!(s["content"], "streamed");
    assert_eq!(s["finish_reason"], "stop");
    assert_eq!(s["total_tokens"], 19);
    assert_eq!(s["error"], Value::Null);

    let b = r("cut_before_commit");
    assert_eq!(b["content"], "Whole answer", "the partial is never shown");
    assert_eq!(b["finish_reason"], "stop");
    assert_eq!(b["error"], Value::Null);
    assert_eq!(cut_early.requests(), 1);

    let a = r("cut_after_commit");
    assert_eq!(a["content"], "Hello");
    assert_eq!(
        a["finish_reason"],
        Value::Null,
        "never presented as complete"
    );
    assert_eq!(a["error"]["class"], "APIError", "{a}");
    assert_eq!(a["error"]["code"], "stream_broken");
    assert_eq!(
        unused.requests().await,
        0,
        "never stitched to another provider"
    );

    assert_eq!(r("unknown_model")["error"]["code"], "model_not_found");
    assert_eq!(r("bad_token")["error"]["class"], "AuthenticationError");
    let ids: Vec<_> = r("models")["ids"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    assert_eq!(
        ids,
        ["cut-after", "cut-before", "fallback", "plain", "stream"]
    );
    // `models.retrieve`, a slash in the name included (the SDK's own
    // path encoding), resolves as a chat request would.
    assert_eq!(
        r("retrieve")["ids"],
        serde_json::json!(["plain", "plain/plain-model"])
    );
    assert_eq!(r("retrieve_unknown")["error"]["code"], "model_not_found");
    assert_eq!(gw.all_operations().await, 0);
}
