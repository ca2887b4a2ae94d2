//! The `ledger` benchmark on PostgreSQL (`--backend postgres`).
//!
//! ```text
//! HANDOVER_BENCH_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/handover_dev \
//!   cargo run --release -p handover-bench -- ledger --backend postgres --concurrency 16
//! cargo run --release -p handover-bench -- ledger --backend postgres --growth 1000000
//! ```
//!
//! **Lifecycles** (default): the write gate's `begin_dispatched` →
//! `confirm` (or, with `--lifecycle steps`, `begin` → `mark_dispatched` →
//! `confirm`) on `--concurrency` tasks, against a baseline measured in the
//! same run on the same server and pool size: the same number of
//! single-row `UPDATE` transactions (autocommit) through sqlx, half before
//! and half after the ledger run. A lifecycle needs `c` durable commits (2
//! or 3), so the target is `ops_per_s >= (baseline_ops_per_s / c) / 2`,
//! printed as `throughput_vs_commit_updates` (target ≥ 0.5).
//!
//! **Growth** (`--growth N`): `begin` of new keys (each a claim) with
//! `--small` (default 1,000) vs N stored operations, on two schemas of the
//! same database loaded with one `INSERT … SELECT generate_series`,
//! measured in alternating rounds so machine noise hits both alike.
//! `ratio_p50` = large / small. `--durable 0` runs these sessions with
//! `synchronous_commit = off`, so fsync latency does not mask index costs.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use handover_ledger::{
    BeginOptions, BeginOutcome, Ledger, OperationRequest, PostgresLedger, PostgresOptions,
};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool};

use crate::ledger::{Lifecycle, drive, requests};
use crate::stats::{Samples, emit, round2};
use crate::{BenchResult, args::Args};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// A schema for one run, dropped at the end.
pub(crate) struct Schema {
    url: String,
    name: String,
}

impl Schema {
    pub(crate) fn new(url: &str, tag: &str) -> Self {
        Self {
            url: url.to_owned(),
            name: format!("bench_{tag}_{}", uuid::Uuid::now_v7().simple()),
        }
    }

    pub(crate) async fn ledger(&self, pool: u32) -> Result<PostgresLedger, Error> {
        let opts = PostgresOptions {
            schema: Some(self.name.clone()),
            max_connections: pool,
            statement_timeout: Duration::from_secs(30),
            ..PostgresOptions::default()
        };
        Ok(PostgresLedger::connect(&self.url, opts).await?)
    }

    /// A connection in the schema without a statement timeout (bulk work).
    async fn conn(&self) -> Result<PgConnection, Error> {
        let o: PgConnectOptions = self.url.parse()?;
        Ok(PgConnection::connect_with(&o.options([("search_path", self.name.as_str())])).await?)
    }

    pub(crate) async fn drop_now(self) -> Result<(), Error> {
        let mut c = PgConnection::connect(&self.url).await?;
        let sql = format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name);
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut c)
            .await?;
        c.close().await?;
        Ok(())
    }
}

pub(crate) fn url(args: &Args) -> Result<String, Error> {
    let u = args.string("url", "");
    if !u.is_empty() {
        return Ok(u);
    }
    std::env::var("HANDOVER_BENCH_POSTGRES_URL").map_err(|_| {
        "--url or HANDOVER_BENCH_POSTGRES_URL is required for --backend postgres".into()
    })
}

/// Runs the PostgreSQL ledger benchmark.
pub(crate) async fn run(args: Args) -> BenchResult {
    let url = url(&args)?;
    let growth = usize::try_from(args.number("growth", 0)?)?;
    if growth > 0 {
        return run_growth(&url, &args, growth).await;
    }
    let concurrency = usize::try_from(args.number("concurrency", 1)?)?.max(1);
    let ops = usize::try_from(args.number("ops", 3_000)?)?.max(2);
    let pool = u32::try_from(args.number("pool", concurrency.clamp(1, 32) as u64)?)?.max(1);
    let schema = Schema::new(&url, "lifecycle");
    let kind = Lifecycle::from_args(&args)?;
    let result = lifecycles(&schema, concurrency, ops, pool, kind).await;
    schema.drop_now().await?;
    result
}

