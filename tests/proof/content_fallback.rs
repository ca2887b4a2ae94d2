//! Scenarios 1, 3 and 4: content generation fails, arrives late, or breaks
//! mid-stream. Retrying the *model* is fine; nothing here may cause an
//! effect, and no answer may be stitched together or presented as whole
//! when it is not.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use handover::PerformOptions;
use handover::PerformOutcome;
use handover::ledger::{AttemptKind, StateKind, Terminal};
use handover::providers::{ErrorClass, StreamEvent};
use handover::router::route::{AttemptResult, RoutedStream, StreamBroken};
use handover_testkit::{After, Flavor, MockDestination, MockProvider, Plan, Reply, TcpProvider};
use tokio::time::Instant;

use crate::support::*;

per_backend! {
    #[tokio::test] content_fails_before_any_action_and_the_fallback_answers,
    #[tokio::test] a_late_primary_answer_is_abandoned_and_triggers_nothing,
    #[tokio::test] a_hedged_primary_that_answers_late_is_recorded_as_late_and_triggers_nothing,
    #[tokio::test] a_late_tool_call_after_the_fallback_acted_is_replayed_never_executed,
    #[tokio::test] a_stream_cut_before_commit_falls_back_whole_and_keeps_the_partial_apart,
    #[tokio::test] a_stream_cut_after_commit_is_an_explicit_error_never_a_short_answer,
    #[tokio::test] a_stalled_stream_with_keepalives_falls_back_on_the_idle_timeout,
}

/// Timeouts for paused-time scenarios (virtual seconds cost nothing).
const PAUSED: &str =
    "connect = \"1s\"\nfirst_byte = \"10s\"\nfirst_token = \"5s\"\nidle = \"5s\"\ntotal = \"60s\"";

/// Scenario 1: the primary drops the connection on every call before any
/// action was proposed; the fallback generates the answer; no effect.
pub async fn content_fails_before_any_action_and_the_fallback_answers(run: Run) {
    let store = run.store().await;
    let primary = MockProvider::start(Flavor::OpenAi).await;
    let fallback = MockProvider::start(Flavor::DeepSeek).await;
    let dest = MockDestination::builder()
        .clock(Arc::new(store.clock.clone()))
        .start()
        .await;
    primary.set_default(Reply::Drop);
    fallback.script([Reply::text(
        "Sorry about the kettle. I can send a replacement to 12 Rue Cler; shall I?",
    )]);
    let config = config(
        &primary.base_url(),
        &fallback.base_url(),
        "max_requests = 4",
        RELAXED,
        SHIP_NO_RECOVERY,
    );
    let router = router(&config);

    let task = router.task("default").unwrap();
    let done = router.chat(&task, &user_turn()).await.unwrap();

    assert_eq!(done.provider, "fallback");
    assert_eq!(done.response.model, Flavor::DeepSeek.answering_model());
    assert!(
        done.response
            .content
            .as_deref()
            .unwrap()
            .contains("replacement")
    );
    assert!(done.response.tool_calls.is_empty());
    let tried: Vec<_> = done
        .attempts
        .iter()
        .map(|a| (a.provider.as_str(), a.result))
        .collect();
    assert_eq!(
        tried,
        [
            ("primary", AttemptResult::Failed(ErrorClass::ConnectionLost)),
            ("primary", AttemptResult::Failed(ErrorClass::ConnectionLost)),
            ("fallback", AttemptResult::Answered),
        ],
        "failed attempts are attempts, not completions"
    );
    assert_eq!(primary.requests().await, 2, "retried once, then moved on");
    assert_eq!(fallback.requests().await, 1);
    assert_eq!(
        done.spent.requests, 3,
        "every request counted at the transport"
    );

    assert_eq!(dest.action_requests().await, 0);
    assert_eq!(dest.effect_count(), 0);
    assert!(store.all().await.is_empty(), "no operation was begun");

    run.score.task(true);
    run.settle(&store, Some(&dest)).await;
}

