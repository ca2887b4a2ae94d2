//! Google's Gemini API (`POST {base}/models/{model}:generateContent`, or
//! `:streamGenerateContent?alt=sse`; the key in `x-goog-api-key`),
//! translated from and to the OpenAI shape.
//!
//! Requests: system messages become `systemInstruction`; user turns
//! `user` contents, assistant turns `model` contents whose tool calls are
//! `functionCall` parts; a `tool` message becomes a `functionResponse`
//! part named after the call its `tool_call_id` answers (consecutive turns
//! of one role are merged, so the results of one model turn travel
//! together, in order). Gemini pairs calls and results by position and
//! name, not by id, so no id is sent. Answers: `functionCall` parts become
//! `tool_calls` with an id derived deterministically from the answer's
//! `responseId`, the call's position, name and arguments (`call_` + 16
//! hex digits), so the client attaches its results by that id and the next
//! request finds the call's name by it. A `functionCall` part's
//! `thoughtSignature` (Gemini 3) travels as the tool call's
//! `extra_content.google.thought_signature`, the place Google's
//! OpenAI-compatible endpoint gives it, and goes back on the part of the
//! call that carries it. Answers and errors: `gemini_answer.rs`; streams:
//! `gemini_stream.rs`.

use super::Untranslatable;
use std::time::Duration;

use http::{HeaderMap, HeaderName};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value, json};

use super::{
    BodyError, CallUrl, Dialect, StreamDecoder,
    gemini_answer::{Envelope, WireAnswer, retry_delay, thought_signature, wire_error},
    gemini_stream::ChunkDecoder,
    path_segment, secret_header,
    translate::{
        OPENAI_HINTS, call_arguments, content_blocks, data_url, invalid, is_off, sampling,
    },
};
use crate::{
    classify,
    error::{ApiFailure, ProviderError},
    request::{ChatRequest, Content, ContentPart, Message, Role, ToolChoice},
    settings::ProviderSettings,
    types::ChatResponse,
};

/// OpenAI parameters with no Gemini counterpart that change nothing a
/// caller relies on; they are dropped, as are [`OPENAI_HINTS`]. Every other unknown parameter is
/// forwarded, so Gemini refuses it by name rather than Handover silently
/// ignoring it.
const DROPPED: &[&str] = &["store", "service_tier", "metadata", "parallel_tool_calls"];

pub(crate) struct GeminiDialect {
    base_url: String,
}

impl GeminiDialect {
    pub(crate) fn new(settings: &ProviderSettings) -> Self {
        Self {
            base_url: settings.base_url.trim_end_matches('/').to_owned(),
        }
    }
}

impl Dialect for GeminiDialect {
    fn url(&self, model: &str, stream: bool) -> CallUrl {
        let model = path_segment(model.strip_prefix("models/").unwrap_or(model));
        let base = &self.base_url;
        CallUrl::PerCall(if stream {
            format!("{base}/models/{model}:streamGenerateContent?alt=sse")
        } else {
            format!("{base}/models/{model}:generateContent")
        })
    }

    fn headers(&self, key: Option<&SecretString>) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = key {
            let (name, value) = secret_header(
                HeaderName::from_static("x-goog-api-key"),
                key.expose_secret(),
            )?;
            headers.insert(name, value);
        }
        Ok(headers)
    }

    fn body(
        &self,
        req: &ChatRequest,
        _model: &str,
        _stream: bool,
    ) -> Result<Vec<u8>, Untranslatable> {
        Ok(serde_json::to_vec(&request_body(req)?)?)
    }

    fn response(
        &self,
        body: &[u8],
        requested_model: &str,
        request_id: Option<String>,
    ) -> Result<ChatResponse, BodyError> {
        let r: WireAnswer = serde_json::from_slice(body)?;
        Ok(r.into_response(requested_model, request_id))
    }

    fn decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(ChunkDecoder::default())
    }

    fn failure(
        &self,
        status: u16,
        body: &[u8],
        retry_after: Option<Duration>,
        key: Option<&SecretString>,
    ) -> ApiFailure {
        let Ok(env) = serde_json::from_slice::<Envelope>(body) else {
            return classify::api_failure(status, body, retry_after, key);
        };
        let retry_after = retry_after.or_else(|| retry_delay(&env.error));
        classify::failure_from(status, wire_error(env.error), retry_after, key)
    }
}

