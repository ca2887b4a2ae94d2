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

mod caller;
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
use std::time::Duration;

pub use caller::Caller;
pub use report::{
    Attempt, AttemptResult, Completion, FailureReason, Partial, Skip, SkipReason, TaskFailure,
};
pub use stream::{RoutedStream, StreamBroken};
pub use task::Task;

use handover_ledger::{TaskBudgets, TaskId, TaskLimits, TaskOpen};

use crate::breaker::BreakerState;
use crate::budget::Budget;
use crate::config::{Config, Hop, PolicySettings, Route};
use crate::error::RouterError;
use crate::metrics::{PolicySeries, ProviderSeries};
use upstream::Upstream;

/// How long a shared task budget is kept after its deadline: a late call
/// under the task id within it is refused as exhausted; after it the id
/// opens a new task.
pub const TASK_GRACE: Duration = Duration::from_secs(3600);

/// A new task's id: a UUID v7 (time-ordered to the millisecond, 74 random
/// bits). Not `Uuid::now_v7`, whose process-wide context (a lock and a
/// counter, so that ids made within one millisecond sort in creation
/// order) costs a routed call more than half again what this does; task
/// ids only need to be unique, and the gateway's answer ids made from them
/// carry no order either.
fn task_id() -> uuid::Uuid {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    uuid::Uuid::new_v7(uuid::Timestamp::from_unix(
        uuid::NoContext,
        now.as_secs(),
        now.subsec_nanos(),
    ))
}

/// Routes chat calls over configured providers. Cheap to clone; build once
/// per process from a [`Config`].
#[derive(Debug, Clone)]
pub struct Router {
    config: Config,
    upstreams: Arc<ByName<Arc<Upstream>>>,
    policies: Arc<ByName<Policy>>,
    /// The policy of routes that name none.
    builtin: Policy,
}

/// A map keyed by names from the config (providers, policies): looked up
/// on every call, and only ever filled from the config, so a fast hasher
/// without flooding resistance serves (a request's name that is not a key
/// only misses).
type ByName<V> = HashMap<String, V, foldhash::fast::RandomState>;

/// A policy as its tasks start from it, built once with the router: a
/// task takes reference counts, not a copy of the chain or the name.
#[derive(Debug, Clone)]
struct Policy {
    settings: Arc<PolicySettings>,
    chain: Arc<[Hop]>,
    series: Arc<PolicySeries>,
}

impl Policy {
    /// `providers`: every provider's metric series, in index order.
    fn new(settings: &PolicySettings, providers: &[&ProviderSeries]) -> Self {
        Self {
            chain: settings.chain.as_slice().into(),
            series: Arc::new(PolicySeries::new(&settings.name, providers)),
            settings: Arc::new(settings.clone()),
        }
    }
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
        let built = config
            .providers()
            .values()
            .enumerate()
            .map(|(i, p)| Ok(Arc::new(Upstream::build(i, p, env)?)))
            .collect::<Result<Vec<_>, RouterError>>()?;
        let series: Vec<&ProviderSeries> = built.iter().map(|u| &u.series).collect();
        let policies = config
            .policies()
            .iter()
            .map(|(name, p)| (name.clone(), Policy::new(p, &series)))
            .collect();
        let builtin = Policy::new(config.builtin_policy(), &series);
        let upstreams = built
            .iter()
            .map(|u| (u.config.name.clone(), u.clone()))
            .collect();
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
        let policy = self.by_policy(policy)?;
        Ok(self.start(policy))
    }

    /// Starts a user task for a resolved model name (see
    /// [`Config::route`]): the route's chain under its policy's budget.
    pub fn task_for(&self, route: &Route) -> Result<Task, RouterError> {
        let policy = self.by_route(route)?;
        Ok(self.start(policy))
    }

    /// A policy with its own chain.
    fn by_policy(&self, policy: &str) -> Result<Policy, RouterError> {
        self.policies
            .get(policy)
            .cloned()
            .ok_or_else(|| RouterError::UnknownPolicy(policy.to_owned()))
    }

    /// A route's policy (or the built-in defaults) with the route's chain.
    fn by_route(&self, route: &Route) -> Result<Policy, RouterError> {
        let policy = match &route.policy {
            None => self.builtin.clone(),
            Some(p) => self
                .policies
                .get(p)
                .ok_or_else(|| RouterError::UnknownPolicy(p.clone()))?
                .clone(),
        };
        // A policy's name or alias resolves to the policy's own chain:
        // the task shares it (no copy, and its providers were checked
        // when the router was built).
        if *policy.chain == *route.chain {
            return Ok(policy);
        }
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
        Ok(Policy {
            chain: route.chain.as_slice().into(),
            ..policy
        })
    }

    fn start(&self, policy: Policy) -> Task {
        crate::metrics::task_started(&policy.series);
        let settings = &policy.settings;
        Task {
            id: task_id(),
            budget: Arc::new(Budget::new(
                settings.deadline,
                settings.max_requests,
                settings.max_cost,
            )),
            late: Arc::default(),
            caller: None,
            policy: policy.settings,
            series: policy.series,
            chain: policy.chain,
        }
    }

    /// Joins the user task `id` whose budget lives in `store`, shared by
    /// every call under that id in every process using the store: the
    /// first call opens it under `policy` (its deadline, `max_requests` and
    /// cost ceiling start then); later calls draw from what is left. A call
    /// naming another policy than the first is refused
    /// ([`RouterError::TaskPolicyMismatch`]); an unreachable store is
    /// [`RouterError::Ledger`] (nothing sent). An exhausted task is joined:
    /// its calls fail with the budget's reason without sending anything.
    pub async fn join_task(
        &self,
        policy: &str,
        store: Arc<dyn TaskBudgets>,
        id: &TaskId,
    ) -> Result<Task, RouterError> {
        let policy = self.by_policy(policy)?;
        self.join(policy, store, id).await
    }

    /// Like [`Router::join_task`] for a resolved model name (see
    /// [`Config::route`]): the route's chain under its policy, whose name
    /// the task keeps.
    pub async fn join_task_for(
        &self,
        route: &Route,
        store: Arc<dyn TaskBudgets>,
        id: &TaskId,
    ) -> Result<Task, RouterError> {
        let policy = self.by_route(route)?;
        self.join(policy, store, id).await
    }

    async fn join(
        &self,
        policy: Policy,
        store: Arc<dyn TaskBudgets>,
        id: &TaskId,
    ) -> Result<Task, RouterError> {
        let settings = &policy.settings;
        let limits = TaskLimits {
            policy: settings.name.clone(),
            deadline: settings.deadline,
            max_requests: settings.max_requests,
            max_cost: settings.max_cost,
            grace: TASK_GRACE,
        };
        let view = match store.open_task(id, &limits).await? {
            TaskOpen::Opened(view) => {
                crate::metrics::task_started(&policy.series);
                view
            }
            TaskOpen::Joined(view) => view,
            TaskOpen::PolicyMismatch(view) => {
                return Err(RouterError::TaskPolicyMismatch {
                    task: id.task.to_string(),
                    recorded: view.policy,
                    requested: settings.name.clone(),
                });
            }
        };
        Ok(Task {
            id: task_id(),
            budget: Arc::new(Budget::shared(store, view)),
            late: Arc::default(),
            caller: None,
            policy: policy.settings,
            series: policy.series,
            chain: policy.chain,
        })
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
