//! Validated, runtime configuration types. Built only by [`super::Config::parse`];
//! every value here has passed validation.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::time::Duration;

use handover_providers::Capability;
pub use handover_providers::{ErrorClass, OpenAiApi, ProviderKind, Timeouts};

/// Which ledger backend to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerBackend {
    /// In-process, not durable: tests and demos only.
    Memory,
    /// Embedded SQLite file.
    Sqlite {
        /// Path of the database file (created if missing).
        path: String,
    },
    /// PostgreSQL shared by several replicas.
    Postgres {
        /// Name of the environment variable holding the connection URL.
        url_env: String,
        /// Maximum pool connections.
        pool_size: u32,
        /// Per-statement timeout (server side).
        statement_timeout: Duration,
        /// Client-side deadline of one ledger call, however the network
        /// behaves (a partition answers `Unavailable` within it).
        call_timeout: Duration,
    },
}

/// `[ledger]`.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerSettings {
    /// The backend.
    pub backend: LedgerBackend,
    /// Default claim lease for actions that do not set their own.
    pub lease: Duration,
    /// How long terminal outcomes are replayed in full.
    pub replay_window: Duration,
    /// How long a tombstone answers late retries after the replay window.
    pub tombstone_horizon: Duration,
    /// Maximum size of canonical parameters, in bytes.
    pub max_params_bytes: usize,
    /// Maximum nesting depth of parameters.
    pub max_params_depth: usize,
}

/// Circuit breaker settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerSettings {
    /// Consecutive failures that open the breaker; 429 and 503 count like
    /// any other failure. Auth, billing and exhausted quota open it at once.
    pub failure_threshold: u32,
    /// How long the breaker stays open before a half-open probe.
    pub open_for: Duration,
    /// Probes allowed while half-open.
    pub half_open_probes: u32,
}

/// Prices in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prices {
    /// Input (prompt) tokens.
    pub input_per_mtok: f64,
    /// Output (completion) tokens.
    pub output_per_mtok: f64,
}

/// `[providers.NAME]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderConfig {
    /// The provider's name in this file.
    pub name: String,
    /// Which implementation.
    pub kind: ProviderKind,
    /// Base URL (defaults per kind; required for `openai_compatible` and
    /// `azure_openai`).
    pub base_url: Option<String>,
    /// API version pin (Azure `api-version`, Anthropic `anthropic-version`);
    /// `None` uses the kind's default.
    pub api_version: Option<String>,
    /// The OpenAI API an `openai` or `azure_openai` provider is called
    /// through (`api`; default Chat Completions, the only one other kinds
    /// have).
    pub api: OpenAiApi,
    /// Model requested by default (a chain entry naming only the provider).
    pub model: String,
    /// Every model this provider may serve (the default one included).
    pub models: ModelSet,
    /// Environment variable holding the API key (never the key itself).
    pub api_key_env: Option<String>,
    /// Data classes this provider may receive. A request without a class may
    /// go to any provider; a request with a class only to providers listing it.
    pub data_classes: BTreeSet<String>,
    /// Requests in flight at once (account concurrency cap).
    pub max_concurrency: usize,
    /// Requests allowed to wait for a slot; beyond this, fail fast.
    pub max_queue: usize,
    /// Share (0..=1] of this provider's slots that traffic failing over from
    /// an earlier provider in a chain may hold at once, so a failing
    /// primary's queue is not dumped onto this provider all at once.
    pub fallback_share: f64,
    /// Prices for cost accounting, if known.
    pub prices: Option<Prices>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Circuit breaker.
    pub breaker: BreakerSettings,
    /// Models whose reasoning content must never be passed back (e.g. the
    /// DeepSeek reasoner); for other models it is passed back on tool-call turns.
    pub no_reasoning_passback: BTreeSet<String>,
    /// What this provider declares it supports (or not) where that differs
    /// from its kind's defaults (`supports = { logprobs = false }`): e.g. an
    /// OpenAI-compatible server without structured outputs. See
    /// [`ProviderConfig::supports`].
    pub supports: BTreeMap<Capability, bool>,
}

impl ProviderConfig {
    /// Whether this provider honours `c`: its own declaration if it made
    /// one, else what its kind has ([`ProviderKind::supports`]); never what
    /// its API cannot express ([`OpenAiApi::supports`], which validation
    /// does not let a declaration contradict). The router sends a request
    /// needing `c` only to providers for which this holds.
    pub fn supports(&self, c: Capability) -> bool {
        self.api.supports(c)
            && self
                .supports
                .get(&c)
                .copied()
                .unwrap_or_else(|| self.kind.supports(c))
    }
}

