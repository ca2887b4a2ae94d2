//! The story itself. Every line of the timeline is read back from where it
//! happened (the router's attempts, the ledger's records and attempts, the
//! mocks' request counts), so the demo cannot claim what did not happen.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use handover::Config;
use handover::ledger::{
    Clock, Ledger, ListFilter, OperationId, OperationRecord, Scope, SqliteLedger, SqliteOptions,
    StateKind, Timestamp,
};
use handover::providers::{ChatRequest, Message, Tool, ToolCall};
use handover::router::gate::{
    Executor, FixedApproval, OperationKey, PerformOptions, PerformOutcome, ProposedCall, WriteGate,
};
use handover::router::route::{Completion, Router, Task};
use handover_testkit::{Behaviour, Flavor, MockDestination, MockProvider, Reply};
use serde_json::json;

use super::app::{self, ACTION, POLICY, SCOPE};
use super::cast::Cast;
use super::timeline::{Actor, DemoClock, Timeline};
use super::{Earlier, Report};
use crate::term::rfc3339;

const CLOCK: &str = "demo clock: starts minutes before now, follows real time during HTTP calls and jumps where the story waits (reconciler schedule, visibility lag), ending before now";

/// How long before the wall clock the story starts. The story jumps ahead
/// of real time (about 33 s: the 30 s visibility lag and two reconciler
/// checks); starting it this far back keeps every time it records in the
/// past, so `handover ops list` on the demo's ledger shows no operation
/// created in the future. Each run starts after what earlier runs
/// recorded, so about a dozen runs fit in this window at once.
const START_BEFORE_NOW: Duration = Duration::from_secs(10 * 60);

/// The latest a run may start before the wall clock: a bound on the
/// story's simulated span (its at most four reconciler checks back off
/// from 15 s to 1 m: under 3 min, with the lag).
const LATEST_START_BEFORE_NOW: Duration = Duration::from_secs(5 * 60);

/// When this run's story starts: [`START_BEFORE_NOW`] ago, after whatever
/// an earlier run recorded (so time never runs backwards on the ledger),
/// but never later than [`LATEST_START_BEFORE_NOW`] ago. When many runs
/// in a few minutes crowd that window, staying in the past wins over
/// following the earlier run: this run's times may then interleave with
/// the previous one's, on other keys.
fn story_start(now: Timestamp, latest_earlier: Option<Timestamp>) -> Timestamp {
    let mut start = now.minus(START_BEFORE_NOW);
    if let Some(t) = latest_earlier {
        start = start.max(t.plus(Duration::from_secs(1)));
    }
    start.min(now.minus(LATEST_START_BEFORE_NOW))
}

