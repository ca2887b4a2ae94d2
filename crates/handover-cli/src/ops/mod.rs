//! `handover ops ...`: the operator's view of the ledger. An operation is
//! named by two arguments, `SCOPE KEY` (both are visible ASCII and may
//! contain `/`, so no single-string form would be unambiguous).

mod render;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use handover::ledger::{ListFilter, OperationId, Resolution, ResolvedAs, Scope, State, StateKind};
use serde_json::json;

use crate::LedgerSource;
use crate::open::{Access, Opened, open};
use crate::term::Style;

/// `handover ops` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum OpsCommand {
    /// List operations, oldest first (all states unless filtered).
    #[command(
        after_help = "Examples:\n  handover ops list --config handover.toml --state unknown\n  handover ops list --ledger handover.db --state diverged --older-than 10m --json"
    )]
    List(ListArgs),
    /// Show one operation: params, state, evidence and every attempt.
    #[command(
        after_help = "Example:\n  handover ops show --config handover.toml customer-42 K-701"
    )]
    Show(ShowArgs),
    /// Resolve an operation whose outcome is unknown, with evidence.
    #[command(
        after_help = "Examples:\n  handover ops resolve --config handover.toml customer-42 K-701 --confirmed \\\n      --evidence \"carrier portal shows shipment SHP-88 created 10:02\" --actor alice \\\n      --result '{\"shipment\":\"SHP-88\"}'\n  handover ops resolve --ledger handover.db customer-42 K-702 --rejected \\\n      --evidence \"no shipment in carrier export of 12:00\" --actor bob"
    )]
    Resolve(ResolveArgs),
    /// Apply retention: tombstone terminal outcomes past the replay window,
    /// delete tombstones past the horizon (unknown operations never expire).
    #[command(after_help = "Example:\n  handover ops purge --config handover.toml")]
    Purge(PurgeArgs),
}

/// Arguments of `ops list`.
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    source: LedgerSource,
    /// Only this state: planned, claimed, dispatched, unknown, diverged
    /// (unknown and found with other parameters), confirmed, rejected, cancelled.
    #[arg(long, value_name = "STATE")]
    state: Option<String>,
    /// Only this scope.
    #[arg(long, value_name = "SCOPE")]
    scope: Option<String>,
    /// Only operations at least this old (since becoming unknown, else since
    /// their last change), e.g. `10m`, `2h`.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    older_than: Option<Duration>,
    /// Print JSON (one array of records).
    #[arg(long)]
    json: bool,
}

/// An operation's identity on the command line.
#[derive(Debug, Args)]
pub(crate) struct OperationArg {
    /// The operation's scope (tenant / principal / workflow).
    scope: String,
    /// The operation's key (the logical request key approved by the user).
    key: String,
}

impl OperationArg {
    fn id(&self) -> anyhow::Result<OperationId> {
        OperationId::new(&self.scope, &self.key).context("invalid operation identity")
    }
}

/// Arguments of `ops show`.
#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    #[command(flatten)]
    source: LedgerSource,
    #[command(flatten)]
    op: OperationArg,
    /// Print JSON (`{"operation": ..., "attempts": [...]}`).
    #[arg(long)]
    json: bool,
}

/// Arguments of `ops resolve`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("decision").required(true).args(["confirmed", "rejected"])))]
pub(crate) struct ResolveArgs {
    #[command(flatten)]
    source: LedgerSource,
    #[command(flatten)]
    op: OperationArg,
    /// The effect happened (e.g. the record exists at the destination).
    #[arg(long)]
    confirmed: bool,
    /// The effect did not happen.
    #[arg(long)]
    rejected: bool,
    /// What proves it (required, recorded with the decision).
    #[arg(long, value_name = "TEXT")]
    evidence: Option<String>,
    /// Who decides (required, recorded with the decision).
    #[arg(long, value_name = "NAME")]
    actor: Option<String>,
    /// With --confirmed: the result to replay to retries, as JSON (default
    /// null). Refused with --rejected, which records a reason instead.
    #[arg(long, value_name = "JSON", conflicts_with = "rejected")]
    result: Option<String>,
    /// With --rejected: why, as retries are told (default "not applied
    /// (operator)"). Refused with --confirmed: a confirmation records its
    /// result, and what proves it goes in --evidence.
    #[arg(long, value_name = "TEXT", conflicts_with = "confirmed")]
    reason: Option<String>,
    /// Print the resulting record as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `ops purge`.
#[derive(Debug, Args)]
pub(crate) struct PurgeArgs {
    #[command(flatten)]
    source: LedgerSource,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) async fn run(cmd: OpsCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        OpsCommand::List(a) => list(a).await,
        OpsCommand::Show(a) => show(a).await,
        OpsCommand::Resolve(a) => resolve(a).await,
        OpsCommand::Purge(a) => purge(a).await,
    }
}

fn filter(args: &ListArgs) -> anyhow::Result<ListFilter> {
    let mut f = ListFilter {
        older_than: args.older_than,
        ..ListFilter::default()
    };
    if let Some(s) = &args.state {
        if s == "diverged" {
            f.state = Some(StateKind::Unknown);
            f.diverged = Some(true);
        } else {
            f.state = Some(s.parse::<StateKind>().map_err(|_| {
                anyhow::anyhow!(
                    "--state: unknown state {s:?} (expected planned, claimed, dispatched, unknown, diverged, confirmed, rejected or cancelled)"
                )
            })?);
        }
    }
    if let Some(scope) = &args.scope {
        f.scope = Some(Scope::new(scope).context("--scope")?);
    }
    Ok(f)
}

