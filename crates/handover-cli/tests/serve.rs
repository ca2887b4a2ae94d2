//! `handover serve` as an operator runs it: a real process, a real port, a
//! real OpenAI-style request, and a graceful stop on SIGINT.

mod support;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use handover_testkit::{Flavor, MockProvider, Reply};
use serde_json::{Value, json};

const TOKEN: &str = "example-client-token";
const TOKEN_SHA256: &str = "50f88aa457efc9d22985f9f0efd335f30b8fd187a999b69a70f11e6a8be39f4f";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_an_openai_request_and_stops_gracefully() {
    let provider = MockProvider::start(Flavor::OpenAi).await;
    provider.script([Reply::text("Hello through the gateway.")]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("handover.toml");
    std::fs::write(
        &config,
        format!(
            "[ledger]\nbackend = \"sqlite\"\npath = \"{}\"\n\n[providers.primary]\nkind = \"openai_compatible\"\nbase_url = \"{}\"\nmodel = \"m\"\n\n[policies.default]\nchain = [\"primary\"]\n\n[gateway]\nlisten = \"127.0.0.1:0\"\n\n[gateway.clients.app]\ntoken_sha256 = \"{TOKEN_SHA256}\"\nscope = \"tenant-1\"\n",
            dir.path().join("ledger.db").display(),
            provider.base_url()
        ),
    )
    .unwrap();

    let mut child = support::handover()
        .args(["serve", "--config", config.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The explicit readiness signal: the line naming the bound address.
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "serve exited before listening"
        );
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
    };

    let client = reqwest::Client::new();
    let health = client.get(format!("{addr}/healthz")).send().await.unwrap();
    assert!(health.status().is_success());
    let resp = client
        .post(format!("{addr}/v1/chat/completions"))
        .bearer_auth(TOKEN)
        .json(&json!({"model": "default", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-handover-provider"], "primary");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "Hello through the gateway."
    );
    assert_eq!(provider.requests().await, 1);

    // SIGINT: the gateway finishes and exits cleanly.
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(exit.success(), "serve exited with {exit:?}");
}
