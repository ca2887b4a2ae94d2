//! One downstream session over a byte stream (stdio): lines from the client
//! go to the upstream unchanged, except `tools/call` requests for tools
//! configured as actions, which go through the write gate; lines from the
//! upstream come back unchanged, except answers to the gate's own calls.

use futures::{SinkExt, StreamExt};
use handover::Handover;
use handover_router::config::{McpServer, McpSettings};
use rmcp::model::{CallToolRequestParams, ErrorData};
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::codec::{FramedRead, FramedWrite};

use std::time::Duration;

use handover_router::reconcile::Reconciler;

use crate::error::McpError;
use crate::guard;
use crate::lines::{Line, LineCodec};
use crate::lookup::McpLookup;
use crate::upstream::Upstream;
use crate::wire::{self, error_line, result_line};

/// How often a server's reconciler runs when none of its actions has a
/// lookup: it only hands unknown operations to review, which is not urgent.
const REVIEW_EVERY: Duration = Duration::from_secs(5);
/// The MCP proxy: Handover's write gate in front of one upstream MCP
/// server's tools. Built from the same [`Handover`] as every other door,
/// so a call made here and one made through the library or `handover
/// serve` are one operation when they share scope and key.
#[derive(Debug, Clone)]
pub struct McpProxy {
    handover: Handover,
    settings: McpSettings,
    server: String,
}

