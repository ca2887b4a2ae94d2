//! Write-behind inside one SQLite write transaction.
//!
//! Each statement sqlx runs is a round trip to its SQLite worker thread
//! (two thread hops and a task wake-up); on a group-commit batch of 64
//! commands that was most of the batch's CPU time. So a transaction's
//! writes of records, new attempts and attempt finishes are collected
//! here and written just before COMMIT (or before any statement that reads
//! what they change), as one multi-row statement per table and chunk.
//!
//! What the transaction sees is unchanged: [`Pending::record`] answers a
//! load of a record written earlier in it, every query that reads other
//! rows (blockers, due leases, the reconciler's queue, retention) flushes
//! first, and a finish is applied to attempts still held here as well as
//! to the rows already stored. Nobody is answered before the COMMIT, so a
//! write that fails at the flush fails the whole transaction, as it did
//! when written one statement at a time.

use std::collections::HashMap;
use std::sync::OnceLock;

use sqlx::SqliteConnection;

use super::map_err;
use crate::error::LedgerError;
use crate::identity::OperationId;
use crate::machine::AttemptFinish;
use crate::model::{AttemptKind, AttemptOutcome, AttemptRecord, OperationRecord};
use crate::row::{
    AttemptRow, OperationRow, attempt_columns, operation_columns, operation_data_columns,
};

/// Rows per statement at most; smaller remainders go in power-of-two
/// chunks, so at most `log2(CHUNK) + 1` statement texts per table are
/// prepared (and kept in sqlx's per-connection statement cache).
const CHUNK: usize = 64;
const SIZES: usize = CHUNK.trailing_zeros() as usize + 1;

/// Writes of one transaction not yet sent to SQLite.
#[derive(Debug, Default)]
pub(super) struct Pending {
    /// Latest version of each record written, in first-write order.
    ops: Vec<OperationRecord>,
    index: HashMap<OperationId, usize>,
    attempts: Vec<AttemptRecord>,
    /// Finishes for attempts already stored, at most one per `(id, epoch)`.
    finishes: Vec<AttemptFinish>,
}

impl Pending {
    /// The record as this transaction last wrote it, if it did.
    pub(super) fn record(&self, id: &OperationId) -> Option<&OperationRecord> {
        self.index.get(id).map(|&i| &self.ops[i])
    }

    pub(super) fn save(&mut self, rec: &OperationRecord) {
        match self.index.get(&rec.id) {
            Some(&i) => self.ops[i].clone_from(rec),
            None => {
                self.index.insert(rec.id.clone(), self.ops.len());
                self.ops.push(rec.clone());
            }
        }
    }

    /// Whether [`Pending::attempt`] needs a flush first: a finish held here
    /// must not reach an attempt appended after it.
    pub(super) fn must_flush_before_attempt(&self) -> bool {
        !self.finishes.is_empty()
    }

    pub(super) fn attempt(&mut self, a: &AttemptRecord) {
        debug_assert!(self.finishes.is_empty(), "flush before appending");
        self.attempts.push(a.clone());
    }

    /// What `UPDATE attempts … WHERE outcome = 'pending'` does, here and
    /// (at the flush) in the table.
    pub(super) fn finish(&mut self, f: &AttemptFinish) {
        for a in self.attempts.iter_mut().filter(|a| finishes(f, a)) {
            a.outcome = f.outcome;
            a.finished_at = Some(f.at);
            if f.evidence.is_some() {
                a.evidence.clone_from(&f.evidence);
            }
        }
        // A second finish of the same attempt would find it no longer pending.
        if !self
            .finishes
            .iter()
            .any(|g| g.id == f.id && g.epoch == f.epoch)
        {
            self.finishes.push(f.clone());
        }
    }

    /// Writes everything held, in statement order: records, attempts, finishes.
    pub(super) async fn flush(&mut self, conn: &mut SqliteConnection) -> Result<(), LedgerError> {
        self.write(conn, false).await
    }

    /// Writes everything held and commits the transaction. The `COMMIT`
    /// rides on the last write's statement (`INSERT …; COMMIT`): each
    /// statement text sqlx runs is a round trip to its SQLite thread (two
    /// thread wake-ups), and a commit used to take one more for itself.
    pub(super) async fn commit(&mut self, conn: &mut SqliteConnection) -> Result<(), LedgerError> {
        self.write(conn, true).await
    }

