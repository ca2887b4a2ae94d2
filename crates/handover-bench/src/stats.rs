//! Latency percentiles and the one-JSON-object-per-line report.

use std::sync::Arc;
use std::time::{Duration, Instant};

/// Latency samples of one measured series.
#[derive(Default)]
pub(crate) struct Samples(Vec<Duration>);

impl Samples {
    /// An empty series with room for `n` samples.
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self(Vec::with_capacity(n))
    }

    /// Adds one sample.
    pub(crate) fn push(&mut self, d: Duration) {
        self.0.push(d);
    }

    /// Merges another series into this one.
    pub(crate) fn extend(&mut self, other: Samples) {
        self.0.extend(other.0);
    }

    /// The `q` quantile (0.0..=1.0) in microseconds (nearest rank).
    pub(crate) fn quantile_us(&mut self, q: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.sort_unstable();
        let rank = ((q * self.0.len() as f64).ceil() as usize).clamp(1, self.0.len());
        self.0[rank - 1].as_secs_f64() * 1e6
    }

    /// Number of samples.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

/// Prints one JSON object on one line to stdout.
pub(crate) fn emit(line: serde_json::Value) {
    println!("{line}");
}

/// Rounds to two decimals for readable output.
pub(crate) fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Runs `ops` operations on `concurrency` workers; `op(i)` returns its latency.
pub(crate) async fn measure<F, Fut>(
    ops: usize,
    concurrency: usize,
    op: F,
) -> Result<(Samples, Duration), Box<dyn std::error::Error + Send + Sync>>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Duration, Box<dyn std::error::Error + Send + Sync>>> + Send,
{
    let op = Arc::new(op);
    let per_worker = ops / concurrency;
    let start = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|w| {
            let op = op.clone();
            tokio::spawn(async move {
                let mut s = Samples::with_capacity(per_worker);
                for i in 0..per_worker {
                    s.push(op(w * per_worker + i).await?);
                }
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(s)
            })
        })
        .collect();
    let mut all = Samples::with_capacity(ops);
    for w in workers {
        all.extend(w.await??);
    }
    Ok((all, start.elapsed()))
}
