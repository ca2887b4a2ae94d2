//! Handover: use several LLM providers with fallback without ever performing
//! a user's business action twice, and without ever reporting an
//! unconfirmed action as done.
//!
//! This facade re-exports the workspace crates:
//! - [`ledger`] — the durable operation ledger (identity, states, memory /
//!   SQLite / PostgreSQL backends);
//! - [`providers`] — adapters for OpenAI, DeepSeek and any OpenAI-compatible
//!   API, one HTTP request per call, classified errors;
//! - [`router`] — configuration, the shared task budget, fallback, circuit
//!   breakers, the write gate, the reconciler and the operator queue.
//!
//! The most used types are also at the top level.

#![forbid(unsafe_code)]

pub use handover_ledger as ledger;
pub use handover_providers as providers;
pub use handover_router as router;

pub use handover_ledger::{Ledger, MemoryLedger, OperationRequest, SqliteLedger};
pub use handover_router::config::Config;
pub use handover_router::gate::{PerformOptions, PerformOutcome, WriteGate};
pub use handover_router::route::Router;

/// The README's examples, compiled as doc tests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
