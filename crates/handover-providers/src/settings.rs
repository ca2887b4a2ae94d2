//! Runtime provider configuration (built by the router's config module).

use std::{collections::HashMap, fmt, str::FromStr, time::Duration};

use secrecy::SecretString;

use crate::{
    api::OpenAiApi,
    error::{ProviderError, TimeoutPhase},
};

/// Which adapter serves a provider. A closed set: see [`crate::AnyProvider`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// OpenAI's Chat Completions API.
    OpenAi,
    /// DeepSeek's OpenAI-compatible API (`reasoning_content`, `user_id`).
    DeepSeek,
    /// Any other OpenAI-compatible endpoint (vLLM, Together, a local server).
    OpenAiCompatible,
    /// Azure OpenAI: the OpenAI adapter with a deployment URL
    /// (`{base_url}/openai/deployments/{model}/chat/completions`), the
    /// `api-version` query and the `api-key` header.
    AzureOpenAi,
    /// Anthropic's Messages API (`/v1/messages`, `x-api-key`,
    /// `anthropic-version`).
    Anthropic,
    /// Google's Gemini API (`models/{model}:generateContent` and
    /// `:streamGenerateContent?alt=sse`, `x-goog-api-key`).
    Gemini,
}

impl ProviderKind {
    /// Every kind, in configuration order.
    pub const ALL: [ProviderKind; 6] = [
        ProviderKind::OpenAi,
        ProviderKind::DeepSeek,
        ProviderKind::OpenAiCompatible,
        ProviderKind::AzureOpenAi,
        ProviderKind::Anthropic,
        ProviderKind::Gemini,
    ];

    /// The configuration name: `"openai"`, `"deepseek"`,
    /// `"openai_compatible"`, `"azure_openai"`, `"anthropic"`, `"gemini"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::DeepSeek => "deepseek",
            ProviderKind::OpenAiCompatible => "openai_compatible",
            ProviderKind::AzureOpenAi => "azure_openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Gemini => "gemini",
        }
    }

    /// The default base URL, if the kind has one (Azure and compatible
    /// endpoints are the user's own).
    pub const fn default_base_url(self) -> Option<&'static str> {
        match self {
            ProviderKind::OpenAi => Some("https://api.openai.com/v1"),
            ProviderKind::DeepSeek => Some("https://api.deepseek.com"),
            ProviderKind::Anthropic => Some("https://api.anthropic.com/v1"),
            ProviderKind::Gemini => Some("https://generativelanguage.googleapis.com/v1beta"),
            ProviderKind::OpenAiCompatible | ProviderKind::AzureOpenAi => None,
        }
    }

    /// The API version a kind pins when settings name none: Azure's
    /// `api-version` query, Anthropic's `anthropic-version` header.
    pub const fn default_api_version(self) -> Option<&'static str> {
        match self {
            ProviderKind::AzureOpenAi => Some("2024-10-21"),
            ProviderKind::Anthropic => Some("2023-06-01"),
            _ => None,
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ProviderKind {
    type Err = ProviderError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ProviderKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| ProviderError::InvalidSettings {
                field: "kind".into(),
                reason: format!(
                    "unknown provider kind {s:?} (expected one of {})",
                    ProviderKind::ALL.map(ProviderKind::as_str).join(", ")
                ),
            })
    }
}

/// Deadlines of one call. All are measured with `tokio::time`, so tests can
/// pause time.
///
/// * `connect` — establishing the TCP/TLS connection (per provider client).
/// * `first_byte` — from starting the send until response headers arrive.
/// * `stream_first_byte` — the same for a stream, when shorter. A whole
///   answer's headers come only after the whole generation, so
///   `first_byte` must allow for long answers; a stream's headers come
///   before the model writes anything, so a dead or hung provider can be
///   left much sooner. The shorter of the two applies to streams.
/// * `first_token` — streams: from headers until the first **data** event.
/// * `idle` — streams: between two **data** events. SSE comments
///   (`: keep-alive`) and blank lines never reset it.
/// * `total` — the whole call, until the body or stream is complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Connection establishment.
    pub connect: Duration,
    /// Until response headers.
    pub first_byte: Duration,
    /// Streams: until response headers, when shorter than `first_byte`.
    pub stream_first_byte: Duration,
    /// Until the first data event of a stream.
    pub first_token: Duration,
    /// Between data events of a stream.
    pub idle: Duration,
    /// The whole call.
    pub total: Duration,
}

impl Default for Timeouts {
    /// connect 10 s, first byte 60 s (a stream's 10 s), first token 60 s,
    /// idle 30 s, total 10 min.
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(60),
            stream_first_byte: Duration::from_secs(10),
            first_token: Duration::from_secs(60),
            idle: Duration::from_secs(30),
            total: Duration::from_secs(600),
        }
    }
}

