//! One budget per user task across calls and processes: routers that join
//! a task in one ledger store draw from one budget. Requests are counted at
//! the mock providers.

use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{
    Limits, ManualClock, MemoryLedger, Retention, SqliteLedger, SqliteOptions, TaskBudgets, TaskId,
};
use handover_router::RouterError;
use handover_router::budget::Exhausted;
use handover_router::route::{FailureReason, Router};
use handover_testkit::{Flavor, Plan, TcpProvider};

use crate::support;

use support::chain::{hello, status};

struct Mocks {
    primary: TcpProvider,
    fallback: TcpProvider,
}

impl Mocks {
    async fn start() -> Self {
        let m = Self {
            primary: TcpProvider::start(Flavor::OpenAi).await.unwrap(),
            fallback: TcpProvider::start(Flavor::OpenAi).await.unwrap(),
        };
        m.primary
            .set_default(status(500, "internal error", Some("server_error")));
        m.fallback
            .set_default(Plan::text(Flavor::OpenAi, "on its way"));
        m
    }

    fn total(&self) -> usize {
        self.primary.requests() + self.fallback.requests()
    }

    /// A router as one process builds it: policy `default` (three requests
    /// per task, the primary tried twice) and `other`.
    fn router(&self) -> Router {
        let provider = |name: &str, url: &str| {
            format!(
                "[providers.{name}]\nkind = \"openai\"\nbase_url = \"{url}\"\nmodel = \"m\"\n\
                 [providers.{name}.timeouts]\nconnect = \"1s\"\nfirst_byte = \"10s\"\n\
                 first_token = \"5s\"\nidle = \"5s\"\ntotal = \"20s\"\n"
            )
        };
        let text = format!(
            "[ledger]\nbackend = \"memory\"\n{}{}\n\
             [policies.default]\nchain = [\"primary\", \"fallback\"]\ndeadline = \"30s\"\n\
             max_requests = 3\nmax_attempts_per_provider = 2\n\
             [policies.default.backoff]\ninitial = \"1ms\"\nmax = \"2ms\"\njitter = false\n\
             [policies.other]\nchain = [\"fallback\"]\ndeadline = \"30s\"\n",
            provider("primary", self.primary.base_url()),
            provider("fallback", self.fallback.base_url()),
        );
        support::chain::router(&text)
    }
}

fn task(scope: &str, name: &str) -> TaskId {
    TaskId::new(scope, name).unwrap()
}

fn budget_reason(e: &RouterError) -> Option<Exhausted> {
    match &e.task_failure()?.reason {
        FailureReason::Budget(why) => Some(*why),
        _ => None,
    }
}

#[tokio::test]
async fn calls_of_one_task_on_two_routers_share_max_requests() {
    let m = Mocks::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    // Two processes' worth of state: two routers, two handles on one file.
    let stores: [Arc<dyn TaskBudgets>; 2] = [
        Arc::new(
            SqliteLedger::open(&path, SqliteOptions::default())
                .await
                .unwrap(),
        ),
        Arc::new(
            SqliteLedger::open(&path, SqliteOptions::default())
                .await
                .unwrap(),
        ),
    ];
    let routers = [m.router(), m.router()];
    let t = task("client-a", "user-task-1");

    // First call: primary 500 twice, fallback answers: 3 requests.
    let first = routers[0]
        .join_task("default", stores[0].clone(), &t)
        .await
        .unwrap();
    let done = routers[0].chat(&first, &hello()).await.unwrap();
    assert_eq!(done.provider, "fallback");
    assert_eq!(m.total(), 3);
    let left = first.budget().task_budget().unwrap();
    assert_eq!(left.requests_left(), 0, "{left:?}");

    // Second call, on the other router: nothing left, nothing sent.
    let second = routers[1]
        .join_task("default", stores[1].clone(), &t)
        .await
        .unwrap();
    let refused = routers[1].chat(&second, &hello()).await.unwrap_err();
    assert_eq!(
        budget_reason(&refused),
        Some(Exhausted::Requests),
        "{refused}"
    );
    assert_eq!(m.total(), 3, "an exhausted task sends nothing");

    // Another task id, and the same id in another scope, are independent.
    for other in [
        task("client-a", "user-task-2"),
        task("client-b", "user-task-1"),
    ] {
        let before = m.total();
        let t2 = routers[1]
            .join_task("default", stores[1].clone(), &other)
            .await
            .unwrap();
        routers[1].chat(&t2, &hello()).await.unwrap();
        assert_eq!(m.total(), before + 3);
    }

    // Another policy under the same task id is refused before anything is sent.
    let mismatch = routers[0]
        .join_task("other", stores[0].clone(), &t)
        .await
        .unwrap_err();
    assert!(
        matches!(&mismatch, RouterError::TaskPolicyMismatch { recorded, requested, .. }
            if recorded == "default" && requested == "other"),
        "{mismatch}"
    );
}

#[tokio::test]
async fn unused_reservations_are_given_back_when_the_call_ends() {
    let m = Mocks::start().await;
    m.primary
        .set_default(Plan::text(Flavor::OpenAi, "first try"));
    let store: Arc<dyn TaskBudgets> = Arc::new(MemoryLedger::default());
    let r = m.router();
    let t = task("client-a", "t");
    for n in 1..=3 {
        let joined = r.join_task("default", store.clone(), &t).await.unwrap();
        r.chat(&joined, &hello()).await.unwrap();
        let view = store.task_budget(&t).await.unwrap().unwrap();
        assert_eq!(view.requests, n, "one request per answered call");
        assert_eq!(m.total(), n as usize);
    }
    let joined = r.join_task("default", store.clone(), &t).await.unwrap();
    let refused = r.chat(&joined, &hello()).await.unwrap_err();
    assert_eq!(budget_reason(&refused), Some(Exhausted::Requests));
    assert_eq!(m.total(), 3);
}

#[tokio::test]
async fn the_first_calls_deadline_bounds_later_calls() {
    let m = Mocks::start().await;
    m.primary.set_default(Plan::text(Flavor::OpenAi, "hi"));
    let clock = ManualClock::new(handover_ledger::Timestamp::from_millis(1_700_000_000_000));
    let store: Arc<dyn TaskBudgets> = Arc::new(MemoryLedger::new(
        Arc::new(clock.clone()),
        Retention::default(),
        Limits::default(),
    ));
    let r = m.router();
    let t = task("client-a", "slow-task");
    let first = r.join_task("default", store.clone(), &t).await.unwrap();
    r.chat(&first, &hello()).await.unwrap();

    clock.advance(Duration::from_secs(20));
    let later = r.join_task("default", store.clone(), &t).await.unwrap();
    let left = later.budget().remaining();
    assert!(
        left <= Duration::from_secs(10),
        "{left:?} left of the first call's 30s"
    );

    clock.advance(Duration::from_secs(10));
    let late = r.join_task("default", store.clone(), &t).await.unwrap();
    let refused = r.chat(&late, &hello()).await.unwrap_err();
    assert_eq!(
        budget_reason(&refused),
        Some(Exhausted::Deadline),
        "{refused}"
    );
    assert_eq!(m.total(), 1, "nothing sent after the deadline");
}
