//! `handover mcp`: the MCP proxy (`handover-mcp`) on stdio — an MCP client
//! (an agent) starts it as its server; it starts the upstream server and
//! puts the write gate in front of the tools configured as actions.
//! Stdout is the protocol: everything else goes to stderr.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

/// Arguments of `handover mcp`.
#[derive(Debug, Args)]
pub(crate) struct McpArgs {
    /// Configuration file (needs `[mcp.servers.NAME]` and, for guarded
    /// tools, `[actions.NAME] mcp = { server, tool }`).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Upstream server to proxy (default: the only one configured).
    #[arg(long, value_name = "NAME")]
    server: Option<String>,
}

/// Serves one MCP client on stdio until it closes its side.
pub(crate) async fn run(args: McpArgs) -> anyhow::Result<ExitCode> {
    let config = handover::Config::load(&args.config)
        .with_context(|| format!("{}", args.config.display()))?;
    let handover = handover::Handover::open(&config)
        .await
        .context("while opening the ledger")?;
    let proxy = handover_mcp::McpProxy::new(&handover, args.server.as_deref())?;
    proxy.serve_stdio().await?;
    Ok(ExitCode::SUCCESS)
}
