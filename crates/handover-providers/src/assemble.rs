//! Assembling stream events into a [`ChatResponse`].

use std::pin::Pin;

use futures::{Stream, StreamExt};
use serde_json::{Map, Value};

use crate::{
    error::ProviderError,
    fields::Fields,
    request::ToolCall,
    types::{ChatResponse, FinishReason, Passthrough, StreamEvent, Usage},
};

/// Accumulates [`StreamEvent`]s. Use it directly to keep partial output when
/// a stream fails (the router keeps partial output apart and never presents
/// it as complete), or via [`ChatStream::into_response`].
///
/// ```
/// use handover_providers::{FinishReason, StreamAssembler, StreamEvent};
/// let mut a = StreamAssembler::default();
/// a.push(StreamEvent::ContentDelta("Hel".into()));
/// a.push(StreamEvent::ContentDelta("lo".into()));
/// a.push(StreamEvent::Finish { reason: FinishReason::Stop });
/// assert!(a.is_complete());
/// let resp = a.finish("gpt-4o-mini", None);
/// assert_eq!(resp.content.as_deref(), Some("Hello"));
/// ```
#[derive(Debug, Default, Clone)]
pub struct StreamAssembler {
    content: Option<String>,
    reasoning: Option<String>,
    tool_calls: Vec<ToolCall>,
    tool_index: Vec<u32>,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
    model: Option<String>,
    passthrough: Merged,
    events: usize,
}

/// A stream's pass-through fields so far, as values: a later chunk's text
/// pieces (`refusal`) and list pieces (`logprobs.content`,
/// `logprobs.refusal`) are appended, its other fields take the later value.
/// Kept as values while merging so a long stream of `logprobs` pieces is
/// not parsed again with every chunk.
#[derive(Debug, Default, Clone)]
struct Merged {
    top: Map<String, Value>,
    choice: Map<String, Value>,
    message: Map<String, Value>,
}

impl Merged {
    fn add(&mut self, later: Passthrough) {
        for (into, from) in [
            (&mut self.top, later.top),
            (&mut self.choice, later.choice),
            (&mut self.message, later.message),
        ] {
            merge_map(into, from.to_map());
        }
    }

    fn into_passthrough(self) -> Passthrough {
        Passthrough {
            top: Fields::from(self.top),
            choice: Fields::from(self.choice),
            message: Fields::from(self.message),
        }
    }
}

fn merge_map(into: &mut Map<String, Value>, from: Map<String, Value>) {
    for (k, v) in from {
        match (into.get_mut(&k), v) {
            (Some(Value::String(a)), Value::String(b)) if k == "refusal" => a.push_str(&b),
            (Some(Value::Array(a)), Value::Array(b)) => a.extend(b),
            (Some(Value::Object(a)), Value::Object(b)) if k == "logprobs" => merge_map(a, b),
            (Some(_), Value::Null) => {}
            (_, v) => {
                into.insert(k, v);
            }
        }
    }
}

impl StreamAssembler {
    /// Adds one event.
    pub fn push(&mut self, event: StreamEvent) {
        self.events += 1;
        match event {
            StreamEvent::Model(m) => self.model = Some(m),
            StreamEvent::ContentDelta(d) => self.content.get_or_insert_default().push_str(&d),
            StreamEvent::ReasoningDelta(d) => self.reasoning.get_or_insert_default().push_str(&d),
            StreamEvent::ToolCallDelta {
                index,
                id,
                name,
                arguments,
                extra,
                function_extra,
            } => {
                let pos = match self.tool_index.iter().position(|i| *i == index) {
                    Some(p) => p,
                    None => {
                        self.tool_index.push(index);
                        self.tool_calls.push(ToolCall::default());
                        self.tool_calls.len() - 1
                    }
                };
                let call = &mut self.tool_calls[pos];
                if let Some(id) = id.filter(|i| !i.is_empty()) {
                    call.id = id;
                }
                if let Some(n) = name {
                    call.name.push_str(&n);
                }
                if let Some(a) = arguments {
                    call.arguments.push_str(&a);
                }
                for (k, v) in extra.iter() {
                    call.extra.insert_raw(k, v.to_owned());
                }
                for (k, v) in function_extra.iter() {
                    call.function_extra.insert_raw(k, v.to_owned());
                }
            }
            StreamEvent::Usage(u) => self.usage = Some(u),
            StreamEvent::Finish { reason } => self.finish = Some(reason),
            StreamEvent::Passthrough(p) => self.passthrough.add(p),
        }
    }

