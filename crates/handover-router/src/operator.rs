//! The operator's side (DESIGN §6): the review queue of operations whose
//! outcome is unknown or diverged, and resolution with evidence and actor —
//! recorded as an attempt, never silent.

use std::time::Duration;

use handover_ledger::{
    AttemptRecord, ListFilter, OperationId, OperationRecord, Resolution, ResolvedAs, State,
    StateKind,
};

use crate::error::RouterError;
use crate::gate::WriteGate;

/// One unresolved operation as an operator sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewItem {
    /// The operation.
    pub record: OperationRecord,
    /// How long it has been unknown.
    pub age: Duration,
    /// Its attempts, oldest first.
    pub attempts: Vec<AttemptRecord>,
}

impl WriteGate {
    /// Every unknown operation (diverged ones included), oldest first, with
    /// owner, reason, age and attempts. `diverged_only` narrows to those a
    /// lookup found with other parameters.
    pub async fn review_queue(&self, diverged_only: bool) -> Result<Vec<ReviewItem>, RouterError> {
        let filter = ListFilter {
            state: Some(StateKind::Unknown),
            diverged: diverged_only.then_some(true),
            ..ListFilter::default()
        };
        let now = self.protocol().now_plus(Duration::ZERO);
        let mut items = Vec::new();
        for record in self.ledger().list(&filter).await? {
            let since = match &record.state {
                State::Unknown(info) => info.since,
                _ => record.updated_at,
            };
            let attempts = self.ledger().attempts(&record.id).await?;
            items.push(ReviewItem {
                age: now.saturating_since(since),
                record,
                attempts,
            });
        }
        // The gauges are the whole queue's: a diverged-only listing is a
        // part of it.
        if !diverged_only {
            crate::metrics::review_queue(
                items.len(),
                items.iter().map(|i| i.age).max().unwrap_or_default(),
            );
        }
        Ok(items)
    }

    /// Resolves an unknown operation as confirmed or rejected. Evidence and
    /// actor are required and recorded; a transition the state machine
    /// forbids (e.g. resolving a confirmed operation) is refused and changes
    /// nothing.
    pub async fn resolve(
        &self,
        id: &OperationId,
        outcome: ResolvedAs,
        evidence: &str,
        actor: &str,
    ) -> Result<OperationRecord, RouterError> {
        let record = self
            .ledger()
            .resolve(
                id,
                Resolution {
                    outcome,
                    evidence: evidence.to_owned(),
                    actor: actor.to_owned(),
                },
            )
            .await?;
        tracing::info!(%id, actor, state = record.state.kind().as_str(), "operation resolved by operator");
        Ok(record)
    }
}
