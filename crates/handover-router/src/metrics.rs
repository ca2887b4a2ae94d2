//! Metric names and recording helpers (DESIGN §9), in one place. Handover
//! records through the `metrics` facade; install any exporter (the gateway
//! uses Prometheus).
//!
//! Labels that name a policy or a provider on the call path are
//! [`SharedString`]s built once with the router, so recording one is a
//! reference count, not a `String` per call.

use metrics::SharedString;

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
pub(crate) fn task_started(policy: &SharedString) {
    metrics::counter!("handover_tasks_total", "policy" => policy.clone()).increment(1);
}

/// Counts one attempt by provider and result.
pub(crate) fn attempt(provider: &SharedString, result: &crate::route::AttemptResult) {
    use crate::route::AttemptResult;
    let class = match result {
        AttemptResult::Answered => "answered",
        AttemptResult::Failed(c) => c.as_str(),
        AttemptResult::Abandoned => "abandoned",
    };
    metrics::counter!("handover_attempts_total", "provider" => provider.clone(), "class" => class)
        .increment(1);
}

/// Counts a provider passed over by a call, by reason.
pub(crate) fn skipped(provider: &SharedString, reason: crate::route::SkipReason) {
    metrics::counter!("handover_skipped_providers_total", "provider" => provider.clone(), "reason" => reason.as_str())
        .increment(1);
}

/// Records an answered call: time to a usable answer and cost.
pub(crate) fn answered(
    policy: &SharedString,
    provider: &SharedString,
    elapsed: std::time::Duration,
    cost: Option<f64>,
) {
    metrics::counter!("handover_answers_total", "policy" => policy.clone(), "provider" => provider.clone())
        .increment(1);
    metrics::histogram!("handover_time_to_usable_answer_seconds", "policy" => policy.clone())
        .record(elapsed.as_secs_f64());
    if let Some(c) = cost {
        metrics::counter!("handover_provider_cost_micro_usd_total", "provider" => provider.clone())
            .increment((c * 1e6).round() as u64);
    }
}

/// Counts a call that produced no answer.
pub(crate) fn call_failed(policy: &SharedString) {
    metrics::counter!("handover_failed_calls_total", "policy" => policy.clone()).increment(1);
}

/// A label value shared by every call that records it.
pub(crate) fn label(name: &str) -> SharedString {
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
