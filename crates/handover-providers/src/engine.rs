//! The engine all three adapters share: request shaping by dialect,
//! non-streaming calls through async-openai, streaming calls through reqwest
//! and our SSE state machine.
//!
//! Why two paths: async-openai's stream API ends silently on `[DONE]` *and*
//! on a closed connection, stringifies transport errors and drops headers,
//! so streams use reqwest + eventsource-stream directly with our semantics.
//! Its non-streaming path is used as intended, with our transport installed
//! as its tower service (so its retry layer is gone and we see headers).

use std::sync::{Arc, Mutex};

use async_openai::{Client, config::Config, error::OpenAIError};
use http::{HeaderMap, HeaderValue, header};
use secrecy::{ExposeSecret, SecretString};
use tokio::time::Instant;
use tracing::Instrument;

use crate::{
    assemble::ChatStream,
    error::ProviderError,
    gate::{CallOptions, SendInfo},
    settings::{ProviderKind, ProviderSettings},
    stream::{SseSetup, sse},
    telemetry,
    transport::{Call, Endpoint, TransportService},
    types::{ChatRequest, ChatResponse},
    wire::{Dialect, wire_request},
};

/// async-openai `Config` for one provider. Never reads the environment
/// (unlike `OpenAIConfig::default()`).
#[derive(Clone)]
struct EndpointConfig {
    base_url: Arc<str>,
    headers: HeaderMap,
    key: SecretString,
}

impl Config for EndpointConfig {
    fn headers(&self) -> HeaderMap {
        self.headers.clone()
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    fn query(&self) -> Vec<(&str, &str)> {
        Vec::new()
    }

    fn api_base(&self) -> &str {
        &self.base_url
    }

    fn api_key(&self) -> &SecretString {
        &self.key
    }
}

/// Shared implementation behind every adapter.
pub(crate) struct Engine {
    endpoint: Arc<Endpoint>,
    settings: ProviderSettings,
    config: EndpointConfig,
}

impl Engine {
    pub(crate) fn new(settings: ProviderSettings) -> Result<Self, ProviderError> {
        settings.validate()?;
        let http = reqwest::Client::builder()
            .connect_timeout(settings.timeouts.connect)
            .build()
            .map_err(|e| ProviderError::InvalidSettings {
                field: "http_client".into(),
                reason: format!("could not build the http client: {e}"),
            })?;
        let mut headers = HeaderMap::new();
        if let Some(key) = &settings.api_key {
            let mut v = HeaderValue::from_str(&format!("Bearer {}", key.expose_secret())).map_err(
                |_| ProviderError::InvalidSettings {
                    field: "api_key".into(),
                    reason: "contains characters not allowed in an http header".into(),
                },
            )?;
            v.set_sensitive(true);
            headers.insert(header::AUTHORIZATION, v);
        }
        let base_url: Arc<str> = settings.base_url.trim_end_matches('/').into();
        let endpoint = Endpoint {
            provider: settings.name.as_str().into(),
            http,
            url: format!("{base_url}/chat/completions"),
            headers: headers.clone(),
            key: settings.api_key.clone(),
            timeouts: settings.timeouts,
        };
        let config = EndpointConfig {
            base_url,
            headers,
            key: settings
                .api_key
                .clone()
                .unwrap_or_else(|| SecretString::from("")),
        };
        Ok(Self {
            endpoint: Arc::new(endpoint),
            settings,
            config,
        })
    }

    pub(crate) fn settings(&self) -> &ProviderSettings {
        &self.settings
    }

    fn prepare(&self, req: &ChatRequest, opts: &CallOptions, stream: bool) -> Prepared {
        let model = opts
            .model
            .clone()
            .unwrap_or_else(|| self.settings.model.clone());
        let dialect = Dialect {
            kind: self.settings.kind,
            passback: self.settings.passback_for(&model),
            stream_usage: self.settings.stream_usage,
        };
        let timeouts = opts.timeouts.unwrap_or(self.endpoint.timeouts);
        let call = Call {
            gate: opts.send_counter.clone(),
            info: SendInfo {
                provider: self.settings.name.clone(),
                model: model.clone(),
                stream,
                data_class: req.data_class.clone(),
            },
            timeouts,
            started: Instant::now(),
        };
        let span = telemetry::attempt_span(
            &self.settings.name,
            self.settings.kind.as_str(),
            &model,
            req,
            stream,
        );
        Prepared {
            model,
            dialect,
            call,
            span,
        }
    }

