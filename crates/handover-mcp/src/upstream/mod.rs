//! One upstream MCP server connection: a child process speaking MCP over
//! stdio, or a Streamable HTTP endpoint ([`http`]). Lines it sends are
//! routed back: answers to the proxy's own requests (ids `handover-N`,
//! which the stdio door refuses from clients, see [`own_id`]) go to the
//! waiting call, everything else — answers to the client's requests,
//! notifications, the server's own requests — goes to the client unchanged.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::{SinkExt, StreamExt};
use serde_json::value::RawValue;
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::error::McpError;
use crate::lines::{Line, LineCodec};
use crate::wire::Peek;

const OWN_ID_PREFIX: &str = "handover-";
/// The server's notice that its tools (and so their schemas) changed.
const TOOLS_CHANGED: &str = "notifications/tools/list_changed";

mod http;

type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Result<String, Lost>>>>>;

/// Where the upstream's lines are taken: answers to the proxy's own
/// requests by their waiters; a `notifications/tools/list_changed` also
/// drops the input schemas read so far (they are read again when next
/// needed).
#[derive(Clone, Default)]
struct Inbox {
    pending: Pending,
    schemas: Arc<Mutex<Option<Schemas>>>,
}

/// Why an upstream request got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lost {
    /// The upstream was gone before the request was handed to it.
    NotSent,
    /// A Streamable HTTP server answered 404 to the session id: it does not
    /// know the session (it restarted, or ended it) and so did not process
    /// the request (the transport's rule). The connection is over.
    SessionEnded,
    /// The request was handed to the upstream, then it went away.
    AfterSend,
}

/// The handle the proxy writes through; cheap to clone.
#[derive(Clone)]
pub(crate) struct Upstream {
    to_server: mpsc::UnboundedSender<String>,
    pending: Pending,
    next_id: Arc<AtomicU64>,
    gone: tokio::sync::watch::Receiver<bool>,
    /// The `_meta` of the client's latest request, for the proxy's own
    /// requests that no client request carries (lookups): servers on the
    /// 2026-07-28 protocol want every request to say its version and client.
    meta: Arc<Mutex<serde_json::Map<String, serde_json::Value>>>,
    /// The tools' input schemas by name, once [`Upstream::input_schema`]
    /// has read them (until the server says its tools changed).
    schemas: Arc<Mutex<Option<Schemas>>>,
}

/// Tool name → its `inputSchema`, as the upstream listed them.
pub(crate) type Schemas = Arc<HashMap<String, serde_json::Value>>;

/// How many `tools/list` pages [`Upstream::input_schema`] reads at most.
const MAX_TOOL_PAGES: usize = 100;
/// The shortest wait for a `tools/list`: the first guarded call often
/// comes right behind `initialize`, while the server is still starting
/// (an interpreter importing its libraries), and a call without its
/// schema is not sent.
const MIN_SCHEMA_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Removes an abandoned request's waiter (the gate timed out, the client left).
struct Waiter<'a> {
    pending: &'a Pending,
    id: String,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.id);
    }
}

impl Upstream {
    /// A handle over a transport: lines put on `to_server` reach the server;
    /// `gone` turns true once it can answer nothing more.
    fn over(
        to_server: mpsc::UnboundedSender<String>,
        inbox: Inbox,
        gone: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        Self {
            to_server,
            pending: inbox.pending,
            next_id: Arc::default(),
            gone,
            meta: Arc::default(),
            schemas: inbox.schemas,
        }
    }