impl McpProxy {
    /// A proxy for upstream `server` (`[mcp.servers.NAME]`); `None` picks
    /// the only server the configuration declares.
    pub fn new(handover: &Handover, server: Option<&str>) -> Result<Self, McpError> {
        let settings = handover
            .config()
            .mcp()
            .cloned()
            .ok_or_else(|| McpError::Config("no [mcp.servers.NAME] section".into()))?;
        let server = match server {
            Some(name) if settings.servers.contains_key(name) => name.to_owned(),
            Some(name) => {
                return Err(McpError::Config(format!(
                    "unknown MCP server {name:?} (not in [mcp.servers])"
                )));
            }
            None if settings.servers.len() == 1 => {
                settings.servers.keys().next().cloned().unwrap_or_default()
            }
            None => {
                return Err(McpError::Config(format!(
                    "several MCP servers are configured ({}): name one",
                    settings
                        .servers
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        };
        Ok(Self {
            handover: handover.clone(),
            settings,
            server,
        })
    }

    /// Serves MCP's Streamable HTTP transport on `listener` (see
    /// `docs/mcp.md`, "Over HTTP") until `shutdown` completes: every caller
    /// needs a `[gateway.clients]` bearer token, whose scope is the scope of
    /// its operations; connection limits and deadlines are `[gateway]`'s.
    /// Then every session ends and its guarded calls in flight are recorded
    /// before this returns.
    pub async fn serve_http(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), McpError> {
        let config = self.handover.config();
        let gateway = config
            .mcp_http_gateway()
            .map_err(|why| McpError::Config(why.into()))?;
        let tokens =
            handover_gateway::ClientTokens::from_config(config).map_err(McpError::Serve)?;
        let http = crate::http::Http::new(self.clone(), tokens, gateway.keepalive);
        let reaper = http.reap_idle();
        if let Ok(addr) = listener.local_addr() {
            tracing::info!(%addr, server = %self.server, "handover mcp listening (Streamable HTTP, /mcp)");
        }
        let served = handover_gateway::serve_router(
            listener,
            http.app(gateway.max_body_bytes),
            gateway,
            shutdown,
        )
        .await;
        http.close().await;
        let _ = reaper.await;
        served.map_err(McpError::Serve)
    }

    pub(crate) fn settings(&self) -> &McpSettings {
        &self.settings
    }

    /// The upstream server this proxy fronts.
    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    /// The same proxy in front of another configured server.
    pub(crate) fn for_server(&self, name: &str) -> Self {
        Self {
            server: name.to_owned(),
            ..self.clone()
        }
    }

    /// Serves one client on this process's stdin and stdout until the
    /// client closes its side or `stop` completes (SIGTERM, say); then
    /// waits for guarded calls in flight to be recorded and answered (each
    /// is bounded by its action's timeout). After `stop`, no further line
    /// is read: what the client sends then is never sent on.
    pub async fn serve_stdio(
        &self,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), McpError> {
        self.serve(tokio::io::stdin(), tokio::io::stdout(), stop)
            .await
    }

    /// Serves one client over `read`/`write` (newline-delimited JSON-RPC,
    /// the MCP stdio transport), with the stdio session's scope (`[mcp]
    /// scope`), until the client closes `read` or `stop` completes (see
    /// [`McpProxy::serve_stdio`]).
    pub async fn serve<R, W>(
        &self,
        read: R,
        write: W,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), McpError>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (to_client, mut client_lines) = mpsc::unbounded_channel::<String>();
        let upstream = self.start(to_client.clone())?;
        let writer = tokio::spawn(async move {
            let mut sink = FramedWrite::new(write, LineCodec::default());
            while let Some(line) = client_lines.recv().await {
                sink.send(line).await.map_err(std::io::Error::other)?;
            }
            Ok::<_, std::io::Error>(())
        });
        // A line that cannot be read is answered `-32700` here (to its id
        // when one can still be read), and the session goes on.
        let refuse = to_client.clone();
        let lines = FramedRead::new(read, LineCodec::default()).filter_map(move |line| {
            let line = match line {
                Ok(Line::Text(text)) => Some(Ok(text)),
                Ok(bad) => {
                    let id = match &bad {
                        Line::NotUtf8(lossy) => wire::lenient_id(lossy),
                        _ => None,
                    };
                    let e = rmcp::model::ErrorData::parse_error(
                        format!("{}: nothing was sent", bad.problem()),
                        None,
                    );
                    let _ = refuse.send(error_line(id.as_deref(), &e));
                    None
                }
                Err(e) => Some(Err(e)),
            };
            std::future::ready(line)
        });
        let lines = lines.take_until(Box::pin(stop));
        self.drive(upstream, lines, to_client, self.settings.scope.clone())
            .await;
        writer
            .await
            .map_err(|e| McpError::Io(std::io::Error::other(e)))?
            .or_else(ignore_broken_pipe)
            .map_err(McpError::Io)
    }

    /// Starts this proxy's upstream connection for one session; what the
    /// upstream sends that is not an answer to the proxy goes to `to_client`.
    pub(crate) fn start(
        &self,
        to_client: mpsc::UnboundedSender<String>,
    ) -> Result<Running, McpError> {
        match self.settings.servers.get(&self.server) {
            Some(McpServer::Command { command, args }) => {
                let (upstream, child) = Upstream::spawn(&self.server, command, args, to_client)?;
                Ok(Running {
                    upstream,
                    child: Some(child),
                })
            }
            Some(McpServer::Url(url)) => Ok(Running {
                upstream: Upstream::connect(&self.server, url, to_client)?,
                child: None,
            }),
            None => Err(McpError::Config("no such server".into())),
        }
    }

    /// Runs one session: every client line from `lines` is forwarded or
    /// guarded (under `scope`) until the client's side ends or the upstream
    /// does; then waits for guarded calls in flight to be recorded (each
    /// bounded by its action's timeout) and stops the upstream.
    pub(crate) async fn drive<S, E>(
        &self,
        running: Running,
        mut lines: S,
        to_client: mpsc::UnboundedSender<String>,
        scope: String,
    ) where
        S: futures::Stream<Item = Result<String, E>> + Unpin,
        E: std::fmt::Display,
    {
        let Running {
            upstream,
            mut child,
        } = running;
        let (stop_reconciler, stopped) = tokio::sync::oneshot::channel::<()>();
        let reconciler = self.reconciler(&upstream).map(|(r, every)| {
            tokio::spawn(r.run(every, async {
                let _ = stopped.await;
            }))
        });
        let mut calls = JoinSet::new();
        loop {
            // A session ends when either side does, as a direct connection would.
            let line = tokio::select! {
                line = lines.next() => line,
                () = upstream.closed() => {
                    tracing::warn!(server = %self.server, "the upstream MCP server closed: ending the session");
                    break;
                }
            };
            let line = match line {
                None => break,
                Some(Ok(line)) => line,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "closing the session: unreadable client input");
                    break;
                }
            };
            // RFC 8259 lets a parser ignore a byte order mark; the upstream's
            // may not, so it gets the line without one.
            let line = match wire::without_bom(&line) {
                text if text.len() < line.len() => text.to_owned(),
                _ => line,
            };
            let (id, params) = match self.route(&line, &upstream) {
                Route::Pass => {
                    if !upstream.forward(line) {
                        tracing::warn!(server = %self.server, "the upstream MCP server is gone");
                    }
                    continue;
                }
                Route::Drop => continue,
                Route::Answer(answer) => {
                    let _ = to_client.send(answer);
                    continue;
                }
                Route::Guarded(id, params) => (id, params),
            };
            let gate = self.handover.gate().clone();
            let upstream = upstream.clone();
            let tool = self.tool(&params.name).cloned();
            let to_client = to_client.clone();
            let scope = scope.clone();
            calls.spawn(async move {
                let Some(tool) = tool else { return };
                let answer = guard::call(&gate, &upstream, &tool, &scope, *params).await;
                let line = match answer {
                    Ok(result) => result_line(&id, &result),
                    Err(e) => error_line(Some(&id), &e),
                };
                let _ = to_client.send(line);
            });
        }
        // The client left: let guarded calls finish recording their outcome.
        while calls.join_next().await.is_some() {}
        let _ = stop_reconciler.send(());
        if let Some(r) = reconciler {
            let _ = r.await;
        }
        drop(to_client);
        drop(upstream);
        if let Some(child) = &mut child {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    /// The reconciler for this server's actions, and how often it runs
    /// (the shortest `lookup.check_every` among them; [`REVIEW_EVERY`]
    /// when none has a lookup): an MCP lookup resolves an action's unknown
    /// operations, and one without a lookup is handed to review (an
    /// unknown left by a crash would otherwise keep owner "reconciler"
    /// with no reconciler taking it; `serve`'s leaves MCP actions alone).
    fn reconciler(&self, upstream: &Upstream) -> Option<(Reconciler, Duration)> {
        let mut reconciler = self.handover.reconciler().registered_actions_only();
        let mut every: Option<Duration> = None;
        let mut any = false;
        for tool in self
            .settings
            .tools
            .values()
            .filter(|t| t.server == self.server)
        {
            any = true;
            let action = self.handover.config().action(&tool.action);
            let (Some(lookup), Some(action), Some(contract)) =
                (&tool.lookup, action, action.and_then(|a| a.lookup))
            else {
                reconciler = reconciler.with_review(&tool.action);
                continue;
            };
            every = Some(every.map_or(contract.check_every, |e| e.min(contract.check_every)));
            reconciler = reconciler.with_lookup(
                &tool.action,
                McpLookup {
                    upstream: upstream.clone(),
                    tool: lookup.clone(),
                    key_argument: tool.key_argument.clone(),
                    wait: action.timeout,
                },
            );
        }
        any.then(|| (reconciler, every.unwrap_or(REVIEW_EVERY)))
    }

    fn tool(&self, name: &str) -> Option<&handover_router::config::McpTool> {
        self.settings.action_for(&self.server, name)
    }

    /// Where a client's line goes. Only one JSON-RPC object whose routing
    /// members read unambiguously may pass ([`wire::incoming`]), and no
    /// request whose id the proxy reserves for its own ([`reserved_id`]):
    /// anything else is answered here, never forwarded — the upstream's
    /// parser might read it (`NaN`, a batch) and run a guarded tool with no
    /// record. A
    /// guarded tool's call whose parameters do not parse is refused too,
    /// and so is a `tools/call` whose `params.name` cannot be read as one
    /// string (given twice, the upstream's parser would take the last, and
    /// could run a guarded tool the proxy took for another). A guarded call
    /// without an id (a notification: nothing to answer, nothing to
    /// record) is dropped.
    fn route(&self, line: &str, upstream: &Upstream) -> Route {
        let null = Box::<RawValue>::default;
        let peek = match wire::incoming(line) {
            wire::Incoming::Message(peek) => peek,
            wire::Incoming::Blank => return Route::Drop,
            wire::Incoming::Refused { id, error } => {
                tracing::warn!(code = error.code.0, message = %error.message, "refused a client line (not sent)");
                return Route::Answer(error_line(id.as_deref(), &error));
            }
            wire::Incoming::Batch(ids) => return batch_refused(&ids),
        };
        if let (Some(id), Some(_)) = (peek.id, &peek.method)
            && let Some(own) = crate::upstream::own_id(id)
        {
            return reserved_id(id, &own);
        }
        if cancels_own_request(&peek) {
            tracing::warn!(
                "dropped a client's notifications/cancelled naming a request of the proxy's own"
            );
            return Route::Drop;
        }
        if let (Some(_), Some(_), Some(params)) = (peek.id, &peek.method, peek.params) {
            upstream.remember_meta(params);
        }
        let name = match peek.called_tool() {
            None => return Route::Pass,
            Some(Ok(name)) => name,
            Some(Err(())) => {
                let id = peek.id.map_or_else(null, ToOwned::to_owned);
                return invalid(
                    &id,
                    "params.name: a tools/call names its tool once, as a string".to_owned(),
                );
            }
        };
        if self.tool(&name).is_none() {
            return Route::Pass;
        }
        let Some(id) = peek.id else {
            tracing::warn!(tool = %name, "dropped a guarded tools/call sent as a notification (no id)");
            return Route::Drop;
        };
        let params = peek.params.map_or("null", RawValue::get);
        // As sent, before the parser keeps the last of a member named twice
        // or rounds a number: what is recorded and sent is what was asked.
        if let Err(e) = handover_ledger::validate_json_text(params) {
            return invalid(id, format!("params: {e}"));
        }
        match guarded_params(params) {
            Ok(params) => Route::Guarded(id.to_owned(), Box::new(params)),
            Err(message) => invalid(id, message),
        }
    }
}

/// A guarded call's `params`, or an error naming the member that does not
/// fit (`params.arguments: invalid type: string "x", expected a map`).
fn guarded_params(params: &str) -> Result<CallToolRequestParams, String> {
    let de = &mut serde_json::Deserializer::from_str(params);
    serde_path_to_error::deserialize(de).map_err(|e| match e.path().to_string() {
        path if path == "." => format!("params: {}", e.inner()),
        path => format!("params.{path}: {}", e.inner()),
    })
}

/// A guarded call's parameters cannot be taken: a JSON-RPC error to `id`.
fn invalid(id: &RawValue, message: String) -> Route {
    Route::Answer(error_line(
        Some(id),
        &ErrorData::invalid_params(message, None),
    ))
}

/// A client request whose id is one the proxy uses for its own requests
/// (`handover-N`): the upstream's answer to it would be taken for the
/// answer to a guarded call. Refused, nothing sent (see
/// `docs/decisions.md`, "Reserved request ids over stdio").
fn reserved_id(id: &RawValue, own: &str) -> Route {
    tracing::warn!(
        id = own,
        "refused a client request with a reserved id (not sent)"
    );
    Route::Answer(error_line(
        Some(id),
        &ErrorData::invalid_request(
            format!(
                "id {own:?}: ids beginning with \"handover-\" are reserved for the proxy's own requests; use another id (nothing was sent)"
            ),
            None,
        ),
    ))
}

/// A client's `notifications/cancelled` whose `requestId` is one of the
/// proxy's own (`handover-N`): a client can only cancel its own requests,
/// and passed on it would cancel the proxy's guarded call, lookup or
/// schema read upstream. One whose params cannot be read is taken as
/// such too (the upstream's parser might read it as one).
fn cancels_own_request(peek: &wire::Peek<'_>) -> bool {
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        #[serde(rename = "requestId", borrow)]
        request_id: Option<&'a RawValue>,
    }
    if peek.method.as_deref() != Some("notifications/cancelled") || peek.id.is_some() {
        return false;
    }
    let params = peek.params.map_or("{}", RawValue::get);
    serde_json::from_str::<Params<'_>>(params).map_or(true, |p| {
        p.request_id.and_then(crate::upstream::own_id).is_some()
    })
}

