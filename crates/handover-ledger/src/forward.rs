//! The [`Ledger`](crate::ledger::Ledger) methods that only turn a call into a
//! [`Command`](crate::exec::Command) and run it through the shared driver.
//! They are identical for every backend whose `run` takes one command
//! (memory and SQLite), so they are written once here; a backend supplies
//! `run`, `get_record`, `list_records` and `attempt_log`. (PostgreSQL keeps
//! its own impl: its `begin` has a fast path and its holder writes start
//! from a cached record, retried on conflict.)

macro_rules! command_ledger {
    ($ty:ty) => {
        #[async_trait::async_trait]
        impl $crate::ledger::Ledger for $ty {
            async fn begin(
                &self,
                req: &$crate::identity::OperationRequest,
                opts: &$crate::ledger::BeginOptions,
            ) -> Result<$crate::ledger::BeginOutcome, $crate::error::LedgerError> {
                use $crate::exec::{Answer, Command};
                Answer::begin(self.run(Command::Begin(req.clone(), opts.clone())).await)
            }
            async fn renew(
                &self,
                claim: &$crate::model::Claim,
                lease: std::time::Duration,
            ) -> Result<$crate::model::Claim, $crate::error::LedgerError> {
                use $crate::exec::{Answer, Command};
                Answer::claim(self.run(Command::Renew(claim.clone(), lease)).await)
            }
            async fn mark_dispatched(
                &self,
                claim: &$crate::model::Claim,
                dispatch: $crate::ledger::Dispatch,
            ) -> Result<uuid::Uuid, $crate::error::LedgerError> {
                use $crate::exec::{Answer, Command};
                Answer::uuid(
                    self.run(Command::MarkDispatched(claim.clone(), dispatch))
                        .await,
                )
            }
            async fn confirm(
                &self,
                claim: &$crate::model::Claim,
                result: serde_json::Value,
                evidence: Option<String>,
            ) -> Result<$crate::model::OperationRecord, $crate::error::LedgerError> {
                use $crate::exec::{Answer, Command};
                Answer::record(
                    self.run(Command::Confirm(claim.clone(), result, evidence))
                        .await,
                )
            }
            async fn reject(
                &self,
                claim: &$crate::model::Claim,
                reason: String,
                evidence: Option<String>,
            ) -> Result<$crate::model::OperationRecord, $crate::error::LedgerError> {
                use $crate::exec::{Answer, Command};
                Answer::record(
                    self.run(Command::Reject(claim.clone(), reason, evidence))
                        .await,
                )
            }
            async fn mark_unknown(
                &self,
                claim: &$crate::model::Claim,
                report: $crate::ledger::UnknownReport,
            ) -> Result<$crate::model::OperationRecord, $crate::error::LedgerError> {
                use $crate::exec::{Answer, Command};
                Answer::record(self.run(Command::MarkUnknown(claim.clone(), report)).await)
            }
            async fn release(
                &self,
                claim: &$crate::model::Claim,
                why: $crate::ledger::ReleaseReason,
            ) -> Result<$crate::model::OperationRecord, $crate::error::LedgerError> {
                use $crate::exec::{Answer, Command};
                Answer::record(self.run(Command::Release(claim.clone(), why)).await)
            }
            async fn claim_for_resend(
                &self,
                id: &$crate::identity::OperationId,
                opts: &$crate::ledger::BeginOptions,
                window: std::time::Duration,
            ) -> Result<Option<$crate::model::Claim>, $crate::error::LedgerError> {
                use $crate::exec::{Answer, Command};
                let cmd = Command::ClaimForResend(id.clone(), opts.clone(), window);
                Answer::maybe_claim(self.run(cmd).await)
            }
            async fn resolve(
                &self,
                id: &$crate::identity::OperationId,
                resolution: $crate::ledger::Resolution,
            ) -> Result<$crate::model::OperationRecord, $crate::error::LedgerError> {
                use $crate::exec::{Answer, Command};
                Answer::record(self.run(Command::Resolve(id.clone(), resolution)).await)
            }
            async fn update_unknown(
                &self,
                id: &$crate::identity::OperationId,
                update: $crate::ledger::UnknownUpdate,
            ) -> Result<$crate::model::OperationRecord, $crate::error::LedgerError> {
                use $crate::exec::{Answer, Command};
                Answer::record(self.run(Command::UpdateUnknown(id.clone(), update)).await)
            }
            async fn append_attempt(
                &self,
                id: &$crate::identity::OperationId,
                attempt: $crate::ledger::NewAttempt,
            ) -> Result<uuid::Uuid, $crate::error::LedgerError> {
                use $crate::exec::{Answer, Command};
                Answer::uuid(self.run(Command::AppendAttempt(id.clone(), attempt)).await)
            }
            async fn cancel(
                &self,
                id: &$crate::identity::OperationId,
                reason: String,
            ) -> Result<$crate::model::OperationRecord, $crate::error::LedgerError> {
                use $crate::exec::{Answer, Command};
                Answer::record(self.run(Command::Cancel(id.clone(), reason)).await)
            }
            async fn get(
                &self,
                id: &$crate::identity::OperationId,
            ) -> Result<Option<$crate::model::OperationRecord>, $crate::error::LedgerError> {
                self.get_record(id).await
            }
            async fn list(
                &self,
                filter: &$crate::ledger::ListFilter,
            ) -> Result<Vec<$crate::model::OperationRecord>, $crate::error::LedgerError> {
                self.list_records(filter).await
            }
            async fn attempts(
                &self,
                id: &$crate::identity::OperationId,
            ) -> Result<Vec<$crate::model::AttemptRecord>, $crate::error::LedgerError> {
                self.attempt_log(id).await
            }
            async fn purge(
                &self,
            ) -> Result<$crate::retention::PurgeReport, $crate::error::LedgerError> {
                use $crate::exec::{Answer, Command};
                Answer::purge(self.run(Command::Purge).await)
            }
        }
    };
}

pub(crate) use command_ledger;
