//! A chat answer as a Responses API `response` object, and the Responses
//! streaming events (`response.created`, `response.output_text.delta`,
//! `response.function_call_arguments.delta`, `response.completed`,
//! `error`) built from the router's stream events.

use handover_providers::{
    ChatResponse, FinishReason, Passthrough, StreamAssembler, StreamEvent, ToolCall,
};
use serde_json::{Value, json};

use super::super::stream::{Encoder, SseText};
use super::input::EXTRA_CONTENT;
use crate::api_error::ApiError;
use handover_router::RouterError;

/// The request fields a `response` object repeats.
#[derive(Debug, Clone)]
pub(crate) struct Echo {
    pub(crate) instructions: Value,
    pub(crate) tools: Value,
    pub(crate) tool_choice: Value,
    pub(crate) text: Value,
    pub(crate) reasoning: Value,
    pub(crate) parallel_tool_calls: bool,
    pub(crate) temperature: Option<f32>,
    pub(crate) top_p: Option<f32>,
    pub(crate) max_output_tokens: Option<u32>,
    pub(crate) metadata: Value,
    pub(crate) user: Option<String>,
}

fn message_id(id: &str) -> String {
    format!("msg_{}", id.trim_start_matches("resp_"))
}

fn call_item_id(id: &str, n: usize) -> String {
    format!("fc_{}_{n}", id.trim_start_matches("resp_"))
}

fn text_part(text: &str, annotations: Value, logprobs: Value) -> Value {
    json!({"type": "output_text", "text": text, "annotations": annotations, "logprobs": logprobs})
}

/// An answer's text as an `output_text` part, with the annotations and
/// token logprobs its chat message carried.
fn answer_text_part(text: &str, p: &Passthrough) -> Value {
    let annotations = p
        .message
        .value("annotations")
        .filter(Value::is_array)
        .unwrap_or_else(|| json!([]));
    text_part(text, annotations, token_logprobs(p))
}

/// The token logprobs a chat answer (or chunk) carries, as the Responses
/// API writes them: a chat choice's `logprobs.content` entries (`token`,
/// `logprob`, `bytes`, `top_logprobs`) are an `output_text`'s `logprobs`
/// entries, in the same shape. Empty where none were sent (none asked
/// for, or a provider that gives none).
fn token_logprobs(p: &Passthrough) -> Value {
    p.choice
        .value("logprobs")
        .and_then(|mut l| l.get_mut("content").map(Value::take))
        .filter(Value::is_array)
        .unwrap_or_else(|| json!([]))
}

/// A `function_call` item; a call's `extra_content` (Gemini 3's thought
/// signature, which the next turn must send back) rides on it as on a
/// chat tool call, and comes back in on the client's copy of the item.
fn call_item(id: &str, n: usize, c: &ToolCall, status: &str) -> Value {
    let mut item = json!({"type": "function_call", "id": call_item_id(id, n), "call_id": c.id,
        "name": c.name, "arguments": c.arguments, "status": status});
    if let Some(extra) = c.extra.value(EXTRA_CONTENT) {
        item[EXTRA_CONTENT] = extra;
    }
    item
}

/// The output items of an answer: its message (text or refusal), then its
/// function calls.
fn output_items(id: &str, r: &ChatResponse) -> Vec<Value> {
    let mut parts = Vec::new();
    if let Some(t) = r.content.as_deref().filter(|t| !t.is_empty()) {
        parts.push(answer_text_part(t, &r.passthrough));
    }
    if let Some(Value::String(refusal)) = r.passthrough.message.value("refusal") {
        parts.push(json!({"type": "refusal", "refusal": refusal}));
    }
    let mut items = Vec::new();
    if !parts.is_empty() {
        items.push(
            json!({"type": "message", "id": message_id(id), "status": "completed",
            "role": "assistant", "content": parts}),
        );
    }
    for (n, c) in r.tool_calls.iter().enumerate() {
        items.push(call_item(id, n, c, "completed"));
    }
    items
}

