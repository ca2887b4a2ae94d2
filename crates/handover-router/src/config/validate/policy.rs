//! `[policies.NAME]`: the chain, the task budget, retries and backoff, the
//! streaming commit point, data classes and the error-class table.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::super::chain::{MODEL_PLACEHOLDER, hop};
use super::super::defaults as d;
use super::super::duration::{parse, parse_or};
use super::super::issues::ConfigIssues;
use super::super::model::Hop;
use super::super::model::{
    BackoffSettings, ClassAction, CommitPoint, ErrorClass, PolicySettings, ProviderConfig,
};
use super::super::raw::{RawBackoff, RawPolicy};
use super::{choice, name_ok, positive_u32};

pub(super) fn validate(
    issues: &mut ConfigIssues,
    providers: &BTreeMap<String, ProviderConfig>,
    name: &str,
    raw: RawPolicy,
) -> PolicySettings {
    let path = format!("policies.{name}");
    name_ok(issues, &path, name);
    let chain = chain(issues, &format!("{path}.chain"), providers, &raw.chain);
    let data_classes = data_classes(issues, &path, providers, &raw);
    let max_requests = positive_u32(
        issues,
        &format!("{path}.max_requests"),
        raw.max_requests,
        d::MAX_REQUESTS,
    );
    let max_attempts_per_provider = positive_u32(
        issues,
        &format!("{path}.max_attempts_per_provider"),
        raw.max_attempts_per_provider,
        d::MAX_ATTEMPTS_PER_PROVIDER,
    );
    let max_cost = max_cost(issues, &path, raw.max_cost);
    let commit_point = choice(
        issues,
        &format!("{path}.commit_point"),
        "commit point",
        raw.commit_point.as_deref(),
        &[
            (CommitPoint::FirstToken.as_str(), CommitPoint::FirstToken),
            (CommitPoint::Complete.as_str(), CommitPoint::Complete),
        ],
    )
    .unwrap_or(CommitPoint::FirstToken);
    let backoff = backoff(issues, &path, raw.backoff.unwrap_or_default());
    let on = class_actions(issues, &path, &raw.on);
    let abandon_after = raw
        .abandon_after
        .as_deref()
        .and_then(|h| parse(issues, &format!("{path}.abandon_after"), h));
    PolicySettings {
        name: name.to_owned(),
        deadline: parse_or(
            issues,
            &format!("{path}.deadline"),
            raw.deadline.as_deref(),
            d::DEADLINE,
        ),
        chain,
        max_requests,
        max_cost,
        max_attempts_per_provider,
        commit_point,
        abandon_after,
        data_classes,
        backoff,
        on,
    }
}

/// The policy of names that name none (`provider/model` without
/// `gateway.direct_policy`, routes without `policy`): every setting at its
/// default. Its name, `(defaults)`, can be no policy's name.
pub(super) fn builtin() -> PolicySettings {
    let mut issues = ConfigIssues::default();
    PolicySettings {
        name: BUILTIN_POLICY.to_owned(),
        chain: Vec::new(),
        deadline: d::DEADLINE,
        max_requests: d::MAX_REQUESTS,
        max_cost: None,
        max_attempts_per_provider: d::MAX_ATTEMPTS_PER_PROVIDER,
        commit_point: CommitPoint::FirstToken,
        abandon_after: None,
        data_classes: BTreeSet::new(),
        backoff: backoff(&mut issues, "", RawBackoff::default()),
        on: class_actions(&mut issues, "", &BTreeMap::new()),
    }
}

/// The name of [`builtin`].
const BUILTIN_POLICY: &str = "(defaults)";

/// At least one entry, each a configured provider (and a model it serves),
/// none twice. `path` is the chain's own path (`policies.NAME.chain`).
pub(super) fn chain(
    issues: &mut ConfigIssues,
    path: &str,
    providers: &BTreeMap<String, ProviderConfig>,
    entries: &[String],
) -> Vec<Hop> {
    if entries.is_empty() {
        issues.push(path, "must name at least one provider");
    }
    let mut hops: Vec<Hop> = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let at = format!("{path}[{i}]");
        if entry.contains(MODEL_PLACEHOLDER) {
            issues.push(
                at,
                format!("{MODEL_PLACEHOLDER} is only known in [gateway.routes]"),
            );
            continue;
        }
        match hop(providers, entry) {
            Err(e) => issues.push(at, e),
            Ok(h) if hops.contains(&h) => {
                issues.push(at, format!("duplicate step {:?} in chain", h.to_string()));
            }
            Ok(h) => hops.push(h),
        }
    }
    hops
}

/// Each data class the policy serves must be accepted by a provider of its chain.
fn data_classes(
    issues: &mut ConfigIssues,
    path: &str,
    providers: &BTreeMap<String, ProviderConfig>,
    raw: &RawPolicy,
) -> BTreeSet<String> {
    let mut classes = BTreeSet::new();
    for (i, class) in raw.data_classes.iter().enumerate() {
        let accepted = raw
            .chain
            .iter()
            .filter_map(|entry| providers.get(provider_of(entry)))
            .any(|p| p.data_classes.contains(class));
        if !accepted {
            issues.push(
                format!("{path}.data_classes[{i}]"),
                format!("no provider in the chain accepts data class {class:?}"),
            );
        }
        classes.insert(class.clone());
    }
    classes
}

fn max_cost(issues: &mut ConfigIssues, path: &str, raw: Option<f64>) -> Option<f64> {
    match raw {
        Some(c) if !(c.is_finite() && c > 0.0) => {
            issues.push(
                format!("{path}.max_cost"),
                format!("{c} is not a positive amount"),
            );
            None
        }
        c => c,
    }
}

fn backoff(issues: &mut ConfigIssues, path: &str, b: RawBackoff) -> BackoffSettings {
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
    backoff
}

/// The defaults for every class, with the file's `on` table merged over them.
fn class_actions(
    issues: &mut ConfigIssues,
    path: &str,
    raw: &BTreeMap<String, String>,
) -> HashMap<ErrorClass, ClassAction> {
    let mut on: HashMap<ErrorClass, ClassAction> = ErrorClass::ALL
        .into_iter()
        .map(|c| (c, d::class_action(c)))
        .collect();
    let actions = [
        ("retry", ClassAction::Retry),
        ("next", ClassAction::Next),
        ("fail", ClassAction::Fail),
    ];
    for (class_name, action) in raw {
        let cpath = format!("{path}.on.{class_name}");
        let class = match class_name.parse::<ErrorClass>() {
            Ok(c) => c,
            Err(e) => {
                issues.push(cpath, e.to_string());
                continue;
            }
        };
        if let Some(action) = choice(issues, &cpath, "action", Some(action), &actions) {
            on.insert(class, action);
        }
    }
    on
}

/// The provider part of a chain entry.
pub(super) fn provider_of(entry: &str) -> &str {
    entry.split_once('/').map_or(entry, |(p, _)| p)
}
