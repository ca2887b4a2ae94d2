//! The chat request: **one schema** for the library, the adapters and the
//! gateway. It is the OpenAI Chat Completions request body without the
//! three fields each call sets for itself (`model`, `stream`,
//! `stream_options`): the gateway deserializes a client's body into it and
//! an adapter serializes it back, so what Handover does not interpret
//! travels in the `extra` maps and reaches OpenAI-compatible providers
//! unchanged (vendor extensions and API features newer than this release).
//! Why these are our own types and not async-openai's: `docs/decisions.md`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::{error::ProviderError, fields::Fields};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions (`developer` is read as `system`).
    #[serde(alias = "developer")]
    System,
    /// The end user.
    User,
    /// The model (possibly with tool calls).
    Assistant,
    /// A tool result answering one tool call.
    Tool,
}

/// One tool call proposed by the model. `id` is attempt metadata (it changes
/// between providers), never an operation identity. On the wire:
/// `{"id", "type": "function", "function": {"name", "arguments"}}`.
///
/// Members Handover does not read are kept, in order, in `extra` (of the
/// call) and `function_extra` (of its `function`): Gemini's
/// `extra_content.google.thought_signature`, vendor fields. A request
/// hands them to OpenAI-compatible providers as sent and an answer to the
/// client as the provider sent them; a translating dialect uses what its
/// wire format has a place for and drops the rest (`docs/providers.md`).
///
/// ```
/// use handover_providers::ToolCall;
/// let call = ToolCall {
///     id: "call_1".into(),
///     name: "lookup_order".into(),
///     arguments: r#"{"order":"K-701"}"#.into(),
///     ..ToolCall::default()
/// };
/// assert_eq!(call, ToolCall::new("call_1", "lookup_order", r#"{"order":"K-701"}"#));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolCall {
    /// Provider-assigned call id.
    pub id: String,
    /// Function name.
    pub name: String,
    /// JSON arguments exactly as the model produced them.
    pub arguments: String,
    /// Every other member of the call (not `id`, `type`, `function`), as
    /// sent.
    pub extra: Fields,
    /// Every other member of its `function` (not `name`, `arguments`), as
    /// sent.
    pub function_extra: Fields,
}

impl ToolCall {
    /// A call with nothing but its id, name and arguments.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
            ..Self::default()
        }
    }
}

/// Keys of a call, and of its `function`, that are written from the typed
/// fields: a member of that name in `extra` is not written again.
const CALL_KEYS: [&str; 3] = ["id", "type", "function"];
const FUNCTION_KEYS: [&str; 2] = ["name", "arguments"];

/// `fields` less the members named in `ours`.
struct Others<'a> {
    fields: &'a Fields,
    ours: &'a [&'a str],
}

impl Serialize for Others<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let ours = self.ours;
        s.collect_map(self.fields.iter().filter(|(k, _)| !ours.contains(k)))
    }
}

#[derive(Serialize)]
struct ToolCallRef<'a> {
    id: &'a str,
    r#type: &'static str,
    function: FunctionCallRef<'a>,
    #[serde(flatten)]
    extra: Others<'a>,
}

#[derive(Serialize)]
struct FunctionCallRef<'a> {
    name: &'a str,
    arguments: &'a str,
    #[serde(flatten)]
    extra: Others<'a>,
}

