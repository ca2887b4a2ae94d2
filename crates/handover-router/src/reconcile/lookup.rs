//! The application's authoritative lookup: "does the destination have this
//! operation's record?"

use futures::future::BoxFuture;
use handover_ledger::{ActionName, OperationId};

/// What a lookup is asked about.
#[derive(Debug, Clone)]
pub struct LookupContext {
    /// The operation.
    pub operation: OperationId,
    /// Its action.
    pub action: ActionName,
    /// The approved parameters.
    pub params: serde_json::Value,
    /// The destination key every dispatch carried.
    pub destination_key: String,
}

/// A record the destination has for the operation, mapped back by the
/// application into the operation's parameter form.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundRecord {
    /// The record's parameters, comparable with the approved ones.
    pub params: serde_json::Value,
    /// The result to record if it matches (e.g. the record itself).
    pub result: serde_json::Value,
}

/// Looks an operation up at its destination. Return every record found (an
/// empty list when none); `Err` when the lookup itself failed — that is
/// never evidence of anything.
pub trait Lookup: Send + Sync {
    /// Performs one lookup.
    fn lookup(&self, ctx: LookupContext) -> BoxFuture<'static, Result<Vec<FoundRecord>, String>>;
}

impl<F, Fut> Lookup for F
where
    F: Fn(LookupContext) -> Fut + Send + Sync,
    Fut: Future<Output = Result<Vec<FoundRecord>, String>> + Send + 'static,
{
    fn lookup(&self, ctx: LookupContext) -> BoxFuture<'static, Result<Vec<FoundRecord>, String>> {
        Box::pin(self(ctx))
    }
}
