//! HTTP sessions: each is one upstream connection driven by the same
//! session loop as stdio ([`McpProxy::drive`](crate::McpProxy)), with the
//! caller's scope. Messages from the session go back to the POST that asked
//! (answers, matched by id) or, for the server's own messages, to the
//! session's GET stream if one is open, else to the latest open POST.
//!
//! Request ids are rewritten on the way in (`"ho-http-N"`) and restored on
//! the way out: clients sharing a connection (session-less requests of one
//! token) may reuse each other's ids, and an answer must reach the POST
//! that asked, not another.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use handover_gateway::AuthenticatedClient;
use rmcp::model::ErrorData;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::ids::with_id;
use crate::McpProxy;
use crate::wire::{Peek, error_line};

const ID_PREFIX: &str = "ho-http-";

/// Why a request found no session to go to.
#[derive(Debug)]
pub(crate) enum Refused {
    /// Unknown, ended, or another client's session id.
    NoSession,
    /// The session's upstream is gone.
    Gone,
    /// `[mcp] max_sessions` are open.
    Full,
    /// This client has `[mcp] max_sessions_per_client` open.
    ClientFull,
    /// The upstream could not be started.
    Upstream(String),
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            Self::NoSession => (
                StatusCode::NOT_FOUND,
                "no such session (it ended, or it is not yours): initialize a new one".to_owned(),
            ),
            Self::Gone => (
                StatusCode::NOT_FOUND,
                "the session ended: its upstream MCP server closed; initialize a new one"
                    .to_owned(),
            ),
            Self::Full => (
                StatusCode::SERVICE_UNAVAILABLE,
                "too many open sessions ([mcp] max_sessions); retry shortly".to_owned(),
            ),
            Self::ClientFull => (
                StatusCode::SERVICE_UNAVAILABLE,
                "this client has too many open sessions ([mcp] max_sessions_per_client): end one (DELETE) or retry when one is closed".to_owned(),
            ),
            Self::Upstream(e) => (StatusCode::BAD_GATEWAY, e),
        };
        super::refusal(status, &message)
    }
}

/// How a response names its session.
pub(crate) enum SessionRef<'a> {
    /// A session this request's `initialize` opened (send its id).
    Opened(&'a str),
    /// An existing session, or a client's shared connection.
    Existing,
}

/// Where the session's messages go.
#[derive(Default)]
struct Routes {
    /// Our request id → the POST waiting for its answer.
    waiting: HashMap<String, Waiter>,
    /// The GET stream, if open.
    listener: Option<mpsc::UnboundedSender<String>>,
}

struct Waiter {
    original: Box<RawValue>,
    tx: mpsc::UnboundedSender<String>,
    opened: u64,
}

impl Waiter {
    /// The POST's answer is a JSON-RPC error.
    fn fail(self, message: &str) {
        let e = ErrorData::internal_error(message.to_owned(), None);
        let _ = self.tx.send(error_line(Some(&self.original), &e));
    }
}

/// One session: an upstream connection and who may use it.
pub(crate) struct Session {
    /// The `Mcp-Session-Id` (`None`: a client's shared connection).
    id: Option<String>,
    owner: String,
    input: Mutex<Option<mpsc::UnboundedSender<String>>>,
    routes: Arc<Mutex<Routes>>,
    next: AtomicU64,
    last_used: Mutex<Instant>,
    fresh: std::sync::atomic::AtomicBool,
}

impl Session {
    pub(crate) fn reference(&self) -> SessionRef<'_> {
        match &self.id {
            Some(id) if self.fresh.swap(false, Ordering::Relaxed) => SessionRef::Opened(id),
            _ => SessionRef::Existing,
        }
    }

    fn touch(&self) {
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    /// Hands a line to the session. False if it has ended.
    pub(crate) fn send(&self, line: String) -> bool {
        self.touch();
        self.input
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|tx| tx.send(line).is_ok())
    }

    fn routes(&self) -> std::sync::MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes over a request another session never sent, with its POST.
    fn adopt(&self, line: &str, waiter: Waiter) {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let ours = format!("{ID_PREFIX}{n}");
        let rewritten = RawValue::from_string(serde_json::Value::String(ours.clone()).to_string())
            .ok()
            .and_then(|id| with_id(line, &id));
        let Some(rewritten) = rewritten else {
            return waiter.fail("unreadable request");
        };
        self.routes().waiting.insert(
            ours.clone(),
            Waiter {
                opened: n,
                ..waiter
            },
        );
        if !self.send(rewritten)
            && let Some(w) = self.routes().waiting.remove(&ours)
        {
            w.fail("the upstream MCP server closed before this request reached it (not sent)");
        }
    }

    /// Sends a request; the stream yields the session's messages for this
    /// POST and ends after its answer. `None` if the session has ended.
    pub(crate) fn request(
        &self,
        line: &str,
        original: &RawValue,
    ) -> Option<impl futures::Stream<Item = String> + Unpin + Send + 'static> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let ours = format!("{ID_PREFIX}{n}");
        let id = RawValue::from_string(serde_json::Value::String(ours.clone()).to_string()).ok()?;
        let rewritten = with_id(line, &id)?;
        let (tx, rx) = mpsc::unbounded_channel();
        self.routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .waiting
            .insert(
                ours.clone(),
                Waiter {
                    original: original.to_owned(),
                    tx,
                    opened: n,
                },
            );
        if !self.send(rewritten) {
            self.routes
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .waiting
                .remove(&ours);
            return None;
        }
        Some(receiver_stream(rx))
    }

    /// The GET stream (replacing an earlier one).
    pub(crate) fn listen(&self) -> impl futures::Stream<Item = String> + Unpin + Send + 'static {
        self.touch();
        let (tx, rx) = mpsc::unbounded_channel();
        self.routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .listener = Some(tx);
        receiver_stream(rx)
    }

    /// Ends the session's input: the session loop records the guarded
    /// calls in flight and stops the upstream.
    fn close(&self) {
        self.input
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }
}

