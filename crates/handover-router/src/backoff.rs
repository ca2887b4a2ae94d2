//! Backoff between retries of one provider: exponential with jitter (backon,
//! used only as a delay iterator), never shorter than a provider's
//! Retry-After. Whether the delay fits is decided by the budget
//! ([`crate::budget::Budget::sleep_within`]), which refuses a wait that
//! cannot finish before the deadline.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

use crate::config::BackoffSettings;

/// The delay schedule of one provider within one task.
#[derive(Debug)]
#[allow(dead_code)] // used by the fallback loop
pub(crate) struct Backoff {
    delays: ExponentialBackoff,
    max: Duration,
}

#[allow(dead_code)] // used by the fallback loop
impl Backoff {
    pub(crate) fn new(settings: &BackoffSettings) -> Self {
        let mut builder = ExponentialBuilder::new()
            .with_min_delay(settings.initial)
            .with_max_delay(settings.max)
            .without_max_times();
        if settings.jitter {
            builder = builder.with_jitter();
        }
        Self {
            delays: builder.build(),
            max: settings.max,
        }
    }

    /// The next delay: the schedule's, or the provider's Retry-After if that
    /// is longer (a retry never comes before the provider asked).
    pub(crate) fn next_delay(&mut self, retry_after: Option<Duration>) -> Duration {
        let scheduled = self.delays.next().unwrap_or(self.max);
        retry_after.map_or(scheduled, |r| r.max(scheduled))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_caps_and_honours_retry_after() {
        let mut b = Backoff::new(&BackoffSettings {
            initial: Duration::from_millis(100),
            max: Duration::from_millis(400),
            jitter: false,
        });
        // backon computes in f32: compare whole milliseconds.
        let mut next = |ra| b.next_delay(ra).as_millis();
        assert_eq!(next(None), 100);
        assert_eq!(next(None), 200);
        assert_eq!(next(Some(Duration::from_secs(3))), 3000);
        assert_eq!(next(None), 400);
        assert_eq!(next(None), 400);
    }

    #[test]
    fn jitter_stays_within_twice_the_schedule() {
        let settings = BackoffSettings {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
            jitter: true,
        };
        for _ in 0..100 {
            let d = Backoff::new(&settings).next_delay(None);
            assert!(
                d >= Duration::from_millis(100) && d <= Duration::from_millis(200),
                "{d:?}"
            );
        }
    }
}
