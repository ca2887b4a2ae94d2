//! Per-provider admission: a concurrency cap (accounts have concurrency
//! limits), a bounded wait queue, and a bounded share of slots for traffic
//! failing over from an earlier provider, so an overloaded primary's whole
//! queue is not dumped onto the fallback at once. Time spent waiting for a
//! slot is charged to the task's budget (the wait is cut at its deadline).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::budget::{Budget, Exhausted};

/// Why no slot was granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Too many requests are already waiting for this provider.
    QueueFull,
    /// The task's budget ran out while waiting.
    Budget(Exhausted),
}

/// A granted place among the provider's concurrent requests; dropping it
/// frees the place.
#[derive(Debug)]
pub(crate) struct Permit {
    _all: OwnedSemaphorePermit,
    _failover: Option<OwnedSemaphorePermit>,
}

/// The admission control of one provider.
#[derive(Debug)]
pub(crate) struct Admission {
    all: Arc<Semaphore>,
    failover: Arc<Semaphore>,
    waiting: AtomicUsize,
    max_queue: usize,
}

impl Admission {
    /// Admission with `max_concurrency` slots, of which at most
    /// `ceil(share × max_concurrency)` may be held by failed-over traffic, and
    /// at most `max_queue` waiters.
    pub(crate) fn new(max_concurrency: usize, max_queue: usize, failover_share: f64) -> Self {
        let failover = ((max_concurrency as f64) * failover_share).ceil() as usize;
        Self {
            all: Arc::new(Semaphore::new(max_concurrency)),
            failover: Arc::new(Semaphore::new(failover.clamp(1, max_concurrency.max(1)))),
            waiting: AtomicUsize::new(0),
            max_queue,
        }
    }

    /// Slots free right now.
    #[cfg(test)]
    pub(crate) fn available(&self) -> usize {
        self.all.available_permits()
    }

    /// Waits for a slot within the budget. `failover` marks traffic that
    /// arrives because an earlier provider in the chain failed.
    pub(crate) async fn acquire(&self, failover: bool, budget: &Budget) -> Result<Permit, Refused> {
        let immediate = |sem: &Arc<Semaphore>| sem.clone().try_acquire_owned().ok();
        let fast_failover = if failover {
            immediate(&self.failover)
        } else {
            None
        };
        if (!failover || fast_failover.is_some())
            && let Some(all) = immediate(&self.all)
        {
            return Ok(Permit {
                _all: all,
                _failover: fast_failover,
            });
        }
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.max_queue {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(Refused::QueueFull);
        }
        let _waiter = WaitGuard(&self.waiting);
        let failover_permit = match (failover, fast_failover) {
            (false, _) => None,
            (true, Some(p)) => Some(p),
            (true, None) => Some(self.wait(&self.failover, budget).await?),
        };
        let all = self.wait(&self.all, budget).await?;
        Ok(Permit {
            _all: all,
            _failover: failover_permit,
        })
    }

    async fn wait(
        &self,
        sem: &Arc<Semaphore>,
        budget: &Budget,
    ) -> Result<OwnedSemaphorePermit, Refused> {
        match budget.within(sem.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            // The semaphores are never closed; treat it as a full queue if they were.
            Ok(Err(_closed)) => Err(Refused::QueueFull),
            Err(exhausted) => Err(Refused::Budget(exhausted)),
        }
    }
}

struct WaitGuard<'a>(&'a AtomicUsize);

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn failover_traffic_gets_a_bounded_share() {
        let admission = Admission::new(4, 0, 0.5);
        let budget = Budget::new(Duration::from_secs(1), 100, None);
        let a = admission.acquire(true, &budget).await.unwrap();
        let b = admission.acquire(true, &budget).await.unwrap();
        // A third failover request may not take a slot (share = 2 of 4) and
        // the queue is zero: refused at once.
        assert_eq!(
            admission.acquire(true, &budget).await.unwrap_err(),
            Refused::QueueFull
        );
        // Primary traffic still gets the remaining slots.
        let _c = admission.acquire(false, &budget).await.unwrap();
        let _d = admission.acquire(false, &budget).await.unwrap();
        assert_eq!(admission.available(), 0);
        drop((a, b));
        assert_eq!(admission.available(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_is_charged_to_the_budget() {
        let admission = Admission::new(1, 10, 1.0);
        let budget = Budget::new(Duration::from_secs(2), 100, None);
        let _held = admission.acquire(false, &budget).await.unwrap();
        let started = tokio::time::Instant::now();
        let refused = admission.acquire(false, &budget).await.unwrap_err();
        assert_eq!(refused, Refused::Budget(Exhausted::Deadline));
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }
}
