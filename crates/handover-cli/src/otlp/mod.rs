//! Span export over OTLP/HTTP (JSON) when `[telemetry] otlp_endpoint` is
//! set. The spans are the ones the libraries already make — the gateway's
//! `request`, the router's `handover.task.*`, the providers' `chat` attempt
//! spans with OpenTelemetry GenAI names (`gen_ai.*`, `error.type`) — and
//! their fields are exported as they are: no second naming. Fields never
//! hold keys, prompts or bodies (the libraries never put them there).
//!
//! Export never slows a request: a finished span is handed to a bounded
//! queue with `try_send` (full: dropped and counted), and one background
//! task sends batches with a deadline per request. At shutdown the queue is
//! flushed once, within a deadline.

mod encode;
mod export;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use tokio::sync::mpsc;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Filter};
use tracing_subscriber::registry::LookupSpan;

pub(crate) use export::start;

/// Where finished spans go; set once, when export starts.
static SINK: OnceLock<Sink> = OnceLock::new();

struct Sink {
    tx: mpsc::Sender<Finished>,
    /// Spans dropped because the queue was full.
    dropped: AtomicU64,
}

/// An attribute value, as OTLP types it.
#[derive(Debug, Clone)]
pub(crate) enum Value {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

/// A span while it is open (kept in the registry's extensions).
struct Open {
    trace_id: u128,
    span_id: u64,
    parent: Option<u64>,
    start: SystemTime,
    attrs: Vec<(&'static str, Value)>,
}

/// A closed span, waiting for export.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) name: &'static str,
    pub(crate) target: &'static str,
    pub(crate) trace_id: u128,
    pub(crate) span_id: u64,
    pub(crate) parent: Option<u64>,
    pub(crate) start: SystemTime,
    pub(crate) end: SystemTime,
    pub(crate) attrs: Vec<(&'static str, Value)>,
}

/// The `tracing` layer that turns Handover's spans into [`Finished`]
/// spans. Inert (and its filter refuses everything) until [`start`].
pub(crate) struct OtlpLayer;

/// Only Handover's own spans, at `info` or above, and only while export runs.
pub(crate) struct OtlpFilter;

impl OtlpFilter {
    fn wants(meta: &Metadata<'_>) -> bool {
        meta.is_span()
            && SINK.get().is_some()
            && meta.target().starts_with("handover")
            && *meta.level() <= tracing::Level::INFO
    }
}

impl<S> Filter<S> for OtlpFilter {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        Self::wants(meta)
    }

    /// Decided once per callsite, not per span: the default ("sometimes")
    /// made every span of every request ask this filter, and kept the
    /// registry creating, entering and closing spans that no layer wanted
    /// (about 50k instructions per streamed request with `RUST_LOG=warn`).
    /// [`start`] has the callsites asked again once export runs.
    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> tracing::subscriber::Interest {
        if Self::wants(meta) {
            tracing::subscriber::Interest::always()
        } else {
            tracing::subscriber::Interest::never()
        }
    }
}

impl<S> tracing_subscriber::Layer<S> for OtlpLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let parent = span.scope().skip(1).find_map(|p| {
            p.extensions()
                .get::<Open>()
                .map(|o| (o.trace_id, o.span_id))
        });
        let mut open = Open {
            trace_id: parent.map_or_else(nonzero_u128, |p| p.0),
            span_id: nonzero_u64(),
            parent: parent.map(|p| p.1),
            start: SystemTime::now(),
            attrs: Vec::new(),
        };
        attrs.record(&mut Visitor(&mut open.attrs));
        span.extensions_mut().insert(open);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if let Some(open) = span.extensions_mut().get_mut::<Open>() {
            values.record(&mut Visitor(&mut open.attrs));
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let (Some(span), Some(sink)) = (ctx.span(&id), SINK.get()) else {
            return;
        };
        let Some(open) = span.extensions_mut().remove::<Open>() else {
            return;
        };
        let meta = span.metadata();
        let finished = Finished {
            name: meta.name(),
            target: meta.target(),
            trace_id: open.trace_id,
            span_id: open.span_id,
            parent: open.parent,
            start: open.start,
            end: SystemTime::now(),
            attrs: open.attrs,
        };
        if sink.tx.try_send(finished).is_err() {
            sink.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Collects a span's fields; a field recorded again replaces its value.
struct Visitor<'a>(&'a mut Vec<(&'static str, Value)>);

impl Visitor<'_> {
    fn put(&mut self, field: &Field, value: Value) {
        let name = field.name();
        match self.0.iter_mut().find(|(k, _)| *k == name) {
            Some(slot) => slot.1 = value,
            None => self.0.push((name, value)),
        }
    }
}

impl Visit for Visitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::Str(value.to_owned()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::Int(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        match i64::try_from(value) {
            Ok(v) => self.put(field, Value::Int(v)),
            Err(_) => self.put(field, Value::Str(value.to_string())),
        }
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::Float(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.put(field, Value::Str(format!("{value:?}")));
    }
}

/// OTLP treats all-zero ids as invalid.
fn nonzero_u128() -> u128 {
    rand::random::<u128>().max(1)
}

fn nonzero_u64() -> u64 {
    rand::random::<u64>().max(1)
}
