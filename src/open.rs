//! One call from a validated [`Config`] to a ready [`Handover`]: the ledger
//! `[ledger]` names, opened with its retention and limits, one clock shared
//! by the ledger, the write gate and the reconciler, and the router with the
//! API keys from the environment.
//!
//! This is the only place that turns `[ledger]` into a running backend; the
//! gateway (`handover serve`) and the CLI open their ledgers through it too.

use std::fmt;
use std::sync::Arc;

use handover_ledger::{
    Clock, Ledger, LedgerError, Limits, MemoryLedger, Retention, SystemClock, ValidationError,
};
use handover_router::RouterError;
use handover_router::config::{Config, ConfigIssue, ConfigIssues, LedgerBackend};
use handover_router::gate::WriteGate;
use handover_router::reconcile::{HttpLookup, Reconciler};
use handover_router::route::Router;

type Env = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Handover opened from a configuration: the ledger, the content router,
/// the write gate over that ledger and a reconciler factory, all on one
/// clock. Cheap to clone (every part is shared).
///
/// ```no_run
/// # async fn run() -> Result<(), handover::router::RouterError> {
/// let config = handover::Config::load("handover.toml")?;
/// let handover = handover::Handover::open(&config).await?;
/// let task = handover.router().task("default")?;
/// # let _ = task; Ok(()) }
/// ```
#[derive(Clone)]
pub struct Handover {
    config: Config,
    clock: Arc<dyn Clock>,
    router: Router,
    gate: WriteGate,
    lookups: Arc<Vec<(String, HttpLookup)>>,
}

impl fmt::Debug for Handover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handover")
            .field("ledger", &self.config.ledger().backend)
            .field("holder", &self.gate.holder())
            .finish_non_exhaustive()
    }
}

impl Handover {
    /// Opens everything `config` describes, on the system clock, with API
    /// keys and the PostgreSQL URL from the process environment: the same
    /// as `HandoverOptions::new().open(config)`.
    ///
    /// Fails before anything is sent if the ledger cannot be opened (an
    /// unreachable store, an unset `ledger.url_env` variable, a backend this
    /// build was compiled without) or a provider cannot be built (an unset
    /// API-key variable).
    pub async fn open(config: &Config) -> Result<Self, RouterError> {
        HandoverOptions::new().open(config).await
    }

    /// The validated configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The content router: one budget per user task, fallback, breakers.
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// The write gate: the only way a business action is executed.
    pub fn gate(&self) -> &WriteGate {
        &self.gate
    }

    /// The ledger `[ledger]` names.
    pub fn ledger(&self) -> &Arc<dyn Ledger> {
        self.gate.ledger()
    }

    /// The clock the ledger, the gate and the reconciler share.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// A reconciler over this gate and clock, with every HTTP lookup the
    /// configuration declares (`[actions.NAME.lookup]` with a `url`)
    /// already registered. Register the application's own lookups and
    /// re-send executors on it, then run it on a schedule (`handover serve`
    /// runs one every `gateway.reconcile_every`).
    pub fn reconciler(&self) -> Reconciler {
        self.lookups.iter().fold(
            Reconciler::new(self.gate.clone(), self.clock.clone()),
            |r, (action, lookup)| r.with_lookup(action, lookup.clone()),
        )
    }
}

/// How to open a [`Handover`]: defaults for a production process (system
/// clock, process environment), overridable for tests and embedders.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::sync::Arc;
/// use handover::ledger::{ManualClock, Timestamp};
///
/// let config = handover::Config::parse(r#"
///     [ledger]
///     backend = "memory"
///     [providers.local]
///     kind = "openai_compatible"
///     base_url = "http://127.0.0.1:9/v1"
///     model = "m"
///     [policies.default]
///     chain = ["local"]
/// "#, &|_| None).unwrap();
/// let clock = Arc::new(ManualClock::new(Timestamp::from_millis(0)));
/// let handover = handover::HandoverOptions::new()
///     .clock(clock)
///     .env(|_| None)
///     .holder("replica-1")
///     .open(&config)
///     .await
///     .unwrap();
/// assert_eq!(handover.gate().holder(), "replica-1");
/// # }
/// ```
#[derive(Clone)]
pub struct HandoverOptions {
    clock: Arc<dyn Clock>,
    env: Env,
    holder: Option<String>,
    read_only: bool,
}

impl fmt::Debug for HandoverOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandoverOptions")
            .field("clock", &self.clock)
            .field("holder", &self.holder)
            .finish_non_exhaustive()
    }
}