fn receiver_stream(
    mut rx: mpsc::UnboundedReceiver<String>,
) -> impl futures::Stream<Item = String> + Unpin + Send + 'static {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// Routes one message from the session to its POST or stream.
fn route(routes: &Mutex<Routes>, line: String) {
    let mut routes = routes.lock().unwrap_or_else(PoisonError::into_inner);
    let answer_to = Peek::of(&line)
        .filter(|p| p.method.is_none())
        .and_then(|p| p.id)
        .and_then(|id| serde_json::from_str::<String>(id.get()).ok())
        .filter(|id| id.starts_with(ID_PREFIX));
    if let Some(id) = answer_to {
        if let Some(w) = routes.waiting.remove(&id)
            && let Some(restored) = with_id(&line, &w.original)
        {
            let _ = w.tx.send(restored);
        }
        return;
    }
    if let Some(l) = &routes.listener {
        if l.send(line.clone()).is_ok() {
            return;
        }
        routes.listener = None;
    }
    let latest = routes
        .waiting
        .values()
        .filter(|w| !w.tx.is_closed())
        .max_by_key(|w| w.opened);
    match latest {
        Some(w) => {
            let _ = w.tx.send(line);
        }
        None => tracing::debug!("a server message with no open stream to take it was dropped"),
    }
}

/// Every open session, by session id (`shared:NAME` for a client's shared
/// connection).
pub(crate) struct Registry {
    proxy: McpProxy,
    sessions: Arc<Mutex<HashMap<String, Arc<Session>>>>,
    drivers: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Serialises opening, so two first requests of a client share one
    /// connection and `max_sessions` holds.
    opening: tokio::sync::Mutex<()>,
    closed: tokio::sync::watch::Sender<bool>,
}