/// What the router does with an error class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassAction {
    /// Retry the same provider after a backoff (bounded by the budget and
    /// `max_attempts_per_provider`).
    Retry,
    /// Move on to the next provider in the chain.
    Next,
    /// Stop and return the error.
    Fail,
}

impl PolicySettings {
    /// What to do with an error of `class`.
    pub fn action_for(&self, class: ErrorClass) -> ClassAction {
        self.on.get(&class).copied().unwrap_or(ClassAction::Fail)
    }
}

impl ClassAction {
    /// The name used in configuration files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Retry => "retry",
            Self::Next => "next",
            Self::Fail => "fail",
        }
    }
}

/// When a streamed answer is committed to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitPoint {
    /// At the first data event: later failures surface as an error event.
    FirstToken,
    /// Only when the stream completed: the caller sees nothing before that.
    Complete,
}

impl CommitPoint {
    /// Its name in configuration and in the gateway's
    /// `x-handover-commit-point` header.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FirstToken => "first_token",
            Self::Complete => "complete",
        }
    }

    /// The commit point named `name` (`first_token` or `complete`).
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::FirstToken, Self::Complete]
            .into_iter()
            .find(|p| p.as_str() == name)
    }
}

/// Backoff between retries of one provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffSettings {
    /// First delay.
    pub initial: Duration,
    /// Largest delay.
    pub max: Duration,
    /// Full jitter on every delay.
    pub jitter: bool,
}

/// `[policies.NAME]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicySettings {
    /// The policy's name.
    pub name: String,
    /// Provider and model of each step, in fallback order.
    pub chain: Vec<Hop>,
    /// Absolute time budget of one user task.
    pub deadline: Duration,
    /// HTTP requests actually sent, across every provider and retry.
    pub max_requests: u32,
    /// Optional cost ceiling in USD.
    pub max_cost: Option<f64>,
    /// Attempts on one provider before moving on, even if the class says retry.
    pub max_attempts_per_provider: u32,
    /// Streaming commit point.
    pub commit_point: CommitPoint,
    /// Abandon an attempt that has not answered after this long and move on
    /// to the next provider, without cancelling its request: if it answers
    /// later, the answer is recorded as late and discarded (this is not
    /// hedging: the two answers never race). `None`: wait for each
    /// attempt's own timeouts. Non-streaming calls only. Called
    /// `hedge_after` before; that key is still accepted.
    pub abandon_after: Option<Duration>,
    /// Data classes this policy serves (each accepted by a provider in the chain).
    pub data_classes: BTreeSet<String>,
    /// Backoff schedule.
    pub backoff: BackoffSettings,
    /// Error class → action (defaults merged with the file's `on` table).
    pub on: HashMap<ErrorClass, ClassAction>,
}

/// Width of the write block while an operation is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockSetting {
    /// Only the operation itself.
    Operation,
    /// Any operation of the same action in the same scope.
    Scope,
    /// Any operation of the same action in any scope.
    Action,
}

/// A destination's idempotency-key contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyContract {
    /// Header carrying the destination key.
    pub header: String,
    /// How long the destination remembers a key.
    pub retention: Duration,
}

/// An authoritative lookup's contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LookupContract {
    /// How long a new record may stay invisible to the lookup.
    pub visibility_lag: Duration,
    /// First reconciliation interval.
    pub check_every: Duration,
    /// Largest reconciliation interval (backoff cap).
    pub max_check_every: Duration,
}

/// `[actions.NAME]`: what the destination of a business action offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionContract {
    /// The action's name.
    pub name: String,
    /// Write block width while an operation of this action is unknown.
    pub block: BlockSetting,
    /// Claim lease for one execution. A door that runs the executor
    /// itself (the write gate) holds its claim for `timeout + lease`.
    pub lease: Duration,
    /// Timeout for one executor call.
    pub timeout: Duration,
    /// Idempotency-key support, if the destination has it.
    pub idempotency: Option<IdempotencyContract>,
    /// Authoritative lookup, if the application registers one.
    pub lookup: Option<LookupContract>,
    /// The lookup as an HTTP request Handover makes itself, if declared
    /// (`url` under `[actions.NAME.lookup]`).
    pub http_lookup: Option<HttpLookupSpec>,
}

