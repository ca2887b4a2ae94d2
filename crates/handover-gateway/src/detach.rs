//! A router call that runs to its end even if the client goes away, without
//! a task per request: the call is polled in place by the request's own
//! task, and handed to the runtime as a task of its own only if the request
//! is dropped first (the client hung up). The router's breakers and late
//! attempts must hear how a call ended, so it is never cut off half-way;
//! but its [`Caller`] hears of the hang-up, so the call finishes only the
//! attempt in flight and starts no retry or fallback nobody would read.
//!
//! Why not `tokio::spawn` + `JoinHandle` for every call: a spawned task is
//! one more scheduling and wake-up per request (the handler waits on the
//! handle), which the gateway benchmark showed as latency and CPU on every
//! call, for the rare request whose client disconnects.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use handover_router::route::Caller;

/// The call panicked (the message, if it had one).
#[derive(Debug)]
pub(crate) struct Panicked(pub(crate) String);

/// See the module docs. Resolves to the call's output, or [`Panicked`].
pub(crate) struct ToTheEnd<F: Future + Send + 'static>
where
    F::Output: Send,
{
    call: Option<Pin<Box<F>>>,
    caller: Caller,
}

/// Runs `call` to its end whether or not the caller keeps waiting; if it
/// stops waiting, `caller` (the one the call's task watches) leaves.
pub(crate) fn to_the_end<F>(call: F, caller: Caller) -> ToTheEnd<F>
where
    F: Future + Send + 'static,
    F::Output: Send,
{
    ToTheEnd {
        call: Some(Box::pin(call)),
        caller,
    }
}

impl<F> Future for ToTheEnd<F>
where
    F: Future + Send + 'static,
    F::Output: Send,
{
    type Output = Result<F::Output, Panicked>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(call) = self.call.as_mut() else {
            return Poll::Ready(Err(Panicked("polled after completion".into())));
        };
        // A panic is an error answer for this request, as a task's would be,
        // not the end of the connection.
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| call.as_mut().poll(cx)));
        match polled {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(out)) => {
                self.call = None;
                Poll::Ready(Ok(out))
            }
            Err(payload) => {
                self.call = None;
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Poll::Ready(Err(Panicked(message)))
            }
        }
    }
}

impl<F> Drop for ToTheEnd<F>
where
    F: Future + Send + 'static,
    F::Output: Send,
{
    fn drop(&mut self) {
        let Some(call) = self.call.take() else {
            return;
        };
        self.caller.leave();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = call.await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::sync::oneshot;

    use super::*;

    #[tokio::test]
    async fn a_call_whose_caller_stops_waiting_still_runs_to_its_end() {
        let (go_tx, go_rx) = oneshot::channel::<()>();
        let (done_tx, done_rx) = oneshot::channel::<&str>();
        let caller = Caller::new();
        let call = to_the_end(
            async move {
                let _ = go_rx.await;
                let _ = done_tx.send("finished");
            },
            caller.clone(),
        );
        // The caller waits a moment, then gives up (the client hung up).
        let waited = tokio::time::timeout(Duration::from_millis(1), call).await;
        assert!(waited.is_err(), "the call cannot finish before its signal");
        assert!(caller.has_left(), "the call hears that its caller left");
        go_tx.send(()).unwrap();
        let done = tokio::time::timeout(Duration::from_secs(5), done_rx).await;
        assert_eq!(done.unwrap().unwrap(), "finished");
    }

    #[tokio::test]
    async fn a_call_answers_in_place_and_a_panic_is_an_error() {
        let caller = Caller::new();
        assert_eq!(to_the_end(async { 7 }, caller.clone()).await.unwrap(), 7);
        assert!(
            !caller.has_left(),
            "a caller that got its answer did not leave"
        );
        let err = to_the_end(async { panic!("boom") }, Caller::new())
            .await
            .unwrap_err();
        assert_eq!(err.0, "boom");
    }
}
