//! The story itself. Every line of the timeline is read back from where it
//! happened (the router's attempts, the ledger's records and attempts, the
//! mocks' request counts), so the demo cannot claim what did not happen.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use handover::Config;
use handover::ledger::{
    AttemptKind, Clock, Ledger, ListFilter, OperationId, OperationRecord, Scope, SqliteLedger,
    SqliteOptions, State, StateKind, Timestamp,
};
use handover::providers::{ChatRequest, Message, Tool, ToolCall};
use handover::router::gate::{
    FixedApproval, OperationKey, PerformOptions, PerformOutcome, ProposedCall, WriteGate,
};
use handover::router::reconcile::Reconciler;
use handover::router::route::{Attempt, AttemptResult, Completion, Router, Task};
use handover_testkit::{Behaviour, Flavor, MockDestination, MockProvider, Reply};
use serde_json::json;

use super::app::{self, ACTION, POLICY, SCOPE};
use super::timeline::{Actor, DemoClock, Timeline};
use super::{Earlier, Report, Summary};
use crate::term::rfc3339;

const CLOCK: &str = "demo clock: follows real time during HTTP calls and jumps where the story waits (reconciler schedule, visibility lag)";

fn tool() -> Tool {
    Tool {
        name: ACTION.to_owned(),
        description: Some("Create a shipment at the carrier".to_owned()),
        parameters: json!({
            "type": "object",
            "properties": {
                "order_id": {"type": "string"},
                "sku": {"type": "string"},
                "quantity": {"type": "integer"},
                "address_id": {"type": "string"},
                "reason": {"type": "string"}
            },
            "required": ["order_id", "sku", "quantity", "address_id"]
        }),
    }
}

/// Everything the story needs in one place.
struct Cast {
    tl: Timeline,
    ledger: Arc<SqliteLedger>,
    router: Router,
    gate: WriteGate,
    primary: MockProvider,
    fallback: MockProvider,
    dest: MockDestination,
    clock: DemoClock,
    id: OperationId,
    approval: FixedApproval,
    attempts: usize,
    model_calls: usize,
    refused: usize,
}

/// Opens the ledger and plays the story under a fresh key.
pub(super) async fn play(path: &Path) -> anyhow::Result<Report> {
    let clock = DemoClock::new(crate::term::now());
    let ledger = Arc::new(
        SqliteLedger::open(
            path,
            SqliteOptions {
                clock: Arc::new(clock.clone()),
                ..SqliteOptions::default()
            },
        )
        .await
        .with_context(|| format!("cannot open the demo ledger at {}", path.display()))?,
    );
    let earlier = ledger
        .list(&ListFilter {
            scope: Some(Scope::new(SCOPE)?),
            ..ListFilter::default()
        })
        .await?;
    // Never let the demo clock run behind what an earlier run recorded
    // (earlier runs moved their clock ahead of the wall clock).
    if let Some(latest) = earlier.iter().map(|r| r.updated_at).max()
        && latest >= clock.now()
    {
        clock.wait_until(latest.plus(std::time::Duration::from_secs(1)));
    }
    let (run, key) = fresh_key(ledger.as_ref(), earlier.len()).await?;
    let id = OperationId::new(SCOPE, &key)?;

    let primary = MockProvider::start(Flavor::OpenAi).await;
    let fallback = MockProvider::start(Flavor::DeepSeek).await;
    let dest = MockDestination::builder()
        .visibility_lag(std::time::Duration::from_secs(30))
        .clock(Arc::new(clock.clone()))
        .start()
        .await;
    let config = Config::parse(
        &app::config_toml(&primary.base_url(), &fallback.base_url()),
        &|_| None,
    )?;
    let router = Router::with_env(&config, &|_| None)?;
    let gate = WriteGate::new(ledger.clone(), config, Arc::new(clock.clone()))
        .with_holder("agent-backend-1");
    let approval = FixedApproval {
        action: ACTION.to_owned(),
        key: OperationKey {
            scope: SCOPE.to_owned(),
            key: key.clone(),
        },
    };
    let mut cast = Cast {
        tl: Timeline::new(clock.clone()),
        ledger,
        router,
        gate,
        primary,
        fallback,
        dest,
        clock,
        id,
        approval,
        attempts: 0,
        model_calls: 0,
        refused: 0,
    };
    if let Some(prev) = earlier
        .iter()
        .rev()
        .find(|r| r.state.kind() == StateKind::Confirmed && r.params.is_some())
    {
        cast.replay_earlier(prev).await?;
    }
    cast.story().await?;
    let summary = cast.summary().await?;
    Ok(Report {
        ledger: path.display().to_string(),
        run,
        scope: SCOPE.to_owned(),
        key,
        clock: CLOCK,
        earlier: earlier.iter().map(earlier_entry).collect(),
        timeline: cast.tl.events,
        summary,
    })
}

