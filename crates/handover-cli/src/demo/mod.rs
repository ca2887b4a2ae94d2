//! `handover demo`: the lost-confirmation story, end to end, on a real
//! SQLite ledger with mock providers and a mock destination on loopback.
//!
//! An approved shipment is sent; the destination applies it but the
//! connection drops before the confirmation; the primary provider then fails
//! and the router falls back; the fallback model re-proposes the shipment
//! under a new tool-call id; Handover refuses to execute it again; the
//! reconciler's lookup finds nothing inside the destination's visibility
//! lag, then finds the record after it; the operation is confirmed and the
//! user's retry gets the confirmation replayed. One effect, no duplicate.
//!
//! Running it again on the same ledger is safe: each run uses a fresh key
//! (`K-701`, `K-701-2`, ...) and first replays the previous run's operation,
//! which the ledger answers without sending anything. A ledger holding
//! operations of any other scope is refused untouched: it is someone's
//! real ledger, and the demo would add its shipments to it.

mod app;
mod cast;
mod mcp;
pub(crate) mod shipping;
mod story;
mod timeline;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use clap::builder::TypedValueParser as _;
use serde::Serialize;

use crate::term::{Spinner, Style};
use timeline::Event;

/// Arguments of `handover demo`.
#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// The SQLite ledger file (created if missing; reusing it is safe).
    // UTF-8 (SQLite's file names are), checked here because the lock
    // taken before the ledger opens creates the file.
    #[arg(long, value_name = "PATH", default_value = "handover-demo.db",
          value_parser = clap::builder::OsStringValueParser::new().try_map(utf8_path))]
    ledger: PathBuf,
    /// Print one JSON document instead of the timeline.
    #[arg(long)]
    json: bool,
    /// The story through `handover mcp`: an MCP shipping server that
    /// applies a shipment and dies before answering.
    #[arg(long)]
    mcp: bool,
}

/// What an earlier run left in the ledger.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Earlier {
    scope: String,
    key: String,
    state: String,
    /// When it was decided (RFC 3339), for terminal states.
    decided_at: Option<String>,
}

/// The demo's result.
#[derive(Debug, Serialize)]
pub(crate) struct Report {
    ledger: String,
    /// This run's number on this ledger (1 for a new ledger).
    run: usize,
    scope: String,
    key: String,
    clock: &'static str,
    earlier: Vec<Earlier>,
    timeline: Vec<Event>,
    summary: Summary,
}

/// Counts, taken where the effects happen: the mocks and the ledger.
#[derive(Debug, Serialize)]
pub(crate) struct Summary {
    /// User tasks (one budget each).
    tasks: usize,
    /// Model calls within those tasks.
    model_calls: usize,
    /// Provider attempts (answered, failed and skipped).
    attempts: usize,
    /// HTTP requests received by the mock providers.
    provider_requests: usize,
    /// Action requests (`POST /records`) received by the destination.
    destination_requests: usize,
    /// Lookups (`GET /records`) received by the destination.
    lookups: usize,
    /// Records the destination created.
    effects: usize,
    /// Records beyond the first for one operation.
    duplicates: usize,
    /// This run's operation, if it is still unknown (0 or 1).
    unresolved: usize,
    /// Operations an interrupted earlier run left unknown: honestly
    /// unknown (that run's destination is gone with it, so no lookup can
    /// settle them), for an operator; not this run's guarantee.
    left_unknown_earlier: usize,
    /// This run's operation's final state.
    final_state: String,
    /// Times the write gate refused to execute again.
    refused: usize,
}

impl Summary {
    fn ok(&self) -> bool {
        self.effects == 1
            && self.duplicates == 0
            && self.unresolved == 0
            && self.final_state == "confirmed"
    }
}

pub(crate) async fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let _turn = one_at_a_time(&args.ledger)?;
    refuse_foreign(&args.ledger).await?;
    if args.mcp {
        return run_mcp(&args).await;
    }
    let spinner = Spinner::start("playing the lost-confirmation story...");
    let report = story::play(&args.ledger).await;
    drop(spinner);
    let report = report?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        out!("{}", render(&report, Style::stdout()));
    }
    Ok(if report.summary.ok() {
        ExitCode::SUCCESS
    } else {
        eprintln!("error: the demo's guarantees did not hold (see the summary)");
        ExitCode::FAILURE
    })
}

/// The scopes the demo's two stories write (`demo` and `demo --mcp`).
const DEMO_SCOPES: [&str; 2] = [app::SCOPE, mcp::SCOPE];

/// Refuses a ledger holding an operation of a scope the demo never writes,
/// before anything is written to it: `--ledger` pointed at a real ledger
/// would otherwise add the demo's shipments to a deployment's records. Pages
/// through the operations and stops at the first that is not the demo's.
async fn refuse_foreign(path: &std::path::Path) -> anyhow::Result<()> {
    let ledger = handover::ledger::SqliteLedger::open(path, Default::default())
        .await
        .with_context(|| format!("cannot open the demo ledger at {}", path.display()))?;
    let found = first_foreign(&ledger).await;
    ledger.close().await;
    if let Some(scope) = found? {
        anyhow::bail!(
            "{} holds operations the demo did not write (scope \"{scope}\"); the demo plays \
             only on a ledger of its own and wrote nothing: pass --ledger NEW.db",
            path.display(),
        );
    }
    Ok(())
}

