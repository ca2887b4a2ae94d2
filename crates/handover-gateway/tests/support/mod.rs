//! Shared test helpers: a gateway on a real socket over a real SQLite
//! ledger file, with providers configured from mock servers.

#![allow(dead_code)] // the binaries that read process-wide metrics use a subset
pub(crate) mod responses_upstream;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use handover::{Config, HandoverOptions};
use handover_gateway::{Gateway, GatewayState, hash_token};
use handover_ledger::{Ledger, ListFilter};
use handover_testkit::{Flavor, bodies};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

pub(crate) const CLIENT_A: &str = "token-client-a";
pub(crate) const CLIENT_B: &str = "token-client-b";
pub(crate) const OPERATOR: &str = "token-operator";

/// The `[gateway]` section every test uses (plus `extra`, e.g. aliases).
pub(crate) fn gateway_section(max_body: usize, keepalive: &str, extra: &str) -> String {
    gateway_section_with(
        &format!("max_body_bytes = {max_body}\nkeepalive = \"{keepalive}\""),
        extra,
    )
}

/// The `[gateway]` section with `settings` (lines of `[gateway]` itself,
/// e.g. limits) and `extra` (further tables).
pub(crate) fn gateway_section_with(settings: &str, extra: &str) -> String {
    format!(
        r#"
[gateway]
listen = "127.0.0.1:0"
shutdown_grace = "10s"
{settings}

[gateway.clients.a]
token_sha256 = "{a}"
scope = "tenant-a"

[gateway.clients.b]
token_sha256 = "{b}"
scope = "tenant-b"

[gateway.operators.olga]
token_sha256 = "{o}"
{extra}
"#,
        a = hash_token(CLIENT_A),
        b = hash_token(CLIENT_B),
        o = hash_token(OPERATOR),
    )
}

/// A running gateway.
pub(crate) struct Running {
    pub(crate) base: String,
    pub(crate) addr: std::net::SocketAddr,
    pub(crate) ledger: Arc<dyn Ledger>,
    pub(crate) http: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    /// Finished reconciliation passes of the gateway's reconciler.
    pub(crate) passes: tokio::sync::watch::Receiver<u64>,
    pub(crate) done: tokio::task::JoinHandle<Result<(), handover_gateway::GatewayError>>,
    _dir: tempfile::TempDir,
}

impl Running {
    /// `POST path` with `body` as `token` (and an `Idempotency-Key` when
    /// given): the status and the JSON answer.
    pub(crate) async fn post_json(
        &self,
        token: &str,
        path: &str,
        key: Option<&str>,
        body: serde_json::Value,
    ) -> (reqwest::StatusCode, serde_json::Value) {
        let mut req = self
            .http
            .post(self.url(path))
            .bearer_auth(token)
            .json(&body);
        if let Some(key) = key {
            req = req.header("Idempotency-Key", key);
        }
        let resp = req.send().await.unwrap();
        (resp.status(), resp.json().await.unwrap())
    }

    /// `POST /v1/chat/completions` with `body` as client A: the response,
    /// headers and all.
    pub(crate) async fn chat(&self, body: &serde_json::Value) -> reqwest::Response {
        self.http
            .post(self.url("/v1/chat/completions"))
            .bearer_auth(CLIENT_A)
            .json(body)
            .send()
            .await
            .unwrap()
    }

    /// The text of `GET /metrics` (the process's recorder: every gateway
    /// of a test binary shows the same series).
    pub(crate) async fn metrics(&self) -> String {
        let resp = self.http.get(self.url("/metrics")).send().await.unwrap();
        resp.text().await.unwrap()
    }

