//! The OpenAI Chat Completions wire format (and DeepSeek's additions):
//! request serialisation and response / chunk / error decoding. Pure: no I/O.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, value::RawValue};

use crate::{
    dialect::reported_model,
    extra::{RawExtra, Text, keep_extra},
    fields::Fields,
    request::{ChatRequest, Role, ToolCall},
    settings::{ProviderKind, ReasoningPassback},
    types::{ChatResponse, FinishReason, Passthrough, StreamEvent, Usage},
};

/// Request body: the one request schema plus what the call sets.
#[derive(Serialize)]
struct Outgoing<'a> {
    model: &'a str,
    #[serde(flatten)]
    request: &'a ChatRequest,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// How a request is shaped for one provider kind.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub(crate) kind: ProviderKind,
    pub(crate) passback: ReasoningPassback,
    pub(crate) stream_usage: bool,
}

/// The request body for `model`, as JSON bytes. OpenAI and OpenAI-compatible
/// providers get the request as it is (but for Google's share of a tool
/// call's `extra_content`, see [`without_google_signatures`]); DeepSeek gets `user` as `user_id`,
/// `max_completion_tokens` as `max_tokens` and, on assistant tool-call turns where its passback allows, the
/// message's `reasoning_content`.
pub(crate) fn request_body(
    req: &ChatRequest,
    model: &str,
    d: Shape,
    stream: bool,
) -> Result<Vec<u8>, serde_json::Error> {
    let unsigned;
    let req = match without_google_signatures(req, d.kind) {
        Some(r) => {
            unsigned = r;
            &unsigned
        }
        None => req,
    };
    let out = Outgoing {
        model,
        request: req,
        stream,
        stream_options: (stream && d.stream_usage).then_some(StreamOptions {
            include_usage: true,
        }),
    };
    if d.kind != ProviderKind::DeepSeek {
        return serde_json::to_vec(&out);
    }
    let mut body = serde_json::to_value(&out)?;
    if let Some(obj) = body.as_object_mut() {
        if let Some(user) = obj.shift_remove("user") {
            obj.insert("user_id".into(), user);
        }
        // DeepSeek knows only `max_tokens` (which counts its reasoning too).
        if !obj.contains_key("max_tokens")
            && let Some(n) = obj.shift_remove("max_completion_tokens")
        {
            obj.insert("max_tokens".into(), n);
        }
        let passback = d.passback == ReasoningPassback::OnToolCallTurns;
        if let Some(Value::Array(messages)) = obj.get_mut("messages") {
            for (wire, m) in messages.iter_mut().zip(&req.messages) {
                let pass = passback && m.role == Role::Assistant && !m.tool_calls.is_empty();
                if let (true, Some(r), Some(w)) = (pass, &m.reasoning_content, wire.as_object_mut())
                {
                    w.insert("reasoning_content".into(), Value::from(r.as_str()));
                }
            }
        }
    }
    serde_json::to_vec(&body)
}

/// Google's part of a tool call's `extra_content` (Gemini 3's thought
/// signature) is bound to the Gemini model that made it. It goes, as
/// sent, to `openai_compatible` providers (Google's OpenAI-compatible
/// endpoint is one, or stands behind one) and natively to `gemini`; OpenAI,
/// Azure and DeepSeek are never Google, have no use for it and may refuse
/// a member they do not know, so a conversation that falls back from
/// Gemini to them goes without it. `None` when nothing is to be taken out
/// (the request is sent as it is, not copied).
fn without_google_signatures(req: &ChatRequest, kind: ProviderKind) -> Option<ChatRequest> {
    const EXTRA_CONTENT: &str = "extra_content";
    if kind == ProviderKind::OpenAiCompatible {
        return None;
    }
    let signed = |c: &ToolCall| {
        c.extra
            .value(EXTRA_CONTENT)
            .is_some_and(|v| v.get("google").is_some())
    };
    let any = req.messages.iter().flat_map(|m| &m.tool_calls).any(signed);
    if !any {
        return None;
    }
    let mut req = req.clone();
    for call in req.messages.iter_mut().flat_map(|m| &mut m.tool_calls) {
        if !signed(call) {
            continue;
        }
        let Some(Value::Object(mut content)) = call.extra.value(EXTRA_CONTENT) else {
            continue;
        };
        content.shift_remove("google");
        if content.is_empty() {
            call.extra.remove(EXTRA_CONTENT);
        } else {
            call.extra.insert(EXTRA_CONTENT, &Value::Object(content));
        }
    }
    Some(req)
}

