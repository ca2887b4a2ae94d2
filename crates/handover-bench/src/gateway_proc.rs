//! The gateway under measurement, in a process of its own: this binary's
//! `gateway-serve`, which serves as `handover serve` does
//! (`Gateway::bind` on the default multi-thread runtime) without its log
//! subscriber: `handover serve` at its default `info` also formats each
//! request's spans and writes its access line (about 94k instructions more
//! per streamed request, docs/benchmarks.md "Stop 30"); with
//! `RUST_LOG=warn` it costs what this does. A process of its own lets the benchmarks read
//! the gateway's CPU time and RSS from `/proc/PID` apart from the load
//! generator's and the mock's. `HANDOVER_BENCH_GATEWAY_WRAPPER` runs it
//! under a profiler (`valgrind --tool=callgrind`, `perf record -g`,
//! `heaptrack`): the benchmark ends it by closing its stdin and waits for
//! it ([`GatewayProcess::stop`]), so the profiler writes its profile.

use std::process::Stdio;
use std::time::Duration;

use handover::Config;
use handover_gateway::{Gateway, hash_token};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::{BenchResult, args::Args};

pub(crate) type Err = Box<dyn std::error::Error + Send + Sync>;

/// The bearer token the gateway's one client uses.
pub(crate) const TOKEN: &str = "bench-client-token";

/// Linux `USER_HZ`: the unit of `utime`/`stime` in `/proc/PID/stat`.
const TICKS_PER_S: u64 = 100;

/// Limits the benchmark sets on the gateway and its one provider.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The provider's `max_concurrency` (upstream requests in flight).
    pub(crate) max_concurrency: u64,
    /// The provider's `max_queue` (requests waiting for a slot).
    pub(crate) max_queue: u64,
    /// The gateway's `max_connections` and per-client in-flight limit.
    pub(crate) connections: u64,
    /// Provider first-byte/total deadlines and the policy's deadline.
    pub(crate) deadline_s: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_concurrency: 4096,
            max_queue: 4096,
            connections: 4096,
            deadline_s: 60,
        }
    }
}

/// The config `gateway-serve` runs: one provider (the mock), a memory
/// ledger, one client; a `[gateway.routes]` pattern for routed names.
fn config(mock: &str, l: Limits) -> String {
    format!(
        r#"
[ledger]
backend = "memory"
[providers.mock]
kind = "openai_compatible"
base_url = "{mock}/v1"
model = "gpt-4o-mini"
models = "*"
max_concurrency = {mc}
max_queue = {mq}
[providers.mock.timeouts]
first_byte = "{d}s"
total = "{d}s"
[policies.default]
chain = ["mock"]
deadline = "{d}s"
[gateway]
listen = "127.0.0.1:0"
# One client sends everything: its in-flight limit is not what is measured.
max_in_flight_per_client = {c}
max_connections = {c}
[gateway.routes]
"bench-*" = {{ chain = ["mock/{{model}}"], policy = "default" }}
[gateway.clients.bench]
token_sha256 = "{hash}"
scope = "bench"
"#,
        mc = l.max_concurrency,
        mq = l.max_queue,
        c = l.connections,
        d = l.deadline_s,
        hash = hash_token(TOKEN)
    )
}

/// A running `gateway-serve` child; killed when dropped, unless
/// [`GatewayProcess::stop`] ended it first.
pub(crate) struct GatewayProcess {
    /// Taken out by [`GatewayProcess::stop`].
    child: std::sync::Mutex<Option<Child>>,
    /// The gateway's own process (under a wrapper such as heaptrack's
    /// script, not the child itself): CPU and RSS are read from it.
    pid: u32,
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
}

impl GatewayProcess {
    /// Starts a gateway over the mock at `mock` and waits for its address.
    pub(crate) async fn start(mock: &str, limits: Limits) -> Result<Self, Err> {
        Self::start_program("gateway-serve", mock, limits).await
    }

