//! What a request needs from a provider beyond plain chat, and which
//! provider kinds can give it. The router filters its chain with these
//! (like data classes): a fallback never receives a request it would
//! silently weaken — a schema it would not enforce, log probabilities it
//! would not return — and if no provider is left the call fails naming
//! the parameter.

use serde_json::Value;

use crate::{
    request::{ChatRequest, Content},
    settings::ProviderKind,
};

/// A request feature not every provider honours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Capability {
    /// `response_format: json_schema`, `tools[].function.strict: true`.
    StructuredOutputs,
    /// `response_format: json_object`.
    JsonMode,
    /// `logprobs`, `top_logprobs`.
    Logprobs,
    /// `reasoning_effort`.
    ReasoningEffort,
    /// Image content parts.
    Images,
    /// Audio input parts, `audio` output, `modalities` with audio.
    Audio,
    /// File content parts.
    Files,
    /// `parallel_tool_calls`.
    ParallelToolCalls,
    /// `temperature` above 1 (OpenAI's range is 0–2; Anthropic's is 0–1,
    /// and it refuses more rather than sampling as asked).
    TemperatureAbove1,
    /// `stop` sequences (every kind has them; OpenAI's Responses API does
    /// not, see [`crate::OpenAiApi::supports`]).
    StopSequences,
}

impl Capability {
    /// Every capability, in the order errors list them.
    pub const ALL: [Capability; 10] = [
        Self::StructuredOutputs,
        Self::JsonMode,
        Self::Logprobs,
        Self::ReasoningEffort,
        Self::Images,
        Self::Audio,
        Self::Files,
        Self::ParallelToolCalls,
        Self::TemperatureAbove1,
        Self::StopSequences,
    ];

    /// The capability named `name` (its [`Capability::as_str`]), as
    /// configuration spells it.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }

    /// Stable name for errors, headers and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::StructuredOutputs => "structured_outputs",
            Self::JsonMode => "json_mode",
            Self::Logprobs => "logprobs",
            Self::ReasoningEffort => "reasoning_effort",
            Self::Images => "images",
            Self::Audio => "audio",
            Self::Files => "files",
            Self::ParallelToolCalls => "parallel_tool_calls",
            Self::TemperatureAbove1 => "temperature_above_1",
            Self::StopSequences => "stop_sequences",
        }
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing a request needs: the capability and the parameter (a JSON
/// path) that asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// What the provider must support.
    pub capability: Capability,
    /// The request parameter asking for it (`response_format`,
    /// `messages[1].content[0]`, `tools[0].function.strict`).
    pub parameter: String,
}

impl ProviderKind {
    /// Whether providers of this kind honour `c`. OpenAI (and Azure
    /// OpenAI) honour them all; an OpenAI-compatible endpoint is taken to
    /// speak the whole API (it receives the request as sent); DeepSeek
    /// documents JSON mode and log probabilities only. Anthropic's Messages
    /// API has no JSON mode, log probabilities, reasoning effort, audio or
    /// file parts, and structured outputs (schemas, strict tools) only on
    /// Claude 4.5 and later, so they are not assumed (a provider declares
    /// them: `supports = { structured_outputs = true }`); it honours
    /// images (sent as image blocks) and `parallel_tool_calls` (as
    /// `disable_parallel_tool_use`). Gemini honours JSON mode
    /// (`responseMimeType`), images (inline data or file URIs); it does not
    /// enforce strict tool schemas (so no structured outputs), returns no
    /// OpenAI-shaped log probabilities, has no reasoning effort, audio or
    /// file parts here, and no switch to forbid parallel calls
    /// (`parallel_tool_calls: true`, what it does anyway, needs none). Every kind
    /// but Anthropic takes a `temperature` up to 2; every kind has stop
    /// sequences. What the provider's wire API can express is the other
    /// half of the answer ([`crate::OpenAiApi::supports`]).
    pub fn supports(self, c: Capability) -> bool {
        match self {
            ProviderKind::OpenAi | ProviderKind::OpenAiCompatible | ProviderKind::AzureOpenAi => {
                true
            }
            ProviderKind::DeepSeek => matches!(
                c,
                Capability::JsonMode
                    | Capability::Logprobs
                    | Capability::TemperatureAbove1
                    | Capability::StopSequences
            ),
            ProviderKind::Anthropic => matches!(
                c,
                Capability::Images | Capability::ParallelToolCalls | Capability::StopSequences
            ),
            ProviderKind::Gemini => matches!(
                c,
                Capability::JsonMode
                    | Capability::Images
                    | Capability::TemperatureAbove1
                    | Capability::StopSequences
            ),
        }
    }
}