fn earlier_entry(r: &OperationRecord) -> Earlier {
    Earlier {
        scope: r.id.scope.to_string(),
        key: r.id.key.to_string(),
        state: r.state.kind().to_string(),
        decided_at: r.state.decided_at().map(rfc3339),
    }
}

/// `K-701` on a fresh ledger, then `K-701-2`, `K-701-3`, ... (skipping any taken).
async fn fresh_key(ledger: &dyn Ledger, existing: usize) -> anyhow::Result<(usize, String)> {
    let mut run = existing + 1;
    loop {
        let key = if run == 1 {
            "K-701".to_owned()
        } else {
            format!("K-701-{run}")
        };
        if ledger.get(&OperationId::new(SCOPE, &key)?).await?.is_none() {
            return Ok((run, key));
        }
        run += 1;
    }
}

fn describe(call: &ToolCall) -> String {
    let args: serde_json::Value = serde_json::from_str(&call.arguments).unwrap_or_default();
    format!(
        "{}(order {}, {} x{})",
        call.name,
        args["order_id"].as_str().unwrap_or("?"),
        args["sku"].as_str().unwrap_or("?"),
        args["quantity"]
    )
}

impl Cast {
    fn since(&self, t: Timestamp) -> String {
        format!("+{:.3}s", self.tl.offset(t).as_secs_f64())
    }

    async fn record(&self) -> anyhow::Result<OperationRecord> {
        self.ledger
            .get(&self.id)
            .await?
            .context("the demo's operation is missing from the ledger")
    }

    /// Puts the router's attempts on the timeline (their times are relative
    /// to the task's start).
    fn push_attempts(&mut self, task_start: Timestamp, attempts: &[Attempt]) {
        for a in attempts {
            self.push_attempt(task_start, a);
        }
    }

    /// Calls the model and puts every attempt on the timeline.
    async fn chat(
        &mut self,
        task: &Task,
        task_start: Timestamp,
        req: &ChatRequest,
    ) -> anyhow::Result<Completion> {
        self.model_calls += 1;
        let result = self.router.chat(task, req).await;
        let attempts = match &result {
            Ok(c) => c.attempts.clone(),
            Err(e) => e
                .task_failure()
                .map(|f| f.attempts.clone())
                .unwrap_or_default(),
        };
        self.push_attempts(task_start, &attempts);
        Ok(result?)
    }

    fn push_attempt(&mut self, task_start: Timestamp, a: &Attempt) {
        self.attempts += 1;
        let label = Some(format!("attempt {}", self.attempts));
        let what = match a.result {
            AttemptResult::Answered => format!("{} answered", a.model),
            AttemptResult::Failed(class) => {
                let next = if class.as_str() == "overloaded" {
                    " (503): breaker opens, falling back"
                } else {
                    ""
                };
                format!("{} failed: {class}{next}", a.model)
            }
            _ => crate::chat::result_name(&a.result),
        };
        self.tl.push_at(
            task_start.plus(a.ended),
            Actor::Provider,
            &a.provider,
            label,
            what,
            None,
        );
    }

