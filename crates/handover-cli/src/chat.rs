//! `handover chat`: one prompt through a policy's fallback chain, with real
//! providers (keys from the environment). Prints the answer, who answered
//! and every attempt, so the fallback behaviour of a config can be tried by
//! hand.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use futures::StreamExt;
use handover::Config;
use handover::providers::{ChatRequest, Message, StreamEvent};
use handover::router::route::{Attempt, AttemptResult, Router, Skip};
use serde_json::json;

use crate::term::{Spinner, Style};

/// Arguments of `handover chat`.
#[derive(Debug, Args)]
pub(crate) struct ChatArgs {
    /// The configuration file.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The policy (fallback chain and budget) to use.
    #[arg(long, value_name = "NAME", default_value = "default")]
    policy: String,
    /// The prompt (not empty: a call with nothing to answer costs a
    /// request and says nothing).
    #[arg(value_parser = clap::builder::NonEmptyStringValueParser::new())]
    prompt: String,
    /// A system message.
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,
    /// The data class of the prompt (only providers listing it receive it).
    #[arg(long, value_name = "CLASS")]
    data_class: Option<String>,
    /// Print tokens as they arrive.
    #[arg(long)]
    stream: bool,
    /// Print one JSON document instead (not with --stream).
    #[arg(long, conflicts_with = "stream")]
    json: bool,
}

fn request(args: &ChatArgs) -> ChatRequest {
    let mut messages = Vec::new();
    if let Some(s) = &args.system {
        messages.push(Message::system(s.clone()));
    }
    messages.push(Message::user(args.prompt.clone()));
    let req = ChatRequest::new(messages);
    match &args.data_class {
        Some(c) => req.with_data_class(c.clone()),
        None => req,
    }
}

pub(crate) fn result_name(r: &AttemptResult) -> String {
    match r {
        AttemptResult::Answered => "answered".to_owned(),
        AttemptResult::Failed(class) => format!("failed: {class}"),
        AttemptResult::Abandoned => {
            "abandoned (still running; a late answer is recorded, never used)".to_owned()
        }
    }
}

/// Providers passed over, one a line (empty when none was).
fn skipped_text(skipped: &[Skip]) -> String {
    skipped
        .iter()
        .map(|s| format!("  skipped {} ({}): {}\n", s.provider, s.model, s.reason))
        .collect()
}

fn attempts_text(attempts: &[Attempt]) -> String {
    let mut out = String::new();
    for (i, a) in attempts.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {}. {} ({}) {:>6}ms..{:>6}ms  {}{}{}{}",
            i + 1,
            a.provider,
            a.model,
            a.started.as_millis(),
            a.ended.as_millis(),
            result_name(&a.result),
            if a.sent { "" } else { ", not sent" },
            a.request_id
                .as_deref()
                .map(|r| format!(", request id {r}"))
                .unwrap_or_default(),
            if a.late { ", late" } else { "" }
        );
    }
    out
}

fn attempts_json(attempts: &[Attempt]) -> serde_json::Value {
    attempts
        .iter()
        .map(|a| {
            json!({
                "provider": a.provider,
                "model": a.model,
                "started_ms": u64::try_from(a.started.as_millis()).unwrap_or(u64::MAX),
                "ended_ms": u64::try_from(a.ended.as_millis()).unwrap_or(u64::MAX),
                "result": result_name(&a.result),
                "sent": a.sent,
                "request_id": a.request_id,
                "late": a.late,
            })
        })
        .collect()
}

