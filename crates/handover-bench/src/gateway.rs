//! The `gateway` benchmark: what the HTTP gateway adds to a chat call. In
//! one run, against the same local mock provider, an open-loop load
//! generator sends `--rate` requests per second for `--duration-s` seconds
//! straight to the mock (the baseline), then the same requests through the
//! gateway (bearer token, policy lookup, router task with its budget, OpenAI
//! JSON both ways), non-streaming and streaming; then the same back to back
//! on one connection (closed loop), which shows the gateway's own processing
//! without the thread wake-ups an idle-between-requests load pays; and, on
//! that closed loop, a model name resolved through a `[gateway.routes]`
//! pattern (`bench-7` → `mock/bench-7`, per-model breaker) against the
//! policy's own name (`default`) as the baseline. Each
//! series reports p50/p99 latency, the overhead over the baseline, errors,
//! and the process RSS. Direct and gateway halves alternate.
//!
//! The gateway runs on its own runtime thread (as `handover serve` would on
//! its own), the mock on another, the load generator on the bench runtime.
//!
//! ```text
//! cargo run --release -p handover-bench -- gateway --rate 1000 --duration-s 30 --closed-ops 4000
//! ```

use std::time::{Duration, Instant};

use handover::{Config, HandoverOptions};
use handover_gateway::{Gateway, GatewayState, hash_token};
use tokio::sync::mpsc;

use crate::stats::{Samples, emit, round2};
use crate::{BenchResult, args::Args, mock_http};

pub(crate) type Err = Box<dyn std::error::Error + Send + Sync>;

pub(crate) const TOKEN: &str = "bench-client-token";

