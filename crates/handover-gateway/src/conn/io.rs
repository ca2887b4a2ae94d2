//! The header deadline: from the first byte of a request, the client has
//! `header_read_timeout` to finish its header. hyper's own header timer
//! starts when a connection begins waiting for a request, so it bounds idle
//! time plus header time (we set it to `idle_timeout`); this wrapper adds
//! the tighter bound a trickling client (slowloris) runs into.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// What the connection is doing, shared by its I/O and its service.
#[derive(Debug, Default)]
pub(crate) struct ConnState {
    /// A request's header has been read and its response is not finished.
    busy: AtomicBool,
    /// Requests started on this connection (tells a stale header deadline
    /// from a live one).
    started: AtomicU64,
}

impl ConnState {
    /// The header is complete: the service was called.
    pub(crate) fn request_started(&self) {
        self.started.fetch_add(1, Ordering::AcqRel);
        self.busy.store(true, Ordering::Release);
    }

    /// The response has been written (or abandoned).
    pub(crate) fn request_finished(&self) {
        self.busy.store(false, Ordering::Release);
    }
}

/// A connection's socket with the header deadline.
pub(crate) struct HeaderDeadline<T> {
    inner: T,
    state: Arc<ConnState>,
    timeout: Duration,
    /// Armed by the first byte read while no request is in progress;
    /// the number of requests started when it was armed.
    deadline: Option<(Pin<Box<Sleep>>, u64)>,
}

impl<T> HeaderDeadline<T> {
    pub(crate) fn new(inner: T, state: Arc<ConnState>, timeout: Duration) -> Self {
        Self {
            inner,
            state,
            timeout,
            deadline: None,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for HeaderDeadline<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let started = this.state.started.load(Ordering::Acquire);
        let busy = this.state.busy.load(Ordering::Acquire);
        if this
            .deadline
            .as_ref()
            .is_some_and(|(_, at)| busy || *at != started)
        {
            // The header it guarded is complete.
            this.deadline = None;
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before && !busy && this.deadline.is_none() {
                    let sleep = Box::pin(tokio::time::sleep_until(
                        tokio::time::Instant::now() + this.timeout,
                    ));
                    this.deadline = Some((sleep, started));
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                if let Some((sleep, _)) = &mut this.deadline
                    && sleep.as_mut().poll(cx).is_ready()
                {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "request header not complete within gateway.header_read_timeout",
                    )));
                }
                Poll::Pending
            }
            other => other,
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for HeaderDeadline<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
