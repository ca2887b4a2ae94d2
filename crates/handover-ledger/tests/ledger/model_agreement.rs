//! Property test: random sequences of ledger calls against a small,
//! independently written reference model of the state machine (DESIGN §4).
//! Every answer must agree, on the memory and the SQLite backend.

use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{
    ApproveOutcome, BeginOptions, BeginOutcome, Claim, Dispatch, Ledger, LedgerError, Limits,
    ManualClock, MemoryLedger, OperationId, OperationRequest, Owner, ReleaseReason, Resolution,
    ResolvedAs, Retention, SqliteLedger, SqliteOptions, StateKind, Terminal, Timestamp,
    UnknownReport,
};
use proptest::prelude::*;
use serde_json::json;

const T0: i64 = 1_700_000_000_000;

use crate::reference_model;

use reference_model::{Ans, LEASE_MS, Model, Op, WINDOW_MS, err_kind, op};

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
        Op::Approve { key, variant } => {
            match ledger
                .approve(&request(key, variant))
                .await
                .expect("approve")
            {
                ApproveOutcome::Planned => Ans::Planned,
                ApproveOutcome::AlreadyApproved { state } => Ans::Approved(state),
                ApproveOutcome::Conflict { .. } => Ans::Conflict,
                ApproveOutcome::Replayed(Terminal::Confirmed { .. }) => {
                    Ans::Replayed(StateKind::Confirmed)
                }
                ApproveOutcome::Replayed(Terminal::Rejected { .. }) => {
                    Ans::Replayed(StateKind::Rejected)
                }
                ApproveOutcome::Replayed(Terminal::Tombstone { state, .. }) => Ans::Replayed(state),
                ApproveOutcome::Cancelled { .. } => Ans::Cancelled,
            }
        }
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
        Op::Approve { key, variant } => model.approve(key, variant),
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
    let mut model = Model::starting_at(T0);
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
