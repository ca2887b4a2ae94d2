//! The API key never appears in logs (TRACE, captured), errors (Display and
//! Debug) or Debug output, on every error path — including providers that
//! echo the key back in bodies and events.
//!
//! The log capture is a thread's default subscriber, and a test emitting
//! spans on another thread at the same time (or capturing with a
//! subscriber of its own) can leave tracing's per-callsite interest cached
//! as "never" and a capture empty. So every test here that calls a
//! provider holds [`SERIAL`]: they run one at a time.

use crate::support;

use std::{sync::Arc, time::Duration};

use futures::StreamExt;
use handover_providers::{
    AnyProvider, CallOptions, ChatRequest, Message, Provider, ProviderError, ProviderKind,
    ProviderSettings, Timeouts,
};
use secrecy::SecretString;
use serde_json::json;
use support::{Case, CountingGate, bodies, raw};
use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};

const SENTINEL: &str = "sk-SENTINEL-7f3c9e1b4d";

/// Held by every test that calls a provider (see the module docs).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn settings(kind: impl Into<Case>, base: &str) -> ProviderSettings {
    let case = kind.into();
    ProviderSettings::new("secret-test", case.kind, "gpt-4o-mini")
        .with_api(case.api)
        .with_base_url(base)
        .with_api_key(SecretString::from(SENTINEL))
        .with_timeouts(Timeouts {
            first_byte: Duration::from_millis(200),
            ..support::relaxed()
        })
}

async fn mock(template: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(template)
        .mount(&server)
        .await;
    server
}

fn sse(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_string(body)
}

/// Runs both call styles; returns every error seen.
async fn run_all(p: &AnyProvider, opts: &CallOptions) -> Vec<ProviderError> {
    let req = ChatRequest::new(vec![Message::user("hello")]);
    let mut errors = Vec::new();
    if let Err(e) = p.chat(&req, opts).await {
        errors.push(e);
    }
    match p.chat_stream(&req, opts).await {
        Err(e) => errors.push(e),
        Ok(mut s) => {
            while let Some(item) = s.next().await {
                if let Err(e) = item {
                    errors.push(e);
                }
            }
        }
    }
    errors
}

