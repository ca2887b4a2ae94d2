//! One write protocol, every door: the same outcome matrix (confirmed,
//! rejected, unknown after send, not sent, abandoned, re-send inside and
//! outside the idempotency window, stale epoch, expired lease) is played
//! through the Rust door (the `Protocol` step API an embedder or the MCP
//! guard uses, and `WriteGate::perform` where a scenario is made of whole
//! sends) and the HTTP door (the gateway's operations API on a real
//! socket). Every door must give the same answers and leave the same
//! ledger record and attempt log; each scenario also states the expected
//! answers, so a rule broken the same way in every door fails too.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use handover::{Config, ExecutorError, ExecutorOutcome, PerformOptions, PerformOutcome, WriteGate};
use handover_ledger::{
    Clock, Dispatch, Ledger, LedgerError, ManualClock, MemoryLedger, OperationId, Retention,
    Timestamp,
};
use handover_router::protocol::{Begun, NotStarted, Protocol, Report};
use serde_json::{Value, json};
use support::{CLIENT_A, Running};

const SCOPE: &str = "tenant-a";
const HOLDER: &str = "client:a";
const LEASE: Duration = Duration::from_secs(30);

fn actions() -> String {
    let mut c = support::provider("p", "http://127.0.0.1:9/v1");
    c.push_str(&support::policy("default", &["p"], "first_token"));
    c.push_str(
        r#"
[actions.plain]
lease = "30s"

[actions.looked_up]
lease = "30s"
[actions.looked_up.lookup]
visibility_lag = "30s"
check_every = "10s"
max_check_every = "10m"

[actions.keyed]
lease = "30s"
[actions.keyed.idempotency]
header = "Idempotency-Key"
retention = "1h"
"#,
    );
    c.push_str(&support::gateway_section(64 * 1024, "5s", ""));
    c
}

/// One step of a scenario.
#[derive(Debug, Clone)]
enum Step {
    /// Begin; remembers the claim's epoch.
    Begin,
    /// Mark dispatched with the remembered epoch.
    Dispatch,
    /// Record what the destination said, with the remembered epoch.
    Outcome(Report),
    /// Like `Outcome`, with the epoch before the remembered one.
    StaleOutcome(Report),
    /// Begin, dispatch and record in one go (what `perform` does).
    Send(Report),
    /// Let time pass.
    Advance(Duration),
}

struct Scenario {
    name: &'static str,
    action: &'static str,
    steps: Vec<Step>,
    /// What each step answers (`Advance` answers nothing).
    expect: Vec<&'static str>,
    /// The final state.
    state: &'static str,
}

fn confirmed() -> Report {
    Report::Confirmed {
        result: json!({"shipment": "S-1"}),
        evidence: None,
    }
}

fn rejected() -> Report {
    Report::Rejected {
        reason: "address invalid".into(),
        evidence: Some("422 from the destination".into()),
    }
}

fn unknown() -> Report {
    Report::Unknown {
        reason: "destination outcome unknown".into(),
        evidence: Some("connection reset after the request was written".into()),
    }
}

fn not_sent() -> Report {
    Report::NotSent {
        evidence: "connection refused".into(),
    }
}

