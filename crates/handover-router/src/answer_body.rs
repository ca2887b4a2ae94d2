//! How much of a destination's HTTP answer is read: neither the write
//! gate's [`HttpJsonExecutor`](crate::gate::HttpJsonExecutor) nor an HTTP
//! lookup holds an unbounded body in memory (a probe's destination
//! streamed 500 MB into every reconciler pass). The reader is the
//! providers' own ([`handover_providers::capped`]).

pub(crate) use handover_providers::capped::{Capped, read};

/// The largest destination answer read: a created record or a lookup's
/// list of matches is kilobytes; this refuses a runaway.
pub(crate) const DESTINATION_BODY_BYTES: usize = 4 * 1024 * 1024;

/// How much of a refusal or failure body is kept (as the evidence): the
/// status has said what happened; the text only explains it. Room is left
/// under the ledger's text limit for what the gate says around it, so
/// the evidence is recorded whole, with its own note of the cut.
pub(crate) const ERROR_BODY_BYTES: usize = handover_ledger::MAX_TEXT_BYTES - 1024;

/// A body as text (lossy), saying when it was cut.
pub(crate) fn text(body: &Capped) -> String {
    match body {
        Capped::Whole(b) => String::from_utf8_lossy(b).into_owned(),
        Capped::Cut(b) => format!(
            "{}... (cut: the answer is over {} bytes)",
            String::from_utf8_lossy(b),
            b.len()
        ),
    }
}