    async fn replay_earlier(&mut self, prev: &OperationRecord) -> anyhow::Result<()> {
        let Some(params) = &prev.params else {
            return Ok(());
        };
        let req = self.gate.request(
            prev.id.scope.as_str(),
            prev.id.key.as_str(),
            prev.action.as_str(),
            params,
        )?;
        let before = self.dest.action_requests().await;
        let out = self
            .gate
            .perform(&req, &app::executor(&self.dest), PerformOptions::default())
            .await?;
        let sent = self.dest.action_requests().await - before;
        let decided = prev.state.decided_at().map(rfc3339).unwrap_or_default();
        self.tl.push(
            Actor::Ledger,
            "ledger",
            None,
            format!(
                "already has {} {} confirmed at {decided} (earlier run); asked again: {} ({sent} request(s) sent)",
                prev.id.scope,
                prev.id.key,
                out.as_str()
            ),
            Some("confirmed, replayed"),
        );
        Ok(())
    }

    async fn story(&mut self) -> anyhow::Result<()> {
        self.primary.script([Reply::ToolCall {
            id: "call_oa_7Hq2Lw".to_owned(),
            name: ACTION.to_owned(),
            arguments: app::shipment(),
        }]);
        self.primary.set_default(Reply::overloaded());
        self.fallback.script([
            Reply::ToolCall {
                id: "call_ds_c41f9e".to_owned(),
                name: ACTION.to_owned(),
                arguments: app::shipment(),
            },
            Reply::text(
                "Your replacement shipment for order 1042 is being verified with the carrier. \
                 I have not sent a second one; you will get the tracking number once it is confirmed.",
            ),
        ]);
        self.dest.script([Behaviour::ApplyAndDrop]);

        // 1. The user asks; the primary model proposes the shipment.
        self.tl.push(
            Actor::User,
            "user",
            None,
            "\"Order 1042 arrived broken. Please send a replacement.\"",
            None,
        );
        let task = self.router.task(POLICY)?;
        let task_start = self.clock.now();
        let mut messages = vec![
            Message::system("You are the support assistant of a web shop."),
            Message::user("Order 1042 arrived broken. Please send a replacement."),
        ];
        let c1 = self
            .chat(
                &task,
                task_start,
                &ChatRequest::new(messages.clone()).with_tools(vec![tool()]),
            )
            .await?;
        let Some(tc1) = c1.response.tool_calls.first().cloned() else {
            bail!("the primary model did not propose the shipment");
        };
        self.tl.push(
            Actor::Provider,
            &c1.provider,
            None,
            format!("proposes {} as tool call {}", describe(&tc1), tc1.id),
            None,
        );
        self.tl.push(
            Actor::User,
            "user",
            None,
            format!(
                "approves it; the application records the approval as {} {}",
                self.id.scope, self.id.key
            ),
            None,
        );

        // 2. The write gate sends it; the confirmation is lost.
        let call1 = ProposedCall::from_tool_call(&tc1, Some(&c1.provider), Some(&c1.model))?;
        let executor = app::executor(&self.dest);
        let out1 = self
            .gate
            .perform_call(
                &call1,
                &self.approval,
                &executor,
                PerformOptions {
                    budget: Some(task.budget()),
                    metadata: None,
                },
            )
            .await?;
        self.narrate_first_dispatch(&out1).await?;

        // 3. The agent asks the model again; the primary fails, the fallback
        //    re-proposes the same shipment under a new tool-call id.
        messages.push(Message::assistant_tool_calls(None, vec![tc1.clone()]));
        messages.push(Message::tool_result(
            tc1.id.clone(),
            "error: the connection was lost before the carrier confirmed",
        ));
        let c2 = self
            .chat(
                &task,
                task_start,
                &ChatRequest::new(messages.clone()).with_tools(vec![tool()]),
            )
            .await?;
        let Some(tc2) = c2.response.tool_calls.first().cloned() else {
            bail!("the fallback model did not re-propose the shipment");
        };
        self.tl.push(
            Actor::Provider,
            &c2.provider,
            None,
            format!(
                "re-proposes {} under a NEW tool-call id {}",
                describe(&tc2),
                tc2.id
            ),
            None,
        );
        let call2 = ProposedCall::from_tool_call(&tc2, Some(&c2.provider), Some(&c2.model))?;
        let before = self.dest.action_requests().await;
        let out2 = self
            .gate
            .perform_call(
                &call2,
                &self.approval,
                &executor,
                PerformOptions {
                    budget: Some(task.budget()),
                    metadata: None,
                },
            )
            .await?;
        let answered_at = self.clock.now();
        let sent = self.dest.action_requests().await - before;
        match &out2 {
            PerformOutcome::Unresolved(info) => {
                self.refused += 1;
                self.tl.push_at(
                    answered_at,
                    Actor::Gate,
                    "write gate",
                    None,
                    format!(
                        "REFUSES to execute it again: {} {} is unknown since {} (owner {}); {sent} request(s) sent",
                        self.id.scope,
                        self.id.key,
                        self.since(info.since),
                        info.owner
                    ),
                    Some("unknown, unchanged"),
                );
            }
            other => self.tl.push_at(
                answered_at,
                Actor::Gate,
                "write gate",
                None,
                format!("answered {} ({sent} request(s) sent)", other.as_str()),
                None,
            ),
        }

        // 4. The fallback explains what is pending (it cannot confirm anything).
        messages.push(Message::assistant_tool_calls(None, vec![tc2.clone()]));
        messages.push(Message::tool_result(
            tc2.id.clone(),
            "refused: an identical approved shipment is awaiting confirmation; do not retry",
        ));
        let c3 = self
            .chat(
                &task,
                task_start,
                &ChatRequest::new(messages).with_tools(vec![tool()]),
            )
            .await?;
        let text = c3.response.content.clone().unwrap_or_default();
        self.tl.push(
            Actor::Provider,
            &c3.provider,
            None,
            format!("tells the user: \"{text}\""),
            None,
        );

        // 5. The reconciler: nothing inside the visibility lag, then the record.
        self.reconcile().await?;

        // 6. The user's retry gets the recorded confirmation.
        self.tl.push(
            Actor::User,
            "user",
            None,
            "retries: \"Did it go out? Please send it.\"",
            None,
        );
        let before = self.dest.action_requests().await;
        let out3 = self
            .gate
            .perform_call(&call2, &self.approval, &executor, PerformOptions::default())
            .await?;
        let sent = self.dest.action_requests().await - before;
        let what = match &out3 {
            PerformOutcome::Replayed(handover::ledger::Terminal::Confirmed { result, .. }) => {
                format!(
                    "replays the recorded confirmation: shipment {} ({sent} request(s) sent)",
                    result["id"]
                )
            }
            other => format!("answered {} ({sent} request(s) sent)", other.as_str()),
        };
        let state = self.record().await?.state.kind().to_string();
        self.tl
            .push(Actor::Ledger, "ledger", None, what, Some(&state));
        Ok(())
    }

