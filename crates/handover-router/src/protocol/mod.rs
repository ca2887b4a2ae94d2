//! The write protocol (DESIGN §6), once, for every door.
//!
//! A *door* is whatever lets an agent perform a business action: the Rust
//! [`WriteGate`](crate::gate::WriteGate) (the application's executor makes
//! the call), the gateway's operations API (the HTTP client makes it), the
//! MCP guard (the proxy calls the upstream tool). Each door only moves
//! requests and answers; every rule lives here:
//!
//! * **approve** — [`Protocol::approve`] records the approved parameters.
//! * **begin** — [`Protocol::begin`] derives the claim's lease and block
//!   width from the action's contract, claims the operation, and — when its
//!   outcome is unknown — hands out a claim for a **re-send with the same
//!   destination key** only while the destination still remembers that key
//!   (its idempotency window). It answers [`Begun::Started`] (the door now
//!   holds a [`Claim`]) or [`Begun::NotStarted`] (replay, conflict, in
//!   progress, unresolved, suspended, cancelled: nothing may be sent).
//! * **dispatch** — [`Protocol::mark_dispatched`], durable before the first
//!   byte leaves; if it fails, the door must not call the destination. A
//!   door that sends right after claiming (the Rust write gate) uses
//!   [`Protocol::begin_dispatched`] instead: claim and dispatch in one
//!   commit, so an action costs two commits (`docs/decisions.md`).
//! * **outcome** — [`Protocol::record`] turns what the door learned
//!   ([`Report`]) into ledger state: confirmed, rejected, unknown (with its
//!   owner and next check, see below), not sent (claim released), abandoned.
//!   Every write is fenced by the claim's epoch and lease.
//!
//! A door's whole job, e.g. the MCP guard's:
//!
//! ```text
//! match protocol.begin(&req, holder).await? {
//!     Begun::NotStarted(answer) => return answer,          // nothing sent
//!     Begun::Started(started) => {
//!         protocol.mark_dispatched(&started.claim, dispatch).await?;   // before the first byte
//!         let report = call_upstream(started.claim.destination_key).await;  // the door's call
//!         protocol.record(&started.claim, &req.action(), report).await?
//!     }
//! }
//! ```
//!
//! **Metrics**: `handover_operations_total{action,outcome}` is counted
//! here, where each door's operation ends, so every door counts the same
//! way and once: at a begin that does not start (replayed, conflict, …)
//! and at the recorded outcome of a started one (confirmed, rejected,
//! unresolved, not_sent, abandoned). A reconciler's re-send is not a door's
//! operation and is counted in `handover_reconciliations_total` instead.
//!
//! A stateless door (HTTP) keeps no claim between requests: the client
//! presents the epoch it was given and [`Protocol::presented_claim`]
//! rebuilds the claim; the ledger's fencing decides whether it still holds.
//!
//! **Owner of an unknown outcome** (one rule, `docs/decisions.md`): the
//! reconciler when the action's contract offers it a way to prove or
//! safely repeat something — a lookup, or an idempotency key (a re-send with
//! the same key inside the window; once the window has passed the
//! reconciler hands it to review) — with its first check after the lookup's
//! `check_every` (or the default interval); otherwise the review queue, with
//! no next check.

mod answer;
mod report;

use std::sync::Arc;

use handover_ledger::{
    ApproveOutcome, BeginOptions, BeginOutcome, BlockWidth, Claim, Clock, Dispatch, Epoch, Ledger,
    Limits, OperationId, OperationRecord, OperationRequest, Timestamp,
};

pub use answer::{Begun, NotStarted, Started};
pub use report::Report;

use crate::config::{ActionContract, BlockSetting, Config, defaults};
use crate::error::RouterError;

/// The write protocol over one ledger, with the action contracts of one
/// configuration. Cheap to clone; every door of a process shares one.
#[derive(Debug, Clone)]
pub struct Protocol {
    ledger: Arc<dyn Ledger>,
    config: Config,
    clock: Arc<dyn Clock>,
    limits: Limits,
}

impl Protocol {
    /// The protocol over `ledger`, with action contracts from `config` and
    /// the ledger's clock (for next-check times).
    pub fn new(ledger: Arc<dyn Ledger>, config: Config, clock: Arc<dyn Clock>) -> Self {
        let limits = Limits {
            max_params_bytes: config.ledger().max_params_bytes,
            max_depth: config.ledger().max_params_depth,
        };
        Self {
            ledger,
            config,
            clock,
            limits,
        }
    }

