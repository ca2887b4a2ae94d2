//! A network partition between the gateway and PostgreSQL: a proxy in
//! front of the server that, once switched, swallows every byte in both
//! directions while keeping the sockets open (what a dropped route or a
//! dead switch looks like: no reset, no answer). The gateway's pooled
//! connection is already checked out and in use; only the ledger's
//! client-side deadline (`call_timeout`) can end the call.
//!
//! Runs when `HANDOVER_TEST_POSTGRES_URL` is set (fails if it is set and
//! unreachable), in a fresh schema dropped afterwards.

use crate::support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, Running};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Far longer than `call_timeout` below, far shorter than TCP's own give-up.
const DEADLINE: Duration = Duration::from_secs(5);

/// Forwards to `upstream` until `cut` is set; from then on every byte
/// either way is read and dropped.
async fn blackhole_proxy(upstream: SocketAddr) -> (SocketAddr, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cut = Arc::new(AtomicBool::new(false));
    let flag = cut.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(upstream).await else {
                continue;
            };
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            tokio::spawn(pump(cr, sw, flag.clone()));
            tokio::spawn(pump(sr, cw, flag.clone()));
        }
    });
    (addr, cut)
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    cut: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if cut.load(Ordering::SeqCst) {
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// `url` with its `host:port` replaced by `addr` and the session's
/// search path set to `schema`; and the original `host:port`.
fn via(url: &str, addr: SocketAddr, schema: &str) -> (String, SocketAddr) {
    let (scheme, rest) = url.split_once("://").expect("a postgres:// URL");
    let (userinfo, hostpath) = match rest.rsplit_once('@') {
        Some((u, h)) => (format!("{u}@"), h),
        None => (String::new(), rest),
    };
    let (hostport, path) = hostpath.split_once('/').unwrap_or((hostpath, ""));
    let hostport = if hostport.contains(':') {
        hostport.to_owned()
    } else {
        format!("{hostport}:5432")
    };
    let upstream = hostport
        .replace("localhost", "127.0.0.1")
        .parse()
        .expect("the test URL names IP:PORT");
    let sep = if path.contains('?') { '&' } else { '?' };
    (
        format!("{scheme}://{userinfo}{addr}/{path}{sep}options=-c%20search_path%3D{schema}"),
        upstream,
    )
}

async fn begin(gw: &Running, key: &str) -> (StatusCode, Value) {
    let resp = gw
        .http
        .post(gw.url("/v1/operations"))
        .bearer_auth(CLIENT_A)
        .header("Idempotency-Key", key)
        .json(&json!({"action": "ship", "params": {"order": 1}}))
        .send()
        .await
        .unwrap();
    (resp.status(), resp.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_postgres_answers_503_within_call_timeout_and_records_nothing() {
    let Some(mut pg) = support::PgSchema::create("gw_partition").await else {
        return;
    };
    let (url, schema) = (pg.base.clone(), pg.name.clone());

    let (_, upstream) = via(&url, "127.0.0.1:1".parse().unwrap(), &schema);
    let (proxy, cut) = blackhole_proxy(upstream).await;
    let (proxied, _) = via(&url, proxy, &schema);
    let ledger = "[ledger]\nbackend = \"postgres\"\nurl_env = \"PARTITION_TEST_URL\"\npool_size = 1\ncall_timeout = \"500ms\"\n";
    let mut c = support::provider("p", "http://127.0.0.1:9/v1");
    c.push_str(&support::policy("default", &["p"], "first_token"));
    c.push_str(&support::gateway_section(1 << 20, "5s", ""));
    let gw = Running::start_with_env(ledger, &c, tempfile::tempdir().unwrap(), move |var| {
        (var == "PARTITION_TEST_URL").then(|| proxied.clone())
    })
    .await;

    // The pool's one connection is open and in use through the proxy.
    let (st, body) = begin(&gw, "K-1").await;
    assert_eq!(st, StatusCode::CREATED, "{body}");

    cut.store(true, Ordering::SeqCst);
    let answered = tokio::time::timeout(DEADLINE, begin(&gw, "K-2")).await;
    let (st, body) = answered.expect("the gateway waited on the partition past its deadline");
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "ledger_unavailable");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        !message.contains("code") && !message.contains("sqlx") && !message.contains("database"),
        "driver text reached the client: {message}"
    );

    // Nothing of K-2 reached the server; heal, and K-2 starts normally.
    let rows: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM \"{schema}\".operations WHERE key = 'K-2'"
    )))
    .fetch_one(&mut pg.direct)
    .await
    .unwrap();
    assert_eq!(rows, 0);
    cut.store(false, Ordering::SeqCst);
    let (st, body) = tokio::time::timeout(DEADLINE, begin(&gw, "K-2"))
        .await
        .expect("the gateway recovered after the partition healed");
    assert_eq!(st, StatusCode::CREATED, "{body}");

    drop(gw);
    pg.drop().await;
}
