//! `handover demo --mcp`: the lost-confirmation story through `handover
//! mcp`. An agent calls `create_shipment` on an MCP shipping server through
//! the proxy; the server applies it and dies before answering; the agent
//! is told the outcome is being verified; it reconnects and calls again
//! under a new JSON-RPC id — nothing is sent; the proxy's reconciler calls
//! the server's `find_shipment` and confirms the operation; the next call
//! gets the recorded result replayed. One effect, no duplicate.
//!
//! Real parts only: the proxy (`McpProxy::serve`, the code `handover mcp`
//! runs) in process, the shipping server as a child process (`handover
//! demo-shipping-server`, over stdio), the SQLite ledger file. Every count
//! is read where it happened: the server's own logs and the ledger.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use handover::ledger::{OperationId, StateKind};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, WriteHalf};

use super::shipping;
use crate::term::Style;

pub(super) const SCOPE: &str = "demo-mcp";
/// Every wait of the story is bounded by this.
const DEADLINE: Duration = Duration::from_secs(20);

/// What `--mcp --json` prints.
#[derive(Debug, Serialize)]
pub(crate) struct McpReport {
    ledger: String,
    scope: &'static str,
    key: String,
    timeline: Vec<Line>,
    summary: McpSummary,
}

/// One line of the story.
#[derive(Debug, Serialize)]
pub(crate) struct Line {
    at_ms: u128,
    who: &'static str,
    what: String,
}

/// Counts taken at the shipping server and in the ledger.
#[derive(Debug, Serialize)]
pub(crate) struct McpSummary {
    /// `create_shipment` calls the shipping server received.
    create_calls: usize,
    /// `find_shipment` calls it received (the reconciler's lookups).
    find_calls: usize,
    /// Shipments it created for this order.
    effects: usize,
    /// Shipments beyond the first.
    duplicates: usize,
    /// Calls the agent made (`tools/call`, each with a new JSON-RPC id).
    agent_calls: usize,
    /// The operation's final state in the ledger.
    final_state: String,
}

impl McpSummary {
    pub(crate) fn ok(&self) -> bool {
        self.effects == 1 && self.duplicates == 0 && self.final_state == "confirmed"
    }
}

impl McpReport {
    pub(crate) fn ok(&self) -> bool {
        self.summary.ok()
    }
}

/// Plays the story on the ledger at `path`.
pub(crate) async fn play(path: &Path) -> anyhow::Result<McpReport> {
    let logs = Logs::next_to(path)?;
    let exe = std::env::current_exe().context("cannot find the handover binary")?;
    let config = handover::Config::parse(&config_toml(path, &exe, &logs), &|_| None)?;
    let handover = handover::Handover::open(&config)
        .await
        .context("while opening the demo ledger")?;
    let proxy = handover_mcp::McpProxy::new(&handover, None)?;
    // A fresh order per run, so a second run on the same ledger is a new operation.
    let earlier = handover
        .ledger()
        .list(&handover::ledger::ListFilter {
            scope: Some(handover::ledger::Scope::new(SCOPE)?),
            ..Default::default()
        })
        .await?
        .len();
    let order = format!("A-{}", 1001 + earlier);
    let key = format!("create_shipment:{order}");
    let id = OperationId::new(SCOPE, &key)?;
    let args = json!({"order_id": order, "sku": "KETTLE", "qty": 1});
    let mut story = Story {
        start: Instant::now(),
        lines: Vec::new(),
        calls: 0,
    };

    let mut s = Session::open(&proxy).await?;
    story.say(
        "agent",
        format!("tools/call create_shipment {args} (through handover mcp)"),
    );
    let first = story.call(&mut s, &args).await?;
    let applied = shipping::read(&logs.shipments);
    if let Some(rec) = applied.first() {
        story.say(
            "shipping",
            format!(
                "applied {} (reference {}), then the process died before answering",
                rec["shipment_id"], rec["reference"]
            ),
        );
    }
    story.say("agent", format!("gets: {}", summary(&first)));
    s.close().await;

    let mut s = Session::open(&proxy).await?;
    story.say(
        "agent",
        "reconnects (a new server process) and calls again, new JSON-RPC id".into(),
    );
    let creates_before = creates(&logs);
    let second = story.call(&mut s, &args).await?;
    story.say(
        "handover",
        format!(
            "sends nothing: the server received {} more create_shipment call(s); agent gets: {}",
            creates(&logs) - creates_before,
            summary(&second)
        ),
    );
    wait_confirmed(&handover, &id).await?;
    story.say(
        "handover",
        "reconciler: find_shipment found the shipment with the approved arguments -> [unknown -> confirmed]".into(),
    );
    let third = story.call(&mut s, &args).await?;
    story.say(
        "agent",
        format!("calls again and gets: {}", summary(&third)),
    );
    s.close().await;

    let summary = tally(&handover, &id, &logs, &order, story.calls).await?;
    // Closed, not dropped, so the ledger file alone holds every record.
    handover.ledger().close().await;
    Ok(McpReport {
        ledger: path.display().to_string(),
        scope: SCOPE,
        key,
        timeline: story.lines,
        summary,
    })
}

