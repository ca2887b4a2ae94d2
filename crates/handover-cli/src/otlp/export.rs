//! The background task that sends queued spans to the collector: a batch
//! every `export_interval` (or sooner when a batch is full), one request at
//! a time, each within `export_timeout`. While a request is out, new spans
//! wait in the bounded queue; past `max_queued_spans` they are dropped and
//! counted (`handover_otlp_spans_dropped_total`), never waited for.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use handover::router::config::{LookupHeader, TelemetrySettings};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use tokio::sync::{mpsc, oneshot};

use super::{Finished, SINK, Sink, encode};

/// Spans per export request at most.
const MAX_BATCH: usize = 512;

/// The running export; [`Exporter::shutdown`] flushes what is queued.
pub(crate) struct Exporter {
    stop: oneshot::Sender<Duration>,
    task: tokio::task::JoinHandle<()>,
}

/// Starts exporting to `settings.otlp_endpoint`. Fails if a header's
/// secret is missing or invalid, or if export was already started.
pub(crate) fn start(settings: &TelemetrySettings) -> anyhow::Result<Exporter> {
    let headers = headers(settings)?;
    let client = reqwest::Client::builder()
        .timeout(settings.export_timeout)
        .default_headers(headers)
        .build()
        .context("cannot build the OTLP HTTP client")?;
    let capacity = usize::try_from(settings.max_queued_spans).unwrap_or(usize::MAX);
    let (tx, rx) = mpsc::channel(capacity);
    let sink = Sink {
        tx,
        dropped: AtomicU64::new(0),
    };
    if SINK.set(sink).is_err() {
        anyhow::bail!("span export is already running");
    }
    // Callsites seen before now were told "never" by `OtlpFilter`.
    tracing::callsite::rebuild_interest_cache();
    let (stop, stopped) = oneshot::channel();
    let batcher = Batcher {
        client,
        url: settings.otlp_endpoint.clone(),
        service_name: settings.service_name.clone(),
        failing: false,
        dropped_seen: 0,
    };
    let task = tokio::spawn(batcher.run(rx, settings.export_interval, stopped));
    Ok(Exporter { stop, task })
}

impl Exporter {
    /// Sends what is still queued, giving up after `deadline`.
    pub(crate) async fn shutdown(self, deadline: Duration) {
        let _ = self.stop.send(deadline);
        if tokio::time::timeout(deadline, self.task).await.is_err() {
            tracing::warn!("span export did not finish within {deadline:?}; queued spans are lost");
        }
    }
}

struct Batcher {
    client: reqwest::Client,
    url: String,
    service_name: String,
    /// The last export failed (logged once until one succeeds).
    failing: bool,
    dropped_seen: u64,
}

impl Batcher {
    async fn run(
        mut self,
        mut rx: mpsc::Receiver<Finished>,
        every: Duration,
        mut stop: oneshot::Receiver<Duration>,
    ) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut batch = Vec::with_capacity(MAX_BATCH);
        loop {
            tokio::select! {
                biased;
                deadline = &mut stop => {
                    let deadline = deadline.unwrap_or_default();
                    rx.close();
                    while let Ok(s) = rx.try_recv() {
                        batch.push(s);
                    }
                    let _ = tokio::time::timeout(deadline, self.send_all(&mut batch)).await;
                    return;
                }
                _ = tick.tick() => self.send_all(&mut batch).await,
                n = rx.recv_many(&mut batch, MAX_BATCH) => {
                    if n == 0 {
                        return;
                    }
                    if batch.len() >= MAX_BATCH {
                        self.send_all(&mut batch).await;
                    }
                }
            }
        }
    }

    /// Sends `batch` in requests of at most [`MAX_BATCH`] spans.
    async fn send_all(&mut self, batch: &mut Vec<Finished>) {
        self.count_dropped();
        while !batch.is_empty() {
            let rest = batch.split_off(batch.len().min(MAX_BATCH));
            self.send(batch).await;
            *batch = rest;
        }
    }

    async fn send(&mut self, spans: &[Finished]) {
        let body = encode::request(&self.service_name, spans);
        let sent = self
            .client
            .post(&self.url)
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .send()
            .await;
        let problem = match sent {
            Ok(resp) if resp.status().is_success() => None,
            Ok(resp) => Some(format!("the collector answered {}", resp.status())),
            Err(e) if e.is_timeout() => Some("no answer within export_timeout".to_owned()),
            Err(e) if e.is_connect() => Some("cannot connect".to_owned()),
            Err(_) => Some("the request failed".to_owned()),
        };
        match problem {
            Some(why) if !self.failing => {
                self.failing = true;
                tracing::warn!(
                    endpoint = %self.url,
                    spans = spans.len(),
                    "OTLP span export failed ({why}); spans of failed exports are dropped, requests are unaffected"
                );
            }
            Some(_) => {}
            None if self.failing => {
                self.failing = false;
                tracing::info!(endpoint = %self.url, "OTLP span export works again");
            }
            None => {}
        }
    }

    /// Reports spans dropped on a full queue since the last report.
    fn count_dropped(&mut self) {
        let Some(sink) = SINK.get() else { return };
        let total = sink.dropped.load(Ordering::Relaxed);
        if total > self.dropped_seen {
            let new = total - self.dropped_seen;
            self.dropped_seen = total;
            metrics::counter!("handover_otlp_spans_dropped_total").increment(new);
            tracing::warn!(dropped = new, "OTLP span queue full; spans dropped");
        }
    }
}

/// `[telemetry.headers]`, secrets read from their variables now and
/// marked sensitive (never printed by Debug).
fn headers(settings: &TelemetrySettings) -> anyhow::Result<HeaderMap> {
    let mut map = HeaderMap::new();
    for (name, header) in &settings.headers {
        let path = format!("telemetry.headers.{name}");
        let (text, secret) = match header {
            LookupHeader::Literal(v) => (v.clone(), false),
            LookupHeader::Env { var, prefix } => match std::env::var(var) {
                Ok(v) if !v.is_empty() => (format!("{prefix}{v}"), true),
                _ => anyhow::bail!("{path}.env: environment variable {var} is not set"),
            },
        };
        let name = HeaderName::from_bytes(name.as_bytes())
            .with_context(|| format!("{path}: not a valid header name"))?;
        let mut value = HeaderValue::from_str(&text)
            .map_err(|_| anyhow::anyhow!("{path}: not a valid header value"))?;
        value.set_sensitive(secret);
        map.insert(name, value);
    }
    Ok(map)
}
