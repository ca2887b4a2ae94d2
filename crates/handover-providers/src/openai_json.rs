//! An answer's OpenAI objects (`chat.completion`, `usage`) written as JSON
//! text, without building them as `serde_json::Value`s first.
//!
//! Why: the gateway sends one of these per request, and building the
//! object as a `Value` (a map per level, every field moved in) to
//! serialize and drop it at once cost about a tenth of a plain request's
//! instructions. The `Value` forms ([`ChatResponse::into_openai`],
//! [`Usage::to_openai`]) are read back from this text, so the rules (which
//! of the provider's fields ours replace, which we only fill in) live here
//! once. The members of these objects are written sorted by key (one order
//! whatever the provider's); the provider's own values inside them keep the
//! order they came in.

use serde::Serialize;
use serde_json::value::RawValue;

use crate::{
    fields::Fields,
    types::{ChatResponse, Usage},
};

/// One member's value.
enum Member<'a> {
    /// The provider's, as it sent it.
    Raw(&'a RawValue),
    Str(&'a str),
    U64(u64),
    Null,
    /// Already JSON text.
    Text(Vec<u8>),
}

/// An object's members: the provider's, with ours set over them or added
/// where they are missing; written sorted by key.
struct Members<'a>(Vec<(&'a str, Member<'a>)>);

impl<'a> Members<'a> {
    fn of(provider: &'a Fields) -> Self {
        let mut members = Vec::with_capacity(provider.len() + 6);
        members.extend(provider.iter().map(|(k, v)| (k, Member::Raw(v))));
        Self(members)
    }

    /// Ours, in place of the provider's of the same name.
    fn set(&mut self, key: &'a str, m: Member<'a>) {
        self.0.retain(|(k, _)| *k != key);
        self.0.push((key, m));
    }

    /// Ours only where the provider sent none.
    fn or(&mut self, key: &'a str, m: Member<'a>) {
        if !self.0.iter().any(|(k, _)| *k == key) {
            self.0.push((key, m));
        }
    }

    fn write(mut self, out: &mut Vec<u8>) {
        self.0.sort_unstable_by(|a, b| a.0.cmp(b.0));
        out.push(b'{');
        for (i, (k, m)) in self.0.into_iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            json(out, k);
            out.push(b':');
            match m {
                Member::Raw(v) => out.extend_from_slice(v.get().as_bytes()),
                Member::Str(s) => json(out, s),
                Member::U64(n) => json(out, &n),
                Member::Null => out.extend_from_slice(b"null"),
                Member::Text(t) => out.extend_from_slice(&t),
            }
        }
        out.push(b'}');
    }
}

/// `serde_json`'s writer; writing into a `Vec` cannot fail.
fn json<T: Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    let _infallible = serde_json::to_writer(&mut *out, v);
}

