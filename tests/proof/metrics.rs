//! The metrics of DESIGN §9 over the suite's own scenarios: every scenario
//! is replayed once on the SQLite ledger (with its restart where it has
//! one) into one scoreboard; the totals are printed and duplicates must be
//! zero.
//!
//! * duplicates — destination effects beyond one per operation;
//! * unresolved — operations still unknown at the end, and their age;
//! * recovery time — unknown → confirmed/rejected, in business time;
//! * completion rate — completed tasks over the *original* user tasks
//!   (an application's retry of a task is not a new task).
//!
//! Run `cargo test --test proof metrics -- --nocapture` to see the report.

use std::sync::Arc;

use crate::support::{Backend, Run, Scoreboard};
use crate::{approval as a, content_fallback as c, layered_retries as l, lost_response as lr};
use crate::{operation_identity as i, reconciliation as r, retention as t};

#[tokio::test]
async fn metrics_of_the_whole_suite() {
    let score = Arc::new(Scoreboard::default());
    let plain = || Run::reporting(Backend::Sqlite, false, &score);
    let restarted = || Run::reporting(Backend::Sqlite, true, &score);

    c::content_fails_before_any_action_and_the_fallback_answers(plain()).await;
    c::a_late_primary_answer_is_abandoned_and_triggers_nothing(plain()).await;
    c::a_late_tool_call_after_the_fallback_acted_is_replayed_never_executed(plain()).await;
    c::a_stream_cut_before_commit_falls_back_whole_and_keeps_the_partial_apart(plain()).await;
    c::a_stream_cut_after_commit_is_an_explicit_error_never_a_short_answer(plain()).await;
    c::a_stalled_stream_with_keepalives_falls_back_on_the_idle_timeout(plain()).await;
    lr::a_lost_confirmation_is_unresolved_and_never_executed_twice(restarted()).await;
    lr::the_same_key_retried_after_a_lost_response_gets_the_same_outcome_and_one_effect(plain())
        .await;
    lr::a_regenerated_key_for_the_same_intent_is_a_new_operation(plain()).await;
    i::changed_parameters_from_the_fallback_are_a_conflict_and_never_executed(plain()).await;
    i::concurrent_identical_requests_cause_one_effect(plain()).await;
    i::other_content_conflicts_and_another_scope_or_key_is_independent(plain()).await;
    r::an_operation_briefly_invisible_to_the_lookup_stays_unknown_then_is_confirmed(restarted())
        .await;
    r::after_the_dedup_window_nothing_is_resent_and_the_operation_goes_to_review(plain()).await;
    t::within_the_window_a_retry_replays_and_after_it_meets_the_tombstone(restarted()).await;
    l::an_application_retrying_the_same_task_sends_at_most_the_budget(plain()).await;
    l::a_new_task_per_retry_gets_a_new_budget_each_time(plain()).await;
    a::the_approved_parameters_run_and_nothing_else(restarted()).await;
    a::numbers_are_never_changed_silently(plain()).await;

    let totals = score.totals();
    println!("handover proof metrics: {}", totals.to_json());
    println!(
        "  {} scenarios, {} original tasks, {} completed ({:.1}%)",
        totals.scenarios,
        totals.tasks,
        totals.completed,
        totals.completion_rate() * 100.0
    );
    println!(
        "  {} effects at the destinations, {} confirmed operations, {} duplicates",
        totals.effects, totals.confirmed, totals.duplicates
    );
    println!(
        "  {} unresolved at the end (waiting for an operator), recoveries (unknown -> resolved): {:?}",
        totals.unresolved.len(),
        totals.recoveries
    );

    assert_eq!(totals.duplicates, 0, "no action may take effect twice");
    // 19 scenarios; scenario 2 settles once per way of losing the answer.
    assert_eq!(totals.scenarios, 21);
    assert!(totals.effects >= totals.confirmed);
    assert!(
        !totals.recoveries.is_empty(),
        "the suite resolves unknown operations"
    );
}
