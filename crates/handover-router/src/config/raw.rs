//! Raw configuration as written in TOML: serde structs that reject unknown
//! fields. Nothing here is validated beyond syntax; `validate` turns these
//! into runtime types and names the path of every problem.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    pub(crate) ledger: Option<RawLedger>,
    #[serde(default)]
    pub(crate) providers: BTreeMap<String, RawProvider>,
    #[serde(default)]
    pub(crate) policies: BTreeMap<String, RawPolicy>,
    #[serde(default)]
    pub(crate) actions: BTreeMap<String, RawAction>,
    pub(crate) gateway: Option<RawGateway>,
    pub(crate) mcp: Option<RawMcp>,
    pub(crate) telemetry: Option<RawTelemetry>,
}

/// `[ledger]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLedger {
    pub(crate) backend: String,
    pub(crate) path: Option<String>,
    pub(crate) url_env: Option<String>,
    pub(crate) pool_size: Option<u32>,
    pub(crate) statement_timeout: Option<String>,
    pub(crate) call_timeout: Option<String>,
    pub(crate) lease: Option<String>,
    pub(crate) replay_window: Option<String>,
    pub(crate) tombstone_horizon: Option<String>,
    pub(crate) max_params_bytes: Option<u64>,
    pub(crate) max_params_depth: Option<u64>,
}

/// `[providers.NAME]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProvider {
    pub(crate) kind: String,
    pub(crate) base_url: Option<String>,
    pub(crate) api_version: Option<String>,
    /// `api = "chat_completions" | "responses"` (openai, azure_openai).
    pub(crate) api: Option<String>,
    pub(crate) model: String,
    pub(crate) api_key_env: Option<String>,
    #[serde(default)]
    pub(crate) data_classes: Vec<String>,
    pub(crate) max_concurrency: Option<u64>,
    pub(crate) max_queue: Option<u64>,
    pub(crate) fallback_share: Option<f64>,
    pub(crate) price_input_per_mtok: Option<f64>,
    pub(crate) price_output_per_mtok: Option<f64>,
    pub(crate) timeouts: Option<RawTimeouts>,
    pub(crate) breaker: Option<RawBreaker>,
    pub(crate) models: Option<RawModels>,
    /// `supports = { structured_outputs = false, ... }`: overrides of the
    /// kind's capabilities, by capability name.
    pub(crate) supports: Option<BTreeMap<String, bool>>,
}

/// `[providers.NAME].models`: what the provider may serve besides its
/// default `model`. Three spellings of one idea: `"*"` (any model), a list
/// of names, or a table of names with per-model settings.
#[derive(Debug)]
pub(crate) enum RawModels {
    /// A string; only `"*"` is valid (checked in validation, with the path).
    Any(String),
    /// `models = ["a", "b"]`.
    List(Vec<String>),
    /// `[providers.NAME.models.MODEL]` tables.
    Table(BTreeMap<String, RawModel>),
}

impl<'de> Deserialize<'de> for RawModels {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = RawModels;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("\"*\", a list of model names, or a table of per-model settings")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawModels, E> {
                Ok(RawModels::Any(v.to_owned()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                seq: A,
            ) -> Result<RawModels, A::Error> {
                Deserialize::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
                    .map(RawModels::List)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<RawModels, A::Error> {
                Deserialize::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(RawModels::Table)
            }
        }
        de.deserialize_any(Visitor)
    }
}

/// `[providers.NAME.timeouts]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTimeouts {
    pub(crate) connect: Option<String>,
    pub(crate) first_byte: Option<String>,
    pub(crate) stream_first_byte: Option<String>,
    pub(crate) first_token: Option<String>,
    pub(crate) idle: Option<String>,
    pub(crate) total: Option<String>,
}

/// `[providers.NAME.breaker]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBreaker {
    pub(crate) failure_threshold: Option<u64>,
    pub(crate) open_for: Option<String>,
    pub(crate) half_open_probes: Option<u64>,
}

/// `[providers.NAME.models.MODEL]`: per-model settings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawModel {
    pub(crate) reasoning_passback: Option<String>,
}

/// `[policies.NAME]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPolicy {
    pub(crate) chain: Vec<String>,
    pub(crate) deadline: Option<String>,
    pub(crate) max_requests: Option<u64>,
    pub(crate) max_cost: Option<f64>,
    pub(crate) max_attempts_per_provider: Option<u64>,
    pub(crate) commit_point: Option<String>,
    /// `hedge_after` is its old name, still accepted.
    #[serde(alias = "hedge_after")]
    pub(crate) abandon_after: Option<String>,
    #[serde(default)]
    pub(crate) data_classes: Vec<String>,
    pub(crate) backoff: Option<RawBackoff>,
    #[serde(default)]
    pub(crate) on: BTreeMap<String, String>,
}