/// Scenario 3 (router side): the primary answers — with a tool call — only
/// after its first-byte timeout. The router has already moved on: the
/// answer comes whole from the fallback, the primary's attempt is recorded
/// as a failed, sent attempt, and when the primary's late answer is finally
/// written it reaches nobody: no operation, no effect, no second request.
pub async fn a_late_primary_answer_is_abandoned_and_triggers_nothing(run: Run) {
    let store = run.store().await;
    tokio::time::pause(); // provider time is virtual from here on
    let primary = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    let fallback = TcpProvider::start(Flavor::DeepSeek).await.unwrap();
    primary.script([
        Plan::tool_call(Flavor::OpenAi, "call_primary_1", SHIP, &shipment())
            .delayed(Duration::from_secs(30)),
    ]);
    fallback.script([Plan::text(
        Flavor::DeepSeek,
        "A replacement kettle can be sent; please confirm the address.",
    )]);
    let config = config(
        primary.base_url(),
        fallback.base_url(),
        "",
        PAUSED,
        SHIP_NO_RECOVERY,
    );
    let router = router(&config);

    let start = Instant::now();
    let task = router.task("default").unwrap();
    let done = router.chat(&task, &user_turn()).await.unwrap();
    let waited = start.elapsed();

    assert_eq!(done.provider, "fallback");
    assert!(
        done.response.tool_calls.is_empty(),
        "the primary's tool call is not in the answer"
    );
    assert!(
        waited >= Duration::from_secs(10) && waited < Duration::from_secs(11),
        "fell back at the first-byte timeout, not when the primary answered ({waited:?})"
    );
    let abandoned = &done.attempts[0];
    assert_eq!(abandoned.provider, "primary");
    assert_eq!(abandoned.result, AttemptResult::Failed(ErrorClass::Timeout));
    assert!(
        abandoned.sent,
        "the abandoned request did reach the primary"
    );

    // The primary writes its answer at t = 30 s, to a connection the router
    // has closed. Nothing follows from it.
    tokio::time::advance(Duration::from_secs(60)).await;
    assert_eq!(primary.requests(), 1, "never re-sent");
    assert_eq!(fallback.requests(), 1);
    assert_eq!(task.budget().requests_sent(), 2);
    tokio::time::resume(); // the ledger's pool works in real time
    assert!(
        store.all().await.is_empty(),
        "the late tool call began no operation"
    );

    run.score.task(true);
    run.settle(&store, None).await;
}

/// Scenario 3 with `hedge_after`: the router stops waiting for the slow
/// primary after 2 s *without cancelling it*, and the fallback answers. When
/// the primary's answer (a tool call) arrives at 8 s (inside its own
/// first-byte timeout) it is recorded on the
/// task as a late attempt — and triggers nothing: no operation, no effect,
/// no second request, the answer unchanged.
pub async fn a_hedged_primary_that_answers_late_is_recorded_as_late_and_triggers_nothing(run: Run) {
    let store = run.store().await;
    tokio::time::pause();
    let primary = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    let fallback = TcpProvider::start(Flavor::DeepSeek).await.unwrap();
    primary.script([
        Plan::tool_call(Flavor::OpenAi, "call_primary_1", SHIP, &shipment())
            .delayed(Duration::from_secs(8)),
    ]);
    fallback.script([Plan::text(
        Flavor::DeepSeek,
        "A replacement kettle can be sent.",
    )]);
    let config = config(
        primary.base_url(),
        fallback.base_url(),
        "hedge_after = \"2s\"",
        PAUSED,
        SHIP_NO_RECOVERY,
    );
    let router = router(&config);

    let start = Instant::now();
    let task = router.task("default").unwrap();
    let done = router.chat(&task, &user_turn()).await.unwrap();
    assert_eq!(done.provider, "fallback");
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "moved on at the hedge, not the timeout"
    );
    assert_eq!(done.attempts[0].result, AttemptResult::Abandoned);
    assert!(task.late_attempts().is_empty());

    // Sleep (virtual time, auto-advanced timer by timer) so the primary's
    // answer at 8 s is written and read before its 10 s first-byte timeout.
    #[allow(clippy::disallowed_methods)]
    tokio::time::sleep(Duration::from_secs(60)).await;
    let late = task.late_attempts();
    assert_eq!(late.len(), 1, "{late:?}");
    assert_eq!(
        (late[0].provider.as_str(), late[0].result, late[0].late),
        ("primary", AttemptResult::Answered, true)
    );
    assert!(
        done.response.tool_calls.is_empty(),
        "the answer is unchanged"
    );
    assert_eq!((primary.requests(), fallback.requests()), (1, 1));
    tokio::time::resume();
    assert!(
        store.all().await.is_empty(),
        "the late tool call began no operation"
    );

    run.score.task(true);
    run.settle(&store, None).await;
}

