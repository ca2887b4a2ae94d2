//! An independent reference model of the operation state machine
//! (DESIGN §4), written without looking at `handover_ledger::machine`, and
//! the operations and answers the property test compares.

use std::collections::HashMap;

use handover_ledger::{LedgerError, StateKind};
use proptest::prelude::*;

pub(crate) const LEASE_MS: i64 = 30_000;
pub(crate) const WINDOW_MS: i64 = 60_000;

#[derive(Clone, Debug)]
pub(crate) enum Op {
    Approve { key: u8, variant: u8 },
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

pub(crate) fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..3;
    prop_oneof![
        1 => (key.clone(), 0u8..2).prop_map(|(key, variant)| Op::Approve { key, variant }),
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
pub(crate) enum Ans {
    Planned,
    Approved(StateKind),
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

pub(crate) fn err_kind(e: &LedgerError) -> &'static str {
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
pub(crate) enum Ms {
    Planned,
    Claimed { lease: i64 },
    Dispatched { lease: i64 },
    Confirmed,
    Rejected,
    Unknown { lapsed: bool },
    Cancelled,
}

#[derive(Clone, Debug)]
pub(crate) struct Mop {
    variant: u8,
    st: Ms,
    epoch: u64,
    dc: u32,
    first: Option<i64>,
}

#[derive(Default)]
pub(crate) struct Model {
    pub(crate) now: i64,
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
    pub(crate) fn starting_at(now: i64) -> Self {
        Self {
            now,
            ops: HashMap::new(),
        }
    }

    /// Lease expiry: a dispatched op, or a re-send claim, lapses into unknown.
    pub(crate) fn normalise(&mut self) {
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

    /// Records the approval of a new key as planned; otherwise only answers.
    pub(crate) fn approve(&mut self, key: u8, variant: u8) -> Ans {
        let Some(m) = self.ops.get(&key) else {
            let planned = Mop {
                variant,
                st: Ms::Planned,
                epoch: 0,
                dc: 0,
                first: None,
            };
            self.ops.insert(key, planned);
            return Ans::Planned;
        };
        if m.variant != variant {
            return Ans::Conflict;
        }
        match m.st {
            Ms::Confirmed => Ans::Replayed(StateKind::Confirmed),
            Ms::Rejected => Ans::Replayed(StateKind::Rejected),
            Ms::Cancelled => Ans::Cancelled,
            st => Ans::Approved(kind(st)),
        }
    }

    pub(crate) fn begin(&mut self, key: u8, variant: u8) -> Ans {
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

    pub(crate) fn holder_op(&mut self, op: &Op, key: u8, epoch: u64, variant: u8) -> Ans {
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

    pub(crate) fn cancel(&mut self, key: u8) -> Ans {
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

    pub(crate) fn resolve(&mut self, key: u8, confirm: bool) -> Ans {
        let Some(m) = self.ops.get_mut(&key) else {
            return Ans::Err("not_found");
        };
        if !matches!(m.st, Ms::Unknown { .. }) {
            return Ans::Err("illegal");
        }
        m.st = if confirm { Ms::Confirmed } else { Ms::Rejected };
        Ans::Ok(kind(m.st))
    }

    pub(crate) fn resend(&mut self, key: u8) -> Ans {
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

    pub(crate) fn get(&self, key: u8) -> Ans {
        Ans::Record(self.ops.get(&key).map(|m| (kind(m.st), m.epoch, m.dc)))
    }
}
