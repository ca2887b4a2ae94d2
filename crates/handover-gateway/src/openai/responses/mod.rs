//! `POST /v1/responses`: the stateless subset of OpenAI's Responses API
//! that agents use, translated to the one chat request and run through the
//! same router as chat completions (budget, fallback, breakers, data
//! classes, capability filtering, stream commit point).
//!
//! Translated: `input` (a string, or `message`, `function_call` and
//! `function_call_output` items; `reasoning` items are dropped — they are
//! state of a provider we may not reach again), `instructions`, function
//! tools, `tool_choice`, `text.format` (structured outputs),
//! `text.verbosity`, `reasoning.effort`, `max_output_tokens`,
//! `temperature`, `top_p`, `parallel_tool_calls`, `top_logprobs` and
//! `include: ["message.output_text.logprobs"]` (the chat answer's token
//! logprobs become each `output_text`'s), `user`, `service_tier`,
//! `safety_identifier`, `prompt_cache_key`, `prompt_cache_retention`,
//! `truncation: "disabled"`. Handover keeps no responses: `store` is answered
//! `false`, and `store: true`, `previous_response_id`, a `conversation`,
//! `background: true` and item references are refused with 400
//! `unsupported_parameter` — send the whole input each turn. Each provider
//! is reached through its own API: an OpenAI provider configured with `api = "responses"` through its Responses endpoint (the
//! chat request translated back by its adapter), others through Chat
//! Completions or their vendor's API.

mod input;
mod output;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use handover_providers::{ChatRequest, Message};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::chat::{now_secs, start};
use crate::api_error::ApiError;
use crate::auth::Client;
use crate::body::RawBody;
use crate::state::GatewayState;
use input::{input_item, response_format, tool, tool_choice};
use output::{Echo, ResponsesEncoder, response_object};

/// A failed call as the Responses client should read it: the chat
/// answer's error, with a provider's `param` renamed to the field of
/// this request it came from (the provider saw the translated chat
/// request), or dropped where no field of this API corresponds.
pub(super) fn router_error(e: &handover_router::RouterError) -> ApiError {
    super::chat::router_error(e).renaming_relayed_param(responses_param)
}

/// The Responses name of a chat request's `param` (see [`translate`]).
fn responses_param(chat: &str) -> Option<&'static str> {
    let top = chat.split(['.', '[']).next().unwrap_or(chat);
    Some(match top {
        "max_completion_tokens" | "max_tokens" => "max_output_tokens",
        // Instructions become a system message, so an index into
        // `messages` is no index into `input`: the field only.
        "messages" => "input",
        "temperature" => "temperature",
        "top_p" => "top_p",
        "model" => "model",
        "user" => "user",
        "parallel_tool_calls" => "parallel_tool_calls",
        "service_tier" => "service_tier",
        "top_logprobs" => "top_logprobs",
        "reasoning_effort" => "reasoning.effort",
        "logprobs" => "top_logprobs",
        "tools" => "tools",
        "tool_choice" => "tool_choice",
        _ => return None,
    })
}

/// The request fields of the subset; any other field is refused by name.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResponsesRequest {
    model: String,
    input: Input,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default)]
    tools: Vec<Value>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    text: Option<Map<String, Value>>,
    #[serde(default)]
    reasoning: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "handover_providers::whole::optional")]
    max_output_tokens: Option<u32>,
    #[serde(default)]
    temperature: Option<f32>,
    #[serde(default)]
    top_p: Option<f32>,
    #[serde(default)]
    parallel_tool_calls: Option<bool>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    store: Option<bool>,
    #[serde(default)]
    previous_response_id: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    service_tier: Option<String>,
    #[serde(default, deserialize_with = "handover_providers::whole::optional")]
    top_logprobs: Option<u32>,
    #[serde(default)]
    include: Option<Vec<String>>,
    #[serde(default)]
    truncation: Option<String>,
    // Read for what it may hold (see `StreamOptions`), nothing else.
    #[serde(default)]
    #[allow(dead_code)]
    stream_options: Option<StreamOptions>,
    // Hints the chat request has under the same names: forwarded.
    #[serde(default)]
    safety_identifier: Option<String>,
    #[serde(default)]
    prompt_cache_key: Option<String>,
    #[serde(default)]
    prompt_cache_retention: Option<String>,
    // Features of stored or background responses: only their "off"
    // value (false, null) is accepted.
    #[serde(default)]
    background: Option<bool>,
    #[serde(default)]
    conversation: Option<Value>,
    #[serde(default)]
    max_tool_calls: Option<Value>,
}

