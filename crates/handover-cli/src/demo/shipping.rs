//! The MCP shipping server of `handover demo --mcp`: the hidden
//! `handover demo-shipping-server` subcommand, an MCP server on stdio with
//! two tools — `create_shipment` (an effect: a line appended to a file
//! before anything is answered) and `find_shipment` (read-only, by the
//! reference the shipment was created with). With `--drop-first` the first
//! `create_shipment` applies, then the process exits before answering: the
//! confirmation is lost. Every call received is logged too, so the demo
//! counts requests and effects where they happen.
//!
//! Newline-delimited JSON-RPC, the handshake-era protocol the demo's
//! client speaks; small enough to read in one sitting.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use clap::Args;
use serde_json::{Value, json};

/// Arguments of the hidden `handover demo-shipping-server`.
#[derive(Debug, Args)]
pub(crate) struct ShippingArgs {
    /// Applied shipments, one JSON line each (the effects).
    #[arg(long, value_name = "PATH")]
    shipments: PathBuf,
    /// Every tool call received, one JSON line each.
    #[arg(long, value_name = "PATH")]
    calls: PathBuf,
    /// Exit after applying the first shipment, before answering.
    #[arg(long)]
    drop_first: bool,
}

/// Serves stdin/stdout until stdin closes.
pub(crate) fn run(args: &ShippingArgs) -> anyhow::Result<std::process::ExitCode> {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let msg: Value = match serde_json::from_str(&line?) {
            Ok(m) => m,
            Err(_) => continue,
        };
        let (Some(id), Some(method)) = (msg.get("id"), msg["method"].as_str()) else {
            continue; // notifications and answers: nothing to say
        };
        let answer = match method {
            "initialize" => Ok(json!({
                "protocolVersion": msg["params"]["protocolVersion"].as_str().unwrap_or("2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "demo-shipping", "version": env!("CARGO_PKG_VERSION")},
            })),
            "tools/list" => Ok(json!({"tools": tools()})),
            "tools/call" => call(args, &msg["params"]),
            _ => Err(error(-32601, &format!("no method {method}"))),
        };
        let reply = match answer {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": e}),
        };
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    Ok(std::process::ExitCode::SUCCESS)
}

fn tools() -> Value {
    json!([
        {"name": "create_shipment", "description": "Create a shipment (an effect in the world).",
         "inputSchema": {"type": "object", "required": ["order_id", "sku", "qty"], "properties": {
            "order_id": {"type": "string"}, "sku": {"type": "string"}, "qty": {"type": "integer"},
            "reference": {"type": "string"}}}},
        {"name": "find_shipment", "description": "Find shipments by reference (read-only).",
         "inputSchema": {"type": "object", "required": ["reference"],
            "properties": {"reference": {"type": "string"}}}},
    ])
}

/// A JSON-RPC error object.
fn error(code: i32, message: &str) -> Value {
    json!({"code": code, "message": message})
}

fn call(args: &ShippingArgs, params: &Value) -> Result<Value, Value> {
    let io = |e: std::io::Error| error(-32603, &e.to_string());
    append(&args.calls, &json!({"tool": params["name"]})).map_err(io)?;
    let shipments = read(&args.shipments);
    match params["name"].as_str() {
        Some("create_shipment") => {
            let a = &params["arguments"];
            let record = json!({
                "shipment_id": format!("SHP-{}", shipments.len() + 1),
                "order_id": a["order_id"], "sku": a["sku"], "qty": a["qty"],
                "reference": a["reference"],
            });
            append(&args.shipments, &record).map_err(io)?;
            if args.drop_first && shipments.is_empty() {
                std::process::exit(0); // applied; the answer is lost
            }
            Ok(result(record))
        }
        Some("find_shipment") => {
            let reference = &params["arguments"]["reference"];
            let found: Vec<Value> = shipments
                .into_iter()
                .filter(|r| &r["reference"] == reference)
                .collect();
            Ok(result(json!({ "records": found })))
        }
        other => Err(error(-32602, &format!("unknown tool {other:?}"))),
    }
}

/// A tool result: the record as text and as structured content.
fn result(structured: Value) -> Value {
    json!({
        "content": [{"type": "text", "text": structured.to_string()}],
        "structuredContent": structured,
        "isError": false,
    })
}

/// The JSON lines of `path` (none if it does not exist yet).
pub(crate) fn read(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn append(path: &std::path::Path, v: &Value) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    writeln!(f, "{v}")?;
    f.sync_data()
}