    async fn narrate_first_dispatch(&mut self, out: &PerformOutcome) -> anyhow::Result<()> {
        let rec = self.record().await?;
        let attempts = self.ledger.attempts(&self.id).await?;
        let Some(dispatch) = attempts.iter().find(|a| a.kind == AttemptKind::Dispatch) else {
            bail!("the write gate recorded no dispatch ({})", out.as_str());
        };
        let label = || Some("dispatch 1".to_owned());
        self.tl.push_at(
            rec.created_at,
            Actor::Ledger,
            "ledger",
            None,
            format!(
                "begin: claimed by {} (epoch {})",
                dispatch.executor,
                dispatch.epoch.map_or(0, |e| e.0)
            ),
            Some("new -> claimed"),
        );
        self.tl.push_at(
            dispatch.sent_at,
            Actor::Ledger,
            "ledger",
            label(),
            format!(
                "recorded as dispatched BEFORE the first byte (destination key {})",
                dispatch.destination_key
            ),
            Some("claimed -> dispatched"),
        );
        for r in self.dest.records() {
            self.tl.push_at(
                r.created_at,
                Actor::Destination,
                "destination",
                label(),
                format!(
                    "POST /records: created {} ... then the connection dropped before the answer",
                    r.id
                ),
                None,
            );
        }
        let at = dispatch.finished_at.unwrap_or(rec.updated_at);
        match (&rec.state, out) {
            (State::Unknown(info), PerformOutcome::Unresolved(_)) => {
                let evidence = dispatch.evidence.clone().unwrap_or_default();
                let what = format!(
                    "no confirmation ({evidence}): outcome UNKNOWN, owner {}, next check {}",
                    info.owner,
                    info.next_check_at
                        .map_or_else(|| "-".to_owned(), |t| self.since(t))
                );
                self.tl.push_at(
                    at,
                    Actor::Gate,
                    "write gate",
                    label(),
                    what,
                    Some("dispatched -> unknown"),
                );
            }
            (state, out) => self.tl.push_at(
                at,
                Actor::Gate,
                "write gate",
                label(),
                format!("answered {}", out.as_str()),
                Some(state.kind().as_str()),
            ),
        }
        Ok(())
    }

