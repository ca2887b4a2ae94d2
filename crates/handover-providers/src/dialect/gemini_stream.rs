//! Gemini's `streamGenerateContent?alt=sse` events as [`StreamEvent`]s.
//!
//! Every `data:` event is one whole `GenerateContentResponse` holding the
//! next piece: text (or `thought` text) parts, complete `functionCall`
//! parts, and on the last one the `finishReason` and the final
//! `usageMetadata`. There is no end marker: a stream is complete when a
//! finish reason (or a prompt block) arrived before the connection
//! closed; a stream cut before it is interrupted, never a truncated
//! success. A `{"error": ...}` event breaks the stream.

use crate::sse::Event;
use serde_json::Value;

use super::{
    Decoded, StreamDecoder,
    gemini_answer::{WireAnswer, stream_error, tool_call, usage},
};
use crate::types::{Passthrough, StreamEvent};

#[derive(Default)]
pub(crate) struct ChunkDecoder {
    model_seen: bool,
    id_seen: bool,
    next_tool: u32,
}

impl StreamDecoder for ChunkDecoder {
    fn decode(&mut self, event: &Event, out: &mut Vec<StreamEvent>) -> Decoded {
        let mut v: Value = match serde_json::from_str(event.data.trim()) {
            Ok(v) => v,
            Err(e) => return Decoded::Malformed(format!("event data is not JSON: {e}")),
        };
        if let Some(error) = v.get_mut("error").map(Value::take) {
            return Decoded::Error(stream_error(error));
        }
        let answer: WireAnswer = match serde_json::from_value(v) {
            Ok(a) => a,
            Err(e) => {
                return Decoded::Malformed(format!(
                    "event data is not a GenerateContentResponse: {e}"
                ));
            }
        };
        self.push(answer, out);
        Decoded::Data
    }
}

impl ChunkDecoder {
    fn push(&mut self, answer: WireAnswer, out: &mut Vec<StreamEvent>) {
        if !self.model_seen
            && let Some(m) = answer.model_version.as_deref().filter(|m| !m.is_empty())
        {
            self.model_seen = true;
            out.push(StreamEvent::Model(m.to_owned()));
        }
        if !self.id_seen
            && let Some(id) = answer.response_id.as_deref()
        {
            self.id_seen = true;
            let mut pass = Passthrough::default();
            pass.top.insert("id", &id.into());
            out.push(StreamEvent::Passthrough(pass));
        }
        for p in answer.parts() {
            if let Some(call) = &p.function_call {
                let index = self.next_tool;
                self.next_tool += 1;
                let c = tool_call(answer.response_id.as_deref(), index as usize, p, call);
                out.push(StreamEvent::ToolCallDelta {
                    index,
                    id: Some(c.id),
                    name: Some(c.name),
                    arguments: Some(c.arguments),
                    extra: c.extra,
                    function_extra: c.function_extra,
                });
            } else if let Some(t) = p.text.as_deref().filter(|t| !t.is_empty()) {
                out.push(if p.thought == Some(true) {
                    StreamEvent::ReasoningDelta(t.to_owned())
                } else {
                    StreamEvent::ContentDelta(t.to_owned())
                });
            }
        }
        if let Some(reason) = answer.finish(self.next_tool > 0) {
            out.push(StreamEvent::Finish { reason });
        }
        if let Some(u) = answer.usage_metadata {
            out.push(StreamEvent::Usage(usage(u)));
        }
    }
}