/// The `generateContent` body for `req` (the model is in the URL).
pub(crate) fn request_body(req: &ChatRequest) -> Result<Value, Untranslatable> {
    let mut body = Map::new();
    let (system, contents) = contents(&req.messages)?;
    body.insert("contents".into(), Value::Array(contents));
    if !system.is_empty() {
        body.insert("systemInstruction".into(), json!({"parts": system}));
    }
    if !req.tools.is_empty() {
        let decls: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                let mut d = json!({"name": t.name, "parametersJsonSchema": t.parameters});
                if let Some(desc) = &t.description {
                    d["description"] = desc.as_str().into();
                }
                d
            })
            .collect();
        body.insert("tools".into(), json!([{"functionDeclarations": decls}]));
    }
    if let Some(mode) = function_calling(req.tool_choice.as_ref())? {
        body.insert("toolConfig".into(), json!({"functionCallingConfig": mode}));
    }
    let config = generation_config(req)?;
    if !config.is_empty() {
        body.insert("generationConfig".into(), Value::Object(config));
    }
    for (k, v) in &req.extra {
        match k.as_str() {
            k if DROPPED.contains(&k) || OPENAI_HINTS.contains(&k) || is_off(k, v) => {}
            k if CONFIG.iter().any(|(o, _)| *o == k) => {}
            "response_format" | "n" => {}
            _ => {
                body.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(Value::Object(body))
}

/// OpenAI parameters that are fields of Gemini's `generationConfig`.
const CONFIG: &[(&str, &str)] = &[
    ("frequency_penalty", "frequencyPenalty"),
    ("presence_penalty", "presencePenalty"),
];

fn generation_config(req: &ChatRequest) -> Result<Map<String, Value>, Untranslatable> {
    let mut c = Map::new();
    if let Some(t) = req.temperature {
        c.insert("temperature".into(), sampling(t));
    }
    if let Some(p) = req.top_p {
        c.insert("topP".into(), sampling(p));
    }
    if let Some(max) = req.max_tokens.or(req.max_completion_tokens) {
        c.insert("maxOutputTokens".into(), max.into());
    }
    if !req.stop.is_empty() {
        c.insert("stopSequences".into(), json!(req.stop));
    }
    if let Some(seed) = req.seed {
        c.insert("seed".into(), seed.into());
    }
    for (openai, gemini) in CONFIG {
        if let Some(v) = req.extra.get(*openai).filter(|v| !v.is_null()) {
            c.insert((*gemini).into(), v.clone());
        }
    }
    match req.extra.get("n") {
        None | Some(Value::Null) => {}
        Some(n) if n == &json!(1) => {}
        Some(n) => {
            c.insert("candidateCount".into(), n.clone());
        }
    }
    let format = req.extra.get("response_format");
    match format.and_then(|f| f.get("type")).and_then(Value::as_str) {
        None | Some("text") => {}
        Some("json_object") => {
            c.insert("responseMimeType".into(), "application/json".into());
        }
        Some("json_schema") => {
            let schema = format
                .and_then(|f| f.get("json_schema"))
                .and_then(|s| s.get("schema"))
                .ok_or_else(|| invalid("response_format.json_schema.schema", "is missing"))?;
            c.insert("responseMimeType".into(), "application/json".into());
            c.insert("responseJsonSchema".into(), schema.clone());
        }
        Some(other) => {
            return Err(invalid(
                "response_format.type",
                format!("{other:?} has no Gemini equivalent"),
            ));
        }
    }
    Ok(c)
}

/// `toolConfig.functionCallingConfig` for the tool choice.
fn function_calling(choice: Option<&ToolChoice>) -> Result<Option<Value>, Untranslatable> {
    Ok(Some(match choice {
        None => return Ok(None),
        Some(ToolChoice::Auto) => json!({"mode": "AUTO"}),
        Some(ToolChoice::None) => json!({"mode": "NONE"}),
        Some(ToolChoice::Required) => json!({"mode": "ANY"}),
        Some(ToolChoice::Function(name)) => {
            json!({"mode": "ANY", "allowedFunctionNames": [name]})
        }
        Some(ToolChoice::Other(v)) => {
            return Err(invalid(
                "tool_choice",
                format!("{v} has no Gemini equivalent"),
            ));
        }
    }))
}

/// `systemInstruction` parts and the conversation, consecutive turns of
/// one role merged.
fn contents(msgs: &[Message]) -> Result<(Vec<Value>, Vec<Value>), Untranslatable> {
    let mut system = Vec::new();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let (role, parts) = match m.role {
            Role::System => {
                system.extend(parts(m.content.as_ref(), i)?);
                continue;
            }
            Role::User => ("user", parts(m.content.as_ref(), i)?),
            Role::Assistant => ("model", model_parts(m, i)?),
            Role::Tool => ("user", vec![function_response(msgs, i)?]),
        };
        if parts.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((r, prev)) if *r == role => prev.extend(parts),
            _ => turns.push((role, parts)),
        }
    }
    let turns = turns
        .into_iter()
        .map(|(role, parts)| json!({"role": role, "parts": parts}))
        .collect();
    Ok((system, turns))
}

