//! The one place an HTTP request is sent: send gate, deadlines, error
//! classification, for plain and streamed calls alike.
//!
//! Nothing here retries. hyper may re-dispatch a request on a fresh
//! connection only when a pooled connection closed before the request was
//! written, so at most one request reaches the server per call.
//!
//! Bodies are read with a cap, as SSE events are (`sse::MAX_EVENT_BYTES`):
//! a provider (or whatever answers at its URL) cannot make the gateway
//! hold an unbounded body in memory. An answer past [`ANSWER_BODY_BYTES`]
//! fails as [`ProviderError::BodyTooLarge`] (class `decode`); an error
//! body is read to [`ERROR_BODY_BYTES`] and the rest left unread: the
//! status has already said what happened, and the message clients get is
//! short anyway.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
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

/// A body read up to a limit: all of it, or the limit's worth.
enum Capped {
    Whole(Bytes),
    Cut(Bytes),
}

/// A body being read: its one chunk so far, or a buffer once a second
/// chunk came.
enum Body {
    One(Bytes),
    More(BytesMut),
}

impl Default for Body {
    fn default() -> Self {
        Self::One(Bytes::new())
    }
}

impl Body {
    fn len(&self) -> usize {
        match self {
            Self::One(b) => b.len(),
            Self::More(b) => b.len(),
        }
    }

    fn push(&mut self, chunk: Bytes) {
        match self {
            Self::One(first) if first.is_empty() => *first = chunk,
            Self::One(first) => {
                let mut buf = BytesMut::with_capacity(first.len() + chunk.len());
                buf.extend_from_slice(first);
                buf.extend_from_slice(&chunk);
                *self = Self::More(buf);
            }
            Self::More(buf) => buf.extend_from_slice(&chunk),
        }
    }

    fn freeze(self) -> Bytes {
        match self {
            Self::One(b) => b,
            Self::More(b) => b.freeze(),
        }
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
        let read = async {
            // A body that arrives as one chunk (most answers) is that
            // chunk, not a copy: only a second chunk starts a buffer.
            let mut body = Body::default();
            while let Some(chunk) = response.chunk().await? {
                let room = limit - body.len();
                if chunk.len() > room {
                    body.push(chunk.slice(..room));
                    return Ok(Capped::Cut(body.freeze()));
                }
                body.push(chunk);
            }
            Ok(Capped::Whole(body.freeze()))
        };
        match timeout_at(call.total_deadline(), read).await {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_one_chunk_body_is_that_chunk_and_more_chunks_are_joined() {
        let chunk = Bytes::from_static(b"{\"id\":1}");
        let mut one = Body::default();
        one.push(Bytes::new());
        one.push(chunk.clone());
        let one = one.freeze();
        assert_eq!(one.as_ptr(), chunk.as_ptr(), "not copied");
        let mut more = Body::default();
        for part in [&b"{\"id\""[..], b":", b"1}"] {
            more.push(Bytes::copy_from_slice(part));
        }
        assert_eq!(more.len(), 8);
        assert_eq!(&more.freeze()[..], b"{\"id\":1}");
    }
}
