//! The integration tests of `handover-router`: one binary, each file a module, so the workspace links a handful of test binaries instead of about ninety (linking was most of CI's time on two cores).

mod breaker;
mod config;
mod config_mcp;
mod destination_bodies;
mod failure_report;
mod fallback;
mod late_outcome;
mod metrics;
mod models;
mod reconcile;
mod stream_cost;
mod support;
mod task_budget;
mod write_gate;