/// `[policies.NAME.backoff]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBackoff {
    pub(crate) initial: Option<String>,
    pub(crate) max: Option<String>,
    pub(crate) jitter: Option<bool>,
}

/// `[actions.NAME]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAction {
    pub(crate) block: Option<String>,
    pub(crate) lease: Option<String>,
    pub(crate) timeout: Option<String>,
    pub(crate) idempotency: Option<RawIdempotency>,
    pub(crate) lookup: Option<RawLookup>,
    pub(crate) mcp: Option<RawActionMcp>,
}

/// `[actions.NAME] mcp = { server, tool, key_from, key_argument, is_error }`:
/// the MCP tool this action is (`handover mcp` guards its `tools/call`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawActionMcp {
    pub(crate) server: String,
    pub(crate) tool: String,
    #[serde(default)]
    pub(crate) key_from: Vec<String>,
    pub(crate) key_argument: Option<String>,
    /// `"unknown"` (default) or `"rejected"`.
    pub(crate) is_error: Option<String>,
}

/// `[actions.NAME.idempotency]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawIdempotency {
    pub(crate) header: String,
    pub(crate) retention: String,
}

/// `[actions.NAME.lookup]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLookup {
    pub(crate) visibility_lag: String,
    pub(crate) check_every: Option<String>,
    pub(crate) max_check_every: Option<String>,
    /// The HTTP lookup Handover runs itself (all optional; `url` enables it).
    pub(crate) method: Option<String>,
    pub(crate) url: Option<String>,
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, RawHeaderValue>,
    pub(crate) not_found_status: Option<Vec<u16>>,
    pub(crate) records: Option<String>,
    #[serde(default, rename = "match")]
    pub(crate) match_fields: BTreeMap<String, String>,
    pub(crate) mcp_tool: Option<String>,
    pub(crate) arguments: Option<serde_json::Map<String, serde_json::Value>>,
}

/// A lookup header: a literal value, or a secret from an environment
/// variable (with an optional prefix such as `"Bearer "`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawHeaderValue {
    Literal(String),
    Env(RawEnvHeader),
}

/// `{ env = "VAR", prefix = "Bearer " }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEnvHeader {
    pub(crate) env: String,
    pub(crate) prefix: Option<String>,
}

/// `[gateway]` (the OpenAI-compatible gateway and operations API).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGateway {
    pub(crate) listen: Option<String>,
    pub(crate) reconcile_every: Option<String>,
    pub(crate) max_body_bytes: Option<u64>,
    pub(crate) keepalive: Option<String>,
    pub(crate) shutdown_grace: Option<String>,
    pub(crate) header_read_timeout: Option<String>,
    pub(crate) body_read_timeout: Option<String>,
    pub(crate) idle_timeout: Option<String>,
    pub(crate) max_connections: Option<u64>,
    pub(crate) max_in_flight_per_client: Option<u64>,
    #[serde(default)]
    pub(crate) clients: BTreeMap<String, RawGatewayClient>,
    #[serde(default)]
    pub(crate) operators: BTreeMap<String, RawGatewayOperator>,
    #[serde(default)]
    pub(crate) models: BTreeMap<String, String>,
    /// The policy whose budget and error table serve `provider/model` names.
    pub(crate) direct_policy: Option<String>,
    #[serde(default)]
    pub(crate) routes: BTreeMap<String, RawRoute>,
}

/// `[gateway.routes] "PATTERN" = { chain = [...], policy = "NAME" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRoute {
    pub(crate) chain: Vec<String>,
    pub(crate) policy: Option<String>,
}

/// `[gateway.clients.NAME]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGatewayClient {
    pub(crate) token_sha256: String,
    pub(crate) scope: String,
}

/// `[gateway.operators.NAME]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGatewayOperator {
    pub(crate) token_sha256: String,
}

/// `[telemetry]`: OTLP/HTTP span export.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTelemetry {
    pub(crate) otlp_endpoint: Option<String>,
    pub(crate) service_name: Option<String>,
    pub(crate) export_timeout: Option<String>,
    pub(crate) export_interval: Option<String>,
    pub(crate) max_queued_spans: Option<u64>,
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, RawHeaderValue>,
}

/// `[mcp]` (the MCP proxy, `handover mcp`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMcp {
    pub(crate) scope: Option<String>,
    pub(crate) listen: Option<String>,
    #[serde(default)]
    pub(crate) allowed_origins: Vec<String>,
    pub(crate) max_sessions: Option<u64>,
    pub(crate) max_sessions_per_client: Option<u64>,
    pub(crate) session_idle: Option<String>,
    #[serde(default)]
    pub(crate) servers: BTreeMap<String, RawMcpServer>,
}

/// `[mcp.servers.NAME]`: one upstream MCP server.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMcpServer {
    pub(crate) command: Option<String>,
    #[serde(default)]
    pub(crate) args: Vec<String>,
    pub(crate) url: Option<String>,
}
