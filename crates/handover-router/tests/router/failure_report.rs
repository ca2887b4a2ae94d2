//! What a call reports when providers are passed over: every attempt that
//! happened, and apart from them every skipped provider with its reason in
//! chain order — in the error's fields and in its message. Real adapters
//! against mock providers, paused time, requests counted at each mock.

use std::time::Duration;

use futures::StreamExt;
use handover_providers::ErrorClass;
use handover_router::route::{AttemptResult, Caller, FailureReason, Router, SkipReason};
use handover_testkit::{Flavor, Plan, TcpProvider, bodies};

use crate::support;

use support::chain::{hello, overloaded, status};

/// A router over `providers` (name, mock, extra lines of its table) with
/// one policy `default` over all of them, in order.
fn router(providers: &[(&str, &TcpProvider, &str)], policy_extra: &str) -> Router {
    let mut text = String::from("[ledger]\nbackend = \"memory\"\n");
    for (name, mock, extra) in providers {
        text.push_str(&format!(
            "[providers.{name}]\nkind = \"openai_compatible\"\nbase_url = \"{}\"\nmodel = \"{name}-model\"\n{extra}\n",
            mock.base_url()
        ));
    }
    let chain: Vec<_> = providers.iter().map(|(n, ..)| format!("{n:?}")).collect();
    text.push_str(&format!(
        "[policies.default]\nchain = [{}]\ndeadline = \"30s\"\n{policy_extra}\n",
        chain.join(", ")
    ));
    support::chain::router(&text)
}

async fn start() -> TcpProvider {
    TcpProvider::start(Flavor::OpenAi).await.unwrap()
}

/// The story of issue 12: the only other provider may not receive the
/// request's data class. It did not fail; the data policy held it back,
/// and the error says so.
#[tokio::test(start_paused = true)]
async fn a_provider_held_back_by_the_data_policy_is_reported_as_skipped_not_failed() {
    let (primary, fallback) = (start().await, start().await);
    primary.set_default(overloaded());
    let r = router(
        &[
            (
                "primary",
                &primary,
                "data_classes = [\"public\", \"confidential\"]",
            ),
            ("fallback", &fallback, "data_classes = [\"public\"]"),
        ],
        "",
    );
    let req = hello().with_data_class("confidential");
    let err = r.chat(&r.task("default").unwrap(), &req).await.unwrap_err();
    let f = err.task_failure().unwrap();
    assert_eq!(f.reason, FailureReason::ChainExhausted);
    let attempts: Vec<_> = f
        .attempts
        .iter()
        .map(|a| (a.provider.as_str(), a.result, a.sent))
        .collect();
    assert_eq!(
        attempts,
        [(
            "primary",
            AttemptResult::Failed(ErrorClass::Overloaded),
            true
        )],
        "only what happened is an attempt"
    );
    let skipped: Vec<_> = f
        .skipped
        .iter()
        .map(|s| (s.provider.as_str(), s.model.as_str(), s.reason))
        .collect();
    assert_eq!(
        skipped,
        [("fallback", "fallback-model", SkipReason::DataClass)]
    );
    let message = err.to_string();
    assert!(
        message.contains("attempts: primary=overloaded")
            && message.contains("skipped: fallback (may not receive the request's data class)")
            && message.contains("1 request(s) sent"),
        "{message}"
    );
    assert!(!message.contains("failed after"), "{message}");
    assert_eq!((primary.requests(), fallback.requests()), (1, 0));
}