/// A `response` object; `answer` is `None` while it is in progress.
pub(crate) fn response_object(
    id: &str,
    created: u64,
    echo: &Echo,
    model: &str,
    answer: Option<&ChatResponse>,
) -> Value {
    let (status, incomplete) = match answer.and_then(|a| a.finish_reason.as_ref()) {
        None if answer.is_none() => ("in_progress", Value::Null),
        Some(FinishReason::Length) => ("incomplete", json!({"reason": "max_output_tokens"})),
        Some(FinishReason::ContentFilter) => ("incomplete", json!({"reason": "content_filter"})),
        _ => ("completed", Value::Null),
    };
    let usage = answer
        .and_then(|a| a.usage.as_ref())
        .map_or(Value::Null, |u| {
            json!({
                "input_tokens": u.input_tokens,
                "input_tokens_details": {"cached_tokens": u.cached_input_tokens.unwrap_or(0)},
                "output_tokens": u.output_tokens,
                "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens.unwrap_or(0)},
                "total_tokens": u.input_tokens + u.output_tokens,
            })
        });
    // When it completed: now, as the object is built from the whole answer
    // (seconds, like `created_at`); none until then, or if it is incomplete.
    let completed_at = match status {
        "completed" => json!(super::super::chat::now_secs().max(created)),
        _ => Value::Null,
    };
    json!({
        "id": id,
        "object": "response",
        "created_at": created,
        "completed_at": completed_at,
        "status": status,
        "error": null,
        "incomplete_details": incomplete,
        "instructions": echo.instructions,
        "max_output_tokens": echo.max_output_tokens,
        "model": model,
        "output": answer.map_or_else(Vec::new, |a| output_items(id, a)),
        "parallel_tool_calls": echo.parallel_tool_calls,
        "previous_response_id": null,
        "reasoning": echo.reasoning,
        "store": false,
        "temperature": echo.temperature,
        "text": echo.text,
        "tool_choice": echo.tool_choice,
        "tools": echo.tools,
        "top_p": echo.top_p,
        "truncation": "disabled",
        "usage": usage,
        "user": echo.user,
        "metadata": echo.metadata,
    })
}

/// An output item being streamed.
#[derive(Debug)]
struct Open {
    output_index: usize,
    item_id: String,
}

/// Responses API events for one streamed answer.
#[derive(Debug)]
pub(crate) struct ResponsesEncoder {
    id: String,
    created: u64,
    echo: Echo,
    model: String,
    seq: u64,
    outputs: usize,
    text: Option<Open>,
    /// The logprobs of the chunk whose text comes next (a chunk's fields
    /// arrive before its deltas), for that text's delta event.
    logprobs: Option<Value>,
    /// By the chat stream's tool call index.
    calls: Vec<(u32, Open)>,
    answer: StreamAssembler,
}

impl ResponsesEncoder {
    pub(crate) fn new(id: String, created: u64, echo: Echo) -> Self {
        Self {
            id,
            created,
            echo,
            model: String::new(),
            seq: 0,
            outputs: 0,
            text: None,
            logprobs: None,
            calls: Vec::new(),
            answer: StreamAssembler::default(),
        }
    }

    fn ev(&mut self, out: &mut SseText, kind: &str, mut v: Value) {
        v["type"] = kind.into();
        v["sequence_number"] = self.seq.into();
        self.seq += 1;
        out.event(kind, &v);
    }

    fn response(&self, answer: Option<&ChatResponse>) -> Value {
        response_object(&self.id, self.created, &self.echo, &self.model, answer)
    }

    fn text_delta(&mut self, delta: String, out: &mut SseText) {
        if self.text.is_none() {
            let open = Open {
                output_index: self.outputs,
                item_id: message_id(&self.id),
            };
            self.outputs += 1;
            let item = json!({"type": "message", "id": open.item_id, "status": "in_progress",
                "role": "assistant", "content": []});
            let (idx, item_id) = (open.output_index, open.item_id.clone());
            self.text = Some(open);
            self.ev(
                out,
                "response.output_item.added",
                json!({"output_index": idx, "item": item}),
            );
            self.ev(
                out,
                "response.content_part.added",
                json!({"item_id": item_id, "output_index": idx, "content_index": 0,
                    "part": text_part("", json!([]), json!([]))}),
            );
        }
        let (idx, item_id) = self
            .text
            .as_ref()
            .map(|o| (o.output_index, o.item_id.clone()))
            .unwrap_or_default();
        let logprobs = self.logprobs.take().unwrap_or_else(|| json!([]));
        self.ev(
            out,
            "response.output_text.delta",
            json!({"item_id": item_id, "output_index": idx, "content_index": 0,
                "delta": delta, "logprobs": logprobs}),
        );
    }