    /// Whether a finish reason arrived.
    pub fn is_complete(&self) -> bool {
        self.finish.is_some()
    }

    /// Events pushed so far.
    pub fn events(&self) -> usize {
        self.events
    }

    /// The response so far. `requested_model` is used only if the provider
    /// reported no model. Tool calls are ordered by their stream index.
    pub fn finish(mut self, requested_model: &str, request_id: Option<String>) -> ChatResponse {
        let mut calls: Vec<(u32, ToolCall)> =
            self.tool_index.drain(..).zip(self.tool_calls).collect();
        calls.sort_by_key(|(i, _)| *i);
        ChatResponse {
            content: self.content,
            tool_calls: calls.into_iter().map(|(_, c)| c).collect(),
            reasoning_content: self.reasoning,
            finish_reason: self.finish,
            usage: self.usage,
            model: self.model.unwrap_or_else(|| requested_model.to_owned()),
            request_id,
            passthrough: self.passthrough.into_passthrough(),
        }
    }
}

/// A streamed answer: `Stream<Item = Result<StreamEvent, ProviderError>>`,
/// `Send + Unpin`. After an `Err`, only [`ProviderError::MalformedStream`]
/// leaves the stream usable; every other error ends it.
pub struct ChatStream {
    inner: Pin<Box<dyn Stream<Item = Result<StreamEvent, ProviderError>> + Send>>,
    request_id: Option<String>,
    requested_model: String,
}

impl std::fmt::Debug for ChatStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatStream")
            .field("request_id", &self.request_id)
            .field("requested_model", &self.requested_model)
            .finish_non_exhaustive()
    }
}

impl ChatStream {
    /// Wraps any event stream (used by the adapters; handy for test doubles
    /// in other crates).
    pub fn new(
        inner: impl Stream<Item = Result<StreamEvent, ProviderError>> + Send + 'static,
        request_id: Option<String>,
        requested_model: impl Into<String>,
    ) -> Self {
        Self {
            inner: Box::pin(inner),
            request_id,
            requested_model: requested_model.into(),
        }
    }

    /// The provider's request id (`x-request-id`), known once headers arrived.
    pub fn request_id(&self) -> Option<&str> {
        self.request_id.as_deref()
    }

    /// The model that was requested.
    pub fn requested_model(&self) -> &str {
        &self.requested_model
    }

    /// Consumes the stream into a response. Fails on the first error,
    /// including a malformed event (use [`StreamAssembler`] to skip those).
    pub async fn into_response(mut self) -> Result<ChatResponse, ProviderError> {
        let mut a = StreamAssembler::default();
        while let Some(ev) = self.inner.next().await {
            a.push(ev?);
        }
        Ok(a.finish(&self.requested_model, self.request_id))
    }
}

impl Stream for ChatStream {
    type Item = Result<StreamEvent, ProviderError>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// Consumes `stream` into a [`ChatResponse`] (same as [`ChatStream::into_response`]).
pub async fn assemble(stream: ChatStream) -> Result<ChatResponse, ProviderError> {
    stream.into_response().await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Fields, StreamAssembler, StreamEvent};

    fn fields(v: serde_json::Value) -> Fields {
        v.as_object().cloned().unwrap_or_default().into()
    }

    #[test]
    fn a_calls_members_gather_from_its_pieces_the_latest_value_winning() {
        let piece =
            |id: Option<&str>, args: &str, extra, function_extra| StreamEvent::ToolCallDelta {
                index: 0,
                id: id.map(str::to_owned),
                name: id.map(|_| "f".to_owned()),
                arguments: Some(args.into()),
                extra: fields(extra),
                function_extra: fields(function_extra),
            };
        let mut a = StreamAssembler::default();
        a.push(piece(
            Some("c1"),
            "{",
            json!({"extra_content": {"google": {"thought_signature": "S"}}, "x": 1}),
            json!({"x_fn": "a"}),
        ));
        a.push(piece(None, "}", json!({"x": 2}), json!({})));
        let call = &a.finish("m", None).tool_calls[0];
        assert_eq!((call.id.as_str(), call.arguments.as_str()), ("c1", "{}"));
        assert_eq!(
            call.extra,
            fields(json!({"extra_content": {"google": {"thought_signature": "S"}}, "x": 2}))
        );
        assert_eq!(call.function_extra, fields(json!({"x_fn": "a"})));
    }
}