// ---- responses ----

/// A whole answer; its other top-level keys are kept in `extra`.
pub(crate) struct WireResponse {
    model: Option<String>,
    choices: Vec<WireChoice>,
    usage: Option<WireUsage>,
    extra: Fields,
}
keep_extra!(WireResponse {
    model: Option<String>,
    choices: Vec<WireChoice>,
    usage: Option<WireUsage>,
});

/// One choice (`message` in an answer, `delta` in a chunk).
struct WireChoice {
    message: Option<WireMessageIn>,
    finish_reason: Option<String>,
    extra: Fields,
}
keep_extra!(WireChoice {
    message | "delta": Option<WireMessageIn>,
    finish_reason: Option<String>,
});

#[derive(Default)]
struct WireMessageIn {
    content: Option<String>,
    reasoning_content: Option<String>,
    tool_calls: Vec<WireToolCallIn>,
    extra: Fields,
}
keep_extra!(WireMessageIn {
    content: Option<String>,
    reasoning_content: Option<String>,
    tool_calls: Vec<WireToolCallIn>,
});

/// A tool call of a whole answer. Members other than `id` and
/// `function` (`extra_content`, vendor fields; an `index` some servers
/// add) are kept as sent; `type` is written by us.
struct WireToolCallIn {
    id: Option<String>,
    function: Option<WireFunctionIn>,
    extra: Fields,
}
keep_extra!(WireToolCallIn {
    id: Option<String>,
    function: Option<WireFunctionIn>,
});

/// A tool call's piece in a stream chunk: as [`WireToolCallIn`], with its
/// `index`.
struct WireToolCallDelta {
    index: Option<u32>,
    id: Option<String>,
    function: Option<WireFunctionIn>,
    extra: Fields,
}
keep_extra!(WireToolCallDelta {
    index: Option<u32>,
    id: Option<String>,
    function: Option<WireFunctionIn>,
});

#[derive(Default)]
struct WireFunctionIn {
    name: Option<String>,
    arguments: Option<String>,
    extra: Fields,
}
keep_extra!(WireFunctionIn {
    name: Option<String>,
    arguments: Option<String>,
});

/// The arguments of a call that takes none.
pub(crate) const NO_ARGUMENTS: &str = "{}";

/// A tool call's arguments as the provider sent them, or `{}` when it
/// sent none or only white space (a server's call of a function without
/// parameters): a client parses the text, and `""` is not JSON. As the
/// request side reads empty arguments (`translate::call_arguments`).
pub(crate) fn arguments_text(sent: Option<String>) -> String {
    match sent {
        Some(a) if any_arguments(&a) => a,
        _ => NO_ARGUMENTS.to_owned(),
    }
}

/// Whether argument text says anything (not empty, not only white space).
fn any_arguments(text: &str) -> bool {
    !text.trim().is_empty()
}

/// A call's members other than ours: `type` is always `function`, written
/// by whoever writes the call.
fn call_extra(mut extra: Fields) -> Fields {
    extra.remove("type");
    extra
}

/// A delta's members less nulls, which in a stream are no fields (as at
/// the chunk's other levels).
fn delta_extra(extra: Fields) -> Fields {
    let mut kept = Fields::new();
    for (k, v) in extra.iter().filter(|(_, v)| v.get() != "null") {
        kept.insert_raw(k, v.to_owned());
    }
    kept
}

struct WireUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
    extra: Fields,
}
keep_extra!(WireUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
});

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        let details = |outer: &str| {
            u.extra
                .get(outer)
                .and_then(|d| serde_json::from_str::<Details>(d.get()).ok())
                .unwrap_or_default()
        };
        let count = |key: &str| {
            u.extra
                .get(key)
                .and_then(|n| serde_json::from_str::<u64>(n.get()).ok())
        };
        Usage {
            input_tokens: u.prompt_tokens,
            output_tokens: u.completion_tokens,
            reasoning_tokens: details("completion_tokens_details").reasoning_tokens,
            // DeepSeek reports cache hits at the top level.
            cached_input_tokens: details("prompt_tokens_details")
                .cached_tokens
                .or_else(|| count("prompt_cache_hit_tokens")),
            extra: u.extra,
        }
    }
}

