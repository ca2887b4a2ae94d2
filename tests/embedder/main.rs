//! An embedder's probes of the public Rust API, one module per
//! capability, on every backend where the backend matters (`per_backend!`:
//! memory, a SQLite file, a PostgreSQL schema when
//! `HANDOVER_TEST_POSTGRES_URL` is set). Effects are counted at the mock
//! destination and providers or read back from the store, never from
//! Handover's own counters.

mod support;

mod executor;
mod identity;
mod ledger;
mod open;
mod perform;
mod readme;
mod reconcile;
mod router;
mod store;
mod timing;
mod tool_call;
