//! The Responses request's input items, tools, tool choice and text
//! format as their Chat Completions counterparts; every refusal names the
//! Responses field (`input[2].content[0].text`), never a chat one.

use handover_providers::{Content, ContentPart, Message, Role, Tool, ToolCall, ToolChoice};
use serde_json::{Map, Value, json};

use super::unsupported;
use crate::api_error::ApiError;
use crate::body::from_value;

/// The member of a tool call that carries a provider's state for it
/// (Gemini's `extra_content.google.thought_signature`), kept on
/// `function_call` items both ways.
pub(super) const EXTRA_CONTENT: &str = "extra_content";

/// One `input` item, appended as chat messages.
pub(super) fn input_item(
    i: usize,
    item: Value,
    messages: &mut Vec<Message>,
) -> Result<(), ApiError> {
    let kind = item
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or(if item.get("role").is_some() {
            "message"
        } else {
            ""
        })
        .to_owned();
    let field = |name: &str| -> Result<String, ApiError> {
        item.get(name)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| {
                ApiError::invalid(
                    "invalid_field",
                    format!("input[{i}].{name}"),
                    format!("input[{i}].{name}: a string is required"),
                )
            })
    };
    match kind.as_str() {
        "message" => messages.push(input_message(i, &item)?),
        "function_call" => {
            let mut call = ToolCall {
                id: field("call_id")?,
                name: field("name")?,
                arguments: field("arguments")?,
                ..ToolCall::default()
            };
            // Gemini 3's thought signature, where the chat door keeps it
            // (see `output::call_item`); a call's other members have no
            // meaning here and stay behind.
            if let Some(v) = item.get(EXTRA_CONTENT).filter(|v| !v.is_null()) {
                call.extra.insert(EXTRA_CONTENT, v);
            }
            match messages.last_mut() {
                Some(m) if m.role == Role::Assistant => m.tool_calls.push(call),
                _ => messages.push(Message::assistant_tool_calls(None, vec![call])),
            }
        }
        "function_call_output" => {
            let output = match item.get("output") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(parts)) => output_text(i, parts)?,
                _ => field("output")?,
            };
            messages.push(Message::tool_result(field("call_id")?, output));
        }
        // Opaque state of the provider that produced it; another provider
        // (a fallback) could not read it.
        "reasoning" => {}
        _ => {
            return Err(unsupported(
                &format!("input[{i}].type"),
                "only message, function_call, function_call_output and reasoning items",
            ));
        }
    }
    Ok(())
}

/// A tool result given as parts, as the one text a chat tool message
/// holds: text parts only. An image or file part (the Responses API takes
/// them in a tool's output) has no place there and is refused naming it,
/// never dropped: the model would answer without what the tool returned.
fn output_text(i: usize, parts: &[Value]) -> Result<String, ApiError> {
    let mut text = String::new();
    for (j, p) in parts.iter().enumerate() {
        match p.get("type").and_then(Value::as_str) {
            Some("input_text" | "output_text" | "text") => {
                let t = p.get("text").and_then(Value::as_str).ok_or_else(|| {
                    ApiError::invalid(
                        "invalid_field",
                        format!("input[{i}].output[{j}].text"),
                        format!("input[{i}].output[{j}].text: a string is required"),
                    )
                })?;
                text.push_str(t);
            }
            _ => {
                return Err(unsupported(
                    &format!("input[{i}].output[{j}].type"),
                    "a tool's output reaches chat models as text: only input_text parts",
                ));
            }
        }
    }
    Ok(text)
}

fn input_message(i: usize, item: &Value) -> Result<Message, ApiError> {
    // A tool's result is a `function_call_output` item here, not a role.
    let role = from_value::<Role>(item.get("role").cloned().unwrap_or(Value::Null))
        .ok()
        .filter(|r| *r != Role::Tool)
        .ok_or_else(|| {
            ApiError::invalid(
                "invalid_field",
                format!("input[{i}].role"),
                format!("input[{i}].role: expected user, system, developer or assistant"),
            )
        })?;
    let content = match item.get("content") {
        Some(Value::String(s)) => Content::Text(s.clone()),
        Some(Value::Array(parts)) => {
            let mut out = Vec::new();
            for (j, p) in parts.iter().enumerate() {
                out.push(content_part(i, j, p)?);
            }
            if role == Role::Assistant || out.iter().all(|p| p.kind == "text") {
                Content::Text(out.iter().filter_map(|p| p.text.as_deref()).collect())
            } else {
                Content::Parts(out)
            }
        }
        _ => {
            return Err(ApiError::invalid(
                "invalid_field",
                format!("input[{i}].content"),
                format!("input[{i}].content: a string or content parts are required"),
            ));
        }
    };
    let mut m = Message::user(String::new());
    m.role = role;
    m.content = Some(content);
    Ok(m)
}

