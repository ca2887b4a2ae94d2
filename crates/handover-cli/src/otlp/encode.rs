//! The OTLP/HTTP JSON encoding of a batch (`ExportTraceServiceRequest`,
//! proto3 JSON mapping: ids in lowercase hex, 64-bit integers as strings).

use std::time::SystemTime;

use serde_json::{Value as Json, json};

use super::{Finished, Value};

/// One export request's body for `spans`.
pub(super) fn request(service_name: &str, spans: &[Finished]) -> Json {
    let spans: Vec<Json> = spans.iter().map(span).collect();
    json!({
        "resourceSpans": [{
            "resource": {"attributes": [
                attribute("service.name", &Value::Str(service_name.to_owned())),
                attribute("service.version", &Value::Str(env!("CARGO_PKG_VERSION").to_owned())),
            ]},
            "scopeSpans": [{
                "scope": {"name": "handover", "version": env!("CARGO_PKG_VERSION")},
                "spans": spans,
            }],
        }],
    })
}

fn span(s: &Finished) -> Json {
    let mut out = json!({
        "traceId": format!("{:032x}", s.trace_id),
        "spanId": format!("{:016x}", s.span_id),
        "name": name(s),
        "kind": kind(s.target),
        "startTimeUnixNano": unix_nanos(s.start).to_string(),
        "endTimeUnixNano": unix_nanos(s.end).to_string(),
        "attributes": s.attrs.iter().map(|(k, v)| attribute(k, v)).collect::<Vec<_>>(),
    });
    if let Some(p) = s.parent {
        out["parentSpanId"] = json!(format!("{p:016x}"));
    }
    // A failed attempt or request carries `error.type`: the span's status is
    // ERROR (as the semantic conventions ask); otherwise left unset.
    if s.attrs.iter().any(|(k, _)| *k == "error.type") {
        out["status"] = json!({"code": 2});
    }
    out
}

/// GenAI spans are named `{gen_ai.operation.name} {gen_ai.request.model}`
/// (the semantic conventions' span name); others keep their own name.
fn name(s: &Finished) -> String {
    let get = |key: &str| {
        s.attrs.iter().find_map(|(k, v)| match v {
            Value::Str(text) if *k == key => Some(text.as_str()),
            _ => None,
        })
    };
    match (get("gen_ai.operation.name"), get("gen_ai.request.model")) {
        (Some(op), Some(model)) => format!("{op} {model}"),
        _ => s.name.to_owned(),
    }
}

/// SERVER for the gateway's request spans, CLIENT for the providers'
/// calls, INTERNAL for the rest.
fn kind(target: &str) -> u8 {
    if target.starts_with("handover_gateway") {
        2
    } else if target.starts_with("handover_providers") {
        3
    } else {
        1
    }
}

fn attribute(key: &str, value: &Value) -> Json {
    let value = match value {
        Value::Str(s) => json!({"stringValue": s}),
        Value::Int(i) => json!({"intValue": i.to_string()}),
        Value::Float(f) => json!({"doubleValue": f}),
        Value::Bool(b) => json!({"boolValue": b}),
    };
    json!({"key": key, "value": value})
}

fn unix_nanos(t: SystemTime) -> u128 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}
