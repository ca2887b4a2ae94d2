//! Property test: random sequences of ledger calls against a small,
//! independently written reference model of the state machine (DESIGN §4).
//! Every answer must agree, on the memory and the SQLite backend.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{
    BeginOptions, BeginOutcome, Claim, Dispatch, Ledger, LedgerError, Limits, ManualClock,
    MemoryLedger, OperationId, OperationRequest, Owner, ReleaseReason, Resolution, ResolvedAs,
    Retention, SqliteLedger, SqliteOptions, StateKind, Terminal, Timestamp, UnknownReport,
};
use proptest::prelude::*;
use serde_json::json;

const LEASE_MS: i64 = 30_000;
const WINDOW_MS: i64 = 60_000;
const T0: i64 = 1_700_000_000_000;

#[derive(Clone, Debug)]
enum Op {
    Begin { key: u8, variant: u8 },
    Dispatch { claim: usize, tamper: bool },
    Confirm { claim: usize, tamper: bool },
    Reject { claim: usize, tamper: bool },
    MarkUnknown { claim: usize, tamper: bool },
    NotSent { claim: usize },
    Abandon { claim: usize },
    Renew { claim: usize },
    Cancel { key: u8 },
    Resolve { key: u8, confirm: bool },
    Resend { key: u8 },
    Get { key: u8 },
    Advance { secs: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..3;
    prop_oneof![
        4 => (key.clone(), 0u8..2).prop_map(|(key, variant)| Op::Begin { key, variant }),
        3 => (any::<usize>(), prop::bool::weighted(0.1)).prop_map(|(claim, tamper)| Op::Dispatch { claim, tamper }),
        2 => (any::<usize>(), prop::bool::weighted(0.1)).prop_map(|(claim, tamper)| Op::Confirm { claim, tamper }),
        1 => (any::<usize>(), prop::bool::weighted(0.1)).prop_map(|(claim, tamper)| Op::Reject { claim, tamper }),
        2 => (any::<usize>(), prop::bool::weighted(0.1)).prop_map(|(claim, tamper)| Op::MarkUnknown { claim, tamper }),
        1 => any::<usize>().prop_map(|claim| Op::NotSent { claim }),
        1 => any::<usize>().prop_map(|claim| Op::Abandon { claim }),
        1 => any::<usize>().prop_map(|claim| Op::Renew { claim }),
        1 => key.clone().prop_map(|key| Op::Cancel { key }),
        2 => (key.clone(), any::<bool>()).prop_map(|(key, confirm)| Op::Resolve { key, confirm }),
        2 => key.clone().prop_map(|key| Op::Resend { key }),
        2 => key.clone().prop_map(|key| Op::Get { key }),
        3 => (0u8..=20).prop_map(|secs| Op::Advance { secs }),
    ]
}

/// A backend-independent summary of an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ans {
    Started(u64),
    InProgress(StateKind),
    Conflict,
    Replayed(StateKind),
    Unresolved,
    Cancelled,
    Ok(StateKind),
    Resent(Option<u64>),
    Record(Option<(StateKind, u64, u32)>),
    Err(&'static str),
    Skip,
}

fn err_kind(e: &LedgerError) -> &'static str {
    match e {
        LedgerError::NotFound { .. } => "not_found",
        LedgerError::ParamsMismatch { .. } => "mismatch",
        LedgerError::StaleEpoch { .. } => "stale",
        LedgerError::LeaseExpired { .. } => "expired",
        LedgerError::IllegalTransition { .. } => "illegal",
        other => panic!("unexpected error kind: {other}"),
    }
}

// ---------------------------------------------------------------- the model

#[derive(Clone, Copy, Debug, PartialEq)]
enum Ms {
    Planned,
    Claimed { lease: i64 },
    Dispatched { lease: i64 },
    Confirmed,
    Rejected,
    Unknown { lapsed: bool },
    Cancelled,
}

