//! Reconciliation on PostgreSQL scans unresolved operations only, and
//! several reconcilers share the work:
//!
//! * `take_due_unknown` hands out each due `unknown` operation once, skips
//!   rows another transaction holds (`FOR UPDATE SKIP LOCKED`) without
//!   waiting, and holds what it handed out until `hold` passes;
//! * the blocker, lease-expiry and due-unknown scans use the partial
//!   indexes (plans checked with `EXPLAIN` over a table of settled rows).

use crate::postgres_support;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{
    BeginOptions, BeginOutcome, Clock, Dispatch, DueFilter, Ledger, Limits, ManualClock,
    OperationId, OperationRequest, Owner, PostgresLedger, PostgresOptions, State, Timestamp,
    UnknownReport,
};
use postgres_support as pg;
use serde_json::json;
use sqlx::{Connection, Row};

const T0: Timestamp = Timestamp::from_millis(1_700_000_000_000);
const LEASE: Duration = Duration::from_secs(30);
const UNKNOWN: usize = 40;

fn request(i: usize) -> OperationRequest {
    OperationRequest::new(
        &format!("tenant-{}", i % 4),
        &format!("K-{i}"),
        "create_shipment",
        &json!({"i": i}),
        &Limits::default(),
    )
    .expect("request")
}

/// `UNKNOWN` operations, unknown since T0, next check at T0 + 1 s.
async fn unknowns(l: &PostgresLedger) {
    for i in 0..UNKNOWN {
        let req = request(i);
        let BeginOutcome::Started(c) = l
            .begin(&req, &BeginOptions::new("exec", LEASE))
            .await
            .expect("begin")
        else {
            panic!("not started");
        };
        l.mark_dispatched(
            &c,
            Dispatch {
                executor: "exec".into(),
                metadata: None,
            },
        )
        .await
        .expect("dispatch");
        l.mark_unknown(
            &c,
            UnknownReport {
                reason: "timeout".into(),
                evidence: None,
                owner: Owner::Reconciler,
                next_check_at: Some(T0.plus(Duration::from_secs(1))),
            },
        )
        .await
        .expect("unknown");
    }
}

