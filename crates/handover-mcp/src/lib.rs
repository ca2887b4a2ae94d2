//! `handover mcp`: an MCP proxy that puts Handover's write gate in front of
//! any MCP server's tools with effects.
//!
//! MCP gives no delivery guarantee: a `tools/call` that times out after the
//! server applied it gets called again. This crate sits between an MCP
//! client (an agent) and an upstream MCP server. Everything passes through
//! unchanged — `initialize`, `tools/list`, resources, prompts,
//! notifications, the server's own requests — except a `tools/call` of a
//! tool configured as an action (`[actions.NAME] mcp = { server, tool }`):
//! that one goes through the router's write gate, the same protocol the
//! library and `handover serve` use. Its identity is the session's scope
//! plus the client's `_meta.idempotencyKey` (or configured argument
//! fields), never the JSON-RPC id; the dispatch is durable before the
//! upstream sees the call; a lost answer is `unknown` and is never sent
//! again automatically. See `docs/mcp.md`.
//!
//! Built on the official Rust MCP SDK (`rmcp`) for the protocol's types.

#![forbid(unsafe_code)]

mod error;
mod guard;
mod http;
mod key;
mod lines;
mod lookup;
mod proxy;
mod result;
mod schema;
mod upstream;
mod wire;

pub use error::McpError;
pub use proxy::McpProxy;