impl ChatRequest {
    /// What this request needs beyond plain chat, in parameter order (empty
    /// for most requests).
    pub fn needs(&self) -> Vec<Need> {
        let mut out = Vec::new();
        let mut need = |capability, parameter: String| {
            if !out.iter().any(|n: &Need| n.capability == capability) {
                out.push(Need {
                    capability,
                    parameter,
                });
            }
        };
        match self
            .extra
            .get("response_format")
            .and_then(|f| f.get("type"))
            .and_then(Value::as_str)
        {
            Some("json_schema") => need(Capability::StructuredOutputs, "response_format".into()),
            Some("json_object") => need(Capability::JsonMode, "response_format".into()),
            _ => {}
        }
        for (i, t) in self.tools.iter().enumerate() {
            if t.strict == Some(true) {
                need(
                    Capability::StructuredOutputs,
                    format!("tools[{i}].function.strict"),
                );
            }
        }
        let set = |k: &str| self.extra.get(k).is_some_and(|v| !v.is_null());
        // `top_logprobs: 0` asks for no alternatives: only with
        // `logprobs: true` (or a positive count) are log probabilities asked for.
        let top = self.extra.get("top_logprobs");
        let top_asked = top.is_some_and(|v| !v.is_null() && v.as_f64() != Some(0.0));
        if self.extra.get("logprobs") == Some(&Value::Bool(true)) {
            need(Capability::Logprobs, "logprobs".into());
        } else if top_asked {
            need(Capability::Logprobs, "top_logprobs".into());
        }
        if set("reasoning_effort") {
            need(Capability::ReasoningEffort, "reasoning_effort".into());
        }
        if !self.stop.is_empty() {
            need(Capability::StopSequences, "stop".into());
        }
        if self.temperature.is_some_and(|t| t > 1.0) {
            need(Capability::TemperatureAbove1, "temperature".into());
        }
        // `true` asks for what every kind does by default; only `false`
        // (one call at a time) needs a switch to honour it.
        if self.extra.get("parallel_tool_calls") == Some(&Value::Bool(false)) {
            need(Capability::ParallelToolCalls, "parallel_tool_calls".into());
        }
        let audio_out = self
            .extra
            .get("modalities")
            .and_then(Value::as_array)
            .is_some_and(|m| m.iter().any(|x| x == "audio"));
        if set("audio") || audio_out {
            need(Capability::Audio, "modalities".into());
        }
        for (i, m) in self.messages.iter().enumerate() {
            let Some(Content::Parts(parts)) = &m.content else {
                continue;
            };
            for (j, p) in parts.iter().enumerate() {
                let c = match p.kind.as_str() {
                    "image_url" => Capability::Images,
                    "input_audio" => Capability::Audio,
                    "file" => Capability::Files,
                    _ => continue,
                };
                need(c, format!("messages[{i}].content[{j}]"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::Capability;
    use crate::request::{ChatRequest, Message};

    fn needs(extra: &[(&str, Value)]) -> Vec<(Capability, String)> {
        let mut req = ChatRequest::new(vec![Message::user("hi")]);
        for (k, v) in extra {
            req.extra.insert((*k).into(), v.clone());
        }
        req.needs()
            .into_iter()
            .map(|n| (n.capability, n.parameter))
            .collect()
    }

    /// Explicit defaults need nothing (agent frameworks send them);
    /// only what asks for more than every kind does needs a capability,
    /// named by the parameter the client sent.
    #[test]
    fn explicit_defaults_need_nothing() {
        assert!(needs(&[("parallel_tool_calls", json!(true))]).is_empty());
        assert!(needs(&[("top_logprobs", json!(0))]).is_empty());
        assert!(needs(&[("logprobs", json!(false)), ("top_logprobs", json!(0))]).is_empty());
        assert_eq!(
            needs(&[("parallel_tool_calls", json!(false))]),
            [(Capability::ParallelToolCalls, "parallel_tool_calls".into())]
        );
        assert_eq!(
            needs(&[("top_logprobs", json!(2))]),
            [(Capability::Logprobs, "top_logprobs".into())]
        );
        assert_eq!(
            needs(&[("logprobs", json!(true)), ("top_logprobs", json!(0))]),
            [(Capability::Logprobs, "logprobs".into())]
        );
    }
}
