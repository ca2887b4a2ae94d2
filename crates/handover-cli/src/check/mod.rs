//! `handover check --config FILE`: validate a configuration and print what
//! it resolves to. Every problem is printed with its path; unset API-key
//! variables are warnings (the router itself refuses to start without them).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use handover::Config;
use handover::router::RouterError;
use handover::router::config::{
    ActionContract, ErrorClass, LedgerBackend, LedgerSettings, LookupHeader, ModelSet, OpenAiApi,
    PolicySettings, ProviderConfig, ProviderKind,
};

use crate::term::Style;

mod mcp;
mod names;
mod serving;
use names::{chain, names, route};

/// Arguments of `handover check`.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The configuration file to validate.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Also print what a request naming MODEL would run (repeatable).
    #[arg(long = "model", value_name = "MODEL")]
    models: Vec<String>,
}

pub(crate) fn run(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let style = Style::stdout();
    let path = args.config.display().to_string();
    let text = match Config::read_text(&args.config) {
        Ok(t) => t,
        Err(RouterError::ReadConfig { source, .. }) => {
            eprintln!("error: cannot read {path}: {source}");
            return Ok(ExitCode::FAILURE);
        }
        Err(e) => {
            eprintln!("error: {path}: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let env = |var: &str| std::env::var(var).ok().filter(|v| !v.trim().is_empty());
    let (config, missing) = match Config::check(&text, &env) {
        Ok(ok) => ok,
        Err(RouterError::Config(issues)) => {
            let n = issues.iter().count();
            eprintln!("{path}: {n} problem(s):");
            for issue in issues.iter() {
                eprintln!("  {path}: {issue}");
            }
            return Ok(ExitCode::FAILURE);
        }
        Err(e) => {
            eprintln!("error: {path}: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    // What `serve` and the library build next from a valid file: the
    // providers. Unset key variables were reported above; stand-ins let
    // the build go on so every other refusal is found now.
    let with_stand_ins = |var: &str| env(var).or_else(|| Some("unset".to_owned()));
    if let Err(e) = handover::router::route::Router::with_env(&config, &with_stand_ins) {
        eprintln!("{path}: 1 problem(s):");
        eprintln!("  {path}: {e}");
        return Ok(ExitCode::FAILURE);
    }
    for issue in missing.iter() {
        eprintln!("warning: {path}: {issue} (the router will refuse to start without it)");
    }
    // Valid for the library, `chat` and `mcp`; `serve` refuses it at start
    // (a client token has no default), so say so now, not at deploy time.
    let no_gateway = config.gateway().is_none();
    if no_gateway {
        eprintln!("warning: {path}: {NO_GATEWAY}");
    }
    let unmatched = lookups_without_match(&config);
    for action in &unmatched {
        eprintln!(
            "warning: {path}: actions.{action}.lookup: {}",
            no_match(action)
        );
    }
    let warnings = missing.iter().count() + usize::from(no_gateway) + unmatched.len();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{path}: {}{}",
        style.green("OK"),
        if warnings > 0 {
            format!(" ({warnings} warning(s))")
        } else {
            String::new()
        }
    );
    render(&mut out, &config, &env, style);
    let mut unresolved = false;
    if !args.models.is_empty() {
        let _ = writeln!(out, "\n{}", style.bold("requested models"));
    }
    for name in &args.models {
        match config.route(name) {
            Ok(r) => route(&mut out, &config, &r),
            Err(e) => {
                unresolved = true;
                let _ = writeln!(out, "  {name:?}: {e}");
            }
        }
    }
    out!("{out}");
    Ok(if unresolved {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// What `check` says of a file without `[gateway]`.
const NO_GATEWAY: &str = "no [gateway] section: `handover serve` refuses this file (it needs [gateway] with at least one [gateway.clients.NAME]); the library, `handover chat` and `handover mcp` on stdio do not use it (`handover mcp --listen` refuses it too)";

/// Actions whose HTTP lookup compares no field: the reconciler then
/// confirms from any record found under the destination key.
fn lookups_without_match(config: &Config) -> Vec<&str> {
    config
        .actions()
        .values()
        .filter(|a| {
            a.http_lookup
                .as_ref()
                .is_some_and(|h| h.match_fields.is_empty())
        })
        .map(|a| a.name.as_str())
        .collect()
}

fn no_match(action: &str) -> String {
    format!(
        "no `match` fields: any record the lookup finds under the destination key confirms the operation, whatever parameters the record holds (a record with other parameters is never sent to review as diverged); add [actions.{action}.lookup.match] mapping approved parameters to the record's fields (e.g. qty = \"/qty\")"
    )
}

fn d(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// `items` joined, or `empty` when there are none (what none means differs:
/// a provider with no data classes receives only unclassed requests).
fn list<'a>(items: impl IntoIterator<Item = &'a String>, empty: &str) -> String {
    let v: Vec<&str> = items.into_iter().map(String::as_str).collect();
    if v.is_empty() {
        empty.to_owned()
    } else {
        v.join(", ")
    }
}

fn render(out: &mut String, config: &Config, env: &dyn Fn(&str) -> Option<String>, s: Style) {
    ledger(out, config.ledger(), s);
    let _ = writeln!(out, "\n{}", s.bold("providers"));
    for p in config.providers().values() {
        provider(out, p, env);
    }
    let _ = writeln!(out, "\n{}", s.bold("policies"));
    for p in config.policies().values() {
        policy(out, p);
    }
    let _ = writeln!(out, "\n{}", s.bold("actions"));
    if config.actions().is_empty() {
        let _ = writeln!(
            out,
            "  (none: every action gets the careful default: block itself, no re-send, no lookup, operator resolves)"
        );
    }
    for a in config.actions().values() {
        action(out, a);
    }
    mcp::mcp(out, config.mcp(), s);
    serving::gateway(out, config.gateway(), s);
    serving::telemetry(out, config.telemetry(), s);
    names(out, config, s);
}

fn ledger(out: &mut String, l: &LedgerSettings, s: Style) {
    let _ = writeln!(out, "\n{}", s.bold("ledger"));
    let backend = match &l.backend {
        LedgerBackend::Memory => {
            "memory (in process, not durable: tests and demos only)".to_owned()
        }
        LedgerBackend::Sqlite { path } => format!("sqlite {path}"),
        LedgerBackend::Postgres {
            url_env,
            pool_size,
            statement_timeout,
            call_timeout,
        } => format!(
            "postgres (URL from ${url_env}, {}), pool {pool_size}, statement timeout {}, call deadline {}",
            if std::env::var_os(url_env).is_some() {
                "set"
            } else {
                "not set"
            },
            d(*statement_timeout),
            d(*call_timeout)
        ),
    };
    let _ = writeln!(out, "  backend    {backend}");
    let _ = writeln!(
        out,
        "  lease {}, replay window {}, tombstone horizon {}",
        d(l.lease),
        d(l.replay_window),
        d(l.tombstone_horizon)
    );
    let _ = writeln!(
        out,
        "  params at most {} bytes, depth {}",
        l.max_params_bytes, l.max_params_depth
    );
}

fn provider(out: &mut String, p: &ProviderConfig, env: &dyn Fn(&str) -> Option<String>) {
    let base = p
        .base_url
        .clone()
        .or_else(|| p.kind.default_base_url().map(str::to_owned))
        .unwrap_or_else(|| "(none)".to_owned());
    let key = match &p.api_key_env {
        Some(var) if env(var).is_some() => format!("${var} (set)"),
        Some(var) => format!("${var} (NOT SET)"),
        None => "none".to_owned(),
    };
    // Azure's Responses API (its v1 path) pins no version by default.
    let default_version = match (p.kind, p.api) {
        (ProviderKind::AzureOpenAi, OpenAiApi::Responses) => None,
        _ => p.kind.default_api_version(),
    };
    let version = p
        .api_version
        .as_deref()
        .or(default_version)
        .map(|v| format!(", api version {v}"))
        .unwrap_or_default();
    // The API is a choice only where the kind has two.
    let api = match p.kind {
        ProviderKind::OpenAi | ProviderKind::AzureOpenAi => format!(", api {}", p.api),
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "  {}  kind {}, model {}, base_url {base}{version}{api}",
        p.name, p.kind, p.model
    );
    let _ = writeln!(out, "      api key: {key}");
    let models = match &p.models {
        ModelSet::Any => "any (\"*\")".to_owned(),
        ModelSet::Listed(m) => list(m, "(none)"),
    };
    let _ = writeln!(out, "      models: {models}");
    let _ = writeln!(
        out,
        "      data classes: {}",
        list(
            &p.data_classes,
            "none (receives only requests without a data class)"
        )
    );
    let _ = writeln!(out, "      supports: {}", capabilities(p));
    let prices = p.prices.map_or_else(
        || "no prices".to_owned(),
        |pr| {
            format!(
                "${}/Mtok in, ${}/Mtok out",
                pr.input_per_mtok, pr.output_per_mtok
            )
        },
    );
    let _ = writeln!(
        out,
        "      concurrency {}, queue {}, fallback share {}, {prices}",
        p.max_concurrency, p.max_queue, p.fallback_share
    );
    let t = &p.timeouts;
    let _ = writeln!(
        out,
        "      timeouts: connect {}, first byte {} (a stream's {}), first token {}, idle {}, total {}",
        d(t.connect),
        d(t.first_byte),
        d(t.stream_first_byte.min(t.first_byte)),
        d(t.first_token),
        d(t.idle),
        d(t.total)
    );
    let b = &p.breaker;
    let _ = writeln!(
        out,
        "      breaker: per model, opens after {} failure(s) (429 and 503 included); for every model at once on auth/billing/quota, and after as many connect errors; open {}, {} half-open probe(s)",
        b.failure_threshold,
        d(b.open_for),
        b.half_open_probes
    );
    if !p.no_reasoning_passback.is_empty() {
        let _ = writeln!(
            out,
            "      reasoning never passed back for: {}",
            list(&p.no_reasoning_passback, "(none)")
        );
    }
}

fn policy(out: &mut String, p: &PolicySettings) {
    let _ = writeln!(out, "  {}  chain {}", p.name, chain(&p.chain));
    let cost = p.max_cost.map_or_else(
        || "no cost ceiling".to_owned(),
        |c| format!("max cost ${c}"),
    );
    let _ = writeln!(
        out,
        "      budget: deadline {}, max {} request(s) sent, {cost}, {} attempt(s) per provider",
        d(p.deadline),
        p.max_requests,
        p.max_attempts_per_provider
    );
    let _ = writeln!(
        out,
        "      backoff {}..{}{}, commit point {}, data classes: {}",
        d(p.backoff.initial),
        d(p.backoff.max),
        if p.backoff.jitter { " with jitter" } else { "" },
        p.commit_point.as_str(),
        list(&p.data_classes, "none declared")
    );
    if let Some(h) = p.abandon_after {
        let _ = writeln!(
            out,
            "      abandon after {}: stop waiting for a provider and move on (its late answer is recorded, never used)",
            d(h)
        );
    }
    let table: Vec<String> = ErrorClass::ALL
        .iter()
        .map(|c| format!("{}={}", c.as_str(), p.action_for(*c).as_str()))
        .collect();
    let _ = writeln!(out, "      on error:");
    for chunk in table.chunks(6) {
        let _ = writeln!(out, "        {}", chunk.join(", "));
    }
}

fn action(out: &mut String, a: &ActionContract) {
    let block = match a.block {
        handover::router::config::BlockSetting::Operation => "operation",
        handover::router::config::BlockSetting::Scope => "scope",
        handover::router::config::BlockSetting::Action => "action",
    };
    let _ = writeln!(
        out,
        "  {}  block {block} while unknown, lease {}, timeout {}",
        a.name,
        d(a.lease),
        d(a.timeout)
    );
    match &a.idempotency {
        Some(i) => {
            let _ = writeln!(
                out,
                "      idempotency: header {}, destination remembers keys {} (re-send only inside it)",
                i.header,
                d(i.retention)
            );
        }
        None => {
            let _ = writeln!(out, "      idempotency: none (never re-sent automatically)");
        }
    }
    match &a.lookup {
        Some(l) => {
            let _ = writeln!(
                out,
                "      lookup: visibility lag {}, check every {} (backing off to {})",
                d(l.visibility_lag),
                d(l.check_every),
                d(l.max_check_every)
            );
        }
        None => {
            let _ = writeln!(out, "      lookup: none");
        }
    }
    if let Some(h) = &a.http_lookup {
        let headers: Vec<String> = h
            .headers
            .iter()
            .map(|(name, v)| match v {
                LookupHeader::Literal(_) => name.clone(),
                LookupHeader::Env { var, .. } => format!("{name} from ${var}"),
            })
            .collect();
        let _ = writeln!(
            out,
            "      lookup over HTTP: {} {} (headers: {}; not found: {:?}; records at {:?}; match: {})",
            h.method,
            h.url,
            if headers.is_empty() {
                "none".to_owned()
            } else {
                headers.join(", ")
            },
            h.not_found_status,
            h.records.as_deref().unwrap_or(""),
            h.match_fields
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    if a.idempotency.is_none() && a.lookup.is_none() {
        let _ = writeln!(
            out,
            "      an unknown outcome waits for an operator (handover ops resolve)"
        );
    }
}

/// The capabilities a provider honours, those its config declares marked.
fn capabilities(p: &handover::router::config::ProviderConfig) -> String {
    use handover::providers::Capability;
    let mut on: Vec<String> = Capability::ALL
        .into_iter()
        .filter(|c| p.supports(*c))
        .map(|c| match p.supports.contains_key(&c) {
            true => format!("{c} (declared)"),
            false => c.to_string(),
        })
        .collect();
    let off = p.supports.iter().filter(|(_, on)| !**on);
    on.extend(off.map(|(c, _)| format!("not {c} (declared)")));
    if on.is_empty() {
        return "plain chat only".to_owned();
    }
    on.join(", ")
}
