//! The content path: real adapters against mock providers on the test's own
//! runtime (paused tokio time), counting requests at each mock.

#![allow(clippy::disallowed_methods)] // paused-time tests sleep to let virtual time pass

use std::time::Duration;

use futures::StreamExt;
use handover_providers::ErrorClass;
use handover_router::route::{AttemptResult, FailureReason, Router, SkipReason};
use handover_testkit::{After, Flavor, Plan, TcpProvider, bodies};
use tokio::time::Instant;

use crate::support;

use support::chain::{hello, status};

struct Mocks {
    primary: TcpProvider,
    fallback: TcpProvider,
    third: TcpProvider,
}

async fn mocks() -> Mocks {
    Mocks {
        primary: TcpProvider::start(Flavor::OpenAi).await.unwrap(),
        fallback: TcpProvider::start(Flavor::DeepSeek).await.unwrap(),
        third: TcpProvider::start(Flavor::OpenAi).await.unwrap(),
    }
}

/// Three providers (OpenAI adapter, DeepSeek adapter, OpenAI-compatible
/// adapter) and one policy; `policy_extra` is appended to `[policies.default]`.
fn router(m: &Mocks, policy_extra: &str, provider_extra: &str) -> Router {
    let provider = |name: &str, kind: &str, url: &str, model: &str, classes: &str| {
        format!(
            "[providers.{name}]\nkind = \"{kind}\"\nbase_url = \"{url}\"\nmodel = \"{model}\"\ndata_classes = {classes}\n{provider_extra}\n[providers.{name}.timeouts]\nconnect = \"1s\"\nfirst_byte = \"10s\"\nfirst_token = \"5s\"\nidle = \"5s\"\ntotal = \"60s\"\n"
        )
    };
    let text = format!(
        "[ledger]\nbackend = \"memory\"\n{}{}{}\n[policies.default]\nchain = [\"primary\", \"fallback\", \"third\"]\ndeadline = \"30s\"\n{policy_extra}\n[policies.default.backoff]\ninitial = \"100ms\"\nmax = \"2s\"\njitter = false\n",
        provider(
            "primary",
            "openai",
            m.primary.base_url(),
            "gpt-4o-mini",
            "[\"public\"]"
        ),
        provider(
            "fallback",
            "deepseek",
            m.fallback.base_url(),
            "deepseek-chat",
            "[\"public\"]"
        ),
        provider(
            "third",
            "openai_compatible",
            m.third.base_url(),
            "local",
            "[\"public\", \"confidential\"]"
        ),
    );
    support::chain::router(&text)
}

fn requests(m: &Mocks) -> [usize; 3] {
    [
        m.primary.requests(),
        m.fallback.requests(),
        m.third.requests(),
    ]
}

fn sent(attempts: &[handover_router::route::Attempt]) -> usize {
    attempts.iter().filter(|a| a.sent).count()
}

#[tokio::test(start_paused = true)]
async fn rate_limit_with_retry_after_that_fits_waits_and_retries_the_same_provider() {
    let m = mocks().await;
    m.primary.script([
        status(429, "Rate limit reached", Some("rate_limit_exceeded")).header("retry-after", "2"),
    ]);
    let r = router(&m, "", "");
    let task = r.task("default").unwrap();
    let start = Instant::now();
    let done = r.chat(&task, &hello()).await.unwrap();
    assert_eq!(done.provider, "primary");
    assert!(
        start.elapsed() >= Duration::from_secs(2),
        "retried before Retry-After"
    );
    assert_eq!(requests(&m), [2, 0, 0]);
    assert_eq!(sent(&done.attempts), 2);
    assert_eq!(done.spent.requests, 2);
}