    /// Starts `command args`, whose stderr is the proxy's. Lines from the
    /// server that are not answers to the proxy go to `to_client`.
    pub(crate) fn spawn(
        name: &str,
        command: &str,
        args: &[String],
        to_client: mpsc::UnboundedSender<String>,
    ) -> Result<(Self, Child), McpError> {
        let mut child = Command::new(command)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| McpError::Spawn {
                server: name.to_owned(),
                source,
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(McpError::Spawn {
                server: name.to_owned(),
                source: std::io::Error::other("child stdio not piped"),
            });
        };
        let (to_server, mut outgoing) = mpsc::unbounded_channel::<String>();
        let inbox = Inbox::default();
        tokio::spawn(async move {
            let mut sink = FramedWrite::new(stdin, LineCodec::default());
            while let Some(line) = outgoing.recv().await {
                if sink.send(line).await.is_err() {
                    break;
                }
            }
        });
        let routes = inbox.clone();
        let (gone_tx, gone) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            let mut lines = FramedRead::new(stdout, LineCodec::default());
            while let Some(Ok(line)) = lines.next().await {
                match line {
                    Line::Text(line) => route(&routes, &to_client, line),
                    // Whatever it answered is lost (its waiter's deadline
                    // says so); the session goes on.
                    bad => {
                        tracing::warn!(
                            line = bad.problem(),
                            "the upstream MCP server wrote an unreadable line: dropped"
                        );
                    }
                }
            }
            // The server is gone: every waiting call lost its answer.
            routes
                .pending
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clear();
            let _ = gone_tx.send(true);
        });
        Ok((Self::over(to_server, inbox, gone), child))
    }

    /// Resolves once the server has closed its output (exited or crashed).
    pub(crate) async fn closed(&self) {
        let mut gone = self.gone.clone();
        let _ = gone.wait_for(|g| *g).await;
    }

    /// Remembers the session-wide part of a client request's `_meta`.
    pub(crate) fn remember_meta(&self, params: &RawValue) {
        #[derive(serde::Deserialize)]
        struct Params {
            #[serde(rename = "_meta")]
            meta: Option<serde_json::Map<String, serde_json::Value>>,
        }
        let Ok(Params {
            meta: Some(mut meta),
        }) = serde_json::from_str(params.get())
        else {
            return;
        };
        // Per-request members, not the session's.
        meta.shift_remove("progressToken");
        meta.shift_remove(crate::guard::IDEMPOTENCY_KEY);
        *self
            .meta
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = meta;
    }

    /// The `_meta` for the proxy's own requests.
    pub(crate) fn session_meta(&self) -> serde_json::Value {
        serde_json::Value::Object(
            self.meta
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
        )
    }

    /// The input schema of tool `name`, from a `tools/list` of the
    /// proxy's own (every page, at most [`MAX_TOOL_PAGES`]), asked once
    /// per connection and again after the server says its tools changed
    /// or when the tool was not in the last list. `Err` says why it could
    /// not be read: the upstream did not list its tools within `wait` (at
    /// least [`MIN_SCHEMA_WAIT`]), answered an error, paged past the
    /// bound, or did not list `name`.
    pub(crate) async fn input_schema(
        &self,
        name: &str,
        wait: std::time::Duration,
    ) -> Result<serde_json::Value, String> {
        let known = lock(&self.schemas).clone();
        if let Some(schema) = known.as_ref().and_then(|s| s.get(name)) {
            return Ok(schema.clone());
        }
        let wait = wait.max(MIN_SCHEMA_WAIT);
        let listed = tokio::time::timeout(wait, self.list_tools())
            .await
            .unwrap_or_else(|_| Err(format!("no tools/list answer within {wait:?}")));
        let tools = Arc::new(listed.inspect_err(|why| {
            tracing::warn!(why, "the upstream MCP server did not list its tools");
        })?);
        *lock(&self.schemas) = Some(tools.clone());
        tools
            .get(name)
            .cloned()
            .ok_or_else(|| format!("its tools/list does not list {name:?} with an inputSchema"))
    }

    async fn list_tools(&self) -> Result<HashMap<String, serde_json::Value>, String> {
        let mut tools = HashMap::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_TOOL_PAGES {
            let mut params = serde_json::json!({ "_meta": self.session_meta() });
            if let Some(c) = cursor.take() {
                params["cursor"] = serde_json::Value::String(c);
            }
            let line = self
                .request("tools/list", &params)
                .await
                .map_err(|lost| format!("tools/list got no answer ({lost:?})"))?;
            let page = split_response(&line)
                .map_err(|e| format!("unreadable tools/list answer: {e}"))?
                .map_err(|e| format!("tools/list answered error {}: {}", e.code.0, e.message))?;
            let listed = page["tools"]
                .as_array()
                .ok_or("the tools/list answer has no tools array")?;
            for tool in listed {
                if let (Some(name), Some(schema)) = (tool["name"].as_str(), tool.get("inputSchema"))
                {
                    tools.insert(name.to_owned(), schema.clone());
                }
            }
            match page["nextCursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => return Ok(tools),
            }
        }
        Err(format!("tools/list went on past {MAX_TOOL_PAGES} pages"))
    }

    /// Forwards a client's line unchanged. False if the server is gone.
    pub(crate) fn forward(&self, line: String) -> bool {
        self.to_server.send(line).is_ok()
    }

    /// Sends one request of the proxy's own and waits for its answer (the
    /// whole response line). The caller bounds the wait.
    pub(crate) async fn request(
        &self,
        method: &str,
        params: &serde_json::Value,
    ) -> Result<String, Lost> {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let id = format!("{OWN_ID_PREFIX}{n}");
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id.clone(), tx);
        let _waiter = Waiter {
            pending: &self.pending,
            id: id.clone(),
        };
        let line = serde_json::json!({
            "jsonrpc": "2.0", "id": id, "method": method, "params": params,
        })
        .to_string();
        // A server already gone gets nothing (its reader may have cleared
        // the waiters before this one was added, and would never answer it).
        if *self.gone.borrow() || self.to_server.send(line).is_err() {
            return Err(Lost::NotSent);
        }
        tokio::select! {
            biased;
            answer = rx => answer.unwrap_or(Err(Lost::AfterSend)),
            () = self.closed() => Err(Lost::AfterSend),
        }
    }
}

