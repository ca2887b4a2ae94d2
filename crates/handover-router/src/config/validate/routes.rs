//! `[gateway.routes]`: request-name patterns with their own chain, run
//! under a policy. Everything that can be checked before a request arrives
//! is checked here; what depends on the requested name (whether a provider
//! listing its models serves it) is checked when the name is resolved.

use std::collections::BTreeMap;

use super::super::chain::{MODEL_PLACEHOLDER, globs_overlap, hop, specificity};
use super::super::issues::ConfigIssues;
use super::super::model::{
    Hop, ModelSet, PatternRoute, PolicySettings, ProviderConfig, model_name_ok,
};
use super::super::raw::RawRoute;
use super::policy::provider_of;

pub(super) fn validate(
    issues: &mut ConfigIssues,
    providers: &BTreeMap<String, ProviderConfig>,
    policies: &BTreeMap<String, PolicySettings>,
    aliases: &BTreeMap<String, String>,
    raw: BTreeMap<String, RawRoute>,
) -> Vec<PatternRoute> {
    let mut routes: Vec<PatternRoute> = raw
        .into_iter()
        .map(|(pattern, r)| {
            let path = format!("gateway.routes.{pattern:?}");
            if !model_name_ok(&pattern) {
                issues.push(&path, "a pattern must be 1-255 visible ASCII characters");
            }
            if !pattern.contains('*')
                && (policies.contains_key(&pattern) || aliases.contains_key(&pattern))
            {
                issues.push(
                    &path,
                    format!("{pattern:?} is already a policy or an alias"),
                );
            }
            if shadowed_by_direct(providers, &pattern) {
                issues.push(
                    &path,
                    "never matches: every name it matches is a provider/model that provider serves, which is resolved as that one step first",
                );
            }
            let policy = r.policy.and_then(|p| match policies.get(&p) {
                Some(p) => Some(p),
                None => {
                    issues.push(format!("{path}.policy"), format!("unknown policy {p:?}"));
                    None
                }
            });
            chain(
                issues,
                &format!("{path}.chain"),
                providers,
                &pattern,
                &r.chain,
            );
            if let Some(policy) = policy {
                data_classes(issues, &path, providers, policy, &r.chain);
            }
            PatternRoute {
                pattern,
                chain: r.chain,
                policy: policy.map(|p| p.name.clone()),
            }
        })
        .collect();
    // Most specific first; at equal specificity, two patterns some name
    // matches both would make the winner arbitrary.
    routes.sort_by(|a, b| {
        (specificity(&b.pattern), &a.pattern).cmp(&(specificity(&a.pattern), &b.pattern))
    });
    for (i, a) in routes.iter().enumerate() {
        for b in &routes[i + 1..] {
            if specificity(&a.pattern) == specificity(&b.pattern)
                && globs_overlap(&a.pattern, &b.pattern)
            {
                issues.push(
                    format!("gateway.routes.{:?}", b.pattern),
                    format!(
                        "overlaps {:?} at the same specificity: a name matching both would be ambiguous (make one more specific)",
                        a.pattern
                    ),
                );
            }
        }
    }
    routes
}

/// Whether every name `pattern` matches is `provider/model` with a model
/// that provider serves (resolved before any pattern): the exact name of a
/// served model, or `P/...` with something after the `/` when `P` serves
/// any model.
fn shadowed_by_direct(providers: &BTreeMap<String, ProviderConfig>, pattern: &str) -> bool {
    let literal = pattern.split('*').next().unwrap_or_default();
    let Some((provider, _)) = literal.split_once('/') else {
        return false;
    };
    let Some(p) = providers.get(provider) else {
        return false;
    };
    let model = &pattern[provider.len() + 1..];
    if !pattern.contains('*') {
        return p.models.serves(model);
    }
    p.models == ModelSet::Any && model.chars().any(|c| c != '*')
}

/// At least one entry; `{model}` only in the model part; entries that do
/// not depend on the requested name fully checked, and none twice.
fn chain(
    issues: &mut ConfigIssues,
    path: &str,
    providers: &BTreeMap<String, ProviderConfig>,
    pattern: &str,
    entries: &[String],
) {
    if entries.is_empty() {
        issues.push(path, "must name at least one provider");
    }
    let mut fixed: Vec<Hop> = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let provider = provider_of(entry);
        if provider.contains(MODEL_PLACEHOLDER) {
            issues.push(at, format!("{MODEL_PLACEHOLDER} may stand only after the provider (\"provider/{MODEL_PLACEHOLDER}\")"));
            continue;
        }
        let templated = entry.contains(MODEL_PLACEHOLDER);
        // A pattern without `*` is one name: its entries can be checked now.
        let entry = if pattern.contains('*') || !templated {
            entry.clone()
        } else {
            entry.replace(MODEL_PLACEHOLDER, pattern)
        };
        if entry.contains(MODEL_PLACEHOLDER) {
            if !providers.contains_key(provider) {
                issues.push(at, format!("unknown provider {provider:?}"));
            }
            continue;
        }
        match hop(providers, &entry) {
            Err(e) => issues.push(at, e),
            Ok(h) if fixed.contains(&h) => {
                issues.push(at, format!("duplicate step {:?} in chain", h.to_string()));
            }
            Ok(h) => fixed.push(h),
        }
    }
}

/// Each data class of the route's policy must be accepted by a provider of
/// the route's chain (as for the policy's own chain).
fn data_classes(
    issues: &mut ConfigIssues,
    path: &str,
    providers: &BTreeMap<String, ProviderConfig>,
    policy: &PolicySettings,
    entries: &[String],
) {
    for class in &policy.data_classes {
        let accepted = entries
            .iter()
            .filter_map(|e| providers.get(provider_of(e)))
            .any(|p| p.data_classes.contains(class));
        if !accepted {
            issues.push(
                format!("{path}.policy"),
                format!(
                    "policy {:?} serves data class {class:?}, which no provider of this chain accepts",
                    policy.name
                ),
            );
        }
    }
}
