#![doc = include_str!("../README.md")]
//!
//! # The crate
//!
//! This facade is what an application depends on. [`Handover::open`] turns a
//! validated [`Config`] into the ledger, the [`Router`] and the
//! [`WriteGate`], on one clock; the names the README uses are at the top
//! level. The workspace crates stay reachable for everything else:
//! - [`ledger`] — the durable operation ledger (identity, states, memory /
//!   SQLite / PostgreSQL backends);
//! - [`providers`] — adapters for OpenAI, DeepSeek and any OpenAI-compatible
//!   API, one HTTP request per call, classified errors;
//! - [`router`] — configuration, the shared task budget, fallback, circuit
//!   breakers, the write gate, the reconciler and the operator queue.
//!
//! Cargo features choose the ledger backends compiled in: `sqlite` (on by
//! default) and `postgres`. A `[ledger]` backend left out is a configuration
//! error naming `ledger.backend` when opening.

#![forbid(unsafe_code)]

mod open;

pub use handover_ledger as ledger;
pub use handover_providers as providers;
pub use handover_router as router;

pub use open::{Handover, HandoverOptions};

#[cfg(feature = "sqlite")]
pub use handover_ledger::SqliteLedger;
pub use handover_ledger::{Ledger, MemoryLedger, OperationRequest};
pub use handover_providers::{ChatRequest, Message};
pub use handover_router::config::Config;
pub use handover_router::gate::{
    DispatchContext, ExecutorError, ExecutorOutcome, FixedApproval, OperationKey, PerformOptions,
    PerformOutcome, ProposedCall, WriteGate,
};
pub use handover_router::reconcile::Reconciler;
pub use handover_router::route::Router;