fn scenarios() -> Vec<Scenario> {
    use Step::*;
    let past_lease = Advance(LEASE + Duration::from_secs(1));
    vec![
        Scenario {
            name: "confirmed, then replayed",
            action: "plain",
            steps: vec![Send(confirmed()), Send(confirmed())],
            expect: vec!["sent attempt=1: confirmed", "not started: replayed"],
            state: "confirmed",
        },
        Scenario {
            name: "rejected, then replayed",
            action: "plain",
            steps: vec![Send(rejected()), Send(rejected())],
            expect: vec!["sent attempt=1: rejected", "not started: replayed"],
            state: "rejected",
        },
        Scenario {
            name: "unknown after send, no contract: review, writes blocked",
            action: "plain",
            steps: vec![Send(unknown()), Send(confirmed())],
            expect: vec![
                "sent attempt=1: unknown owner=review",
                "not started: unresolved",
            ],
            state: "unknown",
        },
        Scenario {
            name: "unknown after send with a lookup: the reconciler's",
            action: "looked_up",
            steps: vec![Send(unknown()), Send(confirmed())],
            expect: vec![
                "sent attempt=1: unknown owner=reconciler",
                "not started: unresolved",
            ],
            state: "unknown",
        },
        Scenario {
            name: "not sent: claimable again, then confirmed",
            action: "plain",
            steps: vec![Send(not_sent()), Send(confirmed())],
            expect: vec!["sent attempt=1: planned", "sent attempt=1: confirmed"],
            state: "confirmed",
        },
        Scenario {
            name: "abandoned before dispatch: claimable again",
            action: "plain",
            steps: vec![Begin, Outcome(Report::Abandoned), Begin],
            expect: vec![
                "started epoch=1 attempt=1",
                "recorded: planned",
                "started epoch=2 attempt=1",
            ],
            state: "claimed",
        },
        Scenario {
            name: "re-send inside the idempotency window, same destination key",
            action: "keyed",
            steps: vec![
                Send(unknown()),
                Advance(Duration::from_secs(600)),
                Send(confirmed()),
            ],
            expect: vec![
                "sent attempt=1: unknown owner=reconciler",
                "sent attempt=2: confirmed",
            ],
            state: "confirmed",
        },
        Scenario {
            name: "no re-send after the idempotency window",
            action: "keyed",
            steps: vec![
                Send(unknown()),
                Advance(Duration::from_secs(3601)),
                Send(confirmed()),
            ],
            expect: vec![
                "sent attempt=1: unknown owner=reconciler",
                "not started: unresolved",
            ],
            state: "unknown",
        },
        Scenario {
            name: "a stale epoch can neither dispatch nor record",
            action: "plain",
            steps: vec![
                Begin,
                past_lease.clone(),
                Begin,
                StaleOutcome(confirmed()),
                Dispatch,
                Outcome(confirmed()),
            ],
            expect: vec![
                "started epoch=1 attempt=1",
                "started epoch=2 attempt=1",
                "error: stale_claim",
                "dispatched",
                "recorded: confirmed",
            ],
            state: "confirmed",
        },
        Scenario {
            name: "a lease that expired after dispatch: unknown, never re-sent",
            action: "plain",
            steps: vec![Begin, Dispatch, past_lease, Outcome(confirmed()), Begin],
            expect: vec![
                "started epoch=1 attempt=1",
                "dispatched",
                "error: lease_expired",
                "not started: unresolved",
            ],
            state: "unknown",
        },
    ]
}

/// A door onto the write protocol, as a scenario drives it.
trait Door {
    async fn begin(&mut self, action: &str, key: &str) -> String;
    async fn dispatch(&mut self, key: &str, epoch: u64) -> String;
    async fn outcome(&mut self, key: &str, epoch: u64, report: Report) -> String;
}

fn params() -> Value {
    json!({"order": "O-1", "sku": "A", "quantity": 1})
}

fn error_code(e: &LedgerError) -> &'static str {
    match e {
        LedgerError::StaleEpoch { .. } => "stale_claim",
        LedgerError::LeaseExpired { .. } => "lease_expired",
        LedgerError::IllegalTransition { .. } => "illegal_transition",
        LedgerError::NotFound { .. } => "operation_not_found",
        _ => "ledger_error",
    }
}

fn owner_of(state: &Value) -> String {
    match state["owner"].as_str() {
        Some(owner) => format!(" owner={owner}"),
        None => String::new(),
    }
}

/// The Rust door an embedder or the MCP guard uses: the protocol's steps.
struct RustDoor {
    protocol: Protocol,
}

