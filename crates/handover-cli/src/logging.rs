//! The process's log output: `tracing` events on stderr, filtered by
//! `RUST_LOG` (default: `info` for `serve`, `warn` for the other commands,
//! whose own output is the report), as text or as one JSON object per line
//! (`--log-format json`) for log shippers. Nothing logged carries a key, a
//! token or a request body: the library crates never put them in events.

use clap::ValueEnum;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

use crate::otlp::{OtlpFilter, OtlpLayer};

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line (timestamp, level, target, fields, span).
    Json,
}

/// Installs the global subscriber. `default` is the filter used when
/// `RUST_LOG` is unset; a `RUST_LOG` that does not parse is reported once
/// and replaced by `default`. The span exporter (`crate::otlp`) is part
/// of it from the start, with its own filter, so `RUST_LOG` quietening the
/// log does not silence export; it stays inert unless export is started.
pub(crate) fn init(format: LogFormat, default: &str) {
    let (filter, bad) = match std::env::var("RUST_LOG") {
        Ok(v) if !v.trim().is_empty() => match EnvFilter::try_new(&v) {
            Ok(f) => (f, None),
            Err(e) => (EnvFilter::new(default), Some(e)),
        },
        _ => (EnvFilter::new(default), None),
    };
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = match format {
        LogFormat::Text => fmt.boxed(),
        LogFormat::Json => fmt
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .boxed(),
    };
    let installed = tracing_subscriber::registry()
        .with(fmt.with_filter(filter))
        .with(OtlpLayer.with_filter(OtlpFilter))
        .try_init();
    if installed.is_err() {
        return;
    }
    if let Some(e) = bad {
        tracing::warn!(error = %e, "RUST_LOG does not parse; using {default:?}");
    }
}