/// `[actions.NAME.lookup]` with a `url`: how to ask the destination for an
/// operation's record over HTTP, and how to read the answer. Secrets are
/// never here: headers name the environment variables they come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpLookupSpec {
    /// `GET` (default), `POST` or `HEAD`.
    pub method: String,
    /// URL template; placeholders `{destination_key}`, `{scope}`, `{key}`,
    /// `{params.NAME}` (a top-level approved parameter), each percent-encoded.
    pub url: String,
    /// Request headers, in name order.
    pub headers: Vec<(String, LookupHeader)>,
    /// Statuses that mean "no such record" (default `[404]`).
    pub not_found_status: Vec<u16>,
    /// JSON pointer to the list of records in a 2xx answer (`""` or unset:
    /// the whole body is the one record).
    pub records: Option<String>,
    /// Approved parameter name → JSON pointer into a record: a record whose
    /// fields differ from the approved values is a divergence.
    pub match_fields: std::collections::BTreeMap<String, String>,
}

/// Where a lookup header's value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupHeader {
    /// Written in the configuration (not a secret).
    Literal(String),
    /// A secret from the environment variable `var`, after `prefix`.
    Env {
        /// The variable's name.
        var: String,
        /// Written before the secret (e.g. `"Bearer "`).
        prefix: String,
    },
}

/// `[gateway]`: the OpenAI-compatible gateway and operations API
/// (`handover serve`). Tokens are stored as SHA-256 hashes only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewaySettings {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// How often `serve`'s reconciler looks for due unknown operations.
    pub reconcile_every: Duration,
    /// Largest accepted request body, in bytes.
    pub max_body_bytes: usize,
    /// Interval of SSE keep-alive comments while a stream has nothing to send
    /// (also how long a stream may wait before its response headers are sent).
    pub keepalive: Duration,
    /// How long graceful shutdown waits for in-flight requests.
    pub shutdown_grace: Duration,
    /// From the first byte of a request, how long the client has to send
    /// the whole header; then the connection is closed.
    pub header_read_timeout: Duration,
    /// From the end of the header, how long the client has to send the
    /// whole body; then the answer is 408 and the connection is closed.
    pub body_read_timeout: Duration,
    /// How long a connection may sit idle between requests before the
    /// gateway closes it.
    pub idle_timeout: Duration,
    /// Open connections at most; one more is answered 503 and closed.
    pub max_connections: u32,
    /// Requests one client token may have in flight at once (a stream
    /// counts until it ends); one more is answered 429.
    pub max_in_flight_per_client: u32,
    /// Client tokens, by name; each maps to one operation scope.
    pub clients: BTreeMap<String, GatewayClient>,
    /// Operator tokens, by name.
    pub operators: BTreeMap<String, GatewayOperator>,
    /// Model aliases a client may name in `model`: alias → policy.
    /// Every policy is also reachable by its own name.
    pub models: BTreeMap<String, String>,
    /// The policy whose budget and error table serve `provider/model`
    /// names; `None`: the built-in policy defaults.
    pub direct_policy: Option<String>,
    /// `[gateway.routes]`, most specific first (see [`super::Config::route`]).
    pub routes: Vec<PatternRoute>,
}

/// `[telemetry]`: export of the process's spans (the providers' GenAI
/// attempt spans, the router's task spans, the gateway's request spans)
/// over OTLP/HTTP. Present only when `otlp_endpoint` is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetrySettings {
    /// Where spans are POSTed (OTLP/HTTP JSON): the collector's traces
    /// URL, `/v1/traces` appended when the configured URL has no path.
    pub otlp_endpoint: String,
    /// The `service.name` resource attribute.
    pub service_name: String,
    /// Deadline of one export request (and of the flush at shutdown).
    pub export_timeout: Duration,
    /// How often queued spans are sent.
    pub export_interval: Duration,
    /// Finished spans that may wait for export; past it they are dropped
    /// and counted, never waited for.
    pub max_queued_spans: u32,
    /// Extra request headers (e.g. a collector's API key from the environment).
    pub headers: Vec<(String, LookupHeader)>,
}

/// The models a provider entry may serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSet {
    /// `models = "*"`: any model name the upstream accepts.
    Any,
    /// These names (the default `model` always among them).
    Listed(BTreeSet<String>),
}

impl ModelSet {
    /// Whether a request may name `model` on this provider.
    pub fn serves(&self, model: &str) -> bool {
        match self {
            Self::Any => model_name_ok(model),
            Self::Listed(names) => names.contains(model),
        }
    }
}

/// Whether `name` may be a model name: 1-255 visible ASCII characters.
pub(crate) fn model_name_ok(name: &str) -> bool {
    !name.is_empty() && name.len() <= 255 && name.bytes().all(|b| b.is_ascii_graphic())
}

