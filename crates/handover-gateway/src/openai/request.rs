//! OpenAI chat request JSON → [`ChatRequest`], the one request schema of
//! `handover-providers`: every parameter, message field, content part and
//! tool field is kept and reaches the provider as sent. The gateway reads
//! only `model` (a policy or alias), `stream` and `stream_options`, and
//! refuses `n` above 1: several choices would be several proposals for one
//! operation, and the write gate takes one answer. An `n` that is no number
//! of choices (0, negative, fractional, not a number) is invalid; `1.0` is
//! one.

use handover_providers::ChatRequest;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::api_error::ApiError;
use crate::fields::{from_map, not_an_object, read_once_each};
use handover_providers::whole::whole;

/// A parsed chat request.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub(crate) model: String,
    pub(crate) stream: bool,
    pub(crate) include_usage: bool,
    pub(crate) request: ChatRequest,
}

/// What the gateway itself reads of the body; the rest is the one
/// [`ChatRequest`] schema.
#[derive(Deserialize)]
struct Envelope {
    model: String,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

fn unsupported(param: &str, why: &str) -> ApiError {
    ApiError::invalid(
        "unsupported_parameter",
        param,
        format!("{param}: {why} (not supported by the Handover gateway)"),
    )
}

/// The body's fields that are the gateway's, not the request's.
const ENVELOPE: [&str; 3] = ["model", "stream", "stream_options"];

/// Parses an OpenAI chat request body once, straight into [`ChatRequest`]
/// (whose `extra` then holds the envelope's fields, taken out here): no
/// `Value` tree is built and taken apart for a body that parses. A body
/// that does not goes through [`slow`], which names the problem
/// exactly as the gateway always has (envelope first, then the request);
/// only that slow path decides which error a bad body gets.
pub(crate) fn parse(bytes: &[u8]) -> Result<Parsed, ApiError> {
    let Ok(mut request) = crate::body::parse::<ChatRequest>(bytes) else {
        return slow(bytes);
    };
    let fields: Map<String, Value> = ENVELOPE
        .iter()
        .filter_map(|k| request.extra.shift_remove_entry(*k))
        .collect();
    match plain_envelope(&fields) {
        Some(e) => finish(e, request),
        None => finish(envelope(fields)?, request),
    }
}

/// The envelope of a body whose envelope fields have their usual types,
/// read off the values directly; `None` for anything else (a missing or
/// empty model, a wrong type), which [`envelope`] reads and names exactly
/// as it always has.
fn plain_envelope(fields: &Map<String, Value>) -> Option<Envelope> {
    let model = fields.get("model")?.as_str().filter(|m| !m.is_empty())?;
    let stream = match fields.get("stream") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_bool()?),
    };
    let stream_options = match fields.get("stream_options") {
        None | Some(Value::Null) => None,
        Some(Value::Object(o)) => Some(StreamOptions {
            include_usage: match o.get("include_usage") {
                None => false,
                Some(v) => v.as_bool()?,
            },
        }),
        Some(_) => return None,
    };
    Some(Envelope {
        model: model.to_owned(),
        stream,
        stream_options,
    })
}

/// The path of a body the one-pass parse refused: read as JSON (see
/// [`read_once_each`]), then the envelope and the request.
fn slow(bytes: &[u8]) -> Result<Parsed, ApiError> {
    parse_value(read_once_each(bytes)?)
}

/// Parses a body already read as JSON: the envelope, then the request.
fn parse_value(body: Value) -> Result<Parsed, ApiError> {
    let Value::Object(mut obj) = body else {
        return Err(not_an_object());
    };
    let fields = ENVELOPE
        .iter()
        .filter_map(|k| obj.shift_remove_entry(*k))
        .collect();
    let e = envelope(fields)?;
    finish(e, from_map(obj)?)
}

/// The envelope from its fields; `model` must name something.
fn envelope(fields: Map<String, Value>) -> Result<Envelope, ApiError> {
    let e: Envelope = from_map(fields)?;
    if e.model.is_empty() {
        return Err(ApiError::invalid(
            "invalid_field",
            "model",
            "model: must not be empty",
        ));
    }
    Ok(e)
}

