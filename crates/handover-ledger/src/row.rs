//! Flat row form of records, shared by the SQL backends: one row type per
//! table, decoded with `sqlx::FromRow` and bound in one column order, the
//! same for SQLite and PostgreSQL (no statements here).
//!
//! One `operations` row holds every state's data in nullable columns; the
//! `reason` column serves rejected, cancelled and unknown states.

use sqlx::Database;
use sqlx::query::Query;

use crate::clock::Timestamp;
use crate::error::LedgerError;
use crate::identity::{ActionName, Fingerprint, Key, OperationId, Scope};
use crate::model::{
    AttemptKind, AttemptOutcome, AttemptRecord, Epoch, OperationRecord, Owner, State, StateKind,
    UnknownInfo,
};

/// The columns of [`OperationRow`] after the identity `scope, key`, in its
/// field (and bind) order: what a transition rewrites.
macro_rules! operation_data_columns {
    () => {
        "action, params, fingerprint, state, epoch, holder, lease_until, \
         dispatched_at, result, reason, evidence, decided_at, unknown_owner, unknown_since, \
         next_check_at, diverged, destination_key, created_at, updated_at, \
         first_dispatched_at, dispatch_count, tombstone"
    };
}
pub(crate) use operation_data_columns;

/// The columns of [`OperationRow`], in its field (and bind) order.
macro_rules! operation_columns {
    () => {
        concat!("scope, key, ", $crate::row::operation_data_columns!())
    };
}
pub(crate) use operation_columns;

/// The columns of [`AttemptRow`], in its field (and bind) order.
macro_rules! attempt_columns {
    () => {
        "attempt_id, scope, key, kind, epoch, executor, destination_key, sent_at, \
         finished_at, outcome, evidence, metadata"
    };
}
pub(crate) use attempt_columns;

/// Declares a row type once: its fields (in column order, the order of the
/// `*_columns!` list beside it) and the `bind` that binds them in that order,
/// so the field list, the bind order and the decoding cannot drift apart.
macro_rules! sql_row {
    (
        $(#[$meta:meta])*
        pub(crate) struct $name:ident { $($field:ident : $ty:ty),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(sqlx::FromRow)]
        pub(crate) struct $name { $(pub(crate) $field: $ty),+ }

        impl $name {
            /// Binds the columns in field (and column list) order.
            pub(crate) fn bind<'q, DB>(
                self,
                q: $crate::row::Bound<'q, DB>,
            ) -> $crate::row::Bound<'q, DB>
            where
                DB: sqlx::Database,
                $(for<'t> $ty: sqlx::Encode<'t, DB> + sqlx::Type<DB>,)+
            {
                q $(.bind(self.$field))+
            }
        }
    };
}
pub(crate) use sql_row;

/// A statement with arguments, on either SQL backend.
pub(crate) type Bound<'q, DB> = Query<'q, DB, <DB as Database>::Arguments>;

sql_row! {
    /// Column values of one `operations` row.
    #[derive(Clone, Debug, Default, PartialEq)]
    pub(crate) struct OperationRow {
        scope: String,
        key: String,
        action: String,
        params: Option<String>,
        fingerprint: String,
        state: String,
        epoch: i64,
        holder: Option<String>,
        lease_until: Option<i64>,
        dispatched_at: Option<i64>,
        result: Option<String>,
        reason: Option<String>,
        evidence: Option<String>,
        decided_at: Option<i64>,
        unknown_owner: Option<String>,
        unknown_since: Option<i64>,
        next_check_at: Option<i64>,
        diverged: bool,
        destination_key: String,
        created_at: i64,
        updated_at: i64,
        first_dispatched_at: Option<i64>,
        dispatch_count: i64,
        tombstone: bool,
    }
}

fn corrupt(what: &str, e: impl std::fmt::Display) -> LedgerError {
    LedgerError::corrupt(format!("{what}: {e}"))
}

fn need<T>(v: Option<T>, col: &str, state: &str) -> Result<T, LedgerError> {
    v.ok_or_else(|| LedgerError::corrupt(format!("column {col} is null in a {state} row")))
}

