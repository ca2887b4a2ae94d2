//! A destination's HTTP answer read with a cap: neither the write gate's
//! [`HttpJsonExecutor`](crate::gate::HttpJsonExecutor) nor an HTTP lookup
//! holds an unbounded body in memory (a probe's destination streamed
//! 500 MB into every reconciler pass), as the providers' answers are
//! capped in `handover-providers`.

use bytes::{Bytes, BytesMut};

/// The largest destination answer read: a created record or a lookup's
/// list of matches is kilobytes; this refuses a runaway.
pub(crate) const DESTINATION_BODY_BYTES: usize = 4 * 1024 * 1024;

/// How much of a refusal or failure body is kept (as the evidence): the
/// status has said what happened; the text only explains it.
pub(crate) const ERROR_BODY_BYTES: usize = 64 * 1024;

/// A body read up to a cap.
#[derive(Debug)]
pub(crate) enum Capped {
    /// The whole body.
    Whole(Bytes),
    /// The body was longer: its first `limit` bytes; the rest never read.
    Cut(Bytes),
}

/// Reads at most `limit` bytes of `response`'s body (the request's own
/// timeout still bounds the wait).
pub(crate) async fn read(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Capped, reqwest::Error> {
    let mut body = BytesMut::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok(Capped::Cut(body.freeze()));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Capped::Whole(body.freeze()))
}

impl Capped {
    /// The body as text (lossy), saying when it was cut.
    pub(crate) fn text(&self) -> String {
        match self {
            Capped::Whole(b) => String::from_utf8_lossy(b).into_owned(),
            Capped::Cut(b) => format!(
                "{}... (cut: the answer is over {} bytes)",
                String::from_utf8_lossy(b),
                b.len()
            ),
        }
    }
}
