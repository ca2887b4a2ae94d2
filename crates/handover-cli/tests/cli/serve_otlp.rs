//! `[telemetry] otlp_endpoint`: the real `handover serve` exports its spans
//! over OTLP/HTTP to a collector in the test, with the GenAI semantic-
//! convention names, and a collector that stalls or is unreachable never
//! slows or fails a request.

use crate::support;

use std::collections::HashMap;

use handover_testkit::{Flavor, MockProvider, Reply};
use serde_json::{Value, json};
use support::{signal, start_with};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const TOKEN: &str = "example-client-token";
const TOKEN_SHA256: &str = "50f88aa457efc9d22985f9f0efd335f30b8fd187a999b69a70f11e6a8be39f4f";
/// Must never reach an exported span.
const PROMPT: &str = "ship order 4411 to the secret address";
const COLLECTOR_KEY: &str = "collector-secret-7731";
/// How long a test waits for an event before failing (a deadline, not a sleep).
const DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

/// Primary then fallback, one try each, and `telemetry` as given.
fn config(
    dir: &std::path::Path,
    primary: &str,
    fallback: &str,
    telemetry: &str,
) -> std::path::PathBuf {
    let path = dir.join("handover.toml");
    std::fs::write(
        &path,
        format!(
            "[ledger]\nbackend = \"memory\"\n\n\
             [providers.primary]\nkind = \"openai_compatible\"\nbase_url = \"{primary}\"\nmodel = \"m1\"\n\n\
             [providers.fallback]\nkind = \"openai_compatible\"\nbase_url = \"{fallback}\"\nmodel = \"m2\"\n\n\
             [policies.default]\nchain = [\"primary\", \"fallback\"]\nmax_attempts_per_provider = 1\n\n\
             [gateway]\nlisten = \"127.0.0.1:0\"\nshutdown_grace = \"2s\"\n\n\
             [gateway.clients.app]\ntoken_sha256 = \"{TOKEN_SHA256}\"\nscope = \"tenant-1\"\n\n\
             [telemetry]\n{telemetry}\n"
        ),
    )
    .unwrap();
    path
}

async fn chat(client: &reqwest::Client, addr: &str) -> reqwest::Response {
    client
        .post(format!("{addr}/v1/chat/completions"))
        .bearer_auth(TOKEN)
        .json(&json!({
            "model": "default",
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": 64,
            "temperature": 0.5,
        }))
        .send()
        .await
        .unwrap()
}

/// The spans of every export request, by name, with attributes as a map.
fn spans(bodies: &[Value]) -> Vec<(String, Value, HashMap<String, Value>)> {
    let mut out = Vec::new();
    for body in bodies {
        for rs in body["resourceSpans"].as_array().unwrap() {
            for ss in rs["scopeSpans"].as_array().unwrap() {
                for s in ss["spans"].as_array().unwrap() {
                    let attrs = s["attributes"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|a| {
                            let v = &a["value"];
                            let v = v
                                .get("stringValue")
                                .or_else(|| v.get("intValue"))
                                .or_else(|| v.get("boolValue"))
                                .or_else(|| v.get("doubleValue"))
                                .cloned()
                                .unwrap();
                            (a["key"].as_str().unwrap().to_owned(), v)
                        })
                        .collect();
                    out.push((s["name"].as_str().unwrap().to_owned(), s.clone(), attrs));
                }
            }
        }
    }
    out
}

