//! A mock upstream serving many models, for routing tests where one
//! provider entry serves many model names: it answers each request with
//! the model the request asked for, and fails (503 overloaded) the models
//! it was told to fail.

use std::collections::BTreeSet;

use serde_json::Value;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::{Flavor, bodies};

/// An OpenAI-compatible upstream that serves any model by name.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use handover_testkit::ModelsProvider;
///
/// let p = ModelsProvider::start(["broken"]).await;
/// let client = reqwest::Client::new();
/// let ask = |model: &str| {
///     client
///         .post(format!("{}/chat/completions", p.base_url()))
///         .json(&serde_json::json!({"model": model, "messages": []}))
///         .send()
/// };
/// let ok: serde_json::Value = ask("fb-1").await.unwrap().json().await.unwrap();
/// assert_eq!(ok["model"], "fb-1");
/// assert_eq!(ask("broken").await.unwrap().status(), 503);
/// assert_eq!(p.models_asked().await, ["fb-1", "broken"]);
/// # }
/// ```
#[derive(Debug)]
pub struct ModelsProvider {
    server: MockServer,
}

impl ModelsProvider {
    /// Starts an upstream failing every model in `failing` with 503.
    pub async fn start<'a>(failing: impl IntoIterator<Item = &'a str>) -> Self {
        let failing: BTreeSet<String> = failing.into_iter().map(str::to_owned).collect();
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(move |req: &Request| {
                let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
                let model = body["model"].as_str().unwrap_or_default().to_owned();
                if failing.contains(&model) {
                    return ResponseTemplate::new(503).set_body_json(bodies::error(
                        "The engine is currently overloaded, please try again later",
                        Some("server_error"),
                        None,
                    ));
                }
                let text = format!("answered by {model}");
                if body["stream"] == true {
                    let flavor = Flavor::OpenAi;
                    let events = bodies::text_stream(flavor, &[&text], true, true).concat();
                    // The chunks report the model asked for, as in answers.
                    let events = events.replace(flavor.answering_model(), &model);
                    return ResponseTemplate::new(200).set_body_raw(events, "text/event-stream");
                }
                let mut answer = bodies::answer(Flavor::OpenAi, &text);
                answer["model"] = Value::String(model);
                ResponseTemplate::new(200).set_body_json(answer)
            })
            .mount(&server)
            .await;
        Self { server }
    }

    /// The base URL to configure (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.uri())
    }

    /// The `model` of every chat request received, in order, as the server
    /// saw them.
    pub async fn models_asked(&self) -> Vec<String> {
        self.server
            .received_requests()
            .await
            .unwrap_or_default()
            .iter()
            .filter(|r| r.url.path() == "/v1/chat/completions")
            .map(|r| asked(r).unwrap_or_default())
            .collect()
    }
}

fn asked(req: &Request) -> Option<String> {
    let body: Value = serde_json::from_slice(&req.body).ok()?;
    body["model"].as_str().map(str::to_owned)
}