fn tool() -> Tool {
    Tool::function(
        ACTION,
        Some("Create a shipment at the carrier".to_owned()),
        json!({
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
    )
}

/// Opens the ledger and plays the story under a fresh key.
pub(super) async fn play(path: &Path) -> anyhow::Result<Report> {
    let clock = DemoClock::new(crate::term::now().minus(START_BEFORE_NOW));
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
    // Nothing of this run is recorded yet.
    clock.start_at(story_start(
        crate::term::now(),
        earlier.iter().map(|r| r.updated_at).max(),
    ));
    let (run, key) = fresh_key(ledger.as_ref(), earlier.len()).await?;
    let id = OperationId::new(SCOPE, &key)?;

    let primary = MockProvider::start(Flavor::OpenAi).await;
    let fallback = MockProvider::start(Flavor::DeepSeek).await;
    let dest = MockDestination::builder()
        .visibility_lag(Duration::from_secs(30))
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
        params: None,
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
    // Closed, not dropped: the ledger file alone then holds every record
    // (SQLite folds its write-ahead log in), ready to copy or inspect.
    cast.ledger.close().await;
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
    /// Asks the model with the shipment tool and takes the tool call it
    /// proposes (`who` names the model in the error if it proposes none).
    async fn propose(
        &mut self,
        task: &Task,
        task_start: Timestamp,
        messages: &[Message],
        who: &str,
    ) -> anyhow::Result<(Completion, ToolCall)> {
        let request = ChatRequest::new(messages.to_vec()).with_tools(vec![tool()]);
        let completion = self.chat(task, task_start, &request).await?;
        let Some(call) = completion.response.tool_calls.first().cloned() else {
            bail!("{who} did not propose the shipment");
        };
        Ok((completion, call))
    }

    /// Hands a proposed call to the write gate under the user's approval,
    /// drawing on the task's budget.
    async fn perform(
        &self,
        call: &ProposedCall,
        task: &Task,
        executor: &impl Executor,
    ) -> anyhow::Result<PerformOutcome> {
        let options = PerformOptions {
            budget: Some(task.budget()),
            metadata: None,
        };
        Ok(self
            .gate
            .perform_call(call, &self.approval, executor, options)
            .await?)
    }

    /// What the two models and the destination will do in the story.
    fn script(&self) {
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
    }

    async fn story(&mut self) -> anyhow::Result<()> {
        self.script();
        let task = self.router.task(POLICY)?;
        let task_start = self.clock.now();
        let mut messages = vec![
            Message::system("You are the support assistant of a web shop."),
            Message::user("Order 1042 arrived broken. Please send a replacement."),
        ];
        let executor = app::executor(&self.dest);

        // 1. The user asks; the primary model proposes the shipment.
        let (c1, tc1) = self.ask_and_approve(&task, task_start, &messages).await?;

        // 2. The write gate sends it; the confirmation is lost.
        let call1 =
            ProposedCall::from_tool_call(&tc1, Some(&c1.provider), Some(&c1.response.model))?;
        let out1 = self.perform(&call1, &task, &executor).await?;
        self.narrate_first_dispatch(&out1).await?;

        // 3. The agent asks the model again; the primary fails, the fallback
        //    re-proposes the same shipment under a new tool-call id.
        messages.push(Message::assistant_tool_calls(None, vec![tc1.clone()]));
        messages.push(Message::tool_result(
            tc1.id.clone(),
            "error: the connection was lost before the carrier confirmed",
        ));
        let (call2, tc2) = self
            .fallback_reproposes(&task, task_start, &messages, &executor)
            .await?;

        // 4. The fallback explains what is pending (it cannot confirm anything).
        messages.push(Message::assistant_tool_calls(None, vec![tc2.clone()]));
        messages.push(Message::tool_result(
            tc2.id.clone(),
            "refused: an identical approved shipment is awaiting confirmation; do not retry",
        ));
        self.fallback_explains(&task, task_start, messages).await?;

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
        self.user_retry(&call2, &executor).await
    }

    /// Step 1: the user's request, the primary's proposal, the approval.
    async fn ask_and_approve(
        &mut self,
        task: &Task,
        task_start: Timestamp,
        messages: &[Message],
    ) -> anyhow::Result<(Completion, ToolCall)> {
        self.tl.push(
            Actor::User,
            "user",
            None,
            "\"Order 1042 arrived broken. Please send a replacement.\"",
            None,
        );
        let (c1, tc1) = self
            .propose(task, task_start, messages, "the primary model")
            .await?;
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
        Ok((c1, tc1))
    }

    /// Step 3: the fallback's re-proposal under a new tool-call id, which
    /// the gate refuses while the first dispatch is unknown.
    async fn fallback_reproposes(
        &mut self,
        task: &Task,
        task_start: Timestamp,
        messages: &[Message],
        executor: &impl Executor,
    ) -> anyhow::Result<(ProposedCall, ToolCall)> {
        let (c2, tc2) = self
            .propose(task, task_start, messages, "the fallback model")
            .await?;
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
        let call2 =
            ProposedCall::from_tool_call(&tc2, Some(&c2.provider), Some(&c2.response.model))?;
        let before = self.dest.action_requests().await;
        let out2 = self.perform(&call2, task, executor).await?;
        let answered_at = self.clock.now();
        let sent = self.dest.action_requests().await - before;
        self.narrate_refusal(&out2, answered_at, sent);
        Ok((call2, tc2))
    }

    /// Step 4: the fallback tells the user what is pending.
    async fn fallback_explains(
        &mut self,
        task: &Task,
        task_start: Timestamp,
        messages: Vec<Message>,
    ) -> anyhow::Result<()> {
        let request = ChatRequest::new(messages).with_tools(vec![tool()]);
        let c3 = self.chat(task, task_start, &request).await?;
        let text = c3.response.content.clone().unwrap_or_default();
        self.tl.push(
            Actor::Provider,
            &c3.provider,
            None,
            format!("tells the user: \"{text}\""),
            None,
        );
        Ok(())
    }

    /// Step 3's answer: the gate refuses to send the re-proposal while the
    /// first dispatch is unknown.
    fn narrate_refusal(&mut self, out2: &PerformOutcome, answered_at: Timestamp, sent: usize) {
        match out2 {
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
    }

    /// Step 6: the user's retry replays the recorded confirmation.
    async fn user_retry(
        &mut self,
        call: &ProposedCall,
        executor: &impl Executor,
    ) -> anyhow::Result<()> {
        let before = self.dest.action_requests().await;
        let out3 = self
            .gate
            .perform_call(call, &self.approval, executor, PerformOptions::default())
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
}