impl Registry {
    pub(crate) fn new(proxy: McpProxy) -> Self {
        Self {
            proxy,
            sessions: Arc::default(),
            drivers: Mutex::default(),
            opening: tokio::sync::Mutex::new(()),
            closed: tokio::sync::watch::Sender::new(false),
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The caller's session `id`.
    pub(crate) fn find(&self, id: &str, owner: &str) -> Result<Arc<Session>, Refused> {
        self.map()
            .get(id)
            .filter(|s| s.id.is_some() && s.owner == owner)
            .cloned()
            .ok_or(Refused::NoSession)
    }

    /// Ends the caller's session `id`.
    pub(crate) fn end(&self, id: &str, owner: &str) -> Result<(), Refused> {
        let session = self.find(id, owner)?;
        self.map().remove(id);
        session.close();
        Ok(())
    }

    /// A new session for the caller (its `initialize`).
    pub(crate) async fn open(
        self: &Arc<Self>,
        client: &AuthenticatedClient,
    ) -> Result<Arc<Session>, Refused> {
        let _one = self.opening.lock().await;
        let id = uuid::Uuid::new_v4().simple().to_string();
        self.start(id.clone(), Some(id), client)
    }

    /// The caller's shared connection, started on first use.
    pub(crate) async fn shared(
        self: &Arc<Self>,
        client: &AuthenticatedClient,
    ) -> Result<Arc<Session>, Refused> {
        let key = format!("shared:{}", client.name);
        let _one = self.opening.lock().await;
        if let Some(s) = self.map().get(&key) {
            return Ok(s.clone());
        }
        self.start(key, None, client)
    }

    fn start(
        self: &Arc<Self>,
        key: String,
        id: Option<String>,
        client: &AuthenticatedClient,
    ) -> Result<Arc<Session>, Refused> {
        if *self.closed.borrow() {
            return Err(Refused::Gone);
        }
        let settings = self.proxy.settings();
        let open = self
            .map()
            .values()
            .filter(|s| s.owner == client.name)
            .count();
        if open >= settings.max_sessions_per_client as usize {
            return Err(Refused::ClientFull);
        }
        if self.map().len() >= settings.max_sessions as usize {
            return Err(Refused::Full);
        }
        let (to_client, mut from_session) = mpsc::unbounded_channel::<String>();
        let running = self
            .proxy
            .start(to_client.clone())
            .map_err(|e| Refused::Upstream(e.to_string()))?;
        let (input, mut lines) = mpsc::unbounded_channel::<String>();
        let session = Arc::new(Session {
            fresh: std::sync::atomic::AtomicBool::new(id.is_some()),
            id,
            owner: client.name.clone(),
            input: Mutex::new(Some(input)),
            routes: Arc::default(),
            next: AtomicU64::new(0),
            last_used: Mutex::new(Instant::now()),
        });
        self.map().insert(key.clone(), session.clone());
        let routes = session.routes.clone();
        let router = tokio::spawn(async move {
            while let Some(line) = from_session.recv().await {
                route(&routes, line);
            }
        });
        let proxy = self.proxy.clone();
        let scope = client.scope.as_str().to_owned();
        let ended = session.clone();
        let registry = self.clone();
        let client = client.clone();
        let driver = tokio::spawn(async move {
            let stream = futures::stream::poll_fn(|cx| lines.poll_recv(cx))
                .map(Ok::<_, std::convert::Infallible>);
            proxy.drive(running, stream, to_client, scope).await;
            ended.close();
            registry.forget(&key, &ended);
            let _ = router.await;
            // What the session never read was never sent upstream.
            let mut unsent = Vec::new();
            while let Ok(line) = lines.try_recv() {
                unsent.push(line);
            }
            registry.after_end(&ended, unsent, &client).await;
        });
        let mut drivers = self.drivers.lock().unwrap_or_else(PoisonError::into_inner);
        drivers.retain(|d| !d.is_finished());
        drivers.push(driver);
        Ok(session)
    }

    /// Ends a session its `initialize` did not establish (the upstream
    /// refused it, or the client went away first): its slot is free again.
    pub(crate) fn abandon(&self, session: &Arc<Session>) {
        if let Some(id) = &session.id {
            self.forget(id, session);
        }
        session.close();
    }

    fn forget(&self, key: &str, session: &Arc<Session>) {
        let mut map = self.map();
        if map.get(key).is_some_and(|s| Arc::ptr_eq(s, session)) {
            map.remove(key);
        }
    }

    /// A session ended (its upstream closed, or it was closed). Requests
    /// it never read were never sent: on a client's shared connection they
    /// go to a new one, as they would have had they come a moment later;
    /// in an `initialize` session (which ended with its upstream) and for
    /// requests the upstream did get but did not answer, the POST gets an
    /// error, not a silent end.
    async fn after_end(
        self: &Arc<Self>,
        ended: &Session,
        unsent: Vec<String>,
        client: &AuthenticatedClient,
    ) {
        let mut waiting = std::mem::take(&mut ended.routes().waiting);
        for line in unsent {
            let ours = Peek::of(&line)
                .and_then(|p| p.id)
                .and_then(|id| serde_json::from_str::<String>(id.get()).ok());
            let Some(w) = ours.and_then(|k| waiting.remove(&k)) else {
                continue;
            };
            let again = match ended.id {
                None => self.shared(client).await.ok(),
                Some(_) => None,
            };
            match again {
                Some(next) => next.adopt(&line, w),
                None => w.fail("the session ended before this request reached the upstream MCP server (not sent); start a new session"),
            }
        }
        for w in waiting.into_values() {
            w.fail("the upstream MCP server closed before answering");
        }
    }

    /// Closes idle sessions every so often, until [`Registry::close_all`].
    pub(crate) async fn reap_idle(&self) {
        let idle = self.proxy.settings().session_idle;
        let mut closed = self.closed.subscribe();
        let mut tick = tokio::time::interval(idle.min(std::time::Duration::from_secs(60)));
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = closed.wait_for(|c| *c) => return,
            }
            let stale: Vec<String> = self
                .map()
                .iter()
                .filter(|(_, s)| {
                    s.last_used
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .elapsed()
                        >= idle
                })
                .map(|(k, _)| k.clone())
                .collect();
            for key in stale {
                if let Some(s) = self.map().remove(&key) {
                    tracing::info!(session = %key, "closing an idle MCP session ([mcp] session_idle)");
                    s.close();
                }
            }
        }
    }

    /// Ends every session and waits until each has recorded its guarded
    /// calls and stopped its upstream.
    pub(crate) async fn close_all(&self) {
        let _ = self.closed.send(true);
        for (_, s) in self.map().drain() {
            s.close();
        }
        let drivers =
            std::mem::take(&mut *self.drivers.lock().unwrap_or_else(PoisonError::into_inner));
        for d in drivers {
            let _ = d.await;
        }
    }
}
