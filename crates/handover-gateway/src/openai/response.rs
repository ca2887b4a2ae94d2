//! Provider-neutral answers → OpenAI JSON: whole completions, stream chunks
//! and the attempt headers.

use std::fmt::Write as _;

use axum::http::{HeaderName, HeaderValue};
use handover_providers::{Fields, Passthrough, StreamEvent, Usage};
use handover_router::route::{Attempt, AttemptResult, Skip};
use serde::Serialize;
use serde_json::Value;

use super::stream::{Encoder, SseText, json};
use crate::api_error::ApiError;

/// `x-handover-attempts`: every attempt of the call as `provider=result`,
/// in order, then every skipped provider as `provider=skipped_<reason>`, in
/// chain order (`primary=overloaded, fallback=answered`,
/// `down=skipped_breaker_open`). A failed call with neither gets no header
/// (see `chat::router_error`); an answered one always has its answer.
pub(crate) fn attempts_header(attempts: &[Attempt], skipped: &[Skip]) -> HeaderValue {
    // One string written in place (most answers name one attempt), not a
    // string per entry joined into another.
    let mut text = String::with_capacity(32 * (attempts.len() + skipped.len()));
    for a in attempts {
        let result = match a.result {
            AttemptResult::Answered => "answered",
            AttemptResult::Abandoned => "abandoned",
            AttemptResult::Failed(class) => class.as_str(),
        };
        let late = if a.late { "(late)" } else { "" };
        let sep = if text.is_empty() { "" } else { ", " };
        let _ = write!(text, "{sep}{}={result}{late}", a.provider);
    }
    for s in skipped {
        let sep = if text.is_empty() { "" } else { ", " };
        let _ = write!(text, "{sep}{}=skipped_{}", s.provider, s.reason.as_str());
    }
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("unavailable"))
}

/// A header value from a configured name (provider names are validated ASCII).
pub(crate) fn header_value(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).unwrap_or_else(|_| HeaderValue::from_static("unavailable"))
}

/// The headers of an answer: who answered (`x-handover-provider`), after
/// which attempts (`x-handover-attempts`), and the answering provider's
/// request id as `x-request-id` (what OpenAI's SDKs show as a response's
/// `_request_id`, for the provider's support), when it sent a short one.
pub(crate) fn answer_headers(
    h: &mut axum::http::HeaderMap,
    provider: &str,
    attempts: &[Attempt],
    skipped: &[Skip],
) {
    // Names made once: a `&str` name is parsed and checked on every insert.
    const PROVIDER: HeaderName = HeaderName::from_static("x-handover-provider");
    const ATTEMPTS: HeaderName = HeaderName::from_static("x-handover-attempts");
    const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
    h.insert(PROVIDER, header_value(provider));
    h.insert(ATTEMPTS, attempts_header(attempts, skipped));
    if let Some(v) = request_id(attempts) {
        h.insert(REQUEST_ID, v);
    }
}

/// The last attempt's provider request id as a header value, when it is
/// a short, non-empty one: the answering provider's, or for a failed call
/// the last provider's that refused it (what its support asks for).
pub(crate) fn request_id(attempts: &[Attempt]) -> Option<HeaderValue> {
    let id = attempts.last()?.request_id.as_deref()?;
    if id.is_empty() || id.len() > 256 {
        return None;
    }
    HeaderValue::from_str(id).ok()
}

/// Builds the `chat.completion.chunk` objects of one streamed answer: the
/// provider's chunk fields (its `id`, `system_fingerprint`, `service_tier`,
/// `logprobs`, `refusal` pieces, usage details) pass through as sent.
///
/// Each chunk is written as JSON text straight into the response body
/// ([`SseText`]), not built as a `Value` first: the fields every chunk
/// repeats are kept as text, and the rest of a chunk is a few members.
#[derive(Debug)]
pub(crate) struct Chunker {
    id: String,
    created: u64,
    model: String,
    include_usage: bool,
    /// The provider's top-level chunk fields as its latest chunk sent
    /// them, written on every chunk until it sends others.
    top: Fields,
    /// The fields of the provider's first chunk, for the opening chunk,
    /// which stands for it (a later heading chunk's fields are its own).
    first_top: Option<Fields>,
    /// Choice and delta fields of the provider's current chunk (its
    /// `logprobs`, a `refusal` piece), waiting for that chunk's delta so
    /// they leave in one chunk, as the provider sent them.
    pending: Option<Passthrough>,
    /// The fields every chunk repeats (the provider's, then `id`,
    /// `object`, `created`, `model`) as JSON members `"key":value,…`:
    /// written once, not serialized with every chunk. `None` after one of
    /// them changes; rebuilt by the next chunk.
    shared: Option<String>,
    /// The latest usage the provider reported (when the client asked for
    /// it), written once, as the last chunk before `[DONE]`: some
    /// providers (Gemini's native stream, vLLM's continuous usage) report
    /// a running total on every chunk, and clients that add up the usage
    /// chunks of a stream (LangChain does) would count it many times.
    usage: Option<Usage>,
}