/// Starts a gateway over the mock on its own thread; returns its base URL.
pub(crate) fn start_gateway(mock: &str) -> Result<String, Err> {
    let config = Config::parse(
        &format!(
            r#"
[ledger]
backend = "memory"
[providers.mock]
kind = "openai_compatible"
base_url = "{mock}/v1"
model = "gpt-4o-mini"
models = "*"
max_concurrency = 4096
max_queue = 4096
[policies.default]
chain = ["mock"]
[gateway]
listen = "127.0.0.1:0"
# One client sends everything: its in-flight limit is not what is measured.
max_in_flight_per_client = 4096
max_connections = 4096
[gateway.routes]
"bench-*" = {{ chain = ["mock/{{model}}"], policy = "default" }}
[gateway.clients.bench]
token_sha256 = "{hash}"
scope = "bench"
"#,
            hash = hash_token(TOKEN)
        ),
        &|_| None,
    )?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (tx, rx) = std::sync::mpsc::channel::<Result<String, String>>();
    std::thread::spawn(move || {
        rt.block_on(async move {
            let started = async {
                let handover = HandoverOptions::new()
                    .env(|_| None)
                    .open(&config)
                    .await
                    .map_err(|e| e.to_string())?;
                let state = GatewayState::new(handover).map_err(|e| e.to_string())?;
                let gw = Gateway::with_state(state, None)
                    .await
                    .map_err(|e| e.to_string())?;
                let addr = gw.local_addr().map_err(|e| e.to_string())?;
                Ok::<_, String>((gw, addr))
            };
            match started.await {
                Ok((gw, addr)) => {
                    let _ = tx.send(Ok(format!("http://{addr}")));
                    let _ = gw.run(std::future::pending()).await;
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            }
        });
    });
    Ok(rx.recv()??)
}

/// Resident and peak resident set size of this process, in KiB.
pub(crate) fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

struct Series {
    samples: Samples,
    errors: usize,
    sent: usize,
    wall: Duration,
}

/// Open loop: one request every `1/rate` s for `duration`, each on its own
/// task; latency is send → whole body received.
async fn drive(
    client: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    body: &'static str,
    rate: u64,
    duration: Duration,
) -> Series {
    let total = (rate as f64 * duration.as_secs_f64()) as usize;
    let (tx, mut rx) = mpsc::unbounded_channel::<Option<Duration>>();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let start = Instant::now();
    for _ in 0..total {
        tick.tick().await;
        let mut req = client
            .post(url)
            .header("content-type", "application/json")
            .body(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let tx = tx.clone();
        tokio::spawn(async move {
            let t = Instant::now();
            let ok = match req.send().await {
                Ok(resp) if resp.status().is_success() => resp.bytes().await.is_ok(),
                _ => false,
            };
            let _ = tx.send(ok.then(|| t.elapsed()));
        });
    }
    drop(tx);
    let mut samples = Samples::with_capacity(total);
    let mut errors = 0;
    while let Some(r) = rx.recv().await {
        match r {
            Some(d) => samples.push(d),
            None => errors += 1,
        }
    }
    Series {
        samples,
        errors,
        sent: total,
        wall: start.elapsed(),
    }
}

impl Series {
    fn merge(mut self, other: Series) -> Series {
        self.samples.extend(other.samples);
        self.errors += other.errors;
        self.sent += other.sent;
        self.wall += other.wall;
        self
    }
}

/// Closed loop: `n` requests back to back on one connection.
async fn sequential(
    client: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    body: &'static str,
    n: usize,
) -> Series {
    let mut samples = Samples::with_capacity(n);
    let mut errors = 0;
    let start = Instant::now();
    for _ in 0..n {
        let mut req = client
            .post(url)
            .header("content-type", "application/json")
            .body(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let t = Instant::now();
        let ok = match req.send().await {
            Ok(resp) if resp.status().is_success() => resp.bytes().await.is_ok(),
            _ => false,
        };
        if ok {
            samples.push(t.elapsed());
        } else {
            errors += 1;
        }
    }
    Series {
        samples,
        errors,
        sent: n,
        wall: start.elapsed(),
    }
}

fn report(mode: &str, load: &str, rate: Option<u64>, d: Series, mut g: Series) {
    let mut d = d;
    let (rss, peak) = rss_kib();
    let (p50, p99, b50, b99) = (
        g.samples.quantile_us(0.5),
        g.samples.quantile_us(0.99),
        d.samples.quantile_us(0.5),
        d.samples.quantile_us(0.99),
    );
    emit(serde_json::json!({
        "bench": "gateway",
        "mode": mode,
        "load": load,
        "backend": "memory-ledger, local-mock-http1",
        "concurrency": if rate.is_some() { "open-loop" } else { "1" },
        "rate_per_s": rate,
        "ops": g.sent,
        "ops_per_s": round2(g.samples.len() as f64 / g.wall.as_secs_f64()),
        "errors": g.errors,
        "baseline_ops": d.sent,
        "baseline_errors": d.errors,
        "p50_us": round2(p50),
        "p99_us": round2(p99),
        "baseline_p50_us": round2(b50),
        "baseline_p99_us": round2(b99),
        "overhead_p50_us": round2(p50 - b50),
        "overhead_p99_us": round2(p99 - b99),
        "ratio_p50": round2(p50 / b50),
        "ratio_p99": round2(p99 / b99),
        "rss_kib": rss,
        "rss_peak_kib": peak,
    }));
}

/// Runs the `gateway` benchmark.
pub(crate) async fn run(args: Args) -> BenchResult {
    let rate = args.number("rate", 1000)?.max(1);
    let duration = Duration::from_secs(args.number("duration-s", 30)?.max(2));
    let closed_ops = args.number("closed-ops", 4000)?.max(2) as usize;
    let mock = mock_http::start(mock_http::llm_answers())?;
    let gateway = start_gateway(&mock)?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1024)
        .build()?;
    let direct_url = format!("{mock}/v1/chat/completions");
    let gateway_url = format!("{gateway}/v1/chat/completions");
    const PLAIN: &str = r#"{"model":"default","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Hello!"}]}"#;
    const ROUTED: &str = r#"{"model":"bench-7","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Hello!"}]}"#;
    const STREAM: &str = r#"{"model":"default","stream":true,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Hello!"}]}"#;
    let (rss_before, _) = rss_kib();
    emit(serde_json::json!({"bench": "gateway", "rss_before_kib": rss_before}));
    let (d_url, g_url) = (direct_url.as_str(), gateway_url.as_str());
    for (mode, body) in [("chat", PLAIN), ("chat_stream", STREAM)] {
        // Warm the connection pools and code paths of both targets.
        let warm = Duration::from_secs(1);
        drive(&client, d_url, None, body, rate, warm).await;
        drive(&client, g_url, Some(TOKEN), body, rate, warm).await;
        // Alternate halves so drift (other work on the machine) hits both.
        let half = duration / 2;
        let d = drive(&client, d_url, None, body, rate, half).await;
        let g = drive(&client, g_url, Some(TOKEN), body, rate, half).await;
        let d = d.merge(drive(&client, d_url, None, body, rate, half).await);
        let g = g.merge(drive(&client, g_url, Some(TOKEN), body, rate, half).await);
        report(mode, "open-loop", Some(rate), d, g);

        let half = closed_ops / 2;
        let d = sequential(&client, d_url, None, body, half).await;
        let g = sequential(&client, g_url, Some(TOKEN), body, half).await;
        let d = d.merge(sequential(&client, d_url, None, body, half).await);
        let g = g.merge(sequential(&client, g_url, Some(TOKEN), body, half).await);
        report(mode, "closed-loop", None, d, g);
    }
    // A routed name against the policy's own name, both through the gateway.
    let half = closed_ops / 2;
    let p = sequential(&client, g_url, Some(TOKEN), PLAIN, half).await;
    let r = sequential(&client, g_url, Some(TOKEN), ROUTED, half).await;
    let p = p.merge(sequential(&client, g_url, Some(TOKEN), PLAIN, half).await);
    let r = r.merge(sequential(&client, g_url, Some(TOKEN), ROUTED, half).await);
    report("chat_routed_vs_policy", "closed-loop", None, p, r);
    Ok(())
}
