//! OpenAI's Responses API (`POST {base}/responses`; Azure:
//! `{base}/openai/v1/responses` with the deployment as `model`), for an
//! `openai` or `azure_openai` provider configured with `api = "responses"`.
//!
//! Requests are translated in `responses_request.rs`, streams read in
//! `responses_stream.rs`. Answers: the `output` items become the one answer
//! — `message` items' `output_text` parts its content (their log
//! probabilities the choice's `logprobs`), `refusal` parts its refusal,
//! `function_call` items its tool calls (the `call_id` is the id a tool
//! result answers), `reasoning` items' summaries (or reasoning text) its
//! reasoning. `status` and `incomplete_details` become the finish reason
//! (`max_output_tokens` is `length`, `content_filter` is
//! `content_filter`); a `failed` response is the provider's error, an
//! unfinished one (`queued`, `in_progress`, `cancelled`) an error too,
//! never an answer. Usage keeps OpenAI's counts (input includes cached
//! tokens, output includes reasoning) with the details under their Chat
//! Completions names. Error statuses have the Chat Completions envelope.

use super::Untranslatable;
use http::HeaderMap;
use secrecy::SecretString;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{
    BodyError, CallUrl, Dialect, StreamDecoder, fixed_url, openai::auth_headers, reported_model,
    responses_request::request_body, responses_stream::EventDecoder,
};
use crate::{
    error::ProviderError,
    request::{ChatRequest, ToolCall},
    settings::{ProviderKind, ProviderSettings},
    types::{ChatResponse, FinishReason, Passthrough, Usage},
    wire::WireError,
};

pub(crate) struct ResponsesDialect {
    kind: ProviderKind,
    url: reqwest::Url,
}

impl ResponsesDialect {
    pub(crate) fn new(settings: &ProviderSettings) -> Result<Self, ProviderError> {
        let base = settings.base_url.trim_end_matches('/');
        let url = match (settings.kind, settings.api_version.as_deref()) {
            // Azure's v1 path takes the deployment in the body and needs no
            // version; one is sent only when configured (`preview`).
            (ProviderKind::AzureOpenAi, Some(v)) => {
                format!("{base}/openai/v1/responses?api-version={v}")
            }
            (ProviderKind::AzureOpenAi, None) => format!("{base}/openai/v1/responses"),
            _ => format!("{base}/responses"),
        };
        Ok(Self {
            kind: settings.kind,
            url: fixed_url(&url)?,
        })
    }
}

impl Dialect for ResponsesDialect {
    fn url(&self, _model: &str, _stream: bool) -> CallUrl {
        CallUrl::Fixed(self.url.clone())
    }

    fn headers(&self, key: Option<&SecretString>) -> Result<HeaderMap, ProviderError> {
        auth_headers(self.kind, key)
    }

    fn body(
        &self,
        req: &ChatRequest,
        model: &str,
        stream: bool,
    ) -> Result<Vec<u8>, Untranslatable> {
        request_body(req, model, stream)
    }

    fn response(
        &self,
        body: &[u8],
        requested_model: &str,
        request_id: Option<String>,
    ) -> Result<ChatResponse, BodyError> {
        let r: WireResponse = serde_json::from_slice(body)?;
        r.into_response(requested_model, request_id)
    }

    fn decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(EventDecoder::default())
    }
}

/// A `response` object (a whole answer, or the one a stream's last event
/// carries).
#[derive(Deserialize)]
pub(crate) struct WireResponse {
    #[serde(default)]
    pub(crate) id: Option<String>,
    #[serde(default)]
    pub(crate) model: Option<String>,
    #[serde(default)]
    pub(crate) created_at: Option<Value>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    incomplete_details: Option<Value>,
    /// Read straight into [`Item`]s: every documented output item type has
    /// these fields with these types, or not at all.
    #[serde(default)]
    output: Option<Vec<Item>>,
    #[serde(default)]
    pub(crate) usage: Option<Map<String, Value>>,
    #[serde(default)]
    service_tier: Option<Value>,
}

/// An output item's fields Handover reads (`message`, `function_call`,
/// `reasoning`; other item types are skipped).
#[derive(Deserialize)]
struct Item {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    content: Option<Vec<Part>>,
    #[serde(default)]
    summary: Option<Vec<Part>>,
    #[serde(default)]
    call_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

/// A content part of a message (`output_text`, `refusal`) or a reasoning
/// item (`reasoning_text`, `summary_text`).
#[derive(Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    logprobs: Option<Vec<Value>>,
}

/// What the output items say, gathered.
#[derive(Default)]
struct Output {
    content: Option<String>,
    refusal: Option<String>,
    logprobs: Vec<Value>,
    calls: Vec<ToolCall>,
    reasoning: Vec<String>,
}