/// What a chunk's `delta` holds (besides a waiting [`Passthrough`]'s
/// delta fields).
enum Delta<'a> {
    /// The opening: `{"role":"assistant","content":""}`.
    Role,
    /// Nothing of ours (a finish, or waiting fields alone).
    Empty,
    /// `content` or `reasoning_content`.
    Text(&'static str, &'a str),
    Call {
        index: u32,
        id: Option<&'a str>,
        name: Option<&'a str>,
        arguments: Option<&'a str>,
        /// The provider's other members of the call and of its
        /// `function`, written after ours.
        extra: &'a Fields,
        function_extra: &'a Fields,
    },
}

/// What follows a chunk's choices (the usage, the opening's `handover`),
/// as JSON text.
type Tail<'a> = Option<(&'static str, &'a [u8])>;

/// One JSON object being written; members are separated as they come.
struct Obj<'a> {
    buf: &'a mut Vec<u8>,
    empty: bool,
}

impl<'a> Obj<'a> {
    fn open(buf: &'a mut Vec<u8>) -> Self {
        buf.push(b'{');
        Obj { buf, empty: true }
    }

    /// Starts member `key`; the caller writes its value.
    fn key(&mut self, key: &str) -> &mut Vec<u8> {
        self.sep();
        json(self.buf, key);
        self.buf.push(b':');
        self.buf
    }

    fn member(&mut self, key: &str, v: &(impl Serialize + ?Sized)) {
        json(self.key(key), v);
    }

    /// Members already written as JSON text (`"a":1,"b":2`).
    fn members(&mut self, text: &str) {
        if !text.is_empty() {
            self.sep();
            self.buf.extend_from_slice(text.as_bytes());
        }
    }

    fn sep(&mut self) {
        if !std::mem::take(&mut self.empty) {
            self.buf.push(b',');
        }
    }

    fn close(self) {
        self.buf.push(b'}');
    }
}

impl Chunker {
    pub(crate) fn new(id: String, created: u64, include_usage: bool) -> Self {
        Self {
            id,
            created,
            model: String::new(),
            include_usage,
            top: Fields::new(),
            first_top: None,
            pending: None,
            shared: None,
            usage: None,
        }
    }

    /// The shared members, rebuilt if one of them changed.
    fn shared(&mut self) -> &str {
        let (top, id, created, model) = (&self.top, &self.id, self.created, &self.model);
        self.shared
            .get_or_insert_with(|| members_text(shared_fields(top, id, created, model)))
    }