    /// Starts this binary's `program` (`gateway-serve`, or the bare
    /// pass-through `floor-serve`) over the mock at `mock`.
    pub(crate) async fn start_program(
        program: &str,
        mock: &str,
        limits: Limits,
    ) -> Result<Self, Err> {
        let l = limits;
        // A profiler to run the gateway under, e.g.
        // `HANDOVER_BENCH_GATEWAY_WRAPPER="valgrind --tool=callgrind"`.
        let wrapper = std::env::var("HANDOVER_BENCH_GATEWAY_WRAPPER").unwrap_or_default();
        let mut argv = wrapper.split_whitespace();
        let exe = std::env::current_exe()?;
        let mut command = match argv.next() {
            Some(program) => {
                let mut c = Command::new(program);
                c.args(argv).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        let mut child = command
            .args([program, "--mock", mock])
            .args(["--max-concurrency", &l.max_concurrency.to_string()])
            .args(["--max-queue", &l.max_queue.to_string()])
            .args(["--connections", &l.connections.to_string()])
            .args(["--deadline-s", &l.deadline_s.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        // A wrapper may print lines of its own first (heaptrack does).
        let mut lines = BufReader::new(stdout).lines();
        let address = async {
            let mut pid = None;
            while let Some(line) = lines.next_line().await? {
                if let Some(p) = line.strip_prefix("pid ") {
                    pid = p.trim().parse::<u32>().ok();
                } else if line.starts_with("http://") {
                    return Ok(pid.map(|p| (p, line)));
                }
            }
            Ok::<_, std::io::Error>(None)
        };
        let (pid, url) = tokio::time::timeout(Duration::from_secs(120), address)
            .await
            .map_err(|_| "gateway-serve did not report its address within 120 s")??
            .ok_or("gateway-serve exited before reporting its pid and address")?;
        // Keep reading: a wrapper printing at exit (heaptrack's summary)
        // must not die of SIGPIPE.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self {
            child: std::sync::Mutex::new(Some(child)),
            pid,
            url,
        })
    }

    /// Ends the gateway (its stdin closes: it drains and exits) and waits
    /// for the child, so a profiler wrapping it writes its profile.
    pub(crate) async fn stop(&self) -> BenchResult {
        let taken = self.child.lock().map(|mut c| c.take());
        let Ok(Some(mut child)) = taken else {
            return Err("gateway-serve was already stopped".into());
        };
        drop(child.stdin.take());
        let exited = tokio::time::timeout(Duration::from_secs(600), child.wait())
            .await
            .map_err(|_| "gateway-serve did not exit within 600 s of its stdin closing")??;
        if !exited.success() {
            return Err(format!("gateway-serve exited with {exited}").into());
        }
        Ok(())
    }

    /// CPU time (user + system) the gateway process has used so far.
    pub(crate) fn cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        // Fields after the parenthesised command name: state is field 3, so
        // utime (14) and stime (15) are at 11 and 12 here.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let ticks: u64 = rest
            .split_whitespace()
            .skip(11)
            .take(2)
            .filter_map(|v| v.parse::<u64>().ok())
            .sum();
        Duration::from_millis(ticks * 1000 / TICKS_PER_S)
    }

    /// Resident and peak resident set size of the gateway, in KiB.
    pub(crate) fn rss_kib(&self) -> (u64, u64) {
        rss_of(&format!("/proc/{}/status", self.pid))
    }
}

fn rss_of(path: &str) -> (u64, u64) {
    let status = std::fs::read_to_string(path).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// `gateway-serve --mock URL [limits]`: serves until its stdin closes; prints
/// `pid N` and then its base URL on stdout.
pub(crate) async fn serve(args: Args) -> BenchResult {
    let mock = args.string("mock", "");
    if mock.is_empty() {
        return Err("gateway-serve needs --mock URL".into());
    }
    let d = Limits::default();
    let limits = Limits {
        max_concurrency: args.number("max-concurrency", d.max_concurrency)?,
        max_queue: args.number("max-queue", d.max_queue)?,
        connections: args.number("connections", d.connections)?,
        deadline_s: args.number("deadline-s", d.deadline_s)?,
    };
    let config = Config::parse(&config(&mock, limits), &|_| None)?;
    let gateway = Gateway::bind(config, None).await?;
    println!("pid {}", std::process::id());
    println!("http://{}", gateway.local_addr()?);
    // Stdin closing is the signal to drain and stop (SIGTERM would need
    // tokio's `signal` feature in this crate alone).
    let stop = async {
        let mut sink = Vec::new();
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut tokio::io::stdin(), &mut sink).await;
    };
    gateway.run(stop).await?;
    Ok(())
}