impl Default for HandoverOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl HandoverOptions {
    /// System clock, process environment, a generated holder name.
    pub fn new() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            env: Arc::new(|var| std::env::var(var).ok()),
            holder: None,
            read_only: false,
        }
    }

    /// The clock shared by the ledger (leases, retention), the write gate
    /// and the reconciler (next-check times).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Where API keys and the PostgreSQL URL are looked up (default: the
    /// process environment).
    pub fn env(mut self, env: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        self.env = Arc::new(env);
        self
    }

    /// For [`HandoverOptions::open_ledger`]: open an existing ledger
    /// for reading only: nothing created, migrated or written, on either
    /// backend (`SqliteOptions::read_only`, `PostgresOptions::read_only`);
    /// a store without a Handover ledger at this version's schema is
    /// refused. Reads settle lease expiries in memory only. For
    /// inspection tools.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// The name this process's claims carry in the ledger (e.g. the replica).
    pub fn holder(mut self, holder: impl Into<String>) -> Self {
        self.holder = Some(holder.into());
        self
    }

    /// Opens the ledger, builds the router, the write gate and the
    /// configured HTTP lookups (header secrets read from `env` now).
    pub async fn open(self, config: &Config) -> Result<Handover, RouterError> {
        if let Some(holder) = &self.holder
            && holder.trim().is_empty()
        {
            let bad = ValidationError::new("holder", "must not be empty");
            return Err(LedgerError::from(bad).into());
        }
        // Providers first: a missing API key is found without touching the store.
        let router = Router::with_env(config, &*self.env)?;
        let lookups = HttpLookup::from_config(config, &*self.env)?;
        let ledger = self.open_ledger(config).await?;
        let mut gate = WriteGate::new(ledger, config.clone(), self.clock.clone());
        if let Some(holder) = self.holder {
            gate = gate.with_holder(holder);
        }
        Ok(Handover {
            config: config.clone(),
            clock: self.clock,
            router,
            gate,
            lookups: Arc::new(lookups),
        })
    }

    /// Opens only the ledger `[ledger]` names (creating a SQLite file or
    /// the PostgreSQL tables if missing), with its retention and limits:
    /// for tools that inspect operations and need no provider keys.
    pub async fn open_ledger(&self, config: &Config) -> Result<Arc<dyn Ledger>, RouterError> {
        let settings = config.ledger();
        let retention = Retention {
            replay_window: settings.replay_window,
            tombstone_horizon: settings.tombstone_horizon,
        };
        let limits = Limits {
            max_params_bytes: settings.max_params_bytes,
            max_depth: settings.max_params_depth,
        };
        let clock = self.clock.clone();
        Ok(match &settings.backend {
            LedgerBackend::Memory => Arc::new(MemoryLedger::new(clock, retention, limits)),
            #[cfg(feature = "sqlite")]
            LedgerBackend::Sqlite { path } => {
                let opts = handover_ledger::SqliteOptions {
                    clock,
                    retention,
                    limits,
                    read_only: self.read_only,
                    ..Default::default()
                };
                Arc::new(handover_ledger::SqliteLedger::open(path, opts).await?)
            }
            #[cfg(feature = "postgres")]
            LedgerBackend::Postgres {
                url_env,
                pool_size,
                statement_timeout,
                call_timeout,
            } => {
                let url = (self.env)(url_env)
                    .filter(|u| !u.trim().is_empty())
                    .ok_or_else(|| RouterError::MissingLedgerUrl {
                        variable: url_env.clone(),
                    })?;
                let opts = handover_ledger::PostgresOptions {
                    clock,
                    retention,
                    limits,
                    max_connections: *pool_size,
                    statement_timeout: *statement_timeout,
                    call_timeout: *call_timeout,
                    read_only: self.read_only,
                    ..Default::default()
                };
                Arc::new(handover_ledger::PostgresLedger::connect(&url, opts).await?)
            }
            #[allow(unreachable_patterns)] // with both backend features on
            other => return Err(not_compiled_in(other)),
        })
    }
}

/// A backend this build left out (cargo features `sqlite`, `postgres`).
fn not_compiled_in(backend: &LedgerBackend) -> RouterError {
    let (name, feature) = match backend {
        LedgerBackend::Postgres { .. } => ("postgres", "postgres"),
        _ => ("sqlite", "sqlite"),
    };
    RouterError::Config(ConfigIssues(vec![ConfigIssue {
        path: "ledger.backend".to_owned(),
        message: format!(
            "backend {name:?} is not compiled into this build (enable the `handover` crate's `{feature}` feature)"
        ),
    }]))
}
