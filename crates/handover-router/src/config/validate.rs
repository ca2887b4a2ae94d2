//! Raw → runtime: every check that a file can fail, each naming its path.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::defaults as d;
use super::duration::{parse, parse_or};
use super::issues::ConfigIssues;
use super::model::*;
use super::raw::*;

/// Looks up an environment variable (injected so tests need not touch the
/// process environment).
pub(crate) type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Result of validation: the runtime config (when there were no errors) and
/// API-key variables that are named but unset.
pub(crate) struct Validated {
    pub(crate) ledger: LedgerSettings,
    pub(crate) providers: BTreeMap<String, ProviderConfig>,
    pub(crate) policies: BTreeMap<String, PolicySettings>,
    pub(crate) actions: BTreeMap<String, ActionContract>,
    pub(crate) gateway: Option<GatewaySettings>,
    pub(crate) missing_keys: ConfigIssues,
}

pub(crate) fn validate(raw: RawConfig, env: EnvLookup<'_>) -> Result<Validated, ConfigIssues> {
    let mut issues = ConfigIssues::default();
    let mut missing_keys = ConfigIssues::default();
    let ledger = ledger(&mut issues, raw.ledger);
    let providers: BTreeMap<_, _> = raw
        .providers
        .into_iter()
        .filter_map(|(name, p)| {
            provider(&mut issues, &mut missing_keys, env, &name, p).map(|p| (name, p))
        })
        .collect();
    let policies = raw
        .policies
        .into_iter()
        .map(|(name, p)| {
            let p = policy(&mut issues, &providers, &name, p);
            (name, p)
        })
        .collect();
    let actions = raw
        .actions
        .into_iter()
        .map(|(name, a)| {
            let a = action(&mut issues, &ledger, &name, a);
            (name, a)
        })
        .collect();
    let gateway = raw
        .gateway
        .map(|g| super::gateway::validate(&mut issues, &policies, g));
    if issues.is_empty() {
        Ok(Validated {
            ledger,
            providers,
            policies,
            actions,
            gateway,
            missing_keys,
        })
    } else {
        Err(issues)
    }
}

