//! Raw → runtime: every check that a file can fail, each naming its path.
//! One file per section of the configuration file; the helpers every
//! section uses live here.

/// `[section] field = "<duration>"` with its default, errors naming
/// `section.field`: one spelling for every section's durations.
macro_rules! duration {
    ($issues:expr, $section:literal, $raw:ident . $field:ident, $default:expr) => {
        $crate::config::duration::parse_or(
            $issues,
            concat!($section, ".", stringify!($field)),
            $raw.$field.as_deref(),
            $default,
        )
    };
}

mod action;
mod gateway;
mod ledger;
pub(crate) mod lookup;
pub(crate) mod mcp;
mod policy;
mod provider;
mod routes;
mod telemetry;

use std::collections::BTreeMap;

use super::issues::ConfigIssues;
use super::model::*;
use super::raw::RawConfig;

/// Looks up an environment variable (injected so tests need not touch the
/// process environment).
pub(crate) type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Why the secret variable `var` gives nothing to send, if it does not:
/// unset, empty or only white space (a blank credential would draw a 401
/// on every call).
pub(crate) fn secret_missing(env: EnvLookup<'_>, var: &str) -> Option<String> {
    env(var)
        .is_none_or(|v| v.trim().is_empty())
        .then(|| format!("environment variable {var} is not set (or is blank)"))
}

/// What is wrong with `name` as the name of an environment variable that
/// holds a secret, if anything: empty, or a name no environment can hold
/// (`=`, NUL) or no shell can set (white space), which would only ever be
/// reported as "not set".
pub(crate) fn env_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("must name an environment variable")
    } else if name
        .chars()
        .any(|c| c == '=' || c == '\0' || c.is_whitespace())
    {
        Some("not an environment variable name (it may not hold '=', NUL or white space)")
    } else {
        None
    }
}

/// Result of validation: the runtime config (when there were no errors) and
/// API-key variables that are named but unset.
pub(crate) struct Validated {
    pub(crate) ledger: LedgerSettings,
    pub(crate) providers: BTreeMap<String, ProviderConfig>,
    pub(crate) policies: BTreeMap<String, PolicySettings>,
    pub(crate) actions: BTreeMap<String, ActionContract>,
    pub(crate) gateway: Option<GatewaySettings>,
    pub(crate) builtin: PolicySettings,
    pub(crate) mcp: Option<McpSettings>,
    pub(crate) telemetry: Option<TelemetrySettings>,
    pub(crate) missing_keys: ConfigIssues,
}

pub(crate) fn validate(raw: RawConfig, env: EnvLookup<'_>) -> Result<Validated, ConfigIssues> {
    let mut issues = ConfigIssues::default();
    let mut missing_keys = ConfigIssues::default();
    let ledger = ledger::validate(&mut issues, raw.ledger);
    // An action the file does not declare runs with `ledger.lease` and the
    // default timeout (`Protocol::contract`): the same rule applies, and
    // declaring other actions does not change it (any action name can
    // still be performed through the operations API).
    if ledger.lease < super::defaults::ACTION_TIMEOUT {
        issues.push(
            "ledger.lease",
            format!(
                "{} is shorter than the default action timeout ({}), which applies to every action this file does not declare: a claim on such an action could expire while its destination call may still run; raise ledger.lease to at least {} (the actions you declare keep their own lease and timeout)",
                humantime::format_duration(ledger.lease),
                humantime::format_duration(super::defaults::ACTION_TIMEOUT),
                humantime::format_duration(super::defaults::ACTION_TIMEOUT),
            ),
        );
    }
    let providers: BTreeMap<_, _> = raw
        .providers
        .into_iter()
        .filter_map(|(name, p)| {
            provider::validate(&mut issues, &mut missing_keys, env, &name, p).map(|p| (name, p))
        })
        .collect();
    let policies = raw
        .policies
        .into_iter()
        .map(|(name, p)| {
            let p = policy::validate(&mut issues, &providers, &name, p);
            (name, p)
        })
        .collect();
    let mut action_mcp = BTreeMap::new();
    let actions = raw
        .actions
        .into_iter()
        .map(|(name, mut a)| {
            let (lookup_tool, lookup_arguments) = a
                .lookup
                .as_mut()
                .map(|l| (l.mcp_tool.take(), l.arguments.take()))
                .unwrap_or_default();
            let m = mcp::ActionMcp {
                binding: a.mcp.take(),
                lookup_tool,
                lookup_arguments,
            };
            action_mcp.insert(name.clone(), m);
            let a = action::validate(&mut issues, &mut missing_keys, env, &ledger, &name, a);
            (name, a)
        })
        .collect();
    let mcp = mcp::validate(&mut issues, raw.mcp, action_mcp, raw.gateway.is_some());
    let gateway = raw
        .gateway
        .map(|g| gateway::validate(&mut issues, &providers, &policies, g));
    let telemetry = raw
        .telemetry
        .and_then(|t| telemetry::validate(&mut issues, &mut missing_keys, env, t));
    if issues.is_empty() {
        Ok(Validated {
            ledger,
            providers,
            policies,
            actions,
            gateway,
            builtin: policy::builtin(),
            mcp,
            telemetry,
            missing_keys,
        })
    } else {
        Err(issues)
    }
}

fn name_ok(issues: &mut ConfigIssues, path: &str, name: &str) {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if !ok {
        issues.push(
            path,
            format!("invalid name {name:?} (use 1-64 letters, digits, '_', '-' or '.')"),
        );
    }
}

fn positive(issues: &mut ConfigIssues, path: &str, value: Option<u64>, default: u64) -> u64 {
    match value {
        None => default,
        Some(0) => {
            issues.push(path, "must be greater than zero");
            default
        }
        Some(v) => v,
    }
}

/// Like [`positive`], for a value that must also fit a `u32`.
fn positive_u32(issues: &mut ConfigIssues, path: &str, value: Option<u64>, default: u32) -> u32 {
    let value = positive(issues, path, value, u64::from(default));
    u32::try_from(value).unwrap_or_else(|_| {
        issues.push(path, format!("{value} is too large"));
        u32::MAX
    })
}

/// One of a closed set of names (`choices`, the first being the default
/// when `value` is absent); anything else is an issue listing the choices.
fn choice<T: Copy>(
    issues: &mut ConfigIssues,
    path: &str,
    what: &str,
    value: Option<&str>,
    choices: &[(&str, T)],
) -> Option<T> {
    let Some(value) = value else {
        return choices.first().map(|&(_, v)| v);
    };
    if let Some(&(_, v)) = choices.iter().find(|(name, _)| *name == value) {
        return Some(v);
    }
    let names: Vec<_> = choices.iter().map(|(n, _)| format!("{n:?}")).collect();
    let expected = match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    issues.push(
        path,
        format!("unknown {what} {value:?} (expected {expected})"),
    );
    None
}

/// A list of names without duplicates, each checked with [`name_ok`].
fn name_set(
    issues: &mut ConfigIssues,
    path: &str,
    what: &str,
    names: &[String],
) -> std::collections::BTreeSet<String> {
    let mut set = std::collections::BTreeSet::new();
    for (i, name) in names.iter().enumerate() {
        let at = format!("{path}[{i}]");
        name_ok(issues, &at, name);
        if !set.insert(name.clone()) {
            issues.push(at, format!("duplicate {what} {name:?}"));
        }
    }
    set
}