    async fn write(
        &mut self,
        conn: &mut SqliteConnection,
        commit: bool,
    ) -> Result<(), LedgerError> {
        self.index.clear();
        let ops: Vec<OperationRow> = self
            .ops
            .drain(..)
            .map(|r| OperationRow::from_record(&r))
            .collect();
        let attempts: Vec<AttemptRow> = self
            .attempts
            .drain(..)
            .map(|a| AttemptRow::from_record(&a))
            .collect();
        let finishes: Vec<AttemptFinish> = std::mem::take(&mut self.finishes);
        // Which table's last statement carries the COMMIT.
        let last = [ops.len(), attempts.len(), finishes.len()]
            .iter()
            .rposition(|&n| n > 0);
        if commit && last.is_none() {
            return sqlx::Executor::execute(&mut *conn, "COMMIT")
                .await
                .map(drop)
                .map_err(|e| map_err("committing", e));
        }
        let commits = |table| commit && last == Some(table);
        write_rows(
            conn,
            ops,
            upsert_sql,
            OperationRow::bind,
            "writing an operation",
            commits(0),
        )
        .await?;
        write_rows(
            conn,
            attempts,
            insert_attempts_sql,
            AttemptRow::bind,
            "appending an attempt",
            commits(1),
        )
        .await?;
        write_rows(
            conn,
            finishes,
            finish_sql,
            bind_finish,
            "finishing an attempt",
            commits(2),
        )
        .await
    }
}

fn finishes(f: &AttemptFinish, a: &AttemptRecord) -> bool {
    a.id == f.id
        && a.epoch == Some(f.epoch)
        && a.kind == AttemptKind::Dispatch
        && a.outcome == AttemptOutcome::Pending
}

type Bound<'q> = crate::row::Bound<'q, sqlx::Sqlite>;

/// Runs `sql(n, …)` once per chunk of `n` rows, each row bound by `bind`;
/// with `commit`, the last chunk's statement also commits.
async fn write_rows<R>(
    conn: &mut SqliteConnection,
    rows: Vec<R>,
    sql: fn(usize, bool) -> &'static str,
    bind: for<'q> fn(R, Bound<'q>) -> Bound<'q>,
    context: &'static str,
    commit: bool,
) -> Result<(), LedgerError> {
    let mut rows = rows.into_iter();
    let mut sizes = chunks(rows.len()).peekable();
    while let Some(n) = sizes.next() {
        let commits = commit && sizes.peek().is_none();
        let q = rows
            .by_ref()
            .take(n)
            .fold(sqlx::query(sql(n, commits)), |q, r| bind(r, q));
        sqlx::Executor::execute(&mut *conn, q)
            .await
            .map_err(|e| map_err(if commits { "committing" } else { context }, e))?;
    }
    Ok(())
}

/// The sizes `rows` are written in: [`CHUNK`]s, then the remainder's
/// binary digits, largest first (150 → 64, 64, 16, 4, 2).
pub(super) fn chunks(rows: usize) -> impl Iterator<Item = usize> {
    let full = std::iter::repeat_n(CHUNK, rows / CHUNK);
    let rest = rows % CHUNK;
    full.chain(
        (0..SIZES)
            .rev()
            .map(|i| 1 << i)
            .filter(move |b| rest & b != 0),
    )
}

/// `n` rows of `width` placeholders: `(?, ?), (?, ?)`.
pub(super) fn values(width: usize, n: usize) -> String {
    let row = format!("({})", vec!["?"; width].join(", "));
    vec![row; n].join(", ")
}

/// The statement for chunks of each size, built once.
pub(super) fn sized(
    cell: &'static OnceLock<Vec<String>>,
    n: usize,
    build: impl Fn(usize) -> String,
) -> &'static str {
    let all = cell.get_or_init(|| (0..SIZES).map(|i| build(1 << i)).collect());
    &all[n.trailing_zeros() as usize]
}

/// A write's statement texts for each chunk size, alone and followed by
/// `; COMMIT` (sqlx runs the statements of one text in order, binding the
/// `?`s of each in turn).
struct Texts {
    alone: OnceLock<Vec<String>>,
    committing: OnceLock<Vec<String>>,
}

impl Texts {
    const fn new() -> Self {
        Self {
            alone: OnceLock::new(),
            committing: OnceLock::new(),
        }
    }

