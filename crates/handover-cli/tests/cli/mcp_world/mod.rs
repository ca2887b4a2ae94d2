//! One `handover mcp` test's world, shared by the stdio and HTTP tests: a
//! directory with the ledger, the shipping server's log of applied
//! shipments (the effects) and the configuration; the official Python MCP
//! SDK as the client.

#![allow(dead_code, unreachable_pub)]

pub mod listening;
pub mod raw;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

pub const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../handover-mcp/tests/python");

pub fn python() -> Option<String> {
    let python = std::env::var("HANDOVER_TEST_PYTHON").ok();
    if python.is_none() {
        println!("SKIPPED: set HANDOVER_TEST_PYTHON to a python with the `mcp` package");
    }
    python
}

/// One test's world: a directory with the ledger, the shipping log and the config.
pub struct World {
    pub dir: tempfile::TempDir,
    pub python: String,
}

impl World {
    pub fn new(python: String, action: &str) -> Self {
        Self::with_lookup(python, action, "")
    }

    pub fn with_lookup(python: String, action: &str, lookup: &str) -> Self {
        Self::configured(python, action, lookup, "")
    }

    /// With `extra` appended to the configuration (e.g. `[gateway.clients]`).
    pub fn configured(python: String, action: &str, lookup: &str, extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let server = format!("{SCRIPTS}/shipping_server.py");
        let config = format!(
            r#"
[ledger]
backend = "sqlite"
path = "{ledger}"

[mcp]
scope = "agent-1"

[mcp.servers.shipping]
command = "{python}"
args = ["{server}"]

[actions.create_shipment]
{action}
mcp = {{ server = "shipping", tool = "create_shipment", key_from = ["order_id"], key_argument = "reference" }}
{lookup}
{extra}
"#,
            ledger = dir.path().join("ledger.db").display(),
        );
        std::fs::write(dir.path().join("handover.toml"), config).unwrap();
        Self { dir, python }
    }

