//! `[providers.NAME]`: kind, endpoint, key variable, data classes, limits,
//! prices, timeouts, breaker and per-model settings.

use std::collections::{BTreeMap, BTreeSet};

use handover_providers::Capability;

use super::super::defaults as d;
use super::super::duration::parse_or;
use super::super::issues::ConfigIssues;
use super::super::model::{
    BreakerSettings, ModelSet, OpenAiApi, Prices, ProviderConfig, ProviderKind, Timeouts,
    model_name_ok,
};
use super::super::raw::{RawBreaker, RawModel, RawModels, RawProvider, RawTimeouts};
use super::{EnvLookup, choice, name_ok, name_set, positive, positive_u32};

pub(super) fn validate(
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
            let known = ProviderKind::ALL
                .map(|k| format!("{:?}", k.as_str()))
                .join(", ");
            let other = &raw.kind;
            issues.push(
                format!("{path}.kind"),
                format!("unknown provider kind {other:?} (expected one of {known})"),
            );
            return None;
        }
    };
    endpoint(issues, &path, kind, &raw);
    let api = api(issues, &path, kind, raw.api.as_deref());
    api_key(issues, missing_keys, env, &path, raw.api_key_env.as_deref());
    let data_classes = name_set(
        issues,
        &format!("{path}.data_classes"),
        "data class",
        &raw.data_classes,
    );
    let prices = prices(issues, &path, &raw);
    let fallback_share = fallback_share(issues, &path, raw.fallback_share);
    let timeouts = timeouts(issues, &path, raw.timeouts.unwrap_or_default());
    let breaker = breaker(issues, &path, raw.breaker.unwrap_or_default());
    let (models, settings) = models(issues, &path, &raw.model, raw.models);
    let no_reasoning_passback = no_reasoning_passback(issues, &path, &settings);
    let supports = supports(issues, &path, api, raw.supports.unwrap_or_default());
    Some(ProviderConfig {
        name: name.to_owned(),
        kind,
        base_url: raw.base_url,
        api_version: raw.api_version,
        api,
        model: raw.model,
        models,
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
        supports,
    })
}

/// `base_url` (an http(s) URL, required where the kind has no default:
/// `openai_compatible`, `azure_openai`), `api_version` (only where the kind
/// pins one) and `model`.
fn endpoint(issues: &mut ConfigIssues, path: &str, kind: ProviderKind, raw: &RawProvider) {
    match &raw.base_url {
        Some(url) => {
            if let Err(why) = http_url(url) {
                issues.push(format!("{path}.base_url"), why);
            }
        }
        None if kind.default_base_url().is_none() => issues.push(
            format!("{path}.base_url"),
            format!("required for kind {:?}", kind.as_str()),
        ),
        _ => {}
    }
    match &raw.api_version {
        Some(_) if kind.default_api_version().is_none() => issues.push(
            format!("{path}.api_version"),
            format!("kind {:?} has no API version to pin", kind.as_str()),
        ),
        Some(v) if v.is_empty() || !v.bytes().all(version_byte) => issues.push(
            format!("{path}.api_version"),
            format!("{v:?} is not a version like \"2024-10-21\""),
        ),
        _ => {}
    }
    if raw.model.trim().is_empty() {
        issues.push(format!("{path}.model"), "must not be empty");
    }
}

/// `api`: the OpenAI API to call, only where the kind has two.
fn api(issues: &mut ConfigIssues, path: &str, kind: ProviderKind, raw: Option<&str>) -> OpenAiApi {
    let apath = format!("{path}.api");
    let two = matches!(kind, ProviderKind::OpenAi | ProviderKind::AzureOpenAi);
    match raw {
        Some(_) if !two => {
            issues.push(
                apath,
                format!(
                    "kind {:?} has one API; only openai and azure_openai choose between chat_completions and responses",
                    kind.as_str()
                ),
            );
            OpenAiApi::default()
        }
        _ => {
            let choices = OpenAiApi::ALL.map(|a| (a.as_str(), a));
            choice(issues, &apath, "API", raw, &choices).unwrap_or_default()
        }
    }
}

