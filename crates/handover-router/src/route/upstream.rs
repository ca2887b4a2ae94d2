//! One configured provider at run time (an upstream): its adapter, circuit
//! breakers and admission control, shared by every task; and a [`Target`],
//! one provider and model as one step of a chain walks it.
//!
//! Breakers come in two levels (see `docs/decisions.md`): one per provider
//! for what fails for the whole account or endpoint (auth, billing, quota,
//! connect errors), one per model for what a provider fails per model
//! (rate limits, overload, 5xx, timeouts, broken streams). A try must pass
//! both. Admission (the concurrency cap) is per provider: accounts cap
//! concurrency across their models.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use handover_providers::{AnyProvider, ProviderSettings, ReasoningPassback, Usage};
use secrecy::SecretString;

use crate::admission::Admission;
use crate::breaker::{Breaker, BreakerState, Failure};
use crate::config::{ErrorClass, ProviderConfig};
use crate::error::RouterError;
use crate::metrics::ProviderSeries;

/// A provider of the configuration, built once per router.
#[derive(Debug)]
pub(crate) struct Upstream {
    pub(crate) provider: AnyProvider,
    pub(crate) config: ProviderConfig,
    /// Failures of the account or endpoint, whatever the model.
    pub(crate) breaker: Breaker,
    /// Failures of one model.
    models: ModelBreakers,
    pub(crate) admission: Admission,
    /// The series its attempts record.
    pub(crate) series: ProviderSeries,
}

impl Upstream {
    /// `index`: its place among the router's providers (its metric series).
    pub(crate) fn build(
        index: usize,
        config: &ProviderConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, RouterError> {
        let mut settings = ProviderSettings::new(&config.name, config.kind, &config.model)
            .with_timeouts(config.timeouts)
            .with_api(config.api);
        if let Some(url) = &config.base_url {
            settings = settings.with_base_url(url);
        }
        if let Some(version) = &config.api_version {
            settings = settings.with_api_version(version);
        }
        if let Some(var) = &config.api_key_env {
            let key =
                env(var)
                    .filter(|k| !k.is_empty())
                    .ok_or_else(|| RouterError::MissingApiKey {
                        provider: config.name.clone(),
                        variable: var.clone(),
                    })?;
            settings = settings.with_api_key(SecretString::from(key));
        }
        for model in &config.no_reasoning_passback {
            settings = settings.with_reasoning_passback(model, ReasoningPassback::Never);
        }
        let provider = AnyProvider::new(settings).map_err(|source| RouterError::Provider {
            provider: config.name.clone(),
            source,
        })?;
        Ok(Self {
            provider,
            series: ProviderSeries::new(index, &config.name),
            config: config.clone(),
            breaker: Breaker::new(config.breaker),
            models: ModelBreakers::new(config.breaker),
            admission: Admission::new(
                config.max_concurrency,
                config.max_queue,
                config.fallback_share,
            ),
        })
    }

    /// This provider asked for `model`, as one step of a chain.
    pub(crate) fn target(self: &Arc<Self>, model: &str) -> Target {
        Target {
            upstream: self.clone(),
            breaker: self.models.get(model),
            model: model.to_owned(),
        }
    }

    /// The state both breakers give `model`: open if either is open.
    pub(crate) fn state(&self, model: &str) -> BreakerState {
        let (p, m) = (self.breaker.state(), self.models.get(model).state());
        match (p, m) {
            (BreakerState::Open, _) | (_, BreakerState::Open) => BreakerState::Open,
            (BreakerState::HalfOpen, _) | (_, BreakerState::HalfOpen) => BreakerState::HalfOpen,
            _ => BreakerState::Closed,
        }
    }

    /// Whether this provider may receive a request of `class`.
    pub(crate) fn accepts(&self, data_class: Option<&str>) -> bool {
        data_class.is_none_or(|c| self.config.data_classes.contains(c))
    }

    pub(crate) fn cost(&self, usage: Option<&Usage>) -> Option<f64> {
        let (prices, usage) = (self.config.prices?, usage?);
        Some(
            (usage.input_tokens as f64 * prices.input_per_mtok
                + usage.output_tokens as f64 * prices.output_per_mtok)
                / 1e6,
        )
    }
}

/// Which breaker hears of a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    /// The account or endpoint: every model of the provider.
    Provider,
    /// The model asked for.
    Model,
}

/// How an error class affects the breakers, and which one.
fn breaker_failure(class: ErrorClass) -> Option<(Level, Failure)> {
    match class {
        ErrorClass::Auth | ErrorClass::Billing | ErrorClass::QuotaExhausted => {
            Some((Level::Provider, Failure::Account))
        }
        // Nothing reached the provider: its endpoint, not a model, failed.
        ErrorClass::ConnectBeforeSend => Some((Level::Provider, Failure::Ordinary)),
        ErrorClass::Timeout
        | ErrorClass::ConnectionLost
        | ErrorClass::RateLimited
        | ErrorClass::Overloaded
        | ErrorClass::ServerError
        | ErrorClass::StreamInterrupted
        | ErrorClass::StreamStalled
        | ErrorClass::MalformedStream
        | ErrorClass::Decode => Some((Level::Model, Failure::Ordinary)),
        // The request's own fault or our budget: says nothing about the provider.
        _ => None,
    }
}

