//! OpenAI Chat Completions and the kinds that speak it: DeepSeek (its
//! additions live in `wire.rs`), any OpenAI-compatible endpoint, and Azure
//! OpenAI (deployment URL, `api-version` query, `api-key` header).

use super::Untranslatable;
use crate::sse::Event;
use http::{HeaderMap, HeaderName, header};
use secrecy::{ExposeSecret, SecretString};

use super::{
    BodyError, CallUrl, Decoded, Dialect, StreamDecoder, fixed_url, path_segment, secret_header,
};
use crate::{
    error::ProviderError,
    request::ChatRequest,
    settings::{ProviderKind, ProviderSettings},
    types::{ChatResponse, StreamEvent},
    wire::{ChunkHistory, Shape, WireChunk, WireError, WireResponse, request_body},
};

pub(crate) struct OpenAiDialect {
    settings: ProviderSettings,
    base_url: String,
    /// `{base}/chat/completions`, the URL of every call but Azure's
    /// (whose deployment, the model, is in the path).
    completions: reqwest::Url,
}

impl OpenAiDialect {
    pub(crate) fn new(settings: &ProviderSettings) -> Result<Self, ProviderError> {
        let base_url = settings.base_url.trim_end_matches('/').to_owned();
        Ok(Self {
            completions: fixed_url(&format!("{base_url}/chat/completions"))?,
            base_url,
            settings: settings.clone(),
        })
    }
}

impl Dialect for OpenAiDialect {
    fn url(&self, model: &str, _stream: bool) -> CallUrl {
        let base = &self.base_url;
        match (self.settings.kind, self.settings.api_version()) {
            (ProviderKind::AzureOpenAi, Some(v)) => {
                let deployment = path_segment(model);
                CallUrl::PerCall(format!(
                    "{base}/openai/deployments/{deployment}/chat/completions?api-version={v}"
                ))
            }
            _ => CallUrl::Fixed(self.completions.clone()),
        }
    }

    fn headers(&self, key: Option<&SecretString>) -> Result<HeaderMap, ProviderError> {
        auth_headers(self.settings.kind, key)
    }

    fn body(
        &self,
        req: &ChatRequest,
        model: &str,
        stream: bool,
    ) -> Result<Vec<u8>, Untranslatable> {
        let shape = Shape {
            kind: self.settings.kind,
            passback: self.settings.passback_for(model),
            stream_usage: self.settings.stream_usage,
        };
        Ok(request_body(req, model, shape, stream)?)
    }

    fn response(
        &self,
        body: &[u8],
        requested_model: &str,
        request_id: Option<String>,
    ) -> Result<ChatResponse, BodyError> {
        let wire: WireResponse = serde_json::from_slice(body)?;
        // A 200 without a choice is not an answer (nothing to pass on, no
        // reason it ended): a decode failure, which the policy's table
        // sends to the next provider, never an empty "answer".
        if !wire.has_choices() {
            return Err(BodyError::Decode(serde::de::Error::custom(
                "the answer has no choices",
            )));
        }
        Ok(wire.into_response(requested_model, request_id))
    }

    fn decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(ChunkDecoder::default())
    }
}

/// The key as OpenAI's APIs take it (both Chat Completions and Responses):
/// `Authorization: Bearer`, or Azure's `api-key` header.
pub(crate) fn auth_headers(
    kind: ProviderKind,
    key: Option<&SecretString>,
) -> Result<HeaderMap, ProviderError> {
    let mut headers = HeaderMap::new();
    if let Some(key) = key {
        let (name, value) = if kind == ProviderKind::AzureOpenAi {
            secret_header(HeaderName::from_static("api-key"), key.expose_secret())?
        } else {
            let bearer = format!("Bearer {}", key.expose_secret());
            secret_header(header::AUTHORIZATION, &bearer)?
        };
        headers.insert(name, value);
    }
    Ok(headers)
}

/// `data: {chunk}` events, `data: [DONE]` at the end, `{"error": ...}`
/// (or an `error` event) for an in-stream failure.
#[derive(Default)]
struct ChunkDecoder {
    history: ChunkHistory,
}

impl StreamDecoder for ChunkDecoder {
    fn decode(&mut self, event: &Event, out: &mut Vec<StreamEvent>) -> Decoded {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Decoded::Done;
        }
        let mut chunk: WireChunk = match serde_json::from_str(data) {
            Ok(c) => c,
            Err(e) => {
                return Decoded::Malformed(format!(
                    "event data is not a chat completion chunk: {e}"
                ));
            }
        };
        if let Some(error) = chunk.error.take().or_else(|| {
            (event.event == "error").then(|| serde_json::Value::String(data.to_owned()))
        }) {
            return Decoded::Error(WireError::from_value(error));
        }
        chunk.push_events(&mut self.history, out);
        Decoded::Data
    }
}
