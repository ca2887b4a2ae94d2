//! Streamed chat answers over SSE, following the policy's commit point.
//!
//! The router opens the stream and falls back invisibly until the commit
//! point. If that happens within one keep-alive interval, the response
//! starts with the usual headers (`x-handover-provider`,
//! `x-handover-attempts`), and a call that fails before committing gets a
//! plain JSON error status. If it takes longer, the gateway starts the SSE
//! response and sends keep-alive comments while it waits, so clients and
//! proxies do not time out; a failure then arrives as an OpenAI-style error
//! event. The first chunk names the answering provider and attempts either
//! way. After the commit, a broken stream ends with an error event and
//! **without** `[DONE]`: a client never takes a truncated answer for a
//! complete one. `[DONE]` is sent only when the provider's stream completed.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use handover_router::RouterError;
use handover_router::config::Config;
use handover_router::route::{RoutedStream, Task};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::chat::{now_secs, router_error};
use super::request::Parsed;
use super::response::{Chunker, attempts_header, header_value};
use crate::state::GatewayState;

/// The router's stream opening, aborted if the client goes away first.
struct Opening(JoinHandle<Result<RoutedStream, RouterError>>);

impl Drop for Opening {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Opening {
    async fn wait(&mut self) -> Result<RoutedStream, RouterError> {
        match (&mut self.0).await {
            Ok(r) => r,
            Err(e) => Err(RouterError::Unsupported(format!(
                "the stream opening task failed: {e}"
            ))),
        }
    }
}

enum Phase {
    Waiting(Opening, Chunker, Config),
    Open(RoutedStream, Chunker),
    Done,
}

pub(crate) async fn respond(
    state: GatewayState,
    task: Task,
    parsed: Parsed,
    id: String,
) -> Response {
    let keepalive = state.settings().keepalive;
    let router = state.router().clone();
    let req = parsed.request;
    let mut opening = Opening(tokio::spawn(async move {
        router.chat_stream(&task, &req).await
    }));
    let chunker = Chunker {
        id,
        created: now_secs(),
        model: String::new(),
        include_usage: parsed.include_usage,
    };
    match tokio::time::timeout(keepalive, opening.wait()).await {
        Ok(Ok(stream)) => {
            let provider = header_value(stream.provider());
            let attempts = attempts_header(stream.attempts());
            let chunker = with_model(state.config(), &stream, chunker);
            let mut resp = sse(events(Phase::Open(stream, chunker)), keepalive);
            let h = resp.headers_mut();
            h.insert("x-handover-provider", provider);
            h.insert("x-handover-attempts", attempts);
            resp
        }
        Ok(Err(e)) => router_error(&e).into_response(),
        Err(_waited) => sse(
            events(Phase::Waiting(opening, chunker, state.config().clone())),
            keepalive,
        ),
    }
}

fn with_model(config: &Config, stream: &RoutedStream, mut chunker: Chunker) -> Chunker {
    chunker.model = config
        .provider(stream.provider())
        .map(|p| p.model.clone())
        .unwrap_or_default();
    chunker
}

fn sse(
    events: impl Stream<Item = Result<Event, Infallible>> + Send + 'static,
    keepalive: Duration,
) -> Response {
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(keepalive).text("keep-alive"))
        .into_response()
}

fn data(v: &Value) -> Result<Event, Infallible> {
    Ok(Event::default().data(v.to_string()))
}

fn error_event(message: String, code: &str) -> Result<Event, Infallible> {
    data(
        &json!({"error": {"message": message, "type": "server_error", "param": null, "code": code}}),
    )
}

/// The SSE events: (the opening, if still pending), the role chunk, one
/// chunk per provider event, then `[DONE]` or an error event.
fn events(start: Phase) -> impl Stream<Item = Result<Event, Infallible>> + Send + 'static {
    // `opened`: the role chunk was sent.
    futures::stream::unfold((start, false), |(phase, opened)| async move {
        match phase {
            Phase::Done => None,
            Phase::Waiting(mut opening, chunker, config) => match opening.wait().await {
                Ok(stream) => {
                    let chunker = with_model(&config, &stream, chunker);
                    let ev = data(&chunker.opening(stream.provider(), stream.attempts()));
                    Some((ev, (Phase::Open(stream, chunker), true)))
                }
                Err(e) => {
                    let code = router_error(&e).code;
                    Some((error_event(e.to_string(), code), (Phase::Done, true)))
                }
            },
            Phase::Open(stream, chunker) if !opened => {
                let ev = data(&chunker.opening(stream.provider(), stream.attempts()));
                Some((ev, (Phase::Open(stream, chunker), true)))
            }
            Phase::Open(mut stream, mut chunker) => loop {
                match stream.next().await {
                    Some(Ok(ev)) => {
                        if let Some(v) = chunker.event(ev) {
                            break Some((data(&v), (Phase::Open(stream, chunker), true)));
                        }
                    }
                    Some(Err(broken)) => {
                        break Some((
                            error_event(broken.to_string(), "stream_broken"),
                            (Phase::Done, true),
                        ));
                    }
                    None if stream.is_complete() => {
                        break Some((Ok(Event::default().data("[DONE]")), (Phase::Done, true)));
                    }
                    None => break None,
                }
            },
        }
    })
}