    /// Writes one chunk with at most one choice: the shared members (or
    /// `shared_text`), the choice with `delta`, `finish` and the waiting
    /// fields `extra` (a field of the provider's wins over ours of the
    /// same name), then `tail`.
    fn write(
        out: &mut SseText,
        shared: &str,
        choice: Option<(Delta<'_>, Option<&str>, Passthrough)>,
        tail: Tail<'_>,
    ) {
        out.data_with(|buf| {
            let mut chunk = Obj::open(buf);
            chunk.members(shared);
            let choices = chunk.key("choices");
            choices.push(b'[');
            if let Some((delta, finish, extra)) = choice {
                write_choice(choices, delta, finish, &extra);
            }
            choices.push(b']');
            if let Some((k, text)) = tail {
                chunk.key(k).extend_from_slice(text);
            }
            chunk.close();
        });
    }

    fn write_chunk(
        &mut self,
        out: &mut SseText,
        delta: Delta<'_>,
        finish: Option<&str>,
        extra: Option<Passthrough>,
    ) {
        let choice = (delta, finish, extra.unwrap_or_default());
        Self::write(out, self.shared(), Some(choice), None);
    }

    /// Takes in the provider's chunk-level fields: the provider's stream
    /// passes on the whole set of a chunk when it differs from the
    /// previous chunk's (nothing when it is the same), so the chunks from
    /// here on carry exactly these; the shared text is rebuilt only then.
    fn set_top(&mut self, fields: &Fields) {
        if !fields.is_empty() && self.top != *fields {
            self.top.clone_from(fields);
            self.shared = None;
        }
    }

    fn set_model(&mut self, model: &str) {
        if self.model != model {
            model.clone_into(&mut self.model);
            self.shared = None;
        }
    }

    /// The waiting choice fields as a chunk of their own.
    fn flush(&mut self, out: &mut SseText) {
        if let Some(p) = self.pending.take() {
            self.write_chunk(out, Delta::Empty, None, Some(p));
        }
    }
}

/// `{"index":0,"delta":{…},"finish_reason":…,"logprobs":null}` with the
/// waiting fields `extra` (which win over ours of the same name).
fn write_choice(buf: &mut Vec<u8>, delta: Delta<'_>, finish: Option<&str>, extra: &Passthrough) {
    let mut choice = Obj::open(buf);
    let ours = |k: &str| !extra.choice.contains_key(k);
    if ours("index") {
        choice.member("index", &0);
    }
    if ours("delta") {
        write_delta(choice.key("delta"), delta, &extra.message);
    }
    if ours("finish_reason") {
        choice.member("finish_reason", &finish);
    }
    if ours("logprobs") {
        choice.member("logprobs", &Value::Null);
    }
    for (k, v) in extra.choice.iter() {
        choice.member(k, v);
    }
    choice.close();
}

/// The delta object: ours, then the provider's delta fields `extra`.
fn write_delta(buf: &mut Vec<u8>, delta: Delta<'_>, extra: &Fields) {
    let mut d = Obj::open(buf);
    let ours = |k: &str| !extra.contains_key(k);
    match delta {
        Delta::Role => {
            d.member("role", "assistant");
            d.member("content", "");
        }
        Delta::Empty => {}
        Delta::Text(k, t) if ours(k) => d.member(k, t),
        Delta::Text(..) => {}
        Delta::Call {
            index,
            id,
            name,
            arguments,
            extra: call_extra,
            function_extra,
        } if ours("tool_calls") => {
            let calls = d.key("tool_calls");
            calls.push(b'[');
            let mut call = Obj::open(calls);
            call.member("index", &index);
            if let Some(id) = id {
                call.member("id", id);
                call.member("type", "function");
            }
            let mut function = Obj::open(call.key("function"));
            if let Some(n) = name {
                function.member("name", n);
            }
            // A call's first delta (the one with its id) always has
            // `arguments`, as OpenAI sends it: `""` when the provider's
            // first piece had none (Anthropic, Responses), for clients
            // that append to it without a null check.
            match arguments {
                Some(a) => function.member("arguments", a),
                None if id.is_some() => function.member("arguments", ""),
                None => {}
            }
            for (k, v) in function_extra.iter() {
                if !matches!(k, "name" | "arguments") {
                    function.member(k, v);
                }
            }
            function.close();
            for (k, v) in call_extra.iter() {
                if !matches!(k, "index" | "id" | "type" | "function") {
                    call.member(k, v);
                }
            }
            call.close();
            calls.push(b']');
        }
        Delta::Call { .. } => {}
    }
    for (k, v) in extra.iter() {
        d.member(k, v);
    }
    d.close();
}

impl Encoder for Chunker {
    /// Takes in an event that comes before the opening chunk (the model,
    /// the provider's chunk fields); `false` if `ev` is not one.
    fn heading(&mut self, ev: &StreamEvent) -> bool {
        match ev {
            StreamEvent::Model(m) => self.set_model(m),
            StreamEvent::Passthrough(p) if p.choice.is_empty() && p.message.is_empty() => {
                if self.first_top.is_none() && !p.top.is_empty() {
                    self.first_top = Some(p.top.clone());
                }
                self.set_top(&p.top);
            }
            _ => return false,
        }
        true
    }

    /// The first chunk: the assistant role, plus which provider answered
    /// and after which attempts (the same facts as the response headers,
    /// which a stream that waited with keep-alives could not send).
    fn opening(&mut self, handover: &Value, out: &mut SseText) {
        // Ours wins over a provider field of the same name.
        // The first chunk's fields, under the one `id` and `created`
        // every chunk of the stream carries (Azure's first chunk has `""`
        // and `0`).
        let mut top = self.first_top.clone().unwrap_or_else(|| self.top.clone());
        for k in ["id", "created"] {
            match self.top.get(k) {
                Some(v) => top.insert_raw(k, v.to_owned()),
                None => drop(top.remove(k)),
            }
        }
        let mut fields = shared_fields(&top, &self.id, self.created, &self.model);
        fields.remove("handover");
        let choice = (Delta::Role, None, Passthrough::default());
        Self::write(
            out,
            &members_text(fields),
            Some(choice),
            Some((
                "handover",
                &serde_json::to_vec(handover).unwrap_or_default(),
            )),
        );
    }

