//! Gemini answers and errors in the OpenAI shape: a
//! `GenerateContentResponse` (whole, or one stream chunk) as text,
//! reasoning (`thought` parts) and tool calls with deterministic ids;
//! finish reasons, safety blocks (`promptFeedback.blockReason`, `SAFETY`
//! and its kin) as `content_filter`, `usageMetadata` as usage; Google's
//! error envelope (`status`, `ErrorInfo` reason, `RetryInfo` delay) for the
//! classifier.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::reported_model;
use crate::{
    fields::Fields,
    request::ToolCall,
    types::{ChatResponse, FinishReason, Passthrough, Usage},
    wire::WireError,
};

/// One `GenerateContentResponse` (a whole answer, or one stream chunk).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireAnswer {
    #[serde(default)]
    pub(crate) candidates: Vec<WireCandidate>,
    #[serde(default)]
    pub(crate) prompt_feedback: Option<WireFeedback>,
    #[serde(default)]
    pub(crate) usage_metadata: Option<Map<String, Value>>,
    #[serde(default)]
    pub(crate) model_version: Option<String>,
    #[serde(default)]
    pub(crate) response_id: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireCandidate {
    #[serde(default)]
    pub(crate) content: Option<WireContent>,
    #[serde(default)]
    pub(crate) finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
pub(crate) struct WireContent {
    #[serde(default)]
    pub(crate) parts: Vec<WirePart>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WirePart {
    #[serde(default)]
    pub(crate) text: Option<String>,
    #[serde(default)]
    pub(crate) thought: Option<bool>,
    #[serde(default)]
    pub(crate) function_call: Option<WireCall>,
    /// Gemini 3's signature of its reasoning, on the part it belongs to
    /// (for calls, the first `functionCall` of a turn).
    #[serde(default)]
    pub(crate) thought_signature: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct WireCall {
    #[serde(default)]
    pub(crate) id: Option<String>,
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) args: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireFeedback {
    #[serde(default)]
    pub(crate) block_reason: Option<String>,
}

impl WireAnswer {
    /// The first candidate's parts (Handover asks for one candidate).
    pub(crate) fn parts(&self) -> &[WirePart] {
        self.candidates
            .first()
            .and_then(|c| c.content.as_ref())
            .map_or(&[], |c| c.parts.as_slice())
    }

    /// The finish reason: the candidate's, or `content_filter` when the
    /// prompt itself was blocked.
    pub(crate) fn finish(&self, made_calls: bool) -> Option<FinishReason> {
        if let Some(r) = self
            .candidates
            .first()
            .and_then(|c| c.finish_reason.as_deref())
        {
            return Some(finish_reason(r, made_calls));
        }
        self.prompt_feedback
            .as_ref()
            .and_then(|f| f.block_reason.as_ref())
            .map(|_| FinishReason::ContentFilter)
    }

    pub(crate) fn into_response(
        self,
        requested_model: &str,
        request_id: Option<String>,
    ) -> ChatResponse {
        let mut content: Option<String> = None;
        let mut reasoning: Option<String> = None;
        let mut tool_calls = Vec::new();
        for p in self.parts() {
            if let Some(call) = &p.function_call {
                let index = tool_calls.len();
                tool_calls.push(tool_call(self.response_id.as_deref(), index, p, call));
            } else if let Some(t) = &p.text {
                let into = if p.thought == Some(true) {
                    &mut reasoning
                } else {
                    &mut content
                };
                into.get_or_insert_default().push_str(t);
            }
        }
        let finish = self.finish(!tool_calls.is_empty());
        let mut passthrough = Passthrough::default();
        if let Some(id) = &self.response_id {
            passthrough.top.insert("id", &id.as_str().into());
        }
        ChatResponse {
            content,
            tool_calls,
            reasoning_content: reasoning,
            finish_reason: finish,
            usage: self.usage_metadata.map(usage),
            model: reported_model(self.model_version, requested_model),
            request_id,
            passthrough,
        }
    }
}

/// A `functionCall` as an OpenAI tool call. Gemini's own id is kept when
/// it sends one; else the id is derived from the answer's id, the call's
/// position, name and arguments, so the same answer always yields the same
/// ids and two calls of one answer never share one. The part's
/// `thoughtSignature` becomes the call's
/// `extra_content.google.thought_signature`, where Google's
/// OpenAI-compatible endpoint puts it: a client that sends the call back
/// as it got it sends the signature back with it.
pub(crate) fn tool_call(
    response_id: Option<&str>,
    index: usize,
    part: &WirePart,
    call: &WireCall,
) -> ToolCall {
    let args = call.args.clone().unwrap_or_else(|| json!({})).to_string();
    let id = match call.id.as_deref().filter(|id| !id.is_empty()) {
        Some(id) => id.to_owned(),
        None => {
            // FNV-1a over the parts that identify the call.
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            let index = index.to_string();
            for piece in [response_id.unwrap_or(""), &index, &call.name, &args] {
                for b in piece.bytes().chain([0xff]) {
                    h ^= u64::from(b);
                    h = h.wrapping_mul(0x0100_0000_01b3);
                }
            }
            format!("call_{h:016x}")
        }
    };
    let mut extra = Fields::new();
    if let Some(sig) = &part.thought_signature {
        extra.insert(EXTRA_CONTENT, &json!({GOOGLE: {THOUGHT_SIGNATURE: sig}}));
    }
    ToolCall {
        id,
        name: call.name.clone(),
        arguments: args,
        extra,
        function_extra: Fields::new(),
    }
}

/// Where a tool call carries Gemini's thought signature in the OpenAI
/// shape: `extra_content.google.thought_signature`.
pub(crate) const EXTRA_CONTENT: &str = "extra_content";
pub(crate) const GOOGLE: &str = "google";
pub(crate) const THOUGHT_SIGNATURE: &str = "thought_signature";

/// The thought signature a tool call carries, if any.
pub(crate) fn thought_signature(call: &ToolCall) -> Option<String> {
    let extra = call.extra.value(EXTRA_CONTENT)?;
    let sig = extra.get(GOOGLE)?.get(THOUGHT_SIGNATURE)?.as_str()?;
    Some(sig.to_owned())
}

/// Gemini's `finishReason` as a finish reason. `STOP` after function calls
/// is `tool_calls`, as OpenAI reports it.
pub(crate) fn finish_reason(r: &str, made_calls: bool) -> FinishReason {
    match r {
        "STOP" if made_calls => FinishReason::ToolCalls,
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY"
        | "RECITATION"
        | "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_ascii_lowercase()),
    }
}

/// `usageMetadata`: input is the prompt (plus tool-use prompt) tokens,
/// output the candidates plus thinking tokens (OpenAI's
/// `completion_tokens` includes reasoning); Gemini's other counters stay
/// in `extra`.
pub(crate) fn usage(mut u: Map<String, Value>) -> Usage {
    let n = |u: &Map<String, Value>, k: &str| u.get(k).and_then(Value::as_u64);
    let thoughts = n(&u, "thoughtsTokenCount");
    let input =
        n(&u, "promptTokenCount").unwrap_or(0) + n(&u, "toolUsePromptTokenCount").unwrap_or(0);
    let output = n(&u, "candidatesTokenCount").unwrap_or(0) + thoughts.unwrap_or(0);
    let cached = n(&u, "cachedContentTokenCount");
    u.shift_remove("promptTokenCount");
    u.shift_remove("candidatesTokenCount");
    u.retain(|_, v| !v.is_null());
    Usage {
        input_tokens: input,
        output_tokens: output,
        reasoning_tokens: thoughts,
        cached_input_tokens: cached,
        extra: u.into(),
    }
}

// ---- errors ----

/// Google's error envelope: `{"error": {"code": 429, "message", "status":
/// "RESOURCE_EXHAUSTED", "details": [...]}}`.
#[derive(Deserialize)]
pub(crate) struct Envelope {
    pub(crate) error: GoogleError,
}

#[derive(Deserialize, Default)]
pub(crate) struct GoogleError {
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    details: Vec<Value>,
}

fn detail<'a>(e: &'a GoogleError, kind: &str) -> Option<&'a Value> {
    e.details.iter().find(|d| {
        d.get("@type")
            .and_then(Value::as_str)
            .is_some_and(|t| t.ends_with(kind))
    })
}

/// The error as the classifier reads it: `status` is the type
/// (`RESOURCE_EXHAUSTED`, `INVALID_ARGUMENT`), an `ErrorInfo` reason
/// (`API_KEY_INVALID`) the code.
pub(crate) fn wire_error(e: GoogleError) -> WireError {
    let reason = detail(&e, "google.rpc.ErrorInfo")
        .and_then(|d| d.get("reason"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    WireError {
        message: e.message,
        r#type: e.status,
        code: reason,
        param: None,
    }
}

/// `RetryInfo.retryDelay` ("12s", "0.5s") as a duration.
pub(crate) fn retry_delay(e: &GoogleError) -> Option<Duration> {
    let d = detail(e, "google.rpc.RetryInfo")?
        .get("retryDelay")?
        .as_str()?;
    let secs: f64 = d.strip_suffix('s')?.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

/// An in-stream `{"error": ...}` object, read the same way.
pub(crate) fn stream_error(v: Value) -> WireError {
    serde_json::from_value::<GoogleError>(v.clone())
        .map(wire_error)
        .unwrap_or_else(|_| WireError::from_value(v))
}
