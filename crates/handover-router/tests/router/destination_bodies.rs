//! A destination's answer is read with a cap (4 MiB, 64 KiB of a refusal
//! or failure): a destination, or whatever answers at its URL, cannot make
//! the write gate or the reconciler hold an unbounded body. A probe's
//! lookup endpoint streamed 500 MB into every reconciler pass. Real HTTP
//! (wiremock), real SQLite ledger files.

use crate::support;

use handover_ledger::State;
use handover_router::gate::{HttpJsonExecutor, PerformOptions, PerformOutcome};
use serde_json::json;
use support::*;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

const SHIP: &str = "[actions.create_shipment]\ntimeout = \"5s\"\n";
const CAP: usize = 4 * 1024 * 1024;

/// A JSON string of `len` bytes, quotes included.
fn json_text(len: usize) -> Vec<u8> {
    let mut s = vec![b'"'];
    s.resize(len - 1, b'x');
    s.push(b'"');
    s
}

async fn destination(status: u16, body: Vec<u8>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(status).set_body_raw(body, "application/json"))
        .mount(&server)
        .await;
    server
}

/// Performs one write against `server`; its outcome, recorded state and
/// the dispatch's evidence.
async fn perform(server: &MockServer, key: &str) -> (PerformOutcome, State, String) {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let ledger = sqlite(&dir.path().join("l.db"), &clock).await;
    let g = gate(ledger.clone(), &config(SHIP), &clock, "g");
    let exec = HttpJsonExecutor::new(reqwest::Client::new(), server.uri());
    let req = g
        .request("t", key, "create_shipment", &json!({"order": key}))
        .unwrap();
    let outcome = g
        .perform(&req, &exec, PerformOptions::default())
        .await
        .unwrap();
    let rec = handover_ledger::Ledger::get(&*ledger, req.id())
        .await
        .unwrap()
        .unwrap();
    let attempts = handover_ledger::Ledger::attempts(&*ledger, req.id())
        .await
        .unwrap();
    let evidence = attempts[0].evidence.clone().unwrap_or_default();
    (outcome, rec.state, evidence)
}

#[tokio::test]
async fn a_write_answer_over_the_cap_is_unknown_and_a_long_refusal_is_cut() {
    // Past the cap: the write happened, but its result cannot be read;
    // unknown (a lookup settles it), never confirmed, sent once. (Under
    // the cap, a result over the ledger's size limit is recorded unknown
    // for review by the protocol, as any answer it cannot record.)
    let server = destination(201, json_text(CAP + 1)).await;
    let (outcome, state, evidence) = perform(&server, "K-over").await;
    assert!(
        matches!(outcome, PerformOutcome::Unresolved(_)),
        "{outcome:?}"
    );
    assert!(matches!(state, State::Unknown(_)), "{state:?}");
    assert!(evidence.contains("too large"), "{evidence}");
    assert_eq!(server.received_requests().await.unwrap().len(), 1);

    // A refusal's body is the evidence, cut at 64 KiB.
    let server = destination(422, json_text(1024 * 1024)).await;
    let (outcome, state, _) = perform(&server, "K-refused").await;
    assert!(
        matches!(outcome, PerformOutcome::Rejected { .. }),
        "{outcome:?}"
    );
    let State::Rejected { evidence, .. } = state else {
        panic!("{state:?}")
    };
    let evidence = evidence.unwrap();
    assert!(evidence.len() < 65 * 1024, "{}", evidence.len());
    assert!(evidence.ends_with("bytes)"), "says it was cut");
}

#[tokio::test]
async fn a_lookup_answer_over_the_cap_proves_nothing() {
    for (len, read) in [(CAP, true), (CAP + 1, false)] {
        let dest = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(
                ResponseTemplate::new(200).set_body_raw(json_text(len), "application/json"),
            )
            .mount(&dest)
            .await;
        let answer = configured_lookup(&dest.uri()).await;
        if read {
            let records = answer.unwrap();
            assert_eq!(records.len(), 1);
            assert_eq!(records[0].result.as_str().map(str::len), Some(CAP - 2));
        } else {
            let why = answer.unwrap_err();
            assert!(why.contains("over 4194304 bytes"), "{why}");
        }
    }
}
