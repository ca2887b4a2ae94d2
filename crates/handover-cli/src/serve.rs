//! `handover serve`: the OpenAI-compatible gateway and operations API
//! (`handover-gateway`), until SIGTERM (what docker, Kubernetes and systemd
//! send) or SIGINT (Ctrl-C); in-flight requests are finished within
//! `gateway.shutdown_grace`, then the process exits 0. With `[telemetry]
//! otlp_endpoint`, spans are exported meanwhile and flushed at the end
//! (within `export_timeout`, at most `shutdown_grace`).

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

/// Runs the gateway until SIGTERM or SIGINT.
pub(crate) async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let config = handover::Config::load(&args.config)
        .with_context(|| format!("{}", args.config.display()))?;
    let grace = config.gateway().map(|g| g.shutdown_grace);
    let exporter = config.telemetry().map(crate::otlp::start).transpose()?;
    let flush = config.telemetry().map(|t| t.export_timeout);
    // A problem in the file names the file, as `Config::load`'s errors do.
    let gateway = match handover_gateway::Gateway::bind(config, args.listen).await {
        Ok(g) => g,
        Err(e) if e.is_config() => {
            return Err(anyhow::Error::new(e).context(format!("{}", args.config.display())));
        }
        Err(e) => return Err(e.into()),
    };
    eprintln!(
        "handover serve: listening on http://{} (SIGTERM or Ctrl-C finishes in-flight requests and stops)",
        gateway.local_addr()?
    );
    let stop = stop_signal()?;
    gateway
        .run(async move {
            let name = stop.await;
            eprintln!("handover serve: {name} received; finishing in-flight requests");
        })
        .await?;
    if let (Some(exporter), Some(flush)) = (exporter, flush) {
        exporter
            .shutdown(grace.map_or(flush, |g| flush.min(g)))
            .await;
    }
    eprintln!("handover serve: stopped");
    Ok(ExitCode::SUCCESS)
}

/// Completes with the signal's name on the first SIGTERM or SIGINT.
/// Installed before serving, so a signal that comes early is not lost.
#[cfg(unix)]
pub(crate) fn stop_signal() -> anyhow::Result<impl std::future::Future<Output = &'static str>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot install the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot install the SIGINT handler")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        }
    })
}

/// Completes on Ctrl-C (no SIGTERM outside Unix).
#[cfg(not(unix))]
pub(crate) fn stop_signal() -> anyhow::Result<impl std::future::Future<Output = &'static str>> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    })
}
