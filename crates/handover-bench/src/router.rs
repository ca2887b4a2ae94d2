//! The `router` benchmark: what routing adds to a provider call. In one run,
//! against the same local mock, it measures the direct adapter call (the
//! baseline) and a router call through a chain of three providers whose
//! first is healthy (a new task, i.e. a new budget, per call), non-streaming
//! and streaming, at the requested concurrency, in `--rounds` alternating
//! rounds (default 10).
//!
//! ```text
//! cargo run --release -p handover-bench -- router --concurrency 64
//! ```
//!
//! `--only direct|routed` runs `--ops` calls of one side alone (no warm-up,
//! no rounds, no baseline: the line's `baseline_*` and `ratio_*` are null),
//! and `--modes chat` leaves the stream out: for counting instructions
//! (`valgrind --tool=callgrind`), where the difference between two `--ops`
//! counts of one side is that side's cost per call, start-up excluded.

use std::sync::Arc;
use std::time::Instant;

use handover_providers::{
    AnyProvider, CallOptions, ChatRequest, Message, Provider, ProviderKind, ProviderSettings,
};
use handover_router::config::Config;
use handover_router::route::Router;

use crate::stats::{emit, measure, round2};
use crate::{BenchResult, args::Args, mock_http};

type Err = Box<dyn std::error::Error + Send + Sync>;

/// Runs the `router` benchmark.
pub(crate) async fn run(args: Args) -> BenchResult {
    let concurrency = args.number("concurrency", 1)?.max(1) as usize;
    let ops = args.number("ops", 10_000)? as usize / concurrency * concurrency;
    let rounds = (args.number("rounds", 10)? as usize).max(1);
    let base = format!("{}/v1", mock_http::start(mock_http::llm_answers())?);
    let provider = Arc::new(AnyProvider::new(
        ProviderSettings::new("direct", ProviderKind::OpenAi, "gpt-4o-mini").with_base_url(&base),
    )?);
    let provider_toml = |name: &str| {
        format!(
            "[providers.{name}]\nkind = \"openai\"\nbase_url = \"{base}\"\nmodel = \"gpt-4o-mini\"\nmax_concurrency = 1024\n"
        )
    };
    let config = Config::parse(
        &format!(
            "[ledger]\nbackend = \"memory\"\n{}{}{}[policies.default]\nchain = [\"a\", \"b\", \"c\"]\n",
            provider_toml("a"),
            provider_toml("b"),
            provider_toml("c")
        ),
        &|_| None,
    )?;
    let router = Arc::new(Router::with_env(&config, &|_| None)?);
    let req = Arc::new(ChatRequest::new(vec![
        Message::system("You are a helpful assistant."),
        Message::user("Hello!"),
    ]));

    let only = args.string("only", "both");
    if !["both", "direct", "routed"].contains(&only.as_str()) {
        return Err(format!("--only: expected direct, routed or both, got {only:?}").into());
    }
    let modes = args.string("modes", "chat,chat_stream");
    for stream in [false, true] {
        let mode = if stream { "chat_stream" } else { "chat" };
        if !modes.split(',').any(|m| m.trim() == mode) {
            continue;
        }
        let direct = {
            let (provider, req) = (provider.clone(), req.clone());
            move |_i: usize| {
                let (provider, req) = (provider.clone(), req.clone());
                async move {
                    let t = Instant::now();
                    let opts = CallOptions::default();
                    if stream {
                        std::hint::black_box(
                            provider
                                .chat_stream(&req, &opts)
                                .await?
                                .into_response()
                                .await?,
                        );
                    } else {
                        std::hint::black_box(provider.chat(&req, &opts).await?);
                    }
                    Ok::<_, Err>(t.elapsed())
                }
            }
        };
        let routed = {
            let (router, req) = (router.clone(), req.clone());
            move |_i: usize| {
                let (router, req) = (router.clone(), req.clone());
                async move {
                    let t = Instant::now();
                    let task = router.task("default")?;
                    if stream {
                        use futures::StreamExt;
                        let mut s = router.chat_stream(&task, &req).await?;
                        while let Some(ev) = s.next().await {
                            std::hint::black_box(ev?);
                        }
                    } else {
                        std::hint::black_box(router.chat(&task, &req).await?);
                    }
                    Ok::<_, Err>(t.elapsed())
                }
            }
        };
        if only != "both" {
            let (mut s, wall) = if only == "direct" {
                measure(ops, concurrency, direct).await?
            } else {
                measure(ops, concurrency, routed).await?
            };
            emit(serde_json::json!({
                "bench": "router",
                "mode": mode,
                "only": only,
                "backend": "local-mock-http1",
                "chain": 3,
                "concurrency": concurrency,
                "ops": s.len(),
                "ops_per_s": round2(s.len() as f64 / wall.as_secs_f64()),
                "p50_us": round2(s.quantile_us(0.5)),
                "p99_us": round2(s.quantile_us(0.99)),
                "baseline_p50_us": null,
                "baseline_p99_us": null,
                "ratio_p50": null,
                "ratio_p99": null,
            }));
            continue;
        }
        let warm = (ops / 10).clamp(concurrency, 1_000);
        measure(warm, concurrency, direct.clone()).await?;
        measure(warm, concurrency, routed.clone()).await?;
        // Alternate short rounds (ABBA) so the machine's drift, which on a
        // shared VM moves both series by tens of percent within seconds,
        // hits both alike.
        let round = (ops / rounds / concurrency).max(1) * concurrency;
        let (mut d, mut r) = (
            crate::stats::Samples::default(),
            crate::stats::Samples::default(),
        );
        let mut wall = std::time::Duration::ZERO;
        for i in 0..rounds {
            let routed_first = i % 2 == 1;
            for routed_now in [routed_first, !routed_first] {
                if routed_now {
                    let (s, w) = measure(round, concurrency, routed.clone()).await?;
                    r.extend(s);
                    wall += w;
                } else {
                    d.extend(measure(round, concurrency, direct.clone()).await?.0);
                }
            }
        }
        let (p50, p99, b50, b99) = (
            r.quantile_us(0.5),
            r.quantile_us(0.99),
            d.quantile_us(0.5),
            d.quantile_us(0.99),
        );
        emit(serde_json::json!({
            "bench": "router",
            "mode": mode,
            "backend": "local-mock-http1",
            "chain": 3,
            "concurrency": concurrency,
            "ops": r.len(),
            "ops_per_s": round2(r.len() as f64 / wall.as_secs_f64()),
            "rounds": rounds,
            "p50_us": round2(p50),
            "p99_us": round2(p99),
            "baseline_p50_us": round2(b50),
            "baseline_p99_us": round2(b99),
            "ratio_p50": round2(p50 / b50),
            "ratio_p99": round2(p99 / b99),
        }));
    }
    Ok(())
}
