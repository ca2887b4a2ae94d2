//! The [`Provider`] trait, the shipped adapters and [`AnyProvider`].

use std::future::Future;

use crate::{
    assemble::ChatStream,
    engine::Engine,
    error::ProviderError,
    gate::CallOptions,
    request::ChatRequest,
    settings::{ProviderKind, ProviderSettings},
    types::ChatResponse,
};

/// A chat model endpoint. Every call sends **at most one** HTTP request and
/// never retries: retries, fallback and budgets belong to the router.
///
/// Contract:
/// * invalid input fails before anything is sent (`was_sent() == false`);
/// * the [`crate::SendCounter`] in [`CallOptions`] is consulted exactly once,
///   right before the request is handed to the HTTP client;
/// * every failure is a classified [`ProviderError`];
/// * deadlines use `tokio::time` (tests may pause time).
///
/// The methods return `Send` futures. The trait is not object-safe (it uses
/// `impl Future` returns); the closed set of shipped providers is the
/// [`AnyProvider`] enum. Code that needs `dyn` can wrap a provider in its own
/// object-safe trait returning boxed futures.
pub trait Provider: Send + Sync {
    /// Configured name.
    fn name(&self) -> &str;

    /// Which adapter this is.
    fn kind(&self) -> ProviderKind;