fn finish(e: Envelope, mut request: ChatRequest) -> Result<Parsed, ApiError> {
    check_n(&mut request)?;
    Ok(Parsed {
        model: e.model,
        stream: e.stream.unwrap_or(false),
        include_usage: e.stream_options.is_some_and(|o| o.include_usage),
        request,
    })
}

/// `n`, the number of choices: absent or `null` is one. A value that is no
/// number of choices (below 1, not a whole number, past `u32`) is
/// invalid, as OpenAI answers it; a valid one above 1 is a limit of the
/// gateway's, said so. One written as a float (`1.0`) is that number, and
/// goes on as the integer (adapters that drop `n: 1` compare integers).
fn check_n(r: &mut ChatRequest) -> Result<(), ApiError> {
    let Some(n) = r.extra.get_mut("n").filter(|n| !n.is_null()) else {
        return Ok(());
    };
    let invalid = |message: &str| ApiError::invalid("invalid_field", "n", message);
    match n.as_number().and_then(whole) {
        Some(1) => {
            *n = 1.into();
            Ok(())
        }
        Some(w) if w < 1 => Err(invalid("n must be at least 1")),
        Some(w) if w <= i128::from(u32::MAX) => Err(unsupported(
            "n",
            "only one choice per request (each choice would propose its own tool calls)",
        )),
        Some(_) => Err(invalid("n must be a whole number, at most 4294967295")),
        None => Err(invalid("n must be a whole number, at least 1")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a parse gives, comparable: the request and envelope, or the error.
    fn outcome(r: Result<Parsed, ApiError>) -> String {
        match r {
            Ok(p) => format!(
                "{:?} {} {} {:?}",
                p.model, p.stream, p.include_usage, p.request
            ),
            Err(e) => format!("{} {} {:?} {}", e.status, e.code, e.param, e.message),
        }
    }

    /// The one-pass parse gives exactly what the envelope-then-request
    /// parse through `Value` gives, answers and errors alike.
    #[test]
    fn one_pass_parse_is_the_value_parse() {
        let bodies = [
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#,
            r#"{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"temperature":0.5,"stop":"x","response_format":{"type":"json_object"},"n":1}"#,
            r#"{"model":"m","model":"p","messages":[{"role":"user","content":"dup model"}]}"#,
            r#"{"model":"m","messages":[],"messages":[{"role":"user","content":"dup field"}]}"#,
            r#"{"model":"","messages":[{"role":"user","content":"hi"}]}"#,
            r#"{"messages":[{"role":"user","content":"no model"}]}"#,
            r#"{"model":7,"messages":[{"role":"bogus"}]}"#,
            r#"{"model":"m","messages":[{"role":"bogus","content":"x"}]}"#,
            r#"{"model":"m","stream":"yes","messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"m","n":2,"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"m","n":0,"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"m","n":-3,"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"m","n":1.5,"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"m","n":null,"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"m","n":1.0,"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"m","n":2.0,"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"m","n":1e10,"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"m","n":4294967296,"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"m","n":"1","messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"m","max_tokens":64.0,"seed":-3.0,"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"m","max_completion_tokens":64.5,"messages":[{"role":"user","content":"x"}]}"#,
            r#"[1,2]"#,
            r#"{"model":"m","messages":[{"role":"user","content":"x"}]} trailing"#,
            r#"{"model":"m","messages":[{"#,
            r#"{"model":"m","stream":null,"stream_options":null,"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"m","stream":false,"stream_options":{"include_usage":false,"other":1},"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"m","stream":true,"stream_options":{},"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"m","stream":true,"stream_options":{"include_usage":null},"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"m","stream":true,"stream_options":{"include_usage":"yes"},"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"m","stream":true,"stream_options":[true],"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"m","stream":1,"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":null,"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":["m"],"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"m","stream":true,"stream":false,"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"model":"m","temperature":1,"messages":[{"role":"user","content":"x"}],"temperature":0}"#,
        ];
        for body in bodies {
            let slow = slow(body.as_bytes());
            assert_eq!(
                outcome(parse(body.as_bytes())),
                outcome(slow),
                "body: {body}"
            );
        }
    }
}
