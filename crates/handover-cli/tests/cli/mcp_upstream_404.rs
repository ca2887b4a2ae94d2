//! What a `404` from a Streamable HTTP upstream proves. The transport says
//! a server answers 404 to a session id it does not know, instead of
//! processing the message: "not sent". But a 404 whose body is the call's
//! own result says the opposite, and calls already in flight on the
//! session still get their answers. The upstream is a small hand-made
//! HTTP server (`http_404_server.py`: no SDK answers a call both ways)
//! that logs every applied charge; the real binary over stdio, a real
//! SQLite ledger. Skipped without `HANDOVER_TEST_PYTHON`.

use crate::mcp_world;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use mcp_world::raw::RawSession;
use mcp_world::{SCRIPTS, World, python, status};

/// `charge` guarded, keyed by `order_no`.
const CHARGE: &str = r#"
[actions.charge]
timeout = "30s"
mcp = { server = "shipping", tool = "charge", key_from = ["order_no"] }
"#;

/// `http_404_server.py` in `mode`, killed on drop.
struct Upstream404(Child);

impl Upstream404 {
    fn start(w: &World, mode: &str, release: Option<&std::path::Path>) -> Self {
        let mut cmd = Command::new(&w.python);
        cmd.arg(format!("{SCRIPTS}/http_404_server.py"))
            .env("SHIPPING_LOG", w.path("shipments.jsonl"))
            .env("UPSTREAM_404_MODE", mode)
            .stdout(Stdio::piped());
        if let Some(fifo) = release {
            cmd.env("UPSTREAM_RELEASE", fifo);
        }
        let mut child = cmd.spawn().unwrap();
        // Its first line is the port it listens on (the readiness signal).
        let mut port = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut port)
            .unwrap();
        w.over_http(&format!("http://127.0.0.1:{}/mcp", port.trim()));
        Self(child)
    }
}

impl Drop for Upstream404 {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn charge(id: u32, order_no: u32) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"charge","arguments":{{"order_no":{order_no}}}}}}}"#
    )
}

fn charges(w: &World) -> Vec<u64> {
    w.shipments()
        .iter()
        .map(|c| c["order_no"].as_u64().unwrap())
        .collect()
}

/// The upstream applies the charge and answers 404 with the call's own
/// JSON-RPC result as the body. That is not "the session is unknown,
/// nothing was processed": the call is unknown, and the retry (in a new
/// session, with a healthy upstream) charges nothing more. Before, the
/// 404 made it `not_sent` and the retry charged the order a second time.
/// A 404 with a JSON-RPC error body (the SDKs' "Session not found") is
/// still `not_sent`.
#[test]
fn a_404_whose_body_is_the_calls_result_is_unknown_not_unsent() {
    let Some(python) = python() else { return };
    let w = World::configured(python, "", "", CHARGE);
    let upstream = Upstream404::start(&w, "result", None);
    let mut s = RawSession::start(&w);
    let a = s.answer(&charge(2, 1));
    assert_eq!(status(&a["result"]), "outcome_unknown", "{a}");
    s.close();
    drop(upstream);
    let _healthy = Upstream404::start(&w, "ok", None);
    let mut s = RawSession::start(&w);
    let a = s.answer(&charge(3, 1));
    assert_eq!(status(&a["result"]), "outcome_unknown", "not re-sent: {a}");
    s.close();
    assert_eq!(charges(&w), [1], "order 1 charged once");

    let w = World::configured(w.python.clone(), "", "", CHARGE);
    let _forgot = Upstream404::start(&w, "error", None);
    let mut s = RawSession::start(&w);
    let a = s.answer(&charge(2, 1));
    assert_eq!(status(&a["result"]), "not_sent", "{a}");
    s.close();
    assert!(charges(&w).is_empty());
}

/// Two guarded calls in flight on one upstream session: order 2 gets a
/// 404 (the server forgot the session), while order 1, already at the
/// server, is applied and answered 200 only after that (the test releases
/// it once order 2's answer is out). Order 1 is recorded by what it got —
/// confirmed — instead of being abandoned as unknown when the session
/// ended; order 2 is `not_sent`; then the session ends.
#[test]
fn a_404_on_one_call_leaves_the_calls_in_flight_their_own_answers() {
    let Some(python) = python() else { return };
    let w = World::configured(python, "", "", CHARGE);
    let release = mcp_world::applied_fifo(&w);
    let _upstream = Upstream404::start(&w, "race", Some(&release));
    let mut s = RawSession::start(&w);
    s.send(&charge(2, 1));
    s.send(&charge(3, 2));
    let b = s.next().expect("order 2 answered");
    assert_eq!(b["id"], 3, "order 2 first (order 1 is held): {b}");
    assert_eq!(status(&b["result"]), "not_sent", "{b}");
    std::fs::write(&release, "go\n").unwrap();
    let a = s.next().expect("order 1 answered");
    assert_eq!(a["id"], 2, "{a}");
    assert_eq!(a["result"]["isError"], false, "order 1 got its answer: {a}");
    assert!(s.ended(), "the session ends with its upstream session");
    s.close();
    assert_eq!(charges(&w), [1]);
    let shown = w.show("agent-1", "charge:1");
    assert_eq!(shown["operation"]["state"]["state"], "confirmed", "{shown}");
}