/// A call as a client sends it. Read through serde's buffered content
/// (the message around it flattens its `extra`), so the other members are
/// read as values and kept as their JSON text.
#[derive(Deserialize)]
struct ToolCallIn {
    id: String,
    #[serde(default, rename = "type")]
    _type: Option<serde::de::IgnoredAny>,
    function: FunctionCallIn,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

#[derive(Deserialize)]
struct FunctionCallIn {
    name: String,
    arguments: String,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

impl Serialize for ToolCall {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ToolCallRef {
            id: &self.id,
            r#type: "function",
            function: FunctionCallRef {
                name: &self.name,
                arguments: &self.arguments,
                extra: Others {
                    fields: &self.function_extra,
                    ours: &FUNCTION_KEYS,
                },
            },
            extra: Others {
                fields: &self.extra,
                ours: &CALL_KEYS,
            },
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for ToolCall {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let c = ToolCallIn::deserialize(d)?;
        Ok(ToolCall {
            id: c.id,
            name: c.function.name,
            arguments: c.function.arguments,
            extra: c.extra.into(),
            function_extra: c.function.extra.into(),
        })
    }
}

/// Message content: a string, or content parts (text, images, audio,
/// files, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Content parts, forwarded as sent.
    Parts(Vec<ContentPart>),
}

impl From<String> for Content {
    fn from(s: String) -> Self {
        Content::Text(s)
    }
}

impl Content {
    /// The text of the content: the string, or the text parts joined.
    pub fn text(&self) -> String {
        match self {
            Content::Text(t) => t.clone(),
            Content::Parts(parts) => parts.iter().filter_map(|p| p.text.as_deref()).collect(),
        }
    }
}

/// One content part (`{"type": "text", "text": ...}`, `image_url`,
/// `input_audio`, `file`, ...). Fields other than `type` and `text` are kept
/// verbatim in `extra`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContentPart {
    /// The part type (`text`, `image_url`, `input_audio`, `file`, `refusal`).
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` (or `refusal`) part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Every other field of the part, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One conversation message. Fields Handover does not interpret (`name`,
/// `refusal`, `audio`, vendor fields) are kept verbatim in `extra`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Author.
    pub role: Role,
    /// Content: text or parts (`null` for an assistant turn that only
    /// made tool calls, as OpenAI documents it).
    #[serde(default)]
    pub content: Option<Content>,
    /// Assistant tool calls.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_empty"
    )]
    pub tool_calls: Vec<ToolCall>,
    /// For [`Role::Tool`]: the call this result answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Assistant reasoning (DeepSeek); sent back only as
    /// [`crate::ReasoningPassback`] allows (the adapter decides, so it is
    /// never serialized with the message).
    #[serde(default, skip_serializing)]
    pub reasoning_content: Option<String>,
    /// Every other field of the message, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn null_as_empty<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

impl Message {
    fn new(role: Role, content: Option<String>) -> Self {
        Self {
            role,
            content: content.map(Content::Text),
            tool_calls: Vec::new(),
            tool_call_id: None,
            reasoning_content: None,
            extra: Map::new(),
        }
    }

    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self::new(Role::System, Some(text.into()))
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::new(Role::User, Some(text.into()))
    }

    /// An assistant text message.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::new(Role::Assistant, Some(text.into()))
    }

    /// An assistant message that made tool calls.
    pub fn assistant_tool_calls(content: Option<String>, calls: Vec<ToolCall>) -> Self {
        let mut m = Self::new(Role::Assistant, content);
        m.tool_calls = calls;
        m
    }

    /// A tool result for call `tool_call_id`.
    pub fn tool_result(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        let mut m = Self::new(Role::Tool, Some(content.into()));
        m.tool_call_id = Some(tool_call_id.into());
        m
    }

    /// Attaches reasoning content (an assistant message received from DeepSeek).
    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> Self {
        self.reasoning_content = Some(reasoning.into());
        self
    }

    /// The message's text (string content, or its text parts joined).
    pub fn text(&self) -> Option<String> {
        self.content.as_ref().map(Content::text)
    }
}

/// A function the model may call. On the wire: `{"type": "function",
/// "function": {"name", "description", "parameters", "strict", ...}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// Function name.
    pub name: String,
    /// What it does (shown to the model).
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    pub parameters: Value,
    /// Structured outputs for the arguments (`strict`), exactly as sent.
    pub strict: Option<bool>,
    /// Every other field of `function`, as sent.
    pub extra: Map<String, Value>,
}

impl Tool {
    /// A function tool.
    pub fn function(
        name: impl Into<String>,
        description: Option<String>,
        parameters: Value,
    ) -> Self {
        Self {
            name: name.into(),
            description,
            parameters,
            strict: None,
            extra: Map::new(),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct ToolWire<F> {
    r#type: ToolType,
    function: F,
}

/// Only function tools reach a chat model through Handover (a custom tool's
/// free-text input could not go through the write gate's JSON parameters).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum ToolType {
    Function,
}

#[derive(Serialize)]
struct FunctionRef<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    parameters: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    strict: Option<bool>,
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

#[derive(Deserialize)]
struct FunctionIn {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    parameters: Option<Value>,
    #[serde(default)]
    strict: Option<bool>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

impl Serialize for Tool {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ToolWire {
            r#type: ToolType::Function,
            function: FunctionRef {
                name: &self.name,
                description: self.description.as_deref(),
                parameters: &self.parameters,
                strict: self.strict,
                extra: &self.extra,
            },
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Tool {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = ToolWire::<FunctionIn>::deserialize(d)?;
        let f = w.function;
        Ok(Tool {
            name: f.name,
            description: f.description,
            parameters: f
                .parameters
                .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
            strict: f.strict,
            extra: f.extra,
        })
    }
}

/// How the model may use tools.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// This function.
    Function(String),
    /// Any other form (e.g. `allowed_tools`), forwarded as sent.
    Other(Value),
}

impl Serialize for ToolChoice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolChoice::Auto => s.serialize_str("auto"),
            ToolChoice::None => s.serialize_str("none"),
            ToolChoice::Required => s.serialize_str("required"),
            ToolChoice::Function(name) => {
                serde_json::json!({"type": "function", "function": {"name": name}}).serialize(s)
            }
            ToolChoice::Other(v) => v.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for ToolChoice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let v = Value::deserialize(d)?;
        match &v {
            Value::String(m) => match m.as_str() {
                "auto" => Ok(ToolChoice::Auto),
                "none" => Ok(ToolChoice::None),
                "required" => Ok(ToolChoice::Required),
                other => Err(D::Error::custom(format!(
                    "unknown mode {other:?} (expected auto, none or required)"
                ))),
            },
            Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
                match o
                    .get("function")
                    .and_then(|f| f.get("name"))
                    .and_then(Value::as_str)
                {
                    Some(name) if o.len() == 2 => Ok(ToolChoice::Function(name.to_owned())),
                    Some(_) => Ok(ToolChoice::Other(v)),
                    None => Err(D::Error::custom(
                        "a function tool choice needs function.name",
                    )),
                }
            }
            Value::Object(_) => Ok(ToolChoice::Other(v)),
            _ => Err(D::Error::custom("expected a string or an object")),
        }
    }
}

/// A chat request. Streaming is chosen by calling
/// [`crate::Provider::chat_stream`] instead of [`crate::Provider::chat`];
/// the model by the provider's settings (or [`crate::CallOptions::model`]).
///
/// Parameters Handover reads have fields; every other Chat Completions
/// parameter (`response_format`, `reasoning_effort`, `logprobs`,
/// `parallel_tool_calls`, vendor extensions, ...) goes in `extra` and is
/// forwarded as given. The integer fields read a whole number written as
/// a float (`"max_tokens": 64.0`, as OpenAI does) as that integer.
///
/// ```
/// use handover_providers::{ChatRequest, Message};
/// let mut req = ChatRequest::new(vec![Message::system("be brief"), Message::user("hi")])
///     .with_max_tokens(64)
///     .with_data_class("internal");
/// req.extra.insert("response_format".into(), serde_json::json!({"type": "json_object"}));
/// assert_eq!(req.messages.len(), 2);
/// assert!(req.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The conversation, oldest first. Must not be empty.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_empty"
    )]
    pub tools: Vec<Tool>,
    /// Tool choice; `None` leaves the provider default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Output token limit (`max_tokens`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::whole::optional"
    )]
    pub max_tokens: Option<u32>,
    /// Output token limit including reasoning (`max_completion_tokens`),
    /// sent as such.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::whole::optional"
    )]
    pub max_completion_tokens: Option<u32>,
    /// Stop sequences (a single string is read as one sequence).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "one_or_many"
    )]
    pub stop: Vec<String>,
    /// Sampling seed.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::whole::optional"
    )]
    pub seed: Option<i64>,
    /// End-user id for provider abuse monitoring (`user`; DeepSeek `user_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Data class of the content (the router's data policy); never sent.
    #[serde(skip)]
    pub data_class: Option<String>,
    /// Every other parameter, forwarded as given. A parameter named twice
    /// is refused: readers disagree on which copy counts (a proxy that
    /// checks the first `model` would not see the one that runs).
    #[serde(flatten, deserialize_with = "once_each")]
    pub extra: Map<String, Value>,
}