/// `stream_options`: the one option there is. Obfuscation pads events
/// against length side channels on the public internet; a gateway's events
/// are not padded, whichever value is sent.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StreamOptions {
    #[serde(default)]
    #[allow(dead_code)]
    include_obfuscation: Option<bool>,
}

/// What `include` may ask for. Logprobs are returned; encrypted reasoning
/// is not, as no reasoning item is (input reasoning items are dropped
/// too, so a conversation loses nothing by it); the rest name outputs of
/// built-in tools, which a request here cannot have (only function tools
/// are accepted), or echo inputs, so there is nothing to include.
const INCLUDABLE: &[&str] = &[
    LOGPROBS,
    "reasoning.encrypted_content",
    "message.input_image.image_url",
    "file_search_call.results",
    "web_search_call.results",
    "web_search_call.action.sources",
    "code_interpreter_call.outputs",
    "computer_call_output.output.image_url",
];

const LOGPROBS: &str = "message.output_text.logprobs";

/// Whether the request asks for logprobs (`include` or `top_logprobs`),
/// refusing what would not mean what the client asked for: an `include`
/// value this gateway does not know, or `truncation: "auto"` (dropping
/// input items to fit a context, which Handover does not do: a request too
/// long for every provider fails with 400 `context_length_exceeded`).
fn options(r: &ResponsesRequest) -> Result<bool, ApiError> {
    match r.truncation.as_deref() {
        None | Some("disabled") => {}
        Some("auto") => {
            return Err(unsupported(
                "truncation",
                "only \"disabled\": Handover does not drop input items to fit a model's context; \
                 a request too long for every provider fails with context_length_exceeded",
            ));
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "invalid_field",
                "truncation",
                "truncation: expected \"disabled\" or \"auto\"",
            ));
        }
    }
    let include = r.include.as_deref().unwrap_or_default();
    if let Some((i, _)) = include
        .iter()
        .enumerate()
        .find(|(_, v)| !INCLUDABLE.contains(&v.as_str()))
    {
        return Err(unsupported(
            &format!("include[{i}]"),
            &format!("only {}", INCLUDABLE.join(", ")),
        ));
    }
    Ok(r.top_logprobs.is_some() || include.iter().any(|v| v == LOGPROBS))
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Input {
    Text(String),
    Items(Vec<Value>),
}

fn unsupported(param: &str, why: &str) -> ApiError {
    ApiError::invalid(
        "unsupported_parameter",
        param,
        format!("{param}: {why} (not supported by the Handover gateway)"),
    )
}

pub(crate) async fn create(
    State(state): State<GatewayState>,
    client: Client,
    headers: HeaderMap,
    RawBody(bytes): RawBody,
) -> Result<Response, ApiError> {
    // One typed pass for a body that reads (every field is known, and
    // serde refuses a known field given twice); any other body is read
    // the way that names its problem, a member named twice included.
    let r: ResponsesRequest = crate::fields::parse(&bytes)?;
    if r.store == Some(true) {
        return Err(unsupported(
            "store",
            "Handover keeps no responses; send store: false (or omit it) and the whole input",
        ));
    }
    if r.previous_response_id.is_some() {
        return Err(unsupported(
            "previous_response_id",
            "Handover keeps no responses; send the whole input each turn",
        ));
    }
    if r.conversation.as_ref().is_some_and(|c| !c.is_null()) {
        return Err(unsupported(
            "conversation",
            "Handover keeps no conversations; send the whole input each turn",
        ));
    }
    if r.background == Some(true) {
        return Err(unsupported(
            "background",
            "Handover runs no background responses; send background: false (or omit it)",
        ));
    }
    if r.max_tool_calls.as_ref().is_some_and(|m| !m.is_null()) {
        return Err(unsupported(
            "max_tool_calls",
            "only function tools are served, and a chat request cannot cap its tool calls",
        ));
    }
    let stream = r.stream.unwrap_or(false);
    let logprobs = options(&r)?;
    let (model, mut request, echo) = translate(r, logprobs)?;
    let task = start(&state, &client, &headers, &model, &mut request).await?;
    drop(headers); // see `start`
    let id = format!("resp_{}", task.id().simple());
    if stream {
        let encoder = ResponsesEncoder::new(id, now_secs(), echo);
        // Boxed: see `start`.
        return Ok(Box::pin(super::stream::respond(state, task, request, encoder)).await);
    }
    match super::chat::call(&state, &task, request).await? {
        Ok(c) => {
            let body =
                response_object(&id, now_secs(), &echo, &c.response.model, Some(&c.response));
            let mut resp = axum::Json(body).into_response();
            let h = resp.headers_mut();
            super::response::answer_headers(h, &c.provider, &c.attempts, &c.skipped);
            crate::task::add_remaining(h, &task);
            Ok(resp)
        }
        Err(e) => Err(router_error(&e).with_remaining(&task)),
    }
}