    /// The chunks for one provider event: a chunk's choice fields wait for
    /// its delta (or finish) and join it; alone they make a chunk of their
    /// own when the next chunk's fields or the usage come first.
    fn event(&mut self, ev: StreamEvent, out: &mut SseText) {
        match ev {
            StreamEvent::Model(m) => self.set_model(&m),
            StreamEvent::Passthrough(p) => {
                self.flush(out);
                self.set_top(&p.top);
                if !p.choice.is_empty() || !p.message.is_empty() {
                    self.pending = Some(Passthrough {
                        top: Fields::new(),
                        ..p
                    });
                }
            }
            StreamEvent::ContentDelta(t) => {
                let p = self.pending.take();
                self.write_chunk(out, Delta::Text("content", &t), None, p);
            }
            StreamEvent::ReasoningDelta(t) => {
                let p = self.pending.take();
                self.write_chunk(out, Delta::Text("reasoning_content", &t), None, p);
            }
            StreamEvent::ToolCallDelta {
                index,
                id,
                name,
                arguments,
                extra,
                function_extra,
            } => {
                let p = self.pending.take();
                let call = Delta::Call {
                    index,
                    id: id.as_deref(),
                    name: name.as_deref(),
                    arguments: arguments.as_deref(),
                    extra: &extra,
                    function_extra: &function_extra,
                };
                self.write_chunk(out, call, None, p);
            }
            StreamEvent::Finish { reason } => {
                let p = self.pending.take();
                self.write_chunk(out, Delta::Empty, Some(reason.as_str()), p);
            }
            StreamEvent::Usage(u) => {
                self.flush(out);
                if self.include_usage {
                    self.usage = Some(u);
                }
            }
            _ => self.flush(out),
        }
    }

    /// The waiting fields, then the one usage chunk (the provider's
    /// latest report), then `[DONE]`.
    fn complete(&mut self, out: &mut SseText) {
        self.flush(out);
        if let Some(u) = self.usage.take() {
            let mut usage = Vec::with_capacity(128);
            u.write_openai_json(&mut usage);
            Self::write(out, self.shared(), None, Some(("usage", &usage)));
        }
        out.done();
    }