#[derive(Clone, Debug)]
struct Mop {
    variant: u8,
    st: Ms,
    epoch: u64,
    dc: u32,
    first: Option<i64>,
}

#[derive(Default)]
struct Model {
    now: i64,
    ops: HashMap<u8, Mop>,
}

fn kind(st: Ms) -> StateKind {
    match st {
        Ms::Planned => StateKind::Planned,
        Ms::Claimed { .. } => StateKind::Claimed,
        Ms::Dispatched { .. } => StateKind::Dispatched,
        Ms::Confirmed => StateKind::Confirmed,
        Ms::Rejected => StateKind::Rejected,
        Ms::Unknown { .. } => StateKind::Unknown,
        Ms::Cancelled => StateKind::Cancelled,
    }
}

impl Model {
    /// Lease expiry: a dispatched op, or a re-send claim, lapses into unknown.
    fn normalise(&mut self) {
        for m in self.ops.values_mut() {
            match m.st {
                Ms::Dispatched { lease } if lease <= self.now => {
                    m.st = Ms::Unknown { lapsed: true }
                }
                Ms::Claimed { lease } if lease <= self.now && m.dc > 0 => {
                    m.st = Ms::Unknown { lapsed: true }
                }
                _ => {}
            }
        }
    }

    fn begin(&mut self, key: u8, variant: u8) -> Ans {
        let now = self.now;
        let Some(m) = self.ops.get_mut(&key) else {
            self.ops.insert(
                key,
                Mop {
                    variant,
                    st: Ms::Claimed {
                        lease: now + LEASE_MS,
                    },
                    epoch: 1,
                    dc: 0,
                    first: None,
                },
            );
            return Ans::Started(1);
        };
        if m.variant != variant {
            return Ans::Conflict;
        }
        match m.st {
            Ms::Claimed { lease } if lease > now => Ans::InProgress(StateKind::Claimed),
            Ms::Planned | Ms::Claimed { .. } => {
                m.epoch += 1;
                m.st = Ms::Claimed {
                    lease: now + LEASE_MS,
                };
                Ans::Started(m.epoch)
            }
            Ms::Dispatched { .. } => Ans::InProgress(StateKind::Dispatched),
            Ms::Confirmed => Ans::Replayed(StateKind::Confirmed),
            Ms::Rejected => Ans::Replayed(StateKind::Rejected),
            Ms::Unknown { .. } => Ans::Unresolved,
            Ms::Cancelled => Ans::Cancelled,
        }
    }