impl Door for RustDoor {
    async fn begin(&mut self, action: &str, key: &str) -> String {
        let req = self
            .protocol
            .request(SCOPE, key, action, &params())
            .unwrap();
        match self.protocol.begin(&req, HOLDER).await.unwrap() {
            Begun::Started(s) => format!(
                "started epoch={} attempt={}",
                s.claim.epoch.0, s.claim.attempt_number
            ),
            Begun::NotStarted(n) => format!("not started: {}", not_started_name(&n)),
        }
    }

    async fn dispatch(&mut self, key: &str, epoch: u64) -> String {
        let id = OperationId::new(SCOPE, key).unwrap();
        let (claim, _) = self
            .protocol
            .presented_claim(&id, epoch, HOLDER)
            .await
            .unwrap();
        let dispatch = Dispatch {
            executor: HOLDER.into(),
            metadata: None,
        };
        match self.protocol.mark_dispatched(&claim, dispatch).await {
            Ok(_) => "dispatched".into(),
            Err(e) => format!("error: {}", error_code(e.ledger_error().unwrap())),
        }
    }

    async fn outcome(&mut self, key: &str, epoch: u64, report: Report) -> String {
        let id = OperationId::new(SCOPE, key).unwrap();
        let (claim, rec) = self
            .protocol
            .presented_claim(&id, epoch, HOLDER)
            .await
            .unwrap();
        match self.protocol.record(&claim, &rec.action, report).await {
            Ok(rec) => {
                let state = serde_json::to_value(&rec.state).unwrap();
                format!(
                    "recorded: {}{}",
                    rec.state.kind().as_str(),
                    owner_of(&state)
                )
            }
            Err(e) => format!("error: {}", error_code(e.ledger_error().unwrap())),
        }
    }
}

fn not_started_name(n: &NotStarted) -> &'static str {
    match n {
        NotStarted::Replayed(_) => "replayed",
        NotStarted::InProgress { .. } => "in_progress",
        NotStarted::Conflict { .. } => "conflict",
        NotStarted::Unresolved(_) => "unresolved",
        NotStarted::Suspended { .. } => "suspended",
        NotStarted::Cancelled { .. } => "cancelled",
    }
}

/// The HTTP door: the gateway's operations API on a real socket.
struct HttpDoor {
    gw: Running,
}

impl HttpDoor {
    async fn post(&self, path: &str, key: Option<&str>, body: Value) -> Value {
        let mut req = self.gw.http.post(self.gw.url(path)).bearer_auth(CLIENT_A);
        if let Some(key) = key {
            req = req.header("Idempotency-Key", key);
        }
        req.json(&body).send().await.unwrap().json().await.unwrap()
    }
}

impl Door for HttpDoor {
    async fn begin(&mut self, action: &str, key: &str) -> String {
        let body = json!({"action": action, "params": params()});
        let v = self.post("/v1/operations", Some(key), body).await;
        match v["status"].as_str().unwrap() {
            "started" => format!(
                "started epoch={} attempt={}",
                v["claim"]["epoch"], v["claim"]["attempt_number"]
            ),
            other => format!("not started: {other}"),
        }
    }

    async fn dispatch(&mut self, key: &str, epoch: u64) -> String {
        let path = format!("/v1/operations/{key}/dispatch");
        let v = self.post(&path, None, json!({"epoch": epoch})).await;
        match v["error"]["code"].as_str() {
            Some(code) => format!("error: {code}"),
            None => v["status"].as_str().unwrap().to_owned(),
        }
    }