    fn get(&'static self, n: usize, commit: bool, build: fn(usize) -> String) -> &'static str {
        if commit {
            sized(&self.committing, n, |n| format!("{}; COMMIT", build(n)))
        } else {
            sized(&self.alone, n, build)
        }
    }
}

/// Inserts or replaces whole records; an update rewrites the data columns
/// only (the identity never changes, so its index is left alone).
fn upsert_sql(n: usize, commit: bool) -> &'static str {
    static SQL: Texts = Texts::new();
    SQL.get(n, commit, |n| {
        let data = operation_data_columns!();
        let excluded: Vec<String> = data.split(", ").map(|c| format!("excluded.{c}")).collect();
        format!(
            "INSERT INTO operations ({}) VALUES {} ON CONFLICT (scope, key) DO UPDATE SET ({data}) = ({})",
            operation_columns!(),
            values(2 + excluded.len(), n),
            excluded.join(", ")
        )
    })
}

fn insert_attempts_sql(n: usize, commit: bool) -> &'static str {
    static SQL: Texts = Texts::new();
    SQL.get(n, commit, |n| {
        let cols = attempt_columns!();
        format!(
            "INSERT INTO attempts ({cols}) VALUES {}",
            values(cols.split(", ").count(), n)
        )
    })
}

/// Closes the pending dispatch attempt of each `(scope, key, epoch)`.
fn finish_sql(n: usize, commit: bool) -> &'static str {
    static SQL: Texts = Texts::new();
    SQL.get(n, commit, |n| {
        format!(
            "UPDATE attempts SET outcome = v.column1, finished_at = v.column2, \
             evidence = COALESCE(v.column3, attempts.evidence) FROM (VALUES {}) AS v \
             WHERE attempts.scope = v.column4 AND attempts.key = v.column5 \
             AND attempts.epoch = v.column6 AND attempts.kind = 'dispatch' \
             AND attempts.outcome = 'pending'",
            values(6, n)
        )
    })
}

fn bind_finish(f: AttemptFinish, q: Bound<'_>) -> Bound<'_> {
    q.bind(f.outcome.as_str())
        .bind(f.at.0)
        .bind(f.evidence)
        .bind(f.id.scope.to_string())
        .bind(f.id.key.to_string())
        .bind(i64::try_from(f.epoch.0).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_powers_of_two_up_to_the_limit() {
        assert_eq!(chunks(150).collect::<Vec<_>>(), [64, 64, 16, 4, 2]);
        assert_eq!(chunks(64).collect::<Vec<_>>(), [64]);
        assert_eq!(chunks(0).count(), 0);
        assert_eq!(upsert_sql(2, false).matches("), (").count(), 1);
        assert!(finish_sql(1, false).contains("(VALUES (?, ?, ?, ?, ?, ?))"));
        assert!(!finish_sql(1, false).contains("COMMIT"));
        assert!(finish_sql(1, true).ends_with("AND attempts.outcome = 'pending'; COMMIT"));
    }

    fn dispatch(key: &str, epoch: u64) -> AttemptRecord {
        AttemptRecord {
            attempt_id: uuid::Uuid::now_v7(),
            id: OperationId::new("s", key).unwrap(),
            kind: AttemptKind::Dispatch,
            epoch: Some(crate::model::Epoch(epoch)),
            executor: "e".into(),
            destination_key: "d".into(),
            sent_at: crate::clock::Timestamp(1),
            finished_at: None,
            outcome: AttemptOutcome::Pending,
            evidence: None,
            metadata: None,
        }
    }

    #[test]
    fn a_finish_closes_held_attempts_once_and_fences_later_appends() {
        let mut p = Pending::default();
        p.attempt(&dispatch("a", 1));
        p.attempt(&dispatch("b", 1));
        let f = AttemptFinish {
            id: OperationId::new("s", "a").unwrap(),
            epoch: crate::model::Epoch(1),
            outcome: AttemptOutcome::Confirmed,
            at: crate::clock::Timestamp(2),
            evidence: Some("ok".into()),
        };
        p.finish(&f);
        p.finish(&AttemptFinish {
            outcome: AttemptOutcome::Unknown,
            ..f.clone()
        });
        let outcomes: Vec<_> = p.attempts.iter().map(|a| a.outcome).collect();
        assert_eq!(
            outcomes,
            [AttemptOutcome::Confirmed, AttemptOutcome::Pending]
        );
        assert_eq!(p.attempts[0].evidence.as_deref(), Some("ok"));
        // Kept for rows already stored, once; an append must flush first.
        assert_eq!(p.finishes, [f]);
        assert!(p.must_flush_before_attempt());
    }
}