    /// Fencing; returns the op on success.
    fn fence(&mut self, key: u8, epoch: u64, variant: u8) -> Result<&mut Mop, &'static str> {
        let now = self.now;
        let m = self.ops.get_mut(&key).ok_or("not_found")?;
        if m.variant != variant {
            return Err("mismatch");
        }
        if m.epoch != epoch {
            return Err("stale");
        }
        match m.st {
            Ms::Claimed { lease } if lease <= now => Err("expired"),
            Ms::Claimed { .. } | Ms::Dispatched { .. } => Ok(m),
            Ms::Unknown { lapsed: true } => Err("expired"),
            _ => Err("illegal"),
        }
    }

    fn holder_op(&mut self, op: &Op, key: u8, epoch: u64, variant: u8) -> Ans {
        let now = self.now;
        let m = match self.fence(key, epoch, variant) {
            Ok(m) => m,
            Err(e) => return Ans::Err(e),
        };
        let back = |m: &mut Mop| {
            m.st = if m.dc == 0 {
                Ms::Planned
            } else {
                Ms::Unknown { lapsed: false }
            };
        };
        match (op, m.st) {
            (Op::Dispatch { .. }, Ms::Claimed { lease }) => {
                m.st = Ms::Dispatched { lease };
                m.dc += 1;
                m.first.get_or_insert(now);
            }
            (Op::Confirm { .. }, Ms::Dispatched { .. }) => m.st = Ms::Confirmed,
            (Op::Reject { .. }, Ms::Dispatched { .. }) => m.st = Ms::Rejected,
            (Op::MarkUnknown { .. }, Ms::Dispatched { .. }) => m.st = Ms::Unknown { lapsed: false },
            (Op::NotSent { .. }, Ms::Claimed { .. }) | (Op::Abandon { .. }, Ms::Claimed { .. }) => {
                back(m)
            }
            (Op::NotSent { .. }, Ms::Dispatched { .. }) => {
                m.dc -= 1;
                if m.dc == 0 {
                    m.first = None;
                }
                back(m);
            }
            (Op::Renew { .. }, Ms::Claimed { .. }) => {
                m.st = Ms::Claimed {
                    lease: now + LEASE_MS,
                }
            }
            (Op::Renew { .. }, Ms::Dispatched { .. }) => {
                m.st = Ms::Dispatched {
                    lease: now + LEASE_MS,
                }
            }
            _ => return Ans::Err("illegal"),
        }
        Ans::Ok(kind(m.st))
    }

    fn cancel(&mut self, key: u8) -> Ans {
        let Some(m) = self.ops.get_mut(&key) else {
            return Ans::Err("not_found");
        };
        match m.st {
            Ms::Planned => {}
            Ms::Claimed { .. } if m.dc == 0 => {}
            _ => return Ans::Err("illegal"),
        }
        m.st = Ms::Cancelled;
        Ans::Ok(StateKind::Cancelled)
    }

    fn resolve(&mut self, key: u8, confirm: bool) -> Ans {
        let Some(m) = self.ops.get_mut(&key) else {
            return Ans::Err("not_found");
        };
        if !matches!(m.st, Ms::Unknown { .. }) {
            return Ans::Err("illegal");
        }
        m.st = if confirm { Ms::Confirmed } else { Ms::Rejected };
        Ans::Ok(kind(m.st))
    }

    fn resend(&mut self, key: u8) -> Ans {
        let now = self.now;
        let Some(m) = self.ops.get_mut(&key) else {
            return Ans::Err("not_found");
        };
        if !matches!(m.st, Ms::Unknown { .. }) {
            return Ans::Err("illegal");
        }
        if m.first.is_some_and(|f| f + WINDOW_MS > now) {
            m.epoch += 1;
            m.st = Ms::Claimed {
                lease: now + LEASE_MS,
            };
            Ans::Resent(Some(m.epoch))
        } else {
            Ans::Resent(None)
        }
    }

    fn get(&self, key: u8) -> Ans {
        Ans::Record(self.ops.get(&key).map(|m| (kind(m.st), m.epoch, m.dc)))
    }
}

// ------------------------------------------------------------- the runner

fn request(key: u8, variant: u8) -> OperationRequest {
    OperationRequest::new(
        "prop",
        &format!("K-{key}"),
        "act",
        &json!({"v": variant}),
        &Limits::default(),
    )
    .expect("request")
}

fn key_of(id: &OperationId) -> u8 {
    id.key.as_str()[2..].parse().expect("key")
}