/// Skips of every kind come apart from the attempts and in chain order,
/// whatever the order in which the walk learnt of them.
#[tokio::test(start_paused = true)]
async fn skips_are_listed_in_chain_order_with_their_reasons() {
    let (a, b, c) = (start().await, start().await, start().await);
    // A rejected key opens a's breaker at once.
    a.script([status(401, "Incorrect API key", Some("invalid_api_key"))]);
    c.set_default(overloaded());
    let r = router(
        &[
            ("a", &a, "data_classes = [\"internal\"]"),
            ("b", &b, "data_classes = []"),
            ("c", &c, "data_classes = [\"internal\"]"),
        ],
        "",
    );
    let req = hello().with_data_class("internal");
    // The first call fails on a (auth, which opens its breaker) and c.
    let first = r.chat(&r.task("default").unwrap(), &req).await.unwrap_err();
    assert_eq!(first.task_failure().unwrap().attempts.len(), 2);
    assert_eq!(r.breaker_state("a").unwrap().as_str(), "open");

    let err = r.chat(&r.task("default").unwrap(), &req).await.unwrap_err();
    let f = err.task_failure().unwrap();
    let skipped: Vec<_> = f
        .skipped
        .iter()
        .map(|s| (s.provider.as_str(), s.reason))
        .collect();
    assert_eq!(
        skipped,
        [("a", SkipReason::BreakerOpen), ("b", SkipReason::DataClass)]
    );
    let attempts: Vec<_> = f.attempts.iter().map(|a| a.provider.as_str()).collect();
    assert_eq!(attempts, ["c"]);
    assert!(
        err.to_string().contains(
            "skipped: a (circuit breaker open), b (may not receive the request's data class)"
        ),
        "{err}"
    );
    assert_eq!((a.requests(), b.requests(), c.requests()), (1, 0, 2));
}

/// A provider whose admission control refuses (concurrency cap reached, no
/// queue) is skipped, not counted as an attempt, and the answer says so.
#[tokio::test(start_paused = true)]
async fn a_provider_refused_by_admission_is_a_skip_in_the_answer() {
    let (busy, spare) = (start().await, start().await);
    busy.set_default(Plan::text(Flavor::OpenAi, "slow").delayed(Duration::from_secs(2)));
    let r = router(
        &[
            ("busy", &busy, "max_concurrency = 1\nmax_queue = 0"),
            ("spare", &spare, ""),
        ],
        "",
    );
    let (t1, t2) = (r.task("default").unwrap(), r.task("default").unwrap());
    let req = hello();
    let (one, two) = tokio::join!(r.chat(&t1, &req), r.chat(&t2, &req));
    let (one, two) = (one.unwrap(), two.unwrap());
    let overflow = if one.provider == "spare" { one } else { two };
    assert_eq!(overflow.provider, "spare");
    let skipped: Vec<_> = overflow
        .skipped
        .iter()
        .map(|s| (s.provider.as_str(), s.reason))
        .collect();
    assert_eq!(skipped, [("busy", SkipReason::QueueFull)]);
    let attempts: Vec<_> = overflow
        .attempts
        .iter()
        .map(|a| (a.provider.as_str(), a.result))
        .collect();
    assert_eq!(attempts, [("spare", AttemptResult::Answered)]);
    assert_eq!((busy.requests(), spare.requests()), (1, 1));
}

/// The streaming path walks the same chain and reports the same way.
#[tokio::test(start_paused = true)]
async fn a_stream_reports_its_skips_apart_from_its_attempts() {
    let (primary, fallback) = (start().await, start().await);
    fallback.set_default(Plan::sse(
        bodies::text_stream(Flavor::OpenAi, &["Hi"], true, true),
        handover_testkit::After::Close,
    ));
    let r = router(
        &[
            ("primary", &primary, "data_classes = [\"public\"]"),
            ("fallback", &fallback, "data_classes = [\"health\"]"),
        ],
        "",
    );
    let req = hello().with_data_class("health");
    let mut s = r
        .chat_stream(&r.task("default").unwrap(), &req)
        .await
        .unwrap();
    assert_eq!(s.provider(), "fallback");
    let skipped: Vec<_> = s
        .skipped()
        .iter()
        .map(|s| (s.provider.as_str(), s.reason))
        .collect();
    assert_eq!(skipped, [("primary", SkipReason::DataClass)]);
    assert_eq!(s.attempts().len(), 1);
    while s.next().await.is_some() {}
    assert!(s.is_complete());

    // And when nobody may receive the class, it fails closed with every
    // provider listed as skipped and nothing sent.
    let err = r
        .chat_stream(
            &r.task("default").unwrap(),
            &hello().with_data_class("secret"),
        )
        .await
        .unwrap_err();
    let f = err.task_failure().unwrap();
    assert!(matches!(f.reason, FailureReason::NoAllowedProvider { .. }));
    assert!(f.attempts.is_empty());
    assert_eq!(f.skipped.len(), 2);
    assert!(err.to_string().contains("nothing was sent"), "{err}");
    assert_eq!((primary.requests(), fallback.requests()), (0, 1));
}

