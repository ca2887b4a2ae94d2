//! Anthropic's streaming events as [`StreamEvent`]s.
//!
//! `message_start` names the model (and the input usage); a
//! `content_block_start` of type `tool_use` opens a tool call (its id and
//! name), `content_block_delta` carries `text_delta`, `thinking_delta` or
//! `input_json_delta` pieces for the block at its index; `message_delta`
//! carries the stop reason and the output usage; `message_stop` ends the
//! stream. `ping` is a keep-alive, never progress. An `error` event (e.g.
//! `overloaded_error` after some text) breaks the stream. Event types this
//! release does not know are skipped, as Anthropic asks clients to do.

use std::collections::HashMap;

use crate::sse::Event;
use serde_json::{Map, Value};

use super::{
    Decoded, StreamDecoder,
    anthropic::{finish_reason, usage},
    event_json, event_type,
};
use crate::{
    fields::Fields,
    types::{Passthrough, StreamEvent},
    wire::WireError,
};

#[derive(Default)]
pub(crate) struct MessageDecoder {
    /// Usage from `message_start` (input side), completed by `message_delta`.
    usage: Map<String, Value>,
    /// Content block index → tool call index (and whether it got arguments).
    tools: HashMap<u64, (u32, bool)>,
    next_tool: u32,
}

impl StreamDecoder for MessageDecoder {
    fn decode(&mut self, event: &Event, out: &mut Vec<StreamEvent>) -> Decoded {
        let v = match event_json(event) {
            Ok(v) => v,
            Err(malformed) => return malformed,
        };
        let kind = event_type(&v, event);
        match kind {
            "ping" => Decoded::KeepAlive,
            "message_stop" => Decoded::Done,
            "error" => Decoded::Error(WireError::from_value(
                v.get("error").cloned().unwrap_or(v.clone()),
            )),
            "message_start" => self.start(&v, out),
            "content_block_start" => self.block_start(&v, out),
            "content_block_delta" => self.block_delta(&v, out),
            "content_block_stop" => self.block_stop(&v, out),
            "message_delta" => self.message_delta(&v, out),
            _ => Decoded::Data,
        }
    }
}

fn index(v: &Value) -> Option<u64> {
    v.get("index").and_then(Value::as_u64)
}

/// A string member that carries something (an empty piece is no event).
fn nonempty<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|t| !t.is_empty())
}

/// The `text` or `thinking` member of a block start or a delta, as the
/// content or reasoning event it stands for.
fn prose(v: &Value, key: &str, out: &mut Vec<StreamEvent>) {
    if let Some(t) = nonempty(v, key) {
        out.push(if key == "thinking" {
            StreamEvent::ReasoningDelta(t.to_owned())
        } else {
            StreamEvent::ContentDelta(t.to_owned())
        });
    }
}

fn malformed(what: &str) -> Decoded {
    Decoded::Malformed(format!(
        "{what} event is not what the Messages API documents"
    ))
}

impl MessageDecoder {
    fn start(&mut self, v: &Value, out: &mut Vec<StreamEvent>) -> Decoded {
        let Some(m) = v.get("message") else {
            return malformed("message_start");
        };
        if let Some(model) = m
            .get("model")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
        {
            out.push(StreamEvent::Model(model.to_owned()));
        }
        if let Some(id) = m.get("id").and_then(Value::as_str) {
            let mut pass = Passthrough::default();
            pass.top.insert("id", &id.into());
            out.push(StreamEvent::Passthrough(pass));
        }
        if let Some(Value::Object(u)) = m.get("usage") {
            self.usage = u.clone();
        }
        Decoded::Data
    }

    fn block_start(&mut self, v: &Value, out: &mut Vec<StreamEvent>) -> Decoded {
        let (Some(i), Some(block)) = (index(v), v.get("content_block")) else {
            return malformed("content_block_start");
        };
        match block.get("type").and_then(Value::as_str) {
            Some("tool_use") => {
                let t = self.next_tool;
                self.next_tool += 1;
                self.tools.insert(i, (t, false));
                out.push(StreamEvent::ToolCallDelta {
                    index: t,
                    id: nonempty(block, "id").map(str::to_owned),
                    name: nonempty(block, "name").map(str::to_owned),
                    arguments: None,
                    extra: Fields::new(),
                    function_extra: Fields::new(),
                });
            }
            Some("text") => prose(block, "text", out),
            Some("thinking") => prose(block, "thinking", out),
            _ => {}
        }
        Decoded::Data
    }

    fn block_delta(&mut self, v: &Value, out: &mut Vec<StreamEvent>) -> Decoded {
        let (Some(i), Some(delta)) = (index(v), v.get("delta")) else {
            return malformed("content_block_delta");
        };
        match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => prose(delta, "text", out),
            Some("thinking_delta") => prose(delta, "thinking", out),
            Some("input_json_delta") => {
                let Some((t, got)) = self.tools.get_mut(&i) else {
                    return Decoded::Malformed(
                        "input_json_delta for a content block that is not a tool call".into(),
                    );
                };
                if let Some(piece) = nonempty(delta, "partial_json") {
                    *got = true;
                    out.push(StreamEvent::ToolCallDelta {
                        index: *t,
                        id: None,
                        name: None,
                        arguments: Some(piece.to_owned()),
                        extra: Fields::new(),
                        function_extra: Fields::new(),
                    });
                }
            }
            _ => {}
        }
        Decoded::Data
    }

    /// A tool call that streamed no arguments takes no arguments: `{}`.
    fn block_stop(&mut self, v: &Value, out: &mut Vec<StreamEvent>) -> Decoded {
        if let Some((t, false)) = index(v).and_then(|i| self.tools.get(&i)).copied() {
            out.push(StreamEvent::ToolCallDelta {
                index: t,
                id: None,
                name: None,
                arguments: Some(crate::wire::NO_ARGUMENTS.into()),
                extra: Fields::new(),
                function_extra: Fields::new(),
            });
        }
        Decoded::Data
    }

    fn message_delta(&mut self, v: &Value, out: &mut Vec<StreamEvent>) -> Decoded {
        if let Some(Value::Object(u)) = v.get("usage") {
            for (k, x) in u {
                if !x.is_null() {
                    self.usage.insert(k.clone(), x.clone());
                }
            }
        }
        let stop = v
            .get("delta")
            .and_then(|d| d.get("stop_reason"))
            .and_then(Value::as_str);
        if let Some(stop) = stop {
            out.push(StreamEvent::Finish {
                reason: finish_reason(stop),
            });
        }
        out.push(StreamEvent::Usage(usage(self.usage.clone())));
        Decoded::Data
    }
}
