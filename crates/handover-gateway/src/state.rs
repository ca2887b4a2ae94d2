//! What every handler shares: configuration, router, write gate (ledger,
//! action contracts, limits), token table, metrics handle.

use std::sync::Arc;

use handover_ledger::{Clock, Ledger};
use handover_router::config::{Config, GatewaySettings};
use handover_router::gate::WriteGate;
use handover_router::route::Router;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::auth::Tokens;
use crate::error::GatewayError;

/// The gateway's shared state. Cheap to clone.
#[derive(Debug, Clone)]
pub struct GatewayState(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    config: Config,
    settings: GatewaySettings,
    router: Router,
    gate: WriteGate,
    clock: Arc<dyn Clock>,
    tokens: Tokens,
    metrics: Option<PrometheusHandle>,
}

impl GatewayState {
    /// State over an already built router and an open ledger. `config` must
    /// have a `[gateway]` section with at least one client. Installs the
    /// Prometheus recorder for `/metrics` unless another global recorder is
    /// already installed (then `/metrics` answers 503).
    pub fn new(
        config: Config,
        router: Router,
        ledger: Arc<dyn Ledger>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, GatewayError> {
        let settings = config
            .gateway()
            .cloned()
            .ok_or(GatewayError::NotConfigured("no [gateway] section"))?;
        if settings.clients.is_empty() {
            return Err(GatewayError::NotConfigured(
                "[gateway] has no client token ([gateway.clients.NAME])",
            ));
        }
        let tokens = Tokens::from_settings(&settings)
            .map_err(|_| GatewayError::NotConfigured("invalid client scope"))?;
        let gate = WriteGate::new(ledger, config.clone(), clock.clone())
            .with_holder(format!("gateway-{}", uuid::Uuid::now_v7()));
        Ok(Self(Arc::new(Inner {
            config,
            settings,
            router,
            gate,
            clock,
            tokens,
            metrics: crate::metrics::install(),
        })))
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.0.config
    }

    /// The `[gateway]` settings.
    pub fn settings(&self) -> &GatewaySettings {
        &self.0.settings
    }

    /// The content router.
    pub fn router(&self) -> &Router {
        &self.0.router
    }

    /// The write gate (ledger and action contracts).
    pub fn gate(&self) -> &WriteGate {
        &self.0.gate
    }

    /// The ledger.
    pub fn ledger(&self) -> &Arc<dyn Ledger> {
        self.0.gate.ledger()
    }

    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.0.clock
    }

    pub(crate) fn tokens(&self) -> &Tokens {
        &self.0.tokens
    }

    pub(crate) fn metrics(&self) -> Option<&PrometheusHandle> {
        self.0.metrics.as_ref()
    }

    /// The policy a chat request's `model` names: an alias from
    /// `[gateway.models]`, or a policy's own name.
    pub fn policy_for(&self, model: &str) -> Option<&str> {
        if let Some(p) = self.0.settings.models.get(model) {
            return Some(p);
        }
        self.0
            .config
            .policies()
            .get_key_value(model)
            .map(|(k, _)| k.as_str())
    }
}