/// The counts, read at the shipping server's logs and in the ledger.
async fn tally(
    handover: &handover::Handover,
    id: &OperationId,
    logs: &Logs,
    order: &str,
    agent_calls: usize,
) -> anyhow::Result<McpSummary> {
    let rec = handover.ledger().get(id).await?;
    let shipments = shipping::read(&logs.shipments);
    let effects = shipments.iter().filter(|r| r["order_id"] == order).count();
    let calls = shipping::read(&logs.calls);
    let count = |tool: &str| calls.iter().filter(|c| c["tool"] == tool).count();
    Ok(McpSummary {
        create_calls: count("create_shipment"),
        find_calls: count("find_shipment"),
        effects,
        duplicates: effects.saturating_sub(1),
        agent_calls,
        final_state: rec.map_or("missing".into(), |r| r.state.kind().as_str().to_owned()),
    })
}

/// The shipping server's logs, beside the ledger, emptied for this run.
struct Logs {
    shipments: PathBuf,
    calls: PathBuf,
}

impl Logs {
    fn next_to(ledger: &Path) -> anyhow::Result<Self> {
        let base = ledger.display().to_string();
        let logs = Self {
            shipments: PathBuf::from(format!("{base}.mcp-shipments.jsonl")),
            calls: PathBuf::from(format!("{base}.mcp-calls.jsonl")),
        };
        for p in [&logs.shipments, &logs.calls] {
            std::fs::write(p, "").with_context(|| format!("cannot write {}", p.display()))?;
        }
        Ok(logs)
    }
}

fn creates(logs: &Logs) -> usize {
    shipping::read(&logs.calls)
        .iter()
        .filter(|c| c["tool"] == "create_shipment")
        .count()
}

fn config_toml(ledger: &Path, exe: &Path, logs: &Logs) -> String {
    let s = |p: &Path| toml_string(&p.display().to_string());
    format!(
        r#"
[ledger]
backend = "sqlite"
path = {ledger}

[mcp]
scope = "{SCOPE}"

[mcp.servers.shipping]
command = {exe}
args = ["demo-shipping-server", "--shipments", {shipments}, "--calls", {calls}, "--drop-first"]

[actions.create_shipment]
timeout = "5s"
mcp = {{ server = "shipping", tool = "create_shipment", key_from = ["order_id"], key_argument = "reference" }}

[actions.create_shipment.lookup]
visibility_lag = "30s"
check_every = "50ms"
max_check_every = "100ms"
mcp_tool = "find_shipment"
arguments = {{ reference = "{{destination_key}}" }}
"#,
        ledger = s(ledger),
        exe = s(exe),
        shipments = s(&logs.shipments),
        calls = s(&logs.calls),
    )
}