/// The scope of the first operation, oldest first, that is not the demo's.
async fn first_foreign(ledger: &handover::ledger::SqliteLedger) -> anyhow::Result<Option<String>> {
    use handover::ledger::Ledger as _;
    const PAGE: usize = 256;
    let mut after = None;
    loop {
        let page = ledger
            .list(&handover::ledger::ListFilter {
                limit: Some(PAGE),
                after: after.take(),
                ..Default::default()
            })
            .await?;
        if let Some(r) = page
            .iter()
            .find(|r| !DEMO_SCOPES.contains(&r.id.scope.as_str()))
        {
            return Ok(Some(r.id.scope.as_str().to_owned()));
        }
        match page.last() {
            Some(last) if page.len() == PAGE => after = Some(last.id.clone()),
            _ => return Ok(None),
        }
    }
}

fn utf8_path(s: std::ffi::OsString) -> Result<PathBuf, &'static str> {
    s.into_string()
        .map(PathBuf::from)
        .map_err(|_| "must be valid UTF-8 (SQLite takes file names as UTF-8)")
}

/// Two demos playing on one ledger at once would pick the same fresh key
/// and tell each other's story; the second is refused at once instead.
/// An advisory `flock` on the ledger file (created empty if missing, which
/// the ledger's open accepts as a new ledger); `None` where the file
/// system offers no lock (the open then goes on without one). A file that
/// cannot be opened for writing is refused here, naming it and the cause:
/// SQLite would only say "unable to open database file".
fn one_at_a_time(path: &std::path::Path) -> anyhow::Result<Option<std::fs::File>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(|| {
            format!(
                "cannot write the demo's ledger {}; run the demo where you may write, or pass --ledger PATH",
                path.display()
            )
        })?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "another `handover demo` is playing on {}; wait for it to end, or pass --ledger OTHER.db",
            path.display()
        ),
        Err(std::fs::TryLockError::Error(_)) => Ok(None),
    }
}

async fn run_mcp(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    let spinner = Spinner::start("playing the lost-confirmation story through handover mcp...");
    let report = mcp::play(&args.ledger).await;
    drop(spinner);
    let report = report?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        out!("{}", mcp::render(&report, Style::stdout()));
    }
    Ok(if report.ok() {
        ExitCode::SUCCESS
    } else {
        eprintln!("error: the demo's guarantees did not hold (see the summary)");
        ExitCode::FAILURE
    })
}

fn render(r: &Report, s: Style) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} — ledger {} (SQLite), run {}, operation {} {}",
        s.bold("Handover demo"),
        r.ledger,
        r.run,
        r.scope,
        r.key
    );
    let _ = writeln!(out, "{}", s.dim(&format!("times: {}", r.clock)));
    if !r.earlier.is_empty() {
        let _ = writeln!(
            out,
            "\nThe ledger already has {} operation(s) from earlier runs:",
            r.earlier.len()
        );
        for e in r.earlier.iter().rev().take(5) {
            let _ = writeln!(
                out,
                "  {} {}  {}{}",
                e.scope,
                e.key,
                s.state(&e.state),
                e.decided_at
                    .as_deref()
                    .map(|t| format!(" at {t}"))
                    .unwrap_or_default()
            );
        }
        if r.earlier.len() > 5 {
            let _ = writeln!(out, "  ... and {} more", r.earlier.len() - 5);
        }
    }
    let _ = writeln!(out, "\n{}", s.bold("Timeline"));
    out.push_str(&timeline::render(&r.timeline, s));
    let m = &r.summary;
    let _ = writeln!(out, "\n{}", s.bold("Summary"));
    let rows = [
        (
            "user tasks",
            format!("{} ({} model calls)", m.tasks, m.model_calls),
        ),
        (
            "provider attempts",
            format!("{} ({} requests sent)", m.attempts, m.provider_requests),
        ),
        (
            "destination requests",
            format!("{} action, {} lookups", m.destination_requests, m.lookups),
        ),
        ("re-executions refused", m.refused.to_string()),
        ("effects at destination", m.effects.to_string()),
        ("duplicates", m.duplicates.to_string()),
        ("unresolved", m.unresolved.to_string()),
        ("final state", s.state(&m.final_state)),
    ];
    summary_end(&mut out, &rows, &r.ledger, &r.scope, &r.key);
    if m.left_unknown_earlier > 0 {
        use std::fmt::Write as _;
        let _ = write!(
            out,
            "\nAn interrupted earlier run left {} operation(s) unknown on this ledger: its\n\
             destination went with it, so no lookup can settle them. List them with\n\
             `handover ops list --ledger {}` and settle them with `handover ops resolve`,\n\
             or play the demo on a fresh --ledger.\n",
            m.left_unknown_earlier, r.ledger
        );
    }
    out
}

/// The summary's rows and where to inspect the operation (both stories).
fn summary_end(out: &mut String, rows: &[(&str, String)], ledger: &str, scope: &str, key: &str) {
    use std::fmt::Write as _;
    for (k, v) in rows {
        let _ = writeln!(out, "  {k:<24}{v}");
    }
    let _ = writeln!(
        out,
        "\nInspect it: handover ops show --ledger {ledger} {scope} {key}"
    );
}