async fn real(
    ledger: &dyn Ledger,
    clock: &ManualClock,
    claims: &mut Vec<(Claim, u8)>,
    op: &Op,
) -> Ans {
    let opts = BeginOptions::new("h", Duration::from_millis(LEASE_MS as u64));
    let pick = |claims: &Vec<(Claim, u8)>, i: usize, tamper: bool| {
        if claims.is_empty() {
            return None;
        }
        let (mut c, variant) = claims[i % claims.len()].clone();
        if tamper {
            c.fingerprint = request(key_of(&c.id), 1 - variant).fingerprint();
        }
        Some(c)
    };
    let rec = |r: Result<handover_ledger::OperationRecord, LedgerError>| match r {
        Ok(r) => Ans::Ok(r.state.kind()),
        Err(e) => Ans::Err(err_kind(&e)),
    };
    match *op {
        Op::Begin { key, variant } => {
            match ledger
                .begin(&request(key, variant), &opts)
                .await
                .expect("begin")
            {
                BeginOutcome::Started(c) => {
                    let epoch = c.epoch.0;
                    claims.push((c, variant));
                    Ans::Started(epoch)
                }
                BeginOutcome::InProgress { state, .. } => Ans::InProgress(state),
                BeginOutcome::Conflict { .. } => Ans::Conflict,
                BeginOutcome::Replayed(Terminal::Confirmed { .. }) => {
                    Ans::Replayed(StateKind::Confirmed)
                }
                BeginOutcome::Replayed(Terminal::Rejected { .. }) => {
                    Ans::Replayed(StateKind::Rejected)
                }
                BeginOutcome::Replayed(Terminal::Tombstone { state, .. }) => Ans::Replayed(state),
                BeginOutcome::Unresolved(_) => Ans::Unresolved,
                BeginOutcome::Cancelled { .. } => Ans::Cancelled,
                other => panic!("unexpected {other:?}"),
            }
        }
        Op::Dispatch { claim, tamper } => match pick(claims, claim, tamper) {
            None => Ans::Skip,
            Some(c) => match ledger
                .mark_dispatched(
                    &c,
                    Dispatch {
                        executor: "h".into(),
                        metadata: None,
                    },
                )
                .await
            {
                Ok(_) => Ans::Ok(StateKind::Dispatched),
                Err(e) => Ans::Err(err_kind(&e)),
            },
        },
        Op::Confirm { claim, tamper } => match pick(claims, claim, tamper) {
            None => Ans::Skip,
            Some(c) => rec(ledger.confirm(&c, json!({"ok": 1}), None).await),
        },
        Op::Reject { claim, tamper } => match pick(claims, claim, tamper) {
            None => Ans::Skip,
            Some(c) => rec(ledger.reject(&c, "no".into(), None).await),
        },
        Op::MarkUnknown { claim, tamper } => match pick(claims, claim, tamper) {
            None => Ans::Skip,
            Some(c) => rec(ledger
                .mark_unknown(
                    &c,
                    UnknownReport {
                        reason: "timeout".into(),
                        evidence: None,
                        owner: Owner::Reconciler,
                        next_check_at: None,
                    },
                )
                .await),
        },
        Op::NotSent { claim } => match pick(claims, claim, false) {
            None => Ans::Skip,
            Some(c) => rec(ledger
                .release(
                    &c,
                    ReleaseReason::NotSent {
                        evidence: "refused".into(),
                    },
                )
                .await),
        },
        Op::Abandon { claim } => match pick(claims, claim, false) {
            None => Ans::Skip,
            Some(c) => rec(ledger.release(&c, ReleaseReason::Abandoned).await),
        },
        Op::Renew { claim } => match pick(claims, claim, false) {
            None => Ans::Skip,
            Some(c) => match ledger
                .renew(&c, Duration::from_millis(LEASE_MS as u64))
                .await
            {
                Ok(_) => {
                    let rec = ledger.get(&c.id).await.expect("get").expect("record");
                    Ans::Ok(rec.state.kind())
                }
                Err(e) => Ans::Err(err_kind(&e)),
            },
        },
        Op::Cancel { key } => rec(ledger
            .cancel(request(key, 0).id(), "withdrawn".into())
            .await),
        Op::Resolve { key, confirm } => {
            let outcome = if confirm {
                ResolvedAs::Confirmed { result: json!(1) }
            } else {
                ResolvedAs::Rejected {
                    reason: "absent".into(),
                }
            };
            rec(ledger
                .resolve(
                    request(key, 0).id(),
                    Resolution {
                        outcome,
                        evidence: "looked".into(),
                        actor: "op".into(),
                    },
                )
                .await)
        }
        Op::Resend { key } => {
            let window = Duration::from_millis(WINDOW_MS as u64);
            match ledger
                .claim_for_resend(request(key, 0).id(), &opts, window)
                .await
            {
                Ok(Some(c)) => {
                    let epoch = c.epoch.0;
                    let variant = ledger
                        .get(&c.id)
                        .await
                        .expect("get")
                        .expect("rec")
                        .params
                        .expect("params")["v"]
                        .as_u64()
                        .expect("v") as u8;
                    claims.push((c, variant));
                    Ans::Resent(Some(epoch))
                }
                Ok(None) => Ans::Resent(None),
                Err(e) => Ans::Err(err_kind(&e)),
            }
        }
        Op::Get { key } => Ans::Record(
            ledger
                .get(request(key, 0).id())
                .await
                .expect("get")
                .map(|r| (r.state.kind(), r.epoch.0, r.dispatch_count)),
        ),
        Op::Advance { secs } => {
            clock.advance(Duration::from_secs(u64::from(secs)));
            Ans::Skip
        }
    }
}

