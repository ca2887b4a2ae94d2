//! The router: configuration, one shared budget per user task, fallback over
//! a chain of providers, circuit breakers, and the write gate that lets a
//! business action happen only through the ledger.
//!
//! How it fits: [`config::Config`] is parsed once from TOML and builds the
//! runtime parts. Content generation goes through `handover-providers`
//! adapters; business actions go through the [`gate::WriteGate`], the Rust door onto
//! the one write [`protocol`] that every door (the gateway's operations API,
//! the MCP guard) shares, which drives a `handover-ledger`
//! [`Ledger`](handover_ledger::Ledger).

#![forbid(unsafe_code)]

pub(crate) mod admission;
mod answer_body;
mod backoff;
pub(crate) mod breaker;
pub mod budget;
pub mod config;
mod error;
pub mod gate;
mod metrics;
pub mod operator;
pub mod protocol;
pub mod reconcile;
pub mod route;

pub use breaker::BreakerState;
pub use error::RouterError;
