//! Circuit breakers through the public API: a retry never goes through an
//! open breaker, a single 429 or 503 does not open one (they count toward
//! `failure_threshold` like other failures; auth and billing open it at
//! once), and under load a few injected overloads fail about as many calls
//! — not everyone's. Requests are counted at the mock providers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use handover_providers::ErrorClass;
use handover_router::route::{AttemptResult, Router, SkipReason};
use handover_testkit::{Flavor, MockProvider, Plan, Reply, TcpProvider};

use crate::support;

use support::chain::{hello, overloaded, status};

/// Providers `primary` and `fallback` with `breaker` as the primary's
/// `[providers.primary.breaker]` body, and `policy_extra` in the policy.
fn router(primary: &str, fallback: &str, breaker: &str, policy_extra: &str) -> Router {
    support::chain::router(&format!(
        "[ledger]\nbackend = \"memory\"\n\
         [providers.primary]\nkind = \"openai\"\nbase_url = \"{primary}\"\nmodel = \"gpt-4o-mini\"\n\
         [providers.primary.breaker]\n{breaker}\n\
         [providers.fallback]\nkind = \"deepseek\"\nbase_url = \"{fallback}\"\nmodel = \"deepseek-chat\"\n\
         [policies.default]\nchain = [\"primary\", \"fallback\"]\ndeadline = \"30s\"\n{policy_extra}\n\
         [policies.default.backoff]\ninitial = \"1s\"\nmax = \"2s\"\njitter = false\n"
    ))
}

async fn pair() -> (TcpProvider, TcpProvider) {
    (
        TcpProvider::start(Flavor::OpenAi).await.unwrap(),
        TcpProvider::start(Flavor::DeepSeek).await.unwrap(),
    )
}

const RETRY_OVERLOADS: &str =
    "max_attempts_per_provider = 3\n[policies.default.on]\noverloaded = \"retry\"";

#[tokio::test(start_paused = true)]
async fn a_retry_never_goes_through_a_breaker_its_own_failures_opened() {
    let (primary, fallback) = pair().await;
    primary.set_default(overloaded());
    let r = router(
        primary.base_url(),
        fallback.base_url(),
        "failure_threshold = 2",
        RETRY_OVERLOADS,
    );
    let done = r.chat(&r.task("default").unwrap(), &hello()).await.unwrap();
    assert_eq!(done.provider, "fallback");
    assert_eq!(
        (primary.requests(), fallback.requests()),
        (2, 1),
        "the third try would have gone through the open breaker"
    );
    let attempts: Vec<_> = done
        .attempts
        .iter()
        .map(|a| (a.provider.as_str(), a.result))
        .collect();
    let overload = AttemptResult::Failed(ErrorClass::Overloaded);
    assert_eq!(
        attempts,
        [
            ("primary", overload),
            ("primary", overload),
            ("fallback", AttemptResult::Answered)
        ]
    );
    let skipped: Vec<_> = done
        .skipped
        .iter()
        .map(|s| (s.provider.as_str(), s.reason))
        .collect();
    assert_eq!(skipped, [("primary", SkipReason::BreakerOpen)]);
}

#[tokio::test(start_paused = true)]
async fn a_retry_never_goes_through_a_breaker_another_task_opened() {
    let (primary, fallback) = pair().await;
    primary.set_default(overloaded());
    let r = router(
        primary.base_url(),
        fallback.base_url(),
        "failure_threshold = 2",
        RETRY_OVERLOADS,
    );
    // Two tasks fail once each — together reaching the threshold — and
    // back off; when they come back, the breaker is open for both.
    let (t1, t2) = (r.task("default").unwrap(), r.task("default").unwrap());
    let req = hello();
    let (one, two) = tokio::join!(r.chat(&t1, &req), r.chat(&t2, &req));
    for done in [one.unwrap(), two.unwrap()] {
        assert_eq!(done.provider, "fallback");
        assert_eq!(done.skipped[0].reason, SkipReason::BreakerOpen);
    }
    assert_eq!((primary.requests(), fallback.requests()), (2, 2));
}

#[tokio::test(start_paused = true)]
async fn a_single_overload_or_rate_limit_does_not_open_the_breaker() {
    let (primary, fallback) = pair().await;
    let r = router(primary.base_url(), fallback.base_url(), "", "");
    primary.script([overloaded()]);
    let done = r.chat(&r.task("default").unwrap(), &hello()).await.unwrap();
    assert_eq!(done.provider, "fallback", "a 503 moves on (the default)");
    assert_eq!(r.breaker_state("primary").unwrap().as_str(), "closed");

    primary.script([status(
        429,
        "Rate limit reached",
        Some("rate_limit_exceeded"),
    )]);
    let done = r.chat(&r.task("default").unwrap(), &hello()).await.unwrap();
    assert_eq!(done.provider, "primary", "a 429 is retried (the default)");
    assert_eq!(r.breaker_state("primary").unwrap().as_str(), "closed");

    let done = r.chat(&r.task("default").unwrap(), &hello()).await.unwrap();
    assert_eq!(
        done.provider, "primary",
        "the next call goes to the primary"
    );
    assert!(done.skipped.is_empty());
    assert_eq!((primary.requests(), fallback.requests()), (4, 1));
}