async fn lifecycles(
    schema: &Schema,
    concurrency: usize,
    ops: usize,
    pool: u32,
    kind: Lifecycle,
) -> BenchResult {
    let ledger: Arc<dyn Ledger> = Arc::new(schema.ledger(pool).await?);
    // The baseline pool: same server, schema and size.
    let base_opts: PgConnectOptions = schema.url.parse()?;
    let base = PgPoolOptions::new()
        .max_connections(pool)
        .test_before_acquire(false)
        .connect_with(base_opts.options([("search_path", schema.name.as_str())]))
        .await?;
    sqlx::raw_sql(
        "CREATE TABLE bench_baseline (id BIGINT PRIMARY KEY, n BIGINT NOT NULL, note TEXT); \
         INSERT INTO bench_baseline SELECT g, 0, NULL FROM generate_series(0, 99999) g",
    )
    .execute(&base)
    .await?;

    let half = ops.div_ceil(2);
    let mut baseline = updates(&base, half, concurrency, 0).await?;
    let warmup = Arc::new(requests("warmup", (ops / 10).clamp(10, 500))?);
    drive(ledger.clone(), warmup, concurrency, kind).await?;
    let reqs = Arc::new(requests("op", ops)?);
    let (mut samples, wall) = drive(ledger, reqs, concurrency, kind).await?;
    let second = updates(&base, half, concurrency, half).await?;
    baseline.0.extend(second.0);
    let baseline_wall = baseline.1 + second.1;
    base.close().await;

    let (p50, p99) = (samples.quantile_us(0.50), samples.quantile_us(0.99));
    let (b50, b99) = (baseline.0.quantile_us(0.50), baseline.0.quantile_us(0.99));
    let ops_per_s = samples.len() as f64 / wall.as_secs_f64();
    let base_per_s = baseline.0.len() as f64 / baseline_wall.as_secs_f64();
    let (lifecycle, commits) = kind.describe();
    emit(serde_json::json!({
        "bench": "ledger",
        "backend": "postgres",
        "lifecycle": lifecycle,
        "commits_per_lifecycle": commits,
        "concurrency": concurrency,
        "pool": pool,
        "ops": samples.len(),
        "ops_per_s": round2(ops_per_s),
        "p50_us": round2(p50),
        "p99_us": round2(p99),
        "baseline": "single-row UPDATE, autocommit, sqlx pool of the same size, same server",
        "baseline_ops": baseline.0.len(),
        "baseline_ops_per_s": round2(base_per_s),
        "baseline_p50_us": round2(b50),
        "baseline_p99_us": round2(b99),
        "ratio_p50": round2(p50 / b50),
        "ratio_p99": round2(p99 / b99),
        "throughput_vs_commit_updates": round2(ops_per_s / (base_per_s / f64::from(commits))),
    }));
    Ok(())
}

/// `n` single-row UPDATE transactions on `concurrency` tasks (rows from `offset`).
async fn updates(
    pool: &PgPool,
    n: usize,
    concurrency: usize,
    offset: usize,
) -> Result<(Samples, Duration), Error> {
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (pool, next) = (pool.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut s = Samples::with_capacity(n / concurrency + 1);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let id = i64::try_from((offset + i) % 100_000)?;
                let t = Instant::now();
                sqlx::query("UPDATE bench_baseline SET n = n + 1, note = $2 WHERE id = $1")
                    .bind(id)
                    .bind("dispatched")
                    .execute(&pool)
                    .await?;
                s.push(t.elapsed());
            }
            Ok::<_, Error>(s)
        }));
    }
    let mut all = Samples::with_capacity(n);
    for t in tasks {
        all.extend(t.await??);
    }
    Ok((all, start.elapsed()))
}

/// Loads `rows` settled operations with `INSERT … SELECT generate_series`
/// (in batches), then `VACUUM ANALYZE`.
async fn bulk_load(schema: &Schema, rows: usize) -> Result<(), Error> {
    let mut c = schema.conn().await?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis();
    let now = i64::try_from(now)?;
    let batch = 100_000;
    let mut from = 0;
    while from < rows {
        let to = (from + batch).min(rows);
        sqlx::query(
            "INSERT INTO operations (scope, key, action, params, fingerprint, state, epoch, \
             result, decided_at, destination_key, created_at, updated_at, first_dispatched_at, \
             dispatch_count) \
             SELECT 'bulk-' || (g % 1000), 'B-' || g, 'create_shipment', '{\"order\":' || g || '}', \
             md5(g::text) || md5(g::text), 'confirmed', 1, '{\"shipment\":\"S\"}', $1, \
             'dk-' || g, $1, $1, $1, 1 \
             FROM generate_series($2::bigint, $3::bigint) g",
        )
        .bind(now)
        .bind(i64::try_from(from)?)
        .bind(i64::try_from(to - 1)?)
        .execute(&mut c)
        .await?;
        from = to;
    }
    // One statement each: VACUUM cannot run in the implicit transaction of
    // a multi-statement query.
    sqlx::raw_sql("VACUUM ANALYZE operations")
        .execute(&mut c)
        .await?;
    sqlx::raw_sql("VACUUM ANALYZE attempts")
        .execute(&mut c)
        .await?;
    // Flush the load's dirty pages now rather than during the measurement
    // (needs superuser or pg_checkpoint; skipped without).
    let _ = sqlx::raw_sql("CHECKPOINT").execute(&mut c).await;
    c.close().await?;
    Ok(())
}

