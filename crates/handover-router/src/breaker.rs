//! Per-provider circuit breaker: closed → open after `failure_threshold`
//! consecutive failures (429 and 503 count like any other failure), or at
//! once when the provider cannot serve this account (auth, billing,
//! exhausted quota) → half-open probe after a while → closed again when the
//! probe succeeds, so traffic returns to the primary once it recovers.
//!
//! Why an overload signal does not open it at once: on a busy provider a
//! single 429 or 503 is routine, and the breaker is shared by every task —
//! opening it for one fault would fail everyone for `open_for` (a
//! one-provider chain with 2.5 % injected 503s failed about a third of all
//! calls that way).

use std::sync::Mutex;

use tokio::time::Instant;

use crate::config::BreakerSettings;

/// What kind of failure an attempt had, from the breaker's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// A failure that may pass (5xx, 429, 503, timeout, broken stream):
    /// counts toward the threshold.
    Ordinary,
    /// The provider cannot serve this account (auth, billing, exhausted
    /// quota): opens at once.
    Account,
}

/// The breaker's observable state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Traffic flows.
    Closed,
    /// No traffic until the open period ends.
    Open,
    /// A limited number of probes may go through.
    HalfOpen,
}

impl BreakerState {
    /// Stable name for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half_open",
        }
    }
}

#[derive(Debug)]
enum Inner {
    Closed { failures: u32 },
    Open { until: Instant },
    HalfOpen { in_flight: u32 },
}

/// A circuit breaker for one provider (the life cycle is the unit test
/// `closed_open_half_open_closed` below).
#[derive(Debug)]
pub(crate) struct Breaker {
    settings: BreakerSettings,
    inner: Mutex<Inner>,
}

impl Breaker {
    /// A closed breaker.
    pub(crate) fn new(settings: BreakerSettings) -> Self {
        Self {
            settings,
            inner: Mutex::new(Inner::Closed { failures: 0 }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current state (an open breaker whose period has ended reports
    /// half-open).
    pub(crate) fn state(&self) -> BreakerState {
        match *self.lock() {
            Inner::Closed { .. } => BreakerState::Closed,
            Inner::Open { until } if Instant::now() >= until => BreakerState::HalfOpen,
            Inner::Open { .. } => BreakerState::Open,
            Inner::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }

    /// Whether an attempt may go to this provider now. When half-open, each
    /// `true` is one probe; the caller must report its result (or give the
    /// probe back with [`Breaker::release_probe`]).
    #[cfg(test)]
    pub(crate) fn try_acquire(&self) -> bool {
        self.try_admit().is_some()
    }

    /// Like [`Breaker::try_acquire`], telling whether the admission is a
    /// half-open probe (`Some(true)`) or ordinary traffic (`Some(false)`).
    pub(crate) fn try_admit(&self) -> Option<bool> {
        let mut inner = self.lock();
        match *inner {
            Inner::Closed { .. } => Some(false),
            Inner::Open { until } if Instant::now() < until => None,
            Inner::Open { .. } => {
                *inner = Inner::HalfOpen { in_flight: 1 };
                Some(true)
            }
            Inner::HalfOpen { in_flight } if in_flight < self.settings.half_open_probes => {
                *inner = Inner::HalfOpen {
                    in_flight: in_flight + 1,
                };
                Some(true)
            }
            Inner::HalfOpen { .. } => None,
        }
    }

    /// Closed with no failure counted: the same as a new breaker.
    pub(crate) fn is_pristine(&self) -> bool {
        matches!(*self.lock(), Inner::Closed { failures: 0 })
    }

    /// Reports a successful attempt: closes the breaker.
    pub(crate) fn record_success(&self) {
        *self.lock() = Inner::Closed { failures: 0 };
    }

    /// Reports a failed attempt.
    pub(crate) fn record_failure(&self, failure: Failure) {
        let mut inner = self.lock();
        let open = Inner::Open {
            until: Instant::now() + self.settings.open_for,
        };
        *inner = match (&*inner, failure) {
            (Inner::Closed { failures }, Failure::Ordinary)
                if failures + 1 < self.settings.failure_threshold =>
            {
                Inner::Closed {
                    failures: failures + 1,
                }
            }
            _ => open,
        };
    }

    /// Gives back a half-open probe that ended without telling anything about
    /// the provider's health (e.g. the caller's own budget ran out).
    pub(crate) fn release_probe(&self) {
        let mut inner = self.lock();
        if let Inner::HalfOpen { in_flight } = *inner {
            *inner = Inner::HalfOpen {
                in_flight: in_flight.saturating_sub(1),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn closed_open_half_open_closed() {
        let b = Breaker::new(BreakerSettings {
            failure_threshold: 2,
            open_for: Duration::from_secs(30),
            half_open_probes: 1,
        });
        b.record_failure(Failure::Ordinary); // a 503: one of two
        assert_eq!(b.state(), BreakerState::Closed);
        b.record_failure(Failure::Ordinary);
        assert_eq!(b.state(), BreakerState::Open);
        assert!(!b.try_acquire());
        tokio::time::advance(Duration::from_secs(30)).await;
        assert!(b.try_acquire()); // the half-open probe
        b.record_success();
        assert_eq!(b.state(), BreakerState::Closed);
    }

    fn breaker(threshold: u32) -> Breaker {
        Breaker::new(BreakerSettings {
            failure_threshold: threshold,
            open_for: Duration::from_secs(10),
            half_open_probes: 1,
        })
    }

    #[tokio::test(start_paused = true)]
    async fn opens_after_threshold_consecutive_failures() {
        let b = breaker(3);
        b.record_failure(Failure::Ordinary);
        b.record_failure(Failure::Ordinary);
        assert_eq!(b.state(), BreakerState::Closed);
        b.record_success();
        b.record_failure(Failure::Ordinary);
        b.record_failure(Failure::Ordinary);
        assert_eq!(b.state(), BreakerState::Closed, "success resets the count");
        b.record_failure(Failure::Ordinary);
        assert_eq!(b.state(), BreakerState::Open);
        assert!(!b.try_acquire());
    }

    #[tokio::test(start_paused = true)]
    async fn half_open_allows_one_probe_and_reopens_on_failure() {
        let b = breaker(5);
        b.record_failure(Failure::Account);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(b.try_acquire());
        assert!(!b.try_acquire(), "only one probe while half-open");
        b.record_failure(Failure::Ordinary);
        assert_eq!(b.state(), BreakerState::Open);
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(!b.try_acquire());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(b.try_acquire());
        b.record_success();
        assert_eq!(b.state(), BreakerState::Closed);
    }
}
