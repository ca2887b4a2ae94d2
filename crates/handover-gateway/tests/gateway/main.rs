//! The integration tests of `handover-gateway`: one binary, each file a module, so the workspace links a handful of test binaries instead of about ninety (linking was most of CI's time on two cores).
//!
//! The files that read series of the process-wide metrics recorder (every
//! gateway in a process shares it: `shutdown`, `hang_up`, `operation_metrics`,
//! `reconcile`) stay binaries of their own, so no other test's requests move
//! the counts they assert.

mod approvals;
mod bad_input;
mod chat;
mod claim_holder;
mod connection_cap;
mod cross_family;
mod dropin;
mod failed_calls;
mod frameworks_python;
mod late_reports;
mod ledger_locked;
mod limits;
mod list_pages;
mod models;
mod nul_text;
mod openai_python;
mod operations;
mod outcome_fields;
mod partition;
mod protocol_matrix;
mod pull;
mod responses;
mod responses_input;
mod responses_python;
mod responses_upstream;
mod stream_cost_and_edges;
mod stream_usage;
#[path = "../support/mod.rs"]
mod support;
mod task_budget;
mod tool_call_fields;