    /// Non-streaming: async-openai's `chat().create_byot` over our transport.
    pub(crate) async fn chat(
        &self,
        req: &ChatRequest,
        opts: &CallOptions,
    ) -> Result<ChatResponse, ProviderError> {
        req.validate()?;
        let p = self.prepare(req, opts, false);
        let span = p.span.clone();
        let result = async {
            let slot = Arc::new(Mutex::new(None));
            let service = TransportService {
                endpoint: self.endpoint.clone(),
                call: Arc::new(p.call),
                slot: slot.clone(),
                requested_model: p.model.as_str().into(),
            };
            // `with_http_service` last: it replaces the retrying executor.
            let client = Client::build(self.endpoint.http.clone(), self.config.clone())
                .with_http_service(service);
            let body = wire_request(req, &p.model, p.dialect, false);
            let sent: Result<serde::de::IgnoredAny, OpenAIError> =
                client.chat().create_byot(body).await;
            match sent {
                Ok(_) => slot.lock().ok().and_then(|mut s| s.take()).ok_or_else(|| {
                    ProviderError::Other {
                        provider: self.settings.name.clone(),
                        detail: "transport returned no decoded response".into(),
                    }
                }),
                Err(e) => Err(self.map_openai_error(e)),
            }
        }
        .instrument(span.clone())
        .await;
        match result {
            Ok((resp, status)) => {
                telemetry::record_status(&span, status, resp.request_id.as_deref());
                telemetry::record_response(&span, &resp);
                Ok(resp)
            }
            Err(e) => {
                let _g = span.enter();
                telemetry::record_error(&span, &e);
                tracing::debug!(error = %e, class = e.class().as_str(), "chat attempt failed");
                Err(e)
            }
        }
    }

    fn map_openai_error(&self, e: OpenAIError) -> ProviderError {
        match e {
            OpenAIError::Boxed(b) => match b.downcast::<ProviderError>() {
                Ok(pe) => *pe,
                Err(other) => ProviderError::Other {
                    provider: self.settings.name.clone(),
                    detail: format!("http service failed: {other}"),
                },
            },
            other => ProviderError::Other {
                provider: self.settings.name.clone(),
                detail: format!("async-openai failed: {other}"),
            },
        }
    }

    /// Streaming: one reqwest request, then our SSE state machine.
    pub(crate) async fn chat_stream(
        &self,
        req: &ChatRequest,
        opts: &CallOptions,
    ) -> Result<ChatStream, ProviderError> {
        req.validate()?;
        let p = self.prepare(req, opts, true);
        let span = p.span.clone();
        let opened =
            async {
                let body = serde_json::to_vec(&wire_request(req, &p.model, p.dialect, true))
                    .map_err(|e| ProviderError::InvalidRequest {
                        field: "request".into(),
                        reason: format!("could not serialise: {e}"),
                    })?;
                let request = self
                    .endpoint
                    .http
                    .post(&self.endpoint.url)
                    .headers(self.endpoint.headers.clone())
                    .header(header::CONTENT_TYPE, "application/json")
                    .header(header::ACCEPT, "text/event-stream")
                    .body(body)
                    .build()
                    .map_err(|e| ProviderError::Other {
                        provider: self.settings.name.clone(),
                        detail: format!("could not build the http request: {e}"),
                    })?;
                self.endpoint.open(&p.call, request).await
            }
            .instrument(span.clone())
            .await;
        let opened = match opened {
            Ok(o) => o,
            Err(e) => {
                let _g = span.enter();
                telemetry::record_error(&span, &e);
                tracing::debug!(error = %e, class = e.class().as_str(), "chat stream attempt failed");
                return Err(e);
            }
        };
        telemetry::record_status(&span, opened.status, opened.request_id.as_deref());
        let setup = SseSetup {
            provider: self.endpoint.provider.clone(),
            key: self.endpoint.key.clone(),
            timeouts: p.call.timeouts,
            total_deadline: p.call.total_deadline(),
            span,
        };
        let request_id = opened.request_id.clone();
        let events = sse(
            opened.response,
            opened.status,
            opened.request_id,
            opened.headers_at,
            setup,
        );
        Ok(ChatStream::new(events, request_id, p.model))
    }

    pub(crate) fn kind(&self) -> ProviderKind {
        self.settings.kind
    }
}

struct Prepared {
    model: String,
    dialect: Dialect,
    call: Call,
    span: tracing::Span,
}