fn content_part(i: usize, j: usize, p: &Value) -> Result<ContentPart, ApiError> {
    let kind = p.get("type").and_then(Value::as_str).unwrap_or_default();
    // A text part's text is required: a part without it would reach the
    // model as nothing, with no word to the client.
    let text = |name: &str| {
        let text = p.get(name).and_then(Value::as_str).ok_or_else(|| {
            ApiError::invalid(
                "invalid_field",
                format!("input[{i}].content[{j}].{name}"),
                format!("input[{i}].content[{j}].{name}: a string is required"),
            )
        })?;
        Ok(ContentPart {
            kind: "text".into(),
            text: Some(text.to_owned()),
            extra: Map::new(),
        })
    };
    let mut extra = Map::new();
    let kind = match kind {
        "input_text" | "output_text" | "text" => return text("text"),
        "refusal" => return text("refusal"),
        "input_image" => {
            let mut image = Map::new();
            image.insert(
                "url".into(),
                p.get("image_url").cloned().unwrap_or(Value::Null),
            );
            if let Some(d) = p.get("detail") {
                image.insert("detail".into(), d.clone());
            }
            extra.insert("image_url".into(), Value::Object(image));
            "image_url"
        }
        "input_file" => {
            let mut file = p.as_object().cloned().unwrap_or_default();
            file.shift_remove("type");
            extra.insert("file".into(), Value::Object(file));
            "file"
        }
        _ => {
            return Err(unsupported(
                &format!("input[{i}].content[{j}].type"),
                "only input_text, output_text, refusal, input_image and input_file parts",
            ));
        }
    };
    Ok(ContentPart {
        kind: kind.into(),
        text: None,
        extra,
    })
}

pub(super) fn tool(i: usize, t: &Value) -> Result<Tool, ApiError> {
    if t.get("type").and_then(Value::as_str) != Some("function") {
        return Err(unsupported(
            &format!("tools[{i}].type"),
            "only function tools",
        ));
    }
    let name = t.get("name").and_then(Value::as_str).ok_or_else(|| {
        ApiError::invalid(
            "invalid_field",
            format!("tools[{i}].name"),
            format!("tools[{i}].name: a string is required"),
        )
    })?;
    let mut tool = Tool::function(
        name,
        t.get("description")
            .and_then(Value::as_str)
            .map(str::to_owned),
        t.get("parameters")
            .cloned()
            .filter(|p| !p.is_null())
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    );
    tool.strict = t.get("strict").and_then(Value::as_bool);
    Ok(tool)
}

pub(super) fn tool_choice(v: &Value) -> Result<ToolChoice, ApiError> {
    let bad = || {
        unsupported(
            "tool_choice",
            "only auto, none, required or {\"type\": \"function\", \"name\": ...}",
        )
    };
    match v {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            _ => Err(bad()),
        },
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => o
            .get("name")
            .and_then(Value::as_str)
            .map(|n| ToolChoice::Function(n.to_owned()))
            .ok_or_else(bad),
        _ => Err(bad()),
    }
}

/// `text.format` as a chat `response_format` (`None` for plain text).
pub(super) fn response_format(f: &Value) -> Result<Option<Value>, ApiError> {
    match f.get("type").and_then(Value::as_str) {
        None | Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "json_object"}))),
        Some("json_schema") => {
            let mut schema = f.as_object().cloned().unwrap_or_default();
            schema.shift_remove("type");
            Ok(Some(json!({"type": "json_schema", "json_schema": schema})))
        }
        Some(_) => Err(unsupported(
            "text.format.type",
            "only text, json_object and json_schema",
        )),
    }
}