fn model_parts(m: &Message, i: usize) -> Result<Vec<Value>, Untranslatable> {
    let mut out = parts(m.content.as_ref(), i)?;
    for (j, c) in m.tool_calls.iter().enumerate() {
        let args = call_arguments(c, i, j)?;
        let mut part = json!({"functionCall": {"name": c.name, "args": args}});
        if let Some(sig) = thought_signature(c) {
            part["thoughtSignature"] = sig.into();
        }
        out.push(part);
    }
    Ok(out)
}

/// A `tool` message as a `functionResponse` part, named after the earlier
/// assistant call with its `tool_call_id`. A JSON object result is sent as
/// the response itself; anything else as `{"result": ...}`.
fn function_response(msgs: &[Message], i: usize) -> Result<Value, Untranslatable> {
    let id = msgs[i].tool_call_id.as_deref().unwrap_or_default();
    let name = msgs[..i]
        .iter()
        .rev()
        .flat_map(|m| m.tool_calls.iter())
        .find(|c| c.id == id)
        .map(|c| c.name.clone())
        .ok_or_else(|| {
            invalid(
                format!("messages[{i}].tool_call_id"),
                format!("{id:?} answers no earlier assistant tool call"),
            )
        })?;
    let text = msgs[i]
        .content
        .as_ref()
        .map(Content::text)
        .unwrap_or_default();
    let response = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(o)) => Value::Object(o),
        Ok(other) => json!({"result": other}),
        Err(_) => json!({"result": text}),
    };
    Ok(json!({"functionResponse": {"name": name, "response": response}}))
}

/// Text and images as parts; empty text is left out.
fn parts(content: Option<&Content>, i: usize) -> Result<Vec<Value>, Untranslatable> {
    content_blocks(content, i, "Gemini", |t| json!({"text": t}), image)
}

/// An `image_url` part: a data URL as `inlineData`, an http(s) URL as
/// `fileData` (media type from the file extension, else `image/jpeg`).
fn image(p: &ContentPart) -> Option<Value> {
    let url = p.extra.get("image_url")?.get("url")?.as_str()?;
    if url.starts_with("data:") {
        let (mime, data) = data_url(url)?;
        return Some(json!({"inlineData": {"mimeType": mime, "data": data}}));
    }
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return None;
    }
    let path = url
        .split(['?', '#'])
        .next()
        .unwrap_or(url)
        .to_ascii_lowercase();
    let mime = match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("png") => "image/png",
        Some("webp") => "image/webp",
        Some("gif") => "image/gif",
        Some("heic") => "image/heic",
        _ => "image/jpeg",
    };
    Some(json!({"fileData": {"mimeType": mime, "fileUri": url}}))
}