/// The Responses request as the one chat request, plus what the answer echoes.
fn translate(r: ResponsesRequest, logprobs: bool) -> Result<(String, ChatRequest, Echo), ApiError> {
    let mut messages = Vec::new();
    if let Some(i) = &r.instructions {
        messages.push(Message::system(i.clone()));
    }
    match r.input {
        Input::Text(t) => messages.push(Message::user(t)),
        Input::Items(items) => {
            for (i, item) in items.into_iter().enumerate() {
                input_item(i, item, &mut messages)?;
            }
        }
    }
    // Checked here, where the field is still `input`: the chat request's
    // own check would name `messages`, a field the client never sent.
    if messages.is_empty() {
        return Err(ApiError::invalid(
            "invalid_field",
            "input",
            "input: must not be empty",
        ));
    }
    let tools = r
        .tools
        .iter()
        .enumerate()
        .map(|(i, t)| tool(i, t))
        .collect::<Result<Vec<_>, _>>()?;
    let mut request = ChatRequest::new(messages).with_tools(tools);
    request.tool_choice = r.tool_choice.as_ref().map(tool_choice).transpose()?;
    request.temperature = r.temperature;
    request.top_p = r.top_p;
    request.max_completion_tokens = r.max_output_tokens;
    request.user = r.user.clone();
    let extra = &mut request.extra;
    if let Some(p) = r.parallel_tool_calls {
        extra.insert("parallel_tool_calls".into(), p.into());
    }
    for (k, v) in [
        ("service_tier", &r.service_tier),
        ("safety_identifier", &r.safety_identifier),
        ("prompt_cache_key", &r.prompt_cache_key),
        ("prompt_cache_retention", &r.prompt_cache_retention),
    ] {
        if let Some(v) = v {
            extra.insert(k.into(), v.as_str().into());
        }
    }
    if logprobs {
        extra.insert("logprobs".into(), true.into());
    }
    if let Some(n) = r.top_logprobs {
        extra.insert("top_logprobs".into(), n.into());
    }
    if let Some(effort) = r.reasoning.as_ref().and_then(|v| v.get("effort"))
        && !effort.is_null()
    {
        extra.insert("reasoning_effort".into(), effort.clone());
    }
    if let Some(text) = &r.text {
        if let Some(v) = text.get("verbosity").filter(|v| !v.is_null()) {
            extra.insert("verbosity".into(), v.clone());
        }
        if let Some(f) = text.get("format")
            && let Some(rf) = response_format(f)?
        {
            extra.insert("response_format".into(), rf);
        }
    }
    let echo = Echo {
        instructions: r.instructions.map_or(Value::Null, Value::from),
        tools: Value::Array(r.tools),
        tool_choice: r.tool_choice.unwrap_or_else(|| "auto".into()),
        text: r
            .text
            .map_or_else(|| json!({"format": {"type": "text"}}), Value::Object),
        reasoning: r
            .reasoning
            .map_or_else(|| json!({"effort": null, "summary": null}), Value::Object),
        parallel_tool_calls: r.parallel_tool_calls.unwrap_or(true),
        temperature: r.temperature,
        top_p: r.top_p,
        max_output_tokens: r.max_output_tokens,
        metadata: r.metadata.map_or_else(|| json!({}), Value::Object),
        user: r.user,
    };
    Ok((r.model, request, echo))
}