fn json(text: &str, col: &str) -> Result<serde_json::Value, LedgerError> {
    serde_json::from_str(text).map_err(|e| corrupt(col, e))
}

fn epoch_to_i64(e: Epoch) -> i64 {
    i64::try_from(e.0).unwrap_or(i64::MAX)
}

impl OperationRow {
    pub(crate) fn from_record(rec: &OperationRecord) -> Self {
        let mut row = OperationRow {
            scope: rec.id.scope.to_string(),
            key: rec.id.key.to_string(),
            action: rec.action.to_string(),
            params: rec.params.as_ref().map(crate::jcs::to_string),
            fingerprint: rec.fingerprint.to_string(),
            state: rec.state.kind().as_str().to_owned(),
            epoch: epoch_to_i64(rec.epoch),
            destination_key: rec.destination_key.clone(),
            created_at: rec.created_at.0,
            updated_at: rec.updated_at.0,
            first_dispatched_at: rec.first_dispatched_at.map(|t| t.0),
            dispatch_count: i64::from(rec.dispatch_count),
            tombstone: rec.tombstone,
            ..Default::default()
        };
        match &rec.state {
            State::Planned => {}
            State::Claimed {
                holder,
                lease_until,
                ..
            } => {
                row.holder = Some(holder.clone());
                row.lease_until = Some(lease_until.0);
            }
            State::Dispatched {
                holder,
                lease_until,
                dispatched_at,
                ..
            } => {
                row.holder = Some(holder.clone());
                row.lease_until = Some(lease_until.0);
                row.dispatched_at = Some(dispatched_at.0);
            }
            State::Confirmed {
                result,
                evidence,
                at,
            } => {
                row.result = Some(crate::jcs::to_string(result));
                row.evidence.clone_from(evidence);
                row.decided_at = Some(at.0);
            }
            State::Rejected {
                reason,
                evidence,
                at,
            } => {
                row.reason = Some(reason.clone());
                row.evidence.clone_from(evidence);
                row.decided_at = Some(at.0);
            }
            State::Unknown(info) => {
                row.reason = Some(info.reason.clone());
                row.unknown_owner = Some(info.owner.as_str().to_owned());
                row.unknown_since = Some(info.since.0);
                row.next_check_at = info.next_check_at.map(|t| t.0);
                row.diverged = info.diverged;
            }
            State::Cancelled { reason, at } => {
                row.reason = Some(reason.clone());
                row.decided_at = Some(at.0);
            }
        }
        row
    }

