//! Listing in pages: `limit` and `after`.

use std::time::Duration;

use serde_json::json;

use super::{Setup, Subject, env, req};
use crate::{ListFilter, Retention, Scope, StateKind};

/// Pages of `limit` operations, each continuing `after` the last of the
/// previous one, list every operation exactly once in list order (oldest
/// first, then scope and key, ties included); the filter holds on every
/// page, and `after` an operation that does not exist lists nothing.
pub async fn list_pages_with_after<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(make: F) {
    let e = env(make, Retention::default()).await;
    let mut expected = Vec::new();
    for i in 0..7 {
        // Two at each instant: the order among them is scope, then key.
        if i % 2 == 0 {
            e.clock.advance(Duration::from_millis(10));
        }
        for scope in ["a", "b"] {
            let key = format!("K-{i}");
            let r = req(scope, &key, json!({"i": i}));
            e.start(&r, "h").await;
            if scope == "a" {
                expected.push(key);
            }
        }
    }
    let page = |after: Option<crate::OperationId>| ListFilter {
        state: Some(StateKind::Claimed),
        scope: Some(Scope::new("a").expect("scope")),
        limit: Some(3),
        after,
        ..ListFilter::default()
    };
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let recs = e.ledger.list(&page(after.clone())).await.expect("list");
        assert!(recs.len() <= 3);
        assert!(recs.iter().all(|r| r.id.scope.as_str() == "a"));
        seen.extend(recs.iter().map(|r| r.id.key.as_str().to_owned()));
        match recs.last() {
            Some(last) if recs.len() == 3 => after = Some(last.id.clone()),
            _ => break,
        }
    }
    assert_eq!(seen, expected, "every operation once, in order");

    // Across scopes, ties at one instant come by scope, then key.
    let all = e.ledger.list(&ListFilter::default()).await.expect("list");
    let order: Vec<_> = all.iter().map(|r| (r.created_at, r.id.clone())).collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted);
    assert_eq!(all.len(), 14);
    let rest = e
        .ledger
        .list(&ListFilter {
            after: Some(all[0].id.clone()),
            ..ListFilter::default()
        })
        .await
        .expect("list");
    assert_eq!(rest.len(), all.len() - 1);
    assert_eq!(rest[0].id, all[1].id);

    let gone = req("a", "never-begun", json!({}));
    let none = e
        .ledger
        .list(&ListFilter {
            after: Some(gone.id().clone()),
            ..ListFilter::default()
        })
        .await
        .expect("list");
    assert!(none.is_empty(), "{none:?}");
}
