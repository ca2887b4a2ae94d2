//! The socket's own deadlines. **Header**: from the first byte of a
//! request, the client has `header_read_timeout` to finish its header.
//! hyper's own header timer starts when a connection begins waiting for a
//! request, so it bounds idle time plus header time (we set it to
//! `idle_timeout`); this wrapper adds the tighter bound a trickling client
//! (slowloris) runs into. **Writes**: a client that takes no byte of its
//! response for `idle_timeout` (it stopped reading a stream, its window
//! full) is cut off; hyper has no write timeout, and while a response
//! cannot be written its body is not polled, so no deadline of the call
//! (the task's budget, the provider's timeouts) would ever fire: the
//! connection, the client's in-flight slot and the provider connection
//! would be held for as long as the client liked.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Sleep;

/// Where a connection is between its requests (see [`ConnState`]).
const IDLE: u8 = 0;
/// Part of a request's header has arrived.
const READING: u8 = 1;
/// A request's header has been read and its response is not finished.
const BUSY: u8 = 2;
/// Closed to admit a new connection (only ever from [`IDLE`]; final).
const EVICTED: u8 = 3;

/// Orders idle periods across connections: a connection's stamp is taken
/// when it goes idle, so the smallest stamp is the longest idle. A counter,
/// not a clock: one atomic add per request, and no ties under paused time.
static IDLE_CLOCK: AtomicU64 = AtomicU64::new(0);

/// What the connection is doing, shared by its I/O, its service and the
/// accept loop's slots (which read it to choose a connection to close).
/// Every change is one atomic step: no lock per request.
#[derive(Debug, Default)]
pub(crate) struct ConnState {
    /// [`IDLE`], [`READING`], [`BUSY`] or [`EVICTED`]. Only an idle
    /// connection can be evicted, and an evicted one can never start a
    /// request: the two cannot both win.
    phase: AtomicU8,
    /// Requests started on this connection (tells a stale header deadline
    /// from a live one).
    started: AtomicU64,
    /// When the connection last went idle, on [`IDLE_CLOCK`].
    idle_since: AtomicU64,
    /// Woken once, when the connection is evicted.
    evicted: Notify,
}

impl ConnState {
    /// A new connection, idle from now.
    pub(crate) fn new() -> Self {
        let state = Self::default();
        state.idle_since.store(
            IDLE_CLOCK.fetch_add(1, Ordering::Relaxed),
            Ordering::Relaxed,
        );
        state
    }

    /// The header is complete: the service was called. `false` if the
    /// connection was evicted first (a request hyper had already buffered
    /// raced the eviction): the request must not run.
    pub(crate) fn request_started(&self) -> bool {
        self.started.fetch_add(1, Ordering::AcqRel);
        self.phase
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| {
                (p != EVICTED).then_some(BUSY)
            })
            .is_ok()
    }

    /// The response has been written (or abandoned): idle again.
    pub(crate) fn request_finished(&self) {
        self.idle_since.store(
            IDLE_CLOCK.fetch_add(1, Ordering::Relaxed),
            Ordering::Relaxed,
        );
        let _ = self
            .phase
            .compare_exchange(BUSY, IDLE, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Bytes of a request arrived while no request is in progress. `false`
    /// if the connection was evicted before they arrived.
    fn header_begun(&self) -> bool {
        match self
            .phase
            .compare_exchange(IDLE, READING, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(p) => p != EVICTED,
        }
    }

    fn busy(&self) -> bool {
        self.phase.load(Ordering::Acquire) == BUSY
    }

    /// When the connection went idle, if it is idle (no byte of a request
    /// since its last response, or none at all).
    pub(crate) fn idle_since(&self) -> Option<u64> {
        (self.phase.load(Ordering::Acquire) == IDLE)
            .then(|| self.idle_since.load(Ordering::Relaxed))
    }

    /// Closes the connection if it is still idle; `false` if a request has
    /// begun on it meanwhile (it keeps running).
    pub(crate) fn evict(&self) -> bool {
        let won = self
            .phase
            .compare_exchange(IDLE, EVICTED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if won {
            self.evicted.notify_one();
        }
        won
    }

    /// Completes once the connection has been evicted.
    pub(crate) async fn evicted(&self) {
        self.evicted.notified().await;
    }
}

/// A connection's socket with the header and write deadlines.
pub(crate) struct Deadlines<T> {
    inner: T,
    state: Arc<ConnState>,
    timeout: Duration,
    /// Armed by the first byte read while no request is in progress;
    /// the number of requests started when it was armed.
    deadline: Option<(Pin<Box<Sleep>>, u64)>,
    write_timeout: Duration,
    /// The write deadline's timer, made on the first write that had to
    /// wait and reset (not remade) on each later one.
    write_timer: Option<Pin<Box<Sleep>>>,
    /// Whether the last write had to wait (the timer then runs).
    write_waiting: bool,
}

impl<T> Deadlines<T> {
    pub(crate) fn new(
        inner: T,
        state: Arc<ConnState>,
        timeout: Duration,
        write_timeout: Duration,
    ) -> Self {
        Self {
            inner,
            state,
            timeout,
            deadline: None,
            write_timeout,
            write_timer: None,
            write_waiting: false,
        }
    }

    /// A write's result, through the write deadline: a write that must
    /// wait starts the deadline (if it is not running), one that goes
    /// through stops it, and a wait past it fails the write.
    fn through_write_deadline<R>(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if result.is_ready() {
            self.write_waiting = false;
            return result;
        }
        let due = tokio::time::Instant::now() + self.write_timeout;
        let timer = match &mut self.write_timer {
            Some(t) => {
                if !self.write_waiting {
                    t.as_mut().reset(due);
                }
                t
            }
            None => self
                .write_timer
                .insert(Box::pin(tokio::time::sleep_until(due))),
        };
        self.write_waiting = true;
        if timer.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client took no byte of its response within gateway.idle_timeout",
            )));
        }
        Poll::Pending
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Deadlines<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let started = this.state.started.load(Ordering::Acquire);
        let busy = this.state.busy();
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
                let got = buf.filled().len() > before;
                if got && !busy && !this.state.header_begun() {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "connection closed to admit another (gateway.max_connections)",
                    )));
                }
                if got && !busy && this.deadline.is_none() {
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

impl<T: AsyncWrite + Unpin> AsyncWrite for Deadlines<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.through_write_deadline(cx, result)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.through_write_deadline(cx, result)
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