/// The counts Handover reads from a usage's `*_tokens_details` (others are
/// skipped, not built; a count of another type reads as none).
#[derive(Deserialize, Default)]
struct Details {
    #[serde(default, deserialize_with = "count_or_none")]
    reasoning_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count_or_none")]
    cached_tokens: Option<u64>,
}

fn count_or_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(Value::deserialize(d)?.as_u64())
}

/// The first choice split into what Handover reads and what it passes on.
fn split_choice(
    choices: Vec<WireChoice>,
    top: Fields,
) -> (WireMessageIn, Option<String>, Passthrough) {
    let mut pass = Passthrough {
        top,
        ..Passthrough::default()
    };
    let Some(c) = choices.into_iter().next() else {
        return (WireMessageIn::default(), None, pass);
    };
    let mut message = c.message.unwrap_or_default();
    pass.choice = c.extra;
    pass.message = std::mem::take(&mut message.extra);
    (message, c.finish_reason, pass)
}

impl WireResponse {
    /// Whether it holds a choice at all (`choices` absent, `null` or `[]`:
    /// not).
    pub(crate) fn has_choices(&self) -> bool {
        !self.choices.is_empty()
    }

    /// Converts to the neutral response.
    pub(crate) fn into_response(
        self,
        requested_model: &str,
        request_id: Option<String>,
    ) -> ChatResponse {
        let (message, finish, passthrough) = split_choice(self.choices, self.extra);
        ChatResponse {
            content: message.content,
            tool_calls: message
                .tool_calls
                .into_iter()
                .map(|c| {
                    let f = c.function.unwrap_or_default();
                    ToolCall {
                        id: c.id.unwrap_or_default(),
                        name: f.name.unwrap_or_default(),
                        arguments: arguments_text(f.arguments),
                        extra: call_extra(c.extra),
                        function_extra: f.extra,
                    }
                })
                .collect(),
            reasoning_content: message.reasoning_content,
            finish_reason: finish.as_deref().map(FinishReason::parse),
            usage: self.usage.map(Usage::from),
            model: reported_model(self.model, requested_model),
            request_id,
            passthrough,
        }
    }
}

// ---- stream chunks ----

/// One SSE data payload: a chunk, or an `{"error": ...}` object. Borrows
/// from the event's data: the keys it does not read stay JSON text
/// ([`RawExtra`]) until [`WireChunk::push_events`] decides they are news.
pub(crate) struct WireChunk<'de> {
    model: Option<Text<'de>>,
    choices: Vec<WireChunkChoice<'de>>,
    usage: Option<WireUsage>,
    /// An in-stream error: an object like the HTTP error body, or a string.
    pub(crate) error: Option<Value>,
    extra: RawExtra<'de>,
}
keep_extra!(WireChunk<'de> {
    model: Option<Text<'de>>,
    choices: Vec<WireChunkChoice<'de>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
});

struct WireChunkChoice<'de> {
    delta: Option<WireDelta<'de>>,
    finish_reason: Option<String>,
    extra: RawExtra<'de>,
}
keep_extra!(WireChunkChoice<'de> {
    delta | "message": Option<WireDelta<'de>>,
    finish_reason: Option<String>,
});

#[derive(Default)]
struct WireDelta<'de> {
    content: Option<String>,
    reasoning_content: Option<String>,
    tool_calls: Vec<WireToolCallDelta>,
    extra: RawExtra<'de>,
}
keep_extra!(WireDelta<'de> {
    content: Option<String>,
    reasoning_content: Option<String>,
    tool_calls: Vec<WireToolCallDelta>,
});

