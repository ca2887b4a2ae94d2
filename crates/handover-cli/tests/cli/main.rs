//! The integration tests of `handover-cli`: one binary, each file a module, so the workspace links a handful of test binaries instead of about ninety (linking was most of CI's time on two cores).

mod chat;
mod check;
mod demo;
mod help;
mod ledger_file;
mod mcp;
mod mcp_answers;
mod mcp_http;
mod mcp_http_sessions;
mod mcp_ids;
mod mcp_keys;
mod mcp_lookups;
mod mcp_upstream_404;
mod mcp_upstream_http;
mod mcp_world;
mod ops;
mod ops_postgres;
mod python_client;
mod serve;
mod serve_otlp;
mod serve_replicas;
mod serve_task_budget;
mod support;
