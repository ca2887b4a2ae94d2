//! The `ledger` benchmark: full operation lifecycles against a ledger
//! backend, at a given concurrency, with a physical baseline measured in the
//! same run: a raw 4 KiB write + `sync_data` on a file in the same directory.
//! A lifecycle is what the write gate records for one action
//! (`--lifecycle gate`, the default: `begin_dispatched` → `confirm`, two
//! durable commits) or the three separate steps a caller driving the ledger
//! by hand makes (`--lifecycle steps`: `begin` → `mark_dispatched` →
//! `confirm`, three commits).
//!
//! ```text
//! cargo run --release -p handover-bench -- ledger --backend sqlite --concurrency 64 --ops 20000 [--lifecycle steps]
//! ```
//!
//! `fsyncs_per_lifecycle_p50` is the lifecycle p50 divided by the fsync p50:
//! how many raw durable writes one lifecycle costs in latency.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use handover_ledger::{
    BeginOptions, BeginOutcome, Dispatch, Ledger, Limits, MemoryLedger, OperationRequest,
    SqliteLedger, SqliteOptions,
};

use crate::stats::{Samples, emit, round2};
use crate::{BenchResult, args::Args};

/// A scratch directory under the current directory (on real disk, not tmpfs),
/// removed on drop.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    pub(crate) fn new() -> std::io::Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = std::env::current_dir()?.join(format!(
            ".handover-bench-ledger-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir)?;
        Ok(Self(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Latency of a raw fsync'd 4 KiB write, `n` times, in `dir`.
pub(crate) fn fsync_baseline(dir: &Path, n: usize) -> std::io::Result<Samples> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("baseline.bin"))?;
    let block = [0x5au8; 4096];
    let mut samples = Samples::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        file.write_all(&block)?;
        file.sync_data()?;
        samples.push(t.elapsed());
    }
    Ok(samples)
}

/// Which commands one lifecycle makes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lifecycle {
    /// What `perform` records: claim and dispatch in one commit, then the
    /// outcome (two commits).
    Gate,
    /// `begin`, `mark_dispatched` and `confirm` apart (three commits).
    Steps,
}

impl Lifecycle {
    /// `--lifecycle gate|steps` (default `gate`).
    pub(crate) fn from_args(args: &Args) -> Result<Self, String> {
        match args.string("lifecycle", "gate").as_str() {
            "gate" => Ok(Self::Gate),
            "steps" => Ok(Self::Steps),
            other => Err(format!(
                "--lifecycle: expected gate or steps, got {other:?}"
            )),
        }
    }

    /// Its name and durable commits, for the JSON line.
    pub(crate) fn describe(self) -> (&'static str, u32) {
        match self {
            Self::Gate => ("gate", 2),
            Self::Steps => ("steps", 3),
        }
    }
}

async fn lifecycle(
    ledger: &dyn Ledger,
    req: &OperationRequest,
    opts: &BeginOptions,
    kind: Lifecycle,
) -> BenchResult {
    let dispatch = || Dispatch {
        executor: "bench".into(),
        metadata: None,
    };
    let started = match kind {
        Lifecycle::Gate => ledger.begin_dispatched(req, opts, dispatch()).await?,
        Lifecycle::Steps => ledger.begin(req, opts).await?,
    };
    let BeginOutcome::Started(claim) = started else {
        return Err(format!("begin of {} did not start", req.id()).into());
    };
    if let Lifecycle::Steps = kind {
        ledger.mark_dispatched(&claim, dispatch()).await?;
    }
    ledger
        .confirm(&claim, serde_json::json!({"shipment": "S-1"}), None)
        .await?;
    Ok(())
}

pub(crate) fn requests(prefix: &str, n: usize) -> Result<Vec<OperationRequest>, String> {
    (0..n)
        .map(|i| {
            OperationRequest::new(
                "bench",
                &format!("{prefix}-{i}"),
                "create_shipment",
                &serde_json::json!({"order": i, "carrier": "dhl", "items": [1, 2, 3]}),
                &Limits::default(),
            )
            .map_err(|e| e.to_string())
        })
        .collect()
}