    /// Adds `field` (e.g. `is_error = "rejected"`) to the action's
    /// `mcp = {...}` binding.
    pub fn bind(&self, field: &str) {
        let path = self.path("handover.toml");
        let config = std::fs::read_to_string(&path).unwrap();
        let bound = r#"key_argument = "reference" }"#;
        assert!(config.contains(bound));
        let config = config.replace(bound, &format!(r#"key_argument = "reference", {field} }}"#));
        std::fs::write(path, config).unwrap();
    }

    /// Removes `key_from` from the action's binding: the client's
    /// `_meta.idempotencyKey` is then the identity.
    pub fn unbind_key_from(&self) {
        let path = self.path("handover.toml");
        let config = std::fs::read_to_string(&path).unwrap();
        let key_from = r#"key_from = ["order_id"], "#;
        assert!(config.contains(key_from));
        std::fs::write(path, config.replace(key_from, "")).unwrap();
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs the Python client against `server` (a command line) with the
    /// shipping server in `mode`; returns each printed JSON line's value.
    pub fn client(&self, mode: &str, args: &[&str], server: &[&str]) -> Vec<Value> {
        self.client_with(mode, args, server, &[])
    }

    /// [`World::client`] with more environment (`MCP_TOKEN`, `MCP_MODE`).
    pub fn client_with(
        &self,
        mode: &str,
        args: &[&str],
        server: &[&str],
        env: &[(&str, &str)],
    ) -> Vec<Value> {
        let out = Command::new(&self.python)
            .envs(env.iter().copied())
            .arg(format!("{SCRIPTS}/mcp_client.py"))
            .args(args)
            .args(server)
            .env("SHIPPING_LOG", self.path("shipments.jsonl"))
            .env("SHIPPING_MODE", mode)
            .output()
            .expect("run the MCP Python client");
        assert!(
            out.status.success(),
            "client failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["value"].clone())
            .collect()
    }

    pub fn through_handover(&self) -> Vec<String> {
        vec![
            env!("CARGO_BIN_EXE_handover").to_owned(),
            "mcp".into(),
            "--config".into(),
            self.path("handover.toml").display().to_string(),
        ]
    }

    pub fn calls(&self, mode: &str, plan: &Value) -> Vec<Value> {
        let plan = plan.to_string();
        let server = self.through_handover();
        let server: Vec<&str> = server.iter().map(String::as_str).collect();
        self.client(mode, &["calls", &plan], &server)
    }

    /// `handover mcp` over stdio with piped stdin and stdout, the shipping
    /// server in `mode`; with `applied`, the server signals each applied
    /// shipment on that FIFO (see [`applied_fifo`]).
    pub fn proxy(&self, mode: &str, applied: Option<&Path>) -> std::process::Child {
        self.proxy_command(mode, applied).spawn().unwrap()
    }

    /// The command [`World::proxy`] runs.
    pub fn proxy_command(&self, mode: &str, applied: Option<&Path>) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_handover"));
        command
            .args(["mcp", "--config"])
            .arg(self.path("handover.toml"))
            .env("SHIPPING_LOG", self.path("shipments.jsonl"))
            .env("SHIPPING_MODE", mode)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        if let Some(fifo) = applied {
            command.env("SHIPPING_APPLIED", fifo);
        }
        command
    }

    /// Points the world's `shipping` server at `url` instead of a command
    /// (or of the URL it had).
    pub fn over_http(&self, url: &str) {
        let path = self.path("handover.toml");
        let config = std::fs::read_to_string(&path).unwrap();
        let (start, end) = match config.find("command = ") {
            Some(start) => (start, start + config[start..].find("]\n").unwrap() + 2),
            None => {
                let start = config.find("url = ").unwrap();
                (start, start + config[start..].find('\n').unwrap() + 1)
            }
        };
        let config = format!("{}url = \"{url}\"\n{}", &config[..start], &config[end..]);
        std::fs::write(path, config).unwrap();
    }

    /// Sets the stdio session's scope (`[mcp] scope`, "agent-1" at first):
    /// the next session is another principal's, on the same ledger.
    pub fn set_scope(&self, scope: &str) {
        let path = self.path("handover.toml");
        let config = std::fs::read_to_string(&path).unwrap();
        let at = config.find("scope = \"").unwrap();
        let end = at + config[at..].find('\n').unwrap();
        let config = format!("{}scope = \"{scope}\"{}", &config[..at], &config[end..]);
        std::fs::write(path, config).unwrap();
    }

    /// `handover ops show SCOPE KEY --json`: the operation and its attempts.
    pub fn show(&self, scope: &str, key: &str) -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_handover"))
            .args(["ops", "show", "--json", "--config"])
            .arg(self.path("handover.toml"))
            .args([scope, key])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// What the upstream applied, in order (the effects).
    pub fn shipments(&self) -> Vec<Value> {
        shipments(&self.path("shipments.jsonl"))
    }
}

pub fn shipments(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub fn ship(order: &str, qty: u32) -> Value {
    json!({ "tool": "create_shipment", "arguments": { "order_id": order, "sku": "KETTLE", "qty": qty } })
}

pub fn status(result: &Value) -> &str {
    result["structuredContent"]["status"].as_str().unwrap_or("")
}

/// A lookup through the shipping server's `find_shipment`, checked often.
pub const LOOKUP: &str = r#"
[actions.create_shipment.lookup]
visibility_lag = "30s"
check_every = "100ms"
max_check_every = "200ms"
mcp_tool = "find_shipment"
arguments = { reference = "{destination_key}" }
"#;

/// `replay` is the recorded result of the one shipment the server applied.
pub fn assert_replays_the_one_shipment(w: &World, replay: &Value) {
    assert_eq!(replay["isError"], false, "{replay}");
    assert_eq!(replay["_meta"]["handover"]["replayed"], true, "{replay}");
    let applied = w.shipments();
    assert_eq!(
        applied.len(),
        1,
        "one effect, found, never re-sent: {applied:?}"
    );
    assert_eq!(
        replay["structuredContent"]["shipment_id"],
        applied[0]["shipment_id"]
    );
}

/// The handshake-era opening of a session written by hand (initialize,
/// initialized) and a guarded `create_shipment` of `order` with id 2.
pub fn open_and_ship(stdin: &mut impl std::io::Write, client: &str, order: &str) {
    for line in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": client, "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "create_shipment",
            "arguments": {"order_id": order, "sku": "KETTLE", "qty": 1}}}),
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
}

/// A FIFO the shipping server writes its pid to once it applied a
/// shipment (`SHIPPING_APPLIED`).
pub fn applied_fifo(w: &World) -> PathBuf {
    let fifo = w.path("applied.fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    fifo
}

/// Waits (bounded) for the shipping server's signal that it applied a
/// shipment; returns its pid.
pub fn applied_pid(fifo: &Path) -> String {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    let fifo = fifo.to_owned();
    std::thread::spawn(move || {
        let mut line = String::new();
        let f = std::fs::File::open(fifo).unwrap();
        std::io::BufReader::new(f).read_line(&mut line).unwrap();
        let _ = tx.send(line);
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("the upstream applied the shipment")
}

/// SIGKILL to `pid`.
pub fn kill_9(pid: &str) {
    let killed = Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
}
