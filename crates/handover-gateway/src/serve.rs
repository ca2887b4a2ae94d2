//! Opening what the configuration names, binding, serving, and shutting
//! down gracefully.
//!
//! Graceful shutdown stops accepting connections and lets every in-flight
//! request finish (up to `gateway.shutdown_grace`). The gateway itself never
//! holds an operation between requests: a client's claim lives in the
//! ledger, fenced by its epoch and lease. So after a shutdown nothing that
//! may have been sent is claimable again: a `claimed` operation (nothing
//! sent) returns to `planned` when its lease passes, and a `dispatched` one
//! becomes `unknown`, never `planned`.

use std::future::Future;
use std::net::SocketAddr;

use handover::HandoverOptions;
use handover_router::config::Config;
use tokio::net::TcpListener;

use crate::error::GatewayError;
use crate::state::GatewayState;

/// A bound gateway, ready to [`run`](Gateway::run).
#[derive(Debug)]
pub struct Gateway {
    listener: TcpListener,
    state: GatewayState,
    passes: tokio::sync::watch::Sender<u64>,
}

impl Gateway {
    /// Opens what `config` names ([`handover::Handover`]: the ledger, the
    /// router with API keys from the process environment, the write gate)
    /// and binds `listen` (default: `gateway.listen`).
    pub async fn bind(config: Config, listen: Option<SocketAddr>) -> Result<Self, GatewayError> {
        crate::state::settings(&config)?;
        let handover = HandoverOptions::new()
            .holder(format!("gateway-{}", uuid::Uuid::now_v7()))
            .open(&config)
            .await
            .map_err(|e| match e {
                // Named for what failed: the ledger, not "the router".
                handover_router::RouterError::Ledger(l) => GatewayError::Ledger(l),
                e => GatewayError::Router(e),
            })?;
        Self::with_state(GatewayState::new(handover)?, listen).await
    }

    /// Binds `listen` (default: `gateway.listen`) for an already built state.
    pub async fn with_state(
        state: GatewayState,
        listen: Option<SocketAddr>,
    ) -> Result<Self, GatewayError> {
        let addr = listen.unwrap_or(state.settings().listen);
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| GatewayError::Bind { addr, source })?;
        Ok(Self {
            listener,
            state,
            passes: tokio::sync::watch::Sender::new(0),
        })
    }

    /// Counts the reconciler's finished passes (see [`Gateway::run`]): a
    /// caller can wait for the pass after a change instead of sleeping.
    pub fn reconcile_passes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.passes.subscribe()
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, GatewayError> {
        self.listener.local_addr().map_err(GatewayError::Serve)
    }

    /// Serves until `shutdown` completes, then stops accepting and waits up
    /// to `gateway.shutdown_grace` for in-flight requests (streams
    /// included) to finish. Connection limits and deadlines: see
    /// `docs/gateway.md`, "Operating it".
    ///
    /// Meanwhile the reconciler runs a pass every `gateway.reconcile_every`
    /// over the due unknown operations (with the configured HTTP lookups),
    /// sharing the work with every other replica on the same ledger; it
    /// stops when shutdown begins (a pass in progress finishes first, within
    /// the grace period). Last, the ledger is closed ([`Ledger::close`](handover_ledger::Ledger::close)):
    /// a SQLite ledger's main file then holds every record on its own.
    ///
    /// The whole shutdown — the drain, the reconciler's last pass and the
    /// ledger's close — ends within one `shutdown_grace` from the signal
    /// (an orchestrator's kill timeout just above it is enough): a ledger
    /// that does not answer is left unclosed at the deadline (its records
    /// are durable; a SQLite file folds its log in at the next close).
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), GatewayError> {
        let grace = self.state.settings().shutdown_grace;
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let Self {
            listener,
            state,
            passes,
        } = self;
        let reconciler = state.reconciler().on_pass(move |_| {
            passes.send_modify(|n| *n += 1);
        });
        let every = state.settings().reconcile_every;
        let reconciling = tokio::spawn(reconciler.run(every, async move {
            let _ = stop_rx.await;
        }));
        // When shutdown begins: the reconciler stops then, alongside the
        // drain, and the grace counts from then for everything that follows.
        let (began_tx, began_rx) = tokio::sync::oneshot::channel();
        let shutdown = async move {
            shutdown.await;
            let _ = began_tx.send(tokio::time::Instant::now());
        };
        let began = tokio::spawn(async move {
            let began = began_rx.await.ok();
            let _ = stop_tx.send(());
            began
        });
        if let Ok(addr) = listener.local_addr() {
            tracing::info!(%addr, "handover gateway listening");
        }
        let upkeep = state
            .metrics()
            .cloned()
            .map(|h| tokio::spawn(crate::metrics::upkeep(h)));
        let settings = state.settings().clone();
        let ledger = state.ledger().clone();
        let served = crate::conn::run(listener, crate::app(state), &settings, shutdown).await;
        if let Some(upkeep) = upkeep {
            upkeep.abort();
        }
        let began = began.await.ok().flatten();
        let deadline = began.unwrap_or_else(tokio::time::Instant::now) + grace;
        if tokio::time::timeout_at(deadline, reconciling)
            .await
            .is_err()
        {
            tracing::warn!(
                ?grace,
                "the reconciliation pass did not finish within the grace period"
            );
        }
        // Closed, not dropped: a SQLite ledger then folds its write-ahead
        // log into the main file, so the file alone holds every record.
        if tokio::time::timeout_at(deadline, ledger.close())
            .await
            .is_err()
        {
            tracing::warn!(
                ?grace,
                "the ledger did not close within the grace period (it did not answer, or a request still holds a connection)"
            );
        }
        served
    }
}

/// [`Gateway::bind`] then [`Gateway::run`]: what `handover serve` calls.
pub async fn serve(
    config: Config,
    listen: Option<SocketAddr>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), GatewayError> {
    Gateway::bind(config, listen).await?.run(shutdown).await
}

/// Serves any `app` on `listener` with the gateway's connection handling:
/// `settings`' connection cap, header, body and idle deadlines, and a
/// graceful drain of up to `shutdown_grace` once `shutdown` completes.
/// `handover mcp --listen` serves its Streamable HTTP endpoint through it,
/// so both HTTP doors meet slow and vanished clients the same way.
pub async fn serve_router(
    listener: TcpListener,
    app: axum::Router,
    settings: &handover_router::config::GatewaySettings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), GatewayError> {
    crate::conn::run(listener, app, settings, shutdown).await
}
