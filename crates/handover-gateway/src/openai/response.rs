//! Provider-neutral answers → OpenAI JSON: whole completions, stream chunks
//! and the attempt headers.

use axum::http::HeaderValue;
use handover_providers::{ChatResponse, StreamEvent, ToolCall, Usage};
use handover_router::route::{Attempt, AttemptResult, Skip};
use serde_json::{Value, json};

/// `x-handover-attempts`: every attempt of the call as `provider=result`,
/// in order, then every skipped provider as `provider=skipped_<reason>`, in
/// chain order (`primary=overloaded, fallback=answered`,
/// `down=skipped_breaker_open`).
pub(crate) fn attempts_header(attempts: &[Attempt], skipped: &[Skip]) -> HeaderValue {
    let attempts = attempts.iter().map(|a| {
        let result = match a.result {
            AttemptResult::Answered => "answered",
            AttemptResult::Abandoned => "abandoned",
            AttemptResult::Failed(class) => class.as_str(),
        };
        let late = if a.late { "(late)" } else { "" };
        format!("{}={result}{late}", a.provider)
    });
    let skipped = skipped
        .iter()
        .map(|s| format!("{}=skipped_{}", s.provider, s.reason.as_str()));
    let text = attempts.chain(skipped).collect::<Vec<_>>().join(", ");
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("unavailable"))
}

/// A header value from a configured name (provider names are validated ASCII).
pub(crate) fn header_value(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).unwrap_or_else(|_| HeaderValue::from_static("unavailable"))
}

fn usage(u: &Usage) -> Value {
    let mut v = json!({
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.input_tokens + u.output_tokens,
    });
    if let Some(r) = u.reasoning_tokens {
        v["completion_tokens_details"] = json!({"reasoning_tokens": r});
    }
    if let Some(c) = u.cached_input_tokens {
        v["prompt_tokens_details"] = json!({"cached_tokens": c});
    }
    v
}

fn tool_calls(calls: &[ToolCall]) -> Value {
    calls
        .iter()
        .map(|c| {
            json!({"id": c.id, "type": "function",
                "function": {"name": c.name, "arguments": c.arguments}})
        })
        .collect()
}

/// A whole `chat.completion` object.
pub(crate) fn completion(id: &str, created: u64, model: &str, r: &ChatResponse) -> Value {
    let mut message = json!({"role": "assistant", "content": r.content});
    if !r.tool_calls.is_empty() {
        message["tool_calls"] = tool_calls(&r.tool_calls);
    }
    if let Some(reasoning) = &r.reasoning_content {
        message["reasoning_content"] = json!(reasoning);
    }
    let finish = r.finish_reason.as_ref().map_or("stop", |f| f.as_str());
    let mut v = json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": null}],
        "system_fingerprint": null,
    });
    if let Some(u) = &r.usage {
        v["usage"] = usage(u);
    }
    v
}

/// Builds the `chat.completion.chunk` objects of one streamed answer.
#[derive(Debug)]
pub(crate) struct Chunker {
    pub(crate) id: String,
    pub(crate) created: u64,
    pub(crate) model: String,
    pub(crate) include_usage: bool,
}

impl Chunker {
    fn chunk(&self, delta: Value, finish: Option<&str>) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}],
        })
    }

    /// The first chunk: the assistant role, plus which provider answered
    /// and after which attempts (the same facts as the response headers,
    /// which a stream that waited with keep-alives could not send).
    pub(crate) fn opening(&self, provider: &str, attempts: &[Attempt], skipped: &[Skip]) -> Value {
        let mut v = self.chunk(json!({"role": "assistant", "content": ""}), None);
        let attempts = attempts_header(attempts, skipped);
        v["handover"] = json!({"provider": provider, "attempts": attempts.to_str().unwrap_or("")});
        v
    }

    /// The chunk for one provider event, if it has one.
    pub(crate) fn event(&mut self, ev: StreamEvent) -> Option<Value> {
        match ev {
            StreamEvent::Model(m) => {
                self.model = m;
                None
            }
            StreamEvent::ContentDelta(t) => Some(self.chunk(json!({"content": t}), None)),
            StreamEvent::ReasoningDelta(t) => {
                Some(self.chunk(json!({"reasoning_content": t}), None))
            }
            StreamEvent::ToolCallDelta {
                index,
                id,
                name,
                arguments,
            } => {
                let mut call = json!({"index": index});
                if let Some(id) = id {
                    call["id"] = json!(id);
                    call["type"] = json!("function");
                }
                let mut function = json!({});
                if let Some(n) = name {
                    function["name"] = json!(n);
                }
                if let Some(a) = arguments {
                    function["arguments"] = json!(a);
                }
                call["function"] = function;
                Some(self.chunk(json!({"tool_calls": [call]}), None))
            }
            StreamEvent::Finish { reason } => Some(self.chunk(json!({}), Some(reason.as_str()))),
            StreamEvent::Usage(u) if self.include_usage => {
                let mut v = self.chunk(json!({}), None);
                v["choices"] = json!([]);
                v["usage"] = usage(&u);
                Some(v)
            }
            _ => None,
        }
    }
}
