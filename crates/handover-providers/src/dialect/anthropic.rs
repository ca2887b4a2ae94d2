//! Anthropic's Messages API (`POST {base}/messages`, `x-api-key`,
//! `anthropic-version`), translated from and to the OpenAI shape.
//!
//! Requests: system messages become `system`; assistant `tool_calls`
//! become `tool_use` blocks and `tool` messages `tool_result` blocks in the
//! next user turn (consecutive turns of one role are merged, results first,
//! as the API requires); call ids are kept, or — where a foreign id has
//! characters Anthropic refuses — mapped by one deterministic function on
//! both sides so every result still attaches to its call. Answers:
//! `tool_use` becomes `tool_calls` (arguments as JSON text), stop reasons
//! map to finish reasons, usage counts cache reads and writes as input
//! (OpenAI's `prompt_tokens` includes cached tokens) and keeps Anthropic's
//! own counters verbatim. Requests are built in `anthropic_request.rs`,
//! streams read in `anthropic_stream.rs`.

use super::Untranslatable;
use http::{HeaderMap, HeaderName, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{
    BodyError, CallUrl, Dialect, StreamDecoder, anthropic_request::request_body,
    anthropic_stream::MessageDecoder, fixed_url, reported_model, secret_header,
};
use crate::{
    error::ProviderError,
    request::ChatRequest,
    settings::ProviderSettings,
    types::{ChatResponse, FinishReason, Passthrough, Usage},
};

pub(crate) struct AnthropicDialect {
    url: reqwest::Url,
    version: String,
}

impl AnthropicDialect {
    pub(crate) fn new(settings: &ProviderSettings) -> Result<Self, ProviderError> {
        Ok(Self {
            url: fixed_url(&format!(
                "{}/messages",
                settings.base_url.trim_end_matches('/')
            ))?,
            version: settings.api_version().unwrap_or("2023-06-01").to_owned(),
        })
    }
}

impl Dialect for AnthropicDialect {
    fn url(&self, _model: &str, _stream: bool) -> CallUrl {
        CallUrl::Fixed(self.url.clone())
    }

    fn headers(&self, key: Option<&SecretString>) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        let version =
            HeaderValue::from_str(&self.version).map_err(|_| ProviderError::InvalidSettings {
                field: "api_version".into(),
                reason: "contains characters not allowed in an http header".into(),
            })?;
        headers.insert(HeaderName::from_static("anthropic-version"), version);
        if let Some(key) = key {
            let (name, value) =
                secret_header(HeaderName::from_static("x-api-key"), key.expose_secret())?;
            headers.insert(name, value);
        }
        Ok(headers)
    }

    fn body(
        &self,
        req: &ChatRequest,
        model: &str,
        stream: bool,
    ) -> Result<Vec<u8>, Untranslatable> {
        Ok(serde_json::to_vec(&request_body(req, model, stream)?)?)
    }

    fn response(
        &self,
        body: &[u8],
        requested_model: &str,
        request_id: Option<String>,
    ) -> Result<ChatResponse, BodyError> {
        let m: WireMessage = serde_json::from_slice(body)?;
        Ok(m.into_response(requested_model, request_id))
    }

    fn decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(MessageDecoder::default())
    }
}

// ---- answers ----

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    content: Vec<WireBlock>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<Map<String, Value>>,
}

/// A content block of an answer.
#[derive(Deserialize)]
pub(crate) struct WireBlock {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    #[serde(default)]
    pub(crate) text: Option<String>,
    #[serde(default)]
    pub(crate) thinking: Option<String>,
    #[serde(default)]
    pub(crate) id: Option<String>,
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) input: Option<Value>,
}

impl WireMessage {
    fn into_response(self, requested_model: &str, request_id: Option<String>) -> ChatResponse {
        let mut content: Option<String> = None;
        let mut reasoning: Option<String> = None;
        let mut tool_calls = Vec::new();
        for b in self.content {
            match b.kind.as_str() {
                "text" => content
                    .get_or_insert_default()
                    .push_str(b.text.as_deref().unwrap_or("")),
                "thinking" => reasoning
                    .get_or_insert_default()
                    .push_str(b.thinking.as_deref().unwrap_or("")),
                "tool_use" => tool_calls.push(crate::request::ToolCall {
                    id: b.id.unwrap_or_default(),
                    name: b.name.unwrap_or_default(),
                    arguments: b.input.unwrap_or_else(|| json!({})).to_string(),
                    ..Default::default()
                }),
                _ => {}
            }
        }
        let mut passthrough = Passthrough::default();
        if let Some(id) = self.id {
            passthrough.top.insert("id", &id.into());
        }
        ChatResponse {
            content,
            tool_calls,
            reasoning_content: reasoning,
            finish_reason: self.stop_reason.as_deref().map(finish_reason),
            usage: self.usage.map(usage),
            model: reported_model(self.model, requested_model),
            request_id,
            passthrough,
        }
    }
}

/// Anthropic's `stop_reason` as a finish reason.
pub(crate) fn finish_reason(stop: &str) -> FinishReason {
    match stop {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// Anthropic usage: `input_tokens` excludes cache reads and writes, which
/// OpenAI's `prompt_tokens` includes, so input is their sum; cache reads
/// are the cached input. Anthropic's counters stay in `extra`.
pub(crate) fn usage(mut u: Map<String, Value>) -> Usage {
    let n = |u: &Map<String, Value>, k: &str| u.get(k).and_then(Value::as_u64);
    let read = n(&u, "cache_read_input_tokens");
    let input = n(&u, "input_tokens").unwrap_or(0)
        + n(&u, "cache_creation_input_tokens").unwrap_or(0)
        + read.unwrap_or(0);
    let output = n(&u, "output_tokens").unwrap_or(0);
    u.shift_remove("input_tokens");
    u.shift_remove("output_tokens");
    u.retain(|_, v| !v.is_null());
    Usage {
        input_tokens: input,
        output_tokens: output,
        reasoning_tokens: None,
        cached_input_tokens: read,
        extra: u.into(),
    }
}