/// A TOML basic string (JSON's escaping is a subset TOML reads).
fn toml_string(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// One line about a tool result: its status, or the shipment it carries.
fn summary(r: &Value) -> String {
    let status = r["structuredContent"]["status"].as_str();
    match status {
        Some("outcome_unknown") => {
            "isError, \"being verified\" (outcome_unknown): do not call again with another key"
                .into()
        }
        Some(other) => format!("isError, {other}"),
        None if r["_meta"]["handover"]["replayed"] == true => format!(
            "{} replayed from the ledger (_meta.handover.replayed)",
            r["structuredContent"]["shipment_id"]
        ),
        None => format!("{}", r["structuredContent"]),
    }
}

struct Story {
    start: Instant,
    lines: Vec<Line>,
    calls: usize,
}

impl Story {
    fn say(&mut self, who: &'static str, what: String) {
        self.lines.push(Line {
            at_ms: self.start.elapsed().as_millis(),
            who,
            what,
        });
    }

    async fn call(&mut self, s: &mut Session, args: &Value) -> anyhow::Result<Value> {
        self.calls += 1;
        let answer = s
            .request(
                "tools/call",
                json!({"name": "create_shipment", "arguments": args}),
            )
            .await?;
        Ok(answer)
    }
}

/// Waits until the reconciler has confirmed the operation (bounded).
async fn wait_confirmed(h: &handover::Handover, id: &OperationId) -> anyhow::Result<()> {
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    let deadline = Instant::now() + DEADLINE;
    loop {
        tick.tick().await;
        let rec = h.ledger().get(id).await?;
        if rec.is_some_and(|r| r.state.kind() == StateKind::Confirmed) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the reconciler did not confirm {id} within {DEADLINE:?}");
        }
    }
}

/// An MCP client session with the proxy over an in-memory pipe.
struct Session {
    write: WriteHalf<DuplexStream>,
    read: Lines<BufReader<tokio::io::ReadHalf<DuplexStream>>>,
    serving: tokio::task::JoinHandle<Result<(), handover_mcp::McpError>>,
    next_id: u64,
}

impl Session {
    async fn open(proxy: &handover_mcp::McpProxy) -> anyhow::Result<Self> {
        let (client, server) = tokio::io::duplex(1 << 16);
        let (server_read, server_write) = tokio::io::split(server);
        let proxy = proxy.clone();
        let serving = tokio::spawn(async move {
            proxy
                .serve(server_read, server_write, std::future::pending())
                .await
        });
        let (read, write) = tokio::io::split(client);
        let mut s = Self {
            write,
            read: BufReader::new(read).lines(),
            serving,
            next_id: 1,
        };
        s.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "handover-demo-agent", "version": "1"}}),
        )
        .await?;
        s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok(s)
    }

    async fn send(&mut self, msg: Value) -> anyhow::Result<()> {
        let mut line = msg.to_string();
        line.push('\n');
        self.write.write_all(line.as_bytes()).await?;
        Ok(())
    }

    /// Sends a request and returns its result (an error answer is an error).
    async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        let answer = tokio::time::timeout(DEADLINE, async {
            while let Some(line) = self.read.next_line().await? {
                let msg: Value = serde_json::from_str(&line)?;
                if msg["id"] == id && msg.get("method").is_none() {
                    return Ok(msg);
                }
            }
            bail!("the proxy closed the session before answering {method}")
        })
        .await
        .with_context(|| format!("no answer to {method} within {DEADLINE:?}"))??;
        match answer.get("result") {
            Some(r) => Ok(r.clone()),
            None => bail!("{method} failed: {}", answer["error"]),
        }
    }

    /// Closes the client's side; the proxy records what is in flight and ends.
    async fn close(mut self) {
        // The pipe's other end sees EOF once this side is shut down (the
        // read half keeps the stream itself alive).
        let _ = self.write.shutdown().await;
        let _ = tokio::time::timeout(DEADLINE, self.serving).await;
    }
}

/// The story as text.
pub(crate) fn render(r: &McpReport, s: Style) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} — ledger {} (SQLite), operation {} {}",
        s.bold("Handover demo (MCP)"),
        r.ledger,
        r.scope,
        r.key
    );
    let _ = writeln!(out, "\n{}", s.bold("Timeline"));
    for l in &r.timeline {
        let _ = writeln!(out, "  {:>6} ms  {:<9} {}", l.at_ms, l.who, l.what);
    }
    let m = &r.summary;
    let _ = writeln!(out, "\n{}", s.bold("Summary"));
    let rows = [
        ("agent tool calls", m.agent_calls.to_string()),
        (
            "server received",
            format!(
                "{} create_shipment, {} find_shipment",
                m.create_calls, m.find_calls
            ),
        ),
        ("effects at server", m.effects.to_string()),
        ("duplicates", m.duplicates.to_string()),
        ("final state", s.state(&m.final_state)),
    ];
    super::summary_end(&mut out, &rows, &r.ledger, r.scope, &r.key);
    out
}