/// Characters of an API version (`2024-10-21`, `2025-01-01-preview`).
fn version_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._".contains(&b)
}

/// An absolute http(s) URL with a host, as every request is built on it,
/// and without credentials; the error quotes the URL (never a password).
pub(super) fn http_url(text: &str) -> Result<(), String> {
    let url = reqwest::Url::parse(text).map_err(|_| format!("{text:?} is not a valid URL"))?;
    if let Some(why) = credentials(&url) {
        return Err(why);
    }
    let why = if !matches!(url.scheme(), "http" | "https") {
        "is not an http(s) URL"
    } else if url.host_str().is_none_or(str::is_empty) {
        "has no host"
    } else if url.query().is_some() || url.fragment().is_some() {
        "must not have a query or fragment (paths are appended to it)"
    } else {
        return Ok(());
    };
    Err(format!("{text:?} {why}"))
}

/// Why `url` may not be used if it carries `user:password@` (secrets come
/// from environment variables, never from the file), naming only the host.
pub(super) fn credentials(url: &reqwest::Url) -> Option<String> {
    (!url.username().is_empty() || url.password().is_some()).then(|| {
        format!(
            "the URL for {} carries credentials (user:password@); secrets come from environment variables (api_key_env, or a header = {{ env = \"VAR\" }}), never from this file",
            url.host_str().unwrap_or("its host")
        )
    })
}

/// `api_key_env` must name a variable; an unset one is reported apart
/// (an error at startup, a warning for `handover check`).
fn api_key(
    issues: &mut ConfigIssues,
    missing_keys: &mut ConfigIssues,
    env: EnvLookup<'_>,
    path: &str,
    var: Option<&str>,
) {
    match var {
        None => {}
        Some(var) if let Some(problem) = super::env_name_problem(var) => {
            issues.push(format!("{path}.api_key_env"), problem);
        }
        Some(var) if let Some(why) = super::secret_missing(env, var) => {
            missing_keys.push(format!("{path}.api_key_env"), why);
        }
        Some(_) => {}
    }
}