/// Runs `reqs` as lifecycles on `concurrency` tasks; returns per-lifecycle
/// latencies and the wall time of the whole run.
pub(crate) async fn drive(
    ledger: Arc<dyn Ledger>,
    reqs: Arc<Vec<OperationRequest>>,
    concurrency: usize,
    kind: Lifecycle,
) -> Result<(Samples, Duration), Box<dyn std::error::Error + Send + Sync>> {
    let next = Arc::new(AtomicUsize::new(0));
    let opts = Arc::new(BeginOptions::new("bench", Duration::from_secs(60)));
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (ledger, reqs, next, opts) = (ledger.clone(), reqs.clone(), next.clone(), opts.clone());
        tasks.push(tokio::spawn(async move {
            let mut samples = Samples::with_capacity(reqs.len() / concurrency + 1);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(req) = reqs.get(i) else { break };
                let t = Instant::now();
                lifecycle(&*ledger, req, &opts, kind).await?;
                samples.push(t.elapsed());
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(samples)
        }));
    }
    let mut all = Samples::with_capacity(reqs.len());
    for t in tasks {
        all.extend(t.await??);
    }
    Ok((all, start.elapsed()))
}

/// Runs the `ledger` benchmark.
pub(crate) async fn run(args: Args) -> BenchResult {
    let backend = args.string("backend", "sqlite");
    if backend == "postgres" {
        return crate::ledger_pg::run(args).await;
    }
    let concurrency = usize::try_from(args.number("concurrency", 1)?)?.max(1);
    let ops = usize::try_from(args.number("ops", 5_000)?)?.max(1);
    let kind = Lifecycle::from_args(&args)?;
    let baseline_ops = usize::try_from(args.number("baseline-ops", 500)?)?.max(1);
    let scratch = Scratch::new()?;

    // The disk's fsync latency drifts on shared machines: measure half the
    // baseline before the run and half after, and report both together.
    let dir = scratch.0.clone();
    let half = baseline_ops.div_ceil(2);
    let mut baseline = tokio::task::spawn_blocking(move || fsync_baseline(&dir, half)).await??;

    let ledger: Arc<dyn Ledger> = match backend.as_str() {
        "memory" => Arc::new(MemoryLedger::default()),
        "sqlite" => Arc::new(
            SqliteLedger::open(scratch.0.join("ledger.db"), SqliteOptions::default()).await?,
        ),
        other => {
            return Err(
                format!("--backend: expected memory, sqlite or postgres, got {other:?}").into(),
            );
        }
    };
    let warmup = Arc::new(requests("warmup", (ops / 10).clamp(10, 500))?);
    drive(ledger.clone(), warmup, concurrency, kind).await?;
    let reqs = Arc::new(requests("op", ops)?);
    let (mut samples, wall) = drive(ledger, reqs, concurrency, kind).await?;
    let dir = scratch.0.clone();
    baseline.extend(tokio::task::spawn_blocking(move || fsync_baseline(&dir, half)).await??);

    let (p50, p99) = (samples.quantile_us(0.50), samples.quantile_us(0.99));
    let (b50, b99) = (baseline.quantile_us(0.50), baseline.quantile_us(0.99));
    let (lifecycle, commits) = kind.describe();
    emit(serde_json::json!({
        "bench": "ledger",
        "backend": backend,
        "lifecycle": lifecycle,
        "commits_per_lifecycle": commits,
        "concurrency": concurrency,
        "ops": samples.len(),
        "ops_per_s": round2(samples.len() as f64 / wall.as_secs_f64()),
        "p50_us": round2(p50),
        "p99_us": round2(p99),
        "baseline": "write 4 KiB + sync_data, same directory, sequential; half before, half after the run",
        "baseline_p50_us": round2(b50),
        "baseline_p99_us": round2(b99),
        "ratio_p50": round2(p50 / b50),
        "ratio_p99": round2(p99 / b99),
        "fsyncs_per_lifecycle_p50": round2(p50 / b50),
    }));
    Ok(())
}
