//! Which of OpenAI's two HTTP APIs an `openai` or `azure_openai` provider
//! is reached through, and what each can express of the one request.

use std::fmt;

use crate::capability::Capability;

/// The OpenAI API a provider is called through (`api = "..."` in
/// configuration). Only [`crate::ProviderKind::OpenAi`] and
/// [`crate::ProviderKind::AzureOpenAi`] offer both; every other kind speaks
/// its one wire format.
///
/// The request and answer stay the one OpenAI Chat Completions shape
/// ([`crate::ChatRequest`], [`crate::ChatResponse`]) whichever API is used:
/// for `Responses` the adapter translates the request into a Responses
/// body (`POST {base_url}/responses`, `store: false`) and the answer and
/// stream events back, so the router, the gateway and a Rust caller see no
/// difference but the provider's own ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum OpenAiApi {
    /// `POST {base_url}/chat/completions` (Azure: the deployment's
    /// `chat/completions`): the request as sent.
    #[default]
    ChatCompletions,
    /// `POST {base_url}/responses` (Azure: `{base_url}/openai/v1/responses`,
    /// the deployment as `model`): the request translated.
    Responses,
}

impl OpenAiApi {
    /// Both APIs, in configuration order.
    pub const ALL: [OpenAiApi; 2] = [OpenAiApi::ChatCompletions, OpenAiApi::Responses];

    /// The configuration name: `"chat_completions"` or `"responses"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            OpenAiApi::ChatCompletions => "chat_completions",
            OpenAiApi::Responses => "responses",
        }
    }

    /// The API named `name` (its [`OpenAiApi::as_str`]).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == name)
    }

    /// Whether this API can express what `c` asks for. Chat Completions
    /// can express everything; the Responses API has no stop sequences and
    /// no audio (neither input parts nor spoken output), so a request
    /// needing either is never sent through it — the router skips such a
    /// provider, as it skips one its kind rules out.
    pub fn supports(self, c: Capability) -> bool {
        match self {
            OpenAiApi::ChatCompletions => true,
            OpenAiApi::Responses => !matches!(c, Capability::StopSequences | Capability::Audio),
        }
    }
}

impl fmt::Display for OpenAiApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
