//! The gateway's library error: what can stop it from starting or serving.
//! Request-level failures are [`crate::ApiError`] answers, not this type.

use handover_ledger::LedgerError;
use handover_router::RouterError;

/// Why the gateway could not start or keep serving. Classify with methods,
/// never by message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// The configuration has no `[gateway]` section (or no client token in it).
    #[error("configuration: {0}")]
    NotConfigured(&'static str),
    /// The router could not be built (configuration, provider, API key).
    #[error("while building the router: {0}")]
    Router(#[source] RouterError),
    /// The ledger could not be opened.
    #[error("while opening the ledger: {0}")]
    Ledger(#[source] LedgerError),
    /// The listen address could not be bound.
    #[error("while binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Serving failed.
    #[error("while serving: {0}")]
    Serve(#[source] std::io::Error),
}

impl GatewayError {
    /// The problem is in the configuration or environment (fix it and
    /// restart), not a runtime failure.
    pub fn is_config(&self) -> bool {
        match self {
            Self::NotConfigured(_) => true,
            // A ledger that cannot be reached is a runtime failure, not a config error.
            Self::Router(e) => !matches!(e, RouterError::Ledger(_)),
            _ => false,
        }
    }
}