    /// One non-streaming chat completion.
    fn chat(
        &self,
        req: &ChatRequest,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<ChatResponse, ProviderError>> + Send;

    /// One streaming chat completion. `Ok` means a 2xx response arrived; the
    /// stream then yields events or a classified error.
    fn chat_stream(
        &self,
        req: &ChatRequest,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<ChatStream, ProviderError>> + Send;
}

macro_rules! adapter {
    ($(#[$doc:meta])* $name:ident, $kind:pat) => {
        $(#[$doc])*
        pub struct $name(Engine);

        impl $name {
            /// Builds the adapter; settings are validated (errors name the field).
            /// `settings.kind` must match this adapter.
            pub fn new(settings: ProviderSettings) -> Result<Self, ProviderError> {
                if !matches!(settings.kind, $kind) {
                    return Err(ProviderError::InvalidSettings {
                        field: "kind".into(),
                        reason: format!("{} cannot serve kind {}", stringify!($name), settings.kind),
                    });
                }
                Engine::new(settings).map(Self)
            }

            /// The settings this adapter was built from.
            pub fn settings(&self) -> &ProviderSettings {
                self.0.settings()
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_tuple(stringify!($name)).field(self.0.settings()).finish()
            }
        }

        impl Provider for $name {
            fn name(&self) -> &str {
                &self.0.settings().name
            }

            fn kind(&self) -> ProviderKind {
                self.0.kind()
            }

            fn chat(
                &self,
                req: &ChatRequest,
                opts: &CallOptions,
            ) -> impl Future<Output = Result<ChatResponse, ProviderError>> + Send {
                self.0.chat(req, opts)
            }

            fn chat_stream(
                &self,
                req: &ChatRequest,
                opts: &CallOptions,
            ) -> impl Future<Output = Result<ChatStream, ProviderError>> + Send {
                self.0.chat_stream(req, opts)
            }
        }
    };
}

adapter!(
    /// OpenAI Chat Completions (no SDK in between: no hidden retries), or
    /// the Responses API where [`crate::ProviderSettings::api`] says so
    /// (the request and answer translated, see [`crate::OpenAiApi`]).
    /// Also serves [`ProviderKind::AzureOpenAi`]: the same APIs at the
    /// resource's URLs with the `api-key` header.
    OpenAiProvider,
    ProviderKind::OpenAi | ProviderKind::AzureOpenAi
);

adapter!(
    /// DeepSeek: `reasoning_content` in answers and deltas, per-model
    /// reasoning passback, `user` sent as `user_id`, keep-alive blank lines and
    /// comments tolerated.
    DeepSeekProvider,
    ProviderKind::DeepSeek
);

adapter!(
    /// Any other OpenAI-compatible endpoint (vLLM, Together, a local server).
    OpenAiCompatibleProvider,
    ProviderKind::OpenAiCompatible
);

adapter!(
    /// Anthropic's Messages API: system prompt, `tool_use` / `tool_result`
    /// blocks, stop reasons and cache usage translated to and from the
    /// OpenAI shape; `ping` events are keep-alives, an `error` event breaks
    /// the stream.
    AnthropicProvider,
    ProviderKind::Anthropic
);

adapter!(
    /// Google's Gemini API (`generateContent`, `streamGenerateContent` with
    /// SSE): contents and parts, `functionCall` / `functionResponse` with
    /// deterministic tool-call ids, safety blocks as `content_filter`,
    /// usage metadata; the key in `x-goog-api-key`.
    GeminiProvider,
    ProviderKind::Gemini
);

/// The closed set of shipped providers, built from [`ProviderSettings`] and
/// dispatching [`Provider`] by `match`.
///
/// ```
/// use handover_providers::{AnyProvider, Provider, ProviderKind, ProviderSettings};
/// let settings = ProviderSettings::new("local", ProviderKind::OpenAiCompatible, "qwen")
///     .with_base_url("http://127.0.0.1:8000/v1");
/// let p = AnyProvider::new(settings).unwrap();
/// assert_eq!(p.name(), "local");
/// assert_eq!(p.kind(), ProviderKind::OpenAiCompatible);
///
/// let bad = ProviderSettings::new("x", ProviderKind::OpenAiCompatible, "m");
/// let err = AnyProvider::new(bad).unwrap_err();
/// assert!(err.to_string().contains("base_url"));
/// ```
#[derive(Debug)]
pub enum AnyProvider {
    /// [`OpenAiProvider`].
    OpenAi(OpenAiProvider),
    /// [`DeepSeekProvider`].
    DeepSeek(DeepSeekProvider),
    /// [`OpenAiCompatibleProvider`].
    OpenAiCompatible(OpenAiCompatibleProvider),
    /// [`AnthropicProvider`].
    Anthropic(AnthropicProvider),
    /// [`GeminiProvider`].
    Gemini(GeminiProvider),
}

/// Runs `$body` with `$p` bound to whichever adapter `$any` holds: the one
/// place that lists the variants for dispatch.
macro_rules! each_provider {
    ($any:expr, $p:ident => $body:expr) => {
        match $any {
            AnyProvider::OpenAi($p) => $body,
            AnyProvider::DeepSeek($p) => $body,
            AnyProvider::OpenAiCompatible($p) => $body,
            AnyProvider::Anthropic($p) => $body,
            AnyProvider::Gemini($p) => $body,
        }
    };
}

impl AnyProvider {
    /// Builds the adapter for `settings.kind`.
    pub fn new(settings: ProviderSettings) -> Result<Self, ProviderError> {
        Ok(match settings.kind {
            ProviderKind::OpenAi | ProviderKind::AzureOpenAi => {
                AnyProvider::OpenAi(OpenAiProvider::new(settings)?)
            }
            ProviderKind::DeepSeek => AnyProvider::DeepSeek(DeepSeekProvider::new(settings)?),
            ProviderKind::OpenAiCompatible => {
                AnyProvider::OpenAiCompatible(OpenAiCompatibleProvider::new(settings)?)
            }
            ProviderKind::Anthropic => AnyProvider::Anthropic(AnthropicProvider::new(settings)?),
            ProviderKind::Gemini => AnyProvider::Gemini(GeminiProvider::new(settings)?),
        })
    }

    /// The settings this provider was built from.
    pub fn settings(&self) -> &ProviderSettings {
        each_provider!(self, p => p.settings())
    }
}

impl Provider for AnyProvider {
    fn name(&self) -> &str {
        &self.settings().name
    }

    fn kind(&self) -> ProviderKind {
        self.settings().kind
    }

    async fn chat(
        &self,
        req: &ChatRequest,
        opts: &CallOptions,
    ) -> Result<ChatResponse, ProviderError> {
        each_provider!(self, p => p.chat(req, opts).await)
    }

    async fn chat_stream(
        &self,
        req: &ChatRequest,
        opts: &CallOptions,
    ) -> Result<ChatStream, ProviderError> {
        each_provider!(self, p => p.chat_stream(req, opts).await)
    }
}
