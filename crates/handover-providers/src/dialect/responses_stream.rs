//! The Responses API's streaming events as [`StreamEvent`]s.
//!
//! `response.created` names the model and the provider's id;
//! `response.output_item.added` of type `function_call` opens a tool call
//! (its `call_id` and name) at its output index, and
//! `response.function_call_arguments.delta` carries its arguments by that
//! index; `response.output_text.delta` carries text (and, when asked, its
//! log probabilities), `response.refusal.delta` a refusal,
//! `response.reasoning_summary_text.delta` / `response.reasoning_text.delta`
//! reasoning. `response.completed` and `response.incomplete` end the
//! stream with the finish reason and usage; `response.failed` and `error`
//! break it. `response.queued` and `response.in_progress` only say the
//! provider is still at work: keep-alives, never progress. Event types
//! this release does not know (other output items, `*.done` repeats) are
//! data without events; a body that closes before the final event is cut,
//! never complete.

use std::collections::HashMap;

use crate::sse::Event;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{
    Decoded, StreamDecoder, event_json, event_type,
    responses::{WireResponse, failure, finish_reason, usage},
};
use crate::{
    fields::Fields,
    types::{Passthrough, StreamEvent},
    wire::WireError,
};

#[derive(Default)]
pub(crate) struct EventDecoder {
    /// Output index → tool call index (and whether arguments arrived).
    calls: HashMap<u64, (u32, bool)>,
    next_call: u32,
}

fn malformed(what: &str) -> Decoded {
    Decoded::Malformed(format!(
        "{what} event is not what the Responses API documents"
    ))
}

fn text<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str).filter(|t| !t.is_empty())
}

impl StreamDecoder for EventDecoder {
    fn decode(&mut self, event: &Event, out: &mut Vec<StreamEvent>) -> Decoded {
        if event.data.trim() == "[DONE]" {
            return Decoded::Done;
        }
        let v = match event_json(event) {
            Ok(v) => v,
            Err(malformed) => return malformed,
        };
        let kind = event_type(&v, event);
        match kind {
            "response.queued" | "response.in_progress" => Decoded::KeepAlive,
            "response.created" => created(&v, out),
            "response.output_item.added" => self.item_added(&v, out),
            "response.output_text.delta" => text_delta(&v, out),
            "response.refusal.delta" => {
                if let Some(d) = text(&v, "delta") {
                    let mut pass = Passthrough::default();
                    pass.message.insert("refusal", &d.into());
                    out.push(StreamEvent::Passthrough(pass));
                }
                Decoded::Data
            }
            "response.function_call_arguments.delta" => self.arguments(&v, "delta", out),
            "response.function_call_arguments.done" => self.arguments(&v, "arguments", out),
            "response.output_item.done" => self.item_done(&v, out),
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let Some(d) = text(&v, "delta") {
                    out.push(StreamEvent::ReasoningDelta(d.to_owned()));
                }
                Decoded::Data
            }
            // Summary parts read as paragraphs, as in a whole answer.
            "response.reasoning_summary_part.added" => {
                if v.get("summary_index").and_then(Value::as_u64).unwrap_or(0) > 0 {
                    out.push(StreamEvent::ReasoningDelta("\n\n".into()));
                }
                Decoded::Data
            }
            "response.completed" | "response.incomplete" => self.end(&v, out),
            "response.failed" => {
                let error = v.get("response").and_then(|r| r.get("error")).cloned();
                Decoded::Error(failure("failed".into(), error))
            }
            "error" => {
                let error = v.get("error").filter(|e| e.is_object()).cloned();
                let mut error = error.unwrap_or(v);
                if let Some(e) = error.as_object_mut() {
                    e.shift_remove("type");
                }
                Decoded::Error(WireError::from_value(error))
            }
            _ => Decoded::Data,
        }
    }
}

/// `response.created`: the model and the provider's id.
fn created(v: &Value, out: &mut Vec<StreamEvent>) -> Decoded {
    let Some(r) = v
        .get("response")
        .and_then(|r| WireResponse::deserialize(r).ok())
    else {
        return malformed("response.created");
    };
    if let Some(m) = r.model.as_deref().filter(|m| !m.is_empty()) {
        out.push(StreamEvent::Model(m.to_owned()));
    }
    let pass = r.passthrough();
    if !pass.is_empty() {
        out.push(StreamEvent::Passthrough(pass));
    }
    Decoded::Data
}

