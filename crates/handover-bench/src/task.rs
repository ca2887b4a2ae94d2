//! The `task` benchmark: what a shared task budget (the gateway's
//! `x-handover-task`) adds to a routed call. In one run, against the same
//! local mock, it measures a routed call with a fresh local budget (the
//! baseline) and a routed call that joins a task whose budget lives in the
//! ledger's store (`Router::join_task`: one open-or-join and one request
//! reservation per call), four calls per task, at the requested
//! concurrency.
//!
//! ```text
//! cargo run --release -p handover-bench -- task --backend sqlite --concurrency 16
//! HANDOVER_BENCH_POSTGRES_URL=postgres://... cargo run --release -p handover-bench -- task --backend postgres
//! ```

use std::sync::Arc;
use std::time::Instant;

use handover_ledger::{MemoryLedger, SqliteLedger, SqliteOptions, TaskBudgets, TaskId};
use handover_providers::{ChatRequest, Message};
use handover_router::config::Config;
use handover_router::route::Router;

use crate::stats::{emit, measure, round2};
use crate::{BenchResult, args::Args, mock_http};

type Err = Box<dyn std::error::Error + Send + Sync>;

/// Runs the `task` benchmark.
pub(crate) async fn run(args: Args) -> BenchResult {
    let backend = args.string("backend", "sqlite");
    let concurrency = args.number("concurrency", 1)?.max(1) as usize;
    let ops = args.number("ops", 4_000)? as usize / concurrency * concurrency;
    let scratch = crate::ledger::Scratch::new()?;
    let mut schema = None;
    let store: Arc<dyn TaskBudgets> = match backend.as_str() {
        "memory" => Arc::new(MemoryLedger::default()),
        "sqlite" => Arc::new(
            SqliteLedger::open(scratch.0.join("ledger.db"), SqliteOptions::default()).await?,
        ),
        "postgres" => {
            let url = crate::ledger_pg::url(&args)?;
            let s = crate::ledger_pg::Schema::new(&url, "task");
            let ledger = s.ledger(u32::try_from(concurrency)?.max(4)).await?;
            schema = Some(s);
            Arc::new(ledger)
        }
        other => {
            return Err(
                format!("--backend: expected memory, sqlite or postgres, got {other:?}").into(),
            );
        }
    };
    let base = format!("{}/v1", mock_http::start(mock_http::llm_answers())?);
    let config = Config::parse(
        &format!(
            "[ledger]\nbackend = \"memory\"\n[providers.a]\nkind = \"openai\"\nbase_url = \"{base}\"\n\
             model = \"gpt-4o-mini\"\nmax_concurrency = 1024\n\
             [policies.default]\nchain = [\"a\"]\nmax_requests = 100\n"
        ),
        &|_| None,
    )?;
    let router = Arc::new(Router::with_env(&config, &|_| None)?);
    let req = Arc::new(ChatRequest::new(vec![Message::user("Hello!")]));
    let run_id = uuid::Uuid::now_v7().simple().to_string();

    let local = {
        let (router, req) = (router.clone(), req.clone());
        move |_i: usize| {
            let (router, req) = (router.clone(), req.clone());
            async move {
                let t = Instant::now();
                let task = router.task("default")?;
                std::hint::black_box(router.chat(&task, &req).await?);
                Ok::<_, Err>(t.elapsed())
            }
        }
    };
    let shared = |series: &'static str| {
        let (router, req, store, run_id) =
            (router.clone(), req.clone(), store.clone(), run_id.clone());
        move |i: usize| {
            let (router, req, store) = (router.clone(), req.clone(), store.clone());
            let id = TaskId::new("bench", &format!("{run_id}-{series}-{}", i / 4));
            async move {
                let t = Instant::now();
                let task = router.join_task("default", store, &id?).await?;
                std::hint::black_box(router.chat(&task, &req).await?);
                Ok::<_, Err>(t.elapsed())
            }
        }
    };
    let warm = (ops / 10).clamp(concurrency, 500);
    measure(warm, concurrency, local.clone()).await?;
    measure(warm, concurrency, shared("warm")).await?;
    // Alternate halves so drift hits both series equally.
    let half = ops / 2 / concurrency * concurrency;
    let (mut b, _) = measure(half, concurrency, local.clone()).await?;
    let (mut s, w1) = measure(half, concurrency, shared("one")).await?;
    let (b2, _) = measure(half, concurrency, local).await?;
    let (s2, w2) = measure(half, concurrency, shared("two")).await?;
    b.extend(b2);
    s.extend(s2);
    let (p50, p99, b50, b99) = (
        s.quantile_us(0.5),
        s.quantile_us(0.99),
        b.quantile_us(0.5),
        b.quantile_us(0.99),
    );
    emit(serde_json::json!({
        "bench": "task",
        "backend": backend,
        "baseline": "the same routed call with a fresh local budget (no x-handover-task)",
        "calls_per_task": 4,
        "concurrency": concurrency,
        "ops": s.len(),
        "ops_per_s": round2(s.len() as f64 / (w1 + w2).as_secs_f64()),
        "p50_us": round2(p50),
        "p99_us": round2(p99),
        "baseline_p50_us": round2(b50),
        "baseline_p99_us": round2(b99),
        "ratio_p50": round2(p50 / b50),
        "ratio_p99": round2(p99 / b99),
    }));
    drop(store);
    if let Some(s) = schema {
        s.drop_now().await?;
    }
    Ok(())
}
