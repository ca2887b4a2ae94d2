//! One budget per user task (DESIGN §7), shared by every attempt, retry,
//! backoff sleep, wait for a provider slot and provider switch of that task.
//!
//! A budget lives in this process ([`Budget::new`]) or, for a task whose
//! calls may be served by several processes (the gateway's
//! `x-handover-task`), draws from a task budget in the ledger's store
//! (`Budget::shared`, see `shared.rs`): the deadline and the cost ceiling
//! are the store's, and every HTTP request is reserved there before it is
//! sent, so replicas sharing the store never exceed `max_requests` together.
//!
//! This module owns time for the router: it is the only place that sleeps
//! (`clippy.toml` forbids `tokio::time::sleep` elsewhere), and every sleep is
//! clamped to what remains. A fixed retry count per layer multiplies into
//! retry storms; a shared budget cannot (see tower's `retry::budget`).

mod shared;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use shared::Shared;

/// Why the budget refused to go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exhausted {
    /// The absolute deadline has passed.
    Deadline,
    /// The maximum number of HTTP requests has been sent.
    Requests,
    /// The cost ceiling has been reached.
    Cost,
    /// The store holding the task's shared budget could not be reached:
    /// nothing is sent (fail closed).
    StoreUnavailable,
}

impl Exhausted {
    /// Stable name for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deadline => "deadline",
            Self::Requests => "max_requests",
            Self::Cost => "max_cost",
            Self::StoreUnavailable => "budget_store_unavailable",
        }
    }
}

/// What a task has spent so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spent {
    /// Time since the task started.
    pub elapsed: Duration,
    /// HTTP requests actually sent (counted at the transport).
    pub requests: u32,
    /// Cost in USD, from provider prices and reported usage.
    pub cost: f64,
}

/// The budget of one user task: a deadline, a maximum number of HTTP
/// requests actually sent and an optional cost ceiling.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::time::Duration;
/// use handover_router::budget::Budget;
///
/// // Every task has one (`Task::budget`); the router draws requests, time
/// // and cost from it, the caller reads what is left.
/// let budget = Budget::new(Duration::from_secs(10), 2, None);
/// assert!(budget.check().is_ok());
/// assert_eq!(budget.spent().requests, 0);
/// tokio::time::advance(Duration::from_secs(4)).await;
/// assert_eq!(budget.remaining(), Duration::from_secs(6));
/// # }
/// ```
#[derive(Debug)]
pub struct Budget {
    started: Instant,
    deadline: Instant,
    max_requests: u32,
    /// Requests this process may send: `max_requests` for a local budget,
    /// the reservations taken from the store for a shared one.
    allowance: AtomicU32,
    sent: AtomicU32,
    max_cost: Option<f64>,
    cost: Mutex<f64>,
    shared: Option<Shared>,
}

impl Budget {
    /// A budget starting now.
    pub fn new(deadline: Duration, max_requests: u32, max_cost: Option<f64>) -> Self {
        let started = Instant::now();
        Self {
            started,
            deadline: started + deadline,
            max_requests,
            allowance: AtomicU32::new(max_requests),
            sent: AtomicU32::new(0),
            max_cost,
            cost: Mutex::new(0.0),
            shared: None,
        }
    }

    /// The absolute deadline.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Time left before the deadline (zero once passed).
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// An attempt's timeout: the smaller of its own limit and what remains.
    pub(crate) fn attempt_timeout(&self, own: Duration) -> Duration {
        own.min(self.remaining())
    }

    /// Why the budget cannot start another attempt now, if it cannot.
    pub fn check(&self) -> Result<(), Exhausted> {
        if self.remaining().is_zero() {
            return Err(Exhausted::Deadline);
        }
        match &self.shared {
            // The store decides; it has refused already.
            Some(shared) => shared.refused()?,
            None if self.sent.load(Ordering::Acquire) >= self.max_requests => {
                return Err(Exhausted::Requests);
            }
            None => {}
        }
        if let Some(max) = self.max_cost
            && self.cost_spent() >= max
        {
            return Err(Exhausted::Cost);
        }
        Ok(())
    }

