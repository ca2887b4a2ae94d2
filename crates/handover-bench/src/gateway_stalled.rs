//! `gateway --stalled N`: what one in-flight request costs the gateway in
//! memory, and how many upstream connections a stalled provider gets. The
//! upstream accepts connections, reads requests and never answers; `N`
//! clients each open a connection to the gateway and send one chat
//! request. Once the upstream's accepted connections and the gateway's RSS
//! have settled, the line reports the gateway's RSS before and after,
//! `rss_per_in_flight_kib` ((after − before) ÷ N), the upstream
//! connections the stalled provider accepted (bounded by the provider's
//! `max_concurrency`, `--max-concurrency`, default 64 as in a config that
//! does not set it; the rest of the requests wait in its queue), and how
//! many clients had an answer already (should be 0: every request is still
//! in flight when measured).
//!
//! ```text
//! cargo run --release -p handover-bench -- gateway --stalled 10000 [--max-concurrency 64] [--target handover|floor]
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::gateway_proc::{Err, GatewayProcess, Limits, TOKEN};
use crate::stats::{emit, round2};
use crate::{BenchResult, args::Args};

/// A provider that accepts, reads and never answers; counts connections.
fn stalled_upstream(accepted: Arc<AtomicUsize>) -> Result<String, Err> {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    std_listener.set_nonblocking(true)?;
    let addr = std_listener.local_addr()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::spawn(move || {
        rt.block_on(async move {
            let Ok(listener) = TcpListener::from_std(std_listener) else {
                return;
            };
            while let Ok((mut sock, _)) = listener.accept().await {
                accepted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while matches!(sock.read(&mut buf).await, Ok(n) if n > 0) {}
                });
            }
        });
    });
    Ok(format!("http://{addr}"))
}

/// Runs the stalled-upstream memory benchmark.
pub(crate) async fn run(args: Args) -> BenchResult {
    let n = args.number("stalled", 1000)?.max(1);
    let max_concurrency = args.number("max-concurrency", 64)?.max(1);
    let accepted = Arc::new(AtomicUsize::new(0));
    let upstream = stalled_upstream(accepted.clone())?;
    let limits = Limits {
        max_concurrency,
        max_queue: n,
        connections: n + 16,
        deadline_s: 3600,
    };
    // `--target floor`: the bare pass-through (`gateway_floor`), capped
    // alike: what a hyper + axum + reqwest hop holds per waiting request.
    let (program, backend) = match args.string("target", "handover").as_str() {
        "handover" => (
            "gateway-serve",
            "memory-ledger, stalled-upstream-http1, gateway process",
        ),
        "floor" => (
            "floor-serve",
            "bare axum+reqwest pass-through (floor), stalled-upstream-http1",
        ),
        other => return Err(format!("--target: expected handover or floor, got {other:?}").into()),
    };
    let gw = GatewayProcess::start_program(program, &upstream, limits).await?;
    let (rss_before, _) = gw.rss_kib();
    let addr = gw.url.trim_start_matches("http://").to_owned();
    let body = r#"{"model":"default","messages":[{"role":"user","content":"Hello!"}]}"#;
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let started = Instant::now();
    let mut clients = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let mut sock = TcpStream::connect(&addr).await?;
        sock.write_all(request.as_bytes()).await?;
        clients.push(sock);
    }
    let expected = max_concurrency.min(n) as usize;
    let settled = settle(&gw, &accepted, expected).await;
    let (rss, peak) = gw.rss_kib();
    let answered = clients.iter().filter(|s| readable(s)).count();
    let grown = rss.saturating_sub(rss_before);
    emit(serde_json::json!({
        "bench": "gateway_stalled",
        "backend": backend,
        "concurrency": n,
        "in_flight": n,
        "max_concurrency": max_concurrency,
        "upstream_connections": accepted.load(Ordering::SeqCst),
        "answered_early": answered,
        "settled": settled,
        "setup_s": round2(started.elapsed().as_secs_f64()),
        "rss_before_kib": rss_before,
        "rss_kib": rss,
        "rss_peak_kib": peak,
        "rss_per_in_flight_kib": round2(grown as f64 / n as f64),
        // Nothing answers a stalled request: no rate or latency to report
        // (null, so every line carries the same fields).
        "ops_per_s": null,
        "p50_us": null,
        "p99_us": null,
        "baseline_p50_us": null,
        "baseline_p99_us": null,
        "ratio_p50": null,
        "ratio_p99": null,
    }));
    // Under a profiler, end it so the profile is written (else it is killed).
    if std::env::var_os("HANDOVER_BENCH_GATEWAY_WRAPPER").is_some() {
        gw.stop().await?;
    }
    Ok(())
}

/// Whether the gateway has written anything to `s` or closed it.
fn readable(s: &TcpStream) -> bool {
    let mut one = [0u8; 1];
    s.try_read(&mut one).is_ok()
}

/// Waits until the upstream has accepted `expected` connections and the
/// gateway's RSS has not changed for a second (at most 120 s); true if it
/// settled.
async fn settle(gw: &GatewayProcess, accepted: &AtomicUsize, expected: usize) -> bool {
    let deadline = Instant::now() + Duration::from_secs(120);
    let (mut last, mut still) = (0, 0);
    let mut poll = tokio::time::interval(Duration::from_millis(200));
    while Instant::now() < deadline {
        poll.tick().await;
        let (rss, _) = gw.rss_kib();
        still = if rss == last { still + 1 } else { 0 };
        last = rss;
        if accepted.load(Ordering::SeqCst) >= expected && still >= 5 {
            return true;
        }
    }
    false
}
