//! The seam between the one engine and each vendor's wire format.
//!
//! Every adapter shares one transport (`transport.rs`: send counter,
//! deadlines, exactly one HTTP request per call) and one stream state
//! machine (`stream.rs`: keep-alives are not progress, cut and stalled
//! streams are errors). What differs per kind is only *shape*, and a
//! [`Dialect`] holds all of it: the URL and the authentication headers, the
//! request body built from the OpenAI-shaped [`ChatRequest`], a whole
//! answer parsed into the OpenAI-shaped [`ChatResponse`], SSE events parsed
//! into [`StreamEvent`]s (or keep-alive, end, in-stream error), and error
//! bodies into an [`ApiFailure`]. Dialects are pure: no I/O, no clocks.

mod anthropic;
mod anthropic_request;
mod anthropic_stream;
mod gemini;
mod gemini_answer;
mod gemini_stream;
mod openai;
mod responses;
mod responses_params;
mod responses_request;
mod responses_stream;
mod translate;
pub(crate) use translate::Untranslatable;

use std::time::Duration;

use crate::sse::Event;
use http::{HeaderMap, HeaderName, HeaderValue};
use secrecy::SecretString;

use crate::{
    api::OpenAiApi,
    classify,
    error::{ApiFailure, ProviderError},
    request::ChatRequest,
    settings::{ProviderKind, ProviderSettings},
    types::{ChatResponse, StreamEvent},
    wire::WireError,
};

/// Where one call goes. A URL that is the same for every call is parsed
/// once, when the provider is built: parsing it per request cost about
/// 6,600 instructions, 3 % of everything the gateway did with a call.
pub(crate) enum CallUrl {
    /// The same for every call.
    Fixed(reqwest::Url),
    /// Built for this call (the model or the stream mode is in the path).
    PerCall(String),
}

/// Parses a URL that will serve every call; a settings error on `base_url`
/// (which it is built from) if it does not parse.
pub(crate) fn fixed_url(text: &str) -> Result<reqwest::Url, ProviderError> {
    reqwest::Url::parse(text).map_err(|e| ProviderError::InvalidSettings {
        field: "base_url".into(),
        reason: format!("does not make a valid endpoint URL: {e}"),
    })
}

/// One vendor's wire format.
pub(crate) trait Dialect: Send + Sync {
    /// The URL of one call (some vendors put the model or the stream mode
    /// in the path).
    fn url(&self, model: &str, stream: bool) -> CallUrl;

    /// Headers sent with every request (authentication marked sensitive,
    /// version pins). Built once per provider.
    fn headers(&self, key: Option<&SecretString>) -> Result<HeaderMap, ProviderError>;

    /// The request body for `model`, as JSON bytes.
    fn body(&self, req: &ChatRequest, model: &str, stream: bool)
    -> Result<Vec<u8>, Untranslatable>;

    /// A whole 2xx answer as the neutral response.
    fn response(
        &self,
        body: &[u8],
        requested_model: &str,
        request_id: Option<String>,
    ) -> Result<ChatResponse, BodyError>;

    /// A fresh decoder for one stream.
    fn decoder(&self) -> Box<dyn StreamDecoder>;

    /// The failure an error response (status, body) stands for.
    fn failure(
        &self,
        status: u16,
        body: &[u8],
        retry_after: Option<Duration>,
        key: Option<&SecretString>,
    ) -> ApiFailure {
        classify::api_failure(status, body, retry_after, key)
    }
}

/// Why a 2xx body is not an answer.
pub(crate) enum BodyError {
    /// It is not what the vendor documents.
    Decode(serde_json::Error),
    /// It is the vendor's own report of a failure (a Responses API
    /// `status: "failed"`): classified like an error status.
    Failed(WireError),
}

impl From<serde_json::Error> for BodyError {
    fn from(e: serde_json::Error) -> Self {
        BodyError::Decode(e)
    }
}

/// Turns the SSE events of one stream into [`StreamEvent`]s. Stateful:
/// some vendors announce a tool call once and send its arguments by index.
pub(crate) trait StreamDecoder: Send {
    /// Decodes one SSE event, appending what it says to `out`.
    fn decode(&mut self, event: &Event, out: &mut Vec<StreamEvent>) -> Decoded;
}

/// What one SSE event was.
pub(crate) enum Decoded {
    /// Data: progress (events, if any, were appended).
    Data,
    /// A vendor keep-alive (Anthropic `ping`): never progress, never resets
    /// a deadline.
    KeepAlive,
    /// The vendor's end-of-stream marker (`[DONE]`, `message_stop`).
    Done,
    /// An in-stream error object: the stream is broken.
    Error(WireError),
    /// Data that is not what the vendor documents (not terminal).
    Malformed(String),
}

/// The dialect of `settings.kind` (and, for OpenAI and Azure, `settings.api`).
pub(crate) fn for_settings(settings: &ProviderSettings) -> Result<Box<dyn Dialect>, ProviderError> {
    match settings.kind {
        ProviderKind::OpenAi | ProviderKind::AzureOpenAi
            if settings.api == OpenAiApi::Responses =>
        {
            Ok(Box::new(responses::ResponsesDialect::new(settings)?))
        }
        ProviderKind::OpenAi
        | ProviderKind::DeepSeek
        | ProviderKind::OpenAiCompatible
        | ProviderKind::AzureOpenAi => Ok(Box::new(openai::OpenAiDialect::new(settings)?)),
        ProviderKind::Anthropic => Ok(Box::new(anthropic::AnthropicDialect::new(settings)?)),
        ProviderKind::Gemini => Ok(Box::new(gemini::GeminiDialect::new(settings))),
    }
}

/// The model the provider reported, or the requested one if it reported
/// none (an answer always names the model that answered).
pub(crate) fn reported_model(reported: Option<String>, requested: &str) -> String {
    reported
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| requested.to_owned())
}

/// An SSE event's JSON (data that is not JSON is malformed).
pub(crate) fn event_json(event: &Event) -> Result<serde_json::Value, Decoded> {
    serde_json::from_str(event.data.trim())
        .map_err(|e| Decoded::Malformed(format!("event data is not JSON: {e}")))
}

/// An event's type: its `type` field (vendors that name their SSE events
/// repeat the name there), else the SSE `event:` name.
pub(crate) fn event_type<'e>(v: &'e serde_json::Value, event: &'e Event) -> &'e str {
    v.get("type")
        .and_then(serde_json::Value::as_str)
        .unwrap_or(event.event.as_str())
}

/// `s` as one URL path segment (percent-encoded): an Azure deployment, a
/// Gemini model.
pub(crate) fn path_segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A header whose value is a secret: marked sensitive, so it never reaches
/// Debug output; the error never shows the value.
pub(crate) fn secret_header(
    name: HeaderName,
    value: &str,
) -> Result<(HeaderName, HeaderValue), ProviderError> {
    let mut v = HeaderValue::from_str(value).map_err(|_| ProviderError::InvalidSettings {
        field: "api_key".into(),
        reason: "contains characters not allowed in an http header".into(),
    })?;
    v.set_sensitive(true);
    Ok((name, v))
}
