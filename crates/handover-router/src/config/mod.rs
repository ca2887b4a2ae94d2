//! Configuration (DESIGN §8): one TOML file with `[ledger]`,
//! `[providers.NAME]`, `[policies.NAME]`, `[actions.NAME]`, `[gateway]`, `[mcp]`
//! and `[telemetry]`.
//!
//! Two phases, as in the house style: raw serde structs that reject unknown
//! fields, then validation into runtime types. Every problem names its path
//! (`policies.default.chain[1]: unknown provider "deepsek"`), and all of them
//! are reported at once. API keys are never in the file: a provider names the
//! environment variable that holds its key, and an unset variable is an error
//! at startup ([`Config::parse`]) or a warning for `handover check`
//! ([`Config::check`]).

mod chain;
pub(crate) mod defaults;
mod duration;
mod issues;
mod model;
mod raw;
mod route;
pub(crate) mod validate;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

pub use issues::{ConfigIssue, ConfigIssues};
pub use model::{
    ActionContract, BackoffSettings, BlockSetting, BreakerSettings, ClassAction, CommitPoint,
    ErrorClass, GatewayClient, GatewayOperator, GatewaySettings, Hop, HttpLookupSpec,
    IdempotencyContract, LedgerBackend, LedgerSettings, LookupContract, LookupHeader, LookupValues,
    McpLookupTool, McpServer, McpSettings, McpTool, ModelSet, OpenAiApi, PatternRoute,
    PolicySettings, Prices, ProviderConfig, ProviderKind, Route, RouteVia, TelemetrySettings,
    Timeouts,
};

use crate::error::RouterError;

/// A validated configuration. Cheap to clone (shared).
///
/// ```
/// use handover_router::config::Config;
///
/// let toml = r#"
///     [providers.primary]
///     kind = "openai_compatible"
///     base_url = "http://127.0.0.1:9"
///     model = "small"
///
///     [policies.default]
///     chain = ["primary"]
///     deadline = "20s"
/// "#;
/// let config = Config::parse(toml, &|_| None).unwrap();
/// assert_eq!(config.policy("default").unwrap().deadline.as_secs(), 20);
///
/// let err = Config::parse(&toml.replace(r#"["primary"]"#, r#"["primary", "deepsek"]"#), &|_| None)
///     .unwrap_err();
/// assert!(err.to_string().contains(r#"policies.default.chain[1]: unknown provider "deepsek""#));
/// ```
#[derive(Debug, Clone)]
pub struct Config(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    ledger: LedgerSettings,
    providers: BTreeMap<String, ProviderConfig>,
    policies: BTreeMap<String, PolicySettings>,
    actions: BTreeMap<String, ActionContract>,
    gateway: Option<GatewaySettings>,
    /// The policy of names that name none (see [`Config::route`]).
    builtin: PolicySettings,
    mcp: Option<McpSettings>,
    telemetry: Option<TelemetrySettings>,
}

impl Config {
    /// Parses and validates `text`; API-key variables are looked up with
    /// `env`, and an unset one is an error.
    pub fn parse(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, RouterError> {
        let (config, missing) = Self::check(text, env)?;
        if missing.is_empty() {
            Ok(config)
        } else {
            Err(RouterError::Config(missing))
        }
    }

    /// Parses and validates `text` like [`Config::parse`], but returns unset
    /// API-key variables as warnings instead of failing (for `handover check`).
    pub fn check(
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(Self, ConfigIssues), RouterError> {
        let raw = parse_raw(text).map_err(RouterError::Config)?;
        let v = validate::validate(raw, env).map_err(RouterError::Config)?;
        let config = Self(Arc::new(Inner {
            ledger: v.ledger,
            providers: v.providers,
            policies: v.policies,
            actions: v.actions,
            gateway: v.gateway,
            builtin: v.builtin,
            mcp: v.mcp,
            telemetry: v.telemetry,
        }));
        Ok((config, v.missing_keys))
    }

    /// Reads and parses a file, with API keys from the process environment.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, RouterError> {
        let text = Self::read_text(path)?;
        Self::parse(&text, &|var| std::env::var(var).ok())
    }

    /// The text of a configuration file, as [`Config::load`] reads it:
    /// for callers that parse it otherwise ([`Config::check`]). A file past
    /// 4 MiB is refused: real ones are a few KiB, and a path naming
    /// something else (`/dev/zero`, a log, a disk image) must fail at once
    /// rather than fill memory.
    pub fn read_text(path: impl AsRef<Path>) -> Result<String, RouterError> {
        let path = path.as_ref();
        read_capped(path).map_err(|source| RouterError::ReadConfig {
            path: path.display().to_string(),
            source,
        })
    }

    /// `[ledger]` settings.
    pub fn ledger(&self) -> &LedgerSettings {
        &self.0.ledger
    }

    /// All providers, by name.
    pub fn providers(&self) -> &BTreeMap<String, ProviderConfig> {
        &self.0.providers
    }

    /// All policies, by name.
    pub fn policies(&self) -> &BTreeMap<String, PolicySettings> {
        &self.0.policies
    }

    /// All action contracts, by name.
    pub fn actions(&self) -> &BTreeMap<String, ActionContract> {
        &self.0.actions
    }

    /// `[gateway]` settings, if the file has that section.
    pub fn gateway(&self) -> Option<&GatewaySettings> {
        self.0.gateway.as_ref()
    }

    /// The `[gateway]` that serving MCP over HTTP (`handover mcp --listen`,
    /// or `[mcp] listen`) needs for its callers' bearer tokens, or why it
    /// cannot be served. A file with `mcp.listen` and no `[gateway]` does not
    /// load; this is the same rule for an address given on the command line.
    pub fn mcp_http_gateway(&self) -> Result<&GatewaySettings, &'static str> {
        self.gateway().ok_or(validate::mcp::HTTP_NEEDS_GATEWAY)
    }