    /// The ledger.
    pub fn ledger(&self) -> &Arc<dyn Ledger> {
        &self.ledger
    }

    /// The clock shared with the ledger.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The configuration the contracts come from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Builds a validated operation request with the configured limits.
    pub fn request(
        &self,
        scope: &str,
        key: &str,
        action: &str,
        params: &serde_json::Value,
    ) -> Result<OperationRequest, RouterError> {
        OperationRequest::new(scope, key, action, params, &self.limits)
            .map_err(|e| RouterError::Ledger(e.into()))
    }

    /// What an action's metrics are labelled with: its name if the
    /// configuration declares it, else `undeclared`. Clients choose action
    /// names (an undeclared one gets the careful default contract): a
    /// series per name would let any client grow the gateway's memory and
    /// every scrape without bound, and `/metrics` would list every
    /// tenant's names.
    pub(crate) fn action_label<'a>(&'a self, action: &'a str) -> &'a str {
        if self.config.action(action).is_some() {
            action
        } else {
            crate::metrics::UNDECLARED_ACTION
        }
    }

    /// The contract of `action`: its configured one, or the most careful
    /// default (block only itself, no re-send, no lookup — an unknown
    /// outcome waits for an operator).
    pub fn contract(&self, action: &str) -> ActionContract {
        self.config
            .action(action)
            .cloned()
            .unwrap_or_else(|| ActionContract {
                name: action.to_owned(),
                block: BlockSetting::Operation,
                lease: self.config.ledger().lease,
                timeout: defaults::ACTION_TIMEOUT,
                idempotency: None,
                lookup: None,
                http_lookup: None,
            })
    }

    /// The claim's options. A door that runs the executor itself (the
    /// write gate's [`begin_dispatched`](Self::begin_dispatched), the
    /// reconciler's re-sends) holds the claim while the executor may take
    /// up to the action's `timeout`, and records its answer after that: its
    /// lease is `timeout + lease`, so an answer that came in time is never
    /// refused as stale (a 1 s lease and a 10 s timeout used to lose every
    /// answer after the first second). A door whose client sends (HTTP)
    /// holds it for `lease`.
    fn begin_options(contract: &ActionContract, holder: &str, runs_executor: bool) -> BeginOptions {
        let lease = if runs_executor {
            contract.lease.saturating_add(contract.timeout)
        } else {
            contract.lease
        };
        BeginOptions {
            holder: holder.to_owned(),
            lease,
            block: block_width(contract.block),
        }
    }

    /// Records what the user approved — action, key and exact parameters —
    /// durably as `planned`, before any model proposes anything. Approving
    /// the same parameters again changes nothing; other parameters are
    /// answered [`ApproveOutcome::Conflict`] and never replace the approved
    /// ones.
    pub async fn approve(&self, req: &OperationRequest) -> Result<ApproveOutcome, RouterError> {
        let outcome = self.ledger.approve(req).await?;
        tracing::debug!(
            scope = %req.id().scope, key = %req.id().key, action = %req.action(),
            ?outcome, "approval recorded"
        );
        Ok(outcome)
    }

    /// Claims the operation for `holder` if it may be sent now (see the
    /// module docs). Errors mean the ledger could not be used: nothing may
    /// be sent.
    pub async fn begin(&self, req: &OperationRequest, holder: &str) -> Result<Begun, RouterError> {
        self.begin_with(req, holder, None).await
    }

    /// [`begin`](Self::begin) for a door that sends right after claiming:
    /// a [`Begun::Started`] claim is already marked dispatched (durable
    /// before the first byte), in the **same commit** as the claim — so an
    /// action costs two commits (this one and its outcome) instead of three.
    /// If the door dies between this commit and the send, the operation is
    /// `unknown` once the lease passes (as after a crash right after
    /// [`mark_dispatched`](Self::mark_dispatched)); a lookup proves it not
    /// applied once its visibility lag has passed. A re-send claim (an
    /// unknown outcome inside the idempotency window) is marked dispatched
    /// in a second commit. Errors mean nothing may be sent.
    pub async fn begin_dispatched(
        &self,
        req: &OperationRequest,
        holder: &str,
        dispatch: Dispatch,
    ) -> Result<Begun, RouterError> {
        self.begin_with(req, holder, Some(dispatch)).await
    }

