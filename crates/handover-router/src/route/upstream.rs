//! One configured provider at run time (an upstream): its adapter, circuit
//! breaker and admission control, shared by every task.

use std::sync::Arc;

use handover_providers::{AnyProvider, ProviderSettings, ReasoningPassback, Usage};
use secrecy::SecretString;

use crate::admission::Admission;
use crate::breaker::{Breaker, Failure};
use crate::config::{ErrorClass, ProviderConfig};
use crate::error::RouterError;

/// A provider of the configuration, built once per router.
#[derive(Debug)]
pub(crate) struct Upstream {
    pub(crate) provider: AnyProvider,
    pub(crate) config: ProviderConfig,
    pub(crate) breaker: Breaker,
    pub(crate) admission: Admission,
}

impl Upstream {
    pub(crate) fn build(
        config: &ProviderConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, RouterError> {
        let mut settings = ProviderSettings::new(&config.name, config.kind, &config.model)
            .with_timeouts(config.timeouts);
        if let Some(url) = &config.base_url {
            settings = settings.with_base_url(url);
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
            config: config.clone(),
            breaker: Breaker::new(config.breaker),
            admission: Admission::new(
                config.max_concurrency,
                config.max_queue,
                config.fallback_share,
            ),
        })
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

/// How an error class affects the provider's breaker.
fn breaker_failure(class: ErrorClass) -> Option<Failure> {
    match class {
        ErrorClass::Auth | ErrorClass::Billing | ErrorClass::QuotaExhausted => {
            Some(Failure::Account)
        }
        ErrorClass::ConnectBeforeSend
        | ErrorClass::Timeout
        | ErrorClass::ConnectionLost
        | ErrorClass::RateLimited
        | ErrorClass::Overloaded
        | ErrorClass::ServerError
        | ErrorClass::StreamInterrupted
        | ErrorClass::StreamStalled
        | ErrorClass::MalformedStream
        | ErrorClass::Decode => Some(Failure::Ordinary),
        // The request's own fault or our budget: says nothing about the provider.
        _ => None,
    }
}

/// Passage through a provider's breaker for one try: the breaker learns the
/// try's outcome through it, and only through it. If the try ends without
/// telling anything about the provider (the caller's budget ran out, the
/// request's own fault) or is dropped before its outcome is known (the
/// caller's future was cancelled, a stream was dropped mid-way), a
/// half-open probe is given back, so the breaker can never stay half-open
/// with no probes left.
pub(crate) struct BreakerTicket {
    upstream: Arc<Upstream>,
    /// A half-open probe not yet reported.
    probe: bool,
}

impl BreakerTicket {
    /// Passage to `upstream`, or `None` while its breaker is open.
    pub(crate) fn admit(upstream: &Arc<Upstream>) -> Option<Self> {
        upstream.breaker.try_admit().map(|probe| Self {
            upstream: upstream.clone(),
            probe,
        })
    }

    /// The provider answered: the breaker closes.
    pub(crate) fn succeeded(&mut self) {
        self.upstream.breaker.record_success();
        self.probe = false;
    }

    /// The try failed with `class`: the breaker counts it if it says
    /// something about the provider; otherwise a probe is given back.
    pub(crate) fn failed(&mut self, class: ErrorClass) {
        match breaker_failure(class) {
            Some(f) => {
                self.upstream.breaker.record_failure(f);
                self.probe = false;
            }
            None => self.give_back(),
        }
    }

    /// The try says nothing about the provider: give a probe back.
    pub(crate) fn give_back(&mut self) {
        if std::mem::take(&mut self.probe) {
            self.upstream.breaker.release_probe();
        }
    }
}

impl Drop for BreakerTicket {
    fn drop(&mut self) {
        self.give_back();
    }
}