    /// An OpenAI-style error event, which the SDKs raise as `APIError`:
    /// the plain answer's body, its type, code and param included.
    fn error(&mut self, err: &ApiError, out: &mut SseText) {
        out.data(&err.body());
    }
}

/// The fields every chunk repeats (see [`Chunker::shared`]): the
/// provider's chunk-level fields, our `id` and `created` unless it sent
/// its own, and the `object` and `model` every chunk names.
fn shared_fields(top: &Fields, id: &str, created: u64, model: &str) -> Fields {
    let mut m = top.clone();
    // Members each chunk writes itself.
    m.remove("choices");
    m.remove("usage");
    if !m.contains_key("id") {
        m.insert("id", &id.into());
    }
    m.insert("object", &"chat.completion.chunk".into());
    if !m.contains_key("created") {
        m.insert("created", &created.into());
    }
    m.insert("model", &model.into());
    m
}

/// `fields` as JSON members without the braces: `"a":1,"b":2`.
fn members_text(fields: Fields) -> String {
    // Members of JSON text always serialize.
    let text = serde_json::to_string(&fields).unwrap_or_else(|_| "{}".into());
    text[1..text.len() - 1].to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn chunker() -> Chunker {
        let mut c = Chunker::new("chatcmpl-ours".into(), 7, true);
        c.set_model("m");
        c
    }

    /// The chunks written, parsed.
    fn chunks(out: &mut SseText) -> Vec<Value> {
        let text = String::from_utf8(out.take()).expect("utf-8");
        text.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let data = e.strip_prefix("data: ").expect("one data line");
                serde_json::from_str(data).unwrap_or(Value::String(data.into()))
            })
            .collect()
    }

    #[test]
    fn a_chunk_carries_the_shared_fields_and_ours_win_in_the_opening() {
        let mut c = chunker();
        let mut top = Fields::new();
        top.insert("id", &json!("chatcmpl-provider"));
        top.insert("system_fingerprint", &json!("fp_1"));
        top.insert("handover", &json!("theirs"));
        c.set_top(&top);
        let mut out = SseText::default();
        c.opening(&json!({"provider": "p", "attempts": ""}), &mut out);
        c.event(StreamEvent::ContentDelta("hi \"you\"\n".into()), &mut out);
        let got = chunks(&mut out);
        assert_eq!(
            got[0],
            json!({"id": "chatcmpl-provider", "object": "chat.completion.chunk", "created": 7,
                   "model": "m", "system_fingerprint": "fp_1",
                   "handover": {"provider": "p", "attempts": ""},
                   "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                "finish_reason": null, "logprobs": null}]})
        );
        assert_eq!(
            got[1],
            json!({"id": "chatcmpl-provider", "object": "chat.completion.chunk", "created": 7,
                   "model": "m", "system_fingerprint": "fp_1", "handover": "theirs",
                   "choices": [{"index": 0, "delta": {"content": "hi \"you\"\n"},
                                "finish_reason": null, "logprobs": null}]})
        );
    }

    #[test]
    fn a_calls_first_delta_always_has_arguments() {
        let mut c = chunker();
        let mut out = SseText::default();
        let call = |id: Option<&str>, args: Option<&str>| StreamEvent::ToolCallDelta {
            index: 0,
            id: id.map(str::to_owned),
            name: id.map(|_| "ship".to_owned()),
            arguments: args.map(str::to_owned),
            extra: Fields::new(),
            function_extra: Fields::new(),
        };
        c.event(call(Some("toolu_1"), None), &mut out);
        c.event(call(None, Some("{\"a\":1}")), &mut out);
        let got = chunks(&mut out);
        let first = &got[0]["choices"][0]["delta"]["tool_calls"][0];
        assert_eq!(
            first,
            &json!({"index": 0, "id": "toolu_1", "type": "function",
                    "function": {"name": "ship", "arguments": ""}})
        );
        let next = &got[1]["choices"][0]["delta"]["tool_calls"][0];
        assert_eq!(
            next,
            &json!({"index": 0, "function": {"arguments": "{\"a\":1}"}})
        );
    }

    #[test]
    fn a_changed_field_or_model_shows_in_the_next_chunk() {
        let mut c = chunker();
        let mut out = SseText::default();
        let finish = || StreamEvent::Finish {
            reason: handover_providers::FinishReason::Stop,
        };
        c.event(finish(), &mut out);
        assert_eq!(chunks(&mut out)[0]["id"], "chatcmpl-ours");
        let mut top = Fields::new();
        top.insert("system_fingerprint", &json!("fp_2"));
        c.event(
            StreamEvent::Passthrough(Passthrough {
                top,
                ..Passthrough::default()
            }),
            &mut out,
        );
        c.event(StreamEvent::Model("m2".into()), &mut out);
        c.event(finish(), &mut out);
        let got = chunks(&mut out);
        assert_eq!(got.len(), 1);
        assert_eq!(
            (&got[0]["system_fingerprint"], &got[0]["model"]),
            (&json!("fp_2"), &json!("m2"))
        );
        assert_eq!(got[0]["choices"][0]["finish_reason"], "stop");
    }

    #[test]
    fn waiting_fields_join_the_next_delta_or_leave_alone_and_usage_has_no_choice() {
        let mut c = chunker();
        let mut out = SseText::default();
        let fields = |refusal: &str| {
            let mut p = Passthrough::default();
            p.choice.insert("logprobs", &json!({"content": []}));
            p.message.insert("refusal", &json!(refusal));
            StreamEvent::Passthrough(p)
        };
        c.event(fields("a"), &mut out);
        c.event(
            StreamEvent::ToolCallDelta {
                index: 1,
                id: Some("call_1".into()),
                name: Some("f".into()),
                arguments: None,
                extra: Fields::new(),
                function_extra: Fields::new(),
            },
            &mut out,
        );
        c.event(fields("b"), &mut out);
        c.event(
            StreamEvent::Usage(handover_providers::Usage::default()),
            &mut out,
        );
        c.complete(&mut out);
        let got = chunks(&mut out);
        assert_eq!(
            got[0]["choices"][0],
            json!({"index": 0, "finish_reason": null, "logprobs": {"content": []},
                   "delta": {"refusal": "a", "tool_calls": [{"index": 1, "id": "call_1",
                             "type": "function", "function": {"name": "f", "arguments": ""}}]}})
        );
        assert_eq!(
            got[1]["choices"][0],
            json!({"index": 0, "finish_reason": null, "logprobs": {"content": []},
                   "delta": {"refusal": "b"}})
        );
        assert_eq!(got[2]["choices"], json!([]));
        assert_eq!(got[2]["usage"]["total_tokens"], 0);
        assert_eq!(got[3], json!("[DONE]"));
        assert_eq!(got.len(), 4);
    }
}
