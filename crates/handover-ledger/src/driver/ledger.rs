//! The [`Ledger`] methods, written once for every [`Backend`]: each turns
//! its arguments into a typed [`Job`](super::Job) and runs it.

use std::time::Duration;

use async_trait::async_trait;

use super::Backend;
use super::jobs::{Begin, MarkDispatched, OnRecord, Purge, TakeDueUnknown};
use crate::error::LedgerError;
use crate::identity::{OperationId, OperationRequest};
use crate::ledger::{
    ApproveOutcome, BeginOptions, BeginOutcome, Dispatch, DueFilter, Ledger, ListFilter,
    NewAttempt, ReleaseReason, Resolution, UnknownReport, UnknownUpdate,
};
use crate::machine;
use crate::model::{AttemptRecord, Claim, OperationRecord};
use crate::retention::PurgeReport;

#[async_trait]
impl<B: Backend> Ledger for B {
    async fn approve(&self, req: &OperationRequest) -> Result<ApproveOutcome, LedgerError> {
        let r = req.clone();
        self.run(OnRecord::unlocked(req.id(), move |cur, ctx| {
            machine::approve(cur, &r, ctx)
        }))
        .await
    }

    async fn begin(
        &self,
        req: &OperationRequest,
        opts: &BeginOptions,
    ) -> Result<BeginOutcome, LedgerError> {
        let (req, opts) = (req.clone(), opts.clone());
        self.run(Begin {
            req,
            opts,
            dispatch: None,
        })
        .await
    }

    async fn begin_dispatched(
        &self,
        req: &OperationRequest,
        opts: &BeginOptions,
        dispatch: Dispatch,
    ) -> Result<BeginOutcome, LedgerError> {
        let (req, opts) = (req.clone(), opts.clone());
        self.run(Begin {
            req,
            opts,
            dispatch: Some(dispatch),
        })
        .await
    }

    async fn renew(&self, claim: &Claim, lease: Duration) -> Result<Claim, LedgerError> {
        let c = claim.clone();
        self.run(OnRecord::holder(&claim.id, move |cur, ctx| {
            machine::renew(cur, &c, lease, ctx)
        }))
        .await
    }

    async fn mark_dispatched(
        &self,
        claim: &Claim,
        dispatch: Dispatch,
    ) -> Result<uuid::Uuid, LedgerError> {
        self.run(MarkDispatched {
            claim: claim.clone(),
            dispatch,
        })
        .await
    }

    async fn confirm(
        &self,
        claim: &Claim,
        result: serde_json::Value,
        evidence: Option<String>,
    ) -> Result<OperationRecord, LedgerError> {
        let c = claim.clone();
        self.run(OnRecord::holder(&claim.id, move |cur, ctx| {
            machine::confirm(cur, &c, &result, evidence.as_deref(), ctx)
        }))
        .await
    }

    async fn reject(
        &self,
        claim: &Claim,
        reason: String,
        evidence: Option<String>,
    ) -> Result<OperationRecord, LedgerError> {
        let c = claim.clone();
        self.run(OnRecord::holder(&claim.id, move |cur, ctx| {
            machine::reject(cur, &c, &reason, evidence.as_deref(), ctx)
        }))
        .await
    }

    async fn mark_unknown(
        &self,
        claim: &Claim,
        report: UnknownReport,
    ) -> Result<OperationRecord, LedgerError> {
        let c = claim.clone();
        self.run(OnRecord::holder(&claim.id, move |cur, ctx| {
            machine::mark_unknown(cur, &c, &report, ctx)
        }))
        .await
    }

    async fn release(
        &self,
        claim: &Claim,
        why: ReleaseReason,
    ) -> Result<OperationRecord, LedgerError> {
        let c = claim.clone();
        self.run(OnRecord::holder(&claim.id, move |cur, ctx| {
            machine::release(cur, &c, &why, ctx)
        }))
        .await
    }

    async fn claim_for_resend(
        &self,
        id: &OperationId,
        opts: &BeginOptions,
        window: Duration,
    ) -> Result<Option<Claim>, LedgerError> {
        let (i, opts) = (id.clone(), opts.clone());
        self.run(OnRecord::new(id, move |cur, ctx| {
            machine::claim_for_resend(cur, &i, &opts, window, ctx)
        }))
        .await
    }

    async fn resolve(
        &self,
        id: &OperationId,
        resolution: Resolution,
    ) -> Result<OperationRecord, LedgerError> {
        let i = id.clone();
        self.run(OnRecord::new(id, move |cur, ctx| {
            machine::resolve(cur, &i, &resolution, uuid::Uuid::now_v7(), ctx)
        }))
        .await
    }

    async fn update_unknown(
        &self,
        id: &OperationId,
        update: UnknownUpdate,
    ) -> Result<OperationRecord, LedgerError> {
        let i = id.clone();
        self.run(OnRecord::new(id, move |cur, ctx| {
            machine::update_unknown(cur, &i, &update, ctx)
        }))
        .await
    }

    async fn append_attempt(
        &self,
        id: &OperationId,
        attempt: NewAttempt,
    ) -> Result<uuid::Uuid, LedgerError> {
        let i = id.clone();
        self.run(OnRecord::new(id, move |cur, ctx| {
            machine::append_attempt(cur, &i, &attempt, uuid::Uuid::now_v7(), ctx)
        }))
        .await
    }

    async fn cancel(
        &self,
        id: &OperationId,
        reason: String,
    ) -> Result<OperationRecord, LedgerError> {
        let i = id.clone();
        self.run(OnRecord::new(id, move |cur, ctx| {
            machine::cancel(cur, &i, &reason, ctx)
        }))
        .await
    }

    async fn get(&self, id: &OperationId) -> Result<Option<OperationRecord>, LedgerError> {
        self.get_record(id).await
    }

    async fn list(&self, filter: &ListFilter) -> Result<Vec<OperationRecord>, LedgerError> {
        self.list_records(filter).await
    }

    async fn take_due_unknown(
        &self,
        filter: &DueFilter,
        limit: usize,
        hold: Duration,
    ) -> Result<Vec<OperationRecord>, LedgerError> {
        let filter = filter.clone();
        self.run(TakeDueUnknown {
            filter,
            limit,
            hold,
        })
        .await
    }

    async fn attempts(&self, id: &OperationId) -> Result<Vec<AttemptRecord>, LedgerError> {
        self.attempt_log(id).await
    }

    async fn purge(&self) -> Result<PurgeReport, LedgerError> {
        self.run(Purge).await
    }

    async fn close(&self) {
        self.close_store().await;
    }
}
