//! Gemini API bodies and stream chunks, in the shapes its API reference
//! documents (`GenerateContentResponse`, Google's error envelope).

use handover_providers::ErrorClass;
use serde_json::{Value, json};

pub const G_MODEL: &str = "gemini-2.5-flash-preview-09-2025";
const RESPONSE_ID: &str = "c2Q6aOSdFsqmz7IP7K3b2QM";

/// One SSE event of `streamGenerateContent?alt=sse`.
pub fn g_event(data: Value) -> String {
    format!("data: {data}\r\n\r\n")
}

/// A `GenerateContentResponse` with `parts`, an optional finish reason and
/// usage.
pub fn g_answer(parts: Value, finish: Option<&str>, usage: Option<Value>) -> Value {
    let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
    if let Some(f) = finish {
        candidate["finishReason"] = json!(f);
    }
    let mut v = json!({
        "candidates": [candidate],
        "modelVersion": G_MODEL,
        "responseId": RESPONSE_ID,
    });
    if let Some(u) = usage {
        v["usageMetadata"] = u;
    }
    v
}

/// Google's error envelope, with `details` (ErrorInfo, RetryInfo, ...).
pub fn g_error(code: u16, status: &str, message: &str, details: Value) -> Value {
    json!({"error": {"code": code, "message": message, "status": status, "details": details}})
}

pub fn g_success() -> Value {
    g_answer(
        json!([{"text": "Hello! How can I help you today?"}]),
        Some("STOP"),
        Some(json!({
            "promptTokenCount": 16, "candidatesTokenCount": 10, "totalTokenCount": 26,
            "cachedContentTokenCount": 4,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 16}]
        })),
    )
}

pub fn g_tool_call_response() -> Value {
    g_answer(
        json!([
            {"text": "The user wants a shipment; call the tool.", "thought": true},
            {"functionCall": {"name": "create_shipment", "args": {"order": "K-701"}},
             "thoughtSignature": "CiQB0e2Kb6Ghm2xQ"}
        ]),
        Some("STOP"),
        Some(json!({"promptTokenCount": 40, "candidatesTokenCount": 12,
                    "thoughtsTokenCount": 8, "totalTokenCount": 60})),
    )
}

fn text(t: &str) -> Value {
    json!([{"text": t}])
}

fn stream_usage() -> Value {
    json!({"promptTokenCount": 16, "candidatesTokenCount": 3, "totalTokenCount": 19})
}

/// "Hello world" with keep-alive comments; the last chunk carries the
/// finish reason and usage (Gemini has no end marker, so `done` changes
/// nothing).
pub fn g_text_stream(_done: bool) -> String {
    [
        ": keep-alive\r\n\r\n".to_owned(),
        g_event(g_answer(text("Hello"), None, None)),
        ": keep-alive\r\n\r\n".to_owned(),
        g_event(g_answer(text(" world"), Some("STOP"), Some(stream_usage()))),
    ]
    .concat()
}

pub fn g_partial_text() -> (String, usize) {
    let body = [
        g_event(g_answer(text("Hel"), None, None)),
        g_event(g_answer(text("lo"), None, None)),
    ]
    .concat();
    (body, 2)
}

pub fn g_finish_and_done() -> String {
    g_event(g_answer(text(""), Some("STOP"), Some(stream_usage())))
}

/// A 503 `UNAVAILABLE` error object in the middle of a 200 stream.
pub fn g_stream_error() -> (String, ErrorClass, Option<&'static str>) {
    let e = g_error(
        503,
        "UNAVAILABLE",
        "The model is overloaded. Please try again later.",
        json!([]),
    );
    (g_event(e), ErrorClass::Overloaded, None)
}

/// Two complete `functionCall`s (Gemini streams each call whole), the
/// second one after some text.
pub fn g_tool_stream() -> String {
    let call = |name: &str, args: Value| json!([{"functionCall": {"name": name, "args": args}}]);
    [
        g_event(g_answer(
            call("create_shipment", json!({"order": "K-701"})),
            None,
            None,
        )),
        ": keep-alive\r\n\r\n".to_owned(),
        g_event(g_answer(
            call("notify", json!({"to": "ops"})),
            Some("STOP"),
            Some(json!({"promptTokenCount": 30, "candidatesTokenCount": 9})),
        )),
    ]
    .concat()
}

/// `RetryInfo` asking for a 20 s wait, as a 429 carries it.
pub fn g_retry_20s() -> Value {
    json!([
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
         "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                         "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "20s"}
    ])
}

/// Google's documented errors (status, body, expected class).
pub fn g_error_cases() -> Vec<(u16, Value, ErrorClass)> {
    let e = g_error;
    vec![
        (
            429,
            e(
                429,
                "RESOURCE_EXHAUSTED",
                "You exceeded your current quota, please check your plan and billing details.",
                g_retry_20s(),
            ),
            ErrorClass::RateLimited,
        ),
        (
            503,
            e(
                503,
                "UNAVAILABLE",
                "The model is overloaded. Please try again later.",
                json!([]),
            ),
            ErrorClass::Overloaded,
        ),
        (
            500,
            e(
                500,
                "INTERNAL",
                "An internal error has occurred.",
                json!([]),
            ),
            ErrorClass::ServerError,
        ),
        (
            502,
            json!("<html>Bad Gateway</html>"),
            ErrorClass::ServerError,
        ),
        (
            400,
            e(
                400,
                "INVALID_ARGUMENT",
                "API key not valid. Please pass a valid API key.",
                json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]),
            ),
            ErrorClass::Auth,
        ),
        (
            403,
            e(
                403,
                "PERMISSION_DENIED",
                "Method doesn't allow unregistered callers (callers without established identity).",
                json!([]),
            ),
            ErrorClass::Auth,
        ),
        (
            401,
            e(
                401,
                "UNAUTHENTICATED",
                "Request had invalid authentication credentials.",
                json!([]),
            ),
            ErrorClass::Auth,
        ),
        (
            400,
            e(
                400,
                "INVALID_ARGUMENT",
                "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
                json!([]),
            ),
            ErrorClass::ContextLengthExceeded,
        ),
        (
            400,
            e(
                400,
                "INVALID_ARGUMENT",
                "Invalid JSON payload received. Unknown name \"foo\": Cannot find field.",
                json!([]),
            ),
            ErrorClass::InvalidRequest,
        ),
        (
            404,
            e(
                404,
                "NOT_FOUND",
                "models/gemini-nope is not found for API version v1beta, or is not supported for generateContent.",
                json!([]),
            ),
            ErrorClass::InvalidRequest,
        ),
    ]
}

/// The provider code a Gemini error body carries: its `ErrorInfo` reason.
pub fn g_error_code(body: &Value) -> Option<&str> {
    body["error"]["details"]
        .as_array()?
        .iter()
        .find(|d| {
            d["@type"]
                .as_str()
                .is_some_and(|t| t.ends_with("ErrorInfo"))
        })?
        .get("reason")?
        .as_str()
}
