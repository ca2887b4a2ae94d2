//! The series a routed call records, read from a real Prometheus recorder:
//! the keys are built once with the router, so these tests also show that
//! a recorder installed after the router was built (here a thread-local
//! one) gets every series with its labels. Real adapters against mock
//! providers over TCP.

use handover_router::route::Router;
use handover_testkit::{Flavor, TcpProvider};
use metrics_exporter_prometheus::PrometheusBuilder;

use crate::support;

use support::chain::{hello, overloaded};

/// A router whose policy `p` walks `down` (failing) then `up` (priced).
fn router(down: &TcpProvider, up: &TcpProvider) -> Router {
    support::chain::router(&format!(
        "[ledger]\nbackend = \"memory\"\n\
         [providers.down]\nkind = \"openai_compatible\"\nbase_url = \"{}\"\nmodel = \"m\"\n\
         [providers.up]\nkind = \"openai_compatible\"\nbase_url = \"{}\"\nmodel = \"m\"\n\
         price_input_per_mtok = 1.0\nprice_output_per_mtok = 2.0\n\
         [policies.p]\nchain = [\"down\", \"up\"]\n\
         [policies.q]\nchain = [\"down\"]\n",
        down.base_url(),
        up.base_url()
    ))
}

/// Two mock providers: `down` answers every request 503, `up` answers.
async fn providers() -> (TcpProvider, TcpProvider) {
    let (down, up) = (
        TcpProvider::start(Flavor::OpenAi).await.unwrap(),
        TcpProvider::start(Flavor::OpenAi).await.unwrap(),
    );
    down.set_default(overloaded());
    (down, up)
}

/// Runs `calls` with a Prometheus recorder of their own (the router is
/// built inside, after the recorder), and returns its rendering.
fn recorded(calls: impl AsyncFnOnce()) -> String {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(calls());
    });
    handle.render()
}

/// The value of the series `line` (name and labels as rendered), if any.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn an_answer_after_a_fallback_records_the_task_both_attempts_the_answer_and_its_cost() {
    let text = recorded(async || {
        let (down, up) = providers().await;
        let r = router(&down, &up);
        for _ in 0..2 {
            r.chat(&r.task("p").unwrap(), &hello()).await.unwrap();
        }
        assert_eq!((down.requests(), up.requests()), (2, 2));
    });
    let v = |s: &str| value(&text, s);
    assert_eq!(v("handover_tasks_total{policy=\"p\"}"), Some(2.0), "{text}");
    assert_eq!(
        v("handover_attempts_total{provider=\"down\",class=\"overloaded\"}"),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        v("handover_attempts_total{provider=\"up\",class=\"answered\"}"),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        v("handover_answers_total{policy=\"p\",provider=\"up\"}"),
        Some(2.0),
        "{text}"
    );
    // 16 input and 10 output tokens at $1 and $2 per million, twice.
    assert_eq!(
        v("handover_provider_cost_micro_usd_total{provider=\"up\"}"),
        Some(72.0),
        "{text}"
    );
    assert_eq!(
        v("handover_time_to_usable_answer_seconds_count{policy=\"p\"}"),
        Some(2.0),
        "{text}"
    );
    assert!(!text.contains("handover_failed_calls_total"), "{text}");
    assert!(!text.contains("policy=\"q\""), "{text}");
}

#[test]
fn a_call_without_an_answer_records_its_failure_under_its_policy() {
    let text = recorded(async || {
        let (down, up) = providers().await;
        let r = router(&down, &up);
        r.chat(&r.task("q").unwrap(), &hello()).await.unwrap_err();
        assert_eq!((down.requests(), up.requests()), (1, 0));
    });
    let v = |s: &str| value(&text, s);
    assert_eq!(v("handover_tasks_total{policy=\"q\"}"), Some(1.0), "{text}");
    assert_eq!(
        v("handover_failed_calls_total{policy=\"q\"}"),
        Some(1.0),
        "{text}"
    );
    assert!(!text.contains("handover_answers_total"), "{text}");
}

/// A stream counts as answered when it commits; if it breaks after that,
/// the break is counted too, by provider and class.
#[test]
fn a_stream_broken_after_its_commit_point_is_counted() {
    use futures::StreamExt;
    use handover_testkit::{After, Plan, bodies};
    let text = recorded(async || {
        let (down, up) = providers().await;
        up.set_default(Plan::sse(
            bodies::text_stream(Flavor::OpenAi, &["Hel", "lo"], false, false),
            After::Close,
        ));
        let r = router(&down, &up);
        let mut s = r
            .chat_stream(&r.task("p").unwrap(), &hello())
            .await
            .unwrap();
        let mut broke = false;
        while let Some(ev) = s.next().await {
            broke |= ev.is_err();
        }
        assert!(broke, "the cut stream ends with an error");
    });
    let v = |s: &str| value(&text, s);
    assert_eq!(
        v("handover_answers_total{policy=\"p\",provider=\"up\"}"),
        Some(1.0),
        "{text}"
    );
    let broken = text
        .lines()
        .find(|l| l.starts_with("handover_streams_broken_total{provider=\"up\""))
        .unwrap_or_else(|| panic!("no broken-stream series in {text}"));
    assert!(broken.ends_with(" 1"), "{broken}");
}
