//! A list's page is bounded by bytes as well as by count: operations with
//! 60 KiB of parameters and as much result make a page of 1,000 about
//! 120 MB, which the gateway built in memory for every such request
//! (probe: four at once took 430 MB). A page now ends near 4 MiB with
//! `next`, and following `next` still lists every operation once, in
//! order — for clients and for operators.

use crate::support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{CLIENT_A, OPERATOR, Running};

const PAGE_BYTES: usize = 4 * 1024 * 1024;
const OPS: usize = 40;

fn config() -> String {
    let mut c = support::provider("p", "http://127.0.0.1:9/v1");
    c.push_str(&support::policy("default", &["p"], "first_token"));
    c.push_str("\n[actions.ship]\nlease = \"30s\"\n");
    c.push_str(&support::gateway_section(256 * 1024, "5s", ""));
    c
}

/// Begins, dispatches and confirms `key` with 60 KB of parameters and result.
async fn big(gw: &Running, key: &str) {
    let blob = "x".repeat(60_000);
    let body = json!({"action": "ship", "params": {"key": key, "blob": blob}});
    let (st, v) = gw
        .post_json(CLIENT_A, "/v1/operations", Some(key), body)
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let epoch = v["claim"]["epoch"].as_u64().unwrap();
    let path = format!("/v1/operations/{key}/dispatch");
    let (st, _) = gw
        .post_json(CLIENT_A, &path, None, json!({"epoch": epoch}))
        .await;
    assert_eq!(st, StatusCode::OK);
    let path = format!("/v1/operations/{key}/outcome");
    let outcome = json!({"epoch": epoch, "outcome": "confirmed", "result": {"blob": blob}});
    let (st, v) = gw.post_json(CLIENT_A, &path, None, outcome).await;
    assert_eq!(st, StatusCode::OK, "{v}");
}

/// Follows `next` from `first` (a path with its query); every page's
/// body size and the keys in order.
async fn follow(gw: &Running, token: &str, first: &str) -> (Vec<usize>, Vec<String>) {
    let (mut sizes, mut keys) = (Vec::new(), Vec::new());
    let mut query = String::new();
    loop {
        let resp = gw
            .http
            .get(gw.url(&format!("{first}{query}")))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let text = resp.bytes().await.unwrap();
        sizes.push(text.len());
        let page: Value = serde_json::from_slice(&text).unwrap();
        for op in page["operations"].as_array().unwrap() {
            keys.push(op["id"]["key"].as_str().unwrap().to_owned());
        }
        let Some(next) = page["next"].as_object() else {
            return (sizes, keys);
        };
        query = next
            .iter()
            .map(|(k, v)| format!("&{k}={}", v.as_str().unwrap()))
            .collect();
    }
}

#[tokio::test]
async fn pages_end_at_four_mebibytes_and_next_lists_every_operation_once() {
    let gw = Running::start(&config()).await;
    let expected: Vec<String> = (0..OPS).map(|i| format!("K-{i:02}")).collect();
    for key in &expected {
        big(&gw, key).await;
    }
    for (token, first) in [
        (CLIENT_A, "/v1/operations?state=all&limit=1000"),
        (OPERATOR, "/v1/admin/operations?state=all&limit=1000"),
    ] {
        let (sizes, keys) = follow(&gw, token, first).await;
        assert!(
            sizes.len() >= 2,
            "one page of {OPS} big operations: {sizes:?}"
        );
        assert!(
            sizes.iter().all(|s| *s <= PAGE_BYTES + 1024),
            "every page within the bound: {sizes:?}"
        );
        assert_eq!(keys, expected, "every operation once, in order");
    }
    // A count-bounded page still ends where it did, with `next`.
    let (sizes, keys) = follow(&gw, CLIENT_A, "/v1/operations?state=all&limit=7").await;
    assert_eq!(sizes.len(), OPS.div_ceil(7));
    assert_eq!(keys, expected);
}
