//! `handover mcp`: the MCP proxy (`handover-mcp`) on stdio — an MCP client
//! (an agent) starts it as its server; it starts the upstream server and
//! puts the write gate in front of the tools configured as actions.
//! Stdout is the protocol: everything else goes to stderr. With `--listen`
//! (or `[mcp] listen`) it serves MCP's Streamable HTTP transport at `/mcp`
//! instead, until SIGTERM or SIGINT.

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
    /// Serve Streamable HTTP on this address (`http://ADDR/mcp`) instead of
    /// stdio (default: `mcp.listen` if set). Callers need a
    /// `[gateway.clients]` bearer token.
    #[arg(long, value_name = "ADDR")]
    listen: Option<std::net::SocketAddr>,
}

/// Serves one MCP client on stdio until it closes its side or a SIGTERM
/// or SIGINT comes.
pub(crate) async fn run(args: McpArgs) -> anyhow::Result<ExitCode> {
    let config = handover::Config::load(&args.config)
        .with_context(|| format!("{}", args.config.display()))?;
    let listen = args.listen.or_else(|| config.mcp().and_then(|m| m.listen));
    // Refused before the ledger opens and anything listens: an address
    // given with --listen is not in the file, so loading did not check it.
    if listen.is_some() {
        config
            .mcp_http_gateway()
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("{}", args.config.display()))?;
    }
    let handover = handover::Handover::open(&config)
        .await
        .context("while opening the ledger")?;
    let proxy = handover_mcp::McpProxy::new(&handover, args.server.as_deref())?;
    let Some(listen) = listen else {
        // SIGTERM or SIGINT: no further line is read; guarded calls in
        // flight are recorded and answered, then it exits as at EOF.
        let stop = crate::serve::stop_signal()?;
        let served = proxy
            .serve_stdio(async move {
                let name = stop.await;
                eprintln!("handover mcp: {name} received; finishing calls in flight");
            })
            .await;
        // Closed, not dropped, so a SQLite ledger's file holds every record.
        handover.ledger().close().await;
        served?;
        return Ok(ExitCode::SUCCESS);
    };
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("while binding {listen}"))?;
    eprintln!(
        "handover mcp: listening on http://{}/mcp (SIGTERM or Ctrl-C ends the sessions and stops)",
        listener.local_addr()?
    );
    let stop = crate::serve::stop_signal()?;
    proxy
        .serve_http(listener, async move {
            let name = stop.await;
            eprintln!("handover mcp: {name} received; ending sessions");
        })
        .await?;
    handover.ledger().close().await;
    eprintln!("handover mcp: stopped");
    Ok(ExitCode::SUCCESS)
}
