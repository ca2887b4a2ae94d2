//! A ready executor for destinations that take a JSON POST: the common case
//! of a REST API that creates a record.

use futures::future::BoxFuture;
use serde_json::Value;

use super::executor::{DispatchContext, Executor, ExecutorError, ExecutorOutcome};
use crate::answer_body::{self, Capped, DESTINATION_BODY_BYTES, ERROR_BODY_BYTES};

/// POSTs the approved parameters as JSON to one URL, with the destination
/// idempotency key in the contract's header (when the action has one), and
/// classifies the answer carefully:
///
/// * 2xx → confirmed, with the JSON body (or the text) as the result;
/// * 4xx → rejected (the destination refused it) — except 408, 409, 425 and
///   429, whose meaning for an effect is unclear (409 may even mean "it
///   already exists"): those, every 5xx and any transport error after the
///   connection was made leave the outcome **unknown**;
/// * an answer from another URL than the one posted to (the client followed
///   a redirect: a 302/303 turns the POST into a GET of some other page)
///   → **unknown**, whatever its status;
/// * a failure to connect → not sent (the operation may be claimed again);
/// * a 2xx body over 4 MiB → **unknown** (the result cannot be recorded);
///   of a refusal or failure the first 64 KiB are kept as the evidence.
///
/// ```
/// use handover_router::gate::HttpJsonExecutor;
///
/// let ship = HttpJsonExecutor::new(reqwest::Client::new(), "https://shipping.example/v1/shipments")
///     .with_reference_field("reference");
/// # let _ = ship;
/// ```
#[derive(Debug, Clone)]
pub struct HttpJsonExecutor {
    client: reqwest::Client,
    url: String,
    reference_field: Option<String>,
}

impl HttpJsonExecutor {
    /// An executor POSTing to `url` with `client`.
    pub fn new(client: reqwest::Client, url: impl Into<String>) -> Self {
        Self {
            client,
            url: url.into(),
            reference_field: None,
        }
    }

    /// Also writes the destination key into this top-level body field (for
    /// destinations without idempotency keys, so a lookup can find the
    /// record by it). The parameters must then be a JSON object.
    pub fn with_reference_field(mut self, field: impl Into<String>) -> Self {
        self.reference_field = Some(field.into());
        self
    }
}

/// Whether a 4xx status definitively means "not applied".
fn definitive_refusal(status: u16) -> bool {
    (400..500).contains(&status) && !matches!(status, 408 | 409 | 425 | 429)
}

impl Executor for HttpJsonExecutor {
    fn execute(
        &self,
        ctx: DispatchContext,
    ) -> BoxFuture<'static, Result<ExecutorOutcome, ExecutorError>> {
        let this = self.clone();
        Box::pin(async move {
            let mut body = ctx.params;
            if let (Some(field), Some(obj)) = (&this.reference_field, body.as_object_mut()) {
                obj.insert(field.clone(), Value::String(ctx.destination_key.clone()));
            }
            let posted = reqwest::Url::parse(&this.url)
                // Not echoed: the URL may carry a credential.
                .map_err(|e| {
                    ExecutorError::not_sent(format!("the destination URL does not parse: {e}"))
                })?;
            let mut req = this
                .client
                .post(posted.clone())
                .timeout(ctx.remaining)
                .json(&body);
            if let Some(header) = &ctx.idempotency_header {
                req = req.header(header.as_str(), ctx.destination_key.as_str());
            }
            let mut resp = req
                .send()
                .await
                .map_err(|e| ExecutorError::from_reqwest(&e))?;
            // A client that follows redirects (reqwest's default) may have
            // turned the POST into a GET of another page (302, 303) or sent
            // it on elsewhere (307, 308): whatever that answers says nothing
            // sure about the write, not even a 4xx. Unknown, for a lookup or
            // an operator to settle; never confirmed or rejected.
            if resp.url().as_str() != posted.as_str() {
                return Err(ExecutorError::maybe_sent(format!(
                    "destination redirected the write to {}; its answer does not settle it",
                    resp.url()
                )));
            }
            let status = resp.status();
            let limit = if status.is_success() {
                DESTINATION_BODY_BYTES
            } else {
                ERROR_BODY_BYTES
            };
            let body = answer_body::read(&mut resp, limit)
                .await
                .map_err(|e| ExecutorError::from_reqwest(&e))?;
            if status.is_success() {
                // The write succeeded, but a result this large cannot be
                // read or recorded: unknown, for a lookup to settle with
                // the record, never a confirmation with a made-up result.
                let Capped::Whole(bytes) = body else {
                    return Err(ExecutorError::maybe_sent(format!(
                        "destination answered {status} with a body over {DESTINATION_BODY_BYTES} bytes: \
                         too large to record as the result"
                    )));
                };
                let result = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
                    Value::String(String::from_utf8_lossy(&bytes).into_owned())
                });
                Ok(ExecutorOutcome::Confirmed(result))
            } else if definitive_refusal(status.as_u16()) {
                Ok(ExecutorOutcome::Rejected {
                    reason: format!("destination answered {status}"),
                    evidence: Some(answer_body::text(&body)),
                })
            } else {
                Err(ExecutorError::maybe_sent(format!(
                    "destination answered {status}: {}",
                    answer_body::text(&body)
                )))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::definitive_refusal;

    #[test]
    fn only_clear_refusals_count_as_not_applied() {
        for s in [400, 401, 403, 404, 422] {
            assert!(definitive_refusal(s), "{s}");
        }
        // Unclear for an effect (409 may mean "already exists"), or not a refusal at all.
        for s in [200, 408, 409, 425, 429, 500, 502, 503] {
            assert!(!definitive_refusal(s), "{s}");
        }
    }
}
