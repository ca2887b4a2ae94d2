//! Metric names and recording helpers (DESIGN §9), in one place. Handover
//! records through the `metrics` facade; install any exporter (the gateway
//! uses Prometheus).
//!
//! The series a routed call records are keyed once, when the router is
//! built ([`PolicySeries`], [`ProviderSeries`]): recording one hands the
//! installed recorder a ready [`Key`] (its labels allocated and its hash
//! computed once), where the macros build, hash and drop a labelled key on
//! every call. The recorder is still asked for each record, so a recorder
//! installed after the router was built, or a thread-local one in a test,
//! gets every series.

use metrics::{Key, Label, Level, Metadata, SharedString};

/// What every series recorded through a ready key is registered with (the
/// macros' default: this module, level `INFO`).
static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

fn count(key: &Key, n: u64) {
    metrics::with_recorder(|r| r.register_counter(key, &METADATA)).increment(n);
}

fn observe(key: &Key, value: f64) {
    metrics::with_recorder(|r| r.register_histogram(key, &METADATA)).record(value);
}

/// The series one policy's calls record, keyed once with the router.
#[derive(Debug)]
pub(crate) struct PolicySeries {
    tasks: Key,
    answer_time: Key,
    failed: Key,
    /// `handover_answers_total{policy, provider}`, one per provider of the
    /// router, in [`ProviderSeries::index`] order.
    answers: Vec<Key>,
}

impl PolicySeries {
    /// `providers`: every provider's series, in index order.
    pub(crate) fn new(policy: &str, providers: &[&ProviderSeries]) -> Self {
        let label = self::label(policy);
        let by_policy =
            |name: &'static str| Key::from_parts(name, vec![Label::new("policy", label.clone())]);
        Self {
            tasks: by_policy("handover_tasks_total"),
            answer_time: by_policy("handover_time_to_usable_answer_seconds"),
            failed: by_policy("handover_failed_calls_total"),
            answers: providers
                .iter()
                .map(|p| {
                    Key::from_parts(
                        "handover_answers_total",
                        vec![
                            Label::new("policy", label.clone()),
                            Label::new("provider", p.label.clone()),
                        ],
                    )
                })
                .collect(),
        }
    }
}

/// The series one provider's attempts record, keyed once with the router.
#[derive(Debug)]
pub(crate) struct ProviderSeries {
    /// The provider's place among the router's providers (see
    /// [`PolicySeries::answers`]).
    index: usize,
    /// The provider's name as a label value.
    label: SharedString,
    /// `handover_attempts_total{provider, class="answered"}`: the other
    /// classes are keyed when they happen.
    answered: Key,
    cost: Key,
}

impl ProviderSeries {
    pub(crate) fn new(index: usize, provider: &str) -> Self {
        let label = self::label(provider);
        Self {
            index,
            answered: Key::from_parts(
                "handover_attempts_total",
                vec![
                    Label::new("provider", label.clone()),
                    Label::from_static_parts("class", "answered"),
                ],
            ),
            cost: Key::from_parts(
                "handover_provider_cost_micro_usd_total",
                vec![Label::new("provider", label.clone())],
            ),
            label,
        }
    }
}

/// The `action` label of an action the configuration does not declare
/// (see `Protocol::action_label`).
pub(crate) const UNDECLARED_ACTION: &str = "undeclared";

/// Counts one `perform` by action and outcome.
pub(crate) fn operation(action: &str, outcome: &'static str) {
    metrics::counter!("handover_operations_total", "action" => action.to_owned(), "outcome" => outcome)
        .increment(1);
}

/// Counts a duplicate effect detected at a destination.
pub(crate) fn duplicate_effect(action: &str) {
    metrics::counter!("handover_duplicate_effects_detected_total", "action" => action.to_owned())
        .increment(1);
}

/// Counts a dispatch outcome that arrived after the ledger had closed the
/// dispatch (kept in the attempt log for review), by what it reported.
pub(crate) fn late_outcome(action: &str, report: &'static str) {
    metrics::counter!("handover_late_outcomes_total", "action" => action.to_owned(), "report" => report)
        .increment(1);
}

/// Records one reconciliation pass.
pub(crate) fn reconcile(report: &crate::reconcile::ReconcileReport) {
    for (outcome, n) in [
        ("confirmed", report.confirmed),
        ("rejected", report.rejected),
        ("diverged", report.diverged),
        ("to_review", report.to_review),
        ("still_unknown", report.still_unknown),
        ("resent", report.resent),
        ("failed", report.failed),
        ("late", report.late),
    ] {
        metrics::counter!("handover_reconciliations_total", "outcome" => outcome)
            .increment(n as u64);
    }
}