fn expected(model: &mut Model, claims: &[(Claim, u8)], op: &Op) -> Ans {
    model.normalise();
    let pick = |i: usize, tamper: bool| {
        if claims.is_empty() {
            return None;
        }
        let (c, variant) = &claims[i % claims.len()];
        Some((
            key_of(&c.id),
            c.epoch.0,
            if tamper { 1 - variant } else { *variant },
        ))
    };
    match *op {
        Op::Begin { key, variant } => model.begin(key, variant),
        Op::Dispatch { claim, tamper }
        | Op::Confirm { claim, tamper }
        | Op::Reject { claim, tamper }
        | Op::MarkUnknown { claim, tamper } => match pick(claim, tamper) {
            None => Ans::Skip,
            Some((k, e, v)) => model.holder_op(op, k, e, v),
        },
        Op::NotSent { claim } | Op::Abandon { claim } | Op::Renew { claim } => {
            match pick(claim, false) {
                None => Ans::Skip,
                Some((k, e, v)) => model.holder_op(op, k, e, v),
            }
        }
        Op::Cancel { key } => model.cancel(key),
        Op::Resolve { key, confirm } => model.resolve(key, confirm),
        Op::Resend { key } => model.resend(key),
        Op::Get { key } => model.get(key),
        Op::Advance { secs } => {
            model.now += i64::from(secs) * 1000;
            Ans::Skip
        }
    }
}

async fn check(ledger: Arc<dyn Ledger>, clock: ManualClock, ops: &[Op]) {
    let mut model = Model {
        now: T0,
        ..Model::default()
    };
    let mut claims = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        // The model answers from the claims held *before* the call.
        let want = expected(&mut model, &claims, op);
        let got = real(&*ledger, &clock, &mut claims, op).await;
        assert_eq!(got, want, "step {i}: {op:?}\nops: {ops:#?}");
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn memory_agrees_with_the_model(ops in prop::collection::vec(op(), 1..60)) {
        let clock = ManualClock::new(Timestamp::from_millis(T0));
        let ledger: Arc<dyn Ledger> = Arc::new(MemoryLedger::new(Arc::new(clock.clone()), Retention::default(), Limits::default()));
        runtime().block_on(check(ledger, clock, &ops));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]
    #[test]
    fn sqlite_agrees_with_the_model(ops in prop::collection::vec(op(), 1..60)) {
        let clock = ManualClock::new(Timestamp::from_millis(T0));
        let dir = tempfile::tempdir().expect("dir");
        runtime().block_on(async {
            let ledger = SqliteLedger::open(dir.path().join("p.db"), SqliteOptions {
                clock: Arc::new(clock.clone()),
                ..SqliteOptions::default()
            }).await.expect("open");
            check(Arc::new(ledger), clock, &ops).await;
        });
    }
}