pub(super) fn name_ok(issues: &mut ConfigIssues, path: &str, name: &str) {
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

pub(super) fn positive(
    issues: &mut ConfigIssues,
    path: &str,
    value: Option<u64>,
    default: u64,
) -> u64 {
    match value {
        None => default,
        Some(0) => {
            issues.push(path, "must be greater than zero");
            default
        }
        Some(v) => v,
    }
}

fn to_u32(issues: &mut ConfigIssues, path: &str, value: u64) -> u32 {
    u32::try_from(value).unwrap_or_else(|_| {
        issues.push(path, format!("{value} is too large"));
        u32::MAX
    })
}

fn ledger(issues: &mut ConfigIssues, raw: Option<RawLedger>) -> LedgerSettings {
    let Some(raw) = raw else {
        return LedgerSettings {
            backend: LedgerBackend::Sqlite {
                path: "handover.db".to_owned(),
            },
            lease: d::LEASE,
            replay_window: d::REPLAY_WINDOW,
            tombstone_horizon: d::TOMBSTONE_HORIZON,
            max_params_bytes: d::MAX_PARAMS_BYTES,
            max_params_depth: d::MAX_PARAMS_DEPTH,
        };
    };
    let backend = match raw.backend.as_str() {
        "memory" => LedgerBackend::Memory,
        "sqlite" => LedgerBackend::Sqlite {
            path: raw.path.clone().unwrap_or_else(|| "handover.db".to_owned()),
        },
        "postgres" => {
            let url_env = raw.url_env.clone().unwrap_or_default();
            if url_env.is_empty() {
                issues.push(
                    "ledger.url_env",
                    "required for backend \"postgres\" (the environment variable holding the connection URL)",
                );
            }
            let pool = positive(
                issues,
                "ledger.pool_size",
                raw.pool_size.map(u64::from),
                u64::from(d::PG_POOL_SIZE),
            );
            LedgerBackend::Postgres {
                url_env,
                pool_size: to_u32(issues, "ledger.pool_size", pool),
                statement_timeout: parse_or(
                    issues,
                    "ledger.statement_timeout",
                    raw.statement_timeout.as_deref(),
                    d::PG_STATEMENT_TIMEOUT,
                ),
            }
        }
        other => {
            issues.push(
                "ledger.backend",
                format!(
                    "unknown backend {other:?} (expected \"memory\", \"sqlite\" or \"postgres\")"
                ),
            );
            LedgerBackend::Memory
        }
    };
    if raw.path.is_some() && !matches!(backend, LedgerBackend::Sqlite { .. }) {
        issues.push("ledger.path", "only applies to backend \"sqlite\"");
    }
    if raw.url_env.is_some() && !matches!(backend, LedgerBackend::Postgres { .. }) {
        issues.push("ledger.url_env", "only applies to backend \"postgres\"");
    }
    let replay_window = parse_or(
        issues,
        "ledger.replay_window",
        raw.replay_window.as_deref(),
        d::REPLAY_WINDOW,
    );
    let tombstone_horizon = parse_or(
        issues,
        "ledger.tombstone_horizon",
        raw.tombstone_horizon.as_deref(),
        d::TOMBSTONE_HORIZON,
    );
    if tombstone_horizon < replay_window {
        issues.push(
            "ledger.tombstone_horizon",
            "must not be shorter than ledger.replay_window",
        );
    }
    LedgerSettings {
        backend,
        lease: parse_or(issues, "ledger.lease", raw.lease.as_deref(), d::LEASE),
        replay_window,
        tombstone_horizon,
        max_params_bytes: positive(
            issues,
            "ledger.max_params_bytes",
            raw.max_params_bytes,
            d::MAX_PARAMS_BYTES as u64,
        ) as usize,
        max_params_depth: positive(
            issues,
            "ledger.max_params_depth",
            raw.max_params_depth,
            d::MAX_PARAMS_DEPTH as u64,
        ) as usize,
    }
}

fn provider(
    issues: &mut ConfigIssues,
    missing_keys: &mut ConfigIssues,
    env: EnvLookup<'_>,
    name: &str,
    raw: RawProvider,
) -> Option<ProviderConfig> {
    let path = format!("providers.{name}");
    name_ok(issues, &path, name);
    let kind = match raw.kind.parse::<ProviderKind>() {
        Ok(kind) => kind,
        Err(_) => {
            let other = &raw.kind;
            issues.push(
                format!("{path}.kind"),
                format!("unknown provider kind {other:?} (expected \"openai\", \"deepseek\" or \"openai_compatible\")"),
            );
            return None;
        }
    };
    match &raw.base_url {
        Some(url) if !(url.starts_with("http://") || url.starts_with("https://")) => issues.push(
            format!("{path}.base_url"),
            format!("{url:?} is not an http(s) URL"),
        ),
        None if kind == ProviderKind::OpenAiCompatible => issues.push(
            format!("{path}.base_url"),
            "required for kind \"openai_compatible\"",
        ),
        _ => {}
    }
    if raw.model.trim().is_empty() {
        issues.push(format!("{path}.model"), "must not be empty");
    }
    if let Some(var) = &raw.api_key_env {
        if var.is_empty() {
            issues.push(
                format!("{path}.api_key_env"),
                "must name an environment variable",
            );
        } else if env(var).is_none_or(|v| v.is_empty()) {
            missing_keys.push(
                format!("{path}.api_key_env"),
                format!("environment variable {var} is not set"),
            );
        }
    }
    let mut data_classes = BTreeSet::new();
    for (i, class) in raw.data_classes.iter().enumerate() {
        name_ok(issues, &format!("{path}.data_classes[{i}]"), class);
        if !data_classes.insert(class.clone()) {
            issues.push(
                format!("{path}.data_classes[{i}]"),
                format!("duplicate data class {class:?}"),
            );
        }
    }
    let prices = match (raw.price_input_per_mtok, raw.price_output_per_mtok) {
        (None, None) => None,
        (input, output) => {
            let mut price = |field: &str, v: Option<f64>| match v {
                Some(v) if v.is_finite() && v >= 0.0 => v,
                Some(v) => {
                    issues.push(
                        format!("{path}.{field}"),
                        format!("{v} is not a non-negative price"),
                    );
                    0.0
                }
                None => {
                    issues.push(
                        format!("{path}.{field}"),
                        "set both price_input_per_mtok and price_output_per_mtok, or neither",
                    );
                    0.0
                }
            };
            Some(Prices {
                input_per_mtok: price("price_input_per_mtok", input),
                output_per_mtok: price("price_output_per_mtok", output),
            })
        }
    };
    let fallback_share = match raw.fallback_share {
        None => d::FALLBACK_SHARE,
        Some(s) if s > 0.0 && s <= 1.0 => s,
        Some(s) => {
            issues.push(
                format!("{path}.fallback_share"),
                format!("{s} is not in (0, 1]"),
            );
            d::FALLBACK_SHARE
        }
    };
    let t = raw.timeouts.unwrap_or_default();
    let tp = |field: &str| format!("{path}.timeouts.{field}");
    let timeouts = Timeouts {
        connect: parse_or(issues, &tp("connect"), t.connect.as_deref(), d::CONNECT),
        first_byte: parse_or(
            issues,
            &tp("first_byte"),
            t.first_byte.as_deref(),
            d::FIRST_BYTE,
        ),
        first_token: parse_or(
            issues,
            &tp("first_token"),
            t.first_token.as_deref(),
            d::FIRST_TOKEN,
        ),
        idle: parse_or(issues, &tp("idle"), t.idle.as_deref(), d::IDLE),
        total: parse_or(issues, &tp("total"), t.total.as_deref(), d::TOTAL),
    };
    let b = raw.breaker.unwrap_or_default();
    let failures = positive(
        issues,
        &format!("{path}.breaker.failure_threshold"),
        b.failure_threshold,
        u64::from(d::BREAKER_FAILURES),
    );
    let probes = positive(
        issues,
        &format!("{path}.breaker.half_open_probes"),
        b.half_open_probes,
        u64::from(d::BREAKER_PROBES),
    );
    let breaker = BreakerSettings {
        failure_threshold: to_u32(
            issues,
            &format!("{path}.breaker.failure_threshold"),
            failures,
        ),
        open_for: parse_or(
            issues,
            &format!("{path}.breaker.open_for"),
            b.open_for.as_deref(),
            d::BREAKER_OPEN_FOR,
        ),
        half_open_probes: to_u32(issues, &format!("{path}.breaker.half_open_probes"), probes),
    };
    let mut no_reasoning_passback = BTreeSet::new();
    for (model, m) in &raw.models {
        let mpath = format!("{path}.models.{model}.reasoning_passback");
        match m.reasoning_passback.as_deref() {
            None | Some("tool_calls") => {}
            Some("never") => {
                no_reasoning_passback.insert(model.clone());
            }
            Some(other) => issues.push(
                mpath,
                format!("unknown value {other:?} (expected \"tool_calls\" or \"never\")"),
            ),
        }
    }
    Some(ProviderConfig {
        name: name.to_owned(),
        kind,
        base_url: raw.base_url,
        model: raw.model,
        api_key_env: raw.api_key_env,
        data_classes,
        max_concurrency: positive(
            issues,
            &format!("{path}.max_concurrency"),
            raw.max_concurrency,
            d::MAX_CONCURRENCY as u64,
        ) as usize,
        max_queue: raw.max_queue.map_or(d::MAX_QUEUE, |q| q as usize),
        fallback_share,
        prices,
        timeouts,
        breaker,
        no_reasoning_passback,
    })
}

fn policy(
    issues: &mut ConfigIssues,
    providers: &BTreeMap<String, ProviderConfig>,
    name: &str,
    raw: RawPolicy,
) -> PolicySettings {
    let path = format!("policies.{name}");
    name_ok(issues, &path, name);
    if raw.chain.is_empty() {
        issues.push(format!("{path}.chain"), "must name at least one provider");
    }
    let mut seen = BTreeSet::new();
    for (i, p) in raw.chain.iter().enumerate() {
        if !providers.contains_key(p) {
            issues.push(
                format!("{path}.chain[{i}]"),
                format!("unknown provider {p:?}"),
            );
        }
        if !seen.insert(p) {
            issues.push(
                format!("{path}.chain[{i}]"),
                format!("duplicate provider {p:?} in chain"),
            );
        }
    }
    let mut data_classes = BTreeSet::new();
    for (i, class) in raw.data_classes.iter().enumerate() {
        let accepted = raw
            .chain
            .iter()
            .filter_map(|p| providers.get(p))
            .any(|p| p.data_classes.contains(class));
        if !accepted {
            issues.push(
                format!("{path}.data_classes[{i}]"),
                format!("no provider in the chain accepts data class {class:?}"),
            );
        }
        data_classes.insert(class.clone());
    }
    let max_requests = positive(
        issues,
        &format!("{path}.max_requests"),
        raw.max_requests,
        u64::from(d::MAX_REQUESTS),
    );
    let per_provider = positive(
        issues,
        &format!("{path}.max_attempts_per_provider"),
        raw.max_attempts_per_provider,
        u64::from(d::MAX_ATTEMPTS_PER_PROVIDER),
    );
    let max_cost = match raw.max_cost {
        Some(c) if !(c.is_finite() && c > 0.0) => {
            issues.push(
                format!("{path}.max_cost"),
                format!("{c} is not a positive amount"),
            );
            None
        }
        c => c,
    };
    let commit_point = match raw.commit_point.as_deref() {
        None | Some("first_token") => CommitPoint::FirstToken,
        Some("complete") => CommitPoint::Complete,
        Some(other) => {
            issues.push(
                format!("{path}.commit_point"),
                format!(
                    "unknown commit point {other:?} (expected \"first_token\" or \"complete\")"
                ),
            );
            CommitPoint::FirstToken
        }
    };
    let b = raw.backoff.unwrap_or_default();
    let backoff = BackoffSettings {
        initial: parse_or(
            issues,
            &format!("{path}.backoff.initial"),
            b.initial.as_deref(),
            d::BACKOFF_INITIAL,
        ),
        max: parse_or(
            issues,
            &format!("{path}.backoff.max"),
            b.max.as_deref(),
            d::BACKOFF_MAX,
        ),
        jitter: b.jitter.unwrap_or(true),
    };
    if backoff.max < backoff.initial {
        issues.push(
            format!("{path}.backoff.max"),
            "must not be shorter than backoff.initial",
        );
    }
    let mut on: HashMap<ErrorClass, ClassAction> = ErrorClass::ALL
        .into_iter()
        .map(|c| (c, d::class_action(c)))
        .collect();
    for (class_name, action) in &raw.on {
        let cpath = format!("{path}.on.{class_name}");
        let class = match class_name.parse::<ErrorClass>() {
            Ok(c) => c,
            Err(e) => {
                issues.push(cpath, e.to_string());
                continue;
            }
        };
        let parsed = match action.as_str() {
            "retry" => ClassAction::Retry,
            "next" => ClassAction::Next,
            "fail" => ClassAction::Fail,
            other => {
                issues.push(
                    cpath,
                    format!("unknown action {other:?} (expected \"retry\", \"next\" or \"fail\")"),
                );
                continue;
            }
        };
        on.insert(class, parsed);
    }
    let hedge_after = raw
        .hedge_after
        .as_deref()
        .and_then(|h| parse(issues, &format!("{path}.hedge_after"), h));
    PolicySettings {
        name: name.to_owned(),
        chain: raw.chain,
        deadline: parse_or(
            issues,
            &format!("{path}.deadline"),
            raw.deadline.as_deref(),
            d::DEADLINE,
        ),
        max_requests: to_u32(issues, &format!("{path}.max_requests"), max_requests),
        max_cost,
        max_attempts_per_provider: to_u32(
            issues,
            &format!("{path}.max_attempts_per_provider"),
            per_provider,
        ),
        commit_point,
        hedge_after,
        data_classes,
        backoff,
        on,
    }
}

fn action(
    issues: &mut ConfigIssues,
    ledger: &LedgerSettings,
    name: &str,
    raw: RawAction,
) -> ActionContract {
    let path = format!("actions.{name}");
    name_ok(issues, &path, name);
    let block = match raw.block.as_deref() {
        None | Some("operation") => BlockSetting::Operation,
        Some("scope") => BlockSetting::Scope,
        Some("action") => BlockSetting::Action,
        Some(other) => {
            issues.push(
                format!("{path}.block"),
                format!("unknown block width {other:?} (expected \"operation\", \"scope\" or \"action\")"),
            );
            BlockSetting::Operation
        }
    };
    let idempotency = raw.idempotency.and_then(|i| {
        let hpath = format!("{path}.idempotency.header");
        let valid_header = !i.header.is_empty()
            && i.header
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid_header {
            issues.push(hpath, format!("{:?} is not a valid header name", i.header));
        }
        let retention = parse(
            issues,
            &format!("{path}.idempotency.retention"),
            &i.retention,
        )?;
        valid_header.then_some(IdempotencyContract {
            header: i.header,
            retention,
        })
    });
    let lookup = raw.lookup.and_then(|l| {
        let visibility_lag = parse(
            issues,
            &format!("{path}.lookup.visibility_lag"),
            &l.visibility_lag,
        )?;
        let check_every = parse_or(
            issues,
            &format!("{path}.lookup.check_every"),
            l.check_every.as_deref(),
            d::CHECK_EVERY,
        );
        let max_check_every = parse_or(
            issues,
            &format!("{path}.lookup.max_check_every"),
            l.max_check_every.as_deref(),
            d::MAX_CHECK_EVERY.max(check_every),
        );
        if max_check_every < check_every {
            issues.push(
                format!("{path}.lookup.max_check_every"),
                "must not be shorter than lookup.check_every",
            );
        }
        Some(LookupContract {
            visibility_lag,
            check_every,
            max_check_every,
        })
    });
    ActionContract {
        name: name.to_owned(),
        block,
        lease: parse_or(
            issues,
            &format!("{path}.lease"),
            raw.lease.as_deref(),
            ledger.lease,
        ),
        timeout: parse_or(
            issues,
            &format!("{path}.timeout"),
            raw.timeout.as_deref(),
            d::ACTION_TIMEOUT,
        ),
        idempotency,
        lookup,
    }
}