    /// Takes one HTTP request from the budget; called by the transport right
    /// before a request is written, so it counts requests actually sent.
    pub(crate) fn try_send(&self) -> Result<(), Exhausted> {
        if self.remaining().is_zero() {
            return Err(Exhausted::Deadline);
        }
        if let Some(max) = self.max_cost
            && self.cost_spent() >= max
        {
            return Err(Exhausted::Cost);
        }
        self.sent
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.allowance.load(Ordering::Acquire)).then_some(n + 1)
            })
            .map(|_| ())
            .map_err(|_| Exhausted::Requests)
    }

    /// Returns one request taken by [`Budget::try_send`] that provably never
    /// left (connection refused): it does not count as sent.
    pub(crate) fn give_back(&self) {
        let _ = self
            .sent
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Adds the cost of an answered attempt (for a shared budget, the store
    /// hears of it when the call settles).
    pub(crate) fn charge(&self, usd: f64) {
        if usd.is_finite() && usd > 0.0 {
            *self.cost.lock().unwrap_or_else(|p| p.into_inner()) += usd;
            if let Some(shared) = &self.shared {
                shared.owe(usd);
            }
        }
    }

    /// Whether this budget draws from a task budget in a store (its cost
    /// reaches the store only through [`Budget::settle`] or
    /// [`Budget::pay`]).
    pub(crate) fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    fn cost_spent(&self) -> f64 {
        *self.cost.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// HTTP requests sent so far (for a shared budget: by the whole task
    /// before this budget joined it, plus by this budget).
    pub fn requests_sent(&self) -> u32 {
        let base = self.shared.as_ref().map_or(0, Shared::base_requests);
        base.saturating_add(self.sent.load(Ordering::Acquire))
    }

    /// What has been spent so far.
    pub fn spent(&self) -> Spent {
        Spent {
            elapsed: self.elapsed(),
            requests: self.requests_sent(),
            cost: self.cost_spent(),
        }
    }

    /// Time since the task started: what the walk stamps its attempts
    /// with, without reading the request and cost counters [`spent`]
    /// also reads.
    ///
    /// [`spent`]: Self::spent
    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Sleeps for `delay` if the whole delay fits in what remains; otherwise
    /// returns at once with [`Exhausted::Deadline`] (a wait that cannot finish
    /// inside the budget is not worth starting: fail over now instead).
    pub async fn sleep_within(&self, delay: Duration) -> Result<(), Exhausted> {
        if delay >= self.remaining() {
            return Err(Exhausted::Deadline);
        }
        #[allow(clippy::disallowed_methods)] // the one place that sleeps
        tokio::time::sleep(delay).await;
        Ok(())
    }

    /// Runs `fut` until it finishes or the deadline passes.
    pub async fn within<F: Future>(&self, fut: F) -> Result<F::Output, Exhausted> {
        tokio::time::timeout_at(self.deadline, fut)
            .await
            .map_err(|_| Exhausted::Deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn sleeps_only_when_the_delay_fits() {
        let budget = Budget::new(Duration::from_secs(5), 10, None);
        assert_eq!(budget.sleep_within(Duration::from_secs(2)).await, Ok(()));
        assert!(budget.remaining() <= Duration::from_secs(3));
        // 4s does not fit in the 3s that remain: refuse without sleeping.
        let before = Instant::now();
        assert_eq!(
            budget.sleep_within(Duration::from_secs(4)).await,
            Err(Exhausted::Deadline)
        );
        assert_eq!(Instant::now(), before);
    }

    #[tokio::test(start_paused = true)]
    async fn requests_run_out_and_attempts_never_outlive_the_deadline() {
        let budget = Budget::new(Duration::from_secs(10), 2, None);
        assert!(budget.try_send().is_ok());
        assert!(budget.try_send().is_ok());
        assert_eq!(budget.try_send(), Err(Exhausted::Requests));
        assert!(budget.attempt_timeout(Duration::from_secs(60)) <= Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn cost_ceiling_stops_sending() {
        let budget = Budget::new(Duration::from_secs(5), 10, Some(0.01));
        assert!(budget.try_send().is_ok());
        budget.charge(0.02);
        assert_eq!(budget.try_send(), Err(Exhausted::Cost));
        assert_eq!(budget.requests_sent(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn within_cuts_at_the_deadline() {
        let budget = Budget::new(Duration::from_secs(1), 10, None);
        let never = std::future::pending::<()>();
        assert_eq!(budget.within(never).await, Err(Exhausted::Deadline));
        assert_eq!(
            budget.attempt_timeout(Duration::from_secs(9)),
            Duration::ZERO
        );
    }
}
