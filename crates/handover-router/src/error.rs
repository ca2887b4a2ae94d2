//! The router's error type.

use crate::config::ConfigIssues;

/// Everything the router can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RouterError {
    /// The configuration is invalid; every issue names its path.
    #[error("invalid configuration:\n{0}")]
    Config(ConfigIssues),
    /// The configuration file could not be read.
    #[error("while reading configuration file {path}: {source}")]
    ReadConfig {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}
