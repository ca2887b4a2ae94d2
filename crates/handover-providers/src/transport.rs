//! The one place an HTTP request is sent: send gate, deadlines, error
//! classification, for plain and streamed calls alike.
//!
//! Nothing here retries. Below us, a request is sent again only where the
//! server provably did not process it: hyper re-dispatches on a fresh
//! connection when a pooled one closed before the request was written, and
//! reqwest's default policy re-sends (at most twice) an HTTP/2 stream the
//! server refused (`REFUSED_STREAM`) or left unstarted under a graceful
//! `GOAWAY` (RFC 9113 §8.7). So at most one request is processed per call,
//! and the send gate counts it once.
//!
//! Bodies are read with a cap, as SSE events are (`sse::MAX_EVENT_BYTES`):
//! a provider (or whatever answers at its URL) cannot make the gateway
//! hold an unbounded body in memory. An answer past [`ANSWER_BODY_BYTES`]
//! fails as [`ProviderError::BodyTooLarge`] (class `decode`); an error
//! body is read to [`ERROR_BODY_BYTES`] and the rest left unread: the
//! status has already said what happened, and the message clients get is
//! short anyway.

use std::sync::Arc;

use bytes::Bytes;
use http::HeaderMap;
use secrecy::SecretString;
use tokio::time::{Instant, timeout_at};

use crate::{
    capped::{self, Capped},
    classify,
    dialect::Dialect,
    error::{ProviderError, TimeoutPhase},
    gate::{SendCounter, SendInfo},
    settings::Timeouts,
};

/// The largest 2xx body read: generous for any chat answer (the largest
/// output windows are a few MB of JSON), small enough to refuse a runaway.
pub(crate) const ANSWER_BODY_BYTES: usize = 32 * 1024 * 1024;

/// How much of an error body is read. Error objects are a few hundred
/// bytes; the code and param kept from them are bounded smaller still
/// (see `classify::failure_from`).
pub(crate) const ERROR_BODY_BYTES: usize = 64 * 1024;

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
        let body = match self
            .read_capped(call, response, status, ERROR_BODY_BYTES)
            .await?
        {
            Capped::Whole(body) | Capped::Cut(body) => body,
        };
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

    /// Reads a whole 2xx body within the call's total deadline, refusing
    /// one past [`ANSWER_BODY_BYTES`].
    pub(crate) async fn read_body(
        &self,
        call: &Call,
        response: reqwest::Response,
        status: u16,
    ) -> Result<Bytes, ProviderError> {
        match self
            .read_capped(call, response, status, ANSWER_BODY_BYTES)
            .await?
        {
            Capped::Whole(body) => Ok(body),
            Capped::Cut(_) => Err(ProviderError::BodyTooLarge {
                provider: self.provider.to_string(),
                status,
                limit: ANSWER_BODY_BYTES,
            }),
        }
    }

    /// Reads at most `limit` bytes of a body within the call's total
    /// deadline; a longer body is cut there and the rest never read.
    async fn read_capped(
        &self,
        call: &Call,
        mut response: reqwest::Response,
        status: u16,
        limit: usize,
    ) -> Result<Capped, ProviderError> {
        match timeout_at(call.total_deadline(), capped::read(&mut response, limit)).await {
            Err(_) => Err(self.timeout(TimeoutPhase::Total, call.timeouts.total)),
            Ok(Err(source)) => Err(ProviderError::ConnectionLost {
                provider: self.provider.to_string(),
                status: Some(status),
                source,
            }),
            Ok(Ok(body)) => Ok(body),
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