/// A piece of text, after its log probabilities (when asked for).
fn text_delta(v: &Value, out: &mut Vec<StreamEvent>) -> Decoded {
    if let Some(lp) = v
        .get("logprobs")
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
    {
        let mut pass = Passthrough::default();
        pass.choice.insert("logprobs", &json!({"content": lp}));
        out.push(StreamEvent::Passthrough(pass));
    }
    if let Some(d) = text(v, "delta") {
        out.push(StreamEvent::ContentDelta(d.to_owned()));
    }
    Decoded::Data
}

impl EventDecoder {
    /// A new output item: a function call opens a tool call.
    fn item_added(&mut self, v: &Value, out: &mut Vec<StreamEvent>) -> Decoded {
        let (Some(at), Some(item)) = (v.get("output_index").and_then(Value::as_u64), v.get("item"))
        else {
            return malformed("response.output_item.added");
        };
        if item.get("type").and_then(Value::as_str) != Some("function_call") {
            return Decoded::Data;
        }
        let index = self.next_call;
        self.next_call += 1;
        let arguments = text(item, "arguments").map(str::to_owned);
        self.calls.insert(at, (index, arguments.is_some()));
        out.push(StreamEvent::ToolCallDelta {
            index,
            id: text(item, "call_id").map(str::to_owned),
            name: text(item, "name").map(str::to_owned),
            arguments,
            extra: Fields::new(),
            function_extra: Fields::new(),
        });
        Decoded::Data
    }

    /// A finished output item: a function call's whole arguments, if none
    /// came before (or the whole call, if it was never announced).
    fn item_done(&mut self, v: &Value, out: &mut Vec<StreamEvent>) -> Decoded {
        let Some(item) = v.get("item").filter(|i| i["type"] == "function_call") else {
            return Decoded::Data;
        };
        let at = v.get("output_index").and_then(Value::as_u64);
        if at.is_some_and(|at| !self.calls.contains_key(&at)) {
            return self.item_added(v, out);
        }
        let args = json!({"output_index": v["output_index"], "arguments": item["arguments"]});
        self.arguments(&args, "arguments", out)
    }

    /// Arguments of the call at `output_index`: every `delta` piece, or the
    /// whole `arguments` of a `*.done` event when no piece came before.
    fn arguments(&mut self, v: &Value, key: &str, out: &mut Vec<StreamEvent>) -> Decoded {
        let at = v.get("output_index").and_then(Value::as_u64);
        let Some((index, got)) = at.and_then(|at| self.calls.get_mut(&at)) else {
            return Decoded::Malformed(
                "function call arguments for an output item that is not a function call".into(),
            );
        };
        if (key == "delta" || !*got)
            && let Some(piece) = text(v, key)
        {
            *got = true;
            out.push(StreamEvent::ToolCallDelta {
                index: *index,
                id: None,
                name: None,
                arguments: Some(piece.to_owned()),
                extra: Fields::new(),
                function_extra: Fields::new(),
            });
        }
        Decoded::Data
    }

    /// `response.completed` / `response.incomplete`: the finish reason and
    /// usage, then the end.
    fn end(&mut self, v: &Value, out: &mut Vec<StreamEvent>) -> Decoded {
        let Some(r) = v.get("response") else {
            return malformed("response.completed");
        };
        let status = r.get("status").and_then(Value::as_str);
        let calls = self.next_call > 0
            || r.get("output")
                .and_then(Value::as_array)
                .is_some_and(|o| o.iter().any(|i| i["type"] == "function_call"));
        match finish_reason(status, r.get("incomplete_details"), calls) {
            Ok(reason) => out.push(StreamEvent::Finish { reason }),
            Err(status) => {
                return Decoded::Error(failure(status, r.get("error").cloned()));
            }
        }
        if let Some(Value::Object(u)) = r.get("usage") {
            out.push(StreamEvent::Usage(usage(Map::clone(u))));
        }
        Decoded::Done
    }
}
