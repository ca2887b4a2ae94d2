//! Abandoned attempts: the task stopped waiting for them, but their request
//! is still running. Whatever they return is recorded as late — for the
//! record and the metrics — and triggers nothing: no answer is replaced, no
//! tool call is executed, no breaker is moved.

use std::time::Duration;

use handover_providers::{ChatResponse, ProviderError};
use tokio::task::JoinHandle;

use super::report::{Attempt, AttemptResult, ProviderSaid};
use super::task::Task;
use super::upstream::Target;
use crate::admission::Permit;

/// Waits for an abandoned call in the background and records how it ended.
pub(crate) fn watch(
    task: &Task,
    target: &Target,
    started: Duration,
    call: JoinHandle<(Result<ChatResponse, ProviderError>, Permit)>,
) {
    let (late, budget) = (task.late.clone(), task.budget.clone());
    let (provider, model) = (target.provider().to_owned(), target.model.clone());
    tokio::spawn(async move {
        let Ok((result, _permit)) = call.await else {
            return;
        };
        let (result, sent, request_id, said) = match &result {
            Ok(r) => (AttemptResult::Answered, true, r.request_id.clone(), None),
            Err(e) => (
                AttemptResult::Failed(e.class()),
                e.was_sent(),
                e.request_id().map(str::to_owned),
                ProviderSaid::of(e).boxed(),
            ),
        };
        crate::metrics::late_attempt(&provider);
        late.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Attempt {
                provider,
                model,
                started,
                ended: budget.elapsed(),
                result,
                sent,
                request_id,
                late: true,
                said,
            });
    });
}
