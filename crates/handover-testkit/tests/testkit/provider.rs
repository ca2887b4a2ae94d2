//! The mock providers answer as scripted, in the providers' wire format, and
//! count the requests they received.

use std::time::Duration;

use handover_testkit::{After, Flavor, MockProvider, Plan, Reply, TcpProvider, bodies};
use serde_json::{Value, json};

async fn call(client: &reqwest::Client, base: &str) -> reqwest::Result<reqwest::Response> {
    client
        .post(format!("{base}/chat/completions"))
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
}

#[tokio::test]
async fn wiremock_provider_plays_its_script_in_order() {
    let p = MockProvider::start(Flavor::DeepSeek).await;
    p.script([
        Reply::tool_call("call_1", "create_shipment", json!({"sku": "A"})),
        Reply::sse_text_with_keepalives(Flavor::DeepSeek, &["Hel", "lo"]),
        Reply::rate_limited(Some(7)),
        Reply::text("late").after(Duration::from_secs(30)),
        Reply::Drop,
    ]);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let base = p.base_url();

    let tool: Value = call(&client, &base).await.unwrap().json().await.unwrap();
    let fc = &tool["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(fc["id"], "call_1");
    assert_eq!(fc["function"]["name"], "create_shipment");
    assert_eq!(
        fc["function"]["arguments"], r#"{"sku":"A"}"#,
        "arguments travel as a string"
    );
    assert_eq!(tool["model"], Flavor::DeepSeek.answering_model());

    let sse = call(&client, &base).await.unwrap();
    assert_eq!(sse.headers()["content-type"], "text/event-stream");
    let text = sse.text().await.unwrap();
    assert!(text.starts_with(": keep-alive\n\n"));
    assert_eq!(
        text.matches(": keep-alive").count(),
        text.matches("data: ").count()
    );
    assert!(text.trim_end().ends_with("data: [DONE]"));

    let limited = call(&client, &base).await.unwrap();
    assert_eq!(limited.status(), 429);
    assert_eq!(limited.headers()["retry-after"], "7");

    assert!(call(&client, &base).await.unwrap_err().is_timeout());
    assert!(call(&client, &base).await.is_err(), "connection dropped");
    // Unscripted calls get the default answer.
    assert_eq!(call(&client, &base).await.unwrap().status(), 200);
    assert_eq!(p.requests().await, 6);
}

#[tokio::test(start_paused = true)]
async fn tcp_provider_answers_late_in_virtual_time_and_cuts_streams() {
    let p = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    p.script([
        Plan::tool_call(Flavor::OpenAi, "call_9", "refund", &json!({"amount": 5}))
            .delayed(Duration::from_secs(30)),
        Plan::sse(
            bodies::text_stream(Flavor::OpenAi, &["Your parcel", " is"], false, false),
            After::Close,
        ),
    ]);
    let client = reqwest::Client::new();
    let start = tokio::time::Instant::now();
    let late: Value = call(&client, p.base_url())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        start.elapsed() >= Duration::from_secs(30),
        "answered after its delay"
    );
    assert_eq!(
        late["choices"][0]["message"]["tool_calls"][0]["id"],
        "call_9"
    );

    let cut = call(&client, p.base_url())
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(cut.contains("Your parcel"));
    assert!(!cut.contains("[DONE]") && !cut.contains("finish_reason\":\"stop"));
    assert_eq!(p.requests(), 2);
}
