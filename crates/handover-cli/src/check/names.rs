//! The names a request's `model` may give (policies, aliases,
//! `provider/model`, route patterns) and what each runs.

use std::fmt::Write as _;

use handover::Config;
use handover::router::config::{Hop, ModelSet, Route, RouteVia};

use super::d;
use crate::term::Style;

pub(super) fn chain(hops: &[Hop]) -> String {
    let hops: Vec<String> = hops.iter().map(Hop::to_string).collect();
    hops.join(" -> ")
}

/// Every name a request's `model` may give, and what it runs.
pub(super) fn names(out: &mut String, config: &Config, s: Style) {
    let _ = writeln!(
        out,
        "\n{}",
        s.bold("model names (what a request's `model` runs)")
    );
    let exact = config
        .policies()
        .keys()
        .chain(config.gateway().into_iter().flat_map(|g| g.models.keys()));
    for name in exact {
        if let Ok(r) = config.route(name) {
            route(out, config, &r);
        }
    }
    let direct = config.gateway().and_then(|g| g.direct_policy.as_deref());
    let under = direct.map_or_else(
        || "the built-in defaults".to_owned(),
        |p| format!("policy {p}"),
    );
    for p in config.providers().values() {
        match &p.models {
            ModelSet::Any => {
                let _ = writeln!(
                    out,
                    "  {}/*  (any model) -> that step alone, under {under}",
                    p.name
                );
            }
            ModelSet::Listed(models) => {
                for m in models {
                    let _ = writeln!(out, "  {}/{m}  -> that step alone, under {under}", p.name);
                }
            }
        }
    }
    for r in config
        .gateway()
        .map(|g| g.routes.as_slice())
        .unwrap_or_default()
    {
        let policy = r.policy.as_deref().map_or_else(
            || "the built-in defaults".to_owned(),
            |p| format!("policy {p}"),
        );
        let _ = writeln!(
            out,
            "  {:?}  (pattern; {{model}} = the requested name) -> chain {} under {policy}",
            r.pattern,
            r.chain.join(" -> ")
        );
    }
}

pub(super) fn route(out: &mut String, config: &Config, r: &Route) {
    let via = match &r.via {
        RouteVia::Policy => "policy".to_owned(),
        RouteVia::Alias => "alias".to_owned(),
        RouteVia::Direct => "provider/model".to_owned(),
        RouteVia::Pattern(p) => format!("route {p:?}"),
        _ => "resolved".to_owned(),
    };
    let policy = config.route_policy(r);
    let under = r.policy.as_ref().map_or_else(
        || "the built-in defaults".to_owned(),
        |p| format!("policy {p}"),
    );
    let _ = writeln!(
        out,
        "  {}  ({via}) -> chain {} under {under} (deadline {}, max {} request(s))",
        r.name,
        chain(&r.chain),
        d(policy.deadline),
        policy.max_requests
    );
}
