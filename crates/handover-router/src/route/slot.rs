//! One configured provider at run time: its adapter, breaker and admission
//! gate, shared by every task.

use handover_providers::{AnyProvider, ProviderSettings, ReasoningPassback, Usage};
use secrecy::SecretString;

use crate::admission::Admission;
use crate::breaker::{Breaker, Failure};
use crate::config::{ErrorClass, ProviderConfig};
use crate::error::RouterError;

#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) provider: AnyProvider,
    pub(crate) config: ProviderConfig,
    pub(crate) breaker: Breaker,
    pub(crate) admission: Admission,
}

impl Slot {
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
pub(crate) fn breaker_failure(class: ErrorClass) -> Option<Failure> {
    match class {
        ErrorClass::Overloaded => Some(Failure::Overload),
        ErrorClass::Auth | ErrorClass::Billing | ErrorClass::QuotaExhausted => {
            Some(Failure::Account)
        }
        ErrorClass::ConnectBeforeSend
        | ErrorClass::Timeout
        | ErrorClass::ConnectionLost
        | ErrorClass::RateLimited
        | ErrorClass::ServerError
        | ErrorClass::StreamInterrupted
        | ErrorClass::StreamStalled
        | ErrorClass::MalformedStream
        | ErrorClass::Decode => Some(Failure::Ordinary),
        // The request's own fault or our budget: says nothing about the provider.
        _ => None,
    }
}

/// A half-open probe that must be reported. If the call is dropped before
/// the breaker learned its outcome (the caller's future was cancelled, a
/// stream was dropped mid-way), the probe is given back, so the breaker can
/// never stay half-open with no probes left.
pub(crate) struct ProbeGuard {
    slot: std::sync::Arc<Slot>,
    armed: bool,
}

impl ProbeGuard {
    /// Admits a call to `slot`, or `None` while its breaker is open.
    pub(crate) fn admit(slot: &std::sync::Arc<Slot>) -> Option<Self> {
        slot.breaker.try_admit().map(|probe| Self {
            slot: slot.clone(),
            armed: probe,
        })
    }

    /// The breaker has been told the outcome: nothing to give back.
    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for ProbeGuard {
    fn drop(&mut self) {
        if self.armed {
            self.slot.breaker.release_probe();
        }
    }
}
