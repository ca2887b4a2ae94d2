//! Task budgets: one budget per user task, shared by every caller of the store.

use std::time::Duration;

use super::{Setup, Subject, T0, env};
use crate::{
    LedgerError, PurgeReport, Reservation, Retention, TaskBudget, TaskExhausted, TaskId,
    TaskLimits, TaskOpen,
};

fn id(scope: &str, task: &str) -> TaskId {
    TaskId::new(scope, task).expect("valid task id")
}

fn limits(policy: &str, max_requests: u32, max_cost: Option<f64>) -> TaskLimits {
    TaskLimits {
        policy: policy.to_owned(),
        deadline: Duration::from_secs(60),
        max_requests,
        max_cost,
        grace: Duration::from_secs(600),
    }
}

fn reserved(r: Reservation) -> TaskBudget {
    match r {
        Reservation::Reserved(b) => b,
        other => panic!("expected a reservation, got {other:?}"),
    }
}

fn exhausted(r: Reservation) -> TaskExhausted {
    match r {
        Reservation::Exhausted(why, _) => why,
        other => panic!("expected exhausted, got {other:?}"),
    }
}

/// The first call opens the task and fixes its deadline; later calls under
/// the same policy join it (same deadline); another policy is refused and
/// changes nothing; the same name in another scope is another task.
pub async fn task_budget_open_join_and_policy_mismatch<F, Fut>(make: F)
where
    F: Fn(Setup) -> Fut,
    Fut: Future<Output = Subject>,
{
    let e = env(make, Retention::default()).await;
    let t = id("client-a", "task-1");
    let TaskOpen::Opened(first) = e.ledger.open_task(&t, &limits("p", 3, None)).await.unwrap()
    else {
        panic!("first call opens the task");
    };
    assert_eq!(first.deadline_at, T0.plus(Duration::from_secs(60)));
    assert_eq!(first.expires_at, T0.plus(Duration::from_secs(660)));
    assert_eq!((first.requests, first.requests_left()), (0, 3));
    reserved(e.ledger.reserve_request(&t).await.unwrap());

    e.clock.advance(Duration::from_secs(10));
    // A later call with other limits under the same policy joins: the
    // first call's deadline and allowance stand.
    let joined = e.ledger.open_task(&t, &limits("p", 9, None)).await.unwrap();
    let TaskOpen::Joined(b) = joined else {
        panic!("same policy joins, got {joined:?}");
    };
    assert_eq!(b.deadline_at, first.deadline_at);
    assert_eq!((b.max_requests, b.requests), (3, 1));
    assert_eq!(b.time_left(), Duration::from_secs(50));

    let other = e.ledger.open_task(&t, &limits("q", 3, None)).await.unwrap();
    let TaskOpen::PolicyMismatch(b) = other else {
        panic!("another policy is refused, got {other:?}");
    };
    assert_eq!(b.policy, "p");
    let stored = e
        .ledger
        .task_budget(&t)
        .await
        .unwrap()
        .expect("still there");
    assert_eq!((stored.policy.as_str(), stored.requests), ("p", 1));

    let elsewhere = id("client-b", "task-1");
    let opened = e.ledger.open_task(&elsewhere, &limits("q", 1, None)).await;
    assert!(matches!(opened, Ok(TaskOpen::Opened(_))), "{opened:?}");
    assert_eq!(e.ledger.task_budget(&t).await.unwrap().unwrap().requests, 1);

    let bad = e
        .ledger
        .open_task(&id("c", "t"), &limits("p", 1, Some(f64::NAN)))
        .await;
    assert_eq!(bad.unwrap_err().field(), Some("max_cost"));
    assert_eq!(e.ledger.task_budget(&id("c", "t")).await.unwrap(), None);
}

