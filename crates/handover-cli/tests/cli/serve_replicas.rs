//! Two `handover serve` processes (the real binary) on one PostgreSQL
//! ledger share the reconciliation of 200 unknown operations: every
//! operation is looked up exactly once (counted at the destination, a
//! wiremock server), both replicas take part, all are resolved, and one
//! operation whose lookup keeps failing stops no pass. Runs when
//! `HANDOVER_TEST_POSTGRES_URL` is set (in a fresh schema); fails if it is
//! set and unreachable.

use crate::support;

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use handover::ledger::{
    BeginOptions, BeginOutcome, Clock, Dispatch, Ledger, Limits, ListFilter, OperationRequest,
    Owner, PostgresLedger, PostgresOptions, StateKind, SystemClock, UnknownReport,
};
use serde_json::json;
use support::*;
use tokio::sync::mpsc;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const URL_VAR: &str = "HANDOVER_TEST_POSTGRES_URL";
const CLI_URL_VAR: &str = "HANDOVER_CLI_TEST_LEDGER_URL";
const OPS: usize = 200;
const BAD: &str = "O-bad";

/// The destination's lookup endpoint: finds every order but `O-bad`
/// (answers 500), a little slowly so the replicas' passes overlap, and
/// reports each lookup's order to the test.
struct Lookups(mpsc::UnboundedSender<String>);

impl Respond for Lookups {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let query: BTreeMap<String, String> = req.url.query_pairs().into_owned().collect();
        let order = query.get("order").cloned().unwrap_or_default();
        let _ = self.0.send(order.clone());
        if order == BAD {
            return ResponseTemplate::new(500);
        }
        ResponseTemplate::new(200)
            .set_delay(Duration::from_millis(5))
            .set_body_json(json!({"items": [{"order": order, "ref": query.get("ref")}]}))
    }
}

fn config(dest: &str, replica: &str) -> String {
    format!(
        r#"
[ledger]
backend = "postgres"
url_env = "{CLI_URL_VAR}"

[providers.p]
kind = "openai_compatible"
base_url = "http://127.0.0.1:9/v1"
model = "m"

[policies.default]
chain = ["p"]

[actions.ship]
timeout = "5s"
[actions.ship.lookup]
visibility_lag = "1s"
check_every = "1s"
max_check_every = "2s"
url = "{dest}/lookup?ref={{destination_key}}&order={{params.order}}"
records = "/items"
[actions.ship.lookup.headers]
X-Replica = "{replica}"
[actions.ship.lookup.match]
order = "/order"

[gateway]
listen = "127.0.0.1:0"
reconcile_every = "50ms"
[gateway.clients.app]
token_sha256 = "50f88aa457efc9d22985f9f0efd335f30b8fd187a999b69a70f11e6a8be39f4f"
scope = "tenant-1"
"#
    )
}

/// Starts `handover serve` and waits for its readiness line.
fn serve(config: &std::path::Path, url: &str) -> Child {
    let mut child = handover()
        .env(CLI_URL_VAR, url)
        .args(["serve", "--config", config.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "serve exited before listening"
        );
        if line.contains("listening on ") {
            break;
        }
    }
    // Keep draining stderr so the child never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    child
}

async fn seed(ledger: &PostgresLedger) {
    let now = SystemClock.now();
    for i in 0..OPS {
        let order = if i == 0 {
            BAD.to_owned()
        } else {
            format!("O-{i}")
        };
        let req = OperationRequest::new(
            "tenant-1",
            &format!("K-{i}"),
            "ship",
            &json!({"order": order}),
            &Limits::default(),
        )
        .unwrap();
        let BeginOutcome::Started(claim) = ledger
            .begin(&req, &BeginOptions::new("agent", Duration::from_secs(30)))
            .await
            .unwrap()
        else {
            panic!("not started")
        };
        let dispatch = Dispatch {
            executor: "agent".into(),
            metadata: None,
        };
        ledger.mark_dispatched(&claim, dispatch).await.unwrap();
        let report = UnknownReport {
            reason: "connection reset after sending".into(),
            evidence: None,
            owner: Owner::Reconciler,
            next_check_at: Some(now),
        };
        ledger.mark_unknown(&claim, report).await.unwrap();
    }
}

fn interrupt(child: &Child) {
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_serve_replicas_share_the_reconciliation_without_racing() {
    let Some(url) = std::env::var(URL_VAR).ok().filter(|u| !u.trim().is_empty()) else {
        println!("skipped: {URL_VAR} not set");
        return;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let schema = format!("replicas_{}_{nanos}", std::process::id());
    let _guard = SchemaGuard {
        url: url.clone(),
        schema: schema.clone(),
    };
    let ledger = PostgresLedger::connect(
        &url,
        PostgresOptions {
            schema: Some(schema.clone()),
            ..PostgresOptions::default()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{URL_VAR} is set but the database is not usable: {e}"));

    let dest = MockServer::start().await;
    let (tx, mut looked_up) = mpsc::unbounded_channel();
    Mock::given(wiremock::matchers::path("/lookup"))
        .respond_with(Lookups(tx))
        .mount(&dest)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let cli_url = with_search_path(&url, &schema);
    let mut replicas = Vec::new();
    for name in ["a", "b"] {
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, config(&dest.uri(), name)).unwrap();
        replicas.push(serve(&path, &cli_url));
    }
    seed(&ledger).await;

    // Signals, not sleeps: wait until every order was looked up.
    let mut seen = HashSet::new();
    tokio::time::timeout(Duration::from_secs(90), async {
        while seen.len() < OPS {
            seen.insert(looked_up.recv().await.expect("destination running"));
        }
    })
    .await
    .unwrap_or_else(|_| panic!("only {} of {OPS} operations looked up", seen.len()));
    for child in &replicas {
        interrupt(child);
    }
    for child in replicas {
        let exit = tokio::task::spawn_blocking(move || {
            let mut child = child;
            child.wait().unwrap()
        })
        .await
        .unwrap();
        assert!(exit.success(), "serve exited with {exit:?}");
    }

    let requests = dest.received_requests().await.unwrap();
    let mut per_order: BTreeMap<String, usize> = BTreeMap::new();
    let mut per_replica: BTreeMap<String, usize> = BTreeMap::new();
    for r in &requests {
        let order = r
            .url
            .query_pairs()
            .find(|(k, _)| k == "order")
            .map(|(_, v)| v.into_owned())
            .unwrap();
        *per_order.entry(order).or_default() += 1;
        let replica = r
            .headers
            .get("x-replica")
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        *per_replica.entry(replica).or_default() += 1;
    }
    println!(
        "lookups: {} requests, per replica {per_replica:?}, failing order {}x",
        requests.len(),
        per_order.get(BAD).copied().unwrap_or(0)
    );
    assert_eq!(per_order.len(), OPS);
    let twice: Vec<_> = per_order
        .iter()
        .filter(|(o, n)| o.as_str() != BAD && **n != 1)
        .collect();
    assert!(twice.is_empty(), "looked up more than once: {twice:?}");
    assert!(
        per_replica.len() == 2 && per_replica.values().all(|n| *n > 0),
        "both replicas took part: {per_replica:?}"
    );

    let count = |state: StateKind| {
        let ledger = &ledger;
        async move {
            ledger
                .list(&ListFilter {
                    state: Some(state),
                    ..ListFilter::default()
                })
                .await
                .unwrap()
                .len()
        }
    };
    assert_eq!(count(StateKind::Confirmed).await, OPS - 1, "all resolved");
    assert_eq!(
        count(StateKind::Unknown).await,
        1,
        "only the one whose lookup fails"
    );
}
