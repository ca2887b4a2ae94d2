//! Opening the ledger an `ops` command works on: the one a config file
//! names (SQLite or PostgreSQL), or a SQLite file given directly. One
//! function per backend, one match on the configured backend.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use handover::Config;
use handover::ledger::{
    Ledger, Limits, PostgresLedger, PostgresOptions, Retention, SqliteLedger, SqliteOptions,
};
use handover::router::config::LedgerBackend;

use crate::LedgerSource;

/// An open ledger and what it is.
pub(crate) struct Opened {
    pub(crate) ledger: Arc<dyn Ledger>,
    /// Human description (`sqlite /abs/path/handover.db`).
    pub(crate) description: String,
    /// The retention the ledger applies (from the config, or the defaults).
    pub(crate) retention: Retention,
}

/// Reads a config for the ledger only: provider API keys are not needed to
/// inspect operations, so unset key variables are not errors here.
pub(crate) fn read_config(path: &Path) -> anyhow::Result<Config> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read configuration file {}", path.display()))?;
    let (config, _missing_keys) = Config::check(&text, &|var| std::env::var(var).ok())
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(config)
}

/// Opens the ledger named by `src`. Never creates a ledger file: a path
/// that does not exist is an error (an operator looking at an empty new file
/// would conclude there is nothing to review).
pub(crate) async fn open(src: &LedgerSource) -> anyhow::Result<Opened> {
    if let Some(path) = &src.ledger {
        let retention = Retention::default();
        return open_sqlite(path, retention, Limits::default()).await;
    }
    let Some(config_path) = &src.config else {
        bail!("give --config FILE or --ledger PATH");
    };
    let config = read_config(config_path)?;
    let settings = config.ledger();
    let retention = Retention {
        replay_window: settings.replay_window,
        tombstone_horizon: settings.tombstone_horizon,
    };
    let limits = Limits {
        max_params_bytes: settings.max_params_bytes,
        max_depth: settings.max_params_depth,
    };
    match &settings.backend {
        LedgerBackend::Sqlite { path } => open_sqlite(Path::new(path), retention, limits).await,
        LedgerBackend::Memory => bail!(
            "{}: ledger backend \"memory\" lives inside the application process; there is nothing to open",
            config_path.display()
        ),
        LedgerBackend::Postgres {
            url_env,
            pool_size,
            statement_timeout,
        } => {
            let opts = PostgresOptions {
                retention,
                limits,
                // An inspection needs a connection or two, not the replicas' pool.
                max_connections: (*pool_size).clamp(1, 2),
                statement_timeout: *statement_timeout,
                ..PostgresOptions::default()
            };
            open_postgres(url_env, opts).await
        }
    }
}

/// Connects to the PostgreSQL ledger whose URL is in `$url_env`. The URL is
/// never printed (it may carry a password).
pub(crate) async fn open_postgres(url_env: &str, opts: PostgresOptions) -> anyhow::Result<Opened> {
    let Some(url) = std::env::var(url_env).ok().filter(|u| !u.trim().is_empty()) else {
        bail!("ledger.url_env: environment variable {url_env} (the PostgreSQL URL) is not set");
    };
    let retention = opts.retention;
    let ledger = PostgresLedger::connect(&url, opts)
        .await
        .with_context(|| format!("cannot open the PostgreSQL ledger at ${url_env}"))?;
    Ok(Opened {
        ledger: Arc::new(ledger),
        description: format!("postgres ${url_env}"),
        retention,
    })
}

/// Opens an existing SQLite ledger file. Relative paths are resolved against
/// the current directory, as the library does.
pub(crate) async fn open_sqlite(
    path: &Path,
    retention: Retention,
    limits: Limits,
) -> anyhow::Result<Opened> {
    let abs: PathBuf = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    if !abs.is_file() {
        bail!(
            "no ledger file at {} (relative paths are resolved against the current directory)",
            abs.display()
        );
    }
    let opts = SqliteOptions {
        retention,
        limits,
        ..SqliteOptions::default()
    };
    let ledger = SqliteLedger::open(&abs, opts)
        .await
        .with_context(|| format!("cannot open the ledger at {}", abs.display()))?;
    Ok(Opened {
        ledger: Arc::new(ledger),
        description: format!("sqlite {}", abs.display()),
        retention,
    })
}