/// Scenario 3 (application side): an application that races the primary
/// against the fallback itself (a hedge) does receive the primary's late
/// answer — a tool call with its own id for the action the fallback already
/// performed. Mapped through the user's approval it is the same operation:
/// the recorded outcome is replayed and nothing is executed again.
pub async fn a_late_tool_call_after_the_fallback_acted_is_replayed_never_executed(run: Run) {
    let store = run.store().await;
    let primary = MockProvider::start(Flavor::OpenAi).await;
    let fallback = MockProvider::start(Flavor::DeepSeek).await;
    let dest = MockDestination::builder()
        .clock(Arc::new(store.clock.clone()))
        .start()
        .await;
    primary.script([
        Reply::tool_call("call_primary_1", SHIP, shipment()).after(Duration::from_millis(500))
    ]);
    fallback.script([Reply::tool_call(
        "call_fallback_1",
        SHIP,
        shipment_reordered(),
    )]);
    let hedges = "[policies.primary_only]\nchain = [\"primary\"]\n\
                  [policies.fallback_only]\nchain = [\"fallback\"]\n";
    let config = config(
        &primary.base_url(),
        &fallback.base_url(),
        "",
        RELAXED,
        &format!("{SHIP_NO_RECOVERY}{hedges}"),
    );
    let router = router(&config);
    let gate = store.gate(&config, "agent-backend");
    let exec = executor(&dest);
    let approved = approval("K-701");

    let slow = {
        let router = router.clone();
        let task = router.task("primary_only").unwrap();
        tokio::spawn(async move { router.chat(&task, &user_turn()).await })
    };
    let quick = router
        .chat(&router.task("fallback_only").unwrap(), &user_turn())
        .await
        .unwrap();
    let first = gate
        .perform_call(
            &proposed(&quick),
            &approved,
            &exec,
            PerformOptions::default(),
        )
        .await
        .unwrap();
    assert!(
        matches!(first, PerformOutcome::Confirmed { attempt: 1, .. }),
        "{first:?}"
    );

    let late = slow.await.unwrap().unwrap();
    assert_eq!(late.provider, "primary");
    let late_call = proposed(&late);
    assert_eq!(late_call.tool_call_id, "call_primary_1");
    let replayed = gate
        .perform_call(&late_call, &approved, &exec, PerformOptions::default())
        .await
        .unwrap();
    assert!(
        matches!(
            replayed,
            PerformOutcome::Replayed(Terminal::Confirmed { .. })
        ),
        "{replayed:?}"
    );

    assert_eq!(dest.action_requests().await, 1);
    assert_eq!(dest.effect_count(), 1);
    let rec = store.record(SCOPE, "K-701").await;
    assert_eq!(rec.state.kind(), StateKind::Confirmed);
    let dispatches: Vec<_> = store
        .ledger()
        .attempts(&rec.id)
        .await
        .unwrap()
        .into_iter()
        .filter(|a| a.kind == AttemptKind::Dispatch)
        .collect();
    assert_eq!(dispatches.len(), 1);
    assert_eq!(
        dispatches[0].metadata.as_ref().unwrap()["tool_call_id"],
        "call_fallback_1",
        "the tool-call id is attempt metadata; the late one never dispatched"
    );

    run.score.task(true);
    run.settle(&store, Some(&dest)).await;
}

/// Reads a routed stream to its end: the text delivered, and the error that
/// ended it, if any.
async fn read_all(mut s: RoutedStream) -> (String, Option<StreamBroken>) {
    let mut text = String::new();
    while let Some(ev) = s.next().await {
        match ev {
            Ok(StreamEvent::ContentDelta(t)) => text.push_str(&t),
            Ok(_) => {}
            Err(broken) => return (text, Some(broken)),
        }
    }
    (text, None)
}

fn events(flavor: Flavor, parts: &[&str], complete: bool) -> Vec<String> {
    handover_testkit::bodies::text_stream(flavor, parts, complete, complete)
}

/// Scenario 4, commit on completion: the primary's stream is cut after
/// partial text; the caller sees nothing of it. The answer comes whole from
/// the fallback, and the partial is kept apart, attributed to the primary.
pub async fn a_stream_cut_before_commit_falls_back_whole_and_keeps_the_partial_apart(run: Run) {
    let store = run.store().await;
    tokio::time::pause(); // provider time is virtual from here on
    let primary = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    let fallback = TcpProvider::start(Flavor::DeepSeek).await.unwrap();
    primary.script([Plan::sse(
        events(
            Flavor::OpenAi,
            &["Your replacement", " kettle ships"],
            false,
        ),
        After::Close,
    )]);
    fallback.script([Plan::sse(
        events(
            Flavor::DeepSeek,
            &["A new kettle", " ships tomorrow."],
            true,
        ),
        After::Close,
    )]);
    let config = config(
        primary.base_url(),
        fallback.base_url(),
        "commit_point = \"complete\"",
        PAUSED,
        "",
    );
    let router = router(&config);

    let stream = router
        .chat_stream(&router.task("default").unwrap(), &user_turn())
        .await
        .unwrap();
    assert_eq!(stream.provider(), "fallback");
    assert_eq!(
        stream.attempts()[0].result,
        AttemptResult::Failed(ErrorClass::StreamInterrupted)
    );
    let partials = stream.partials().to_vec();
    let (text, broken) = read_all(stream).await;

    assert_eq!(
        text, "A new kettle ships tomorrow.",
        "whole, from one provider"
    );
    assert!(broken.is_none());
    assert_eq!(partials.len(), 1);
    assert_eq!(partials[0].provider, "primary");
    assert_eq!(partials[0].text, "Your replacement kettle ships");
    assert!(!text.contains("Your replacement"), "never stitched");
    assert_eq!((primary.requests(), fallback.requests()), (1, 1));
    tokio::time::resume(); // the ledger's pool works in real time
    assert!(store.all().await.is_empty());

    run.score.task(true);
    run.settle(&store, None).await;
}

