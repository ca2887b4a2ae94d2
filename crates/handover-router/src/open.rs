//! Opening the ledger a configuration names: one place that turns `[ledger]`
//! into a running backend, for the CLI, the gateway and applications.

use std::path::Path;
use std::sync::Arc;

use handover_ledger::{
    Clock, Ledger, Limits, MemoryLedger, PostgresLedger, PostgresOptions, Retention, SqliteLedger,
    SqliteOptions,
};

use crate::config::{Config, LedgerBackend};
use crate::error::RouterError;

/// The retention windows `[ledger]` sets.
pub fn retention(config: &Config) -> Retention {
    let s = config.ledger();
    Retention {
        replay_window: s.replay_window,
        tombstone_horizon: s.tombstone_horizon,
    }
}

/// The parameter limits `[ledger]` sets.
pub fn limits(config: &Config) -> Limits {
    let s = config.ledger();
    Limits {
        max_params_bytes: s.max_params_bytes,
        max_depth: s.max_params_depth,
    }
}

/// Opens (creating if needed) the ledger `[ledger]` names, with its
/// retention and limits. The PostgreSQL URL is read with `env` from the
/// variable `ledger.url_env` names; an unset variable is an error naming it.
/// A store that cannot be reached fails here, before anything is sent.
pub async fn open_ledger(
    config: &Config,
    clock: Arc<dyn Clock>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Ledger>, RouterError> {
    let (retention, limits) = (retention(config), limits(config));
    Ok(match &config.ledger().backend {
        LedgerBackend::Memory => Arc::new(MemoryLedger::new(clock, retention, limits)),
        LedgerBackend::Sqlite { path } => {
            let opts = SqliteOptions {
                clock,
                retention,
                limits,
                ..SqliteOptions::default()
            };
            Arc::new(SqliteLedger::open(Path::new(path), opts).await?)
        }
        LedgerBackend::Postgres {
            url_env,
            pool_size,
            statement_timeout,
        } => {
            let url = env(url_env)
                .filter(|u| !u.trim().is_empty())
                .ok_or_else(|| RouterError::MissingLedgerUrl {
                    variable: url_env.clone(),
                })?;
            let opts = PostgresOptions {
                clock,
                retention,
                limits,
                max_connections: *pool_size,
                statement_timeout: *statement_timeout,
                ..PostgresOptions::default()
            };
            Arc::new(PostgresLedger::connect(&url, opts).await?)
        }
    })
}