    async fn begin_with(
        &self,
        req: &OperationRequest,
        holder: &str,
        dispatch: Option<Dispatch>,
    ) -> Result<Begun, RouterError> {
        let contract = self.contract(req.action().as_str());
        let runs_executor = dispatch.is_some();
        let opts = Self::begin_options(&contract, holder, runs_executor);
        let begun = match &dispatch {
            None => self.ledger.begin(req, &opts).await?,
            Some(d) => self.ledger.begin_dispatched(req, &opts, d.clone()).await?,
        };
        let not_started = match begun {
            BeginOutcome::Started(claim) => {
                return Ok(Begun::Started(Box::new(Started {
                    claim,
                    resend: false,
                    contract,
                })));
            }
            BeginOutcome::Unresolved(info) => {
                match self
                    .resend_claim(req.id(), &contract, holder, runs_executor)
                    .await?
                {
                    Some(claim) => {
                        if let Some(d) = dispatch {
                            self.mark_dispatched(&claim, d).await?;
                        }
                        return Ok(Begun::Started(Box::new(Started {
                            claim,
                            resend: true,
                            contract,
                        })));
                    }
                    None => NotStarted::Unresolved(info),
                }
            }
            BeginOutcome::InProgress {
                holder,
                state,
                lease_until,
            } => NotStarted::InProgress {
                holder,
                state,
                lease_until,
            },
            BeginOutcome::Conflict {
                recorded,
                requested,
            } => NotStarted::Conflict {
                recorded,
                requested,
            },
            BeginOutcome::Replayed(t) => NotStarted::Replayed(t),
            BeginOutcome::Suspended { blocked_by, info } => {
                NotStarted::Suspended { blocked_by, info }
            }
            BeginOutcome::Cancelled { reason } => NotStarted::Cancelled { reason },
        };
        crate::metrics::operation(
            self.action_label(req.action().as_str()),
            not_started.as_str(),
        );
        Ok(Begun::NotStarted(not_started))
    }

    /// Re-claims an unknown operation for a re-send with the same
    /// destination key, if its contract has an idempotency key and the
    /// destination still remembers it. `None` (nothing changed) otherwise.
    /// `runs_executor`: the caller runs the executor under the action's
    /// timeout (see `begin_options`).
    pub(crate) async fn resend_claim(
        &self,
        id: &OperationId,
        contract: &ActionContract,
        holder: &str,
        runs_executor: bool,
    ) -> Result<Option<Claim>, RouterError> {
        let Some(idem) = &contract.idempotency else {
            return Ok(None);
        };
        let opts = Self::begin_options(contract, holder, runs_executor);
        Ok(self
            .ledger
            .claim_for_resend(id, &opts, idem.retention)
            .await?)
    }

    /// Records, durably, that the request is about to be sent. Call it
    /// before the first byte; if it fails, do not send. Returns the
    /// dispatch attempt's id.
    pub async fn mark_dispatched(
        &self,
        claim: &Claim,
        dispatch: Dispatch,
    ) -> Result<uuid::Uuid, RouterError> {
        Ok(self.ledger.mark_dispatched(claim, dispatch).await?)
    }

    /// For a door that keeps no claim between requests: the claim `holder`
    /// presents by its `epoch`, rebuilt from the record, and the record
    /// itself. Whether it still holds is decided by the ledger's fencing
    /// when it is used (a stale epoch or a passed lease is refused there).
    pub async fn presented_claim(
        &self,
        id: &OperationId,
        epoch: u64,
        holder: &str,
    ) -> Result<(Claim, OperationRecord), RouterError> {
        let rec = self
            .ledger
            .get(id)
            .await?
            .ok_or_else(|| handover_ledger::LedgerError::NotFound { id: id.clone() })?;
        let claim = Claim {
            id: id.clone(),
            fingerprint: rec.fingerprint,
            epoch: Epoch(epoch),
            holder: holder.to_owned(),
            lease_until: Timestamp(0),
            destination_key: rec.destination_key.clone(),
            attempt_number: rec.dispatch_count + 1,
            // A claim on an operation sent before is a re-send's (same
            // destination key), which no sibling blocks.
            block: if rec.dispatch_count > 0 {
                BlockWidth::Operation
            } else {
                block_width(self.contract(rec.action.as_str()).block)
            },
        };
        Ok((claim, rec))
    }

    pub(crate) fn now_plus(&self, d: std::time::Duration) -> Timestamp {
        self.clock.now().plus(d)
    }
}

/// The ledger's block width for an action's `block` setting.
fn block_width(setting: BlockSetting) -> BlockWidth {
    match setting {
        BlockSetting::Operation => BlockWidth::Operation,
        BlockSetting::Scope => BlockWidth::Scope,
        BlockSetting::Action => BlockWidth::Action,
    }
}