/// What one stream's chunks have said so far: whether the model was
/// named, and the chunk-level fields as last sent (their JSON text).
/// Most providers repeat the same `id`, `created` and
/// `system_fingerprint` on every chunk, so the set is passed on only when
/// it differs from the previous chunk's (a field new, changed or gone),
/// and then whole: a consumer that takes each set as the fields of the
/// chunks from there on (the gateway) writes every chunk with the fields
/// the provider gave it, and a field sent once (Azure's
/// `prompt_filter_results`) stays on its chunk.
#[derive(Default)]
pub(crate) struct ChunkHistory {
    model_seen: bool,
    top: Fields,
    calls: Calls,
}

/// A stream's tool calls as its deltas open them. OpenAI numbers every
/// tool-call delta (`index`) and sends a call's id and name once, then
/// only pieces of its arguments. Other servers differ: Google's
/// OpenAI-compatible endpoint sends each call whole, with its id and no
/// index; some repeat the id (or the name) on every delta, send the id on
/// the second delta, leave it empty, number every whole call 0, or mix
/// numbered and unnumbered deltas. Read as OpenAI's shape, any of those
/// glues two calls into one the model never made (ids and argument texts
/// concatenated) or splits one. So each delta is placed in a call of the
/// answer's own numbering (in the order the calls opened), and a call's
/// id and name are passed on once, as OpenAI sends them.
#[derive(Default)]
struct Calls {
    calls: Vec<Call>,
    /// The provider's own index of a call → its place.
    numbered: HashMap<u32, usize>,
    /// A call's id → the latest call that has it.
    by_id: HashMap<String, usize>,
    /// The call the previous delta went to.
    last: Option<usize>,
}

#[derive(Default)]
struct Call {
    id: Option<String>,
    named: bool,
    /// A piece of its arguments other than white space arrived.
    argued: bool,
}

/// Where a delta goes, and what of its id and name is new.
struct Placed {
    index: u32,
    id: Option<String>,
    name: Option<String>,
}

impl Calls {
    /// The call at `index` (as [`Calls::place`] numbered it) got arguments.
    fn argued(&mut self, index: u32) {
        if let Some(call) = self.calls.get_mut(index as usize) {
            call.argued = true;
        }
    }

    /// Before the finish: `{}` for each call that streamed no arguments, as
    /// a plain answer's [`arguments_text`] gives it (a client parses the
    /// text it assembled; `""` is not JSON).
    fn close_unargued(&mut self, out: &mut Vec<StreamEvent>) {
        for (index, call) in self.calls.iter_mut().enumerate() {
            if std::mem::replace(&mut call.argued, true) {
                continue;
            }
            out.push(StreamEvent::ToolCallDelta {
                index: u32::try_from(index).unwrap_or(u32::MAX),
                id: None,
                name: None,
                arguments: Some(NO_ARGUMENTS.to_owned()),
                extra: Fields::new(),
                function_extra: Fields::new(),
            });
        }
    }

    fn place(&mut self, given: Option<u32>, id: Option<String>, name: Option<String>) -> Placed {
        let id = id.filter(|s| !s.is_empty());
        let named = name.is_some();
        let at = match given {
            Some(i) => self.numbered(i, id.as_deref(), named),
            None => self.unnumbered(id.as_deref(), named),
        };
        let call = &mut self.calls[at];
        let id = match (&call.id, id) {
            (None, Some(id)) => {
                self.by_id.insert(id.clone(), at);
                call.id = Some(id.clone());
                Some(id)
            }
            // Repeated on a later delta: said once.
            (Some(known), Some(id)) if *known == id => None,
            (_, id) => id,
        };
        let name = name.filter(|_| !std::mem::replace(&mut call.named, true));
        self.last = Some(at);
        Placed {
            index: u32::try_from(at).unwrap_or(u32::MAX),
            id,
            name,
        }
    }

    /// A numbered delta: the call the provider numbered so, unless it
    /// names a function with another id than that call's (a server that
    /// numbers every whole call 0): a new call.
    fn numbered(&mut self, i: u32, id: Option<&str>, named: bool) -> usize {
        match self.numbered.get(&i) {
            Some(&at)
                if !(named
                    && self.calls[at].named
                    && id.is_some()
                    && self.calls[at].id.as_deref() != id) =>
            {
                at
            }
            _ => {
                let at = self.open();
                self.numbered.insert(i, at);
                at
            }
        }
    }