/// Both prices or neither, each a non-negative number.
fn prices(issues: &mut ConfigIssues, path: &str, raw: &RawProvider) -> Option<Prices> {
    let (input, output) = (raw.price_input_per_mtok, raw.price_output_per_mtok);
    if input.is_none() && output.is_none() {
        return None;
    }
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

fn fallback_share(issues: &mut ConfigIssues, path: &str, raw: Option<f64>) -> f64 {
    match raw {
        None => d::FALLBACK_SHARE,
        Some(s) if s > 0.0 && s <= 1.0 => s,
        Some(s) => {
            issues.push(
                format!("{path}.fallback_share"),
                format!("{s} is not in (0, 1]"),
            );
            d::FALLBACK_SHARE
        }
    }
}

fn timeouts(issues: &mut ConfigIssues, path: &str, t: RawTimeouts) -> Timeouts {
    let mut timeout = |field: &str, raw: Option<String>, default| {
        parse_or(
            issues,
            &format!("{path}.timeouts.{field}"),
            raw.as_deref(),
            default,
        )
    };
    Timeouts {
        connect: timeout("connect", t.connect, d::CONNECT),
        first_byte: timeout("first_byte", t.first_byte, d::FIRST_BYTE),
        stream_first_byte: timeout(
            "stream_first_byte",
            t.stream_first_byte,
            d::STREAM_FIRST_BYTE,
        ),
        first_token: timeout("first_token", t.first_token, d::FIRST_TOKEN),
        idle: timeout("idle", t.idle, d::IDLE),
        total: timeout("total", t.total, d::TOTAL),
    }
}

fn breaker(issues: &mut ConfigIssues, path: &str, b: RawBreaker) -> BreakerSettings {
    let failure_threshold = positive_u32(
        issues,
        &format!("{path}.breaker.failure_threshold"),
        b.failure_threshold,
        d::BREAKER_FAILURES,
    );
    let half_open_probes = positive_u32(
        issues,
        &format!("{path}.breaker.half_open_probes"),
        b.half_open_probes,
        d::BREAKER_PROBES,
    );
    BreakerSettings {
        failure_threshold,
        open_for: parse_or(
            issues,
            &format!("{path}.breaker.open_for"),
            b.open_for.as_deref(),
            d::BREAKER_OPEN_FOR,
        ),
        half_open_probes,
    }
}

/// `models`: `"*"`, a list, or a table of per-model settings (returned
/// apart). The default `model` is always served.
fn models(
    issues: &mut ConfigIssues,
    path: &str,
    default: &str,
    raw: Option<RawModels>,
) -> (ModelSet, BTreeMap<String, RawModel>) {
    let mpath = format!("{path}.models");
    let (names, settings) = match raw {
        None => (Vec::new(), BTreeMap::new()),
        Some(RawModels::Any(s)) if s == "*" => return (ModelSet::Any, BTreeMap::new()),
        Some(RawModels::Any(s)) => {
            issues.push(
                mpath,
                format!("{s:?} is not \"*\" (any model), a list of model names or a table"),
            );
            (Vec::new(), BTreeMap::new())
        }
        Some(RawModels::List(names)) => {
            let names = names.into_iter().enumerate();
            let named = names.map(|(i, n)| (format!("{mpath}[{i}]"), n)).collect();
            (named, BTreeMap::new())
        }
        Some(RawModels::Table(table)) => {
            let named = table.keys().map(|n| (format!("{mpath}.{n}"), n.clone()));
            (named.collect(), table)
        }
    };
    let mut set = BTreeSet::from([default.to_owned()]);
    for (at, name) in names {
        if name == "*" {
            issues.push(at, "\"*\" stands alone: write models = \"*\"");
        } else if !model_name_ok(&name) {
            issues.push(
                at,
                format!("invalid model name {name:?} (use 1-255 visible ASCII characters)"),
            );
        }
        set.insert(name);
    }
    (ModelSet::Listed(set), settings)
}

/// Models whose reasoning content must never be passed back.
fn no_reasoning_passback(
    issues: &mut ConfigIssues,
    path: &str,
    models: &BTreeMap<String, RawModel>,
) -> BTreeSet<String> {
    let choices = [("tool_calls", false), ("never", true)];
    models
        .iter()
        .filter(|(model, m)| {
            let mpath = format!("{path}.models.{model}.reasoning_passback");
            let value = m.reasoning_passback.as_deref();
            choice(issues, &mpath, "value", value, &choices).unwrap_or(false)
        })
        .map(|(model, _)| model.clone())
        .collect()
}

/// `supports`: capability overrides, each name one of [`Capability::ALL`],
/// none claiming what the provider's API cannot express (the adapter would
/// refuse every such request).
fn supports(
    issues: &mut ConfigIssues,
    path: &str,
    api: OpenAiApi,
    raw: BTreeMap<String, bool>,
) -> BTreeMap<Capability, bool> {
    raw.into_iter()
        .filter_map(|(name, on)| match Capability::from_name(&name) {
            Some(c) if on && !api.supports(c) => {
                issues.push(
                    format!("{path}.supports.{name}"),
                    format!("the {api} API cannot express {name}; call this provider through chat_completions to declare it"),
                );
                None
            }
            Some(c) => Some((c, on)),
            None => {
                let known = Capability::ALL.map(Capability::as_str).join(", ");
                issues.push(
                    format!("{path}.supports.{name}"),
                    format!("unknown capability {name:?} (expected one of {known})"),
                );
                None
            }
        })
        .collect()
}
