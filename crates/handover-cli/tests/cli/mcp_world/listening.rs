//! `handover mcp --listen` as a child process, driven by raw HTTP/1.1.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};

use super::World;

/// `handover mcp --listen 127.0.0.1:0`, killed on drop.
pub struct Listening {
    pub child: Child,
    pub url: String,
    pub addr: String,
    /// Its log lines after the one naming the address (also echoed).
    logs: std::sync::mpsc::Receiver<String>,
}

impl Listening {
    pub fn start(w: &World, shipping_mode: &str) -> Self {
        Self::start_with(w, shipping_mode, &[])
    }

    pub fn start_with(w: &World, shipping_mode: &str, env: &[(&str, &std::path::Path)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_handover"))
            .args(["mcp", "--listen", "127.0.0.1:0", "--config"])
            .arg(w.path("handover.toml"))
            .env("SHIPPING_LOG", w.path("shipments.jsonl"))
            .env("SHIPPING_MODE", shipping_mode)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let addr = loop {
            line.clear();
            assert!(stderr.read_line(&mut line).unwrap() > 0, "exited early");
            if let Some(rest) = line.split("listening on http://").nth(1) {
                break rest.split('/').next().unwrap().to_owned();
            }
        };
        // Keep draining its log so it never blocks on a full pipe.
        let (log, logs) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stderr.lines() {
                let Ok(line) = line else { return };
                eprintln!("proxy: {line}");
                let _ = log.send(line);
            }
        });
        Self {
            child,
            url: format!("http://{addr}/mcp"),
            addr,
            logs,
        }
    }

    /// Waits (bounded) for a log line containing `needle`.
    pub fn logged(&self, needle: &str) -> String {
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

    /// One raw HTTP/1.1 exchange; returns the status and the whole answer.
    pub fn raw(&self, method: &str, headers: &[&str], body: &str) -> (u16, String) {
        self.raw_at("/mcp", method, headers, body)
    }

    pub fn raw_at(&self, path: &str, method: &str, headers: &[&str], body: &str) -> (u16, String) {
        let mut tcp = std::net::TcpStream::connect(&self.addr).unwrap();
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\n",
            self.addr,
            body.len()
        );
        for h in headers {
            req.push_str(h);
            req.push_str("\r\n");
        }
        req.push_str("\r\n");
        req.push_str(body);
        tcp.write_all(req.as_bytes()).unwrap();
        let mut answer = String::new();
        tcp.read_to_string(&mut answer).unwrap();
        let code = answer.split(' ').nth(1).unwrap().parse().unwrap();
        (code, answer)
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
