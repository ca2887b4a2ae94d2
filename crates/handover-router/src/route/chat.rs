//! The non-streaming path: the chain walk with a whole-answer call.

use handover_providers::{ChatRequest, ChatResponse, Provider, ProviderError};

use super::report::Completion;
use super::task::Task;
use super::upstream::Target;
use super::walk::{Answer, Call, Needs, Tried, Try};
use super::{Router, late};
use crate::error::RouterError;

impl Router {
    /// Answers one chat call of `task` through its policy's chain. The
    /// answer comes whole from one provider; failed attempts are reported as
    /// attempts, passed-over providers as skips. Fails with
    /// [`RouterError::Task`] when no provider answered within the budget.
    #[tracing::instrument(
        name = "handover.task.chat",
        skip_all,
        fields(task = %task.id, policy = %task.policy.name, handover.outcome, handover.provider, handover.attempts, error.type)
    )]
    pub async fn chat(&self, task: &Task, req: &ChatRequest) -> Result<Completion, RouterError> {
        let needs = Needs::of(req);
        let walked = self.walk(task, needs, &Whole(req)).await?;
        let (response, run) = (walked.answered.value, walked.run);
        Ok(Completion {
            provider: walked.target.provider().to_owned(),
            cost: walked.answered.cost,
            response: *response,
            attempts: run.attempts,
            skipped: run.skipped,
            partials: run.partials,
            spent: task.budget.spent(),
        })
    }
}

/// One whole-answer call. With `abandon_after`, the walk stops waiting for
/// a provider that has not answered by then: the request runs on in its own
/// task (holding its concurrency slot) and its outcome is recorded as late.
///
/// The answer is boxed as it arrives: the walk hands it up through several
/// states (`Tried`, `Answered`, `Walked`, their `Result`s), and each move
/// of a whole `ChatResponse` was a copy of about 500 bytes; a pointer moves
/// instead (callgrind: routing added 9.4k instructions to a call before,
/// 8.3k after; docs/benchmarks.md "stop 46").
struct Whole<'r>(&'r ChatRequest);

impl Call for Whole<'_> {
    type Output = Box<ChatResponse>;

    async fn call(&self, at: Try<'_>) -> Tried<Box<ChatResponse>> {
        let Some(after) = at.task.policy.abandon_after else {
            let result = at.target.upstream.provider.chat(self.0, &at.options).await;
            drop(at.permit);
            return answer(at.target, result);
        };
        let (up, req, options, permit) = (
            at.target.upstream.clone(),
            self.0.clone(),
            at.options,
            at.permit,
        );
        let mut call = tokio::spawn(async move {
            let result = up.provider.chat(&req, &options).await;
            (result, permit)
        });
        match tokio::time::timeout(after, &mut call).await {
            Ok(Ok((result, _permit))) => answer(at.target, result),
            Ok(Err(join)) => std::panic::resume_unwind(join.into_panic()),
            Err(_waited) => {
                late::watch(at.task, at.target, at.started, call);
                Tried::Abandoned
            }
        }
    }
}

fn answer(
    target: &Target,
    result: Result<ChatResponse, ProviderError>,
) -> Tried<Box<ChatResponse>> {
    match result {
        Ok(response) => Tried::Answered(Answer {
            request_id: response.request_id.clone(),
            cost: target.upstream.cost(response.usage.as_ref()),
            complete: true,
            value: Box::new(response),
        }),
        Err(error) => Tried::Failed {
            request_id: error.request_id().map(str::to_owned),
            error,
            partial: None,
            cost: None,
        },
    }
}
