//! Shared helpers for the provider tests: realistic provider bodies,
//! adapters pointed at a local server, a counting send gate, a raw TCP
//! server for streams wiremock cannot produce, and log capture.
#![allow(dead_code, unreachable_pub)]

pub mod anthropic;
pub mod bodies;
pub mod gemini;
pub mod raw;
pub mod responses;

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use handover_providers::{
    AnyProvider, OpenAiApi, ProviderKind, ProviderSettings, SendCounter, SendInfo, SendRefused,
    Timeouts,
};
use secrecy::SecretString;

pub const KEY: &str = "sk-test-key-0001";

/// One adapter under test: a kind and the API it is called through (only
/// OpenAI and Azure have two). A kind alone is its Chat Completions
/// adapter; `case == ProviderKind::X` holds only for that one, so a
/// Responses case never takes a Chat Completions branch by accident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case {
    pub kind: ProviderKind,
    pub api: OpenAiApi,
}

impl Case {
    pub const fn chat(kind: ProviderKind) -> Self {
        Self {
            kind,
            api: OpenAiApi::ChatCompletions,
        }
    }

    pub const fn responses(kind: ProviderKind) -> Self {
        Self {
            kind,
            api: OpenAiApi::Responses,
        }
    }

    /// Called through OpenAI's Responses API.
    pub fn is_responses(self) -> bool {
        self.api == OpenAiApi::Responses
    }
}

impl From<ProviderKind> for Case {
    fn from(kind: ProviderKind) -> Self {
        Case::chat(kind)
    }
}

impl PartialEq<ProviderKind> for Case {
    fn eq(&self, kind: &ProviderKind) -> bool {
        *self == Case::chat(*kind)
    }
}

/// The default model each adapter kind is configured with in tests.
pub fn model_for(kind: impl Into<Case>) -> &'static str {
    match kind.into().kind {
        ProviderKind::OpenAi => "gpt-4o-mini",
        ProviderKind::DeepSeek => "deepseek-chat",
        ProviderKind::OpenAiCompatible => "Qwen/Qwen2.5-7B-Instruct",
        ProviderKind::AzureOpenAi => "gpt-4o-mini-deployment",
        ProviderKind::Anthropic => "claude-sonnet-4-5",
        ProviderKind::Gemini => "gemini-2.5-flash",
    }
}

/// Generous real-time timeouts: they never fire unless a test wants them to.
pub fn relaxed() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(10),
        stream_first_byte: Duration::from_secs(10),
        first_token: Duration::from_secs(10),
        idle: Duration::from_secs(10),
        total: Duration::from_secs(20),
    }
}

/// The path (under the mock's `/v1` base) an adapter of `kind` posts a
/// plain call to.
pub fn endpoint_path(kind: impl Into<Case>) -> String {
    stream_path(kind, false)
}

/// The path an adapter of `kind` posts to (Gemini: the method differs for
/// streams).
pub fn stream_path(kind: impl Into<Case>, stream: bool) -> String {
    let case = kind.into();
    if case.is_responses() {
        return match case.kind {
            ProviderKind::AzureOpenAi => "/v1/openai/v1/responses".into(),
            _ => "/v1/responses".into(),
        };
    }
    let kind = case.kind;
    match kind {
        ProviderKind::Gemini if stream => {
            format!("/v1/models/{}:streamGenerateContent", model_for(kind))
        }
        ProviderKind::Anthropic => "/v1/messages".into(),
        ProviderKind::Gemini => format!("/v1/models/{}:generateContent", model_for(kind)),
        ProviderKind::AzureOpenAi => format!(
            "/v1/openai/deployments/{}/chat/completions",
            model_for(kind)
        ),
        _ => "/v1/chat/completions".into(),
    }
}

/// The authentication header an adapter of `kind` sends with [`KEY`].
pub fn auth_header(kind: impl Into<Case>) -> (&'static str, String) {
    match kind.into().kind {
        ProviderKind::Anthropic => ("x-api-key", KEY.into()),
        ProviderKind::Gemini => ("x-goog-api-key", KEY.into()),
        ProviderKind::AzureOpenAi => ("api-key", KEY.into()),
        _ => ("authorization", format!("Bearer {KEY}")),
    }
}

/// Deadlines for raw-server streams under paused time: headers 5 s (a
/// stream's too), first token 2 s, idle 1 s, total 60 s.
pub fn tight() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        stream_first_byte: Duration::from_secs(5),
        first_token: Duration::from_secs(2),
        idle: Duration::from_secs(1),
        total: Duration::from_secs(60),
    }
}

pub fn settings(kind: impl Into<Case>, base: &str) -> ProviderSettings {
    let case = kind.into();
    let kind = case.kind;
    ProviderSettings::new(format!("{kind}-test"), kind, model_for(kind))
        .with_base_url(base)
        .with_api_key(SecretString::from(KEY))
        .with_timeouts(relaxed())
        .with_api(case.api)
}

pub fn provider(kind: impl Into<Case>, base: &str) -> AnyProvider {
    AnyProvider::new(settings(kind, base)).expect("valid settings")
}

/// The JSON bodies `server` received, in order.
pub async fn sent(server: &wiremock::MockServer) -> Vec<serde_json::Value> {
    let reqs = server.received_requests().await.unwrap();
    reqs.iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

/// Counts admissions and refunds; refuses when `limit` is reached.
#[derive(Default)]
pub struct CountingGate {
    pub admitted: AtomicUsize,
    pub refunded: AtomicUsize,
    pub limit: Option<usize>,
    pub seen: Mutex<Vec<SendInfo>>,
}

impl CountingGate {
    pub fn limited(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit: Some(limit),
            ..Self::default()
        })
    }
    pub fn admitted(&self) -> usize {
        self.admitted.load(Ordering::SeqCst)
    }
    pub fn refunded(&self) -> usize {
        self.refunded.load(Ordering::SeqCst)
    }
}

impl SendCounter for CountingGate {
    fn before_send(&self, info: &SendInfo) -> Result<(), SendRefused> {
        self.seen.lock().unwrap().push(info.clone());
        if self.limit.is_some_and(|l| self.admitted() >= l) {
            return Err(SendRefused::new("request budget exhausted"));
        }
        self.admitted.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn not_sent(&self, _info: &SendInfo) {
        self.refunded.fetch_add(1, Ordering::SeqCst);
    }
}

/// A `tracing` writer into a shared buffer.
#[derive(Clone, Default)]
pub struct LogBuf(pub Arc<Mutex<Vec<u8>>>);

impl LogBuf {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for LogBuf {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs a TRACE subscriber (with span close events) for this thread.
pub fn capture_logs() -> (LogBuf, tracing::subscriber::DefaultGuard) {
    let buf = LogBuf::default();
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_writer(move || writer.clone())
        .finish();
    (buf, tracing::subscriber::set_default(subscriber))
}