    /// `[mcp]` settings (upstream servers and guarded tools), if the file
    /// declares MCP servers or MCP actions.
    pub fn mcp(&self) -> Option<&McpSettings> {
        self.0.mcp.as_ref()
    }

    /// `[telemetry]` settings, if spans are exported (`otlp_endpoint` set).
    pub fn telemetry(&self) -> Option<&TelemetrySettings> {
        self.0.telemetry.as_ref()
    }

    /// One policy.
    pub fn policy(&self, name: &str) -> Option<&PolicySettings> {
        self.0.policies.get(name)
    }

    /// One provider.
    pub fn provider(&self, name: &str) -> Option<&ProviderConfig> {
        self.0.providers.get(name)
    }

    /// One action contract.
    pub fn action(&self, name: &str) -> Option<&ActionContract> {
        self.0.actions.get(name)
    }
}

fn parse_raw(text: &str) -> Result<raw::RawConfig, ConfigIssues> {
    let mut issues = ConfigIssues::default();
    let de = match toml::de::Deserializer::parse(text) {
        Ok(de) => de,
        Err(e) => {
            let (path, message) = syntax_issue(text, &e);
            issues.push(path, message);
            return Err(issues);
        }
    };
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        issues.push(path, e.into_inner().message().to_owned());
        issues
    })
}

/// A TOML syntax error as an issue: where it is (line and column), and for
/// a key or table given twice, its path (`ledger.backend`,
/// `providers.openai`) — the parser names neither.
fn syntax_issue(text: &str, e: &toml::de::Error) -> (String, String) {
    let Some(span) = e.span() else {
        return (String::new(), format!("invalid TOML: {}", e.message()));
    };
    let start = span.start.min(text.len());
    let before = text.get(..start).unwrap_or_default();
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.matches('\n').count() + 1;
    let column = before[line_start..].chars().count() + 1;
    let message = format!(
        "invalid TOML at line {line}, column {column}: {}",
        e.message()
    );
    if !e.message().starts_with("duplicate key") {
        return (String::new(), message);
    }
    let this_line = text[line_start..].lines().next().unwrap_or_default().trim();
    let header = |l: &str| {
        l.starts_with('[')
            .then(|| l.trim_matches(|c| c == '[' || c == ']').trim().to_owned())
    };
    let path = match header(this_line) {
        Some(table) => table,
        None => {
            let key = text.get(span).unwrap_or_default().trim().trim_matches('"');
            let table = before[..line_start]
                .lines()
                .rev()
                .find_map(|l| header(l.trim()));
            table.map_or_else(|| key.to_owned(), |t| format!("{t}.{key}"))
        }
    };
    (path, message)
}

/// The largest configuration file read (see [`Config::read_text`]).
const MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;

/// A configuration file's text, refused past [`MAX_CONFIG_BYTES`].
fn read_capped(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(MAX_CONFIG_BYTES + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > MAX_CONFIG_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "larger than {} MiB: not a configuration file",
                MAX_CONFIG_BYTES / 1024 / 1024
            ),
        ));
    }
    Ok(text)
}
