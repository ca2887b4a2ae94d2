//! An embedder's probes of the public Rust API, on every backend.

mod support;

mod executor;
mod identity;
mod ledger;
mod perform;
mod readme;
mod reconcile;
mod router;
mod store;
mod timing;
mod tool_call;
