//! Request headers that name who calls, which operation or which task
//! (`Authorization`, `Idempotency-Key`, `x-handover-task`, ...) are read
//! only when given once: for a header sent twice, proxies and frameworks
//! disagree on which copy counts (the first, the last, both joined), so
//! the gateway refuses to pick one.

use axum::http::{HeaderMap, HeaderValue};

/// The one value of `name` (`None` without it), or `Err` with a message
/// naming the header when it is given more than once.
pub(crate) fn one<'a>(
    headers: &'a HeaderMap,
    name: &str,
) -> Result<Option<&'a HeaderValue>, String> {
    let mut values = headers.get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(format!("{name} is given twice; send it once"));
    }
    Ok(first)
}
