//! The one place an HTTP request is sent: send gate, deadlines, error
//! classification. Used directly for streams and, wrapped as a tower
//! service, by async-openai for non-streaming calls.
//!
//! Nothing here retries. hyper may re-dispatch a request on a fresh
//! connection only when a pooled connection closed before the request was
//! written, so at most one request reaches the server per call.

use std::sync::Arc;

use bytes::Bytes;
use http::HeaderMap;
use secrecy::SecretString;
use tokio::time::{Instant, timeout_at};

use crate::{
    classify,
    error::{ProviderError, TimeoutPhase},
    gate::{SendCounter, SendInfo},
    settings::Timeouts,
};

/// Per-provider, shared by every call.
pub(crate) struct Endpoint {
    pub(crate) provider: Arc<str>,
    pub(crate) http: reqwest::Client,
    pub(crate) url: String,
    /// `Authorization` (marked sensitive) if a key is configured.
    pub(crate) headers: HeaderMap,
    pub(crate) key: Option<SecretString>,
    pub(crate) timeouts: Timeouts,
}

/// Per-call state.
pub(crate) struct Call {
    pub(crate) gate: Option<Arc<dyn SendCounter>>,
    pub(crate) info: SendInfo,
    pub(crate) timeouts: Timeouts,
    pub(crate) started: Instant,
}

impl Call {
    pub(crate) fn total_deadline(&self) -> Instant {
        self.started + self.timeouts.total
    }
}

/// A response whose status was 2xx.
pub(crate) struct Opened {
    pub(crate) response: reqwest::Response,
    pub(crate) status: u16,
    pub(crate) request_id: Option<String>,
    pub(crate) headers_at: Instant,
}

impl Endpoint {
    fn timeout(&self, phase: TimeoutPhase, after: std::time::Duration) -> ProviderError {
        ProviderError::Timeout {
            provider: self.provider.to_string(),
            phase,
            after,
            events: 0,
        }
    }

    /// Sends `request` once and waits for a 2xx response's headers. Error
    /// statuses are read, classified and returned as errors.
    pub(crate) async fn open(
        &self,
        call: &Call,
        request: reqwest::Request,
    ) -> Result<Opened, ProviderError> {
        if let Some(gate) = &call.gate {
            gate.before_send(&call.info)
                .map_err(|refused| ProviderError::SendRefused {
                    provider: self.provider.to_string(),
                    refused,
                })?;
        }
        let t = call.timeouts;
        let (deadline, phase, after) = if t.first_byte <= t.total {
            (
                call.started + t.first_byte,
                TimeoutPhase::FirstByte,
                t.first_byte,
            )
        } else {
            (call.total_deadline(), TimeoutPhase::Total, t.total)
        };
        let response = match timeout_at(deadline, self.http.execute(request)).await {
            Err(_) => return Err(self.timeout(phase, after)),
            Ok(Err(e)) => return Err(self.send_error(call, e)),
            Ok(Ok(r)) => r,
        };
        let headers_at = Instant::now();
        let status = response.status().as_u16();
        let request_id = classify::request_id(response.headers());
        if response.status().is_success() {
            return Ok(Opened {
                response,
                status,
                request_id,
                headers_at,
            });
        }
        let retry_after = classify::retry_after(response.headers());
        let body = self.read_body(call, response, status).await?;
        Err(ProviderError::Api {
            provider: self.provider.to_string(),
            failure: Box::new(classify::api_failure(
                status,
                &body,
                retry_after,
                self.key.as_ref(),
            )),
            events: 0,
            request_id,
        })
    }

    /// Reads a whole body within the call's total deadline.
    pub(crate) async fn read_body(
        &self,
        call: &Call,
        response: reqwest::Response,
        status: u16,
    ) -> Result<Bytes, ProviderError> {
        match timeout_at(call.total_deadline(), response.bytes()).await {
            Err(_) => Err(self.timeout(TimeoutPhase::Total, call.timeouts.total)),
            Ok(Err(source)) => Err(ProviderError::ConnectionLost {
                provider: self.provider.to_string(),
                status: Some(status),
                source,
            }),
            Ok(Ok(b)) => Ok(b),
        }
    }

    fn send_error(&self, call: &Call, e: reqwest::Error) -> ProviderError {
        if e.is_connect() {
            // Nothing was written: give the gate its slot back.
            if let Some(gate) = &call.gate {
                gate.not_sent(&call.info);
            }
            if e.is_timeout() {
                return self.timeout(TimeoutPhase::Connect, self.timeouts.connect);
            }
            return ProviderError::Connect {
                provider: self.provider.to_string(),
                source: e,
            };
        }
        if e.is_builder() {
            return ProviderError::Other {
                provider: self.provider.to_string(),
                detail: format!("could not build the http request: {e}"),
            };
        }
        ProviderError::ConnectionLost {
            provider: self.provider.to_string(),
            status: None,
            source: e,
        }
    }
}

/// The tower service async-openai executes requests through: exactly one
/// [`Endpoint::open`] per request, the body read and decoded under our
/// deadlines, errors returned as [`ProviderError`] inside
/// `OpenAIError::Boxed`. Installed with `with_http_service` as the last
/// builder call, so async-openai's retry layer is never in the stack.
#[derive(Clone)]
pub(crate) struct TransportService {
    pub(crate) endpoint: Arc<Endpoint>,
    pub(crate) call: Arc<Call>,
    /// The decoded answer and request id, handed back to the adapter.
    pub(crate) slot: Arc<std::sync::Mutex<Option<Decoded>>>,
    pub(crate) requested_model: Arc<str>,
}

/// What the service decoded from a 2xx body, with the HTTP status.
pub(crate) type Decoded = (crate::types::ChatResponse, u16);

type BoxFut = std::pin::Pin<
    Box<
        dyn std::future::Future<
                Output = Result<reqwest::Response, async_openai::error::OpenAIError>,
            > + Send,
    >,
>;

impl tower::Service<async_openai::middleware::HttpRequestFactory> for TransportService {
    type Response = reqwest::Response;
    type Error = async_openai::error::OpenAIError;
    type Future = BoxFut;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: async_openai::middleware::HttpRequestFactory) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let boxed = |e: ProviderError| async_openai::error::OpenAIError::Boxed(Box::new(e));
            let request = factory.build().await?;
            let ep = &this.endpoint;
            let opened = ep.open(&this.call, request).await.map_err(boxed)?;
            let body = ep
                .read_body(&this.call, opened.response, opened.status)
                .await
                .map_err(boxed)?;
            // Decode here, not in async-openai: its decoder logs raw bodies
            // on failure, and it would drop the request id.
            let wire: crate::wire::WireResponse =
                serde_json::from_slice(&body).map_err(|source| {
                    boxed(ProviderError::Decode {
                        provider: ep.provider.to_string(),
                        source,
                    })
                })?;
            let decoded = wire.into_response(&this.requested_model, opened.request_id);
            if let Ok(mut slot) = this.slot.lock() {
                *slot = Some((decoded, opened.status));
            }
            let rebuilt = http::Response::builder()
                .status(opened.status)
                .body(body)
                .map_err(|e| {
                    boxed(ProviderError::Other {
                        provider: ep.provider.to_string(),
                        detail: format!("could not rebuild the response: {e}"),
                    })
                })?;
            Ok(reqwest::Response::from(rebuilt))
        })
    }
}
