//! The `gateway` benchmark: what the HTTP gateway adds to a chat call, in
//! latency and in the gateway's own CPU time and memory. In one run,
//! against the same local mock provider, each load is sent straight to the
//! mock (the baseline), then through the gateway (bearer token, policy
//! lookup, router task with its budget, OpenAI JSON both ways), halves
//! alternating so drift hits both; non-streaming and streaming:
//! * closed loop on 1, 16 and 64 connections (each back to back) — 1 shows
//!   the gateway's own processing without idle wake-ups, 16 and 64 its
//!   throughput;
//! * open loop at each `--rates` value (default 1,000 and 100 requests/s,
//!   each on its own task): an idle-between-requests gateway pays thread
//!   wake-ups, as a real service does;
//! * a routed model name (`bench-7` → `mock/bench-7` through a
//!   `[gateway.routes]` pattern) against the policy's own name, both
//!   through the gateway.
//!
//! The gateway is a process of its own (`gateway-serve`, see
//! [`crate::gateway_proc`]), so `cpu_us_per_req` (its CPU time over the
//! gateway series ÷ requests) and `rss_kib` are the gateway's alone.
//! `--stalled N` runs the memory-per-in-flight-request benchmark instead
//! ([`crate::gateway_stalled`]).
//!
//! ```text
//! cargo run --release -p handover-bench -- gateway [--rates 1000,100] [--duration-s 10] [--closed-ops 4000] [--connections 1,16,64] [--modes chat,chat_stream] [--routed yes|no] [--target handover|floor]
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::gateway_proc::{GatewayProcess, Limits, TOKEN};
use crate::stats::{Samples, emit, round2};
use crate::{BenchResult, args::Args, gateway_stalled, mock_http};

const PLAIN: &str = r#"{"model":"default","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Hello!"}]}"#;
const ROUTED: &str = r#"{"model":"bench-7","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Hello!"}]}"#;
/// What the `backend` field says of Handover's gateway and of the floor.
const BACKEND: &str = "memory-ledger, local-mock-http1, gateway process";
const FLOOR_BACKEND: &str = "bare axum+reqwest pass-through (floor), local-mock-http1";
const STREAM: &str = r#"{"model":"default","stream":true,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Hello!"}]}"#;

/// One measured series.
#[derive(Default)]
struct Series {
    samples: Samples,
    errors: usize,
    sent: usize,
    wall: Duration,
    /// Gateway CPU time spent during the series (zero for direct series).
    cpu: Duration,
}

impl Series {
    fn merge(mut self, other: Series) -> Series {
        self.samples.extend(other.samples);
        self.errors += other.errors;
        self.sent += other.sent;
        self.wall += other.wall;
        self.cpu += other.cpu;
        self
    }
}

/// Where a series is sent: straight to the mock, or through the gateway.
#[derive(Clone)]
struct Target {
    client: reqwest::Client,
    url: Arc<str>,
    /// Set for the gateway: requests carry its token and its CPU is read
    /// around each series.
    gateway: Option<Arc<GatewayProcess>>,
}

impl Target {
    /// One request; its latency (send → whole body) if it succeeded.
    async fn call(&self, body: &'static str) -> Option<Duration> {
        let mut req = self
            .client
            .post(&*self.url)
            .header("content-type", "application/json")
            .body(body);
        if self.gateway.is_some() {
            req = req.bearer_auth(TOKEN);
        }
        let t = Instant::now();
        match req.send().await {
            Ok(resp) if resp.status().is_success() => resp.bytes().await.ok().map(|_| t.elapsed()),
            _ => None,
        }
    }

    fn cpu(&self) -> Duration {
        self.gateway
            .as_deref()
            .map_or(Duration::ZERO, GatewayProcess::cpu)
    }
}

/// How a series loads its target.
#[derive(Clone, Copy)]
enum Load {
    /// `n` connections, each sending back to back, `ops` requests in all.
    Closed { connections: usize, ops: usize },
    /// One request every `1/rate` s for `duration`, each on its own task.
    Paced { rate: u64, duration: Duration },
}