/// One step of a chain: a provider entry and the model asked of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Hop {
    /// The `[providers.NAME]` entry.
    pub provider: String,
    /// The model requested from it.
    pub model: String,
}

impl std::fmt::Display for Hop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

/// `[gateway.routes]`: a request `model` pattern with its own chain, run
/// under a policy's budget, error table and data classes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternRoute {
    /// The pattern; `*` matches any run of characters (none included).
    pub pattern: String,
    /// Chain entries as written; `{model}` stands for the requested name.
    pub chain: Vec<String>,
    /// The policy it runs under; `None`: the built-in policy defaults.
    pub policy: Option<String>,
}

/// What a request's `model` name resolved to ([`super::Config::route`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The name as requested.
    pub name: String,
    /// How it resolved.
    pub via: RouteVia,
    /// The policy whose budget, retries and data classes apply; `None`:
    /// the built-in policy defaults.
    pub policy: Option<String>,
    /// The steps, in fallback order.
    pub chain: Vec<Hop>,
}

/// How a name resolved, in the order names are tried.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RouteVia {
    /// The name of a policy.
    Policy,
    /// A `[gateway.models]` alias.
    Alias,
    /// `provider/model`: one step, no fallback.
    Direct,
    /// A `[gateway.routes]` entry (its pattern).
    Pattern(String),
}

/// `[gateway.clients.NAME]`: an agent backend calling the gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayClient {
    /// The client's name in this file.
    pub name: String,
    /// SHA-256 of the bearer token.
    pub token_sha256: [u8; 32],
    /// The operation scope of every operation this client begins or reads.
    pub scope: String,
}

/// `[gateway.operators.NAME]`: a human or tool that may resolve operations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayOperator {
    /// The operator's name (recorded as the actor of resolutions).
    pub name: String,
    /// SHA-256 of the bearer token.
    pub token_sha256: [u8; 32],
}

/// `[mcp]`: the MCP proxy (`handover mcp`) — its upstream servers and the
/// tools guarded as actions (from `[actions.NAME] mcp = {...}`).
#[derive(Debug, Clone, PartialEq)]
pub struct McpSettings {
    /// Operation scope of a stdio session: the process that started
    /// `handover mcp` is one principal.
    pub scope: String,
    /// Streamable HTTP address of `handover mcp` (`--listen` overrides);
    /// `None`: stdio. Over HTTP the scope comes from the caller's
    /// `[gateway.clients]` token instead of `scope`.
    pub listen: Option<SocketAddr>,
    /// Browser origins allowed to call the HTTP endpoint besides the
    /// loopback ones (`http://localhost:*`, `http://127.0.0.1:*`,
    /// `http://[::1]:*`); a request with any other `Origin` is refused 403
    /// (DNS-rebinding protection, as the MCP specification asks).
    pub allowed_origins: Vec<String>,
    /// Open HTTP sessions at most (each has its own upstream connection:
    /// for a `command` server, a child process); one more is answered 503.
    pub max_sessions: u32,
    /// Open HTTP sessions of one client (`[gateway.clients.NAME]`) at most,
    /// its shared session-less connection included, so that one client
    /// cannot take the whole pool; one more is answered 503. Default: a
    /// quarter of `max_sessions` (at least 1).
    pub max_sessions_per_client: u32,
    /// An HTTP session unused this long is closed (its upstream too).
    pub session_idle: Duration,
    /// Upstream servers, by name.
    pub servers: BTreeMap<String, McpServer>,
    /// Guarded tools, by action name.
    pub tools: BTreeMap<String, McpTool>,
}

impl McpSettings {
    /// The action guarding `tool` on `server`, if one is configured.
    pub fn action_for(&self, server: &str, tool: &str) -> Option<&McpTool> {
        self.tools
            .values()
            .find(|t| t.server == server && t.tool == tool)
    }
}

/// `[mcp.servers.NAME]`: how to reach one upstream MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpServer {
    /// A child process speaking MCP over stdio.
    Command {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// A Streamable HTTP endpoint.
    Url(String),
}

