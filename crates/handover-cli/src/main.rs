//! The `handover` command-line tool: the first thing a newcomer runs
//! (`handover demo`), the config checker (`handover check`), the on-call
//! operator's view of the ledger (`handover ops ...`) and a one-shot chat
//! through a configured fallback chain (`handover chat`).
//!
//! How it fits: every command is a thin layer over the library crates
//! (re-exported by the `handover` facade). Nothing here decides anything the
//! ledger or the router would not: `ops resolve` goes through the ledger's
//! state machine, so a transition it forbids is refused here too.

#![forbid(unsafe_code)]

/// `print!` that, when stdout cannot be written (a closed pipe, a full
/// disk), returns the error from the enclosing function (`?`) instead of
/// panicking; see [`term::out`].
macro_rules! out {
    ($($arg:tt)*) => { $crate::term::out(format_args!($($arg)*))? };
}

/// `println!` that returns the error instead of panicking, like [`out!`].
macro_rules! outln {
    () => { $crate::term::out(format_args!("\n"))? };
    ($($arg:tt)*) => { $crate::term::out(format_args!("{}\n", format_args!($($arg)*)))? };
}

mod chat;
mod check;
mod demo;
mod logging;
mod mcp;
mod open;
mod ops;
mod otlp;
mod serve;
mod term;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// Handover: LLM fallback that never performs a user's business action twice.
#[derive(Debug, Parser)]
#[command(name = "handover", version, long_about = None)]
#[command(
    after_help = "Start here:\n  handover demo\n\nThen:\n  handover check --config config/handover.example.toml"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log line format on stderr (filter with RUST_LOG, e.g. `RUST_LOG=handover=debug`).
    #[arg(long, value_enum, global = true, default_value = "text")]
    log_format: logging::LogFormat,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Play the lost-confirmation story end to end on a local SQLite ledger
    /// (mock providers and destination in process; no network, no keys).
    #[command(
        after_help = "Examples:\n  handover demo\n  handover demo --mcp\n  handover demo --ledger /tmp/demo.db --json"
    )]
    Demo(demo::DemoArgs),
    /// Validate a configuration file and print the resolved settings.
    #[command(after_help = "Example:\n  handover check --config config/handover.example.toml")]
    Check(check::CheckArgs),
    /// Inspect and resolve operations in the ledger (the review queue).
    #[command(subcommand)]
    Ops(ops::OpsCommand),
    /// Send one prompt through a policy's fallback chain (real providers, real keys).
    #[command(
        after_help = "Example:\n  OPENAI_API_KEY=... handover chat --config handover.toml --policy default \"Say hi\" --stream"
    )]
    Chat(chat::ChatArgs),
    /// Run the OpenAI-compatible gateway and the operations API (`[gateway]` in the config).
    #[command(
        after_help = "Example:\n  HANDOVER_PG_URL=postgres://... handover serve --config handover.toml --listen 127.0.0.1:8080"
    )]
    Serve(serve::ServeArgs),
    /// Run the MCP proxy on stdio: the write gate in front of an MCP server's tools (`[mcp]`).
    #[command(
        after_help = "Example (as an MCP client's server command):\n  handover mcp --config handover.toml"
    )]
    Mcp(mcp::McpArgs),
    /// The MCP shipping server `handover demo --mcp` starts (stdio).
    #[command(hide = true)]
    DemoShippingServer(demo::shipping::ShippingArgs),
}

/// Where `ops` commands find the ledger: the one a config file names, or a
/// SQLite file given directly.
#[derive(Debug, Clone, Args)]
#[group(required = true, multiple = false)]
pub(crate) struct LedgerSource {
    /// Configuration file whose `[ledger]` section names the ledger.
    #[arg(long, value_name = "FILE", global = true)]
    config: Option<PathBuf>,
    /// A SQLite ledger file, opened directly (not for `ops purge`, which
    /// applies a configuration's retention).
    #[arg(long, value_name = "PATH", global = true)]
    ledger: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let default_filter = match cli.command {
        Command::Serve(_) => "info",
        // The demo's story includes a server dying; its output says so.
        Command::Demo(_) => "error",
        _ => "warn",
    };
    logging::init(cli.log_format, default_filter);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Demo(args) => demo::run(args).await,
            Command::Check(args) => check::run(&args),
            Command::Ops(cmd) => ops::run(cmd).await,
            Command::Chat(args) => chat::run(args).await,
            Command::Serve(args) => serve::run(args).await,
            Command::Mcp(args) => mcp::run(args).await,
            Command::DemoShippingServer(args) => demo::shipping::run(&args),
        }
    });
    // Every command awaited its own work; what is left is at most a
    // blocking read of stdin (`handover mcp` stopped by SIGTERM), which
    // no one can cancel and which dropping the runtime would wait for.
    runtime.shutdown_background();
    match result {
        Ok(code) => code,
        // The reader of our output went away (`handover ops list | head`):
        // nothing left to say, and nobody to say it to.
        Err(e) if term::closed_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", report(&e));
            ExitCode::FAILURE
        }
    }
}

/// `e` and its causes on one line, each said once: library errors often
/// include their source's text in their own, so printing every link of
/// the chain would repeat the cause.
fn report(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

/// jemalloc: freed memory goes back to the OS after a peak (glibc keeps
/// it per arena), and allocation, which a gateway request does a few
/// hundred times, costs less (docs/decisions.md).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