#[tokio::test(start_paused = true)]
async fn rate_limit_with_retry_after_beyond_the_budget_fails_over_now() {
    let m = mocks().await;
    m.primary.script([
        status(429, "Rate limit reached", Some("rate_limit_exceeded")).header("retry-after", "120"),
    ]);
    let r = router(&m, "", "");
    let task = r.task("default").unwrap();
    let start = Instant::now();
    let done = r.chat(&task, &hello()).await.unwrap();
    assert_eq!(done.provider, "fallback");
    assert_eq!(
        done.response.model,
        bodies::Flavor::DeepSeek.answering_model()
    );
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "did not sleep a wait that cannot fit"
    );
    assert_eq!(requests(&m), [1, 1, 0]);
    assert_eq!(
        done.attempts[0].result,
        AttemptResult::Failed(ErrorClass::RateLimited)
    );
}

#[tokio::test(start_paused = true)]
async fn persistent_rate_limit_backs_off_then_falls_back() {
    let m = mocks().await;
    m.primary.set_default(status(
        429,
        "Rate limit reached",
        Some("rate_limit_exceeded"),
    ));
    let r = router(&m, "", "");
    let task = r.task("default").unwrap();
    let start = Instant::now();
    let done = r.chat(&task, &hello()).await.unwrap();
    assert_eq!(done.provider, "fallback");
    assert_eq!(
        requests(&m),
        [2, 1, 0],
        "two attempts per provider, never hammering"
    );
    assert!(
        start.elapsed() >= Duration::from_millis(100),
        "backed off between retries"
    );
}