/// However many callers reserve at once, at most `max_requests`
/// reservations succeed; given-back reservations can be taken again.
pub async fn task_budget_concurrent_reservations_never_exceed<F, Fut>(make: F)
where
    F: Fn(Setup) -> Fut,
    Fut: Future<Output = Subject>,
{
    let e = env(make, Retention::default()).await;
    let t = id("client-a", "task-race");
    e.ledger.open_task(&t, &limits("p", 5, None)).await.unwrap();
    let tries = (0..24).map(|_| {
        let ledger = e.ledger.clone();
        let t = t.clone();
        tokio::spawn(async move { ledger.reserve_request(&t).await })
    });
    let mut granted = 0;
    for joined in futures_join(tries).await {
        match joined.expect("reserve") {
            Reservation::Reserved(_) => granted += 1,
            Reservation::Exhausted(why, b) => {
                assert_eq!(why, TaskExhausted::Requests);
                assert_eq!(b.requests, 5);
            }
        }
    }
    assert_eq!(granted, 5, "exactly max_requests reservations");
    let b = e.ledger.task_budget(&t).await.unwrap().unwrap();
    assert_eq!((b.requests, b.requests_left()), (5, 0));

    let b = e.ledger.release_requests(&t, 2).await.unwrap();
    assert_eq!(b.requests, 3);
    reserved(e.ledger.reserve_request(&t).await.unwrap());
    reserved(e.ledger.reserve_request(&t).await.unwrap());
    let why = exhausted(e.ledger.reserve_request(&t).await.unwrap());
    assert_eq!(why, TaskExhausted::Requests);
    // Giving back more than is reserved never goes below zero.
    assert_eq!(e.ledger.release_requests(&t, 99).await.unwrap().requests, 0);
}

async fn futures_join<T>(handles: impl Iterator<Item = tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for h in handles.collect::<Vec<_>>() {
        out.push(h.await.expect("task panicked"));
    }
    out
}

/// The cost ceiling and the deadline stop reservations; an expired task
/// answers as absent, may be opened afresh, and is purged.
pub async fn task_budget_cost_deadline_expiry_and_purge<F, Fut>(make: F)
where
    F: Fn(Setup) -> Fut,
    Fut: Future<Output = Subject>,
{
    let e = env(make, Retention::default()).await;
    let t = id("client-a", "task-cost");
    let missing = e.ledger.reserve_request(&t).await.unwrap_err();
    assert!(
        matches!(missing, LedgerError::TaskNotFound { .. }),
        "{missing}"
    );

    e.ledger
        .open_task(&t, &limits("p", 10, Some(0.05)))
        .await
        .unwrap();
    reserved(e.ledger.reserve_request(&t).await.unwrap());
    let bad = e.ledger.charge_task(&t, -1.0).await.unwrap_err();
    assert_eq!(bad.field(), Some("cost"));
    assert_eq!(e.ledger.charge_task(&t, 0.03).await.unwrap().cost, 0.03);
    reserved(e.ledger.reserve_request(&t).await.unwrap());
    let b = e.ledger.charge_task(&t, 0.03).await.unwrap();
    assert_eq!(b.cost_left(), Some(0.0));
    assert_eq!(
        exhausted(e.ledger.reserve_request(&t).await.unwrap()),
        TaskExhausted::Cost
    );

    let d = id("client-a", "task-deadline");
    e.ledger
        .open_task(&d, &limits("p", 10, None))
        .await
        .unwrap();
    e.clock.advance(Duration::from_secs(60));
    assert_eq!(
        exhausted(e.ledger.reserve_request(&d).await.unwrap()),
        TaskExhausted::Deadline
    );
    let joined = e
        .ledger
        .open_task(&d, &limits("p", 10, None))
        .await
        .unwrap();
    assert!(
        matches!(&joined, TaskOpen::Joined(b) if b.exhausted() == Some(TaskExhausted::Deadline)),
        "within the grace the task is still there, exhausted: {joined:?}"
    );
    assert_eq!(e.ledger.purge().await.unwrap(), PurgeReport::default());

    // Past deadline plus grace: gone, and the name may open a new task.
    e.clock.advance(Duration::from_secs(600));
    assert_eq!(e.ledger.task_budget(&d).await.unwrap(), None);
    let missing = e.ledger.reserve_request(&d).await.unwrap_err();
    assert!(
        matches!(missing, LedgerError::TaskNotFound { .. }),
        "{missing}"
    );
    assert_eq!(
        e.ledger.purge().await.unwrap(),
        PurgeReport {
            tombstoned: 0,
            deleted: 0,
            tasks_expired: 2
        }
    );
    let reopened = e.ledger.open_task(&d, &limits("q", 1, None)).await.unwrap();
    assert!(
        matches!(&reopened, TaskOpen::Opened(b) if b.policy == "q" && b.requests == 0),
        "{reopened:?}"
    );
}
