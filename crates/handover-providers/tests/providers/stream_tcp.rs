//! Streams wiremock cannot produce, served by a raw TCP server on the test's
//! runtime: cut after N events, stalled before the first token or between
//! events, kept "alive" only by comments. Time is paused: deadlines fire at
//! exactly their virtual instant, with no real waiting.

use crate::support;

use std::time::Duration;

use futures::StreamExt;
use handover_providers::{
    AnyProvider, CallOptions, ChatRequest, ErrorClass, Message, Provider, ProviderError,
    ProviderKind, StreamEvent, TimeoutPhase, Timeouts,
};
use serde_json::json;
use support::{bodies, raw};
use tokio::time::Instant;

const KIND: ProviderKind = ProviderKind::DeepSeek;

fn timeouts() -> Timeouts {
    support::tight()
}

fn provider(base: &str) -> AnyProvider {
    AnyProvider::new(support::settings(KIND, base).with_timeouts(timeouts())).unwrap()
}

fn req() -> ChatRequest {
    ChatRequest::new(vec![Message::user("hello")])
}

fn delta(text: &str) -> String {
    bodies::chunk(KIND, json!({"content": text}), None)
}

/// Drains the stream; returns the data events and the terminal error.
async fn drain(p: &AnyProvider) -> (Vec<StreamEvent>, ProviderError, Duration) {
    let start = Instant::now();
    let mut s = p
        .chat_stream(&req(), &CallOptions::default())
        .await
        .unwrap();
    let mut events = Vec::new();
    while let Some(item) = s.next().await {
        match item {
            Ok(ev) => events.push(ev),
            Err(e) => return (events, e, start.elapsed()),
        }
    }
    panic!("stream ended without an error after {events:?}");
}

#[tokio::test(start_paused = true)]
async fn stream_cut_after_n_events_is_interrupted() {
    let server = raw::serve(|mut sock| async move {
        raw::sse_head(&mut sock).await;
        for t in ["a", "b", "c"] {
            raw::write(&mut sock, &delta(t)).await;
        }
        // Connection closes: no finish reason, no [DONE].
    })
    .await;
    let (events, err, _) = drain(&provider(&server.base)).await;
    assert_eq!(err.class(), ErrorClass::StreamInterrupted, "{err}");
    assert_eq!(err.partial_events(), Some(3));
    assert!(err.is_retryable());
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ContentDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "abc");
    assert_eq!(server.requests(), 1);
}

#[tokio::test(start_paused = true)]
async fn chunked_stream_broken_mid_body_is_interrupted() {
    let server = raw::serve(|mut sock| async move {
        raw::sse_head_chunked(&mut sock).await;
        raw::chunk(&mut sock, &delta("a")).await;
        raw::chunk(&mut sock, &delta("b")).await;
        // Half a chunk, then close: the body is incomplete at the HTTP level.
        raw::write(&mut sock, "40\r\ndata: {\"cho").await;
    })
    .await;
    let (events, err, _) = drain(&provider(&server.base)).await;
    assert_eq!(err.class(), ErrorClass::StreamInterrupted, "{err}");
    assert_eq!(err.partial_events(), Some(2));
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, StreamEvent::ContentDelta(_)))
            .count(),
        2
    );
}

