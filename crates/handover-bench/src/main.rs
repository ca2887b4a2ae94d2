//! Handover benchmarks. Each subcommand prints one JSON object per line with
//! the field names listed in `docs/benchmarks.md` (`bench`, `backend`,
//! `concurrency`, `ops_per_s`, `p50_us`, `p99_us`, `baseline_p50_us`,
//! `baseline_p99_us`, `ratio_p50`, `ratio_p99`). Every run measures its own
//! baseline, so results are ratios, not absolute times.
//!
//! ```text
//! cargo run --release -p handover-bench -- ledger --backend sqlite --concurrency 64
//! cargo run --release -p handover-bench -- adapter
//! cargo run --release -p handover-bench -- mcp --ops 3000
//! ```

mod adapter;
mod args;
mod gateway;
mod gateway_floor;
mod gateway_proc;
mod gateway_soak;
mod gateway_stalled;
mod ledger;
mod ledger_pg;
mod mcp;
mod mock_http;
mod perform;
mod router;
mod stats;
mod task;

type BenchResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

fn main() -> BenchResult {
    let mut argv = std::env::args().skip(1);
    let Some(command) = argv.next() else {
        return Err(usage().into());
    };
    let rest = args::Args::parse(argv.collect())?;
    rest.only(known_args(&command))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match command.as_str() {
        "ledger" => runtime.block_on(ledger::run(rest)),
        "adapter" => runtime.block_on(adapter::run(rest)),
        "perform" => runtime.block_on(perform::run(rest)),
        "router" => runtime.block_on(router::run(rest)),
        "gateway" => runtime.block_on(gateway::run(rest)),
        "gateway-soak" => runtime.block_on(gateway_soak::run(rest)),
        // The process `gateway` and `gateway-soak` measure.
        "gateway-serve" => runtime.block_on(gateway_proc::serve(rest)),
        // The bare pass-through `gateway --target floor` measures instead.
        "floor-serve" => runtime.block_on(gateway_floor::serve(rest)),
        "task" => runtime.block_on(task::run(rest)),
        "mcp" => runtime.block_on(mcp::run(rest)),
        // The two processes `mcp` starts: a minimal upstream and the proxy.
        "mcp-upstream" => runtime.block_on(mcp::upstream()),
        "mcp-proxy" => runtime.block_on(mcp::proxy(rest)),
        other => Err(format!("unknown benchmark {other:?}\n{}", usage()).into()),
    }
}

/// The arguments each benchmark reads (see its module).
fn known_args(command: &str) -> &'static [&'static str] {
    const SERVE: &[&str] = &[
        "mock",
        "max-concurrency",
        "max-queue",
        "connections",
        "deadline-s",
    ];
    match command {
        "ledger" => &[
            "backend",
            "baseline-ops",
            "concurrency",
            "lifecycle",
            "ops",
            "durable",
            "growth",
            "pool",
            "rounds",
            "small",
            "url",
        ],
        "adapter" => &["kind", "ops"],
        "perform" => &["backend", "concurrency", "ops"],
        "router" => &["concurrency", "ops", "rounds", "only", "modes"],
        "gateway" => &[
            "rates",
            "connections",
            "duration-s",
            "closed-ops",
            "modes",
            "routed",
            "target",
            "stalled",
            "max-concurrency",
        ],
        "gateway-soak" => &["duration-s", "rate", "window-s"],
        "gateway-serve" | "floor-serve" => SERVE,
        "task" => &["backend", "concurrency", "ops", "url"],
        "mcp" => &["ops"],
        "mcp-proxy" => &["config"],
        _ => &[],
    }
}

fn usage() -> String {
    "usage: handover-bench <ledger|adapter|router|perform|gateway|gateway-soak|task|mcp> [--backend B] [--concurrency N] [--ops N] (gateway: [--stalled N])".to_owned()
}

/// The allocator `handover serve` runs on, so the gateway measured here
/// allocates as the real one does.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[cfg(test)]
mod tests {
    use super::known_args;

    /// Every `--name` a benchmark's module reads (`args.string("name", …)`,
    /// `args.number("name", …)`) is one its command accepts: `main` refuses
    /// any other before the run, so a flag missing from [`known_args`] makes
    /// the documented command fail (as `router --only` and `mcp`'s own
    /// `mcp-proxy --config` did).
    #[test]
    fn every_flag_a_benchmark_reads_is_one_it_accepts() {
        let modules: [(&[&str], &str); 12] = [
            (&["adapter"], include_str!("adapter.rs")),
            (&["gateway"], include_str!("gateway.rs")),
            (&["gateway"], include_str!("gateway_stalled.rs")),
            (
                &["gateway-serve", "floor-serve"],
                include_str!("gateway_proc.rs"),
            ),
            (&["floor-serve"], include_str!("gateway_floor.rs")),
            (&["gateway-soak"], include_str!("gateway_soak.rs")),
            (&["ledger"], include_str!("ledger.rs")),
            (&["ledger"], include_str!("ledger_pg.rs")),
            (&["mcp", "mcp-proxy"], include_str!("mcp.rs")),
            (&["perform"], include_str!("perform.rs")),
            (&["router"], include_str!("router.rs")),
            (&["task"], include_str!("task.rs")),
        ];
        let mut read = 0;
        for (commands, source) in modules {
            for call in ["args.string(\"", "args.number(\""] {
                for piece in source.split(call).skip(1) {
                    let name = piece.split('"').next().unwrap_or_default();
                    read += 1;
                    assert!(
                        commands.iter().any(|c| known_args(c).contains(&name)),
                        "--{name} is read for {commands:?} but not accepted"
                    );
                }
            }
        }
        assert!(
            read >= 40,
            "found only {read} flags read: has the pattern changed?"
        );
    }
}