/// Serves one chat that falls back (primary 500, fallback answers) with
/// export on, stops with SIGTERM, and returns the export bodies, checked
/// for content type, the collector's key, and no prompt, token or key.
async fn export_one_fallback_chat(rust_log: Option<&'static str>) -> Vec<Value> {
    let primary = MockProvider::start(Flavor::OpenAi).await;
    primary.script([Reply::server_error()]);
    let fallback = MockProvider::start(Flavor::OpenAi).await;
    fallback.script([Reply::text("Answered by the fallback.")]);
    let collector = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/traces"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({})))
        .mount(&collector)
        .await;
    let dir = tempfile::tempdir().unwrap();
    // Exports only at shutdown (a one-hour interval): what arrives was
    // flushed by the graceful stop.
    let cfg = config(
        dir.path(),
        &primary.base_url(),
        &fallback.base_url(),
        &format!(
            "otlp_endpoint = \"{}\"\nservice_name = \"handover-test\"\nexport_interval = \"1h\"\n\
             [telemetry.headers]\nauthorization = {{ env = \"OTLP_TEST_KEY\", prefix = \"Bearer \" }}\n",
            collector.uri()
        ),
    );
    let (mut child, addr, _lines) = tokio::task::spawn_blocking(move || {
        start_with(&cfg, &[], rust_log, &[("OTLP_TEST_KEY", COLLECTOR_KEY)])
    })
    .await
    .unwrap();

    let resp = chat(&reqwest::Client::new(), &addr).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-handover-provider"], "fallback");
    assert_eq!(primary.requests().await, 1);
    assert_eq!(fallback.requests().await, 1);

    signal(&child, "TERM");
    let exit = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(exit.success(), "{exit:?}");

    let received = collector.received_requests().await.unwrap();
    assert!(!received.is_empty(), "nothing was exported");
    for r in &received {
        assert_eq!(r.headers["content-type"], "application/json");
        assert_eq!(
            r.headers["authorization"].to_str().unwrap(),
            format!("Bearer {COLLECTOR_KEY}")
        );
        let text = String::from_utf8_lossy(&r.body);
        assert!(
            !text.contains(PROMPT) && !text.contains(TOKEN) && !text.contains(COLLECTOR_KEY),
            "a prompt, token or key was exported: {text}"
        );
    }
    let bodies: Vec<Value> = received
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    bodies
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fallback_chat_is_exported_with_genai_names_and_flushed_on_sigterm() {
    let bodies = export_one_fallback_chat(None).await;
    let resource = &bodies[0]["resourceSpans"][0]["resource"]["attributes"];
    assert!(
        resource
            .as_array()
            .unwrap()
            .contains(&json!({"key": "service.name", "value": {"stringValue": "handover-test"}})),
        "{resource}"
    );
    let spans = spans(&bodies);
    let find = |name: &str| {
        spans
            .iter()
            .find(|(n, _, _)| n == name)
            .unwrap_or_else(|| panic!("no span {name:?} in {spans:#?}"))
    };

    // The providers' attempt spans, named `{operation} {model}`.
    let (_, first, a1) = find("chat m1");
    assert_eq!(a1["gen_ai.operation.name"], "chat");
    assert_eq!(a1["gen_ai.provider.name"], "openai_compatible");
    assert_eq!(a1["gen_ai.system"], "openai_compatible");
    assert_eq!(a1["gen_ai.request.model"], "m1");
    assert_eq!(a1["handover.provider"], "primary");
    assert_eq!(a1["handover.attempt"], "1");
    assert_eq!(a1["handover.outcome"], "failed");
    assert_eq!(a1["error.type"], "server_error");
    assert_eq!(a1["http.response.status_code"], "500");
    assert_eq!(a1["gen_ai.request.max_tokens"], "64");
    assert_eq!(a1["gen_ai.request.temperature"], 0.5);
    assert_eq!(first["status"]["code"], 2);
    assert_eq!(first["kind"], 3);
    let (_, second, a2) = find("chat m2");
    assert_eq!(a2["handover.provider"], "fallback");
    assert_eq!(a2["handover.attempt"], "2");
    assert_eq!(a2["handover.outcome"], "answered");
    assert!(a2.contains_key("gen_ai.response.model"), "{a2:?}");
    assert!(a2.contains_key("gen_ai.usage.input_tokens"), "{a2:?}");
    assert!(a2.contains_key("gen_ai.usage.output_tokens"), "{a2:?}");
    assert!(!a2.contains_key("error.type"), "{a2:?}");
    assert_eq!(a2["http.response.status_code"], "200");
    assert_eq!(a2["gen_ai.request.max_tokens"], "64");

    // The router's task span and the gateway's request span around them.
    let (_, task, t) = find("handover.task.chat");
    assert_eq!(t["policy"], "default");
    assert_eq!(t["handover.outcome"], "answered");
    assert_eq!(t["handover.provider"], "fallback");
    assert_eq!(t["handover.attempts"], "2");
    let (_, request, r) = spans
        .iter()
        .find(|(n, _, a)| n == "request" && a["route"] == "/v1/chat/completions")
        .expect("the chat request's span");
    assert_eq!(r["policy"], "default");
    assert_eq!(request["kind"], 2);

    // One trace: request → task → attempts.
    let trace = &request["traceId"];
    assert_eq!(trace.as_str().unwrap().len(), 32);
    for s in [task, first, second] {
        assert_eq!(&s["traceId"], trace);
    }
    assert_eq!(task["parentSpanId"], request["spanId"]);
    assert_eq!(first["parentSpanId"], task["spanId"]);
    assert_eq!(second["parentSpanId"], task["spanId"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_or_unreachable_collector_neither_slows_nor_fails_requests() {
    let provider = MockProvider::start(Flavor::OpenAi).await;

    // A collector that reads the export request and never answers.
    let stalled = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let stalled_url = format!("http://{}", stalled.local_addr().unwrap());
    let (arrived_tx, mut arrived) = mpsc::unbounded_channel::<()>();
    let (closed_tx, mut closed) = mpsc::unbounded_channel::<()>();
    tokio::spawn(async move {
        loop {
            let (mut sock, _) = stalled.accept().await.unwrap();
            let (arrived_tx, closed_tx) = (arrived_tx.clone(), closed_tx.clone());
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                let mut told = false;
                loop {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => {
                            let _ = closed_tx.send(());
                            return;
                        }
                        Ok(_) if !told => {
                            told = true;
                            let _ = arrived_tx.send(());
                        }
                        Ok(_) => {}
                    }
                }
            });
        }
    });

    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        &provider.base_url(),
        &provider.base_url(),
        // A short interval so an export is out early; an export deadline
        // far longer than the whole test; a tiny queue that overflows.
        &format!(
            "otlp_endpoint = \"{stalled_url}\"\nexport_interval = \"100ms\"\nexport_timeout = \"10m\"\nmax_queued_spans = 4\n"
        ),
    );
    let (mut child, addr, _lines) =
        tokio::task::spawn_blocking(move || start_with(&cfg, &[], None, &[]))
            .await
            .unwrap();
    let client = reqwest::Client::new();
    assert_eq!(chat(&client, &addr).await.status(), 200);
    tokio::time::timeout(DEADLINE, arrived.recv())
        .await
        .expect("no export reached the collector")
        .unwrap();
    // The export now hangs; requests go on, and finish while it still hangs
    // (it would have to end before any request that waited for it).
    for _ in 0..20 {
        assert_eq!(chat(&client, &addr).await.status(), 200);
    }
    assert!(
        closed.try_recv().is_err(),
        "the stalled export ended before the requests did"
    );
    // SIGTERM: the flush gives up within shutdown_grace (2 s), not the
    // ten-minute export deadline, and the process exits 0.
    signal(&child, "TERM");
    let exit = tokio::time::timeout(
        DEADLINE,
        tokio::task::spawn_blocking(move || child.wait().unwrap()),
    )
    .await
    .expect("serve did not stop with a stalled collector")
    .unwrap();
    assert!(exit.success(), "{exit:?}");

    // Unreachable: the collector's port is bound but not listening, so a
    // connection is refused. (A port bound and dropped could be taken by
    // another test's server before the export tries it: the export then
    // reached something and never logged "cannot connect".)
    let gone = tokio::net::TcpSocket::new_v4().unwrap();
    gone.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let gone_url = format!("http://{}", gone.local_addr().unwrap());
    let cfg = config(
        dir.path(),
        &provider.base_url(),
        &provider.base_url(),
        &format!("otlp_endpoint = \"{gone_url}\"\nexport_interval = \"100ms\"\n"),
    );
    let (mut child, addr, mut lines) =
        tokio::task::spawn_blocking(move || start_with(&cfg, &[], None, &[]))
            .await
            .unwrap();
    assert_eq!(chat(&client, &addr).await.status(), 200);
    let warned = tokio::time::timeout(DEADLINE, async {
        while let Some(line) = lines.recv().await {
            if line.contains("OTLP span export failed (cannot connect)") {
                return true;
            }
        }
        false
    })
    .await
    .expect("the failed export was not logged");
    assert!(warned);
    for _ in 0..5 {
        assert_eq!(chat(&client, &addr).await.status(), 200);
    }
    signal(&child, "TERM");
    let exit = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(exit.success(), "{exit:?}");
}

/// `RUST_LOG` quietens the log, not the export: with `warn` the log
/// layer wants no span, and the export filter, which now decides once per
/// callsite, still has every span exported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_log_does_not_quieten_the_export() {
    let bodies = export_one_fallback_chat(Some("warn")).await;
    let names: Vec<String> = spans(&bodies).into_iter().map(|(n, _, _)| n).collect();
    for want in ["chat m1", "chat m2", "handover.task.chat", "request"] {
        assert!(
            names.iter().any(|n| n == want),
            "no span {want:?} in {names:?}"
        );
    }
}