#[tokio::test(start_paused = true)]
async fn first_token_timeout_fires_on_time() {
    let server = raw::serve(|mut sock| async move {
        raw::sse_head(&mut sock).await;
        raw::hold(sock).await;
    })
    .await;
    let (events, err, elapsed) = drain(&provider(&server.base)).await;
    assert!(events.is_empty());
    assert_eq!(err.class(), ErrorClass::StreamStalled, "{err}");
    assert_eq!(err.timeout_phase(), Some(TimeoutPhase::FirstToken));
    assert_eq!(err.partial_events(), Some(0));
    assert!(err.was_sent());
    assert!(
        elapsed >= Duration::from_secs(2) && elapsed < Duration::from_millis(2100),
        "{elapsed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn idle_timeout_fires_on_time_after_last_data_event() {
    let server = raw::serve(|mut sock| async move {
        raw::sse_head(&mut sock).await;
        // Paced by (paused) tokio time: the first tick is immediate.
        let mut pace = tokio::time::interval(Duration::from_millis(500));
        pace.tick().await;
        raw::write(&mut sock, &delta("a")).await;
        pace.tick().await;
        raw::write(&mut sock, &delta("b")).await;
        raw::hold(sock).await;
    })
    .await;
    let (events, err, elapsed) = drain(&provider(&server.base)).await;
    assert_eq!(err.class(), ErrorClass::StreamStalled, "{err}");
    assert_eq!(err.timeout_phase(), Some(TimeoutPhase::Idle));
    assert_eq!(err.partial_events(), Some(2));
    assert!(events.len() >= 2);
    // Last data at 0.5 s, idle 1 s: fires at 1.5 s.
    assert!(
        elapsed >= Duration::from_millis(1500) && elapsed < Duration::from_millis(1600),
        "{elapsed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn keepalive_comments_do_not_keep_a_stalled_stream_alive() {
    let server = raw::serve(|mut sock| async move {
        raw::sse_head(&mut sock).await;
        raw::write(&mut sock, &delta("a")).await;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tick.tick().await;
            raw::write(&mut sock, ": keep-alive\n\n\n").await;
        }
    })
    .await;
    let (_, err, elapsed) = drain(&provider(&server.base)).await;
    assert_eq!(err.timeout_phase(), Some(TimeoutPhase::Idle), "{err}");
    assert!(
        elapsed >= Duration::from_secs(1) && elapsed < Duration::from_millis(1100),
        "{elapsed:?}"
    );

    // Before the first token as well.
    let server = raw::serve(|mut sock| async move {
        raw::sse_head(&mut sock).await;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tick.tick().await;
            raw::write(&mut sock, ": keep-alive\n\n").await;
        }
    })
    .await;
    let (_, err, elapsed) = drain(&provider(&server.base)).await;
    assert_eq!(err.timeout_phase(), Some(TimeoutPhase::FirstToken), "{err}");
    assert!(
        elapsed >= Duration::from_secs(2) && elapsed < Duration::from_millis(2100),
        "{elapsed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn total_deadline_ends_a_stream_that_keeps_talking() {
    let server = raw::serve(|mut sock| async move {
        raw::sse_head(&mut sock).await;
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        loop {
            tick.tick().await;
            raw::write(&mut sock, &delta("x")).await;
        }
    })
    .await;
    let p = provider(&server.base);
    let t = Timeouts {
        total: Duration::from_secs(3),
        ..timeouts()
    };
    let start = Instant::now();
    let mut s = p
        .chat_stream(&req(), &CallOptions::default().with_timeouts(t))
        .await
        .unwrap();
    let mut n = 0;
    let err = loop {
        match s.next().await.unwrap() {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(err.class(), ErrorClass::Timeout, "{err}");
    assert_eq!(err.timeout_phase(), Some(TimeoutPhase::Total));
    assert!(n >= 10, "{n} events before the deadline");
    let elapsed = start.elapsed();
    assert!(
        elapsed >= Duration::from_secs(3) && elapsed < Duration::from_millis(3100),
        "{elapsed:?}"
    );
    assert!(s.next().await.is_none(), "a timed-out stream is over");
}

#[tokio::test(start_paused = true)]
async fn no_response_headers_is_a_first_byte_timeout_with_one_request() {
    let server = raw::serve(|sock| async move { raw::hold(sock).await }).await;
    let p = provider(&server.base);
    let start = Instant::now();
    let err = p.chat(&req(), &CallOptions::default()).await.unwrap_err();
    assert_eq!(err.timeout_phase(), Some(TimeoutPhase::FirstByte), "{err}");
    assert_eq!(err.class(), ErrorClass::Timeout);
    assert!(err.was_sent());
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    let err = p
        .chat_stream(&req(), &CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.timeout_phase(), Some(TimeoutPhase::FirstByte), "{err}");
    assert_eq!(server.requests(), 2, "one request per call");
}

/// A stream's headers have their own, shorter deadline; a whole answer
/// still gets `first_byte` (its headers come only once it is generated).
#[tokio::test(start_paused = true)]
async fn a_stream_without_headers_is_left_after_stream_first_byte() {
    let server = raw::serve(|sock| async move { raw::hold(sock).await }).await;
    let short = Timeouts {
        stream_first_byte: Duration::from_secs(1),
        ..timeouts()
    };
    let p = AnyProvider::new(support::settings(KIND, &server.base).with_timeouts(short)).unwrap();
    let start = Instant::now();
    let err = p
        .chat_stream(&req(), &CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        err.timeout_phase(),
        Some(TimeoutPhase::StreamFirstByte),
        "{err}"
    );
    assert_eq!(err.class(), ErrorClass::Timeout);
    assert!(err.was_sent());
    assert!(err.to_string().contains("stream_first_byte"), "{err}");
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    let start = Instant::now();
    let err = p.chat(&req(), &CallOptions::default()).await.unwrap_err();
    assert_eq!(err.timeout_phase(), Some(TimeoutPhase::FirstByte), "{err}");
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    assert_eq!(server.requests(), 2, "one request per call");
}

/// `stream_first_byte` ends at the headers: the wait for the first token
/// after them is `first_token`'s, however long the headers took.
#[tokio::test(start_paused = true)]
#[allow(clippy::disallowed_methods)] // the mock server's own delays, in paused time
async fn stream_first_byte_does_not_cut_the_wait_for_the_first_token() {
    let server = raw::serve(|mut sock| async move {
        tokio::time::sleep(Duration::from_millis(900)).await;
        raw::sse_head(&mut sock).await;
        tokio::time::sleep(Duration::from_millis(1_900)).await;
        raw::write(&mut sock, &delta("late but in time")).await;
        raw::write(&mut sock, &bodies::finish_and_done(KIND)).await;
        raw::hold(sock).await;
    })
    .await;
    let short = Timeouts {
        stream_first_byte: Duration::from_secs(1),
        ..timeouts()
    };
    let p = AnyProvider::new(support::settings(KIND, &server.base).with_timeouts(short)).unwrap();
    let resp = p
        .chat_stream(&req(), &CallOptions::default())
        .await
        .unwrap()
        .into_response()
        .await
        .unwrap();
    assert_eq!(resp.content.as_deref(), Some("late but in time"));
}

#[tokio::test(start_paused = true)]
async fn per_call_timeouts_capped_by_budget_apply() {
    let server = raw::serve(|sock| async move { raw::hold(sock).await }).await;
    let p = provider(&server.base);
    let start = Instant::now();
    let capped = timeouts().capped(Duration::from_millis(750));
    let err = p
        .chat(&req(), &CallOptions::default().with_timeouts(capped))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Timeout, "{err}");
    assert_eq!(start.elapsed(), Duration::from_millis(750));
}
