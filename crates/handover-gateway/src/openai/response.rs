//! Provider-neutral answers → OpenAI JSON: whole completions, stream chunks
//! and the attempt headers.

use axum::http::HeaderValue;
use axum::response::sse::Event;
use handover_providers::{Passthrough, StreamEvent};
use handover_router::route::{Attempt, AttemptResult, Skip};
use serde_json::{Map, Value, json};

use super::stream::{Encoder, data, json_text};

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

/// Builds the `chat.completion.chunk` objects of one streamed answer: the
/// provider's chunk fields (its `id`, `system_fingerprint`, `service_tier`,
/// `logprobs`, `refusal` pieces, usage details) pass through as sent.
#[derive(Debug)]
pub(crate) struct Chunker {
    pub(crate) id: String,
    pub(crate) created: u64,
    pub(crate) model: String,
    pub(crate) include_usage: bool,
    /// The provider's top-level chunk fields, repeated on every chunk.
    pub(crate) top: Map<String, Value>,
    /// Choice and delta fields of the provider's current chunk (its
    /// `logprobs`, a `refusal` piece), waiting for that chunk's delta so
    /// they leave in one chunk, as the provider sent them.
    pub(crate) pending: Option<Passthrough>,
    /// The fields every chunk repeats (the provider's, then `id`,
    /// `object`, `created`, `model`), each as its JSON text `"key":value`:
    /// written once, not cloned into and serialized with every chunk.
    /// `None` after one of them changes; rebuilt by [`Chunker::render_text`].
    pub(crate) shared: Option<Vec<(String, String)>>,
}

impl Chunker {
    fn chunk(&self, delta: Value, finish: Option<&str>, choice: Map<String, Value>) -> Value {
        let mut c = choice;
        c.insert("index".into(), 0.into());
        c.insert("delta".into(), delta);
        c.insert(
            "finish_reason".into(),
            finish.map_or(Value::Null, Value::from),
        );
        c.entry("logprobs").or_insert(Value::Null);
        // Only this chunk's own fields: the shared ones join in `render`.
        let mut v = Map::new();
        v.insert("choices".into(), json!([c]));
        Value::Object(v)
    }

    /// The SSE event for chunk `v`: the shared fields (those `v` does not
    /// set itself), then `v`'s own.
    fn render(&mut self, v: &Value) -> Event {
        Event::default().data(self.render_text(v))
    }

    fn render_text(&mut self, v: &Value) -> String {
        let Some(own) = v.as_object() else {
            return json_text(v);
        };
        let shared = self
            .shared
            .get_or_insert_with(|| shared_fields(&self.top, &self.id, self.created, &self.model));
        let rest = json_text(v);
        let mut out = String::with_capacity(rest.len() + 256);
        out.push('{');
        for (_, text) in shared.iter().filter(|(k, _)| !own.contains_key(k)) {
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(text);
        }
        // `rest` is `{...}`: its members follow the shared ones.
        let members = &rest[1..rest.len() - 1];
        if !members.is_empty() {
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(members);
        }
        out.push('}');
        out
    }

    /// Takes in the provider's chunk-level fields; the shared text is
    /// rebuilt only if one of them changed (most providers repeat the same
    /// `id`, `created` and `system_fingerprint` on every chunk).
    fn extend_top(&mut self, fields: Map<String, Value>) {
        for (k, v) in fields {
            if self.top.get(&k) != Some(&v) {
                self.top.insert(k, v);
                self.shared = None;
            }
        }
    }

    fn set_model(&mut self, model: &str) {
        if self.model != model {
            model.clone_into(&mut self.model);
            self.shared = None;
        }
    }

    /// Takes in an event that comes before the opening chunk (the model,
    /// the provider's chunk fields); `false` if `ev` is not one.
    fn take_heading(&mut self, ev: &StreamEvent) -> bool {
        match ev {
            StreamEvent::Model(m) => self.set_model(m),
            StreamEvent::Passthrough(p) if p.choice.is_empty() && p.message.is_empty() => {
                self.extend_top(p.top.clone());
            }
            _ => return false,
        }
        true
    }

    /// The chunks for one provider event: a chunk's choice fields wait for
    /// its delta (or finish) and join it; alone they make a chunk of their
    /// own when the next chunk's fields or the usage come first.
    fn chunks_for(&mut self, ev: StreamEvent) -> Vec<Value> {
        let joins = matches!(
            ev,
            StreamEvent::ContentDelta(_)
                | StreamEvent::ReasoningDelta(_)
                | StreamEvent::ToolCallDelta { .. }
                | StreamEvent::Finish { .. }
        );
        let mut out = Vec::new();
        if !joins && !matches!(ev, StreamEvent::Model(_)) {
            out.extend(self.flush());
        }
        let pending = if joins { self.pending.take() } else { None };
        if let Some(mut v) = self.chunk_for(ev) {
            if let Some(p) = pending {
                let choice = &mut v["choices"][0];
                for (k, x) in p.choice {
                    choice[k] = x;
                }
                for (k, x) in p.message {
                    choice["delta"][k] = x;
                }
            }
            out.push(v);
        }
        out
    }

    /// The waiting choice fields as a chunk of their own.
    fn flush(&mut self) -> Option<Value> {
        let p = self.pending.take()?;
        Some(self.chunk(Value::Object(p.message), None, p.choice))
    }

