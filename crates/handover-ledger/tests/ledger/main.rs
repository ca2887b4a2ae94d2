//! The integration tests of `handover-ledger`: one binary, each file a module, so the workspace links a handful of test binaries instead of about ninety (linking was most of CI's time on two cores).

mod conformance;
mod fingerprint;
mod model_agreement;
mod postgres_fail_closed;
mod postgres_processes;
mod postgres_races;
mod postgres_reconcile;
mod postgres_support;
mod reference_model;
mod sqlite_durability;
mod sqlite_foreign;
mod sqlite_races;
mod sqlite_unavailable;
mod stale_cache;