    async fn reconcile(&mut self) -> anyhow::Result<()> {
        let reconciler = Reconciler::new(self.gate.clone(), Arc::new(self.clock.clone()))
            .with_lookup(ACTION, app::lookup(&self.dest, self.id.clone()));
        for _ in 0..4 {
            let rec = self.record().await?;
            let State::Unknown(info) = &rec.state else {
                break;
            };
            // A pass runs on a one-second tick once the check is due.
            if let Some(next) = info.next_check_at {
                self.clock
                    .wait_until(next.plus(std::time::Duration::from_secs(1)));
            }
            reconciler.run_once().await?;
            let after = self.record().await?;
            let attempts = self.ledger.attempts(&self.id).await?;
            let lookups: Vec<_> = attempts
                .iter()
                .filter(|a| a.kind == AttemptKind::Lookup)
                .collect();
            let Some(last) = lookups.last() else {
                bail!("the reconciler did not look the operation up");
            };
            let label = Some(format!("lookup {}", lookups.len()));
            let evidence = match &after.state {
                State::Confirmed { result, .. } => format!(
                    "found {} with the approved parameters",
                    result["id"].as_str().unwrap_or("the record")
                ),
                _ => last.evidence.clone().unwrap_or_default(),
            };
            let state = match &after.state {
                State::Unknown(i) => format!(
                    "unknown, next check {}",
                    i.next_check_at
                        .map_or_else(|| "-".to_owned(), |t| self.since(t))
                ),
                s => format!("unknown -> {}", s.kind()),
            };
            self.tl.push_at(
                last.sent_at,
                Actor::Reconciler,
                "reconciler",
                label,
                format!("GET /records?key={}: {evidence}", after.destination_key),
                Some(&state),
            );
        }
        Ok(())
    }

    async fn summary(&self) -> anyhow::Result<Summary> {
        let records = self.dest.records();
        let mut per_reference: HashMap<String, usize> = HashMap::new();
        for r in &records {
            let reference = r.body["reference"].as_str().unwrap_or_default().to_owned();
            *per_reference.entry(reference).or_default() += 1;
        }
        let duplicates = per_reference.values().map(|n| n - 1).sum();
        let unresolved = self
            .ledger
            .list(&ListFilter {
                state: Some(StateKind::Unknown),
                scope: Some(self.id.scope.clone()),
                ..ListFilter::default()
            })
            .await?
            .len();
        Ok(Summary {
            tasks: 1,
            model_calls: self.model_calls,
            attempts: self.attempts,
            provider_requests: self.primary.requests().await + self.fallback.requests().await,
            destination_requests: self.dest.action_requests().await,
            lookups: self.dest.lookup_requests().await,
            effects: self.dest.effect_count(),
            duplicates,
            unresolved,
            final_state: self.record().await?.state.kind().to_string(),
            refused: self.refused,
        })
    }
}
