//! What every handler shares: configuration, router, write gate (ledger,
//! action contracts, limits), token table, metrics handle.

use std::sync::Arc;

use handover::Handover;
use handover_ledger::Ledger;
use handover_router::config::{Config, GatewaySettings};
use handover_router::gate::WriteGate;
use handover_router::protocol::Protocol;
use handover_router::route::Router;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::auth::Tokens;
use crate::error::GatewayError;

/// The gateway's shared state. Cheap to clone.
#[derive(Debug, Clone)]
pub struct GatewayState(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    handover: Handover,
    settings: GatewaySettings,
    tokens: Tokens,
    metrics: Option<PrometheusHandle>,
}

impl GatewayState {
    /// State over an opened [`Handover`] (ledger, router, write gate, clock).
    /// Its configuration must have a `[gateway]` section with at least one
    /// client. Installs the Prometheus recorder for `/metrics` unless another
    /// global recorder is already installed (then `/metrics` answers 503).
    pub fn new(handover: Handover) -> Result<Self, GatewayError> {
        let settings = settings(handover.config())?.clone();
        let tokens = Tokens::from_settings(&settings)
            .map_err(|_| GatewayError::NotConfigured("invalid client scope"))?;
        Ok(Self(Arc::new(Inner {
            handover,
            settings,
            tokens,
            metrics: crate::metrics::install(),
        })))
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        self.0.handover.config()
    }

    /// The `[gateway]` settings.
    pub fn settings(&self) -> &GatewaySettings {
        &self.0.settings
    }

    /// The content router.
    pub fn router(&self) -> &Router {
        self.0.handover.router()
    }

    /// The write gate (ledger and action contracts).
    pub fn gate(&self) -> &WriteGate {
        self.0.handover.gate()
    }

    /// The write protocol the operations API is a door onto.
    pub fn protocol(&self) -> &Protocol {
        self.0.handover.gate().protocol()
    }

    /// A reconciler with the configured HTTP lookups (what `serve` runs),
    /// leaving the actions whose lookup agents run (the pull API) to them,
    /// and those `handover mcp` looks up through an MCP tool to it.
    pub(crate) fn reconciler(&self) -> handover_router::reconcile::Reconciler {
        let mut others = crate::ops::pull::pulled_actions(self.config());
        others.extend(crate::ops::pull::mcp_lookup_actions(self.config()));
        self.0
            .handover
            .reconciler()
            .with_filter(handover_ledger::DueFilter {
                except_actions: others,
                ..Default::default()
            })
    }

    /// The ledger.
    pub fn ledger(&self) -> &Arc<dyn Ledger> {
        self.0.handover.ledger()
    }

    pub(crate) fn tokens(&self) -> &Tokens {
        &self.0.tokens
    }

    pub(crate) fn metrics(&self) -> Option<&PrometheusHandle> {
        self.0.metrics.as_ref()
    }
}

/// The `[gateway]` section, refused when missing (checked before anything
/// is opened). Everything inside it, at least one client included, was
/// checked by the configuration's validation, the one `handover check` runs.
pub(crate) fn settings(config: &Config) -> Result<&GatewaySettings, GatewayError> {
    config
        .gateway()
        .ok_or(GatewayError::NotConfigured(
            "no [gateway] section: `handover serve` needs one, with at least one client ([gateway.clients.NAME] with token_sha256 and scope); nothing else in it has to be set",
        ))
}