/// Scenario 4, commit at the first token: the caller already has part of the
/// answer when the stream is cut, so it ends with an explicit error naming
/// the provider — never a truncated answer presented as complete, never
/// another provider's text appended.
pub async fn a_stream_cut_after_commit_is_an_explicit_error_never_a_short_answer(run: Run) {
    let store = run.store().await;
    tokio::time::pause(); // provider time is virtual from here on
    let primary = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    let fallback = TcpProvider::start(Flavor::DeepSeek).await.unwrap();
    primary.script([Plan::sse(
        events(
            Flavor::OpenAi,
            &["Your replacement", " kettle ships"],
            false,
        ),
        After::Close,
    )]);
    let config = config(
        primary.base_url(),
        fallback.base_url(),
        "commit_point = \"first_token\"",
        PAUSED,
        "",
    );
    let router = router(&config);

    let stream = router
        .chat_stream(&router.task("default").unwrap(), &user_turn())
        .await
        .unwrap();
    assert_eq!(stream.provider(), "primary");
    let (text, broken) = read_all(stream).await;

    assert_eq!(text, "Your replacement kettle ships");
    let broken = broken.expect("a cut stream ends with an error");
    assert_eq!(broken.provider, "primary");
    assert_eq!(broken.class, ErrorClass::StreamInterrupted);
    assert_eq!(broken.events, 2);
    assert_eq!(
        (primary.requests(), fallback.requests()),
        (1, 0),
        "after the commit point nothing is stitched on from another provider"
    );
    tokio::time::resume(); // the ledger's pool works in real time
    assert!(store.all().await.is_empty());

    run.score.task(false);
    run.settle(&store, None).await;
}

/// Scenario 4, a stream that stalls after partial text while sending
/// keep-alives: keep-alives are not progress, so the idle timeout fires on
/// time and (before the commit point) the fallback answers whole.
pub async fn a_stalled_stream_with_keepalives_falls_back_on_the_idle_timeout(run: Run) {
    let store = run.store().await;
    tokio::time::pause(); // provider time is virtual from here on
    let primary = TcpProvider::start(Flavor::OpenAi).await.unwrap();
    let fallback = TcpProvider::start(Flavor::DeepSeek).await.unwrap();
    primary.script([Plan::sse(
        events(Flavor::OpenAi, &["Checking the warehouse"], false),
        After::KeepAlive(Duration::from_millis(100)),
    )]);
    fallback.script([Plan::sse(
        events(Flavor::DeepSeek, &["The kettle ships tomorrow."], true),
        After::Close,
    )]);
    let config = config(
        primary.base_url(),
        fallback.base_url(),
        "commit_point = \"complete\"",
        PAUSED,
        "",
    );
    let router = router(&config);

    let start = Instant::now();
    let stream = router
        .chat_stream(&router.task("default").unwrap(), &user_turn())
        .await
        .unwrap();
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_secs(5) && waited < Duration::from_secs(6),
        "the idle timeout counts data events only ({waited:?})"
    );
    assert_eq!(
        stream.attempts()[0].result,
        AttemptResult::Failed(ErrorClass::StreamStalled)
    );
    assert_eq!(stream.partials()[0].text, "Checking the warehouse");
    let (text, broken) = read_all(stream).await;
    assert_eq!(
        (text.as_str(), broken),
        ("The kettle ships tomorrow.", None)
    );
    assert_eq!((primary.requests(), fallback.requests()), (1, 1));
    tokio::time::resume(); // the ledger's pool works in real time
    assert!(store.all().await.is_empty());

    run.score.task(true);
    run.settle(&store, None).await;
}