/// A batch is refused whole (MCP removed batches in 2025-06-18; an older
/// upstream would run each call in it unguarded): one error per request in
/// it, as a JSON-RPC batch answer; a batch of notifications only gets
/// none, as JSON-RPC answers no notification.
fn batch_refused(ids: &[Option<Box<RawValue>>]) -> Route {
    tracing::warn!(requests = ids.len(), "refused a JSON-RPC batch (not sent)");
    if ids.is_empty() {
        return Route::Drop;
    }
    let error = ErrorData::invalid_request(
        "JSON-RPC batches are not supported: send each message on its own line (nothing in this batch was sent)",
        None,
    );
    let answers: Vec<String> = ids
        .iter()
        .map(|id| error_line(id.as_deref(), &error))
        .collect();
    Route::Answer(format!("[{}]", answers.join(",")))
}

/// A started upstream connection, not yet driven.
pub(crate) struct Running {
    upstream: Upstream,
    /// The server's process, for a `command` server.
    child: Option<tokio::process::Child>,
}

enum Route {
    Pass,
    /// Neither forwarded nor answered (a guarded call as a notification,
    /// a blank line, a batch of notifications).
    Drop,
    Guarded(Box<RawValue>, Box<CallToolRequestParams>),
    /// Not forwarded: this line is the proxy's answer.
    Answer(String),
}

fn ignore_broken_pipe(e: std::io::Error) -> Result<(), std::io::Error> {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Ok(())
    } else {
        Err(e)
    }
}
