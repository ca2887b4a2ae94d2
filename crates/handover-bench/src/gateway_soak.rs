//! The `gateway-soak` benchmark: does the gateway's memory stay flat under
//! a long paced load when nobody scrapes `/metrics`? (Issue 15: with the
//! Prometheus recorder's upkeep never running, RSS grew ~35 bytes per
//! request until a scrape.) Sends `--rate` chat requests per second
//! through the gateway for `--duration-s` seconds, never touching
//! `/metrics`, and prints one line per `--window-s` window (the gateway
//! process's RSS, latency of that window) and a summary: RSS after
//! warm-up vs at the end, and the
//! last window's latency against the first's (the baseline of this run).
//! The load generator keeps only one window of samples, so its own memory
//! does not grow with the run.
//!
//! ```text
//! cargo run --release -p handover-bench -- gateway-soak --rate 1000 --duration-s 600
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::gateway_proc::{GatewayProcess, Limits, TOKEN};
use crate::stats::{Samples, emit, round2};
use crate::{BenchResult, args::Args, mock_http};

const BACKEND: &str = "memory-ledger, local-mock-http1, no /metrics scrape";

const BODY: &str = r#"{"model":"default","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Hello!"}]}"#;

enum Event {
    Done(Option<Duration>),
    Window(u64),
}

struct Window {
    p50: f64,
    p99: f64,
}

/// Runs the `gateway-soak` benchmark.
pub(crate) async fn run(args: Args) -> BenchResult {
    let rate = args.number("rate", 1000)?.max(1);
    let duration = Duration::from_secs(args.number("duration-s", 600)?.max(2));
    let window = Duration::from_secs(args.number("window-s", 60)?.max(1));
    let mock = mock_http::start(mock_http::llm_answers())?;
    let gw = Arc::new(GatewayProcess::start(&mock, Limits::default()).await?);
    let url = format!("{}/v1/chat/completions", gw.url);
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1024)
        .build()?;

    // Warm-up: pools, code paths, allocator arenas.
    let (tx, rx) = mpsc::unbounded_channel();
    let collector = tokio::spawn(collect(rx, gw.clone(), rate));
    pace(&client, &url, rate, Duration::from_secs(10), &tx).await;
    let _ = tx.send(Event::Window(0));
    let (rss_start, _) = gw.rss_kib();
    let started = Instant::now();
    let windows = duration.as_secs().div_ceil(window.as_secs()).max(1);
    for n in 1..=windows {
        pace(&client, &url, rate, window.min(duration), &tx).await;
        let _ = tx.send(Event::Window(n));
    }
    drop(tx);
    let (windows, errors, ops) = collector.await?;
    let (rss_end, rss_peak) = gw.rss_kib();
    let (Some(first), Some(last)) = (windows.get(1), windows.last()) else {
        return Err("the run was shorter than one window".into());
    };
    emit(serde_json::json!({
        "bench": "gateway_soak",
        "backend": BACKEND,
        "concurrency": "open-loop",
        "rate_per_s": rate,
        "duration_s": duration.as_secs(),
        "ops": ops,
        "errors": errors,
        "ops_per_s": round2(ops as f64 / started.elapsed().as_secs_f64()),
        "p50_us": round2(last.p50),
        "p99_us": round2(last.p99),
        "baseline_p50_us": round2(first.p50),
        "baseline_p99_us": round2(first.p99),
        "ratio_p50": round2(last.p50 / first.p50),
        "ratio_p99": round2(last.p99 / first.p99),
        "rss_start_kib": rss_start,
        "rss_kib": rss_end,
        "rss_peak_kib": rss_peak,
        "rss_growth_pct": round2((rss_end as f64 / rss_start as f64 - 1.0) * 100.0),
    }));
    // Under a profiler, end it so the profile is written (else it is killed).
    if std::env::var_os("HANDOVER_BENCH_GATEWAY_WRAPPER").is_some() {
        gw.stop().await?;
    }
    Ok(())
}

/// One request every `1/rate` s for `length`, each on its own task.
async fn pace(
    client: &reqwest::Client,
    url: &str,
    rate: u64,
    length: Duration,
    tx: &mpsc::UnboundedSender<Event>,
) {
    let total = (rate as f64 * length.as_secs_f64()) as usize;
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    for _ in 0..total {
        tick.tick().await;
        let req = client
            .post(url)
            .header("content-type", "application/json")
            .bearer_auth(TOKEN)
            .body(BODY);
        let tx = tx.clone();
        tokio::spawn(async move {
            let t = Instant::now();
            let ok = match req.send().await {
                Ok(resp) if resp.status().is_success() => resp.bytes().await.is_ok(),
                _ => false,
            };
            let _ = tx.send(Event::Done(ok.then(|| t.elapsed())));
        });
    }
}

/// Per window: latency quantiles and RSS, printed as they close, each
/// against the first window after the warm-up (window 1; the warm-up and
/// that window are their own baseline), as the run's last line compares.
async fn collect(
    mut rx: mpsc::UnboundedReceiver<Event>,
    gw: Arc<GatewayProcess>,
    rate: u64,
) -> (Vec<Window>, u64, u64) {
    let mut windows = Vec::new();
    let mut samples = Samples::default();
    let (mut errors, mut ops) = (0u64, 0u64);
    let mut opened = Instant::now();
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Done(Some(d)) => {
                samples.push(d);
                ops += 1;
            }
            Event::Done(None) => errors += 1,
            Event::Window(i) => {
                let (rss, _) = gw.rss_kib();
                let w = Window {
                    p50: samples.quantile_us(0.5),
                    p99: samples.quantile_us(0.99),
                };
                let base = windows.get(1).unwrap_or(&w);
                emit(serde_json::json!({
                    "bench": "gateway_soak_window",
                    "backend": BACKEND,
                    "concurrency": "open-loop",
                    "rate_per_s": rate,
                    "window": i,
                    "ops": samples.len(),
                    "errors": errors,
                    "ops_per_s": round2(samples.len() as f64 / opened.elapsed().as_secs_f64()),
                    "p50_us": round2(w.p50),
                    "p99_us": round2(w.p99),
                    "baseline_p50_us": round2(base.p50),
                    "baseline_p99_us": round2(base.p99),
                    "ratio_p50": round2(w.p50 / base.p50),
                    "ratio_p99": round2(w.p99 / base.p99),
                    "rss_kib": rss,
                }));
                windows.push(w);
                samples = Samples::default();
                opened = Instant::now();
                if i == 0 {
                    // Warm-up done: count the measured run only.
                    (errors, ops) = (0, 0);
                }
            }
        }
    }
    (windows, errors, ops)
}