#[tokio::test(start_paused = true)]
async fn overloads_count_toward_the_threshold_and_auth_opens_at_once() {
    let (primary, fallback) = pair().await;
    primary.set_default(overloaded());
    let r = router(
        primary.base_url(),
        fallback.base_url(),
        "failure_threshold = 3\nopen_for = \"10s\"",
        "",
    );
    for _ in 0..3 {
        assert_eq!(r.breaker_state("primary").unwrap().as_str(), "closed");
        r.chat(&r.task("default").unwrap(), &hello()).await.unwrap();
    }
    assert_eq!(r.breaker_state("primary").unwrap().as_str(), "open");
    let done = r.chat(&r.task("default").unwrap(), &hello()).await.unwrap();
    assert_eq!(done.skipped[0].reason, SkipReason::BreakerOpen);
    assert_eq!((primary.requests(), fallback.requests()), (3, 4));

    // After the open period the probe succeeds and closes it; then one
    // rejected key opens it again at once.
    tokio::time::advance(Duration::from_secs(10)).await;
    primary.set_default(Plan::text(Flavor::OpenAi, "back"));
    let done = r.chat(&r.task("default").unwrap(), &hello()).await.unwrap();
    assert_eq!(done.provider, "primary");
    primary.script([status(401, "Incorrect API key", Some("invalid_api_key"))]);
    r.chat(&r.task("default").unwrap(), &hello()).await.unwrap();
    assert_eq!(r.breaker_state("primary").unwrap().as_str(), "open");
    assert_eq!((primary.requests(), fallback.requests()), (5, 5));
}

/// One provider, ~2.5 % injected 503s, many concurrent callers: the share
/// of calls that fail stays within 1.5× the share of requests that were
/// faulted. (When one 503 opened the breaker for everyone, about a third
/// of all calls failed.) Real time against a fast keep-alive mock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_load_a_few_overloads_fail_about_as_many_calls_not_everyones() {
    const CALLS: usize = 800;
    const EVERY: usize = 40; // 2.5 %
    const CONCURRENCY: usize = 32;
    let provider = MockProvider::start(Flavor::OpenAi).await;
    provider.script((0..CALLS).map(|i| {
        if i % EVERY == EVERY - 1 {
            Reply::overloaded()
        } else {
            Reply::text("fine")
        }
    }));
    let text = format!(
        "[ledger]\nbackend = \"memory\"\n\
         [providers.only]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-4o-mini\"\n\
         [policies.default]\nchain = [\"only\"]\n",
        provider.base_url()
    );
    let router = Arc::new(support::chain::router(&text));
    let (next, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let workers: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let (router, next, failed) = (router.clone(), next.clone(), failed.clone());
            tokio::spawn(async move {
                while next.fetch_add(1, Ordering::Relaxed) < CALLS {
                    let task = router.task("default").unwrap();
                    if router.chat(&task, &hello()).await.is_err() {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    let requests = provider.requests().await;
    // The script is served in arrival order: these many of the requests
    // received were answered 503.
    let injected = (0..requests).filter(|i| i % EVERY == EVERY - 1).count();
    let failed = failed.load(Ordering::Relaxed);
    let injected_rate = injected as f64 / requests as f64;
    let failure_rate = failed as f64 / CALLS as f64;
    assert_eq!(requests, CALLS, "every call reached the provider once");
    assert!(
        injected > 0 && failed > 0,
        "{injected} injected, {failed} failed"
    );
    assert!(
        failure_rate <= 1.5 * injected_rate,
        "{failed} of {CALLS} calls failed ({:.2} %) for {injected} injected 503s in {requests} requests ({:.2} %)",
        failure_rate * 100.0,
        injected_rate * 100.0
    );
}

/// One provider entry serving two models: failures of one model open that
/// model's breaker only; an account failure opens the provider for all.
#[tokio::test(start_paused = true)]
async fn breakers_are_per_model_except_for_account_failures() {
    let (primary, fallback) = pair().await;
    let r = support::chain::router(&format!(
        "[ledger]\nbackend = \"memory\"\n\
         [providers.primary]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-4o-mini\"\nmodels = [\"gpt-4.1\"]\n\
         [providers.primary.breaker]\nfailure_threshold = 2\n\
         [providers.fallback]\nkind = \"deepseek\"\nbase_url = \"{}\"\nmodel = \"deepseek-chat\"\n\
         [policies.big]\nchain = [\"primary/gpt-4.1\", \"fallback\"]\n\
         [policies.mini]\nchain = [\"primary\", \"fallback\"]\n",
        primary.base_url(),
        fallback.base_url()
    ));
    let state = |model| r.model_breaker_state("primary", model).unwrap().as_str();

    primary.set_default(overloaded());
    for _ in 0..2 {
        let done = r.chat(&r.task("big").unwrap(), &hello()).await.unwrap();
        assert_eq!(done.provider, "fallback");
        assert_eq!(done.attempts[0].model, "gpt-4.1");
    }
    assert_eq!(state("gpt-4.1"), "open");
    assert_eq!(state("gpt-4o-mini"), "closed", "another model's overloads");
    assert_eq!(r.breaker_state("primary").unwrap().as_str(), "closed");
    let done = r.chat(&r.task("big").unwrap(), &hello()).await.unwrap();
    assert_eq!(done.skipped[0].reason, SkipReason::BreakerOpen);
    assert_eq!(primary.requests(), 2, "the open model is not asked");

    // The default model still reaches the provider; an auth failure there
    // opens the provider for every model.
    primary.set_default(status(
        401,
        "Incorrect API key provided",
        Some("invalid_api_key"),
    ));
    let done = r.chat(&r.task("mini").unwrap(), &hello()).await.unwrap();
    assert_eq!(done.attempts[0].model, "gpt-4o-mini");
    assert_eq!(
        done.attempts[0].result,
        AttemptResult::Failed(ErrorClass::Auth)
    );
    assert_eq!(primary.requests(), 3);
    for model in ["gpt-4o-mini", "gpt-4.1", "never-asked"] {
        assert_eq!(state(model), "open", "{model}");
    }
    r.chat(&r.task("mini").unwrap(), &hello()).await.unwrap();
    assert_eq!(primary.requests(), 3, "no model of the provider is asked");
}
