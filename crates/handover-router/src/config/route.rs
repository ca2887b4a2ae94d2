//! Resolving a request's `model` name to a [`Route`]: which policy's budget
//! and error table apply, and which provider/model steps it walks.

use super::Config;
use super::chain::{MODEL_PLACEHOLDER, glob_match, hop};
use super::model::{Hop, PolicySettings, Route, RouteVia};
use crate::error::RouterError;

impl Config {
    /// What a request naming `name` as its model runs: tried in this order,
    /// the first that fits wins —
    /// 1. a policy's name (its chain, its budget);
    /// 2. a `[gateway.models]` alias (its policy);
    /// 3. `provider/model`, a model the provider serves: that one step, no
    ///    fallback, under `gateway.direct_policy` (or the built-in defaults);
    /// 4. a `[gateway.routes]` pattern, most specific first (`{model}` in its
    ///    chain stands for `name`; a step repeated by the substitution is
    ///    walked once), under the route's `policy`.
    ///
    /// Fails with [`RouterError::UnknownModel`] saying why.
    pub fn route(&self, name: &str) -> Result<Route, RouterError> {
        let route = |via, policy: Option<&str>, chain| Route {
            name: name.to_owned(),
            via,
            policy: policy.map(str::to_owned),
            chain,
        };
        if let Some(p) = self.policy(name) {
            return Ok(route(RouteVia::Policy, Some(name), p.chain.clone()));
        }
        let gateway = self.gateway();
        if let Some(p) = gateway
            .and_then(|g| g.models.get(name))
            .and_then(|p| self.policy(p))
        {
            return Ok(route(RouteVia::Alias, Some(&p.name), p.chain.clone()));
        }
        let unknown = |reason: String| RouterError::UnknownModel {
            name: name.to_owned(),
            reason,
        };
        let mut why = None;
        if let Some((provider, _)) = name.split_once('/')
            && self.provider(provider).is_some()
        {
            match hop(self.providers(), name) {
                Ok(h) => {
                    let policy = gateway.and_then(|g| g.direct_policy.as_deref());
                    return Ok(route(RouteVia::Direct, policy, vec![h]));
                }
                Err(e) => why = Some(e),
            }
        }
        let routes = gateway.map(|g| g.routes.as_slice()).unwrap_or_default();
        if let Some(r) = routes.iter().find(|r| glob_match(&r.pattern, name)) {
            let mut chain: Vec<Hop> = Vec::with_capacity(r.chain.len());
            for (i, entry) in r.chain.iter().enumerate() {
                let h = hop(self.providers(), &entry.replace(MODEL_PLACEHOLDER, name))
                    .map_err(|e| unknown(format!("route {:?}, chain[{i}]: {e}", r.pattern)))?;
                if !chain.contains(&h) {
                    chain.push(h);
                }
            }
            let via = RouteVia::Pattern(r.pattern.clone());
            return Ok(route(via, r.policy.as_deref(), chain));
        }
        Err(unknown(why.unwrap_or_else(|| {
            "it is neither a policy, an alias, a provider/model a provider serves, nor matched by a route pattern".to_owned()
        })))
    }

    /// The policy settings a route runs under (its chain aside).
    pub fn route_policy(&self, route: &Route) -> &PolicySettings {
        route
            .policy
            .as_deref()
            .and_then(|p| self.policy(p))
            .unwrap_or(self.builtin_policy())
    }

    /// The policy of routes that name none: every setting at its default.
    pub(crate) fn builtin_policy(&self) -> &PolicySettings {
        &self.0.builtin
    }
}
