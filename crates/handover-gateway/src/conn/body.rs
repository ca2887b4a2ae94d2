//! Bodies with a bound: a request body that must arrive within
//! `body_read_timeout`, and a response body that holds something (a
//! per-client slot, the connection's "busy" mark) until it is finished or
//! dropped, so a stream counts for as long as it runs.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use http_body::{Frame, SizeHint};
use tokio::time::Sleep;

/// The request body did not arrive within `gateway.body_read_timeout`.
/// `crate::body::read` answers 408 when it finds this in an error's chain.
#[derive(Debug, thiserror::Error)]
#[error("request body not received within gateway.body_read_timeout")]
pub(crate) struct BodyTimedOut;

/// A request body with a deadline for the whole of it.
pub(crate) struct DeadlineBody<B> {
    inner: B,
    deadline: Pin<Box<Sleep>>,
}

impl<B> DeadlineBody<B> {
    pub(crate) fn new(inner: B, timeout: Duration) -> Self {
        Self {
            inner,
            deadline: Box::pin(tokio::time::sleep_until(
                tokio::time::Instant::now() + timeout,
            )),
        }
    }
}

impl<B> http_body::Body for DeadlineBody<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => Poll::Ready(frame.map(|f| f.map_err(Into::into))),
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimedOut)))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body that keeps `held` alive until it is dropped.
pub(crate) struct Held<T> {
    body: Body,
    _held: T,
}

impl<T: Send + Unpin + 'static> Held<T> {
    pub(crate) fn new(body: Body, held: T) -> Self {
        Self { body, _held: held }
    }
}

impl<T: Unpin> http_body::Body for Held<T> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
