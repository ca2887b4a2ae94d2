//! The engine every adapter shares: request shaping by dialect, then
//! one request through [`Endpoint::open`]; a plain answer is read and
//! decoded whole, a stream goes through our SSE state machine.
//!
//! Why not async-openai's client: its stream API ends silently on `[DONE]`
//! *and* on a closed connection, stringifies transport errors and drops
//! headers, and its typed requests and answers cannot carry fields it does
//! not know (see `docs/decisions.md`), so both paths send the one request
//! schema with reqwest directly.

use std::sync::Arc;

use http::header;
use tokio::time::Instant;
use tracing::Instrument;

use crate::{
    assemble::ChatStream,
    classify,
    dialect::{self, BodyError, CallUrl},
    error::ProviderError,
    gate::{CallOptions, SendInfo},
    request::ChatRequest,
    settings::{ProviderKind, ProviderSettings},
    stream::{SseSetup, sse},
    telemetry,
    transport::{Call, Endpoint, Opened},
    types::ChatResponse,
};

/// Shared implementation behind every adapter.
pub(crate) struct Engine {
    endpoint: Arc<Endpoint>,
    settings: ProviderSettings,
}

impl Engine {
    pub(crate) fn new(settings: ProviderSettings) -> Result<Self, ProviderError> {
        settings.validate()?;
        let http = reqwest::Client::builder()
            .connect_timeout(settings.timeouts.connect)
            // A redirect is the provider's answer, not something to follow:
            // reqwest would carry `x-api-key` / `x-goog-api-key` to another
            // host (it strips only `Authorization` and cookies) and send the
            // request a second time past the send counter.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ProviderError::InvalidSettings {
                field: "http_client".into(),
                reason: format!("could not build the http client: {e}"),
            })?;
        let dialect = dialect::for_settings(&settings)?;
        let headers = dialect.headers(settings.api_key.as_ref())?;
        let endpoint = Endpoint {
            provider: settings.name.as_str().into(),
            http,
            dialect,
            headers,
            key: settings.api_key.clone(),
            timeouts: settings.timeouts,
        };
        Ok(Self {
            endpoint: Arc::new(endpoint),
            settings,
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
            opts.attempt,
        );
        Prepared { model, call, span }
    }

    /// Sends the request body once; `Ok` is a 2xx response's headers.
    async fn open(
        &self,
        req: &ChatRequest,
        p: &Prepared,
        stream: bool,
    ) -> Result<Opened, ProviderError> {
        let dialect = &self.endpoint.dialect;
        let body =
            dialect
                .body(req, &p.model, stream)
                .map_err(|e| ProviderError::Untranslatable {
                    provider: self.settings.name.clone(),
                    field: e.field,
                    reason: e.reason,
                })?;
        let accept = if stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let http = &self.endpoint.http;
        // A per-call URL is parsed by reqwest, its error reported below.
        let request = match dialect.url(&p.model, stream) {
            CallUrl::Fixed(url) => http.post(url),
            CallUrl::PerCall(text) => http.post(text),
        };
        let request = request
            .headers(self.endpoint.headers.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, accept)
            .body(body)
            .build()
            .map_err(|e| ProviderError::Other {
                provider: self.settings.name.clone(),
                detail: format!("could not build the http request: {e}"),
            })?;
        self.endpoint.open(&p.call, request).await
    }

    /// Non-streaming: one request, the body read within the call's
    /// deadline and decoded.
    pub(crate) async fn chat(
        &self,
        req: &ChatRequest,
        opts: &CallOptions,
    ) -> Result<ChatResponse, ProviderError> {
        req.validate()?;
        let p = self.prepare(req, opts, false);
        let span = p.span.clone();
        let result = async {
            let opened = self.open(req, &p, false).await?;
            let status = opened.status;
            let body = self
                .endpoint
                .read_body(&p.call, opened.response, status)
                .await?;
            let request_id = opened.request_id.clone();
            let resp = self
                .endpoint
                .dialect
                .response(&body, &p.model, opened.request_id)
                .map_err(|e| self.body_error(e, status, request_id))?;
            Ok((resp, status))
        }
        .instrument(span.clone())
        .await;
        match result {
            Ok((resp, status)) => {
                telemetry::record_response(&span, status, &resp);
                Ok(resp)
            }
            Err(e) => {
                let _g = span.enter();
                telemetry::record_error(&span, &e);
                tracing::debug!(error = %e.for_log(), class = e.class().as_str(), "chat attempt failed");
                Err(e)
            }
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
        let opened = self.open(req, &p, true).instrument(span.clone()).await;
        let opened = match opened {
            Ok(o) => o,
            Err(e) => {
                let _g = span.enter();
                telemetry::record_error(&span, &e);
                tracing::debug!(error = %e.for_log(), class = e.class().as_str(), "chat stream attempt failed");
                return Err(e);
            }
        };
        telemetry::record_status(&span, opened.status, opened.request_id.as_deref());
        let setup = SseSetup {
            provider: self.endpoint.provider.clone(),
            key: self.endpoint.key.clone(),
            decoder: self.endpoint.dialect.decoder(),
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

    /// A 2xx body that is no answer: undecodable, or the provider's own
    /// failure report (classified like an error status).
    fn body_error(&self, e: BodyError, status: u16, request_id: Option<String>) -> ProviderError {
        let provider = self.settings.name.clone();
        match e {
            BodyError::Decode(source) => ProviderError::Decode { provider, source },
            BodyError::Failed(error) => {
                let failure =
                    classify::failure_from(status, error, None, self.endpoint.key.as_ref());
                ProviderError::Api {
                    provider,
                    failure: Box::new(failure),
                    events: 0,
                    request_id,
                }
            }
        }
    }

    pub(crate) fn kind(&self) -> ProviderKind {
        self.settings.kind
    }
}

struct Prepared {
    model: String,
    call: Call,
    span: tracing::Span,
}
