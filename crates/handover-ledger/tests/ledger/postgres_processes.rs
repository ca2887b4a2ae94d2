//! Real OS processes on one PostgreSQL ledger. The test binary re-runs
//! itself as a child (`child_process_entry` with `HANDOVER_PG_CHILD` set):
//!
//! * 4 child processes × 16 tasks race `begin` on one key per round →
//!   exactly one `started` across all processes;
//! * a child holding a claim is killed (SIGKILL) after claim / after
//!   dispatch / after the combined claim-and-dispatch: another process sees the claim held until its lease passes,
//!   then re-claimable (pre-dispatch) or `unknown` (post-dispatch) — never a
//!   second dispatch.

use crate::postgres_support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{
    AttemptKind, AttemptOutcome, BeginOptions, BeginOutcome, Clock, Dispatch, Ledger, Limits,
    ManualClock, OperationRequest, PostgresOptions, State, StateKind, SystemClock,
};
use postgres_support as pg;
use serde_json::json;

const CHILD_VAR: &str = "HANDOVER_PG_CHILD";
const SCHEMA_VAR: &str = "HANDOVER_PG_CHILD_SCHEMA";
const PROCESSES: usize = 4;
const TASKS: usize = 16;
const ROUNDS: usize = 50;
const LEASE: Duration = Duration::from_secs(30);

fn request(key: &str) -> OperationRequest {
    OperationRequest::new(
        "procs",
        key,
        "create_shipment",
        &json!({"key": key}),
        &Limits::default(),
    )
    .expect("request")
}

// ---------------------------------------------------------------- child side

/// Not a test of its own: the entry point of a child process. Does nothing
/// unless `HANDOVER_PG_CHILD` is set.
#[test]
fn child_process_entry() {
    let Ok(mode) = std::env::var(CHILD_VAR) else {
        return;
    };
    let url = pg::require_url();
    let schema = std::env::var(SCHEMA_VAR).expect("schema");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let opts = PostgresOptions {
            max_connections: 8,
            ..PostgresOptions::default()
        };
        let ledger = Arc::new(pg::on_schema(&url, &schema, opts).await);
        let me = format!("pid-{}", std::process::id());
        match mode.as_str() {
            "race" => race_child(ledger, &me).await,
            "claim" | "dispatch" | "begin_dispatched" => {
                let req = request("K-kill");
                let opts = BeginOptions::new(&me, LEASE);
                let d = Dispatch {
                    executor: me.clone(),
                    metadata: None,
                };
                let begun = if mode == "begin_dispatched" {
                    ledger.begin_dispatched(&req, &opts, d.clone()).await
                } else {
                    ledger.begin(&req, &opts).await
                };
                let BeginOutcome::Started(claim) = begun.expect("begin") else {
                    panic!("child could not claim");
                };
                if mode == "dispatch" {
                    ledger.mark_dispatched(&claim, d).await.expect("dispatch");
                }
                println!("HELD {}", claim.epoch.0);
                // Hold the claim until killed.
                let mut line = String::new();
                let _ = std::io::stdin().read_line(&mut line);
            }
            other => panic!("unknown child mode {other}"),
        }
    });
}

async fn race_child(ledger: Arc<handover_ledger::PostgresLedger>, me: &str) {
    println!("READY");
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("stdin");
        let Some(round) = line.strip_prefix("GO ") else {
            break;
        };
        let req = Arc::new(request(&format!("K-{round}")));
        let barrier = Arc::new(tokio::sync::Barrier::new(TASKS));
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                let (ledger, req, barrier) = (ledger.clone(), req.clone(), barrier.clone());
                let opts = BeginOptions::new(format!("{me}-{i}"), Duration::from_secs(60));
                tokio::spawn(async move {
                    barrier.wait().await;
                    ledger.begin(&req, &opts).await.expect("begin")
                })
            })
            .collect();
        let (mut started, mut in_progress) = (0, 0);
        for t in tasks {
            match t.await.expect("task") {
                BeginOutcome::Started(_) => started += 1,
                BeginOutcome::InProgress { .. } => in_progress += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        println!("RESULT {round} {started} {in_progress}");
    }
}

// --------------------------------------------------------------- parent side

struct ChildProc {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl ChildProc {
    fn spawn(mode: &str, schema: &str) -> Self {
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "postgres_processes::child_process_entry",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_VAR, mode)
            .env(SCHEMA_VAR, schema)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn child");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Self {
            child,
            stdin,
            stdout,
        }
    }

    /// The rest of the next line containing `prefix` (the harness prints other lines).
    fn expect_line(&mut self, prefix: &str) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.stdout.read_line(&mut line).expect("read child");
            assert!(n > 0, "child exited before printing {prefix:?}");
            // The harness prints "test child_process_entry ... " without a
            // newline before the child's first line.
            if let Some(at) = line.find(prefix) {
                return line[at + prefix.len()..].trim().to_owned();
            }
        }
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("write child");
        self.stdin.flush().expect("flush child");
    }

    fn kill(mut self) {
        self.child.kill().expect("kill");
        self.child.wait().expect("wait");
    }
}