impl Load {
    fn concurrency(self) -> serde_json::Value {
        match self {
            Load::Closed { connections, .. } => connections.into(),
            Load::Paced { .. } => "open-loop".into(),
        }
    }
}

async fn measure(t: &Target, body: &'static str, load: Load) -> Series {
    let (tx, mut rx) = mpsc::unbounded_channel::<Option<Duration>>();
    let (cpu0, start) = (t.cpu(), Instant::now());
    let sent = match load {
        Load::Closed { connections, ops } => {
            let per = (ops / connections).max(1);
            for _ in 0..connections {
                let (t, tx) = (t.clone(), tx.clone());
                tokio::spawn(async move {
                    for _ in 0..per {
                        let _ = tx.send(t.call(body).await);
                    }
                });
            }
            per * connections
        }
        Load::Paced { rate, duration } => {
            let total = (rate as f64 * duration.as_secs_f64()) as usize;
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            for _ in 0..total {
                tick.tick().await;
                let (t, tx) = (t.clone(), tx.clone());
                tokio::spawn(async move {
                    let _ = tx.send(t.call(body).await);
                });
            }
            total
        }
    };
    drop(tx);
    let mut s = Series {
        samples: Samples::with_capacity(sent),
        sent,
        ..Series::default()
    };
    while let Some(r) = rx.recv().await {
        match r {
            Some(d) => s.samples.push(d),
            None => s.errors += 1,
        }
    }
    s.wall = start.elapsed();
    s.cpu = t.cpu().saturating_sub(cpu0);
    s
}

/// A target and the body sent to it.
type Side<'a> = (&'a Target, &'static str);

/// Baseline and measured series, in alternating halves after a warm-up.
async fn compare(base: Side<'_>, meas: Side<'_>, load: Load) -> (Series, Series) {
    let half = match load {
        Load::Closed { connections, ops } => Load::Closed {
            connections,
            ops: ops / 2,
        },
        Load::Paced { rate, duration } => Load::Paced {
            rate,
            duration: duration / 2,
        },
    };
    let warm = match load {
        Load::Closed { connections, .. } => Load::Closed {
            connections,
            ops: connections * 20,
        },
        Load::Paced { rate, .. } => Load::Paced {
            rate,
            duration: Duration::from_secs(1),
        },
    };
    let ((bt, bb), (mt, mb)) = (base, meas);
    measure(bt, bb, warm).await;
    measure(mt, mb, warm).await;
    let b = measure(bt, bb, half).await;
    let m = measure(mt, mb, half).await;
    let b = b.merge(measure(bt, bb, half).await);
    let m = m.merge(measure(mt, mb, half).await);
    (b, m)
}

fn report(
    mode: &str,
    backend: &str,
    load: Load,
    gw: &GatewayProcess,
    rss_before: u64,
    mut b: Series,
    mut m: Series,
) {
    let (rss, peak) = gw.rss_kib();
    let (p50, p99, b50, b99) = (
        m.samples.quantile_us(0.5),
        m.samples.quantile_us(0.99),
        b.samples.quantile_us(0.5),
        b.samples.quantile_us(0.99),
    );
    let (label, rate) = match load {
        Load::Closed { .. } => ("closed-loop", None),
        Load::Paced { rate, .. } => ("open-loop", Some(rate)),
    };
    let cpu = (m.sent > 0).then(|| m.cpu.as_secs_f64() * 1e6 / m.sent as f64);
    emit(serde_json::json!({
        "bench": "gateway",
        "mode": mode,
        "load": label,
        "backend": backend,
        "concurrency": load.concurrency(),
        "rate_per_s": rate,
        "ops": m.sent,
        "ops_per_s": round2(m.samples.len() as f64 / m.wall.as_secs_f64()),
        "baseline_ops_per_s": round2(b.samples.len() as f64 / b.wall.as_secs_f64()),
        "errors": m.errors,
        "baseline_errors": b.errors,
        "p50_us": round2(p50),
        "p99_us": round2(p99),
        "baseline_p50_us": round2(b50),
        "baseline_p99_us": round2(b99),
        "overhead_p50_us": round2(p50 - b50),
        "overhead_p99_us": round2(p99 - b99),
        "ratio_p50": round2(p50 / b50),
        "ratio_p99": round2(p99 / b99),
        "cpu_us_per_req": cpu.map(round2),
        "rss_kib": rss,
        "rss_peak_kib": peak,
        "rss_before_kib": rss_before,
    }));
}