/// `[actions.NAME] mcp = {...}`: an MCP tool whose `tools/call` is a
/// business action and goes through the write gate.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// The action (`[actions.NAME]`) this tool performs.
    pub action: String,
    /// The upstream server (`[mcp.servers.NAME]`).
    pub server: String,
    /// The tool's name at that server.
    pub tool: String,
    /// Argument fields whose values form the operation key when the client
    /// sends no `_meta.idempotencyKey` (in this order). Empty: the client
    /// must send one.
    pub key_from: Vec<String>,
    /// Argument that also carries the destination key to the upstream
    /// (besides `_meta.idempotencyKey`), if the tool takes one.
    pub key_argument: Option<String>,
    /// `is_error = "rejected"`: this tool's `isError: true` result always
    /// means it did nothing, so it is recorded `rejected`. `false` (the
    /// default, `is_error = "unknown"`): an `isError` result may come after
    /// the effect (the SDKs turn any exception into one), so it is
    /// recorded `unknown`, never "not done".
    pub is_error_rejects: bool,
    /// `[actions.NAME.lookup] mcp_tool = ...`: the reconciler's lookup.
    pub lookup: Option<McpLookupTool>,
}

/// An MCP tool the reconciler calls to find an operation's record.
#[derive(Debug, Clone, PartialEq)]
pub struct McpLookupTool {
    /// The lookup tool's name (on the action's server).
    pub tool: String,
    /// Argument template: a string value that is exactly `"{destination_key}"`,
    /// `"{key}"`, `"{scope}"` or `"{params.FIELD}"` is replaced by that value
    /// (keeping its JSON type); everything else is sent as written.
    pub arguments: serde_json::Map<String, serde_json::Value>,
}

/// What a lookup template's placeholders are filled from.
#[derive(Debug, Clone, Copy)]
pub struct LookupValues<'a> {
    /// The operation's scope.
    pub scope: &'a str,
    /// The operation's key.
    pub key: &'a str,
    /// The destination key every dispatch carried.
    pub destination_key: &'a str,
    /// The approved parameters.
    pub params: &'a serde_json::Value,
}

impl McpLookupTool {
    /// The lookup's arguments for one operation. A `{params.FIELD}` the
    /// parameters lack becomes `null`.
    pub fn arguments_for(&self, v: LookupValues<'_>) -> serde_json::Map<String, serde_json::Value> {
        self.arguments
            .iter()
            .map(|(k, t)| (k.clone(), fill(t, v)))
            .collect()
    }

    /// Where the template puts a value that names the operation
    /// (`"{destination_key}"`, `"{scope}"` or `"{key}"`), as JSON Pointers
    /// into `arguments` (`/reference`, `/filter/ref`). The tool must read
    /// each of them for its answer to be about this operation.
    pub fn naming_pointers(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (k, t) in &self.arguments {
            naming(t, format!("/{}", escape_pointer(k)), &mut out);
        }
        out
    }
}

fn naming(t: &serde_json::Value, at: String, out: &mut Vec<String>) {
    use serde_json::Value;
    match t {
        Value::String(s) => {
            if matches!(
                placeholder(s),
                Some(Placeholder::DestinationKey | Placeholder::Key | Placeholder::Scope)
            ) {
                out.push(at);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                naming(x, format!("{at}/{i}"), out);
            }
        }
        Value::Object(o) => {
            for (k, x) in o {
                naming(x, format!("{at}/{}", escape_pointer(k)), out);
            }
        }
        _ => {}
    }
}

/// A member name as a JSON Pointer token (RFC 6901).
fn escape_pointer(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

fn fill(t: &serde_json::Value, v: LookupValues<'_>) -> serde_json::Value {
    use serde_json::Value;
    match t {
        Value::String(s) => match placeholder(s) {
            Some(Placeholder::DestinationKey) => Value::String(v.destination_key.to_owned()),
            Some(Placeholder::Key) => Value::String(v.key.to_owned()),
            Some(Placeholder::Scope) => Value::String(v.scope.to_owned()),
            Some(Placeholder::Param(f)) => v.params.get(f).cloned().unwrap_or(Value::Null),
            None => t.clone(),
        },
        Value::Array(a) => Value::Array(a.iter().map(|x| fill(x, v)).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, x)| (k.clone(), fill(x, v))).collect()),
        _ => t.clone(),
    }
}

/// A placeholder in a lookup template.
pub(crate) enum Placeholder<'a> {
    DestinationKey,
    Key,
    Scope,
    Param(&'a str),
}

/// `Some` for a well-formed placeholder, `None` for a literal string.
pub(crate) fn placeholder(s: &str) -> Option<Placeholder<'_>> {
    match s.strip_prefix('{')?.strip_suffix('}')? {
        "destination_key" => Some(Placeholder::DestinationKey),
        "key" => Some(Placeholder::Key),
        "scope" => Some(Placeholder::Scope),
        other => other
            .strip_prefix("params.")
            .filter(|f| !f.is_empty())
            .map(Placeholder::Param),
    }
}