#[test]
fn one_started_across_four_processes() {
    if std::env::var(CHILD_VAR).is_ok() || pg::url().is_none() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (ledger, guard) = rt.block_on(pg::ledger(PostgresOptions::default()));
    let mut children: Vec<_> = (0..PROCESSES)
        .map(|_| ChildProc::spawn("race", &guard.schema))
        .collect();
    for c in &mut children {
        c.expect_line("READY");
    }
    for round in 0..ROUNDS {
        for c in &mut children {
            c.send(&format!("GO {round}"));
        }
        let mut started = 0;
        let mut answered = 0;
        for c in &mut children {
            let r = c.expect_line("RESULT ");
            let f: Vec<usize> = r.split(' ').map(|x| x.parse().expect("num")).collect();
            assert_eq!(f[0], round);
            started += f[1];
            answered += f[1] + f[2];
        }
        assert_eq!(answered, PROCESSES * TASKS, "round {round}");
        assert_eq!(
            started, 1,
            "round {round}: exactly one started across processes"
        );
        let rec = rt
            .block_on(ledger.get(request(&format!("K-{round}")).id()))
            .expect("get")
            .expect("stored");
        assert_eq!(rec.epoch.0, 1);
        assert_eq!(rec.state.kind(), StateKind::Claimed);
    }
    for mut c in children {
        c.send("EXIT");
        assert!(c.child.wait().expect("wait").success());
    }
}

/// Kills a child holding `K-kill` after `mode` ("claim" or "dispatch") and
/// returns a ledger whose clock starts now (wall time), plus its clock.
fn kill_holder(
    mode: &str,
) -> Option<(
    tokio::runtime::Runtime,
    handover_ledger::PostgresLedger,
    ManualClock,
    pg::SchemaGuard,
)> {
    if std::env::var(CHILD_VAR).is_ok() || pg::url().is_none() {
        return None;
    }
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let clock = ManualClock::new(SystemClock.now());
    let (ledger, guard) = rt.block_on(pg::ledger(PostgresOptions {
        clock: Arc::new(clock.clone()),
        ..PostgresOptions::default()
    }));
    let mut child = ChildProc::spawn(mode, &guard.schema);
    assert_eq!(child.expect_line("HELD "), "1");
    child.kill();
    Some((rt, ledger, clock, guard))
}

#[test]
fn killed_before_dispatch_is_reclaimable_after_its_lease() {
    let Some((rt, ledger, clock, _guard)) = kill_holder("claim") else {
        return;
    };
    let req = request("K-kill");
    let opts = BeginOptions::new("survivor", LEASE);
    rt.block_on(async {
        // The dead holder's lease still runs: nobody else may claim yet.
        match ledger.begin(&req, &opts).await.expect("begin") {
            BeginOutcome::InProgress { state, .. } => assert_eq!(state, StateKind::Claimed),
            other => panic!("expected in progress, got {other:?}"),
        }
        clock.advance(LEASE + Duration::from_secs(1));
        // Nothing was sent: the claim is taken over, fenced by a new epoch.
        let claim = match ledger.begin(&req, &opts).await.expect("begin") {
            BeginOutcome::Started(c) => c,
            other => panic!("expected started, got {other:?}"),
        };
        assert_eq!(claim.epoch.0, 2);
        assert_eq!(claim.attempt_number, 1, "no earlier dispatch");
        let attempts = ledger.attempts(req.id()).await.expect("attempts");
        assert!(attempts.is_empty(), "{attempts:?}");
    });
}

#[test]
fn killed_after_dispatch_becomes_unknown_never_a_second_dispatch() {
    unknown_after_killed("dispatch");
}

/// The write gate's combined step (claim and dispatch in one commit): a
/// holder killed after it — before or while sending — leaves the same
/// `unknown` as one killed after a separate `mark_dispatched`.
#[test]
fn killed_after_combined_begin_dispatch_becomes_unknown() {
    unknown_after_killed("begin_dispatched");
}

fn unknown_after_killed(mode: &str) {
    let Some((rt, ledger, clock, _guard)) = kill_holder(mode) else {
        return;
    };
    let req = request("K-kill");
    let opts = BeginOptions::new("survivor", LEASE);
    rt.block_on(async {
        match ledger.begin(&req, &opts).await.expect("begin") {
            BeginOutcome::InProgress { state, .. } => assert_eq!(state, StateKind::Dispatched),
            other => panic!("expected in progress, got {other:?}"),
        }
        clock.advance(LEASE + Duration::from_secs(1));
        // The effect may have happened: unknown, blocking, never claimable.
        for _ in 0..3 {
            match ledger.begin(&req, &opts).await.expect("begin") {
                BeginOutcome::Unresolved(info) => {
                    assert_eq!(info.reason, handover_ledger::LEASE_EXPIRED_AFTER_DISPATCH)
                }
                other => panic!("expected unresolved, got {other:?}"),
            }
        }
        let rec = ledger.get(req.id()).await.expect("get").expect("stored");
        assert!(matches!(rec.state, State::Unknown(_)), "{:?}", rec.state);
        assert_eq!(rec.dispatch_count, 1);
        assert_eq!(rec.epoch.0, 1, "no new claim was issued");
        let attempts = ledger.attempts(req.id()).await.expect("attempts");
        let dispatches: Vec<_> = attempts
            .iter()
            .filter(|a| a.kind == AttemptKind::Dispatch)
            .collect();
        assert_eq!(dispatches.len(), 1, "{attempts:?}");
        assert_eq!(dispatches[0].outcome, AttemptOutcome::Unknown);
    });
}
