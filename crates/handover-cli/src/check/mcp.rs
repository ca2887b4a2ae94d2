//! What `handover mcp` guards: `[mcp.servers]` and the tools bound to
//! actions, with what the proxy checks only when it runs (it needs the
//! upstream's `tools/list`).

use std::fmt::Write as _;

use handover::router::config::{McpServer, McpSettings};

use crate::term::Style;

pub(super) fn mcp(out: &mut String, m: Option<&McpSettings>, s: Style) {
    let Some(m) = m else { return };
    let _ = writeln!(out, "\n{}", s.bold("mcp"));
    for (name, server) in &m.servers {
        let at = match server {
            McpServer::Command { command, args } => format!("{command} {}", args.join(" ")),
            McpServer::Url(url) => url.clone(),
        };
        let _ = writeln!(out, "  server {name}: {}", at.trim_end());
    }
    for t in m.tools.values() {
        let key = match t.key_from.is_empty() {
            true => "the client's _meta.idempotencyKey".to_owned(),
            false => format!(
                "{} (each value of the JSON type the tool's inputSchema declares; a call is not sent while that schema cannot be read)",
                t.key_from.join(", ")
            ),
        };
        let _ = writeln!(
            out,
            "  {}: tool {} on {}, keyed by {key}",
            t.action, t.tool, t.server
        );
        let Some(l) = &t.lookup else { continue };
        let naming: Vec<String> = l
            .naming_pointers()
            .iter()
            .map(|p| p.trim_start_matches('/').to_owned())
            .collect();
        let _ = writeln!(
            out,
            "      lookup over MCP: tool {}, naming the operation by {}: the tool must declare {} in its inputSchema (checked when the proxy runs; until it does, every lookup fails and proves nothing)",
            l.tool,
            naming.join(", "),
            if naming.len() == 1 { "it" } else { "each" }
        );
    }
}