impl Timeouts {
    /// Every limit capped at `remaining` (e.g. what is left of a budget).
    pub fn capped(self, remaining: Duration) -> Self {
        Self {
            connect: self.connect.min(remaining),
            first_byte: self.first_byte.min(remaining),
            stream_first_byte: self.stream_first_byte.min(remaining),
            first_token: self.first_token.min(remaining),
            idle: self.idle.min(remaining),
            total: self.total.min(remaining),
        }
    }

    /// The element-wise minimum of two sets of limits.
    pub fn min(self, other: Self) -> Self {
        Self {
            connect: self.connect.min(other.connect),
            first_byte: self.first_byte.min(other.first_byte),
            stream_first_byte: self.stream_first_byte.min(other.stream_first_byte),
            first_token: self.first_token.min(other.first_token),
            idle: self.idle.min(other.idle),
            total: self.total.min(other.total),
        }
    }

    /// The deadline for response headers and the phase that names it: a
    /// stream's own when it is the shorter.
    pub(crate) fn headers(&self, stream: bool) -> (Duration, TimeoutPhase) {
        if stream && self.stream_first_byte < self.first_byte {
            (self.stream_first_byte, TimeoutPhase::StreamFirstByte)
        } else {
            (self.first_byte, TimeoutPhase::FirstByte)
        }
    }

    /// Errors naming the first zero limit (`timeouts.idle`, ...).
    pub fn validate(&self) -> Result<(), ProviderError> {
        for (name, d) in [
            ("timeouts.connect", self.connect),
            ("timeouts.first_byte", self.first_byte),
            ("timeouts.stream_first_byte", self.stream_first_byte),
            ("timeouts.first_token", self.first_token),
            ("timeouts.idle", self.idle),
            ("timeouts.total", self.total),
        ] {
            if d.is_zero() {
                return Err(ProviderError::InvalidSettings {
                    field: name.into(),
                    reason: "must be greater than zero".into(),
                });
            }
        }
        Ok(())
    }
}

/// Whether an assistant message's `reasoning_content` is sent back to
/// DeepSeek in later requests.
///
/// DeepSeek's thinking mode requires the reasoning of an assistant turn that
/// made tool calls to be passed back while that tool-call exchange
/// continues; the `deepseek-reasoner` model instead rejects any
/// `reasoning_content` in input messages (400). Hence a per-model setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReasoningPassback {
    /// Send `reasoning_content` on assistant messages that carry tool calls.
    OnToolCallTurns,
    /// Never send `reasoning_content`.
    Never,
}

/// Everything needed to build one provider. No serde: the router's config
/// module validates its own file format into this.
#[derive(Clone)]
pub struct ProviderSettings {
    /// Configured name (`"primary"`, `"deepseek"`); appears in errors and spans.
    pub name: String,
    /// Which adapter.
    pub kind: ProviderKind,
    /// Base URL including the version prefix (`https://api.openai.com/v1`);
    /// the kind appends its path (`/chat/completions`, `/responses`,
    /// `/messages`; Azure: the resource URL,
    /// `/openai/deployments/{model}/chat/completions` or `/openai/v1/responses`).
    pub base_url: String,
    /// The API version the kind pins (Azure `api-version`, Anthropic
    /// `anthropic-version`); `None` uses [`ProviderKind::default_api_version`].
    /// Azure's Responses API (the `v1` path) needs none: there it is sent
    /// only when set.
    pub api_version: Option<String>,
    /// Default model for calls without [`crate::CallOptions::model`].
    pub model: String,
    /// API key; `None` sends no `Authorization` header (local servers).
    pub api_key: Option<SecretString>,
    /// Default deadlines.
    pub timeouts: Timeouts,
    /// DeepSeek: per-model reasoning passback; models not listed use
    /// [`ProviderSettings::default_reasoning_passback`]. Ignored by other kinds.
    pub reasoning_passback: HashMap<String, ReasoningPassback>,
    /// DeepSeek: passback for models not listed.
    pub default_reasoning_passback: ReasoningPassback,
    /// Ask for usage in streams (`stream_options.include_usage`). Some
    /// compatible servers reject the field; switch it off for them. (The
    /// Responses API always reports usage.)
    pub stream_usage: bool,
    /// Which OpenAI API an `openai` or `azure_openai` provider is called
    /// through; other kinds accept only the default,
    /// [`OpenAiApi::ChatCompletions`].
    pub api: OpenAiApi,
}