/// A map whose keys are each given once.
fn once_each<'de, D: Deserializer<'de>>(d: D) -> Result<Map<String, Value>, D::Error> {
    struct Once;
    impl<'de> serde::de::Visitor<'de> for Once {
        type Value = Map<String, Value>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a map")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut m: A,
        ) -> Result<Self::Value, A::Error> {
            let mut map = Map::new();
            while let Some((k, v)) = m.next_entry::<String, Value>()? {
                if map.contains_key(&k) {
                    return Err(serde::de::Error::custom(format!("{k} is given twice")));
                }
                map.insert(k, v);
            }
            Ok(map)
        }
    }
    d.deserialize_map(Once)
}

fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stop {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Option::<Stop>::deserialize(d)? {
        None => Vec::new(),
        Some(Stop::One(s)) => vec![s],
        Some(Stop::Many(v)) => v,
    })
}

/// Parameters each call sets itself, and the typed ones: never in `extra`.
const NOT_EXTRA: &[&str] = &[
    "model",
    "stream",
    "stream_options",
    "messages",
    "tools",
    "tool_choice",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "seed",
    "user",
];

impl ChatRequest {
    /// A request with these messages and nothing else set.
    pub fn new(messages: Vec<Message>) -> Self {
        Self {
            messages,
            ..Self::default()
        }
    }

