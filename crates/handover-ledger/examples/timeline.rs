//! The seed timeline on a real SQLite file:
//! begin → begin → begin(changed params) → confirm → begin
//! = started, in_progress, conflict, confirmed, replayed.
//!
//! ```text
//! cargo run -p handover-ledger --example timeline [-- path/to/ledger.db]
//! ```
//!
//! Run it twice on the same file: the second run finds the recorded outcome
//! and replays it instead of executing again.

use std::time::Duration;

use handover_ledger::{
    BeginOptions, BeginOutcome, Dispatch, Ledger, LedgerError, Limits, OperationRequest,
    SqliteLedger, SqliteOptions,
};
use serde_json::json;

fn show(step: &str, outcome: &BeginOutcome) {
    let answer = match outcome {
        BeginOutcome::Started(c) => format!(
            "started      (epoch {}, destination key {})",
            c.epoch, c.destination_key
        ),
        BeginOutcome::InProgress { holder, state, .. } => {
            format!("in_progress  ({state}, held by {holder})")
        }
        BeginOutcome::Conflict {
            recorded,
            requested,
        } => format!(
            "conflict     (recorded {}…, requested {}…)",
            &recorded.to_string()[..12],
            &requested.to_string()[..12]
        ),
        BeginOutcome::Replayed(t) => format!("replayed     {}", json!(t)),
        BeginOutcome::Unresolved(info) => format!("unresolved   ({})", info.reason),
        BeginOutcome::Suspended { blocked_by, .. } => format!("suspended    (by {blocked_by})"),
        BeginOutcome::Cancelled { reason } => format!("cancelled    ({reason})"),
    };
    println!("{step:<44} -> {answer}");
}

#[tokio::main]
async fn main() -> Result<(), LedgerError> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "handover-timeline.db".to_owned());
    let ledger = SqliteLedger::open(&path, SqliteOptions::default()).await?;
    println!("ledger file: {path}\n");

    let approved = json!({"order": "O-1001", "carrier": "dhl", "reason": "damaged in transit"});
    let changed = json!({"order": "O-1001", "carrier": "ups", "reason": "damaged in transit"});
    let limits = Limits::default();
    let req = OperationRequest::new(
        "tenant-1",
        "K-701",
        "create_replacement_shipment",
        &approved,
        &limits,
    )?;
    let req_changed = OperationRequest::new(
        "tenant-1",
        "K-701",
        "create_replacement_shipment",
        &changed,
        &limits,
    )?;
    let primary = BeginOptions::new("primary-model", Duration::from_secs(30));
    let fallback = BeginOptions::new("fallback-model", Duration::from_secs(30));

    let first = ledger.begin(&req, &primary).await?;
    show("1. begin K-701 (primary)", &first);
    let BeginOutcome::Started(claim) = first else {
        println!("\nK-701 was recorded by an earlier run; nothing is executed again.");
        print_record(&ledger, &req).await?;
        return Ok(());
    };
    show(
        "2. begin K-701 (fallback, same params)",
        &ledger.begin(&req, &fallback).await?,
    );
    show(
        "3. begin K-701 (fallback, carrier changed)",
        &ledger.begin(&req_changed, &fallback).await?,
    );
    ledger
        .mark_dispatched(
            &claim,
            Dispatch {
                executor: "primary-model".into(),
                metadata: Some(json!({"tool_call_id": "call_abc"})),
            },
        )
        .await?;
    println!(
        "{:<44} -> dispatched (durable before the first byte)",
        "   mark_dispatched"
    );
    let rec = ledger
        .confirm(
            &claim,
            json!({"shipment_id": "S-88231"}),
            Some("201 Created".into()),
        )
        .await?;
    println!("{:<44} -> {}", "4. confirm", rec.state.kind());
    show(
        "5. begin K-701 (fallback, new tool-call id)",
        &ledger.begin(&req, &fallback).await?,
    );
    print_record(&ledger, &req).await
}

async fn print_record(ledger: &SqliteLedger, req: &OperationRequest) -> Result<(), LedgerError> {
    let rec = ledger.get(req.id()).await?;
    println!("\nstored record:\n{:#}", json!(rec));
    println!("\nattempts:\n{:#}", json!(ledger.attempts(req.id()).await?));
    Ok(())
}