/// A caller that leaves while the first provider works: that attempt runs
/// to its end (and is reported), then nothing more is sent — no retry, no
/// fallback — and the call ends as `CallerLeft`. A caller gone before the
/// call starts sends nothing at all. Counted at the mocks.
#[tokio::test(start_paused = true)]
async fn a_call_whose_caller_left_finishes_its_attempt_and_starts_nothing_more() {
    let (primary, fallback) = (start().await, start().await);
    primary.set_default(overloaded().delayed(Duration::from_secs(5)));
    let r = router(
        &[("primary", &primary, ""), ("fallback", &fallback, "")],
        "max_attempts_per_provider = 3",
    );
    let caller = Caller::new();
    let task = r.task("default").unwrap().with_caller(&caller);
    let call = tokio::spawn({
        let r = r.clone();
        async move { r.chat(&task, &hello()).await }
    });
    // Time stands still while this spins: the provider's delay cannot pass.
    while primary.requests() == 0 {
        tokio::task::yield_now().await;
    }
    caller.leave();
    let err = call.await.unwrap().unwrap_err();
    let f = err.task_failure().unwrap();
    assert_eq!(f.reason, FailureReason::CallerLeft);
    let results: Vec<_> = f.attempts.iter().map(|a| a.result).collect();
    assert_eq!(results, [AttemptResult::Failed(ErrorClass::Overloaded)]);
    assert_eq!(primary.requests(), 1, "retried for a caller that left");
    assert_eq!(fallback.requests(), 0, "fell back for a caller that left");
    assert!(err.to_string().starts_with("the caller left"), "{err}");

    let gone = r.task("default").unwrap().with_caller(&caller);
    let err = r.chat(&gone, &hello()).await.unwrap_err();
    let f = err.task_failure().unwrap();
    assert_eq!(f.reason, FailureReason::CallerLeft);
    assert!(f.attempts.is_empty());
    assert_eq!((primary.requests(), fallback.requests()), (1, 0));
}

/// Each failed attempt keeps what its provider said of the failure, its
/// error `code` and `param` (a gateway relays them when a whole chain was
/// refused alike); an attempt whose provider said neither keeps nothing.
#[tokio::test(start_paused = true)]
async fn each_failed_attempt_keeps_its_providers_code_and_param() {
    let (long, down) = (start().await, start().await);
    long.set_default(Plan::json(
        400,
        &serde_json::json!({"error": {
            "message": "This model's maximum context length is 8192 tokens.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }}),
    ));
    down.set_default(overloaded());
    let r = router(
        &[("long", &long, ""), ("down", &down, "")],
        "max_attempts_per_provider = 1",
    );
    let err = r
        .chat(&r.task("default").unwrap(), &hello())
        .await
        .unwrap_err();
    let f = err.task_failure().unwrap();
    assert_eq!(f.reason, FailureReason::ChainExhausted);
    let said: Vec<_> = f
        .attempts
        .iter()
        .map(|a| (a.provider.as_str(), a.provider_code(), a.provider_param()))
        .collect();
    assert_eq!(
        said,
        [
            ("long", Some("context_length_exceeded"), Some("messages")),
            ("down", None, None),
        ]
    );
    assert_eq!((long.requests(), down.requests()), (1, 1));
}