    async fn outcome(&mut self, key: &str, epoch: u64, report: Report) -> String {
        let body = match report {
            Report::Confirmed { result, evidence } => {
                json!({"epoch": epoch, "outcome": "confirmed", "result": result, "evidence": evidence})
            }
            Report::Rejected { reason, evidence } => {
                json!({"epoch": epoch, "outcome": "rejected", "reason": reason, "evidence": evidence})
            }
            Report::Unknown { reason, evidence } => {
                json!({"epoch": epoch, "outcome": "unknown", "reason": reason, "evidence": evidence})
            }
            Report::NotSent { evidence } => {
                json!({"epoch": epoch, "outcome": "not_sent", "evidence": evidence})
            }
            Report::Abandoned => json!({"epoch": epoch, "outcome": "abandoned"}),
        };
        let path = format!("/v1/operations/{key}/outcome");
        let v = self.post(&path, None, body).await;
        match v["error"]["code"].as_str() {
            Some(code) => format!("error: {code}"),
            None => format!(
                "recorded: {}{}",
                v["status"].as_str().unwrap(),
                owner_of(&v["operation"]["state"])
            ),
        }
    }
}

/// Plays `scenario` through a door, expanding `Send` into its three steps.
async fn play(door: &mut impl Door, clock: &ManualClock, s: &Scenario, key: &str) -> Vec<String> {
    let mut answers = Vec::new();
    let mut epoch = 0;
    for step in &s.steps {
        match step.clone() {
            Step::Begin => {
                let a = door.begin(s.action, key).await;
                epoch = epoch_of(&a).unwrap_or(epoch);
                answers.push(a);
            }
            Step::Dispatch => answers.push(door.dispatch(key, epoch).await),
            Step::Outcome(r) => answers.push(door.outcome(key, epoch, r).await),
            Step::StaleOutcome(r) => answers.push(door.outcome(key, epoch - 1, r).await),
            Step::Advance(d) => clock.advance(d),
            Step::Send(r) => {
                let begun = door.begin(s.action, key).await;
                let Some(e) = epoch_of(&begun) else {
                    answers.push(begun);
                    continue;
                };
                epoch = e;
                let attempt = begun.rsplit("attempt=").next().unwrap().to_owned();
                assert_eq!(door.dispatch(key, epoch).await, "dispatched");
                let recorded = door.outcome(key, epoch, r).await;
                let state = recorded.strip_prefix("recorded: ").unwrap_or(&recorded);
                answers.push(format!("sent attempt={attempt}: {state}"));
            }
        }
    }
    answers
}

fn epoch_of(answer: &str) -> Option<u64> {
    let rest = answer.strip_prefix("started epoch=")?;
    rest.split(' ').next()?.parse().ok()
}

/// Plays a scenario made of whole sends through `WriteGate::perform`, the
/// executor answering as the report says.
async fn perform(gate: &WriteGate, clock: &ManualClock, s: &Scenario, key: &str) -> Vec<String> {
    let mut answers = Vec::new();
    for step in &s.steps {
        let report = match step {
            Step::Advance(d) => {
                clock.advance(*d);
                continue;
            }
            Step::Send(r) => r.clone(),
            _ => unreachable!("only whole sends"),
        };
        let req = gate.request(SCOPE, key, s.action, &params()).unwrap();
        let calls = Arc::new(AtomicU32::new(0));
        let seen = calls.clone();
        let exec = move |ctx: handover::DispatchContext| {
            seen.store(ctx.attempt, Ordering::SeqCst);
            let answer = match report.clone() {
                Report::Confirmed { result, .. } => Ok(ExecutorOutcome::Confirmed(result)),
                Report::Rejected { reason, evidence } => {
                    Ok(ExecutorOutcome::Rejected { reason, evidence })
                }
                Report::Unknown { evidence, .. } => {
                    Err(ExecutorError::maybe_sent(evidence.unwrap()))
                }
                Report::NotSent { evidence } => Err(ExecutorError::not_sent(evidence)),
                other => panic!("not a destination answer: {other:?}"),
            };
            async move { answer }
        };
        let out = gate
            .perform(&req, &exec, PerformOptions::default())
            .await
            .unwrap();
        let attempt = calls.load(Ordering::SeqCst);
        let rec = gate.ledger().get(req.id()).await.unwrap().unwrap();
        let state = serde_json::to_value(&rec.state).unwrap();
        answers.push(match out {
            _ if attempt == 0 => format!("not started: {}", out.as_str()),
            _ => format!(
                "sent attempt={attempt}: {}{}",
                rec.state.kind().as_str(),
                owner_of(&state)
            ),
        });
    }
    answers
}

