//! Provider adapters for Handover: turn a provider-neutral [`ChatRequest`]
//! into **exactly one** HTTP request to OpenAI (or Azure OpenAI; Chat
//! Completions or, where configured, the Responses API), DeepSeek,
//! any OpenAI-compatible API, Anthropic's Messages API or Google's Gemini API, and turn whatever comes back — an answer, a
//! stream, an error status, a broken or silent connection — into typed,
//! classified results.
//!
//! How it fits: the router (`handover-router`) owns retries, fallback,
//! budgets and circuit breakers. It builds one [`AnyProvider`] per configured
//! provider from [`ProviderSettings`], calls [`Provider::chat`] or
//! [`Provider::chat_stream`] with [`CallOptions`] (per-call [`Timeouts`] cut
//! to what remains of its budget, a [`SendCounter`] that counts requests
//! actually sent), and maps [`ProviderError::class`] to an action.
//!
//! Guarantees:
//! * no SDK retries: one call, at most one request on the wire;
//! * errors are classified by methods ([`ProviderError::class`],
//!   [`ProviderError::was_sent`], [`ProviderError::retry_after`], ...);
//! * stream semantics are ours: keep-alives are not progress, a stream
//!   without `[DONE]` is complete only with a finish reason (see the
//!   `stream` module docs, summarised in `docs/providers.md`);
//! * API keys are [`secrecy::SecretString`], sent in a header marked
//!   sensitive, redacted from provider messages, and never in Debug, logs or
//!   errors;
//! * one `tracing` span per attempt with OpenTelemetry GenAI field names.
//!
//! ```no_run
//! use handover_providers::{
//!     AnyProvider, CallOptions, ChatRequest, Message, Provider, ProviderKind, ProviderSettings,
//! };
//! # async fn run() -> Result<(), handover_providers::ProviderError> {
//! let settings = ProviderSettings::new("primary", ProviderKind::OpenAi, "gpt-4o-mini")
//!     .with_api_key_from_env("OPENAI_API_KEY")?;
//! let provider = AnyProvider::new(settings)?;
//! let req = ChatRequest::new(vec![Message::user("Say hi")]);
//! match provider.chat(&req, &CallOptions::default()).await {
//!     Ok(resp) => println!("{} answered: {:?}", resp.model, resp.content),
//!     Err(e) if e.is_retryable() => println!("retry later ({}): {e}", e.class()),
//!     Err(e) => println!("give up ({}), sent: {}", e.class(), e.was_sent()),
//! }
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod api;
mod assemble;
mod capability;
pub mod capped;
mod class;
mod classify;
mod dialect;
mod engine;
mod error;
mod extra;
mod fields;
mod gate;
mod openai_json;
mod provider;
mod request;
mod settings;
pub mod sse;
mod stream;
mod telemetry;
mod transport;
mod types;
pub mod whole;
mod wire;

pub use api::OpenAiApi;
pub use assemble::{ChatStream, StreamAssembler, assemble};
pub use capability::{Capability, Need};
pub use error::{ApiFailure, ErrorClass, ProviderError, TimeoutPhase, UnknownErrorClass};
pub use fields::Fields;
pub use gate::{CallOptions, SendCounter, SendInfo, SendRefused};
pub use provider::{
    AnthropicProvider, AnyProvider, DeepSeekProvider, GeminiProvider, OpenAiCompatibleProvider,
    OpenAiProvider, Provider,
};
pub use request::{ChatRequest, Content, ContentPart, Message, Role, Tool, ToolCall, ToolChoice};
pub use settings::{ProviderKind, ProviderSettings, ReasoningPassback, Timeouts};
pub use types::{ChatResponse, FinishReason, Passthrough, StreamEvent, Usage};