/// The OpenAI `usage` object (see [`Usage::to_openai`]).
pub(crate) fn usage(u: &Usage, out: &mut Vec<u8>) {
    let mut m = Members::of(&u.extra);
    m.set("prompt_tokens", Member::U64(u.input_tokens));
    m.set("completion_tokens", Member::U64(u.output_tokens));
    m.or(
        "total_tokens",
        Member::U64(u.input_tokens.saturating_add(u.output_tokens)),
    );
    if let Some(r) = u.reasoning_tokens {
        let text = format!(r#"{{"reasoning_tokens":{r}}}"#).into_bytes();
        m.or("completion_tokens_details", Member::Text(text));
    }
    if let Some(c) = u.cached_input_tokens {
        let text = format!(r#"{{"cached_tokens":{c}}}"#).into_bytes();
        m.or("prompt_tokens_details", Member::Text(text));
    }
    m.write(out);
}

/// The OpenAI `chat.completion` object (see [`ChatResponse::into_openai`]).
pub(crate) fn completion(r: &ChatResponse, default_id: &str, default_created: u64) -> Vec<u8> {
    let p = &r.passthrough;
    let tool_calls = (!r.tool_calls.is_empty()).then(|| {
        let mut text = Vec::with_capacity(128);
        json(&mut text, &r.tool_calls);
        text
    });
    let mut message = Members::of(&p.message);
    message.or("role", Member::Str("assistant"));
    message.set(
        "content",
        r.content.as_deref().map_or(Member::Null, Member::Str),
    );
    if let Some(calls) = tool_calls {
        message.set("tool_calls", Member::Text(calls));
    }
    if let Some(reasoning) = &r.reasoning_content {
        message.set("reasoning_content", Member::Str(reasoning));
    }
    let mut text = Vec::with_capacity(256);
    message.write(&mut text);

    let mut choice = Members::of(&p.choice);
    choice.or("index", Member::U64(0));
    choice.set("message", Member::Text(text));
    // As the provider reported it: an answer that says nothing of why it
    // ended is not made into a complete one.
    let finish = r.finish_reason.as_ref().map(|f| f.as_str());
    choice.set("finish_reason", finish.map_or(Member::Null, Member::Str));
    choice.or("logprobs", Member::Null);
    let mut choices = Vec::with_capacity(512);
    choices.push(b'[');
    choice.write(&mut choices);
    choices.push(b']');

    let mut top = Members::of(&p.top);
    top.or("id", Member::Str(default_id));
    top.set("object", Member::Str("chat.completion"));
    top.or("created", Member::U64(default_created));
    top.set("model", Member::Str(&r.model));
    top.set("choices", Member::Text(choices));
    top.or("system_fingerprint", Member::Null);
    if let Some(u) = &r.usage {
        let mut text = Vec::with_capacity(128);
        usage(u, &mut text);
        top.set("usage", Member::Text(text));
    }
    let mut out = Vec::with_capacity(1024);
    top.write(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::ToolCall;
    use crate::fields::Fields;
    use crate::types::{ChatResponse, FinishReason, Passthrough, Usage};

    /// The `Value`-building code this writer replaced (stop 28), kept as
    /// the reference the text must match byte for byte.
    fn reference_usage(u: &Usage) -> Value {
        let mut v = u.extra.to_map();
        v.insert("prompt_tokens".into(), u.input_tokens.into());
        v.insert("completion_tokens".into(), u.output_tokens.into());
        v.entry("total_tokens")
            .or_insert_with(|| (u.input_tokens + u.output_tokens).into());
        if let Some(r) = u.reasoning_tokens {
            v.entry("completion_tokens_details")
                .or_insert_with(|| json!({"reasoning_tokens": r}));
        }
        if let Some(c) = u.cached_input_tokens {
            v.entry("prompt_tokens_details")
                .or_insert_with(|| json!({"cached_tokens": c}));
        }
        Value::Object(v)
    }

    fn reference(r: ChatResponse, default_id: &str, default_created: u64) -> Value {
        let (mut top, mut choice, mut message) = (
            r.passthrough.top.to_map(),
            r.passthrough.choice.to_map(),
            r.passthrough.message.to_map(),
        );
        message.entry("role").or_insert_with(|| "assistant".into());
        message.insert("content".into(), r.content.map_or(Value::Null, Value::from));
        if !r.tool_calls.is_empty() {
            message.insert(
                "tool_calls".into(),
                serde_json::to_value(&r.tool_calls).unwrap(),
            );
        }
        if let Some(x) = r.reasoning_content {
            message.insert("reasoning_content".into(), x.into());
        }
        choice.entry("index").or_insert_with(|| 0.into());
        choice.insert("message".into(), Value::Object(message));
        let finish = r.finish_reason.as_ref().map(|f| f.as_str());
        choice.insert(
            "finish_reason".into(),
            finish.map_or(Value::Null, Value::from),
        );
        choice.entry("logprobs").or_insert(Value::Null);
        top.entry("id").or_insert_with(|| default_id.into());
        top.insert("object".into(), "chat.completion".into());
        top.entry("created")
            .or_insert_with(|| default_created.into());
        top.insert("model".into(), r.model.into());
        top.insert("choices".into(), Value::Array(vec![Value::Object(choice)]));
        top.entry("system_fingerprint").or_insert(Value::Null);
        if let Some(u) = &r.usage {
            top.insert("usage".into(), reference_usage(u));
        }
        Value::Object(top)
    }

    fn map(v: Value) -> Fields {
        let Value::Object(m) = v else {
            panic!("not an object")
        };
        m.into()
    }

    fn answers() -> Vec<ChatResponse> {
        let plain = ChatResponse {
            content: Some("Hello \"there\"\n😀".into()),
            tool_calls: vec![],
            reasoning_content: None,
            finish_reason: None,
            usage: None,
            model: "gpt-4o-mini".into(),
            request_id: None,
            passthrough: Passthrough::default(),
        };
        let full = ChatResponse {
            content: None,
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
                name: "create_shipment".into(),
                arguments: r#"{"order":"A-1"}"#.into(),
                ..ToolCall::default()
            }],
            reasoning_content: Some("think".into()),
            finish_reason: Some(FinishReason::ToolCalls),
            usage: Some(Usage {
                input_tokens: 12,
                output_tokens: 30,
                reasoning_tokens: Some(7),
                cached_input_tokens: Some(4),
                extra: Fields::new(),
            }),
            model: "deepseek-reasoner".into(),
            request_id: Some("req-1".into()),
            passthrough: Passthrough {
                // The provider's own id/created win; its object/model do not.
                top: map(
                    json!({"id": "chatcmpl-provider", "created": 7, "object": "x",
                    "model": "not-ours", "service_tier": "default", "system_fingerprint": "fp",
                    "zz_vendor": {"b": [1, 2.5, null], "a": true}}),
                ),
                choice: map(json!({"index": 3, "logprobs": {"content": []}, "finish_reason": "x"})),
                message: map(
                    json!({"role": "tool-ish", "refusal": null, "content": "not ours",
                    "annotations": [{"type": "url_citation"}]}),
                ),
            },
        };
        let details_sent = ChatResponse {
            usage: Some(Usage {
                input_tokens: 1,
                output_tokens: 2,
                reasoning_tokens: Some(9),
                cached_input_tokens: Some(8),
                extra: map(json!({"total_tokens": 99,
                    "completion_tokens_details": {"reasoning_tokens": 1, "audio_tokens": 0},
                    "prompt_tokens_details": {"cached_tokens": 0}, "prompt_cache_hit_tokens": 5,
                    "prompt_tokens": 1000})),
            }),
            finish_reason: Some(FinishReason::Other("insufficient_system_resource".into())),
            ..plain.clone()
        };
        vec![plain, full, details_sent]
    }

    #[test]
    fn the_text_is_what_serializing_the_earlier_value_wrote() {
        for r in answers() {
            let text = r.openai_json("chatcmpl-default", 1_700_000_000);
            let expected = reference(r.clone(), "chatcmpl-default", 1_700_000_000);
            let written: Value = serde_json::from_slice(&text).unwrap();
            assert_eq!(written, expected);
            // Our objects' members sorted by key (the provider's own values
            // inside them keep the provider's order).
            let keys: Vec<&String> = written.as_object().unwrap().keys().collect();
            assert!(keys.is_sorted(), "{keys:?}");
            let choice = written["choices"][0].as_object().unwrap();
            assert!(choice.keys().is_sorted(), "{choice:?}");
            assert_eq!(
                r.clone().into_openai("chatcmpl-default", 1_700_000_000),
                reference(r.clone(), "chatcmpl-default", 1_700_000_000)
            );
            if let Some(u) = &r.usage {
                assert_eq!(u.to_openai(), reference_usage(u));
            }
        }
    }

    #[test]
    fn ours_replace_the_providers_fields_and_defaults_only_fill_gaps() {
        let full = answers().remove(1);
        let v = full.into_openai("chatcmpl-default", 1);
        assert_eq!(v["id"], "chatcmpl-provider");
        assert_eq!(v["created"], 7);
        assert_eq!(v["object"], "chat.completion");
        assert_eq!(v["model"], "deepseek-reasoner");
        assert_eq!(v["system_fingerprint"], "fp");
        let choice = &v["choices"][0];
        assert_eq!(choice["index"], 3);
        assert_eq!(choice["finish_reason"], "tool_calls");
        assert_eq!(choice["message"]["role"], "tool-ish");
        assert_eq!(choice["message"]["content"], Value::Null);
        assert_eq!(
            choice["message"]["tool_calls"][0]["function"]["name"],
            "create_shipment"
        );
        assert_eq!(v["usage"]["total_tokens"], 42);
        assert_eq!(
            v["usage"]["completion_tokens_details"]["reasoning_tokens"],
            7
        );
    }
}