/// A comma-separated list of numbers (`--rates 1000,100`; `--rates ""` for none).
fn numbers(args: &Args, name: &str, default: &str) -> Result<Vec<u64>, String> {
    args.string(name, default)
        .split(',')
        .filter(|v| !v.trim().is_empty())
        .map(|v| {
            v.trim()
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("--{name}: expected positive whole numbers, got {v:?}"))
        })
        .collect()
}

/// Runs the `gateway` benchmark (or, with `--stalled N`, the memory one).
pub(crate) async fn run(args: Args) -> BenchResult {
    if args.number("stalled", 0)? > 0 {
        return gateway_stalled::run(args).await;
    }
    let rates = numbers(&args, "rates", "1000,100")?;
    let conns = numbers(&args, "connections", "1,16,64")?;
    let mut modes = Vec::new();
    for m in args.string("modes", "chat,chat_stream").split(',') {
        modes.push(match m.trim() {
            "chat" => ("chat", PLAIN),
            "chat_stream" => ("chat_stream", STREAM),
            other => {
                return Err(format!("--modes: expected chat or chat_stream, got {other:?}").into());
            }
        });
    }
    let duration = Duration::from_secs(args.number("duration-s", 10)?.max(2));
    let closed_ops = args.number("closed-ops", 4000)?.max(2) as usize;
    let mock = mock_http::start(mock_http::llm_answers())?;
    // `--target floor`: the same loads through a bare pass-through proxy
    // (see [`crate::gateway_floor`]) — what any gateway costs here.
    let (program, backend) = match args.string("target", "handover").as_str() {
        "handover" => ("gateway-serve", BACKEND),
        "floor" => ("floor-serve", FLOOR_BACKEND),
        other => return Err(format!("--target: expected handover or floor, got {other:?}").into()),
    };
    let gw = Arc::new(GatewayProcess::start_program(program, &mock, Limits::default()).await?);
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1024)
        .build()?;
    let direct = Target {
        client: client.clone(),
        url: format!("{mock}/v1/chat/completions").into(),
        gateway: None,
    };
    let through = Target {
        client,
        url: format!("{}/v1/chat/completions", gw.url).into(),
        gateway: Some(gw.clone()),
    };
    // Before any load: on every line (one JSON object per line, each a
    // whole result), so the growth under load can be read off any of them.
    let (rss_before, _) = gw.rss_kib();
    for (mode, body) in modes {
        for &c in &conns {
            let load = Load::Closed {
                connections: c as usize,
                ops: closed_ops.max(c as usize * 40),
            };
            let (b, m) = compare((&direct, body), (&through, body), load).await;
            report(mode, backend, load, &gw, rss_before, b, m);
        }
        for &rate in &rates {
            let load = Load::Paced { rate, duration };
            let (b, m) = compare((&direct, body), (&through, body), load).await;
            report(mode, backend, load, &gw, rss_before, b, m);
        }
    }
    if args.string("routed", "yes") != "no" && program == "gateway-serve" {
        // A routed name against the policy's own name, both through the gateway.
        let load = Load::Closed {
            connections: 1,
            ops: closed_ops,
        };
        let (p, r) = compare((&through, PLAIN), (&through, ROUTED), load).await;
        report(
            "chat_routed_vs_policy",
            backend,
            load,
            &gw,
            rss_before,
            p,
            r,
        );
    }
    gw.stop().await
}
