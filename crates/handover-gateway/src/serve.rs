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
        Ok(Self { listener, state })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, GatewayError> {
        self.listener.local_addr().map_err(GatewayError::Serve)
    }

    /// Serves until `shutdown` completes, then stops accepting and waits up
    /// to `gateway.shutdown_grace` for in-flight requests to finish.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), GatewayError> {
        let grace: Duration = self.state.settings().shutdown_grace;
        let (fired_tx, fired_rx) = tokio::sync::oneshot::channel::<()>();
        let app = crate::app(self.state);
        tracing::info!(addr = ?self.listener.local_addr().ok(), "handover gateway listening");
        // Small writes (SSE chunks, short answers) go out at once, not
        // after a delayed ACK.
        let listener = self.listener.tap_io(|tcp| {
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
}

/// [`Gateway::bind`] then [`Gateway::run`]: what `handover serve` calls.
pub async fn serve(
    config: Config,
    listen: Option<SocketAddr>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), GatewayError> {
    Gateway::bind(config, listen).await?.run(shutdown).await
}