impl fmt::Debug for ProviderSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderSettings")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("api_version", &self.api_version)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .field("timeouts", &self.timeouts)
            .field("reasoning_passback", &self.reasoning_passback)
            .field(
                "default_reasoning_passback",
                &self.default_reasoning_passback,
            )
            .field("stream_usage", &self.stream_usage)
            .field("api", &self.api)
            .finish()
    }
}

impl ProviderSettings {
    /// Settings with the kind's default base URL (empty for
    /// `OpenAiCompatible`: set one), no key and default timeouts. DeepSeek
    /// settings pre-register `deepseek-reasoner` as
    /// [`ReasoningPassback::Never`] and default other models to
    /// [`ReasoningPassback::OnToolCallTurns`].
    pub fn new(name: impl Into<String>, kind: ProviderKind, model: impl Into<String>) -> Self {
        let mut reasoning_passback = HashMap::new();
        let default_reasoning_passback = if kind == ProviderKind::DeepSeek {
            reasoning_passback.insert("deepseek-reasoner".to_owned(), ReasoningPassback::Never);
            ReasoningPassback::OnToolCallTurns
        } else {
            ReasoningPassback::Never
        };
        Self {
            name: name.into(),
            kind,
            base_url: kind.default_base_url().unwrap_or_default().to_owned(),
            api_version: None,
            model: model.into(),
            api_key: None,
            timeouts: Timeouts::default(),
            reasoning_passback,
            default_reasoning_passback,
            stream_usage: true,
            api: OpenAiApi::default(),
        }
    }

    /// Calls the provider through `api` (OpenAI and Azure OpenAI only;
    /// [`ProviderSettings::validate`] refuses it for other kinds).
    pub fn with_api(mut self, api: OpenAiApi) -> Self {
        self.api = api;
        self
    }

    /// Sets the base URL.
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// Pins the API version (Azure `api-version`, Anthropic
    /// `anthropic-version`).
    pub fn with_api_version(mut self, version: impl Into<String>) -> Self {
        self.api_version = Some(version.into());
        self
    }

    /// The API version in effect: the configured one, else the kind's default.
    pub fn api_version(&self) -> Option<&str> {
        self.api_version
            .as_deref()
            .or(self.kind.default_api_version())
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, key: SecretString) -> Self {
        self.api_key = Some(key);
        self
    }

    /// Reads the API key from environment variable `var`; an unset or empty
    /// variable is an error naming it (never its value).
    pub fn with_api_key_from_env(mut self, var: &str) -> Result<Self, ProviderError> {
        match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => {
                self.api_key = Some(SecretString::from(v));
                Ok(self)
            }
            _ => Err(ProviderError::InvalidSettings {
                field: "api_key_env".into(),
                reason: format!("environment variable {var} is not set, empty or blank"),
            }),
        }
    }

    /// Sets the default timeouts.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Sets DeepSeek reasoning passback for one model.
    pub fn with_reasoning_passback(
        mut self,
        model: impl Into<String>,
        mode: ReasoningPassback,
    ) -> Self {
        self.reasoning_passback.insert(model.into(), mode);
        self
    }

    /// The passback mode for `model` (always `Never` for non-DeepSeek kinds).
    pub fn passback_for(&self, model: &str) -> ReasoningPassback {
        if self.kind != ProviderKind::DeepSeek {
            return ReasoningPassback::Never;
        }
        self.reasoning_passback
            .get(model)
            .copied()
            .unwrap_or(self.default_reasoning_passback)
    }

    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ProviderError> {
        let bad = |field: &str, reason: &str| {
            Err(ProviderError::InvalidSettings {
                field: field.into(),
                reason: reason.into(),
            })
        };
        if self.name.trim().is_empty() {
            return bad("name", "must not be empty");
        }
        if self.model.trim().is_empty() {
            return bad("model", "must not be empty");
        }
        if self.base_url.is_empty() {
            return bad("base_url", "must be set for this provider kind");
        }
        match reqwest::Url::parse(&self.base_url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => {}
            Ok(_) => return bad("base_url", "must be an http or https URL with a host"),
            Err(_) => return bad("base_url", "is not a valid URL"),
        }
        if let Some(v) = &self.api_version
            && (v.is_empty()
                || !v
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b)))
        {
            return bad("api_version", "must be a non-empty version like 2024-10-21");
        }
        let two_apis = matches!(self.kind, ProviderKind::OpenAi | ProviderKind::AzureOpenAi);
        if self.api != OpenAiApi::ChatCompletions && !two_apis {
            return bad(
                "api",
                "only openai and azure_openai providers can be called through another API",
            );
        }
        self.timeouts.validate()
    }
}
