//! Opening the ledger an `ops` command works on: the one a config file
//! names (through [`handover::HandoverOptions::open_ledger`], the one place
//! that opens `[ledger]`), or a SQLite file given directly.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use handover::ledger::{Ledger, Retention, SqliteLedger, SqliteOptions};
use handover::router::config::LedgerBackend;
use handover::{Config, HandoverOptions};

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
        let abs = existing_file(path)?;
        let ledger = SqliteLedger::open(&abs, SqliteOptions::default())
            .await
            .with_context(|| format!("cannot open the ledger at {}", abs.display()))?;
        return Ok(Opened {
            ledger: Arc::new(ledger),
            description: format!("sqlite {}", abs.display()),
            retention: Retention::default(),
        });
    }
    let Some(config_path) = &src.config else {
        bail!("give --config FILE or --ledger PATH");
    };
    let config = read_config(config_path)?;
    let settings = config.ledger();
    let description = match &settings.backend {
        LedgerBackend::Memory => bail!(
            "{}: ledger backend \"memory\" lives inside the application process; there is nothing to open",
            config_path.display()
        ),
        LedgerBackend::Sqlite { path } => {
            format!("sqlite {}", existing_file(Path::new(path))?.display())
        }
        // The URL is never printed (it may carry a password).
        LedgerBackend::Postgres { url_env, .. } => format!("postgres ${url_env}"),
    };
    let ledger = HandoverOptions::new()
        .open_ledger(&config)
        .await
        .with_context(|| format!("cannot open the ledger ({description})"))?;
    Ok(Opened {
        ledger,
        description,
        retention: Retention {
            replay_window: settings.replay_window,
            tombstone_horizon: settings.tombstone_horizon,
        },
    })
}

/// `path` made absolute (against the current directory, as the library
/// does), if a file is there.
fn existing_file(path: &Path) -> anyhow::Result<PathBuf> {
    let abs: PathBuf = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    if !abs.is_file() {
        bail!(
            "no ledger file at {} (relative paths are resolved against the current directory)",
            abs.display()
        );
    }
    Ok(abs)
}