#[tokio::test(start_paused = true)]
async fn server_error_once_then_success_retries_the_same_provider() {
    let m = mocks().await;
    m.primary
        .script([status(500, "The server had an error", None)]);
    let r = router(&m, "", "");
    let done = r.chat(&r.task("default").unwrap(), &hello()).await.unwrap();
    assert_eq!(done.provider, "primary");
    assert_eq!(requests(&m), [2, 0, 0]);
    assert_eq!(done.attempts.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn persistent_overload_falls_back_within_budget() {
    let m = mocks().await;
    m.primary
        .set_default(status(503, "The server is overloaded", None));
    let r = router(&m, "", "");
    let done = r.chat(&r.task("default").unwrap(), &hello()).await.unwrap();
    assert_eq!(done.provider, "fallback");
    assert_eq!(requests(&m), [1, 1, 0]);
}

#[tokio::test(start_paused = true)]
async fn connection_reset_before_headers_is_retried_then_answers() {
    let m = mocks().await;
    m.primary.script([Plan::drop_connection()]);
    let r = router(&m, "", "");
    let done = r.chat(&r.task("default").unwrap(), &hello()).await.unwrap();
    assert_eq!(done.provider, "primary");
    assert_eq!(
        done.attempts[0].result,
        AttemptResult::Failed(ErrorClass::ConnectionLost)
    );
    assert!(
        done.attempts[0].sent,
        "the request may have reached the provider"
    );
    assert_eq!(requests(&m), [2, 0, 0]);
}

#[tokio::test(start_paused = true)]
async fn silent_providers_end_within_the_shared_deadline() {
    let m = mocks().await;
    for p in [&m.primary, &m.fallback, &m.third] {
        p.set_default(Plan::text(Flavor::OpenAi, "too late").delayed(Duration::from_secs(3600)));
    }
    let r = router(&m, "", "");
    let task = r.task("default").unwrap();
    let start = Instant::now();
    let err = r.chat(&task, &hello()).await.unwrap_err();
    let elapsed = start.elapsed();
    assert!(
        elapsed <= Duration::from_secs(30),
        "took {elapsed:?}: waits multiplied past the deadline"
    );
    assert!(
        elapsed >= Duration::from_secs(29),
        "gave up early: {elapsed:?}"
    );
    let failure = err.task_failure().unwrap();
    assert_eq!(requests(&m), [1, 1, 1], "a silent provider is not retried");
    assert!(
        failure
            .attempts
            .iter()
            .all(|a| a.result == AttemptResult::Failed(ErrorClass::Timeout))
    );
}

#[tokio::test(start_paused = true)]
async fn context_length_moves_on_and_content_filter_fails() {
    let m = mocks().await;
    m.primary.script([status(
        400,
        "maximum context length is 8192 tokens",
        Some("context_length_exceeded"),
    )]);
    let r = router(&m, "", "");
    let done = r.chat(&r.task("default").unwrap(), &hello()).await.unwrap();
    assert_eq!(done.provider, "fallback");

    m.primary.script([status(
        400,
        "filtered by content management policy",
        Some("content_filter"),
    )]);
    let err = r
        .chat(&r.task("default").unwrap(), &hello())
        .await
        .unwrap_err();
    let FailureReason::Failed { class, message, .. } = &err.task_failure().unwrap().reason else {
        panic!("{err}")
    };
    assert_eq!(*class, ErrorClass::ContentFiltered);
    assert!(
        message.contains("content management policy"),
        "the provider's reason is kept: {message}"
    );
    assert_eq!(
        requests(&m),
        [2, 1, 0],
        "no fallback after a content filter"
    );
}

#[tokio::test(start_paused = true)]
async fn requests_never_exceed_the_budget() {
    let m = mocks().await;
    for p in [&m.primary, &m.fallback, &m.third] {
        p.set_default(status(500, "boom", None));
    }
    let r = router(&m, "max_requests = 3\nmax_attempts_per_provider = 3", "");
    let task = r.task("default").unwrap();
    let err = r.chat(&task, &hello()).await.unwrap_err();
    assert_eq!(requests(&m).iter().sum::<usize>(), 3);
    assert_eq!(task.budget().requests_sent(), 3);
    assert!(
        matches!(err.task_failure().unwrap().reason, FailureReason::Budget(_)),
        "{err}"
    );
    // A second call of the same task has nothing left.
    let again = r.chat(&task, &hello()).await.unwrap_err();
    assert!(matches!(
        again.task_failure().unwrap().reason,
        FailureReason::Budget(_)
    ));
    assert_eq!(requests(&m).iter().sum::<usize>(), 3);
}

#[tokio::test(start_paused = true)]
async fn data_class_filters_the_chain_before_any_attempt() {
    let m = mocks().await;
    let r = router(&m, "", "");
    let req = hello().with_data_class("confidential");
    let done = r.chat(&r.task("default").unwrap(), &req).await.unwrap();
    assert_eq!(done.provider, "third");
    let skipped: Vec<_> = done
        .skipped
        .iter()
        .map(|s| (s.provider.as_str(), s.reason))
        .collect();
    assert_eq!(
        skipped,
        [
            ("primary", SkipReason::DataClass),
            ("fallback", SkipReason::DataClass)
        ]
    );
    assert_eq!(done.attempts.len(), 1, "a skipped provider is no attempt");
    assert_eq!(requests(&m), [0, 0, 1]);

    let secret = hello().with_data_class("secret");
    let err = r
        .chat(&r.task("default").unwrap(), &secret)
        .await
        .unwrap_err();
    assert!(matches!(
        err.task_failure().unwrap().reason,
        FailureReason::NoAllowedProvider { .. }
    ));
    assert!(err.to_string().contains("nothing was sent"));
    assert_eq!(requests(&m), [0, 0, 1]);
}

#[tokio::test(start_paused = true)]
async fn a_primary_down_for_a_while_is_bypassed_then_traffic_returns() {
    let m = mocks().await;
    m.primary
        .set_default(status(503, "The server is overloaded", None));
    let r = router(&m, "", "");
    // The outage: each call tries the primary until `failure_threshold` (5)
    // failures in a row open its breaker; later calls skip the primary.
    for _ in 0..7 {
        let done = r.chat(&r.task("default").unwrap(), &hello()).await.unwrap();
        assert_eq!(done.provider, "fallback");
    }
    assert_eq!(
        requests(&m),
        [5, 7, 0],
        "an open breaker sends nothing to the primary"
    );
    // It recovers; after the open period a probe goes through and traffic returns.
    m.primary.set_default(Plan::text(Flavor::OpenAi, "back"));
    tokio::time::advance(Duration::from_secs(30)).await;
    for _ in 0..2 {
        let done = r.chat(&r.task("default").unwrap(), &hello()).await.unwrap();
        assert_eq!(done.provider, "primary");
    }
    assert_eq!(requests(&m), [7, 7, 0]);
    assert_eq!(r.breaker_state("primary").unwrap().as_str(), "closed");
}

#[tokio::test(start_paused = true)]
async fn a_provider_at_its_concurrency_cap_sends_the_overflow_on() {
    let m = mocks().await;
    m.primary
        .set_default(Plan::text(Flavor::OpenAi, "slow").delayed(Duration::from_secs(2)));
    let r = router(&m, "", "max_concurrency = 1\nmax_queue = 0");
    let (t1, t2) = (r.task("default").unwrap(), r.task("default").unwrap());
    let req = hello();
    let (a, b) = tokio::join!(r.chat(&t1, &req), r.chat(&t2, &req));
    let providers = [a.unwrap().provider, b.unwrap().provider];
    assert!(
        providers.contains(&"primary".to_owned()) && providers.contains(&"fallback".to_owned()),
        "{providers:?}"
    );
    assert_eq!(requests(&m), [1, 1, 0]);
}

fn stream_events(flavor: Flavor, parts: &[&str], finish: bool, done: bool) -> Vec<String> {
    bodies::text_stream(flavor, parts, finish, done)
}

async fn collect(
    mut s: handover_router::route::RoutedStream,
) -> (String, Option<handover_router::route::StreamBroken>) {
    let mut text = String::new();
    while let Some(ev) = s.next().await {
        match ev {
            Ok(handover_providers::StreamEvent::ContentDelta(t)) => text.push_str(&t),
            Ok(_) => {}
            Err(broken) => return (text, Some(broken)),
        }
    }
    (text, None)
}

#[tokio::test(start_paused = true)]
async fn slow_first_token_falls_back_and_keepalives_do_not_count() {
    let m = mocks().await;
    m.primary.script([Plan::sse(
        vec![],
        After::KeepAlive(Duration::from_millis(100)),
    )]);
    m.fallback.script([Plan::sse(
        stream_events(Flavor::DeepSeek, &["Hi", " there"], true, true),
        After::Close,
    )]);
    let r = router(&m, "", "");
    let start = Instant::now();
    let s = r
        .chat_stream(&r.task("default").unwrap(), &hello())
        .await
        .unwrap();
    assert_eq!(s.provider(), "fallback");
    assert_eq!(
        s.attempts()[0].result,
        AttemptResult::Failed(ErrorClass::StreamStalled)
    );
    assert!(start.elapsed() >= Duration::from_secs(5) && start.elapsed() < Duration::from_secs(6));
    let (text, broken) = collect(s).await;
    assert_eq!((text.as_str(), broken), ("Hi there", None));
    assert_eq!(requests(&m), [1, 1, 0]);
}

#[tokio::test(start_paused = true)]
async fn stream_cut_after_commit_is_an_explicit_error_never_a_short_answer() {
    let m = mocks().await;
    m.primary.script([Plan::sse(
        stream_events(Flavor::OpenAi, &["Your parcel", " is"], false, false),
        After::Close,
    )]);
    let r = router(&m, "", "");
    let s = r
        .chat_stream(&r.task("default").unwrap(), &hello())
        .await
        .unwrap();
    let (text, broken) = collect(s).await;
    assert_eq!(text, "Your parcel is");
    let broken = broken.expect("a cut stream must end with an error");
    assert_eq!(broken.class, ErrorClass::StreamInterrupted);
    assert_eq!(
        requests(&m),
        [1, 0, 0],
        "after the commit point nothing falls back"
    );
}

#[tokio::test(start_paused = true)]
async fn with_commit_on_complete_a_cut_stream_falls_back_and_partials_stay_apart() {
    let m = mocks().await;
    m.primary.script([Plan::sse(
        stream_events(Flavor::OpenAi, &["Your parcel", " is"], false, false),
        After::Close,
    )]);
    m.fallback.script([Plan::sse(
        stream_events(Flavor::DeepSeek, &["Delivered", " today."], true, true),
        After::Close,
    )]);
    let r = router(&m, "commit_point = \"complete\"", "");
    let s = r
        .chat_stream(&r.task("default").unwrap(), &hello())
        .await
        .unwrap();
    assert_eq!(s.provider(), "fallback");
    assert_eq!(s.partials().len(), 1);
    assert_eq!(s.partials()[0].text, "Your parcel is");
    let (text, broken) = collect(s).await;
    assert_eq!(text, "Delivered today.", "never stitched to the partial");
    assert!(broken.is_none());
}

#[tokio::test(start_paused = true)]
async fn stalled_stream_after_commit_ends_with_an_error_on_the_idle_timeout() {
    let m = mocks().await;
    m.primary.script([Plan::sse(
        stream_events(Flavor::OpenAi, &["Checking"], false, false),
        After::KeepAlive(Duration::from_millis(100)),
    )]);
    let r = router(&m, "", "");
    let s = r
        .chat_stream(&r.task("default").unwrap(), &hello())
        .await
        .unwrap();
    let start = Instant::now();
    let (text, broken) = collect(s).await;
    assert_eq!(text, "Checking");
    assert_eq!(broken.unwrap().class, ErrorClass::StreamStalled);
    assert!(start.elapsed() >= Duration::from_secs(5) && start.elapsed() < Duration::from_secs(6));
}

#[tokio::test(start_paused = true)]
async fn malformed_event_before_commit_falls_back() {
    let m = mocks().await;
    m.primary.script([Plan::sse(
        vec!["data: {not json\n\n".to_owned()],
        After::Close,
    )]);
    m.fallback.script([Plan::sse(
        stream_events(Flavor::DeepSeek, &["Fine"], true, true),
        After::Close,
    )]);
    let r = router(&m, "", "");
    let s = r
        .chat_stream(&r.task("default").unwrap(), &hello())
        .await
        .unwrap();
    assert_eq!(s.provider(), "fallback");
    assert_eq!(
        s.attempts()[0].result,
        AttemptResult::Failed(ErrorClass::MalformedStream)
    );
}

#[tokio::test(start_paused = true)]
async fn stream_without_done_but_finished_is_complete() {
    let m = mocks().await;
    m.primary.script([Plan::sse(
        stream_events(Flavor::OpenAi, &["All", " good"], true, false),
        After::Close,
    )]);
    let r = router(&m, "", "");
    let s = r
        .chat_stream(&r.task("default").unwrap(), &hello())
        .await
        .unwrap();
    let (text, broken) = collect(s).await;
    assert_eq!((text.as_str(), broken), ("All good", None));
    assert_eq!(requests(&m), [1, 0, 0]);
}

#[tokio::test(start_paused = true)]
async fn one_budget_spans_several_calls_of_a_task() {
    let m = mocks().await;
    let r = router(&m, "max_requests = 2", "");
    let task = r.task("default").unwrap();
    assert_eq!(task.policy().max_requests, 2);
    r.chat(&task, &hello()).await.unwrap();
    r.chat(&task, &hello()).await.unwrap();
    let err = r.chat(&task, &hello()).await.unwrap_err();
    assert!(matches!(
        err.task_failure().unwrap().reason,
        FailureReason::Budget(_)
    ));
    assert_eq!(requests(&m), [2, 0, 0]);
}

#[tokio::test(start_paused = true)]
async fn a_late_answer_from_an_abandoned_attempt_is_recorded_and_used_for_nothing() {
    let m = mocks().await;
    m.primary
        .script([Plan::text(Flavor::OpenAi, "primary, late").delayed(Duration::from_secs(5))]);
    let r = router(&m, "abandon_after = \"1s\"", "");
    let task = r.task("default").unwrap();
    let start = Instant::now();
    let done = r.chat(&task, &hello()).await.unwrap();
    assert_eq!(done.provider, "fallback");
    assert_eq!(
        done.response.content.as_deref(),
        Some("Hello from the mock.")
    );
    assert!(start.elapsed() < Duration::from_secs(2));
    assert_eq!(done.attempts[0].result, AttemptResult::Abandoned);
    assert!(
        task.late_attempts().is_empty(),
        "the primary has not answered yet"
    );

    tokio::time::sleep(Duration::from_secs(6)).await;
    let late = task.late_attempts();
    assert_eq!(late.len(), 1);
    assert_eq!(
        (late[0].provider.as_str(), late[0].result, late[0].late),
        ("primary", AttemptResult::Answered, true)
    );
    assert_eq!(requests(&m), [1, 1, 0], "the late answer triggered nothing");
    assert_eq!(done.spent.requests, 2);
}

#[tokio::test(start_paused = true)]
async fn a_probe_cancelled_by_its_caller_is_given_back() {
    let m = mocks().await;
    // A rejected key opens the breaker at once.
    m.primary.script([status(
        401,
        "Incorrect API key provided",
        Some("invalid_api_key"),
    )]);
    let r = router(&m, "", "");
    assert_eq!(
        r.chat(&r.task("default").unwrap(), &hello())
            .await
            .unwrap()
            .provider,
        "fallback"
    );
    assert_eq!(r.breaker_state("primary").unwrap().as_str(), "open");
    tokio::time::advance(Duration::from_secs(30)).await;
    // The half-open probe hangs and its caller gives up (drops the future).
    m.primary
        .script([Plan::text(Flavor::OpenAi, "slow").delayed(Duration::from_secs(3600))]);
    let task = r.task("default").unwrap();
    let req = hello();
    assert!(
        tokio::time::timeout(Duration::from_secs(1), r.chat(&task, &req))
            .await
            .is_err()
    );
    // The probe was given back: the next call probes the (recovered) primary.
    let done = r.chat(&r.task("default").unwrap(), &hello()).await.unwrap();
    assert_eq!(done.provider, "primary");
    assert_eq!(r.breaker_state("primary").unwrap().as_str(), "closed");
}

/// A provider that never sends response headers is left after
/// `stream_first_byte` (its default, 10 s) by a stream, and after
/// `first_byte` (30 s here) by a whole answer, whose headers a healthy
/// provider sends only once the answer is generated.
#[tokio::test(start_paused = true)]
async fn a_hung_provider_is_left_sooner_by_a_stream_than_by_a_whole_answer() {
    let m = mocks().await;
    m.primary
        .set_default(Plan::text(Flavor::OpenAi, "never").delayed(Duration::from_secs(3600)));
    m.fallback.script([
        Plan::sse(
            stream_events(Flavor::DeepSeek, &["Hi"], true, true),
            After::Close,
        ),
        Plan::text(Flavor::DeepSeek, "Hi, whole"),
    ]);
    let r = support::chain::router(&format!(
        "[ledger]\nbackend = \"memory\"\n\
         [providers.primary]\nkind = \"openai_compatible\"\nbase_url = \"{}\"\nmodel = \"gpt-4o-mini\"\n\
         [providers.primary.timeouts]\nfirst_byte = \"30s\"\n\
         [providers.fallback]\nkind = \"deepseek\"\nbase_url = \"{}\"\nmodel = \"deepseek-chat\"\n\
         [policies.default]\nchain = [\"primary\", \"fallback\"]\n",
        m.primary.base_url(),
        m.fallback.base_url(),
    ));
    let start = Instant::now();
    let s = r
        .chat_stream(&r.task("default").unwrap(), &hello())
        .await
        .unwrap();
    assert_eq!(s.provider(), "fallback");
    assert_eq!(start.elapsed(), Duration::from_secs(10));
    assert_eq!(
        s.attempts()[0].result,
        AttemptResult::Failed(ErrorClass::Timeout)
    );
    assert_eq!(collect(s).await, ("Hi".to_owned(), None));
    let start = Instant::now();
    let done = r.chat(&r.task("default").unwrap(), &hello()).await.unwrap();
    assert_eq!(done.provider, "fallback");
    assert_eq!(start.elapsed(), Duration::from_secs(30));
    assert_eq!(
        requests(&m),
        [2, 2, 0],
        "one request per attempt, none retried"
    );
}