#[tokio::test]
async fn sentinel_key_never_leaks() {
    let _serial = SERIAL.lock().await;
    let (logs, _guard) = support::capture_logs();
    let echo = format!("Incorrect API key provided: {SENTINEL}");
    let kind = ProviderKind::OpenAi;

    let servers = vec![
        mock(ResponseTemplate::new(401).set_body_json(bodies::error(
            &echo,
            Some("invalid_request_error"),
            Some("invalid_api_key"),
        )))
        .await,
        mock(
            ResponseTemplate::new(500)
                .set_body_string(format!("upstream failed for key {SENTINEL}")),
        )
        .await,
        mock(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "3")
                .set_body_json(bodies::error(
                    &echo,
                    Some("requests"),
                    Some("rate_limit_exceeded"),
                )),
        )
        .await,
        mock(ResponseTemplate::new(503).set_body_json(bodies::error(&echo, None, None))).await,
        mock(ResponseTemplate::new(200).set_body_string(format!("{{\"oops\": \"{SENTINEL}"))).await,
        mock(sse(format!(
            "data: {}\n\n",
            bodies::error(&echo, Some("server_error"), None)
        )))
        .await,
        mock(sse(format!("data: {{\"bad\": {SENTINEL}\n\n"))).await,
        mock(sse(bodies::chunk(kind, json!({"content": "cut"}), None))).await,
        mock(
            ResponseTemplate::new(200)
                .set_body_json(bodies::success(kind))
                .set_delay(Duration::from_secs(2)),
        )
        .await,
        mock(ResponseTemplate::new(200).set_body_json(bodies::success(kind))).await,
    ];
    let mut errors = Vec::new();
    let mut debug_dumps = Vec::new();
    for server in &servers {
        let p = AnyProvider::new(settings(kind, &format!("{}/v1", server.uri()))).unwrap();
        debug_dumps.push(format!("{p:?}"));
        errors.extend(run_all(&p, &CallOptions::default()).await);
    }
    // Dropped connection, refused connection, refused send.
    let dropper = raw::serve(|sock| async move { drop(sock) }).await;
    let p = AnyProvider::new(settings(kind, &dropper.base)).unwrap();
    errors.extend(run_all(&p, &CallOptions::default()).await);
    let p = AnyProvider::new(settings(kind, "http://127.0.0.1:9/v1")).unwrap();
    errors.extend(run_all(&p, &CallOptions::default()).await);
    let gate = CountingGate::limited(0);
    errors.extend(run_all(&p, &CallOptions::default().with_send_counter(gate)).await);
    // Invalid settings carrying the key.
    errors.push(AnyProvider::new(settings(kind, "not a url")).unwrap_err());
    // Every other kind, with its own key header (Azure `api-key`,
    // Anthropic `x-api-key`, Gemini `x-goog-api-key`), on the echoing 401.
    for kind in [
        ProviderKind::DeepSeek,
        ProviderKind::OpenAiCompatible,
        ProviderKind::AzureOpenAi,
        ProviderKind::Anthropic,
        ProviderKind::Gemini,
    ] {
        let p = AnyProvider::new(settings(kind, &format!("{}/v1", servers[0].uri()))).unwrap();
        debug_dumps.push(format!("{p:?} {:?}", p.settings()));
        errors.extend(run_all(&p, &CallOptions::default()).await);
    }
    // The Responses API on both kinds, on the echoing 401; echoing the key
    // in a failed response, a `response.failed` and a bare `error` event.
    let openai = Case::responses(ProviderKind::OpenAi);
    for kind in [openai, Case::responses(ProviderKind::AzureOpenAi)] {
        let p = AnyProvider::new(settings(kind, &format!("{}/v1", servers[0].uri()))).unwrap();
        debug_dumps.push(format!("{p:?} {:?}", p.settings()));
        errors.extend(run_all(&p, &CallOptions::default()).await);
    }
    let mut failed = bodies::r_response("failed", json!([]), json!(null));
    failed["error"] = json!({"code": "server_error", "message": echo});
    let events = [
        bodies::r_event(json!({"type": "response.failed", "response": failed})),
        bodies::r_event(json!({"type": "error", "code": "rate_limit_exceeded", "message": echo})),
    ];
    for template in [
        ResponseTemplate::new(200).set_body_json(&failed),
        sse(events[0].clone()),
        sse(events[1].clone()),
    ] {
        let server = mock(template).await;
        let p = AnyProvider::new(settings(openai, &format!("{}/v1", server.uri()))).unwrap();
        errors.extend(run_all(&p, &CallOptions::default()).await);
    }
    // Anthropic echoing the key in an in-stream `error` event.
    let anthropic_error = bodies::a_event(bodies::a_error("overloaded_error", &echo));
    let server = mock(sse(anthropic_error)).await;
    let p = AnyProvider::new(settings(
        ProviderKind::Anthropic,
        &format!("{}/v1", server.uri()),
    ))
    .unwrap();
    errors.extend(run_all(&p, &CallOptions::default()).await);
    // Gemini echoing the key in a 400 body and in an in-stream error.
    for template in [
        ResponseTemplate::new(400).set_body_json(bodies::g_error(
            400,
            "INVALID_ARGUMENT",
            &echo,
            json!([]),
        )),
        sse(bodies::g_event(bodies::g_error(
            503,
            "UNAVAILABLE",
            &echo,
            json!([]),
        ))),
    ] {
        let server = mock(template).await;
        let base = format!("{}/v1", server.uri());
        let p = AnyProvider::new(settings(ProviderKind::Gemini, &base)).unwrap();
        errors.extend(run_all(&p, &CallOptions::default()).await);
    }

    // Every path above was taken.
    let classes: std::collections::HashSet<&str> =
        errors.iter().map(|e| e.class().as_str()).collect();
    for want in [
        "auth",
        "server_error",
        "rate_limited",
        "overloaded",
        "decode",
        "malformed_stream",
        "stream_interrupted",
        "timeout",
        "connection_lost",
        "connect",
        "send_refused",
        "other",
    ] {
        assert!(classes.contains(want), "missing {want} in {classes:?}");
    }
    for e in &errors {
        let shown = format!("{e} | {e:?} | {:?}", std::error::Error::source(e));
        assert!(!shown.contains(SENTINEL), "error leaks the key: {shown}");
    }
    for d in &debug_dumps {
        assert!(!d.contains(SENTINEL), "debug leaks the key: {d}");
    }
    let opts = CallOptions::default().with_send_counter(Arc::new(CountingGate::default()));
    assert!(!format!("{opts:?}").contains(SENTINEL));

    let text = logs.text();
    assert!(text.contains("chat"), "logs were captured: {text}");
    assert!(text.contains("error.type"), "error spans were recorded");
    assert!(!text.contains(SENTINEL), "logs leak the key");
    // The echoed message itself still reaches the caller, redacted.
    assert!(errors.iter().any(|e| {
        e.to_string()
            .contains("Incorrect API key provided: [REDACTED]")
    }));
}

#[test]
fn key_from_missing_env_var_names_the_variable_only() {
    let err = ProviderSettings::new("p", ProviderKind::OpenAi, "m")
        .with_api_key_from_env("HANDOVER_TEST_SURELY_UNSET_VAR")
        .unwrap_err();
    assert!(
        err.to_string().contains("HANDOVER_TEST_SURELY_UNSET_VAR"),
        "{err}"
    );
    assert!(!err.was_sent());
}

