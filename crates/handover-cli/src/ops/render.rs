//! Human output of `ops list` and `ops show`.

use std::fmt::Write as _;

use handover::ledger::{AttemptRecord, OperationRecord, State, Timestamp};

use crate::term::{Style, age, age_at, ago, printable, rfc3339, table};

/// Since when the record has been in its current state (unknown: since it
/// became unknown).
fn since(rec: &OperationRecord) -> Timestamp {
    match &rec.state {
        State::Unknown(info) => info.since,
        _ => rec.updated_at,
    }
}

fn state_name(rec: &OperationRecord) -> &'static str {
    match &rec.state {
        State::Unknown(info) if info.diverged => "diverged",
        s => s.kind().as_str(),
    }
}

/// One line saying what the state means (owner and reason, result, ...),
/// as of `now`: a claim whose lease ran out holds nothing any more (the
/// next writer may claim the operation again; nothing was sent).
fn summary(rec: &OperationRecord, now: Timestamp) -> String {
    match &rec.state {
        State::Planned => "not held by anyone".to_owned(),
        State::Claimed {
            holder,
            lease_until,
            ..
        } if *lease_until <= now => {
            format!("claim by {holder} expired, nothing sent: free to claim again")
        }
        State::Claimed { holder, .. } => format!("held by {holder}, nothing sent"),
        State::Dispatched { holder, .. } => format!("sent by {holder}, awaiting the answer"),
        State::Confirmed { evidence, .. } => evidence
            .clone()
            .unwrap_or_else(|| "confirmed by the destination".to_owned()),
        State::Rejected { reason, .. } => reason.clone(),
        State::Unknown(info) => format!("{}: {}", info.owner, info.reason),
        State::Cancelled { reason, .. } => reason.clone(),
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(max - 3).collect();
        t.push_str("...");
        t
    }
}

pub(super) fn list(records: &[OperationRecord], now: Timestamp, s: Style, ledger: &str) -> String {
    if records.is_empty() {
        return format!("no operations match ({ledger})\n");
    }
    let mut rows = vec![vec![
        "SCOPE".to_owned(),
        "KEY".to_owned(),
        "ACTION".to_owned(),
        "STATE".to_owned(),
        "AGE".to_owned(),
        "DETAIL".to_owned(),
    ]];
    for rec in records {
        rows.push(vec![
            rec.id.scope.to_string(),
            rec.id.key.to_string(),
            rec.action.to_string(),
            state_name(rec).to_owned(),
            age_at(now, since(rec)),
            truncate(&printable(&summary(rec, now)), 80),
        ]);
    }
    let mut out = table(&rows);
    // Colour after alignment so escape codes do not skew the columns.
    if let Some((header, rest)) = out.split_once('\n') {
        out = format!("{}\n{rest}", s.bold(header));
    }
    let _ = writeln!(out, "{} operation(s) in {ledger}", records.len());
    out
}

/// The state block of `show` (also printed after `resolve`).
pub(super) fn state_lines(rec: &OperationRecord, now: Timestamp) -> String {
    let mut out = String::new();
    // Every value may hold ledger text (a holder, reason, evidence).
    let mut line = |k: &str, v: String| {
        let _ = writeln!(out, "  {k:<16}{}", printable(&v));
    };
    match &rec.state {
        State::Planned => line("state", "planned".into()),
        State::Claimed {
            holder,
            epoch,
            lease_until,
        } => {
            line("state", format!("claimed by {holder} (epoch {epoch})"));
            line("lease until", rfc3339(*lease_until));
        }
        State::Dispatched {
            holder,
            epoch,
            lease_until,
            dispatched_at,
        } => {
            line("state", format!("dispatched by {holder} (epoch {epoch})"));
            line("dispatched at", rfc3339(*dispatched_at));
            line("lease until", rfc3339(*lease_until));
        }
        State::Confirmed {
            result,
            evidence,
            at,
        } => {
            line("state", format!("confirmed at {}", rfc3339(*at)));
            line("result", result.to_string());
            line("evidence", evidence.clone().unwrap_or_else(|| "-".into()));
        }
        State::Rejected {
            reason,
            evidence,
            at,
        } => {
            line("state", format!("rejected at {}", rfc3339(*at)));
            line("reason", reason.clone());
            line("evidence", evidence.clone().unwrap_or_else(|| "-".into()));
        }
        State::Unknown(info) => {
            line(
                "state",
                format!(
                    "{} since {} ({})",
                    if info.diverged {
                        "unknown, DIVERGED"
                    } else {
                        "unknown"
                    },
                    rfc3339(info.since),
                    ago(now, info.since)
                ),
            );
            line("owner", info.owner.to_string());
            line("reason", info.reason.clone());
            line(
                "next check",
                info.next_check_at.map_or_else(|| "-".into(), rfc3339),
            );
        }
        State::Cancelled { reason, at } => {
            line("state", format!("cancelled at {}", rfc3339(*at)));
            line("reason", reason.clone());
        }
    }
    out
}

pub(super) fn show(
    rec: &OperationRecord,
    attempts: &[AttemptRecord],
    now: Timestamp,
    s: Style,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {} {}  [{}]",
        s.bold("operation"),
        rec.id.scope,
        rec.id.key,
        s.state(state_name(rec))
    );
    let mut line = |k: &str, v: String| {
        let _ = writeln!(out, "  {k:<16}{}", printable(&v));
    };
    line("action", rec.action.to_string());
    line(
        "params",
        rec.params.as_ref().map_or_else(
            || "(dropped: tombstone past the replay window)".into(),
            ToString::to_string,
        ),
    );
    line("fingerprint", rec.fingerprint.to_string());
    line("destination key", rec.destination_key.clone());
    line(
        "created",
        format!(
            "{}, updated {}",
            rfc3339(rec.created_at),
            rfc3339(rec.updated_at)
        ),
    );
    line(
        "dispatches",
        format!(
            "{} (first at {}), last epoch {}",
            rec.dispatch_count,
            rec.first_dispatched_at.map_or_else(|| "-".into(), rfc3339),
            rec.epoch
        ),
    );
    out.push_str(&state_lines(rec, now));
    let _ = writeln!(out, "{} ({})", s.bold("attempts"), attempts.len());
    for (i, a) in attempts.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {}. {:<9} {}  by {}{}  -> {}",
            i + 1,
            a.kind.as_str(),
            rfc3339(a.sent_at),
            printable(&a.executor),
            a.epoch.map(|e| format!(" (epoch {e})")).unwrap_or_default(),
            s.state(a.outcome.as_str())
        );
        if let Some(f) = a.finished_at {
            let _ = writeln!(
                out,
                "     finished {} ({} later)",
                rfc3339(f),
                age(f.saturating_since(a.sent_at))
            );
        }
        if let Some(e) = &a.evidence {
            let _ = writeln!(out, "     evidence: {}", printable(e));
        }
        if let Some(m) = &a.metadata {
            let _ = writeln!(out, "     metadata: {}", printable(&m.to_string()));
        }
    }
    out
}
