//! A streamed chat answer carries one usage chunk, the last before
//! `[DONE]`, whatever the provider's stream looks like: Gemini's native
//! stream (and vLLM's continuous usage) report a running total on every
//! chunk, and clients that add up a stream's usage chunks (LangChain)
//! counted it once per chunk.

use crate::support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::Running;
use wiremock::{
    Mock, MockServer, ResponseTemplate,
    matchers::{method, path},
};

/// Three Gemini stream events, each with the running `usageMetadata`.
fn gemini_events() -> String {
    let mut text = String::new();
    for (n, (piece, last)) in [("One ", false), ("two ", false), ("three", true)]
        .into_iter()
        .enumerate()
    {
        let mut candidate =
            json!({"content": {"role": "model", "parts": [{"text": piece}]}, "index": 0});
        if last {
            candidate["finishReason"] = "STOP".into();
        }
        let event = json!({
            "candidates": [candidate],
            "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": n + 1,
                              "totalTokenCount": 6 + n},
            "modelVersion": "gemini-2.5-flash",
            "responseId": "gem-1"
        });
        text.push_str(&format!("data: {event}\r\n\r\n"));
    }
    text
}

/// OpenAI-shaped chunks that each carry the usage so far (vLLM's
/// `continuous_usage_stats`), then the final usage chunk.
fn running_usage_chunks() -> String {
    let usage = |n: u64| json!({"prompt_tokens": 5, "completion_tokens": n, "total_tokens": 5 + n});
    let chunk = |delta: Value, finish: Value, n: u64| {
        json!({"id": "c-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
               "usage": usage(n)})
    };
    let mut text = String::new();
    for c in [
        chunk(
            json!({"role": "assistant", "content": "One "}),
            Value::Null,
            1,
        ),
        chunk(json!({"content": "two"}), Value::Null, 2),
        chunk(json!({}), json!("stop"), 2),
        json!({"id": "c-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [], "usage": usage(2)}),
    ] {
        text.push_str(&format!("data: {c}\n\n"));
    }
    text.push_str("data: [DONE]\n\n");
    text
}

async fn upstream(route: &str, events: String) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(route))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(events),
        )
        .mount(&server)
        .await;
    server
}

async fn gateway(kind: &str, server: &MockServer) -> Running {
    let c = format!(
        r#"
[providers.up]
kind = "{kind}"
base_url = "{base}/v1"
model = "gemini-2.5-flash"
{policy}{gateway}"#,
        base = server.uri(),
        policy = support::policy("p", &["up"], "first_token"),
        gateway = support::gateway_section(1 << 20, "5s", ""),
    );
    Running::start(&c).await
}

/// The stream's chunks (`[DONE]` as a string), asking for usage or not.
async fn chunks(gw: &Running, include_usage: bool) -> Vec<Value> {
    let resp = gw
        .chat(&json!({"model": "p", "stream": true,
                      "stream_options": {"include_usage": include_usage},
                      "messages": [{"role": "user", "content": "count"}]}))
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let text = resp.text().await.unwrap();
    text.split("\n\n")
        .filter_map(|ev| ev.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap_or_else(|_| Value::String(d.into())))
        .collect()
}

/// The chunks that carry a usage object.
fn with_usage(chunks: &[Value]) -> Vec<&Value> {
    chunks.iter().filter(|c| c["usage"].is_object()).collect()
}

fn text(chunks: &[Value]) -> String {
    chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect()
}

#[tokio::test]
async fn a_gemini_stream_reporting_usage_on_every_chunk_gives_one_usage_chunk() {
    let server = upstream(
        "/v1/models/gemini-2.5-flash:streamGenerateContent",
        gemini_events(),
    )
    .await;
    let gw = gateway("gemini", &server).await;

    let got = chunks(&gw, true).await;
    assert_eq!(text(&got), "One two three");
    let usage = with_usage(&got);
    assert_eq!(usage.len(), 1, "one usage chunk: {got:?}");
    assert_eq!(usage[0]["choices"], json!([]));
    assert_eq!(
        (
            &usage[0]["usage"]["prompt_tokens"],
            &usage[0]["usage"]["completion_tokens"],
            &usage[0]["usage"]["total_tokens"],
        ),
        (&json!(5), &json!(3), &json!(8)),
        "the provider's last report"
    );
    let n = got.len();
    assert_eq!(got[n - 1], json!("[DONE]"));
    assert!(got[n - 2]["usage"].is_object(), "last before [DONE]");

    let without = chunks(&gw, false).await;
    assert!(with_usage(&without).is_empty(), "{without:?}");
    assert_eq!(text(&without), "One two three");
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn an_openai_stream_with_running_usage_gives_one_usage_chunk() {
    let server = upstream("/v1/chat/completions", running_usage_chunks()).await;
    let gw = gateway("openai_compatible", &server).await;

    let got = chunks(&gw, true).await;
    assert_eq!(text(&got), "One two");
    let usage = with_usage(&got);
    assert_eq!(usage.len(), 1, "one usage chunk: {got:?}");
    assert_eq!(usage[0]["usage"]["completion_tokens"], 2);
    assert_eq!(usage[0]["choices"], json!([]));
    let finish = got
        .iter()
        .position(|c| c["choices"][0]["finish_reason"] == "stop")
        .unwrap();
    assert!(finish < got.len() - 2, "the finish comes before the usage");
    assert_eq!(got.last(), Some(&json!("[DONE]")));
}