    /// An unnumbered delta: the call its id opened; the call the previous
    /// delta went to when it has no id (or gets its id late); a new call
    /// for a new id, or for a function named again (a call is named once).
    fn unnumbered(&mut self, id: Option<&str>, named: bool) -> usize {
        let continues = |c: &Call| !(named && c.named);
        match id {
            Some(id) => match self.by_id.get(id) {
                Some(&at) if continues(&self.calls[at]) => at,
                Some(_) => self.open(),
                None => match self.last {
                    Some(at) if !named && self.calls[at].id.is_none() => at,
                    _ => self.open(),
                },
            },
            None => match self.last {
                Some(at) if continues(&self.calls[at]) => at,
                _ => self.open(),
            },
        }
    }

    fn open(&mut self) -> usize {
        self.calls.push(Call::default());
        self.calls.len() - 1
    }
}

impl ChunkHistory {
    /// The chunk-level fields of `raw`, whole, if they differ from the
    /// previous chunk's; empty if they are the same. `object` (the
    /// chunk's type) and nulls are no fields.
    fn news(&mut self, raw: RawExtra<'_>) -> Fields {
        let field = |k: &str, v: &RawValue| k != "object" && v.get() != "null";
        let mut same = 0;
        let unchanged = raw.iter().filter(|(k, v)| field(k, v)).all(|(k, v)| {
            same += 1;
            self.top.get(k).map(RawValue::get) == Some(v.get())
        });
        if unchanged && same == self.top.len() {
            return Fields::new();
        }
        let mut now = Fields::new();
        for (k, v) in raw.into_iter().filter(|(k, v)| field(k, v)) {
            now.insert_raw(k, v.to_owned());
        }
        self.top.clone_from(&now);
        now
    }
}

/// Raw fields leaving out nulls and the key `skip` (a choice's `index`, a
/// delta's `role`: the gateway writes its own).
fn kept(raw: RawExtra<'_>, skip: &str) -> Fields {
    let mut kept = Fields::new();
    for (k, v) in raw
        .into_iter()
        .filter(|(k, v)| k != skip && v.get() != "null")
    {
        kept.insert_raw(k, v.to_owned());
    }
    kept
}

impl WireChunk<'_> {
    /// Appends this chunk's events to `out`; `history` makes the
    /// [`StreamEvent::Model`] event appear once and passes on only the
    /// chunk-level fields that changed.
    pub(crate) fn push_events(self, history: &mut ChunkHistory, out: &mut Vec<StreamEvent>) {
        if !history.model_seen
            && let Some(m) = self.model.filter(|m| !m.0.is_empty())
        {
            history.model_seen = true;
            out.push(StreamEvent::Model(m.0.into_owned()));
        }
        let top = history.news(self.extra);
        let has_choice = !self.choices.is_empty();
        let (delta, finish, choice) = match self.choices.into_iter().next() {
            Some(c) => (c.delta.unwrap_or_default(), c.finish_reason, c.extra),
            None => (WireDelta::default(), None, Vec::new()),
        };
        let pass = Passthrough {
            top,
            choice: kept(choice, "index"),
            message: kept(delta.extra, "role"),
        };
        if !pass.is_empty() {
            out.push(StreamEvent::Passthrough(pass));
        }
        if has_choice {
            if let Some(r) = delta.reasoning_content.filter(|r| !r.is_empty()) {
                out.push(StreamEvent::ReasoningDelta(r));
            }
            if let Some(c) = delta.content.filter(|c| !c.is_empty()) {
                out.push(StreamEvent::ContentDelta(c));
            }
            for tc in delta.tool_calls {
                let f = tc.function.unwrap_or_default();
                let placed = history.calls.place(tc.index, tc.id, f.name);
                if f.arguments.as_deref().is_some_and(any_arguments) {
                    history.calls.argued(placed.index);
                }
                out.push(StreamEvent::ToolCallDelta {
                    index: placed.index,
                    id: placed.id,
                    name: placed.name,
                    arguments: f.arguments,
                    extra: delta_extra(call_extra(tc.extra)),
                    function_extra: delta_extra(f.extra),
                });
            }
            if let Some(reason) = finish {
                history.calls.close_unargued(out);
                out.push(StreamEvent::Finish {
                    reason: FinishReason::parse(&reason),
                });
            }
        }
        if let Some(u) = self.usage {
            out.push(StreamEvent::Usage(u.into()));
        }
    }
}

