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
    let text = Config::read_text(path)?;
    let (config, _missing_keys) = Config::check(&text, &|var| std::env::var(var).ok())
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(config)
}

/// How an `ops` command uses the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// `list`, `show`: nothing is written, not even a lease expiry.
    ReadOnly,
    /// `resolve`, `purge`: an existing Handover ledger, written.
    ReadWrite,
}

/// Opens the ledger named by `src`. Never creates a ledger (a SQLite file,
/// PostgreSQL tables) nor migrates one: a path that does not exist, an
/// empty file, a file or database that is not a Handover ledger at this
/// version is an error (an operator looking at an empty new file would
/// conclude there is nothing to review; another application's database
/// must not gain our tables). A SQLite file is always checked read-only
/// first, so a refused file is left byte for byte as it was.
pub(crate) async fn open(src: &LedgerSource, access: Access) -> anyhow::Result<Opened> {
    if let Some(path) = &src.ledger {
        let abs = existing_file(path)?;
        let ledger = open_sqlite(&abs, access)
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
    let options = HandoverOptions::new();
    // Checked as an existing Handover ledger at this version before any
    // read-write open, which would create or migrate one.
    let checked = options
        .clone()
        .read_only(true)
        .open_ledger(&config)
        .await
        .with_context(|| format!("cannot open the ledger ({description})"))?;
    drop(checked);
    let ledger = options
        .read_only(access == Access::ReadOnly)
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

/// A SQLite ledger file opened for `access`, checked read-only first.
async fn open_sqlite(path: &Path, access: Access) -> anyhow::Result<SqliteLedger> {
    let read_only = SqliteOptions {
        read_only: true,
        ..SqliteOptions::default()
    };
    let checked = SqliteLedger::open(path, read_only).await?;
    if access == Access::ReadOnly {
        return Ok(checked);
    }
    checked.close().await;
    Ok(SqliteLedger::open(path, SqliteOptions::default()).await?)
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
    if abs.metadata().map(|m| m.len()).unwrap_or(0) == 0 {
        bail!(
            "{} is empty: not a Handover ledger (nothing was written to it)",
            abs.display()
        );
    }
    Ok(abs)
}
