//! Running the real `handover` binary as a user would.

#![allow(dead_code, unreachable_pub)]

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use handover::ledger::{
    BeginOptions, BeginOutcome, Dispatch, Ledger, Limits, OperationRequest, Owner, UnknownReport,
};
use serde_json::json;

/// The binary under test.
pub fn handover() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_handover"));
    cmd.env("NO_COLOR", "1");
    cmd
}

/// A clock at 1970-01-01T00:16:40Z: whatever a ledger opened on it
/// leases has long run out by the binary's clock.
pub fn long_ago() -> std::sync::Arc<handover::ledger::ManualClock> {
    let t = handover::ledger::Timestamp::from_millis(1_000_000);
    std::sync::Arc::new(handover::ledger::ManualClock::new(t))
}

/// `scope`/`key` claimed and dispatched with a 30 s lease by a holder
/// that then vanished: on a ledger opened with [`long_ago`], due to
/// become `unknown` at the next write that comes across it.
pub async fn dispatched_by_a_vanished_holder(ledger: &dyn Ledger, scope: &str, key: &str) {
    let req =
        OperationRequest::new(scope, key, "ship", &json!({"n": 1}), &Limits::default()).unwrap();
    let opts = BeginOptions::new("gone", Duration::from_secs(30));
    let BeginOutcome::Started(claim) = ledger.begin(&req, &opts).await.unwrap() else {
        panic!("{scope}/{key} is new")
    };
    let gone = Dispatch {
        executor: "gone".into(),
        metadata: None,
    };
    ledger.mark_dispatched(&claim, gone).await.unwrap();
}

/// Runs `handover ARGS` in `dir` and returns its output.
pub fn run_in(dir: &Path, args: &[&str]) -> Output {
    handover()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run the handover binary")
}

/// Runs `handover ARGS` in the current directory.
pub fn run(args: &[&str]) -> Output {
    handover()
        .args(args)
        .output()
        .expect("run the handover binary")
}

/// Whether the tests run as root (whom file permissions do not bind).
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs `handover ARGS` in `dir` as a user without privileges: as root
/// (where permissions do not bind), as `nobody` through `setpriv`.
pub fn run_unprivileged(dir: &Path, args: &[&str]) -> Output {
    if !is_root() {
        return run_in(dir, args);
    }
    Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            env!("CARGO_BIN_EXE_handover"),
        ])
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("HOME", "/tmp")
        .output()
        .expect("setpriv (util-linux) is needed as root")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts success and returns stdout.
pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "expected success, got {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        stdout(o),
        stderr(o)
    );
    stdout(o)
}

/// Asserts failure and returns stderr.
pub fn failed(o: &Output) -> String {
    assert!(
        !o.status.success(),
        "expected failure\nstdout:\n{}\nstderr:\n{}",
        stdout(o),
        stderr(o)
    );
    stderr(o)
}

/// Writes, through the ledger library, `K-1` unknown (a lost confirmation
/// waiting for review) and `K-2` confirmed, both in `scope`.
pub async fn prepare_ops(ledger: &dyn Ledger, scope: &str) {
    let opts = BeginOptions::new("agent-a", Duration::from_secs(30));
    let req = |key: &str| {
        OperationRequest::new(
            scope,
            key,
            "create_shipment",
            &json!({"order_id": "1042", "sku": "MUG"}),
            &Limits::default(),
        )
        .unwrap()
    };
    for key in ["K-1", "K-2"] {
        let BeginOutcome::Started(claim) = ledger.begin(&req(key), &opts).await.unwrap() else {
            panic!("fresh ledger")
        };
        ledger
            .mark_dispatched(
                &claim,
                Dispatch {
                    executor: "agent-a".into(),
                    metadata: Some(json!({"tool_call_id": "call_abc"})),
                },
            )
            .await
            .unwrap();
        if key == "K-1" {
            ledger
                .mark_unknown(
                    &claim,
                    UnknownReport {
                        reason: "destination outcome unknown".into(),
                        evidence: Some("connection reset after sending".into()),
                        owner: Owner::Review,
                        next_check_at: None,
                    },
                )
                .await
                .unwrap();
        } else {
            ledger
                .confirm(&claim, json!({"id": "rec-9"}), Some("201 Created".into()))
                .await
                .unwrap();
        }
    }
}

/// Drops a PostgreSQL test's schema when the test ends (even on failure).
pub struct SchemaGuard {
    pub url: String,
    pub schema: String,
}

impl Drop for SchemaGuard {
    fn drop(&mut self) {
        use sqlx::Connection;
        let (url, schema) = (self.url.clone(), self.schema.clone());
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                if let Ok(mut c) = sqlx::PgConnection::connect(&url).await {
                    let sql = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
                    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                        .execute(&mut c)
                        .await;
                    let _ = c.close().await;
                }
            });
        })
        .join();
    }
}

/// The URL with the schema as the session's search path, as an operator
/// would configure a ledger that lives in its own schema.
pub fn with_search_path(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}options=-c%20search_path%3D{schema}")
}

/// A fresh schema name for a PostgreSQL test.
pub fn fresh_schema(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}_{}_{nanos}", std::process::id())
}

/// A running `handover serve` (killed when dropped).
pub struct Served {
    pub child: std::process::Child,
    /// `http://IP:PORT`, from the line that names the bound address.
    pub base: String,
}

impl Served {
    /// Starts `handover serve --config CONFIG` with `envs` and waits for
    /// the line naming the bound address (the explicit readiness signal).
    pub fn start(config: &Path, envs: &[(&str, &str)]) -> Self {
        use std::io::{BufRead, BufReader};
        let mut child = handover()
            .args(["serve", "--config", config.to_str().unwrap()])
            .envs(envs.iter().copied())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let base = loop {
            line.clear();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "serve exited before listening"
            );
            if let Some(rest) = line.split("listening on ").nth(1) {
                break rest.split_whitespace().next().unwrap().to_owned();
            }
        };
        // Keep draining stderr so the process never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = String::new();
            while stderr.read_line(&mut sink).unwrap_or(0) > 0 {
                sink.clear();
            }
        });
        Self { child, base }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `handover serve --config CONFIG`; the child, its address
/// (`http://IP:PORT`, from its readiness line) and its further stderr lines.
pub fn start(
    config: &Path,
) -> (
    std::process::Child,
    String,
    tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    start_with(config, &[], None, &[])
}

/// [`start`] with more arguments, environment variables and, if given, `RUST_LOG`.
pub fn start_with(
    config: &Path,
    args: &[&str],
    rust_log: Option<&str>,
    envs: &[(&str, &str)],
) -> (
    std::process::Child,
    String,
    tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    let mut cmd = handover();
    cmd.env_remove("RUST_LOG");
    cmd.envs(envs.iter().copied());
    if let Some(filter) = rust_log {
        cmd.env("RUST_LOG", filter);
    }
    let mut child = cmd
        .args(["serve", "--config", config.to_str().unwrap()])
        .args(args)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(stderr) {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    // The explicit readiness signal: the line naming the bound address.
    let addr = loop {
        let line = rx.blocking_recv().expect("serve exited before listening");
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
    };
    (child, addr, rx)
}

/// Sends SIG`name` to `child`.
pub fn signal(child: &std::process::Child, name: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}