// ---- errors ----

/// `{"error": {...}}` as OpenAI and DeepSeek send it.
#[derive(Deserialize)]
pub(crate) struct WireErrorEnvelope {
    pub(crate) error: WireError,
}

/// The error object. `code` is a string at OpenAI, sometimes a number elsewhere.
#[derive(Deserialize, Default)]
pub(crate) struct WireError {
    #[serde(default)]
    pub(crate) message: Option<String>,
    #[serde(default)]
    pub(crate) r#type: Option<String>,
    /// The code as text (a number becomes its decimal form); kept as text
    /// when read, which also keeps this error small.
    #[serde(default, deserialize_with = "code_text")]
    pub(crate) code: Option<String>,
    /// The request parameter the provider blames (OpenAI's `param`). Read
    /// as any value and kept only as text, so an odd one cannot make the
    /// whole error unreadable.
    #[serde(default, deserialize_with = "text_or_none")]
    pub(crate) param: Option<String>,
}

/// A code: text as is, a number in its decimal form, anything else none.
fn code_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => Some(s),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    })
}

/// A value kept only if it is non-empty text.
fn text_or_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) if !s.is_empty() => Some(s),
        _ => None,
    })
}

impl WireError {
    /// Reads an error value that may be an object or a bare string.
    pub(crate) fn from_value(v: Value) -> Self {
        match v {
            Value::String(message) => WireError {
                message: Some(message),
                ..WireError::default()
            },
            other => serde_json::from_value(other).unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(history: &mut ChunkHistory, data: &str) -> Vec<StreamEvent> {
        let chunk: WireChunk<'_> = serde_json::from_str(data).expect("a chunk");
        let mut out = Vec::new();
        chunk.push_events(history, &mut out);
        out
    }

    fn top(ev: &StreamEvent) -> Value {
        match ev {
            StreamEvent::Passthrough(p) => Value::Object(p.top.to_map()),
            other => panic!("not a passthrough: {other:?}"),
        }
    }

    #[test]
    fn chunk_fields_pass_on_whole_and_again_only_when_they_change() {
        let mut h = ChunkHistory::default();
        let chunk = |fp: &str, text: &str| {
            format!(
                r#"{{"id":"c-1","object":"chat.completion.chunk","created":7,"model":"m","system_fingerprint":{fp},"choices":[{{"index":0,"delta":{{"role":"assistant","content":"{text}"}},"logprobs":null,"finish_reason":null}}]}}"#
            )
        };
        let first = events(&mut h, &chunk(r#""fp_1""#, "a"));
        assert_eq!(first[0], StreamEvent::Model("m".into()));
        assert_eq!(
            top(&first[1]),
            serde_json::json!({"id": "c-1", "created": 7, "system_fingerprint": "fp_1"})
        );
        assert_eq!(first[2], StreamEvent::ContentDelta("a".into()));
        assert_eq!(first.len(), 3);
        // The same fields again: only the delta.
        let same = events(&mut h, &chunk(r#""fp_1""#, "b"));
        assert_eq!(same, [StreamEvent::ContentDelta("b".into())]);
        // A changed field: the whole set again.
        let changed = events(&mut h, &chunk(r#""fp_2""#, "c"));
        assert_eq!(
            top(&changed[0]),
            serde_json::json!({"id": "c-1", "created": 7, "system_fingerprint": "fp_2"})
        );
        // A field gone (null is no field): the set without it, so a field
        // sent on one chunk is not carried onto the next.
        let gone = events(&mut h, &chunk("null", "d"));
        assert_eq!(
            top(&gone[0]),
            serde_json::json!({"id": "c-1", "created": 7})
        );
        let again = events(&mut h, &chunk("null", "e"));
        assert_eq!(again, [StreamEvent::ContentDelta("e".into())]);
    }

    /// `(index, id, name)` of each tool-call delta of a stream of `deltas`
    /// (`(index, id, name, arguments)`, one chunk each).
    #[allow(clippy::type_complexity)]
    fn placed(
        deltas: &[(Option<u32>, Option<&str>, Option<&str>, &str)],
    ) -> Vec<(u32, Option<String>, Option<String>)> {
        let mut h = ChunkHistory::default();
        let mut out = Vec::new();
        for (index, id, name, args) in deltas {
            let mut call = serde_json::json!({"function": {"arguments": args}});
            if let Some(i) = index {
                call["index"] = (*i).into();
            }
            if let Some(id) = id {
                call["id"] = (*id).into();
            }
            if let Some(n) = name {
                call["function"]["name"] = (*n).into();
            }
            let chunk =
                serde_json::json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]});
            for ev in events(&mut h, &chunk.to_string()) {
                if let StreamEvent::ToolCallDelta {
                    index, id, name, ..
                } = ev
                {
                    out.push((index, id, name));
                }
            }
        }
        out
    }

    fn p(
        index: u32,
        id: Option<&str>,
        name: Option<&str>,
    ) -> (u32, Option<String>, Option<String>) {
        (index, id.map(str::to_owned), name.map(str::to_owned))
    }

    #[test]
    fn tool_call_deltas_are_placed_in_the_calls_they_belong_to() {
        let f = Some("f");
        // OpenAI: numbered, id and name once.
        assert_eq!(
            placed(&[
                (Some(0), Some("a"), f, "{"),
                (Some(0), None, None, "}"),
                (Some(1), Some("b"), f, "{}")
            ]),
            [p(0, Some("a"), f), p(0, None, None), p(1, Some("b"), f)]
        );
        // Gemini's OpenAI-compatible endpoint: whole calls, no index.
        assert_eq!(
            placed(&[(None, Some("a"), f, "{}"), (None, Some("b"), f, "{}")]),
            [p(0, Some("a"), f), p(1, Some("b"), f)]
        );
        // The id repeated on every continuation: said once.
        assert_eq!(
            placed(&[(None, Some("a"), f, "{"), (None, Some("a"), None, "}")]),
            [p(0, Some("a"), f), p(0, None, None)]
        );
        // No id: continues the call before, unless it names a function again.
        assert_eq!(
            placed(&[
                (None, None, f, "{"),
                (None, None, None, "}"),
                (None, Some(""), f, "{}")
            ]),
            [p(0, None, f), p(0, None, None), p(1, None, f)]
        );
        // One id for two whole calls, or an old id with a new name: two calls.
        assert_eq!(
            placed(&[
                (None, Some("a"), f, "{}"),
                (None, Some("a"), Some("g"), "{}")
            ]),
            [p(0, Some("a"), f), p(1, Some("a"), Some("g"))]
        );
        // The id on the second delta: one call.
        assert_eq!(
            placed(&[(None, None, f, "{"), (None, Some("a"), None, "}")]),
            [p(0, None, f), p(0, Some("a"), None)]
        );
        // Numbered and unnumbered mixed: numbers never collide.
        assert_eq!(
            placed(&[
                (Some(0), Some("a"), f, "{}"),
                (None, Some("b"), f, "{}"),
                (Some(1), Some("c"), f, "{}")
            ]),
            [p(0, Some("a"), f), p(1, Some("b"), f), p(2, Some("c"), f)]
        );
        assert_eq!(
            placed(&[(None, Some("b"), f, "{}"), (Some(0), Some("c"), f, "{}")]),
            [p(0, Some("b"), f), p(1, Some("c"), f)]
        );
        // Every whole call numbered 0, each with its own id: two calls.
        assert_eq!(
            placed(&[(Some(0), Some("a"), f, "{}"), (Some(0), Some("b"), f, "{}")]),
            [p(0, Some("a"), f), p(1, Some("b"), f)]
        );
    }

    #[test]
    fn a_tool_calls_other_members_are_kept_in_an_answer_and_in_its_deltas() {
        let call = r#"{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{}","x_fn":1},"extra_content":{"google":{"thought_signature":"S"}},"x_null":null}"#;
        let answer = format!(
            r#"{{"choices":[{{"index":0,"message":{{"role":"assistant","tool_calls":[{call}]}},"finish_reason":"tool_calls"}}]}}"#
        );
        let r: WireResponse = serde_json::from_str(&answer).unwrap();
        let c = &r.into_response("m", None).tool_calls[0];
        let keys = |f: &Fields| f.iter().map(|(k, _)| k.to_owned()).collect::<Vec<_>>();
        // A whole answer's call: every member but ours, as sent (the index
        // some servers add, nulls).
        assert_eq!(keys(&c.extra), ["index", "extra_content", "x_null"]);
        assert_eq!(keys(&c.function_extra), ["x_fn"]);
        assert_eq!(
            c.extra.get("extra_content").map(RawValue::get),
            Some(r#"{"google":{"thought_signature":"S"}}"#)
        );
        // A delta: the index is the stream's numbering, and a null is no
        // field.
        let chunk = format!(r#"{{"choices":[{{"index":0,"delta":{{"tool_calls":[{call}]}}}}]}}"#);
        let evs = events(&mut ChunkHistory::default(), &chunk);
        let StreamEvent::ToolCallDelta {
            extra,
            function_extra,
            ..
        } = &evs[0]
        else {
            panic!("{evs:?}")
        };
        assert_eq!(keys(extra), ["extra_content"]);
        assert_eq!(keys(function_extra), ["x_fn"]);
    }

    #[test]
    fn googles_signature_goes_only_where_google_may_answer() {
        let call: ToolCall = serde_json::from_value(serde_json::json!({
            "id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"},
            "extra_content": {"google": {"thought_signature": "S"}, "other": 1}, "x": 2}))
        .unwrap();
        let only_google = ToolCall {
            extra: Fields::from(
                serde_json::json!({"extra_content": {"google": {"thought_signature": "T"}}})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
            ..ToolCall::new("c2", "g", "{}")
        };
        let req = ChatRequest::new(vec![
            crate::request::Message::user("u"),
            crate::request::Message::assistant_tool_calls(None, vec![call, only_google]),
        ]);
        let sent = |kind| {
            let shape = Shape {
                kind,
                passback: ReasoningPassback::Never,
                stream_usage: false,
            };
            let body: Value =
                serde_json::from_slice(&request_body(&req, "m", shape, false).unwrap()).unwrap();
            body["messages"][1]["tool_calls"].clone()
        };
        let as_sent = serde_json::to_value(&req.messages[1].tool_calls).unwrap();
        assert_eq!(sent(ProviderKind::OpenAiCompatible), as_sent);
        for kind in [
            ProviderKind::OpenAi,
            ProviderKind::AzureOpenAi,
            ProviderKind::DeepSeek,
        ] {
            let calls = sent(kind);
            assert_eq!(calls[0]["extra_content"], serde_json::json!({"other": 1}));
            assert_eq!(calls[0]["x"], 2);
            assert!(calls[1].get("extra_content").is_none(), "{calls}");
            assert_eq!(calls[1]["function"]["name"], "g");
        }
    }

    #[test]
    fn choice_and_delta_fields_pass_on_every_chunk_and_escaped_keys_read_as_any() {
        let mut h = ChunkHistory::default();
        let data = r#"{"\u0069d":"c-1","choices":[{"index":0,"delta":{"role":"assistant","refusal":"no","cont\u0065nt":"x"},"logprobs":{"content":[]}}]}"#;
        for _ in 0..2 {
            let evs = events(&mut h, data);
            let StreamEvent::Passthrough(p) = &evs[0] else {
                panic!("{evs:?}")
            };
            assert_eq!(
                Value::Object(p.choice.to_map()),
                serde_json::json!({"logprobs": {"content": []}})
            );
            assert_eq!(
                Value::Object(p.message.to_map()),
                serde_json::json!({"refusal": "no"})
            );
            assert_eq!(evs.last(), Some(&StreamEvent::ContentDelta("x".into())));
        }
        // The escaped `id` was read as `id`, and passed on once.
        let evs = events(&mut h, data);
        let StreamEvent::Passthrough(p) = &evs[0] else {
            panic!("{evs:?}")
        };
        assert!(p.top.is_empty(), "{:?}", p.top);
    }
}
