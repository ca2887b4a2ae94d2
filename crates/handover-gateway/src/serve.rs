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

use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::time::Duration;

use axum::serve::ListenerExt;
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
            .map_err(GatewayError::Router)?;
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
    /// to `gateway.shutdown_grace` for in-flight requests to finish.
    ///
    /// Meanwhile the reconciler runs a pass every `gateway.reconcile_every`
    /// over the due unknown operations (with the configured HTTP lookups),
    /// sharing the work with every other replica on the same ledger; it
    /// stops when shutdown begins (a pass in progress finishes first, within
    /// the grace period).
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), GatewayError> {
        let grace: Duration = self.state.settings().shutdown_grace;
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
        let served = serve_until(listener, state, grace, shutdown).await;
        let _ = stop_tx.send(());
        if tokio::time::timeout(grace, reconciling).await.is_err() {
            tracing::warn!(
                ?grace,
                "the reconciliation pass did not finish within the grace period"
            );
        }
        served
    }
}

async fn serve_until(
    listener: TcpListener,
    state: GatewayState,
    grace: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), GatewayError> {
    let (fired_tx, fired_rx) = tokio::sync::oneshot::channel::<()>();
    let app = crate::app(state);
    tracing::info!(addr = ?listener.local_addr().ok(), "handover gateway listening");
    // Small writes (SSE chunks, short answers) go out at once, not
    // after a delayed ACK.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let server = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            let _ = fired_tx.send(());
        })
        .into_future();
    let mut server = std::pin::pin!(server);
    tokio::select! {
        r = &mut server => return r.map_err(GatewayError::Serve),
        Ok(()) = fired_rx => {}
    }
    tracing::info!(?grace, "shutting down: finishing in-flight requests");
    match tokio::time::timeout(grace, server).await {
        Ok(r) => r.map_err(GatewayError::Serve),
        Err(_) => {
            tracing::warn!(
                ?grace,
                "shutdown grace elapsed; dropping the remaining requests"
            );
            Ok(())
        }
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