    pub(crate) fn into_record(self) -> Result<OperationRecord, LedgerError> {
        let kind: StateKind = self.state.parse().map_err(|e| corrupt("state", e))?;
        let s = self.state.as_str();
        let epoch = Epoch(u64::try_from(self.epoch).map_err(|e| corrupt("epoch", e))?);
        let state = match kind {
            StateKind::Planned => State::Planned,
            StateKind::Claimed => State::Claimed {
                holder: need(self.holder, "holder", s)?,
                epoch,
                lease_until: Timestamp(need(self.lease_until, "lease_until", s)?),
            },
            StateKind::Dispatched => State::Dispatched {
                holder: need(self.holder, "holder", s)?,
                epoch,
                lease_until: Timestamp(need(self.lease_until, "lease_until", s)?),
                dispatched_at: Timestamp(need(self.dispatched_at, "dispatched_at", s)?),
            },
            StateKind::Confirmed => State::Confirmed {
                result: json(&need(self.result, "result", s)?, "result")?,
                evidence: self.evidence,
                at: Timestamp(need(self.decided_at, "decided_at", s)?),
            },
            StateKind::Rejected => State::Rejected {
                reason: need(self.reason, "reason", s)?,
                evidence: self.evidence,
                at: Timestamp(need(self.decided_at, "decided_at", s)?),
            },
            StateKind::Unknown => State::Unknown(UnknownInfo {
                owner: need(self.unknown_owner, "unknown_owner", s)?
                    .parse::<Owner>()
                    .map_err(|e| corrupt("unknown_owner", e))?,
                reason: need(self.reason, "reason", s)?,
                since: Timestamp(need(self.unknown_since, "unknown_since", s)?),
                next_check_at: self.next_check_at.map(Timestamp),
                diverged: self.diverged,
            }),
            StateKind::Cancelled => State::Cancelled {
                reason: need(self.reason, "reason", s)?,
                at: Timestamp(need(self.decided_at, "decided_at", s)?),
            },
        };
        Ok(OperationRecord {
            id: OperationId {
                scope: Scope::new(&self.scope).map_err(|e| corrupt("scope", e))?,
                key: Key::new(&self.key).map_err(|e| corrupt("key", e))?,
            },
            action: ActionName::new(&self.action).map_err(|e| corrupt("action", e))?,
            params: self
                .params
                .as_deref()
                .map(|p| json(p, "params"))
                .transpose()?,
            fingerprint: Fingerprint::from_hex(&self.fingerprint)
                .ok_or_else(|| LedgerError::corrupt("column fingerprint is not 64 hex digits"))?,
            state,
            epoch,
            destination_key: self.destination_key,
            created_at: Timestamp(self.created_at),
            updated_at: Timestamp(self.updated_at),
            first_dispatched_at: self.first_dispatched_at.map(Timestamp),
            dispatch_count: u32::try_from(self.dispatch_count)
                .map_err(|e| corrupt("dispatch_count", e))?,
            tombstone: self.tombstone,
        })
    }
}

sql_row! {
    /// Column values of one `attempts` row.
    #[derive(Clone, Debug, PartialEq)]
    pub(crate) struct AttemptRow {
        attempt_id: String,
        scope: String,
        key: String,
        kind: String,
        epoch: Option<i64>,
        executor: String,
        destination_key: String,
        sent_at: i64,
        finished_at: Option<i64>,
        outcome: String,
        evidence: Option<String>,
        metadata: Option<String>,
    }
}

impl AttemptRow {
    pub(crate) fn from_record(a: &AttemptRecord) -> Self {
        Self {
            attempt_id: a.attempt_id.to_string(),
            scope: a.id.scope.to_string(),
            key: a.id.key.to_string(),
            kind: a.kind.as_str().to_owned(),
            epoch: a.epoch.map(epoch_to_i64),
            executor: a.executor.clone(),
            destination_key: a.destination_key.clone(),
            sent_at: a.sent_at.0,
            finished_at: a.finished_at.map(|t| t.0),
            outcome: a.outcome.as_str().to_owned(),
            evidence: a.evidence.clone(),
            metadata: a.metadata.as_ref().map(|m| m.to_string()),
        }
    }

    pub(crate) fn into_record(self) -> Result<AttemptRecord, LedgerError> {
        Ok(AttemptRecord {
            attempt_id: self
                .attempt_id
                .parse()
                .map_err(|e| corrupt("attempt_id", e))?,
            id: OperationId {
                scope: Scope::new(&self.scope).map_err(|e| corrupt("scope", e))?,
                key: Key::new(&self.key).map_err(|e| corrupt("key", e))?,
            },
            kind: self
                .kind
                .parse::<AttemptKind>()
                .map_err(|e| corrupt("kind", e))?,
            epoch: self
                .epoch
                .map(|e| u64::try_from(e).map(Epoch))
                .transpose()
                .map_err(|e| corrupt("epoch", e))?,
            executor: self.executor,
            destination_key: self.destination_key,
            sent_at: Timestamp(self.sent_at),
            finished_at: self.finished_at.map(Timestamp),
            outcome: self
                .outcome
                .parse::<AttemptOutcome>()
                .map_err(|e| corrupt("outcome", e))?,
            evidence: self.evidence,
            metadata: self
                .metadata
                .as_deref()
                .map(|m| json(m, "metadata"))
                .transpose()?,
        })
    }
}