/// `begin` of each request (a new key: a claim), one latency sample each.
async fn begins(
    ledger: Arc<dyn Ledger>,
    reqs: Arc<Vec<OperationRequest>>,
    concurrency: usize,
) -> Result<Samples, Error> {
    let next = Arc::new(AtomicUsize::new(0));
    let opts = Arc::new(BeginOptions::new("bench", Duration::from_secs(60)));
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (ledger, reqs, next, opts) = (ledger.clone(), reqs.clone(), next.clone(), opts.clone());
        tasks.push(tokio::spawn(async move {
            let mut s = Samples::with_capacity(reqs.len() / concurrency + 1);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(req) = reqs.get(i) else { break };
                let t = Instant::now();
                let BeginOutcome::Started(_) = ledger.begin(req, &opts).await? else {
                    return Err::<Samples, Error>(
                        format!("begin of {} did not start", req.id()).into(),
                    );
                };
                s.push(t.elapsed());
            }
            Ok(s)
        }));
    }
    let mut all = Samples::default();
    for t in tasks {
        all.extend(t.await??);
    }
    Ok(all)
}

async fn run_growth(url: &str, args: &Args, large: usize) -> BenchResult {
    // `--durable 0`: commits do not wait for the WAL flush
    // (`synchronous_commit = off` for these sessions only), so the disk's
    // fsync latency does not hide what the table size costs.
    let durable = args.number("durable", 1)? != 0;
    let url = if durable {
        url.to_owned()
    } else {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}options=-c%20synchronous_commit%3Doff")
    };
    let url = url.as_str();
    let small = usize::try_from(args.number("small", 1_000)?)?;
    let concurrency = usize::try_from(args.number("concurrency", 1)?)?.max(1);
    let ops = usize::try_from(args.number("ops", 4_000)?)?.max(2);
    let rounds = usize::try_from(args.number("rounds", 20)?)?.max(1);
    let pool = u32::try_from(concurrency.clamp(1, 16))?;
    let (s_schema, l_schema) = (Schema::new(url, "small"), Schema::new(url, "large"));
    let result = async {
        let s_ledger: Arc<dyn Ledger> = Arc::new(s_schema.ledger(pool).await?);
        let l_ledger: Arc<dyn Ledger> = Arc::new(l_schema.ledger(pool).await?);
        let t = Instant::now();
        bulk_load(&s_schema, small).await?;
        bulk_load(&l_schema, large).await?;
        let load_s = t.elapsed().as_secs_f64();
        let per_round = (ops / rounds).max(1);
        let (mut s_all, mut l_all) = (Samples::default(), Samples::default());
        // The large ledger's time in its rounds: its ops per second.
        let mut l_wall = std::time::Duration::ZERO;
        let warm = Arc::new(requests("warm", 200)?);
        begins(s_ledger.clone(), warm.clone(), concurrency).await?;
        begins(l_ledger.clone(), warm, concurrency).await?;
        for r in 0..rounds {
            let reqs = Arc::new(requests(&format!("r{r}"), per_round)?);
            // Alternate which goes first.
            if r % 2 == 0 {
                s_all.extend(begins(s_ledger.clone(), reqs.clone(), concurrency).await?);
                let t = Instant::now();
                l_all.extend(begins(l_ledger.clone(), reqs, concurrency).await?);
                l_wall += t.elapsed();
            } else {
                let t = Instant::now();
                l_all.extend(begins(l_ledger.clone(), reqs.clone(), concurrency).await?);
                l_wall += t.elapsed();
                s_all.extend(begins(s_ledger.clone(), reqs, concurrency).await?);
            }
        }
        let (p50, p99) = (l_all.quantile_us(0.50), l_all.quantile_us(0.99));
        let (b50, b99) = (s_all.quantile_us(0.50), s_all.quantile_us(0.99));
        emit(serde_json::json!({
            "bench": "ledger_growth",
            "backend": "postgres",
            "concurrency": concurrency,
            "op": "begin of a new key (claim)",
            "synchronous_commit": if durable { "on" } else { "off" },
            "ops": l_all.len(),
            "ops_per_s": round2(l_all.len() as f64 / l_wall.as_secs_f64()),
            "stored_large": large,
            "stored_small": small,
            "bulk_load_s": round2(load_s),
            "p50_us": round2(p50),
            "p99_us": round2(p99),
            "baseline": format!("same begins with {small} stored operations, alternating rounds"),
            "baseline_p50_us": round2(b50),
            "baseline_p99_us": round2(b99),
            "ratio_p50": round2(p50 / b50),
            "ratio_p99": round2(p99 / b99),
        }));
        Ok::<(), Error>(())
    }
    .await;
    s_schema.drop_now().await?;
    l_schema.drop_now().await?;
    result
}
