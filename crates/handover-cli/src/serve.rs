//! `handover serve`: the OpenAI-compatible gateway and operations API
//! (`handover-gateway`), until Ctrl-C; in-flight requests are finished.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

/// Arguments of `handover serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Configuration file (needs a `[gateway]` section with at least one client).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Address to listen on (default: `gateway.listen` from the config).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
}

/// Runs the gateway until Ctrl-C.
pub(crate) async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let config = handover::Config::load(&args.config)
        .with_context(|| format!("{}", args.config.display()))?;
    let gateway = handover_gateway::Gateway::bind(config, args.listen).await?;
    eprintln!(
        "handover serve: listening on http://{} (Ctrl-C finishes in-flight requests and stops)",
        gateway.local_addr()?
    );
    gateway
        .run(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    eprintln!("handover serve: stopped");
    Ok(ExitCode::SUCCESS)
}