impl Output {
    fn add(&mut self, item: Item) {
        match item.kind.as_str() {
            "message" => {
                for p in item.content.unwrap_or_default() {
                    match p.kind.as_str() {
                        "output_text" => {
                            let text = p.text.unwrap_or_default();
                            self.content.get_or_insert_default().push_str(&text);
                            self.logprobs.extend(p.logprobs.unwrap_or_default());
                        }
                        "refusal" => {
                            let r = p.refusal.unwrap_or_default();
                            self.refusal.get_or_insert_default().push_str(&r);
                        }
                        _ => {}
                    }
                }
            }
            "function_call" => self.calls.push(ToolCall {
                id: item.call_id.unwrap_or_default(),
                name: item.name.unwrap_or_default(),
                arguments: crate::wire::arguments_text(item.arguments),
                ..ToolCall::default()
            }),
            "reasoning" => {
                let summary = item.summary.unwrap_or_default();
                let parts = if summary.is_empty() {
                    item.content.unwrap_or_default()
                } else {
                    summary
                };
                self.reasoning
                    .extend(parts.into_iter().filter_map(|p| p.text));
            }
            _ => {}
        }
    }
}

impl WireResponse {
    /// The neutral answer, or why this response is none.
    pub(crate) fn into_response(
        mut self,
        requested_model: &str,
        request_id: Option<String>,
    ) -> Result<ChatResponse, BodyError> {
        let mut out = Output::default();
        for item in self.output.take().into_iter().flatten() {
            out.add(item);
        }
        let finish = finish_reason(
            self.status.as_deref(),
            self.incomplete_details.as_ref(),
            !out.calls.is_empty(),
        )
        .map_err(|status| BodyError::Failed(failure(status, self.error.clone())))?;
        let mut passthrough = self.passthrough();
        if let Some(r) = out.refusal {
            passthrough.message.insert("refusal", &r.into());
        }
        if !out.logprobs.is_empty() {
            passthrough.choice.insert(
                "logprobs",
                &json!({"content": out.logprobs, "refusal": null}),
            );
        }
        Ok(ChatResponse {
            content: out.content,
            tool_calls: out.calls,
            reasoning_content: (!out.reasoning.is_empty()).then(|| out.reasoning.join("\n\n")),
            finish_reason: Some(finish),
            usage: self.usage.map(usage),
            model: reported_model(self.model, requested_model),
            request_id,
            passthrough,
        })
    }

    /// The top-level fields a Chat Completions answer has too: the
    /// provider's `id`, `created` (from `created_at`), `service_tier`.
    pub(crate) fn passthrough(&self) -> Passthrough {
        let mut pass = Passthrough::default();
        let top = [
            ("id", self.id.clone().map(Value::from)),
            ("created", self.created_at.clone()),
            ("service_tier", self.service_tier.clone()),
        ];
        for (k, v) in top {
            if let Some(v) = v.filter(|v| !v.is_null()) {
                pass.top.insert(k, &v);
            }
        }
        pass
    }
}

/// The finish reason of a response with `status`, or the status when the
/// response is no answer (`failed`, `cancelled`, still `in_progress`).
/// A response without a status (some compatible servers) is complete.
pub(crate) fn finish_reason(
    status: Option<&str>,
    incomplete: Option<&Value>,
    calls: bool,
) -> Result<FinishReason, String> {
    match status {
        None | Some("completed") if calls => Ok(FinishReason::ToolCalls),
        None | Some("completed") => Ok(FinishReason::Stop),
        Some("incomplete") => {
            let reason = incomplete
                .and_then(|d| d.get("reason"))
                .and_then(Value::as_str)
                .unwrap_or("incomplete");
            Ok(match reason {
                "max_output_tokens" => FinishReason::Length,
                "content_filter" => FinishReason::ContentFilter,
                other => FinishReason::Other(other.to_owned()),
            })
        }
        Some(other) => Err(other.to_owned()),
    }
}

/// The error a response that is no answer stands for: its own `error`
/// object if it has one, else its status.
pub(crate) fn failure(status: String, error: Option<Value>) -> WireError {
    match error.filter(Value::is_object) {
        Some(e) => WireError::from_value(e),
        None => WireError {
            message: Some(format!("the response is {status}, not an answer")),
            ..WireError::default()
        },
    }
}

/// Responses usage: OpenAI's counts (input includes cached tokens, output
/// includes reasoning tokens, as in Chat Completions), the details kept
/// under their Chat Completions names so the answer reads like one.
pub(crate) fn usage(mut u: Map<String, Value>) -> Usage {
    let count = |u: &Map<String, Value>, k: &str| u.get(k).and_then(Value::as_u64);
    let detail = |u: &Map<String, Value>, outer: &str, inner: &str| {
        u.get(outer)
            .and_then(|d| d.get(inner))
            .and_then(Value::as_u64)
    };
    let input = count(&u, "input_tokens").unwrap_or(0);
    let output = count(&u, "output_tokens").unwrap_or(0);
    let cached = detail(&u, "input_tokens_details", "cached_tokens");
    let reasoning = detail(&u, "output_tokens_details", "reasoning_tokens");
    u.shift_remove("input_tokens");
    u.shift_remove("output_tokens");
    for (from, to) in [
        ("input_tokens_details", "prompt_tokens_details"),
        ("output_tokens_details", "completion_tokens_details"),
    ] {
        if let Some(d) = u.shift_remove(from) {
            u.insert(to.into(), d);
        }
    }
    u.retain(|_, v| !v.is_null());
    Usage {
        input_tokens: input,
        output_tokens: output,
        reasoning_tokens: reasoning,
        cached_input_tokens: cached,
        extra: u.into(),
    }
}