    fn call_delta(
        &mut self,
        index: u32,
        id: Option<String>,
        name: Option<String>,
        args: Option<String>,
        out: &mut SseText,
    ) {
        if !self.calls.iter().any(|(i, _)| *i == index) {
            let open = Open {
                output_index: self.outputs,
                item_id: call_item_id(&self.id, self.calls.len()),
            };
            self.outputs += 1;
            let item = json!({"type": "function_call", "id": open.item_id,
                "call_id": id.unwrap_or_default(), "name": name.unwrap_or_default(),
                "arguments": "", "status": "in_progress"});
            let idx = open.output_index;
            self.calls.push((index, open));
            self.ev(
                out,
                "response.output_item.added",
                json!({"output_index": idx, "item": item}),
            );
        }
        if let Some(delta) = args.filter(|a| !a.is_empty())
            && let Some((_, open)) = self.calls.iter().find(|(i, _)| *i == index)
        {
            let v =
                json!({"item_id": open.item_id, "output_index": open.output_index, "delta": delta});
            self.ev(out, "response.function_call_arguments.delta", v);
        }
    }
}

impl Encoder for ResponsesEncoder {
    fn heading(&mut self, ev: &StreamEvent) -> bool {
        match ev {
            StreamEvent::Model(m) => self.model.clone_from(m),
            StreamEvent::Passthrough(p) if p.choice.is_empty() && p.message.is_empty() => {}
            _ => return false,
        }
        true
    }

    fn opening(&mut self, handover: &Value, out: &mut SseText) {
        let response = self.response(None);
        self.ev(
            out,
            "response.created",
            json!({"response": response, "handover": handover}),
        );
        let response = self.response(None);
        self.ev(out, "response.in_progress", json!({"response": response}));
    }

    fn event(&mut self, ev: StreamEvent, out: &mut SseText) {
        self.answer.push(ev.clone());
        match ev {
            StreamEvent::Model(m) => self.model = m,
            StreamEvent::Passthrough(p) => {
                self.logprobs = Some(token_logprobs(&p)).filter(|l| l != &json!([]));
            }
            StreamEvent::ContentDelta(t) => self.text_delta(t, out),
            StreamEvent::ToolCallDelta {
                index,
                id,
                name,
                arguments,
                ..
            } => self.call_delta(index, id, name, arguments, out),
            _ => {}
        }
    }

    fn complete(&mut self, out: &mut SseText) {
        let answer = std::mem::take(&mut self.answer).finish(&self.model, None);
        if let Some(open) = self.text.take() {
            let text = answer.content.clone().unwrap_or_default();
            let part = answer_text_part(&text, &answer.passthrough);
            let base = json!({"item_id": open.item_id, "output_index": open.output_index, "content_index": 0});
            let mut done = base.clone();
            done["text"] = text.into();
            done["logprobs"] = part["logprobs"].clone();
            self.ev(out, "response.output_text.done", done);
            let mut pdone = base;
            pdone["part"] = part.clone();
            self.ev(out, "response.content_part.done", pdone);
            let item = json!({"type": "message", "id": open.item_id, "status": "completed",
                "role": "assistant", "content": [part]});
            self.ev(
                out,
                "response.output_item.done",
                json!({"output_index": open.output_index, "item": item}),
            );
        }
        for (n, (_, open)) in std::mem::take(&mut self.calls).into_iter().enumerate() {
            let Some(call) = answer.tool_calls.get(n) else {
                continue;
            };
            let v = json!({"item_id": open.item_id, "output_index": open.output_index,
                "arguments": call.arguments, "name": call.name});
            self.ev(out, "response.function_call_arguments.done", v);
            let item = call_item(&self.id, n, call, "completed");
            self.ev(
                out,
                "response.output_item.done",
                json!({"output_index": open.output_index, "item": item}),
            );
        }
        let response = self.response(Some(&answer));
        self.ev(out, "response.completed", json!({"response": response}));
    }

    fn error(&mut self, err: &ApiError, out: &mut SseText) {
        self.ev(
            out,
            "error",
            json!({"code": err.wire_code(), "message": err.message, "param": err.param}),
        );
    }

    fn failure(e: &RouterError) -> ApiError {
        super::router_error(e)
    }
}