fn ids(recs: &[handover_ledger::OperationRecord]) -> HashSet<OperationId> {
    recs.iter().map(|r| r.id.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcilers_share_due_unknown_operations() {
    if pg::url().is_none() {
        return;
    }
    let clock = ManualClock::new(T0);
    let (a, b, guard) = pg::replicas(&clock).await;
    unknowns(&a).await;
    assert!(
        a.take_due_unknown(&DueFilter::default(), 100, LEASE)
            .await
            .expect("take")
            .is_empty(),
        "not due yet"
    );
    clock.advance(Duration::from_secs(2));
    let hold = Duration::from_secs(60);

    // Another session holds 10 of them: they are skipped, not waited for.
    let mut locker = pg::inspect(&guard.url, &guard.schema).await;
    sqlx::raw_sql("BEGIN")
        .execute(&mut locker)
        .await
        .expect("begin");
    let held: HashSet<String> = sqlx::query(
        "SELECT key FROM operations WHERE state = 'unknown' ORDER BY key LIMIT 10 FOR UPDATE",
    )
    .fetch_all(&mut locker)
    .await
    .expect("lock")
    .iter()
    .map(|r| r.get::<String, _>(0))
    .collect();
    let all = DueFilter::default();
    let (ta, tb) = tokio::join!(
        a.take_due_unknown(&all, 20, hold),
        b.take_due_unknown(&all, 20, hold)
    );
    let (ta, tb) = (ta.expect("take a"), tb.expect("take b"));
    let (sa, sb) = (ids(&ta), ids(&tb));
    assert!(sa.is_disjoint(&sb), "each operation goes to one reconciler");
    assert_eq!(sa.len() + sb.len(), UNKNOWN - 10);
    assert!(sa.union(&sb).all(|id| !held.contains(id.key.as_str())));
    for r in ta.iter().chain(&tb) {
        match &r.state {
            State::Unknown(info) => {
                assert_eq!(info.next_check_at, Some(clock.now().plus(hold)));
                assert_eq!(info.reason, "timeout", "reason kept");
            }
            other => panic!("expected unknown, got {other:?}"),
        }
    }
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut locker)
        .await
        .expect("rollback");
    let _ = locker.close().await;

    // The 10 that were locked are still due; the 30 handed out are held.
    let rest = a
        .take_due_unknown(&DueFilter::default(), 100, hold)
        .await
        .expect("take");
    assert_eq!(rest.len(), 10);
    assert!(rest.iter().all(|r| held.contains(r.id.key.as_str())));
    assert!(
        b.take_due_unknown(&DueFilter::default(), 100, hold)
            .await
            .expect("take")
            .is_empty()
    );
    // A reconciler that died lets the hold pass: everything is due again.
    clock.advance(hold);
    assert_eq!(
        b.take_due_unknown(&DueFilter::default(), 100, hold)
            .await
            .expect("take")
            .len(),
        UNKNOWN
    );
}

/// The scans that run on every begin with a block width, every `list`, and
/// every reconciler pass read only in-flight / unknown rows.
#[tokio::test]
async fn unresolved_scans_use_partial_indexes() {
    if pg::url().is_none() {
        return;
    }
    let clock = ManualClock::new(T0);
    let (l, guard) = pg::ledger(PostgresOptions {
        clock: Arc::new(clock.clone()),
        max_connections: 2,
        ..PostgresOptions::default()
    })
    .await;
    unknowns(&l).await;
    let mut c = pg::inspect(&guard.url, &guard.schema).await;
    // 20,000 settled operations around them.
    sqlx::query(
        "INSERT INTO operations (scope, key, action, params, fingerprint, state, epoch, result, \
         decided_at, destination_key, created_at, updated_at, first_dispatched_at, dispatch_count) \
         SELECT 'bulk-' || (g % 100), 'B-' || g, 'create_shipment', '{}', \
         md5(g::text) || md5(g::text), 'confirmed', 1, 'null', $1, 'dk-' || g, $1, $1, $1, 1 \
         FROM generate_series(1, 20000) g",
    )
    .bind(T0.0)
    .execute(&mut c)
    .await
    .expect("bulk");
    sqlx::raw_sql("ANALYZE operations")
        .execute(&mut c)
        .await
        .expect("analyze");
    let now = T0.0 + 60_000;
    let plans = [
        (
            "operations_unresolved",
            format!(
                "SELECT * FROM operations WHERE action = 'create_shipment' AND scope = 'tenant-1' \
                 AND key <> 'K-1' AND (state = 'unknown' OR (state = 'dispatched' AND lease_until <= {now})) \
                 ORDER BY created_at, scope, key LIMIT 1"
            ),
        ),
        (
            "operations_leases",
            format!(
                "SELECT * FROM operations WHERE (state = 'dispatched' AND lease_until <= {now}) \
                 OR (state = 'claimed' AND dispatch_count > 0 AND lease_until <= {now})"
            ),
        ),
        (
            "operations_unknown",
            format!(
                "SELECT * FROM operations WHERE state = 'unknown' AND next_check_at <= {now} \
                 ORDER BY next_check_at, created_at, scope, key LIMIT 10"
            ),
        ),
    ];
    for (index, query) in plans {
        let plan = explain(&mut c, &query).await;
        assert!(plan.contains(index), "expected {index} in\n{plan}");
        assert!(!plan.contains("Seq Scan"), "{plan}");
    }
    // The ledger's one blocker statement (width `scope` binds the scope,
    // width `action` NULL), as a prepared statement's generic plan: the
    // plan the server keeps using after a few executions.
    sqlx::raw_sql(
        "SET plan_cache_mode = force_generic_plan; \
         PREPARE blocker(text, text, text, text, bigint) AS SELECT * FROM operations \
         WHERE action = $1 AND (CAST($2 AS TEXT) IS NULL OR scope = $2) \
         AND NOT (scope = $3 AND key = $4) \
         AND (state = 'unknown' OR (state = 'dispatched' AND lease_until <= $5)) \
         ORDER BY created_at, scope, key LIMIT 1",
    )
    .execute(&mut c)
    .await
    .expect("prepare");
    for scope in ["'tenant-1'", "NULL"] {
        let query =
            format!("EXECUTE blocker('create_shipment', {scope}, 'tenant-1', 'K-1', {now})");
        let plan = explain(&mut c, &query).await;
        assert!(plan.contains("operations_unresolved"), "{scope}: {plan}");
        assert!(!plan.contains("Seq Scan"), "{scope}: {plan}");
    }
    let _ = c.close().await;
}

async fn explain(c: &mut sqlx::PgConnection, query: &str) -> String {
    let plan: Vec<String> = sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN {query}")))
        .fetch_all(c)
        .await
        .expect("explain")
        .iter()
        .map(|r| r.get::<String, _>(0))
        .collect();
    plan.join("\n")
}