    /// The chunk for one provider event, if it has one.
    fn chunk_for(&mut self, ev: StreamEvent) -> Option<Value> {
        let plain = |this: &Self, delta: Value| Some(this.chunk(delta, None, Map::new()));
        match ev {
            StreamEvent::Model(m) => {
                self.set_model(&m);
                None
            }
            StreamEvent::Passthrough(p) => {
                self.extend_top(p.top);
                if !p.choice.is_empty() || !p.message.is_empty() {
                    self.pending = Some(Passthrough {
                        top: Map::new(),
                        ..p
                    });
                }
                None
            }
            StreamEvent::ContentDelta(t) => plain(self, json!({"content": t})),
            StreamEvent::ReasoningDelta(t) => plain(self, json!({"reasoning_content": t})),
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
                plain(self, json!({"tool_calls": [call]}))
            }
            StreamEvent::Finish { reason } => {
                Some(self.chunk(json!({}), Some(reason.as_str()), Map::new()))
            }
            StreamEvent::Usage(u) if self.include_usage => {
                let mut v = self.chunk(json!({}), None, Map::new());
                v["choices"] = json!([]);
                v["usage"] = u.to_openai();
                Some(v)
            }
            _ => None,
        }
    }
}

impl Encoder for Chunker {
    fn heading(&mut self, ev: &StreamEvent) -> bool {
        self.take_heading(ev)
    }

    /// The first chunk: the assistant role, plus which provider answered
    /// and after which attempts (the same facts as the response headers,
    /// which a stream that waited with keep-alives could not send).
    fn opening(&mut self, provider: &str, attempts: &[Attempt], skipped: &[Skip]) -> Vec<Event> {
        let mut v = self.chunk(
            json!({"role": "assistant", "content": ""}),
            None,
            Map::new(),
        );
        let attempts = attempts_header(attempts, skipped);
        v["handover"] = json!({"provider": provider, "attempts": attempts.to_str().unwrap_or("")});
        vec![self.render(&v)]
    }

    fn event(&mut self, ev: StreamEvent) -> Vec<Event> {
        let chunks = self.chunks_for(ev);
        chunks.iter().map(|v| self.render(v)).collect()
    }

    fn complete(&mut self) -> Vec<Event> {
        let rest = self.flush().map(|v| self.render(&v));
        rest.into_iter()
            .chain([Event::default().data("[DONE]")])
            .collect()
    }

    /// An OpenAI-style error event, which the SDKs raise as `APIError`.
    fn error(&mut self, message: String, code: &str) -> Event {
        data(
            &json!({"error": {"message": message, "type": "server_error", "param": null, "code": code}}),
        )
    }
}

/// The shared fields' JSON texts (see [`Chunker::shared`]): the provider's
/// chunk-level fields, our `id` and `created` unless it sent its own, and
/// the `object` and `model` every chunk names.
fn shared_fields(
    top: &Map<String, Value>,
    id: &str,
    created: u64,
    model: &str,
) -> Vec<(String, String)> {
    let mut m = top.clone();
    m.entry("id").or_insert_with(|| id.into());
    m.insert("object".into(), "chat.completion.chunk".into());
    m.entry("created").or_insert_with(|| created.into());
    m.insert("model".into(), model.into());
    m.into_iter()
        .map(|(k, v)| {
            let text = format!("{}:{}", json_text(&Value::String(k.clone())), json_text(&v));
            (k, text)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunker() -> Chunker {
        Chunker {
            id: "chatcmpl-ours".into(),
            created: 7,
            model: "m".into(),
            include_usage: true,
            top: Map::new(),
            pending: None,
            shared: None,
        }
    }

    fn rendered(c: &mut Chunker, v: &Value) -> Value {
        serde_json::from_str(&c.render_text(v)).expect("a chunk is JSON")
    }

    #[test]
    fn a_chunk_carries_the_shared_fields_and_its_own_win() {
        let mut c = chunker();
        let mut top = Map::new();
        top.insert("id".into(), json!("chatcmpl-provider"));
        top.insert("system_fingerprint".into(), json!("fp_1"));
        top.insert("handover".into(), json!("theirs"));
        c.extend_top(top);
        let mut v = c.chunk(json!({"content": "hi"}), None, Map::new());
        v["handover"] = json!({"provider": "p"});
        let choices = json!([{"index": 0, "delta": {"content": "hi"}, "finish_reason": null, "logprobs": null}]);
        assert_eq!(
            rendered(&mut c, &v),
            json!({"id": "chatcmpl-provider", "object": "chat.completion.chunk", "created": 7,
                   "model": "m", "system_fingerprint": "fp_1", "handover": {"provider": "p"},
                   "choices": choices})
        );
    }

    #[test]
    fn a_changed_field_or_model_shows_in_the_next_chunk() {
        let mut c = chunker();
        let v = c.chunk(json!({}), Some("stop"), Map::new());
        assert_eq!(rendered(&mut c, &v)["id"], "chatcmpl-ours");
        let mut top = Map::new();
        top.insert("system_fingerprint".into(), json!("fp_2"));
        c.extend_top(top);
        c.set_model("m2");
        let got = rendered(&mut c, &v);
        assert_eq!(
            (&got["system_fingerprint"], &got["model"]),
            (&json!("fp_2"), &json!("m2"))
        );
        assert_eq!(got["choices"][0]["finish_reason"], "stop");
    }
}
