//! The one place an HTTP request is sent: send gate, deadlines, error
//! classification, for plain and streamed calls alike.
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
    dialect::Dialect,
    error::{ProviderError, TimeoutPhase},
    gate::{SendCounter, SendInfo},
    settings::Timeouts,
};

/// Per-provider, shared by every call.
pub(crate) struct Endpoint {
    pub(crate) provider: Arc<str>,
    pub(crate) http: reqwest::Client,
    /// URL, body, answer and error shapes of the provider's kind.
    pub(crate) dialect: Box<dyn Dialect>,
    /// The dialect's headers (authentication marked sensitive).
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
        let (headers, headers_phase) = t.headers(call.info.stream);
        let (deadline, phase, after) = if headers <= t.total {
            (call.started + headers, headers_phase, headers)
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
            failure: Box::new(
                self.dialect
                    .failure(status, &body, retry_after, self.key.as_ref()),
            ),
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