/// The record and attempt log of `key`, with nothing a door may differ in
/// (attempt ids are random).
async fn recorded(ledger: &dyn Ledger, key: &str) -> Value {
    let id = OperationId::new(SCOPE, key).unwrap();
    let rec = ledger.get(&id).await.unwrap().unwrap();
    let mut attempts = serde_json::to_value(ledger.attempts(&id).await.unwrap()).unwrap();
    for a in attempts.as_array_mut().unwrap() {
        a.as_object_mut().unwrap().remove("attempt_id");
    }
    json!({"record": rec, "attempts": attempts})
}

fn start() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(Timestamp::from_millis(1_000_000)))
}

#[tokio::test]
async fn every_door_gives_the_same_answers_and_leaves_the_same_records() {
    let config = Config::parse(
        &format!("[ledger]\nbackend = \"memory\"\n{}", actions()),
        &|_| None,
    )
    .unwrap();
    for (i, s) in scenarios().iter().enumerate() {
        let key = format!("K-{i}");

        let rust_clock = start();
        let ledger: Arc<dyn Ledger> = Arc::new(MemoryLedger::new(
            rust_clock.clone(),
            Retention::default(),
            handover_ledger::Limits::default(),
        ));
        let clock: Arc<dyn Clock> = rust_clock.clone();
        let mut rust = RustDoor {
            protocol: Protocol::new(ledger.clone(), config.clone(), clock),
        };
        let rust_answers = play(&mut rust, &rust_clock, s, &key).await;
        assert_eq!(rust_answers, s.expect, "{}: Rust door", s.name);
        let rust_record = recorded(ledger.as_ref(), &key).await;
        assert_eq!(
            rust_record["record"]["state"]["state"], s.state,
            "{}",
            s.name
        );

        let http_clock = start();
        let mut http = HttpDoor {
            gw: Running::start_on_clock(&actions(), http_clock.clone()).await,
        };
        let http_answers = play(&mut http, &http_clock, s, &key).await;
        assert_eq!(http_answers, s.expect, "{}: HTTP door", s.name);
        let http_record = recorded(http.gw.ledger.as_ref(), &key).await;
        assert_eq!(http_record, rust_record, "{}: HTTP vs Rust records", s.name);
        http.gw.shutdown();

        if s.steps
            .iter()
            .all(|st| matches!(st, Step::Send(_) | Step::Advance(_)))
        {
            let perform_clock = start();
            let ledger: Arc<dyn Ledger> = Arc::new(MemoryLedger::new(
                perform_clock.clone(),
                Retention::default(),
                handover_ledger::Limits::default(),
            ));
            let clock: Arc<dyn Clock> = perform_clock.clone();
            let gate = WriteGate::new(ledger.clone(), config.clone(), clock).with_holder(HOLDER);
            let answers = perform(&gate, &perform_clock, s, &key).await;
            assert_eq!(answers, s.expect, "{}: WriteGate::perform", s.name);
            let perform_record = recorded(ledger.as_ref(), &key).await;
            assert_eq!(
                perform_record, rust_record,
                "{}: perform vs Rust records",
                s.name
            );
        }
    }
}

#[test]
fn perform_outcome_names_match_the_http_status_names() {
    // The perform door reports "not started: <name>" from PerformOutcome,
    // the others from the protocol's NotStarted / the HTTP status: the
    // names the matrix compares must be the same words.
    let info = handover_ledger::UnknownInfo {
        owner: handover_ledger::Owner::Review,
        reason: "r".into(),
        since: Timestamp::from_millis(0),
        next_check_at: None,
        diverged: false,
    };
    let n = NotStarted::Unresolved(info);
    assert_eq!(
        not_started_name(&n),
        PerformOutcome::from(n.clone()).as_str()
    );
}