/// One provider asked for one model: a step of a chain as the walk tries
/// it. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) upstream: Arc<Upstream>,
    /// The model's own breaker.
    breaker: Arc<Breaker>,
    pub(crate) model: String,
}

impl Target {
    /// The provider's name.
    pub(crate) fn provider(&self) -> &str {
        &self.upstream.config.name
    }
}

/// The per-model breakers of one provider, made on first use. A breaker
/// that has seen no failure carries no information, so when the map is
/// full (a provider serving `"*"` can be asked for any name) those are
/// dropped; if it is still full, further models share one overflow breaker.
#[derive(Debug)]
struct ModelBreakers {
    settings: crate::config::BreakerSettings,
    map: Mutex<HashMap<String, Arc<Breaker>>>,
    overflow: Arc<Breaker>,
}

/// Most per-model breakers one provider keeps.
const MAX_MODEL_BREAKERS: usize = 1024;

impl ModelBreakers {
    fn new(settings: crate::config::BreakerSettings) -> Self {
        Self {
            settings,
            map: Mutex::default(),
            overflow: Arc::new(Breaker::new(settings)),
        }
    }

    fn get(&self, model: &str) -> Arc<Breaker> {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = map.get(model) {
            return b.clone();
        }
        if map.len() >= MAX_MODEL_BREAKERS {
            map.retain(|_, b| Arc::strong_count(b) > 1 || !b.is_pristine());
            if map.len() >= MAX_MODEL_BREAKERS {
                return self.overflow.clone();
            }
        }
        let b = Arc::new(Breaker::new(self.settings));
        map.insert(model.to_owned(), b.clone());
        b
    }
}

/// Passage through a target's breakers (its provider's and its model's)
/// for one try: the breakers learn the try's outcome through it, and only
/// through it. If the try ends without telling anything about the provider
/// (the caller's budget ran out, the request's own fault) or is dropped
/// before its outcome is known (the caller's future was cancelled, a stream
/// was dropped mid-way), half-open probes are given back, so a breaker can
/// never stay half-open with no probes left.
pub(crate) struct BreakerTicket {
    target: Target,
    /// A half-open probe of the provider's breaker not yet reported.
    provider_probe: bool,
    /// A half-open probe of the model's breaker not yet reported.
    model_probe: bool,
}

impl BreakerTicket {
    /// Passage to `target`, or `None` while either of its breakers is open.
    pub(crate) fn admit(target: &Target) -> Option<Self> {
        let provider_probe = target.upstream.breaker.try_admit()?;
        let Some(model_probe) = target.breaker.try_admit() else {
            if provider_probe {
                target.upstream.breaker.release_probe();
            }
            return None;
        };
        Some(Self {
            target: target.clone(),
            provider_probe,
            model_probe,
        })
    }

    /// The provider answered: both breakers close.
    pub(crate) fn succeeded(&mut self) {
        self.target.upstream.breaker.record_success();
        self.target.breaker.record_success();
        (self.provider_probe, self.model_probe) = (false, false);
    }

    /// The try failed with `class`: the breaker it concerns counts it; the
    /// other one (and both, if it says nothing about the provider) gets its
    /// probe back.
    pub(crate) fn failed(&mut self, class: ErrorClass) {
        match breaker_failure(class) {
            Some((Level::Provider, f)) => {
                self.target.upstream.breaker.record_failure(f);
                self.provider_probe = false;
            }
            Some((Level::Model, f)) => {
                self.target.breaker.record_failure(f);
                self.model_probe = false;
            }
            None => {}
        }
        self.give_back();
    }

    /// The try says nothing about the provider: give probes back.
    pub(crate) fn give_back(&mut self) {
        if std::mem::take(&mut self.provider_probe) {
            self.target.upstream.breaker.release_probe();
        }
        if std::mem::take(&mut self.model_probe) {
            self.target.breaker.release_probe();
        }
    }
}

impl Drop for BreakerTicket {
    fn drop(&mut self) {
        self.give_back();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::BreakerSettings;

    fn breakers() -> ModelBreakers {
        ModelBreakers::new(BreakerSettings {
            failure_threshold: 2,
            open_for: Duration::from_secs(10),
            half_open_probes: 1,
        })
    }

    #[test]
    fn model_breakers_are_bounded_and_keep_what_they_learned() {
        let b = breakers();
        assert!(
            Arc::ptr_eq(&b.get("a"), &b.get("a")),
            "one breaker per model"
        );
        b.get("a").record_failure(Failure::Ordinary);
        // Fill up with names that never failed: they are dropped to make room.
        for i in 0..MAX_MODEL_BREAKERS {
            b.get(&format!("m{i}"));
        }
        let fresh = b.get("fresh");
        assert!(!Arc::ptr_eq(&fresh, &b.overflow));
        assert!(
            !b.get("a").is_pristine(),
            "a breaker that learned something is kept"
        );
        // Every place taken by a breaker that learned something: new names
        // share the overflow breaker.
        for i in 0..MAX_MODEL_BREAKERS {
            b.get(&format!("n{i}")).record_failure(Failure::Ordinary);
        }
        assert!(Arc::ptr_eq(&b.get("another"), &b.overflow));
        assert!(b.map.lock().unwrap().len() <= MAX_MODEL_BREAKERS);
    }
}