/// Sets the unresolved-operation gauges: how many, and the oldest's age.
pub(crate) fn review_queue(size: usize, oldest: std::time::Duration) {
    metrics::gauge!("handover_review_queue_size").set(size as f64);
    metrics::gauge!("handover_oldest_unresolved_age_seconds").set(oldest.as_secs_f64());
}

/// Records the time from an operation's creation to its confirmation.
pub(crate) fn confirmed_action(action: &str, elapsed: std::time::Duration) {
    metrics::histogram!("handover_time_to_confirmed_action_seconds", "action" => action.to_owned())
        .record(elapsed.as_secs_f64());
}

/// Records how long an operation stayed unknown before reconciliation resolved it.
pub(crate) fn recovered(action: &str, unknown_for: std::time::Duration) {
    metrics::histogram!("handover_recovery_time_seconds", "action" => action.to_owned())
        .record(unknown_for.as_secs_f64());
}

/// Counts a user task (the denominator of the completion rate).
pub(crate) fn task_started(policy: &PolicySeries) {
    count(&policy.tasks, 1);
}

/// Counts one attempt by provider and result.
pub(crate) fn attempt(provider: &ProviderSeries, result: &crate::route::AttemptResult) {
    use crate::route::AttemptResult;
    let class = match result {
        AttemptResult::Answered => return count(&provider.answered, 1),
        AttemptResult::Failed(c) => c.as_str(),
        AttemptResult::Abandoned => "abandoned",
    };
    metrics::counter!("handover_attempts_total", "provider" => provider.label.clone(), "class" => class)
        .increment(1);
}

/// Counts a stream that broke after its commit point (its answer had been
/// counted as answered when it committed): by provider and class.
pub(crate) fn stream_broken(provider: &ProviderSeries, class: handover_providers::ErrorClass) {
    metrics::counter!("handover_streams_broken_total", "provider" => provider.label.clone(), "class" => class.as_str())
        .increment(1);
}

/// Counts a provider passed over by a call, by reason.
pub(crate) fn skipped(provider: &ProviderSeries, reason: crate::route::SkipReason) {
    metrics::counter!("handover_skipped_providers_total", "provider" => provider.label.clone(), "reason" => reason.as_str())
        .increment(1);
}

/// Records an answered call: time to a usable answer and cost.
pub(crate) fn answered(
    policy: &PolicySeries,
    provider: &ProviderSeries,
    elapsed: std::time::Duration,
    cost: Option<f64>,
) {
    if let Some(key) = policy.answers.get(provider.index) {
        count(key, 1);
    }
    observe(&policy.answer_time, elapsed.as_secs_f64());
    if let Some(c) = cost {
        self::cost(provider, c);
    }
}

/// Counts what one answer of `provider` cost, in micro-USD (a streamed
/// answer's when its stream ends: its usage comes last).
pub(crate) fn cost(provider: &ProviderSeries, usd: f64) {
    count(&provider.cost, (usd * 1e6).round() as u64);
}

/// Counts a call that produced no answer.
pub(crate) fn call_failed(policy: &PolicySeries) {
    count(&policy.failed, 1);
}

/// A label value shared by every key that carries it.
fn label(name: &str) -> SharedString {
    SharedString::from_shared(std::sync::Arc::from(name))
}

/// Counts an answer (or failure) that arrived after its task moved on.
pub(crate) fn late_attempt(provider: &str) {
    metrics::counter!("handover_late_attempts_total", "provider" => provider.to_owned())
        .increment(1);
}

/// Counts one lookup of a reconciliation by action and what it found.
pub(crate) fn lookup(action: &str, outcome: &'static str) {
    metrics::counter!("handover_lookups_total", "action" => action.to_owned(), "outcome" => outcome)
        .increment(1);
}

/// Sets the age of the oldest unknown operation of each action (0 for an
/// action that had some before and has none now).
pub(crate) fn oldest_unknown(ages: &std::collections::BTreeMap<String, std::time::Duration>) {
    for (action, age) in ages {
        metrics::gauge!("handover_oldest_unknown_age_seconds", "action" => action.clone())
            .set(age.as_secs_f64());
    }
}
