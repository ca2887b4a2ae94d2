//! Whether the caller of a routed call still waits for its answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// The caller of routed calls, as the chain walk needs to know it: still
/// waiting for an answer, or gone. A server whose client hung up calls
/// [`Caller::leave`]; a call of a task made [`with_caller`] then finishes
/// the attempt in flight and starts nothing more — no retry, no fallback,
/// no wait for a slot or a backoff — and ends with
/// [`FailureReason::CallerLeft`].
///
/// Why not drop the call's future instead: that cuts the attempt in flight
/// off half-way, so its provider's breaker never hears how it ended (a
/// half-open probe would be given back unjudged). Why not let the call run
/// on: every retry and fallback it starts after the hang-up is a request
/// nobody reads, paid for all the same.
///
/// Clones share one state: any clone's `leave` is seen by every call
/// holding another.
///
/// [`with_caller`]: super::Task::with_caller
/// [`FailureReason::CallerLeft`]: super::FailureReason::CallerLeft
#[derive(Debug, Clone, Default)]
pub struct Caller(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    left: AtomicBool,
    notify: Notify,
}

impl Caller {
    /// A caller that is still waiting.
    pub fn new() -> Self {
        Self::default()
    }

    /// The caller is gone: calls watching it start nothing more, and a
    /// call waiting for a slot or sleeping a backoff stops at once.
    pub fn leave(&self) {
        self.0.left.store(true, Ordering::Release);
        self.0.notify.notify_waiters();
    }

    /// Whether [`leave`](Self::leave) was called.
    pub fn has_left(&self) -> bool {
        self.0.left.load(Ordering::Acquire)
    }

    /// Resolves once the caller has left.
    async fn gone(&self) {
        let notified = self.0.notify.notified();
        tokio::pin!(notified);
        // Registered before the flag is read: a `leave` between the two is
        // not missed.
        notified.as_mut().enable();
        if self.has_left() {
            return;
        }
        notified.await;
    }
}

/// Runs `fut` unless `caller` leaves first (`None` then, and also if it
/// had left already). Without a caller to watch, `fut` simply runs. Only
/// for futures that may be dropped half-way (a semaphore wait, a sleep).
pub(crate) async fn unless_left<F: Future>(caller: Option<&Caller>, fut: F) -> Option<F::Output> {
    let Some(caller) = caller else {
        return Some(fut.await);
    };
    if caller.has_left() {
        return None;
    }
    // `fut` first: a slot free at once is taken without registering with
    // the caller's `Notify` (a lock each way), which only a wait needs.
    tokio::select! {
        biased;
        out = fut => Some(out),
        () = caller.gone() => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_wait_stops_when_the_caller_leaves_and_runs_when_nobody_watches() {
        let caller = Caller::new();
        let watching = caller.clone();
        let waiting = tokio::spawn(async move {
            unless_left(Some(&watching), std::future::pending::<()>()).await
        });
        tokio::task::yield_now().await;
        assert!(!caller.has_left());
        caller.leave();
        let stopped = tokio::time::timeout(Duration::from_secs(1), waiting).await;
        assert_eq!(stopped.unwrap().unwrap(), None);
        // Already gone: a new wait does not start.
        assert_eq!(unless_left(Some(&caller), async { 1 }).await, None);
        assert_eq!(unless_left(None, async { 1 }).await, Some(1));
    }
}
