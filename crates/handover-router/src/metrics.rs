//! Metric names and recording helpers (DESIGN §9), in one place. Handover
//! records through the `metrics` facade; install any exporter (the gateway
//! uses Prometheus).

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
    ] {
        metrics::counter!("handover_reconciliations_total", "outcome" => outcome)
            .increment(n as u64);
    }
}

/// Sets the review queue size gauge.
pub(crate) fn review_queue(size: usize) {
    metrics::gauge!("handover_review_queue_size").set(size as f64);
}
