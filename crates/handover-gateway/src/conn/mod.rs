//! The accept loop: HTTP/1.1 connections with bounded header, body and
//! idle times, a cap on open connections, and a graceful drain.
//!
//! Why our own loop rather than `axum::serve`: a production gateway meets
//! slow and vanished clients, and `axum::serve` has no header, body or idle
//! deadline and no connection cap (a slowloris client or a flood of idle
//! sockets holds file descriptors until the process runs out).
//!
//! * **Connection cap** (`max_connections`): when every slot is taken, a
//!   new connection takes the slot of the open connection idle longest —
//!   one with no request in flight, having sent nothing since its last
//!   response or nothing at all — and that one is closed (gracefully: a
//!   response still being flushed is finished first). So clients that
//!   open connections and send nothing cannot lock others (or the
//!   orchestrator's `/healthz`) out until `idle_timeout`. A connection
//!   with a request in flight is never cut; only when every connection
//!   has one is a new connection answered `503` with `connection: close`
//!   (written without waiting: a client that does not read it loses it)
//!   and closed at once (see [`slots`]). A request that reaches an
//!   evicted connection in the instant of its eviction is not run: it is
//!   answered `503` (or the connection closes under it), as at
//!   `idle_timeout`.
//! * **Idle** (`idle_timeout`): hyper's header timer, which starts when a
//!   connection begins waiting for a request; and a response the client
//!   takes no byte of for as long is cut off (see [`io`]).
//! * **Header** (`header_read_timeout`): from the first byte of a request
//!   (see [`io`]).
//! * **Body** (`body_read_timeout`): from the end of the header; the answer
//!   is `408` (see [`body`]).
//! * **Shutdown**: stop accepting, ask every connection to finish its
//!   current request (idle ones close at once, streams run to their end),
//!   wait up to `shutdown_grace`, then drop what is left.

pub(crate) mod body;
mod io;
mod slots;

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use self::body::{DeadlineBody, Held};
use self::io::{ConnState, Deadlines};
use self::slots::{Admitted, Slots};
use handover_router::config::GatewaySettings;

use crate::error::GatewayError;

tokio::task_local! {
    /// On every connection's task: set once the drain's grace has elapsed
    /// and the gateway drops the connections still open. Read while a
    /// request's future is dropped (tokio keeps a task-local set while the
    /// scoped future drops), so a request cut off by the shutdown is not
    /// reported as one whose client hung up.
    static DROPPING: Arc<AtomicBool>;
}

/// Whether the request being dropped on this task is dropped by the
/// gateway's shutdown (its grace elapsed), not by its client.
pub(crate) fn dropped_by_shutdown() -> bool {
    DROPPING
        .try_with(|d| d.load(Ordering::Acquire))
        .unwrap_or(false)
}

/// The body of the answer to a connection over `max_connections`, in the
/// gateway's usual error shape.
static REFUSAL_BODY: LazyLock<String> = LazyLock::new(|| {
    serde_json::json!({"error": {
        "message": "too many open connections (gateway.max_connections); retry shortly",
        "type": "server_error",
        "param": null,
        "code": "too_many_connections",
    }})
    .to_string()
});

/// The whole answer, written straight to a refused socket.
static REFUSAL: LazyLock<Vec<u8>> = LazyLock::new(|| {
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{}",
        REFUSAL_BODY.len(),
        *REFUSAL_BODY
    )
    .into_bytes()
});

