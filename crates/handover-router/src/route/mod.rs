//! Content generation (DESIGN §7): answer a user task through a chain of
//! providers under one shared budget.
//!
//! Each call walks the policy's chain (one walk for the plain and the
//! streaming path, see `walk.rs`), skipping providers that may not receive
//! the request's data class, whose breaker is open or whose admission queue
//! is full — skips are reported apart from attempts. On one provider, an
//! error's class picks the action from the policy's table: retry (with
//! backoff that must fit the budget, never before Retry-After, and only
//! while the breaker lets it through), move to the next provider, or fail.
//! Every HTTP request is counted at the transport against the task's
//! budget; every wait is cut at its deadline.

mod chat;
mod late;
mod report;
mod run;
mod stream;
mod task;
mod upstream;
mod walk;

use std::collections::HashMap;
use std::sync::Arc;

pub use report::{
    Attempt, AttemptResult, Completion, FailureReason, Partial, Skip, SkipReason, TaskFailure,
};
pub use stream::{RoutedStream, StreamBroken};
pub use task::Task;

use crate::breaker::BreakerState;
use crate::budget::Budget;
use crate::config::{Config, PolicySettings, Route};
use crate::error::RouterError;
use upstream::Upstream;

/// Routes chat calls over configured providers. Cheap to clone; build once
/// per process from a [`Config`].
#[derive(Debug, Clone)]
pub struct Router {
    config: Config,
    upstreams: Arc<HashMap<String, Arc<Upstream>>>,
    policies: Arc<HashMap<String, Arc<PolicySettings>>>,
    /// The policy of routes that name none.
    builtin: Arc<PolicySettings>,
}

impl Router {
    /// Builds every provider of `config`, with API keys from the process
    /// environment. A missing key is an error now, not at the first call.
    pub fn new(config: &Config) -> Result<Self, RouterError> {
        Self::with_env(config, &|var| std::env::var(var).ok())
    }

    /// Like [`Router::new`] with an explicit environment lookup.
    pub fn with_env(
        config: &Config,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, RouterError> {
        let upstreams = config
            .providers()
            .values()
            .map(|p| Ok((p.name.clone(), Arc::new(Upstream::build(p, env)?))))
            .collect::<Result<HashMap<_, _>, RouterError>>()?;
        let policies = config
            .policies()
            .iter()
            .map(|(name, p)| (name.clone(), Arc::new(p.clone())))
            .collect();
        let builtin = Arc::new(config.builtin_policy().clone());
        Ok(Self {
            builtin,
            config: config.clone(),
            upstreams: Arc::new(upstreams),
            policies: Arc::new(policies),
        })
    }

    /// Starts a user task under `policy` (its chain, its budget): the
    /// budget starts now.
    pub fn task(&self, policy: &str) -> Result<Task, RouterError> {
        let policy = self
            .policies
            .get(policy)
            .ok_or_else(|| RouterError::UnknownPolicy(policy.to_owned()))?
            .clone();
        let chain = policy.chain.as_slice().into();
        Ok(self.start(policy, chain))
    }

    /// Starts a user task for a resolved model name (see
    /// [`Config::route`]): the route's chain under its policy's budget.
    pub fn task_for(&self, route: &Route) -> Result<Task, RouterError> {
        let policy = match &route.policy {
            None => self.builtin.clone(),
            Some(p) => self
                .policies
                .get(p)
                .ok_or_else(|| RouterError::UnknownPolicy(p.clone()))?
                .clone(),
        };
        if let Some(h) = route
            .chain
            .iter()
            .find(|h| !self.upstreams.contains_key(&h.provider))
        {
            return Err(RouterError::UnknownModel {
                name: route.name.clone(),
                reason: format!("unknown provider {:?}", h.provider),
            });
        }
        Ok(self.start(policy, route.chain.as_slice().into()))
    }

    fn start(&self, policy: Arc<PolicySettings>, chain: Arc<[crate::config::Hop]>) -> Task {
        crate::metrics::task_started(&policy.name);
        Task {
            id: uuid::Uuid::now_v7(),
            budget: Arc::new(Budget::new(
                policy.deadline,
                policy.max_requests,
                policy.max_cost,
            )),
            late: Arc::default(),
            policy,
            chain,
        }
    }

    /// The breaker state of a provider's default model (for health
    /// endpoints and tests): open if the provider's or the model's breaker is.
    pub fn breaker_state(&self, provider: &str) -> Option<BreakerState> {
        let u = self.upstreams.get(provider)?;
        Some(u.state(&u.config.model))
    }

    /// The breaker state of one model of a provider: open if the
    /// provider's or the model's breaker is.
    pub fn model_breaker_state(&self, provider: &str, model: &str) -> Option<BreakerState> {
        Some(self.upstreams.get(provider)?.state(model))
    }

    /// The configuration this router was built from.
    pub fn config(&self) -> &Config {
        &self.config
    }
}
