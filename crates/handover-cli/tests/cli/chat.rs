//! `handover chat` against the testkit's mock providers: the mocks run on
//! this test's runtime while the real binary talks to them over loopback.

use crate::support;

use std::path::Path;
use std::process::Output;

use handover_testkit::{Flavor, MockProvider, Reply, bodies};
use serde_json::Value;
use support::*;

fn write_config(dir: &Path, primary: &MockProvider, fallback: &MockProvider) -> String {
    let path = dir.join("chat.toml");
    std::fs::write(
        &path,
        format!(
            "[ledger]\nbackend = \"memory\"\n\
             [providers.openai]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-4o-mini\"\n\
             [providers.deepseek]\nkind = \"deepseek\"\nbase_url = \"{}\"\nmodel = \"deepseek-chat\"\n\
             [policies.default]\nchain = [\"openai\", \"deepseek\"]\ndeadline = \"20s\"\n",
            primary.base_url(),
            fallback.base_url()
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// Runs the binary on a blocking thread so the mocks keep serving.
async fn chat(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || handover().args(&args).output().unwrap())
        .await
        .unwrap()
}

fn args(config: &str, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = ["chat", "--config", config, "--policy", "default"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    v.extend(extra.iter().map(|s| (*s).to_owned()));
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_falls_back_and_names_who_answered_and_every_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let primary = MockProvider::start(Flavor::OpenAi).await;
    let fallback = MockProvider::start(Flavor::DeepSeek).await;
    primary.script([Reply::overloaded()]);
    fallback.script([Reply::text("Hello from the fallback.")]);
    let config = write_config(dir.path(), &primary, &fallback);

    let out = ok(&chat(args(&config, &["Say hello"])).await);
    assert!(out.contains("Hello from the fallback."), "{out}");
    assert!(
        out.contains("answered by deepseek (model deepseek-chat-v3)"),
        "{out}"
    );
    assert!(
        out.contains("openai (gpt-4o-mini)") && out.contains("failed: overloaded"),
        "{out}"
    );
    assert!(out.contains("2 request(s) sent"), "{out}");
    assert_eq!(
        (primary.requests().await, fallback.requests().await),
        (1, 1)
    );
    let body: Value = serde_json::from_slice(&fallback.received().await[0].body).unwrap();
    assert_eq!(body["messages"][0]["content"], "Say hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_json_and_stream() {
    let dir = tempfile::tempdir().unwrap();
    let primary = MockProvider::start(Flavor::OpenAi).await;
    let fallback = MockProvider::start(Flavor::DeepSeek).await;
    let config = write_config(dir.path(), &primary, &fallback);

    primary.script([Reply::text("Hi from the primary.")]);
    let doc: Value =
        serde_json::from_str(&ok(&chat(args(&config, &["hi", "--json"])).await)).unwrap();
    assert_eq!(doc["answer"], "Hi from the primary.");
    assert_eq!(doc["provider"], "openai");
    assert_eq!(doc["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(doc["attempts"][0]["result"], "answered");

    primary.script([Reply::Sse(bodies::text_stream(
        Flavor::OpenAi,
        &["Stre", "amed ", "answer."],
        true,
        true,
    ))]);
    let out = ok(&chat(args(&config, &["hi", "--stream"])).await);
    assert!(out.contains("Streamed answer."), "{out}");
    assert!(out.contains("answered by openai"), "{out}");
    assert_eq!(primary.requests().await, 2);
    assert_eq!(fallback.requests().await, 0);

    // Every provider fails: a clear error listing the attempts, exit != 0.
    primary.script([Reply::context_length()]);
    fallback.script([Reply::content_filter()]);
    let err = failed(&chat(args(&config, &["hi"])).await);
    assert!(err.contains("content_filter"), "{err}");
    assert!(err.contains("openai") && err.contains("deepseek"), "{err}");
}

/// An empty prompt is refused before anything is sent, naming the argument.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_prompt_is_refused_and_nothing_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let primary = MockProvider::start(Flavor::OpenAi).await;
    let fallback = MockProvider::start(Flavor::DeepSeek).await;
    let config = write_config(dir.path(), &primary, &fallback);
    let out = chat(args(&config, &[""])).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("<PROMPT>"), "{err}");
    assert_eq!(
        (primary.requests().await, fallback.requests().await),
        (0, 0)
    );
}
