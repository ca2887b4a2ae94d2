//! The MCP proxy's library error: what stops it from starting or serving.
//! A guarded call's own outcome is a tool result, never this type.

/// Why the proxy could not start or keep serving. Classify with methods,
/// never by message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The configuration has no usable `[mcp]` section or names an unknown server.
    #[error("configuration: {0}")]
    Config(String),
    /// The upstream server could not be started.
    #[error("while starting upstream MCP server {server:?}: {source}")]
    Spawn {
        /// The server's name in `[mcp.servers]`.
        server: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP endpoint could not be set up or serve.
    #[error("while serving MCP over HTTP: {0}")]
    Serve(#[source] handover_gateway::GatewayError),
    /// Reading from or writing to the downstream client failed.
    #[error("downstream I/O: {0}")]
    Io(#[source] std::io::Error),
}

impl McpError {
    /// The problem is in the configuration (fix it and restart).
    pub fn is_config(&self) -> bool {
        match self {
            Self::Config(_) => true,
            Self::Serve(e) => e.is_config(),
            _ => false,
        }
    }
}
