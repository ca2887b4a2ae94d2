//! `[ledger]`: the backend and its retention and parameter limits.

use super::super::defaults as d;
use super::super::issues::ConfigIssues;
use super::super::model::{LedgerBackend, LedgerSettings};
use super::super::raw::RawLedger;
use super::{choice, positive, positive_u32};

/// The embedded default when the file has no `[ledger]` or names no path.
const SQLITE_PATH: &str = "handover.db";

#[derive(Clone, Copy)]
enum Kind {
    Memory,
    Sqlite,
    Postgres,
}

pub(super) fn validate(issues: &mut ConfigIssues, raw: Option<RawLedger>) -> LedgerSettings {
    let Some(raw) = raw else {
        return LedgerSettings {
            backend: LedgerBackend::Sqlite {
                path: SQLITE_PATH.to_owned(),
            },
            lease: d::LEASE,
            replay_window: d::REPLAY_WINDOW,
            tombstone_horizon: d::TOMBSTONE_HORIZON,
            max_params_bytes: d::MAX_PARAMS_BYTES,
            max_params_depth: d::MAX_PARAMS_DEPTH,
        };
    };
    let backend = backend(issues, &raw);
    let replay_window = duration!(issues, "ledger", raw.replay_window, d::REPLAY_WINDOW);
    let tombstone_horizon = duration!(
        issues,
        "ledger",
        raw.tombstone_horizon,
        d::TOMBSTONE_HORIZON
    );
    if tombstone_horizon < replay_window {
        issues.push(
            "ledger.tombstone_horizon",
            "must not be shorter than ledger.replay_window",
        );
    }
    LedgerSettings {
        backend,
        lease: duration!(issues, "ledger", raw.lease, d::LEASE),
        replay_window,
        tombstone_horizon,
        max_params_bytes: positive(
            issues,
            "ledger.max_params_bytes",
            raw.max_params_bytes,
            d::MAX_PARAMS_BYTES as u64,
        ) as usize,
        max_params_depth: max_depth(issues, raw.max_params_depth),
    }
}

/// `ledger.max_params_depth`: positive and at most what a stored document
/// can be read back at ([`handover_ledger::MAX_JSON_DEPTH`]).
fn max_depth(issues: &mut ConfigIssues, raw: Option<u64>) -> usize {
    let path = "ledger.max_params_depth";
    let depth = positive(issues, path, raw, d::MAX_PARAMS_DEPTH as u64);
    let max = handover_ledger::MAX_JSON_DEPTH;
    if depth > max as u64 {
        issues.push(
            path,
            format!(
                "{depth} is too deep (at most {max}: a deeper document could not be read back)"
            ),
        );
        return d::MAX_PARAMS_DEPTH;
    }
    depth as usize
}

fn backend(issues: &mut ConfigIssues, raw: &RawLedger) -> LedgerBackend {
    let kinds = [
        ("memory", Kind::Memory),
        ("sqlite", Kind::Sqlite),
        ("postgres", Kind::Postgres),
    ];
    let kind = choice(
        issues,
        "ledger.backend",
        "backend",
        Some(&raw.backend),
        &kinds,
    );
    let backend = match kind {
        None | Some(Kind::Memory) => LedgerBackend::Memory,
        Some(Kind::Sqlite) => LedgerBackend::Sqlite {
            path: sqlite_path(issues, raw.path.as_deref()),
        },
        Some(Kind::Postgres) => postgres(issues, raw),
    };
    if raw.path.is_some() && !matches!(backend, LedgerBackend::Sqlite { .. }) {
        issues.push("ledger.path", "only applies to backend \"sqlite\"");
    }
    if raw.url_env.is_some() && !matches!(backend, LedgerBackend::Postgres { .. }) {
        issues.push("ledger.url_env", "only applies to backend \"postgres\"");
    }
    backend
}

/// The SQLite file: SQLite opens a temporary database for an empty name
/// and an in-memory one for `:memory:`, neither durable, and nothing would
/// say so.
fn sqlite_path(issues: &mut ConfigIssues, path: Option<&str>) -> String {
    let Some(path) = path else {
        return SQLITE_PATH.to_owned();
    };
    if path.trim().is_empty() || path.trim() == ":memory:" {
        issues.push(
            "ledger.path",
            format!("{path:?} is not a file: a SQLite ledger needs one (for a ledger that is not durable, use backend = \"memory\")"),
        );
    }
    path.to_owned()
}

fn postgres(issues: &mut ConfigIssues, raw: &RawLedger) -> LedgerBackend {
    let url_env = raw.url_env.clone().unwrap_or_default();
    if url_env.is_empty() {
        issues.push(
            "ledger.url_env",
            "required for backend \"postgres\" (the environment variable holding the connection URL)",
        );
    } else if let Some(problem) = super::env_name_problem(&url_env) {
        issues.push("ledger.url_env", problem);
    }
    LedgerBackend::Postgres {
        url_env,
        pool_size: positive_u32(
            issues,
            "ledger.pool_size",
            raw.pool_size.map(u64::from),
            d::PG_POOL_SIZE,
        ),
        statement_timeout: duration!(
            issues,
            "ledger",
            raw.statement_timeout,
            d::PG_STATEMENT_TIMEOUT
        ),
        call_timeout: duration!(issues, "ledger", raw.call_timeout, d::PG_CALL_TIMEOUT),
    }
}