    /// Sets the tools.
    pub fn with_tools(mut self, tools: Vec<Tool>) -> Self {
        self.tools = tools;
        self
    }

    /// Sets the temperature.
    pub fn with_temperature(mut self, t: f32) -> Self {
        self.temperature = Some(t);
        self
    }

    /// Sets the output token limit.
    pub fn with_max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = Some(n);
        self
    }

    /// Tags the data class.
    pub fn with_data_class(mut self, class: impl Into<String>) -> Self {
        self.data_class = Some(class.into());
        self
    }

    /// Sets the end-user id.
    pub fn with_user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    /// Checks the request; the error names the offending field. Nothing is
    /// sent for an invalid request.
    pub fn validate(&self) -> Result<(), ProviderError> {
        let bad = |field: String, reason: &str| {
            Err(ProviderError::InvalidRequest {
                field,
                reason: reason.into(),
            })
        };
        if self.messages.is_empty() {
            return bad("messages".into(), "must not be empty");
        }
        for (i, m) in self.messages.iter().enumerate() {
            match m.role {
                Role::Tool if m.tool_call_id.as_deref().is_none_or(str::is_empty) => {
                    return bad(
                        format!("messages[{i}].tool_call_id"),
                        "is required for tool results",
                    );
                }
                Role::Assistant if m.content.is_none() && m.tool_calls.is_empty() => {
                    return bad(
                        format!("messages[{i}].content"),
                        "an assistant message needs content or tool calls",
                    );
                }
                Role::System | Role::User if m.content.is_none() => {
                    return bad(format!("messages[{i}].content"), "is required");
                }
                _ => {}
            }
            for (j, c) in m.tool_calls.iter().enumerate() {
                if c.id.is_empty() || c.name.is_empty() {
                    return bad(
                        format!("messages[{i}].tool_calls[{j}]"),
                        "id and name must not be empty",
                    );
                }
            }
        }
        for (i, t) in self.tools.iter().enumerate() {
            if t.name.is_empty() {
                return bad(format!("tools[{i}].name"), "must not be empty");
            }
        }
        if let Some(t) = self.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return bad("temperature".into(), "must be between 0 and 2");
        }
        if let Some(key) = self.extra.keys().find(|k| NOT_EXTRA.contains(&k.as_str())) {
            return bad(
                key.clone(),
                "is set by its own field or by the call, not through `extra`",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Fields, ToolCall};

    fn keys(f: &Fields) -> Vec<&str> {
        f.iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn a_tool_calls_other_members_are_kept_in_order_and_written_back_after_ours() {
        let sent = r#"{"x_first":1,"function":{"x_fn":[1],"arguments":"{}","name":"f","a_fn":null},"type":"function","id":"c1","extra_content":{"google":{"thought_signature":"S"}}}"#;
        let call: ToolCall = serde_json::from_str(sent).unwrap();
        assert_eq!((call.id.as_str(), call.name.as_str()), ("c1", "f"));
        assert_eq!(keys(&call.extra), ["x_first", "extra_content"]);
        assert_eq!(keys(&call.function_extra), ["x_fn", "a_fn"]);
        assert_eq!(
            serde_json::to_string(&call).unwrap(),
            r#"{"id":"c1","type":"function","function":{"name":"f","arguments":"{}","x_fn":[1],"a_fn":null},"x_first":1,"extra_content":{"google":{"thought_signature":"S"}}}"#
        );
    }

    #[test]
    fn a_member_set_by_hand_under_one_of_our_names_is_not_written_twice() {
        let mut call = ToolCall::new("c1", "f", "{}");
        call.extra.insert("id", &json!("other"));
        call.extra.insert("type", &json!("custom"));
        call.function_extra.insert("name", &json!("g"));
        call.function_extra.insert("strict", &json!(true));
        assert_eq!(
            serde_json::to_string(&call).unwrap(),
            r#"{"id":"c1","type":"function","function":{"name":"f","arguments":"{}","strict":true}}"#
        );
    }
}