/// How long accepting pauses after an accept error (e.g. out of file
/// descriptors) before trying again.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Serves `app` on `listener` with `settings`' connection limits and
/// deadlines until `shutdown` completes, then drains.
pub(crate) async fn run(
    listener: TcpListener,
    app: axum::Router,
    settings: &GatewaySettings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), GatewayError> {
    let settings = settings.clone();
    let slots = Slots::new(settings.max_connections);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut conns = JoinSet::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(settings.idle_timeout)
        .keep_alive(true);
    let mut shutdown = std::pin::pin!(shutdown);
    let dropping = Arc::new(AtomicBool::new(false));
    loop {
        let (tcp, peer) = tokio::select! {
            biased;
            () = &mut shutdown => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed; pausing");
                    metrics::counter!("handover_gateway_accept_errors_total").increment(1);
                    if tokio::time::timeout(ACCEPT_PAUSE, &mut shutdown).await.is_ok() {
                        break;
                    }
                    continue;
                }
            },
        };
        let (slot, conn_state) = match slots.admit() {
            Admitted::Yes {
                slot,
                state,
                evicted,
            } => {
                if evicted {
                    metrics::counter!("handover_gateway_connections_evicted_total").increment(1);
                    tracing::debug!(%peer, "gateway.max_connections reached: closed the connection idle longest");
                }
                (slot, state)
            }
            Admitted::Full => {
                refuse(&tcp);
                tracing::debug!(%peer, "connection refused: gateway.max_connections reached, none idle");
                continue;
            }
        };
        // Small writes (SSE chunks, short answers) go out at once, not
        // after a delayed ACK.
        let _ = tcp.set_nodelay(true);
        let conn = serve_connection(
            tcp,
            conn_state,
            &http,
            app.clone(),
            &settings,
            stop_rx.clone(),
        );
        // `map`, not `async move { conn.await; drop(slot) }`: an async block
        // would hold the connection future twice (captured, then awaited).
        let conn = futures::FutureExt::map(conn, move |()| drop(slot));
        conns.spawn(DROPPING.scope(dropping.clone(), conn));
    }
    drop(listener);
    let open = conns.len();
    let grace = settings.shutdown_grace;
    tracing::info!(?grace, open, "shutting down: finishing in-flight requests");
    let _ = stop_tx.send(true);
    let drained =
        tokio::time::timeout(grace, async { while conns.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!(
            ?grace,
            left = conns.len(),
            "shutdown grace elapsed; dropping the remaining connections"
        );
        dropping.store(true, Ordering::Release);
        conns.shutdown().await;
    }
    Ok(())
}

/// Writes the refusal if the socket takes it now, then closes.
fn refuse(tcp: &TcpStream) {
    metrics::counter!("handover_gateway_connections_refused_total").increment(1);
    let _ = tcp.try_write(&REFUSAL);
}

/// One connection: the service with its deadlines, until it closes, or
/// the drain or an eviction asks it to finish.
fn serve_connection(
    tcp: TcpStream,
    conn_state: Arc<ConnState>,
    http: &hyper::server::conn::http1::Builder,
    app: axum::Router,
    settings: &GatewaySettings,
    mut stop: watch::Receiver<bool>,
) -> impl Future<Output = ()> + Send + 'static {
    let watched = conn_state.clone();
    let io = TokioIo::new(Deadlines::new(
        tcp,
        conn_state.clone(),
        settings.header_read_timeout,
        settings.idle_timeout,
    ));
    let body_timeout = settings.body_read_timeout;
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let admitted = conn_state.request_started();
        let finished = Finished(conn_state.clone());
        let req: Request = req.map(|b| Body::new(DeadlineBody::new(b, body_timeout)));
        let mut app = app.clone();
        async move {
            if !admitted {
                return Ok(evicted_answer().map(|b| Held::new(b, finished)));
            }
            let resp = tower::Service::call(&mut app, req).await?;
            Ok::<_, std::convert::Infallible>(resp.map(|b| Held::new(b, finished)))
        }
    });
    // Built here, not inside the async block: the block then holds only the
    // connection, not also the socket, service and builder it was made from.
    let conn = http.serve_connection(io, service);
    async move {
        let mut conn = std::pin::pin!(conn);
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "connection closed with an error");
                }
                return;
            }
            _ = stop.wait_for(|s| *s) => {}
            () = watched.evicted() => {}
        }
        conn.as_mut().graceful_shutdown();
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "connection closed with an error while draining");
        }
    }
}

/// The answer to a request that reached its connection as the connection
/// was evicted: not run, as if the connection had closed first.
fn evicted_answer() -> axum::http::Response<Body> {
    use axum::http::header;
    let mut resp = axum::http::Response::new(Body::from(REFUSAL_BODY.as_str()));
    *resp.status_mut() = axum::http::StatusCode::SERVICE_UNAVAILABLE;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    h.insert(
        header::RETRY_AFTER,
        axum::http::HeaderValue::from_static("1"),
    );
    h.insert(
        header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    resp
}

/// Marks the connection idle again when the response is done.
struct Finished(Arc<ConnState>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}
