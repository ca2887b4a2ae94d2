//! Handover: use several LLM providers with fallback without ever performing a
//! user's business action twice, and without ever reporting an unconfirmed
//! action as done.
//!
//! This facade re-exports the workspace crates:
//! - [`ledger`]: the durable operation ledger (identity, states, backends).

pub use handover_ledger as ledger;
