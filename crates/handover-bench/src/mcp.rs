//! `handover-bench mcp`: what the MCP proxy costs per `tools/call` over
//! stdio, against a direct connection to the same upstream in the same run.
//!
//! Three series, interleaved in rounds so machine noise hits each alike:
//! * baseline — the client talks to the upstream directly (one pipe hop);
//! * `mcp_passthrough` — through the proxy (`mcp-proxy`, a process of its
//!   own, as `handover mcp` runs) to a tool that is not an action;
//! * `mcp_guarded` — through the proxy to a tool configured as an action:
//!   begin, durable dispatch and the outcome in a SQLite ledger file, a new
//!   `_meta.idempotencyKey` per call.
//!
//! The upstream is this binary's `mcp-upstream`: a minimal MCP server that
//! answers at once, so the numbers are the proxy's and not a server's.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::stats::{Samples, emit, round2};
use crate::{BenchResult, args::Args};

/// One client connection over a child's stdio, one request at a time.
struct Conn {
    _child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    next_id: u64,
}

impl Conn {
    async fn spawn(args: &[&str]) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
        let mut conn = Self {
            _child: child,
            stdin,
            stdout,
            next_id: 0,
        };
        conn.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "handover-bench", "version": "1"}}),
        )
        .await?;
        conn.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok(conn)
    }

    async fn send(&mut self, msg: &Value) -> std::io::Result<()> {
        let mut line = msg.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await?;
        self.stdin.flush().await
    }

    async fn request(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        let line = self.stdout.next_line().await?.ok_or("connection closed")?;
        let answer: Value = serde_json::from_str(&line)?;
        if answer["id"] != json!(id) || answer.get("result").is_none() {
            return Err(format!("unexpected answer {line}").into());
        }
        Ok(answer)
    }

    async fn timed_call(
        &mut self,
        tool: &str,
        meta: Value,
    ) -> Result<Duration, Box<dyn std::error::Error + Send + Sync>> {
        let start = Instant::now();
        let answer = self
            .request(
                "tools/call",
                json!({"name": tool, "arguments": {"sku": "KETTLE", "qty": 1}, "_meta": meta}),
            )
            .await?;
        let took = start.elapsed();
        if answer["result"]["isError"] == json!(true) {
            return Err(format!("tool error: {answer}").into());
        }
        Ok(took)
    }
}

/// The measured run.
pub(crate) async fn run(args: Args) -> BenchResult {
    let ops = args.number("ops", 3000)? as usize;
    let dir = std::env::temp_dir().join(format!("handover-bench-mcp-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("handover.toml");
    let exe = std::env::current_exe()?;
    std::fs::write(
        &config,
        format!(
            r#"
[ledger]
backend = "sqlite"
path = "{ledger}"

[mcp.servers.up]
command = "{exe}"
args = ["mcp-upstream"]

[actions.write]
mcp = {{ server = "up", tool = "write" }}
"#,
            ledger = dir.join("ledger.db").display(),
            exe = exe.display(),
        ),
    )?;
    let config_arg = config.display().to_string();
    let mut direct = Conn::spawn(&["mcp-upstream"]).await?;
    let mut proxied = Conn::spawn(&["mcp-proxy", "--config", &config_arg]).await?;
    let (mut base, mut pass, mut guarded) = (
        Samples::with_capacity(ops),
        Samples::with_capacity(ops),
        Samples::with_capacity(ops),
    );
    // Warm up every path (process start, SQLite pages, allocator).
    for i in 0..200 {
        direct.timed_call("read", json!({})).await?;
        proxied.timed_call("read", json!({})).await?;
        proxied
            .timed_call("write", json!({"idempotencyKey": format!("warm-{i}")}))
            .await?;
    }
    let start = Instant::now();
    for i in 0..ops {
        base.push(direct.timed_call("read", json!({})).await?);
        pass.push(proxied.timed_call("read", json!({})).await?);
        guarded.push(
            proxied
                .timed_call("write", json!({"idempotencyKey": format!("k-{i}")}))
                .await?,
        );
    }
    let wall = start.elapsed();
    let (b50, b99) = (base.quantile_us(0.5), base.quantile_us(0.99));
    for (bench, s) in [
        ("mcp_passthrough", &mut pass),
        ("mcp_guarded", &mut guarded),
    ] {
        let (p50, p99) = (s.quantile_us(0.5), s.quantile_us(0.99));
        emit(json!({
            "bench": bench,
            "backend": if bench == "mcp_guarded" { "sqlite" } else { "none" },
            "concurrency": 1,
            "ops": ops,
            // Each series is a third of the interleaved wall time.
            "ops_per_s": round2(ops as f64 * 3.0 / wall.as_secs_f64()),
            "p50_us": round2(p50),
            "p99_us": round2(p99),
            "baseline_p50_us": round2(b50),
            "baseline_p99_us": round2(b99),
            "overhead_p50_us": round2(p50 - b50),
            "ratio_p50": round2(p50 / b50),
            "ratio_p99": round2(p99 / b99),
        }));
    }
    drop(proxied);
    drop(direct);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// `mcp-upstream`: a minimal MCP server on stdio that answers every
/// request at once (tools `read` and `write`, both echoing success).
pub(crate) async fn upstream() -> BenchResult {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut out = tokio::io::stdout();
    while let Some(line) = lines.next_line().await? {
        let msg: Value = serde_json::from_str(&line)?;
        let Some(id) = msg.get("id").filter(|_| msg.get("method").is_some()) else {
            continue;
        };
        let result = match msg["method"].as_str() {
            Some("initialize") => json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "bench-upstream", "version": "1"},
            }),
            Some("tools/list") => json!({"tools": []}),
            Some("tools/call") => json!({
                "content": [{"type": "text", "text": "ok"}],
                "isError": false,
            }),
            _ => json!({}),
        };
        let mut answer = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
        answer.push('\n');
        out.write_all(answer.as_bytes()).await?;
        out.flush().await?;
    }
    Ok(())
}

/// `mcp-proxy --config F`: the MCP proxy on stdio, as `handover mcp` runs it.
pub(crate) async fn proxy(args: Args) -> BenchResult {
    let config = handover::Config::load(args.string("config", "handover.toml"))?;
    let handover = handover::Handover::open(&config).await?;
    handover_mcp::McpProxy::new(&handover, None)?
        .serve_stdio(std::future::pending())
        .await?;
    Ok(())
}