async fn list(args: ListArgs) -> anyhow::Result<ExitCode> {
    let f = filter(&args)?;
    let opened = open(&args.source, Access::ReadOnly).await?;
    let records = opened.ledger.list(&f).await?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&records)?);
    } else {
        out!(
            "{}",
            render::list(
                &records,
                crate::term::now(),
                Style::stdout(),
                &opened.description
            )
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn show(args: ShowArgs) -> anyhow::Result<ExitCode> {
    let id = args.op.id()?;
    let opened = open(&args.source, Access::ReadOnly).await?;
    let Some(record) = opened.ledger.get(&id).await? else {
        eprintln!(
            "error: no operation {} {} in {}",
            id.scope, id.key, opened.description
        );
        return Ok(ExitCode::FAILURE);
    };
    let attempts = opened.ledger.attempts(&id).await?;
    if args.json {
        let doc = json!({ "operation": record, "attempts": attempts });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        out!(
            "{}",
            render::show(&record, &attempts, crate::term::now(), Style::stdout())
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn required(name: &str, value: Option<&String>) -> Option<String> {
    match value.map(|v| v.trim()) {
        Some(v) if !v.is_empty() => Some(v.to_owned()),
        _ => {
            eprintln!(
                "error: refused: --{name} is required and must not be empty; nothing was changed"
            );
            None
        }
    }
}

async fn resolve(args: ResolveArgs) -> anyhow::Result<ExitCode> {
    let id = args.op.id()?;
    // Check every input before opening anything: a refusal changes nothing.
    let (Some(evidence), Some(actor)) = (
        required("evidence", args.evidence.as_ref()),
        required("actor", args.actor.as_ref()),
    ) else {
        return Ok(ExitCode::FAILURE);
    };
    let outcome = if args.confirmed {
        let result = match &args.result {
            Some(text) => {
                let value = serde_json::from_str(text)
                    .with_context(|| "--result: not valid JSON; nothing was changed")?;
                // As written, before the parser rounds a number or keeps
                // the last of a member named twice (as the gateway checks).
                handover::ledger::validate_json_text(&format!("{{\"result\": {text}}}"))
                    .map_err(|e| anyhow::anyhow!("--result: {e}; nothing was changed"))?;
                value
            }
            None => serde_json::Value::Null,
        };
        ResolvedAs::Confirmed { result }
    } else {
        ResolvedAs::Rejected {
            reason: args
                .reason
                .clone()
                .unwrap_or_else(|| "not applied (operator)".to_owned()),
        }
    };
    let resolution = Resolution {
        outcome,
        evidence,
        actor,
    };
    let opened = open(&args.source, Access::ReadWrite).await?;
    let done = decide(&opened, &id, resolution, args.json).await;
    // Closed on every path, so the file alone holds every record.
    opened.ledger.close().await;
    done
}

/// Records `resolution` for `id` if it is unknown, and prints the record.
async fn decide(
    opened: &Opened,
    id: &OperationId,
    resolution: Resolution,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let Some(before) = opened.ledger.get(id).await? else {
        eprintln!(
            "error: refused: no operation {} {} in {}",
            id.scope, id.key, opened.description
        );
        return Ok(ExitCode::FAILURE);
    };
    if !matches!(before.state, State::Unknown(_)) {
        eprintln!(
            "error: refused: operation {} {} is {}; only an unknown operation can be resolved (nothing was changed)",
            id.scope,
            id.key,
            before.state.kind()
        );
        return Ok(ExitCode::FAILURE);
    }
    let record = match opened.ledger.resolve(id, resolution).await {
        Ok(r) => r,
        Err(e) => {
            // The ledger re-checks under its lock (someone may have resolved it meanwhile).
            eprintln!("error: refused: {e} (nothing was changed)");
            return Ok(ExitCode::FAILURE);
        }
    };
    if json {
        outln!("{}", serde_json::to_string_pretty(&record)?);
    } else {
        let s = Style::stdout();
        outln!(
            "{} {}: {} -> {}",
            id.scope,
            id.key,
            s.state("unknown"),
            s.state(record.state.kind().as_str())
        );
        out!("{}", render::state_lines(&record, crate::term::now()));
    }
    Ok(ExitCode::SUCCESS)
}

async fn purge(args: PurgeArgs) -> anyhow::Result<ExitCode> {
    // Retention is the deployment's: the defaults a bare file would get
    // could drop results it keeps for longer.
    if args.source.ledger.is_some() {
        anyhow::bail!(
            "refused: `ops purge` needs --config FILE: it applies the configuration's retention \
             ([ledger] replay_window, tombstone_horizon), and with --ledger the defaults (72h, 30d) \
             could drop results the deployment keeps longer; nothing was changed"
        );
    }
    let opened = open(&args.source, Access::ReadWrite).await?;
    let done = purge_open(&opened, args.json).await;
    // Closed on every path, so the file alone holds every record.
    opened.ledger.close().await;
    done
}

async fn purge_open(opened: &Opened, json: bool) -> anyhow::Result<ExitCode> {
    let report = opened.ledger.purge().await?;
    if json {
        let doc = json!({
            "ledger": opened.description,
            "replay_window_ms": u64::try_from(opened.retention.replay_window.as_millis()).unwrap_or(u64::MAX),
            "tombstone_horizon_ms": u64::try_from(opened.retention.tombstone_horizon.as_millis()).unwrap_or(u64::MAX),
            "tombstoned": report.tombstoned,
            "deleted": report.deleted,
        });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        outln!(
            "{}: retention replay window {}, tombstone horizon {}",
            opened.description,
            humantime::format_duration(opened.retention.replay_window),
            humantime::format_duration(opened.retention.tombstone_horizon)
        );
        outln!(
            "tombstoned {} (params and results dropped), deleted {}; unknown and dispatched operations never expire",
            report.tombstoned,
            report.deleted
        );
    }
    Ok(ExitCode::SUCCESS)
}