/// The id as the proxy's own (`handover-N`, compared as the string it
/// decodes to: the upstream may write it with other escapes), or `None`.
/// Answers with such an id are taken by the proxy, so a client request
/// may not carry one (see `proxy::route`).
pub(crate) fn own_id(id: &RawValue) -> Option<String> {
    serde_json::from_str::<String>(id.get())
        .ok()
        .filter(|id| id.starts_with(OWN_ID_PREFIX))
}

fn route(inbox: &Inbox, to_client: &mpsc::UnboundedSender<String>, line: String) {
    let peek = Peek::of(&line);
    if peek.as_ref().and_then(|p| p.method.as_deref()) == Some(TOOLS_CHANGED) {
        lock(&inbox.schemas).take();
    }
    let own = peek
        .filter(|p| p.method.is_none())
        .and_then(|p| p.id)
        .and_then(own_id);
    if let Some(id) = own {
        let waiter = inbox
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&id);
        if let Some(tx) = waiter {
            let _ = tx.send(Ok(line));
        }
        return;
    }
    let _ = to_client.send(line);
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Parses a response line into its result or its error.
pub(crate) fn split_response(
    line: &str,
) -> Result<Result<serde_json::Value, rmcp::model::ErrorData>, serde_json::Error> {
    #[derive(serde::Deserialize)]
    struct Response<'a> {
        #[serde(borrow)]
        result: Option<&'a RawValue>,
        error: Option<rmcp::model::ErrorData>,
    }
    let r: Response<'_> = serde_json::from_str(line)?;
    match (r.result, r.error) {
        (_, Some(e)) => Ok(Err(e)),
        (Some(v), None) => serde_json::from_str(v.get()).map(Ok),
        (None, None) => Err(serde::de::Error::custom(
            "response has neither result nor error",
        )),
    }
}
