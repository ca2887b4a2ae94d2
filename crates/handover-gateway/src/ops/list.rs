//! Lists of operations (`GET /v1/operations`, and the operators' list
//! across scopes), in pages bounded by count *and* by bytes.
//!
//! An operation carries up to 64 KiB of parameters and as much result, so
//! a page of 1,000 could be 130 MB, built in memory before a byte is
//! written — a few such lists at once took the process's memory with
//! them (fourth probe). A page therefore ends at [`PAGE_BYTES`] as well
//! as at `limit`, with `next` naming where to continue, and the ledger is
//! read [`CHUNK`] operations at a time while the page fills.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use handover_ledger::{ListFilter, OperationId};
use serde_json::json;

use super::query_error;
use super::wire::{self, ListQuery};
use crate::api_error::ApiError;
use crate::auth::Client;
use crate::state::GatewayState;

/// The most bytes of operations one page holds (one operation larger than
/// this still makes a page of its own, so every page moves on).
pub(crate) const PAGE_BYTES: usize = 4 * 1024 * 1024;

/// Operations read from the ledger at a time while a page fills.
const CHUNK: usize = 16;

pub(crate) async fn list(
    State(state): State<GatewayState>,
    client: Client,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(pairs) = query.map_err(query_error)?;
    let q = ListQuery::from_pairs(pairs)?;
    for (given, param) in [(&q.scope, "scope"), (&q.after_scope, "after_scope")] {
        if given.is_some() {
            return Err(ApiError::invalid(
                "invalid_query",
                param,
                format!("{param}: the scope comes from the client token and cannot be chosen"),
            ));
        }
    }
    let after = match &q.after_key {
        Some(key) => Some(
            OperationId::new(client.scope.as_str(), key)
                .map_err(|e| ApiError::invalid("invalid_query", "after_key", e.to_string()))?,
        ),
        None => None,
    };
    let filter = ListFilter {
        state: wire::state_filter(q.state.as_deref())
            .map_err(|m| ApiError::invalid("invalid_query", "state", m))?,
        scope: Some(client.scope.clone()),
        limit: Some(q.limit()?),
        after,
        ..ListFilter::default()
    };
    list_answer(&state, &filter, false).await
}

/// The operations `filter` lists, and when the page is full (`limit`
/// operations, or [`PAGE_BYTES`]), `next`: the query parameters that ask
/// for the page after it (with `after_scope` for an operator's list,
/// which spans scopes). A page after an operation that no longer exists
/// (purged between pages) is refused naming the cursor, not answered
/// empty: an empty page would read as the end.
pub(crate) async fn list_answer(
    state: &GatewayState,
    filter: &ListFilter,
    across_scopes: bool,
) -> Result<Response, ApiError> {
    if let Some(after) = &filter.after {
        let found = state
            .ledger()
            .get(after)
            .await
            .map_err(|e| ApiError::ledger(&e))?;
        if found.is_none() {
            return Err(ApiError::invalid(
                "invalid_query",
                "after_key",
                "after_key: no such operation (purged since the previous page, or never begun); list again from the start",
            ));
        }
    }
    let page = fill(state, filter).await?;
    let next = page.last.filter(|_| page.more).map(|last| {
        if across_scopes {
            json!({"after_scope": last.scope, "after_key": last.key})
        } else {
            json!({"after_key": last.key})
        }
    });
    // The operations are already JSON text: the answer is put together
    // around them rather than parsed back into one document.
    let mut body = Vec::with_capacity(page.bytes + page.items.len() + 64);
    body.extend_from_slice(b"{\"operations\":[");
    for (i, item) in page.items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(item);
    }
    body.extend_from_slice(b"],\"next\":");
    body.extend_from_slice(json!(next).to_string().as_bytes());
    body.push(b'}');
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

/// One page, as JSON text per operation.
struct Page {
    items: Vec<Vec<u8>>,
    bytes: usize,
    last: Option<OperationId>,
    /// Whether the page is full (by count or by bytes): `next` is given.
    more: bool,
}

async fn fill(state: &GatewayState, filter: &ListFilter) -> Result<Page, ApiError> {
    let limit = filter.limit.unwrap_or(1000);
    let mut page = Page {
        items: Vec::new(),
        bytes: 0,
        last: None,
        more: false,
    };
    let mut after = filter.after.clone();
    loop {
        let want = (limit - page.items.len()).min(CHUNK);
        let chunk = ListFilter {
            limit: Some(want),
            after: after.clone(),
            ..filter.clone()
        };
        let ops = state
            .ledger()
            .list(&chunk)
            .await
            .map_err(|e| ApiError::ledger(&e))?;
        let got = ops.len();
        for rec in ops {
            let text = serde_json::to_vec(&rec).map_err(|e| ApiError::internal(e.to_string()))?;
            if !page.items.is_empty() && page.bytes + text.len() > PAGE_BYTES {
                page.more = true;
                return Ok(page);
            }
            page.bytes += text.len();
            page.items.push(text);
            page.last = Some(rec.id);
        }
        if page.items.len() >= limit {
            page.more = true;
            return Ok(page);
        }
        if got < want {
            return Ok(page);
        }
        after.clone_from(&page.last);
    }
}
