//! `handover mcp` driven by hand over stdio, for lines no SDK writes.

use serde_json::{Value, json};

use super::World;

/// `handover mcp` driven by hand over stdio: lines in, answer lines out
/// (each read with a bounded wait, so a line that gets no answer fails the
/// test instead of hanging it).
pub struct RawSession {
    pub proxy: std::process::Child,
    stdin: std::process::ChildStdin,
    answers: std::sync::mpsc::Receiver<String>,
    /// The proxy's log lines (also echoed to the test's stderr).
    logs: std::sync::mpsc::Receiver<String>,
}

impl RawSession {
    pub fn start(w: &World) -> Self {
        Self::start_with(w, "ok", None)
    }

    /// With the shipping server in `mode`, signalling on `applied` (see
    /// [`super::applied_fifo`]).
    pub fn start_with(w: &World, mode: &str, applied: Option<&std::path::Path>) -> Self {
        Self::start_command(w.proxy_command(mode, applied))
    }

    /// With the proxy started by `command` (see [`World::proxy_command`]).
    pub fn start_command(mut command: std::process::Command) -> Self {
        use std::io::BufRead;
        let mut proxy = command
            .env_remove("RUST_LOG")
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = std::io::BufReader::new(proxy.stderr.take().unwrap());
        let (log, logs) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stderr.lines() {
                let Ok(line) = line else { return };
                eprintln!("proxy: {line}");
                let _ = log.send(line);
            }
        });
        let stdin = proxy.stdin.take().unwrap();
        let stdout = std::io::BufReader::new(proxy.stdout.take().unwrap());
        let (tx, answers) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut s = Self {
            proxy,
            stdin,
            answers,
            logs,
        };
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}});
        assert!(s.answer(&init.to_string())["result"].is_object());
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
        s
    }

    pub fn send(&mut self, line: &str) {
        self.send_bytes(line.as_bytes());
    }

    /// Writes `line` and a newline, whatever its bytes.
    pub fn send_bytes(&mut self, line: &[u8]) {
        use std::io::Write;
        self.stdin.write_all(line).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends `line` and returns the next line the proxy writes.
    pub fn answer(&mut self, line: &str) -> Value {
        self.answer_bytes(line.as_bytes())
    }

    pub fn answer_bytes(&mut self, line: &[u8]) -> Value {
        self.send_bytes(line);
        self.next().unwrap_or_else(|| {
            panic!(
                "no answer to {:?}",
                String::from_utf8_lossy(&line[..line.len().min(200)])
            )
        })
    }

    /// The next line the proxy writes (bounded wait), `None` if it wrote
    /// nothing more.
    pub fn next(&mut self) -> Option<Value> {
        let out = self
            .answers
            .recv_timeout(std::time::Duration::from_secs(30))
            .ok()?;
        Some(serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out:?}")))
    }

    /// The proxy closed its stdout (the session ended) without being asked:
    /// stdin is still open.
    pub fn ended(&mut self) -> bool {
        matches!(
            self.answers
                .recv_timeout(std::time::Duration::from_secs(30)),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected)
        )
    }

    /// Waits (bounded) for a log line of the proxy containing `needle`.
    pub fn logged(&mut self, needle: &str) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.logs.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(_) => panic!("the proxy never logged {needle:?}"),
            }
        }
    }

    pub fn close(self) {
        drop(self.stdin);
        let mut proxy = self.proxy;
        proxy.wait().unwrap();
    }
}