    /// `GET /v1/operations/{key}` as client A (which must find it).
    pub(crate) async fn operation(&self, key: &str) -> serde_json::Value {
        let resp = self
            .http
            .get(self.url(&format!("/v1/operations/{key}")))
            .bearer_auth(CLIENT_A)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), reqwest::StatusCode::OK);
        resp.json().await.unwrap()
    }

    /// Starts a gateway for `config_text` on a fresh SQLite ledger file.
    pub(crate) async fn start(config_text: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let ledger = format!(
            "[ledger]\nbackend = \"sqlite\"\npath = {:?}\n",
            path.display().to_string()
        );
        Self::start_on(&ledger, config_text, dir).await
    }

    /// Starts a gateway on an in-memory ledger (for paused-time tests, where
    /// a connection pool's own timers would fire early).
    pub(crate) async fn start_in_memory(config_text: &str) -> Self {
        let ledger = "[ledger]\nbackend = \"memory\"\n";
        Self::start_on(ledger, config_text, tempfile::tempdir().unwrap()).await
    }

    /// Starts a gateway on an in-memory ledger on `clock` (a test's
    /// manual clock), with `config_text` after the `[ledger]` section.
    pub(crate) async fn start_on_clock(
        config_text: &str,
        clock: Arc<dyn handover_ledger::Clock>,
    ) -> Self {
        Self::start_on_clock_with_env(config_text, clock, |_| None).await
    }

    /// Like [`Running::start_on_clock`], with environment variables from `env`.
    pub(crate) async fn start_on_clock_with_env(
        config_text: &str,
        clock: Arc<dyn handover_ledger::Clock>,
        env: fn(&str) -> Option<String>,
    ) -> Self {
        let ledger = "[ledger]\nbackend = \"memory\"\n";
        let opts = HandoverOptions::new().env(env).clock(clock);
        let config = Config::parse(&format!("{ledger}{config_text}"), &env).expect("test config");
        Self::start_config(config, tempfile::tempdir().unwrap(), opts).await
    }

    /// Opens `[ledger]` + `config_text` the way `handover serve` does.
    async fn start_on(ledger: &str, config_text: &str, dir: tempfile::TempDir) -> Self {
        let opts = HandoverOptions::new().env(|_| None);
        Self::start_with(ledger, config_text, dir, opts).await
    }

    /// [`Running::start_on`] with environment variables from `env` (e.g. a
    /// PostgreSQL ledger's `url_env`).
    pub(crate) async fn start_with_env(
        ledger: &str,
        config_text: &str,
        dir: tempfile::TempDir,
        env: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        Self::start_with(ledger, config_text, dir, HandoverOptions::new().env(env)).await
    }

    async fn start_with(
        ledger: &str,
        config_text: &str,
        dir: tempfile::TempDir,
        opts: HandoverOptions,
    ) -> Self {
        let config =
            Config::parse(&format!("{ledger}{config_text}"), &|_| None).expect("test config");
        Self::start_config(config, dir, opts).await
    }

    async fn start_config(config: Config, dir: tempfile::TempDir, opts: HandoverOptions) -> Self {
        let handover = opts.open(&config).await.unwrap();
        let ledger = handover.ledger().clone();
        let state = GatewayState::new(handover).unwrap();
        let gw = Gateway::with_state(state, None).await.unwrap();
        let addr = gw.local_addr().unwrap();
        let passes = gw.reconcile_passes();
        let (tx, rx) = oneshot::channel::<()>();
        let done = tokio::spawn(gw.run(async move {
            let _ = rx.await;
        }));
        Self {
            base: format!("http://{addr}"),
            addr,
            ledger,
            http: reqwest::Client::new(),
            stop: Some(tx),
            passes,
            done,
            _dir: dir,
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Waits (with a deadline) until the reconciler has finished `n` more
    /// passes than it had when called: a pass that started after any change
    /// made before the call has then run.
    pub(crate) async fn passes(&mut self, n: u64) {
        let target = *self.passes.borrow_and_update() + n;
        tokio::time::timeout(
            std::time::Duration::from_secs(20),
            self.passes.wait_for(|p| *p >= target),
        )
        .await
        .expect("reconciliation passes within 20 s")
        .expect("the reconciler is running");
    }

    /// Signals graceful shutdown.
    pub(crate) fn shutdown(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }

    /// Every operation in the ledger, any scope, any state.
    pub(crate) async fn all_operations(&self) -> usize {
        self.ledger
            .list(&ListFilter::default())
            .await
            .unwrap()
            .len()
    }
}

/// The value of `series` (name and labels as rendered) on `/metrics`.
pub(crate) fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// A gateway whose one provider `p` (OpenAI-compatible, `p-model`) is a
/// wiremock server answering every chat call with `reply`, under the
/// policy `default`.
pub(crate) async fn one_provider(
    reply: wiremock::ResponseTemplate,
) -> (Running, wiremock::MockServer) {
    one_provider_of("openai_compatible", reply).await
}

/// [`one_provider`] with a provider of `kind` (one that speaks OpenAI's
/// chat API: `openai`, `openai_compatible`, `deepseek`).
pub(crate) async fn one_provider_of(
    kind: &str,
    reply: impl wiremock::Respond + 'static,
) -> (Running, wiremock::MockServer) {
    use wiremock::matchers::{method, path};
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(reply)
        .mount(&server)
        .await;
    let mut c = format!(
        "\n[providers.p]\nkind = \"{kind}\"\nbase_url = \"{}/v1\"\nmodel = \"p-model\"\n",
        server.uri()
    );
    c.push_str(&policy("default", &["p"], "first_token"));
    c.push_str(&gateway_section(1 << 20, "5s", ""));
    (Running::start(&c).await, server)
}

/// A provider entry for `base_url`.
pub(crate) fn provider(name: &str, base_url: &str) -> String {
    format!(
        r#"
[providers.{name}]
kind = "openai_compatible"
base_url = "{base_url}"
model = "{name}-model"
[providers.{name}.breaker]
failure_threshold = 100
"#
    )
}

/// A policy over `chain` with `commit_point`.
pub(crate) fn policy(name: &str, chain: &[&str], commit_point: &str) -> String {
    let chain = chain
        .iter()
        .map(|c| format!("{c:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"
[policies.{name}]
chain = [{chain}]
deadline = "20s"
commit_point = "{commit_point}"
[policies.{name}.backoff]
initial = "1ms"
max = "2ms"
"#
    )
}

/// A provider that reports each request and answers only when released.
pub(crate) async fn held_provider() -> (String, mpsc::Receiver<oneshot::Sender<()>>) {
    let (url, rx, _accepted) = held_provider_counted().await;
    (url, rx)
}

/// [`held_provider`], also counting the TCP connections it accepted (each
/// answer closes its connection, so every request needs one).
pub(crate) async fn held_provider_counted() -> (
    String,
    mpsc::Receiver<oneshot::Sender<()>>,
    Arc<AtomicUsize>,
) {
    held(false).await
}

/// [`held_provider_counted`] whose answer, when released, is a 503 (a
/// failure the router retries or falls back from).
pub(crate) async fn held_failing_provider() -> (
    String,
    mpsc::Receiver<oneshot::Sender<()>>,
    Arc<AtomicUsize>,
) {
    held(true).await
}

async fn held(
    fail: bool,
) -> (
    String,
    mpsc::Receiver<oneshot::Sender<()>>,
    Arc<AtomicUsize>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel(4);
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // Read headers and the Content-Length body.
                loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                let (release, released) = oneshot::channel();
                let _ = tx.send(release).await;
                let _ = released.await;
                let (status, body) = if fail {
                    (
                        "503 Service Unavailable",
                        r#"{"error":{"message":"overloaded","type":"server_error"}}"#.to_owned(),
                    )
                } else {
                    (
                        "200 OK",
                        bodies::answer(Flavor::OpenAi, "finished after the signal").to_string(),
                    )
                };
                let resp = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    (url, rx, accepted)
}

/// What a Python scenario script printed: one JSON object per line, each
/// naming its `scenario`.
pub(crate) struct Scenarios {
    results: std::collections::HashMap<String, serde_json::Value>,
    stdout: String,
}

impl Scenarios {
    /// The result of one scenario (panics with the whole output if absent).
    pub(crate) fn get(&self, name: &str) -> &serde_json::Value {
        self.results
            .get(name)
            .unwrap_or_else(|| panic!("no result for {name}: {}", self.stdout))
    }
}

/// Runs `script` (under the crate's `tests/python`) with the test Python
/// and `args`, within two minutes; fails the test if the script fails.
/// Returns its JSON output lines and the whole output.
async fn python_lines(
    python: &str,
    script: &str,
    args: &[&str],
) -> (Vec<serde_json::Value>, String) {
    let script = format!("{}/tests/python/{script}", env!("CARGO_MANIFEST_DIR"));
    let run = tokio::process::Command::new(python)
        .arg(&script)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), run)
        .await
        .unwrap_or_else(|_| panic!("{script} did not finish within 120 s"))
        .unwrap_or_else(|e| panic!("HANDOVER_TEST_PYTHON={python} cannot run: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the python client failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .collect();
    (lines, stdout)
}

/// Runs a script that prints one `{"scenario", ...}` line per scenario.
pub(crate) async fn python_scenarios(python: &str, script: &str, args: &[&str]) -> Scenarios {
    let (lines, stdout) = python_lines(python, script, args).await;
    let results = lines
        .into_iter()
        .map(|v| (v["scenario"].as_str().unwrap().to_owned(), v))
        .collect();
    Scenarios { results, stdout }
}

/// Results by case, then by where the client was pointed (`"direct"` at
/// the upstream, `"gateway"`).
pub(crate) type Cases =
    std::collections::BTreeMap<String, std::collections::BTreeMap<String, serde_json::Value>>;

/// Runs a script that takes `UPSTREAM_BASE GATEWAY_BASE TOKEN` and prints
/// one `{"case", "via", "result"}` line per case and base URL; returns the
/// results and the whole output.
pub(crate) async fn python_cases(
    python: &str,
    script: &str,
    upstream: &wiremock::MockServer,
    gw: &Running,
) -> (Cases, String) {
    let (up, via) = (format!("{}/v1", upstream.uri()), format!("{}/v1", gw.base));
    let (lines, stdout) = python_lines(python, script, &[&up, &via, CLIENT_A]).await;
    let mut cases = Cases::new();
    for v in lines {
        cases
            .entry(v["case"].as_str().unwrap().to_owned())
            .or_default()
            .insert(v["via"].as_str().unwrap().to_owned(), v["result"].clone());
    }
    (cases, stdout)
}

/// The variable naming the test PostgreSQL (tests run when it is set and
/// fail, never skip, when it is set and unreachable).
pub(crate) const PG_URL_VAR: &str = "HANDOVER_TEST_POSTGRES_URL";

/// A PostgreSQL schema of one test's own, dropped by [`PgSchema::drop`].
pub(crate) struct PgSchema {
    /// `HANDOVER_TEST_POSTGRES_URL` as given.
    pub(crate) base: String,
    /// The schema's name.
    pub(crate) name: String,
    /// A connection of the test's own, outside the gateway's pool.
    pub(crate) direct: sqlx::PgConnection,
}

impl PgSchema {
    /// A fresh schema named after `prefix`, or `None` (the test prints
    /// that it is skipped) when the variable is not set.
    pub(crate) async fn create(prefix: &str) -> Option<Self> {
        use sqlx::Connection as _;
        let Some(base) = std::env::var(PG_URL_VAR)
            .ok()
            .filter(|u| !u.trim().is_empty())
        else {
            println!("skipped: {PG_URL_VAR} not set");
            return None;
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let name = format!("{prefix}_{}_{nanos}", std::process::id());
        let mut direct = sqlx::PgConnection::connect(&base)
            .await
            .expect("HANDOVER_TEST_POSTGRES_URL is set but PostgreSQL is unreachable");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA \"{name}\"")))
            .execute(&mut direct)
            .await
            .unwrap();
        Some(Self { base, name, direct })
    }

    /// The base URL with this schema as the search path.
    pub(crate) fn url(&self) -> String {
        let sep = if self.base.contains('?') { '&' } else { '?' };
        format!("{}{sep}options=-c%20search_path%3D{}", self.base, self.name)
    }

    /// Drops the schema and everything in it.
    pub(crate) async fn drop(mut self) {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA \"{}\" CASCADE",
            self.name
        )))
        .execute(&mut self.direct)
        .await
        .unwrap();
    }
}