/// A provider's error text often quotes the request (OpenAI's
/// context-length message, a validation error echoing a value): the caller
/// gets it in the error, the logs (TRACE, captured) only the class, status,
/// code and request id.
#[tokio::test]
async fn provider_error_text_never_reaches_the_logs() {
    let _serial = SERIAL.lock().await;
    const PROMPT: &str = "my card is 4111-1111-1111-1111 PROMPT-SENTINEL-93ab";
    let (logs, _guard) = support::capture_logs();
    let kind = ProviderKind::OpenAi;
    let quoted = format!("Invalid 'messages[0].content': {PROMPT:?} is too long");
    let servers = vec![
        // An HTTP error, for a whole answer and a stream alike.
        mock(
            ResponseTemplate::new(400)
                .insert_header("x-request-id", "req_prompt_1")
                .set_body_json(bodies::error(
                    &quoted,
                    Some("invalid_request_error"),
                    Some("string_above_max_length"),
                )),
        )
        .await,
        // A "code" that is prose quoting the prompt: no code, not logged.
        mock(ResponseTemplate::new(400).set_body_json(bodies::error(
            "too long",
            Some("invalid_request_error"),
            Some(&format!("{PROMPT} is too long")),
        )))
        .await,
        // An error that is not JSON: its text is the message.
        mock(ResponseTemplate::new(500).set_body_string(format!("upstream choked on {PROMPT}")))
            .await,
        // An error event inside a stream.
        mock(sse(format!(
            "data: {}\n\n",
            bodies::error(&quoted, Some("server_error"), None)
        )))
        .await,
        // A chunk of the wrong shape: the decoder's detail quotes it.
        mock(sse(format!(
            "data: {}\n\n",
            json!({"id": "x", "choices": PROMPT})
        )))
        .await,
    ];
    let mut errors = Vec::new();
    for server in &servers {
        let p = AnyProvider::new(settings(kind, &format!("{}/v1", server.uri()))).unwrap();
        let req = ChatRequest::new(vec![Message::user(PROMPT)]);
        if let Err(e) = p.chat(&req, &CallOptions::default()).await {
            errors.push(e);
        }
        match p.chat_stream(&req, &CallOptions::default()).await {
            Err(e) => errors.push(e),
            Ok(mut s) => {
                while let Some(item) = s.next().await {
                    if let Err(e) = item {
                        errors.push(e);
                    }
                }
            }
        }
    }
    let classes: std::collections::HashSet<&str> =
        errors.iter().map(|e| e.class().as_str()).collect();
    for want in [
        "context_length",
        "server_error",
        "decode",
        "malformed_stream",
    ] {
        assert!(classes.contains(want), "missing {want} in {classes:?}");
    }
    // The caller is told what the provider said.
    assert!(
        errors.iter().any(|e| e.to_string().contains(PROMPT)),
        "{errors:?}"
    );

    let text = logs.text();
    for want in [
        "chat attempt failed",
        "chat stream attempt failed",
        "stream ended with an error",
        "malformed stream event",
        "context_length error (status 400, code string_above_max_length, request id req_prompt_1)",
        "server_error error (status 500)",
    ] {
        assert!(text.contains(want), "missing {want:?} in {text}");
    }
    assert!(
        !text.contains("PROMPT-SENTINEL"),
        "logs quote the prompt: {text}"
    );
}

/// Every 8-byte window of `key` found in `text`.
fn key_pieces<'k>(key: &'k str, text: &str) -> Vec<&'k str> {
    (0..=key.len() - 8)
        .map(|i| &key[i..i + 8])
        .filter(|piece| text.contains(piece))
        .collect()
}

/// A provider echoing the key in an error body that is not JSON: the body
/// is cut to a short message, and the key never survives in part, wherever
/// it sits — before, across or after the cut, or across the error body
/// read limit.
#[tokio::test]
async fn a_key_echoed_across_the_message_cut_never_leaks_in_part() {
    let _serial = SERIAL.lock().await;
    const KEY: &str = "sk-proj-Zq8mW3vR7tK2pL9xN4cB6hJ1fD5gS0aE";
    assert_eq!(KEY.len(), 40);
    let offsets = [
        0, 100, 470, 473, 480, 500, 504, 505, 511, 512, 600, 65_520, 70_000,
    ];
    for at in offsets {
        let server = mock(
            ResponseTemplate::new(400).set_body_string(format!("{}{KEY} trailing", "x".repeat(at))),
        )
        .await;
        let p = AnyProvider::new(
            settings(ProviderKind::OpenAi, &format!("{}/v1", server.uri()))
                .with_api_key(SecretString::from(KEY)),
        )
        .unwrap();
        let errors = run_all(&p, &CallOptions::default()).await;
        assert_eq!(errors.len(), 2, "offset {at}: {errors:?}");
        for e in &errors {
            let f = e.api_failure().expect("an API error");
            assert!(f.message.len() <= 512 + "[REDACTED]".len(), "offset {at}");
            for text in [
                f.message.as_str(),
                f.code.as_deref().unwrap_or(""),
                f.param.as_deref().unwrap_or(""),
                &e.to_string(),
                &format!("{e:?}"),
            ] {
                let found = key_pieces(KEY, text);
                assert!(found.is_empty(), "offset {at}: {found:?} in {text:?}");
            }
        }
    }
}
