//! OpenAI chat request JSON → [`ChatRequest`]. Parameters the gateway cannot
//! honour are refused by name rather than silently dropped: a client asking
//! for JSON mode or several choices must not get something else.

use handover_providers::{ChatRequest, Message, Role, Tool, ToolCall, ToolChoice};
use serde::Deserialize;
use serde_json::Value;

use crate::api_error::ApiError;
use crate::body::from_value;

/// Top-level parameters the gateway understands.
const SUPPORTED: &[&str] = &[
    "model",
    "messages",
    "stream",
    "stream_options",
    "tools",
    "tool_choice",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "seed",
    "user",
    "n",
    "parallel_tool_calls",
    "logprobs",
];

/// A parsed chat request.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub(crate) model: String,
    pub(crate) stream: bool,
    pub(crate) include_usage: bool,
    pub(crate) request: ChatRequest,
}

#[derive(Deserialize)]
struct WireRequest {
    model: String,
    messages: Vec<WireMessage>,
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
    tools: Option<Vec<WireTool>>,
    tool_choice: Option<WireToolChoice>,
    temperature: Option<f32>,
    top_p: Option<f32>,
    max_tokens: Option<u32>,
    max_completion_tokens: Option<u32>,
    stop: Option<Stop>,
    seed: Option<i64>,
    user: Option<String>,
    n: Option<u32>,
    parallel_tool_calls: Option<bool>,
    logprobs: Option<bool>,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Stop {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum WireRole {
    System,
    Developer,
    User,
    Assistant,
    Tool,
}

#[derive(Deserialize)]
struct WireMessage {
    role: WireRole,
    content: Option<Content>,
    tool_calls: Option<Vec<WireToolCall>>,
    tool_call_id: Option<String>,
    reasoning_content: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
}

#[derive(Deserialize)]
struct WireToolCall {
    id: String,
    function: WireFunctionCall,
}

#[derive(Deserialize)]
struct WireFunctionCall {
    name: String,
    arguments: String,
}

#[derive(Deserialize)]
struct WireTool {
    #[serde(rename = "type")]
    kind: String,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    description: Option<String>,
    parameters: Option<Value>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum WireToolChoice {
    Mode(String),
    Named { function: NamedFunction },
}

#[derive(Deserialize)]
struct NamedFunction {
    name: String,
}

fn unsupported(param: &str, why: &str) -> ApiError {
    ApiError::invalid(
        "unsupported_parameter",
        param,
        format!("{param}: {why} (not supported by the Handover gateway)"),
    )
}

/// Parses an OpenAI chat request body.
pub(crate) fn parse(body: Value) -> Result<Parsed, ApiError> {
    let Some(obj) = body.as_object() else {
        return Err(ApiError::invalid(
            "invalid_field",
            "body",
            "the body must be a JSON object",
        ));
    };
    if let Some(key) = obj.keys().find(|k| !SUPPORTED.contains(&k.as_str())) {
        return Err(unsupported(key, "unknown or unsupported parameter"));
    }
    let w: WireRequest = from_value(body)?;
    if w.model.is_empty() {
        return Err(ApiError::invalid(
            "invalid_field",
            "model",
            "model: must not be empty",
        ));
    }
    if w.n.is_some_and(|n| n != 1) {
        return Err(unsupported("n", "only one choice per request"));
    }
    if w.parallel_tool_calls == Some(false) {
        return Err(unsupported(
            "parallel_tool_calls",
            "false cannot be guaranteed",
        ));
    }
    if w.logprobs == Some(true) {
        return Err(unsupported(
            "logprobs",
            "log probabilities are not returned",
        ));
    }
    let messages = w
        .messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| message(i, m))
        .collect::<Result<Vec<_>, _>>()?;
    let tools = w
        .tools
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            if t.kind != "function" {
                return Err(unsupported(
                    &format!("tools[{i}].type"),
                    "only \"function\" tools",
                ));
            }
            Ok(Tool {
                name: t.function.name,
                description: t.function.description,
                parameters: t
                    .function
                    .parameters
                    .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let tool_choice = match w.tool_choice {
        None => None,
        Some(WireToolChoice::Mode(m)) => Some(match m.as_str() {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            other => {
                return Err(ApiError::invalid(
                    "invalid_field",
                    "tool_choice",
                    format!(
                        "tool_choice: unknown mode {other:?} (expected auto, none or required)"
                    ),
                ));
            }
        }),
        Some(WireToolChoice::Named { function }) => Some(ToolChoice::Function(function.name)),
    };
    let request = ChatRequest {
        messages,
        tools,
        tool_choice,
        temperature: w.temperature,
        top_p: w.top_p,
        max_tokens: w.max_completion_tokens.or(w.max_tokens),
        stop: match w.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s],
            Some(Stop::Many(v)) => v,
        },
        seed: w.seed,
        data_class: None,
        user: w.user,
    };
    Ok(Parsed {
        model: w.model,
        stream: w.stream.unwrap_or(false),
        include_usage: w.stream_options.is_some_and(|o| o.include_usage),
        request,
    })
}

fn message(i: usize, m: WireMessage) -> Result<Message, ApiError> {
    let content = match m.content {
        None => None,
        Some(Content::Text(t)) => Some(t),
        Some(Content::Parts(parts)) => {
            let mut text = String::new();
            for (j, p) in parts.into_iter().enumerate() {
                match (p.kind.as_str(), p.text) {
                    ("text", Some(t)) => text.push_str(&t),
                    _ => {
                        return Err(unsupported(
                            &format!("messages[{i}].content[{j}]"),
                            "only text content parts",
                        ));
                    }
                }
            }
            Some(text)
        }
    };
    let role = match m.role {
        WireRole::System | WireRole::Developer => Role::System,
        WireRole::User => Role::User,
        WireRole::Assistant => Role::Assistant,
        WireRole::Tool => Role::Tool,
    };
    Ok(Message {
        role,
        content,
        tool_calls: m
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .map(|c| ToolCall {
                id: c.id,
                name: c.function.name,
                arguments: c.function.arguments,
            })
            .collect(),
        tool_call_id: m.tool_call_id,
        reasoning_content: m.reasoning_content,
    })
}