pub(crate) async fn run(args: ChatArgs) -> anyhow::Result<ExitCode> {
    let config = Config::load(&args.config)
        .with_context(|| format!("cannot use {}", args.config.display()))?;
    let router = Router::new(&config)?;
    let task = router.task(&args.policy)?;
    let req = request(&args);
    let style = Style::stdout();
    if args.stream {
        return stream(&router, &task, &req, style).await;
    }
    let spinner = Spinner::start(&format!("asking policy {}...", args.policy));
    let result = router.chat(&task, &req).await;
    drop(spinner);
    let completion = match result {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            if let Some(f) = e.task_failure() {
                eprint!("attempts:\n{}", attempts_text(&f.attempts));
                eprintln!("{}", skipped_text(&f.skipped));
            }
            return Ok(ExitCode::FAILURE);
        }
    };
    let text = completion.response.content.clone().unwrap_or_default();
    if args.json {
        let doc = json!({
            "answer": text,
            "tool_calls": completion.response.tool_calls.iter().map(|c| json!({"id": c.id, "name": c.name, "arguments": c.arguments})).collect::<Vec<_>>(),
            "provider": completion.provider,
            "model": completion.response.model,
            "usage": completion.response.usage.as_ref().map(|u| json!({"input_tokens": u.input_tokens, "output_tokens": u.output_tokens})),
            "cost_usd": completion.cost,
            "attempts": attempts_json(&completion.attempts),
            "skipped": completion.skipped.iter().map(|s| json!({"provider": s.provider, "model": s.model, "reason": s.reason.as_str()})).collect::<Vec<_>>(),
            "requests_sent": completion.spent.requests,
        });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(ExitCode::SUCCESS);
    }
    outln!("{text}");
    for c in &completion.response.tool_calls {
        outln!("[tool call {} {}({})]", c.id, c.name, c.arguments);
    }
    outln!();
    let usage = completion
        .response
        .usage
        .as_ref()
        .map(|u| format!(", {} tokens in, {} out", u.input_tokens, u.output_tokens))
        .unwrap_or_default();
    outln!(
        "{} {} (model {}){usage}",
        style.dim("answered by"),
        style.bold(&completion.provider),
        completion.response.model
    );
    outln!(
        "{} ({} request(s) sent):\n{}{}",
        style.dim("attempts"),
        completion.spent.requests,
        attempts_text(&completion.attempts),
        skipped_text(&completion.skipped)
    );
    Ok(ExitCode::SUCCESS)
}

async fn stream(
    router: &Router,
    task: &handover::router::route::Task,
    req: &ChatRequest,
    style: Style,
) -> anyhow::Result<ExitCode> {
    let spinner = Spinner::start("waiting for the first token...");
    let mut stream = match router.chat_stream(task, req).await {
        Ok(s) => s,
        Err(e) => {
            drop(spinner);
            eprintln!("error: {e}");
            if let Some(f) = e.task_failure() {
                eprint!("attempts:\n{}", attempts_text(&f.attempts));
                eprintln!("{}", skipped_text(&f.skipped));
            }
            return Ok(ExitCode::FAILURE);
        }
    };
    let mut spinner = Some(spinner);
    let mut model = None;
    let mut broken = None;
    let mut stdout = std::io::stdout();
    while let Some(item) = stream.next().await {
        spinner.take();
        match item {
            Ok(StreamEvent::ContentDelta(t)) => {
                let _ = write!(stdout, "{t}");
                let _ = stdout.flush();
            }
            Ok(StreamEvent::Model(m)) => model = Some(m),
            Ok(_) => {}
            Err(b) => broken = Some(b),
        }
    }
    drop(spinner);
    outln!("\n");
    let provider = stream.provider().to_owned();
    outln!(
        "{} {} (model {})",
        style.dim("answered by"),
        style.bold(&provider),
        model.unwrap_or_else(|| "not reported".to_owned())
    );
    outln!(
        "{}:\n{}",
        style.dim("attempts"),
        attempts_text(stream.attempts())
    );
    for p in stream.partials() {
        outln!(
            "partial output of a failed attempt from {} ({} events), not part of the answer: {:?}",
            p.provider,
            p.events,
            p.text
        );
    }
    if let Some(b) = broken {
        eprintln!("error: {b}");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
