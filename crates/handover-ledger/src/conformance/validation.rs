//! Identifier and parameter validation boundaries.

use serde_json::json;

use super::{Setup, Subject, env};
use crate::{BeginOutcome, Limits, MAX_IDENT_BYTES, OperationRequest, Retention};

fn build(scope: &str, key: &str, action: &str) -> Result<OperationRequest, crate::ValidationError> {
    OperationRequest::new(scope, key, action, &json!({}), &Limits::default())
}

/// 0, 1, 255, 256 bytes; space, DEL, non-ASCII; the error names the field
/// and nothing is written.
pub async fn identifier_boundaries<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(make: F) {
    let e = env(make, Retention::default()).await;
    let max = "a".repeat(MAX_IDENT_BYTES);
    let over = "a".repeat(MAX_IDENT_BYTES + 1);
    let bad: [(&str, &str); 6] = [
        ("", "must not be empty"),
        (&over, "at most 255 bytes"),
        ("K 701", "0x20"),
        ("K\u{7f}701", "0x7f"),
        ("Kö701", "0xc3"),
        ("K\t701", "0x09"),
    ];
    for field in ["scope", "key", "action"] {
        for (value, reason) in bad {
            let r = match field {
                "scope" => build(value, "k", "act"),
                "key" => build("s", value, "act"),
                _ => build("s", "k", value),
            };
            let err = r.expect_err("invalid identifier accepted");
            assert_eq!(err.field(), field, "{value:?}");
            assert!(
                err.reason().contains(reason),
                "{field} {value:?}: {}",
                err.reason()
            );
        }
        for value in ["a", "!", "~", max.as_str(), "tenant-1/org:42@x"] {
            let r = match field {
                "scope" => build(value, "k", "act"),
                "key" => build("s", value, "act"),
                _ => build("s", "k", value),
            };
            r.unwrap_or_else(|err| panic!("{field} {value:?} rejected: {err}"));
        }
    }
    // Nothing was written by any rejection; the longest identity works end to end.
    assert!(
        e.ledger
            .list(&Default::default())
            .await
            .expect("list")
            .is_empty()
    );
    let longest = build(&max, &max, &max).expect("longest");
    assert!(matches!(
        e.begin(&longest, "x").await,
        BeginOutcome::Started(_)
    ));
    let stored = e.get(&longest).await.expect("stored");
    assert_eq!(stored.id.scope.as_str(), max);
    assert_eq!(stored.action.as_str(), max);
}

/// Size (on canonical bytes) and depth limits, exactly at and one past.
pub async fn params_boundaries<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(make: F) {
    let e = env(make, Retention::default()).await;
    let limits = Limits::default();
    let new = |p: &serde_json::Value, l: &Limits| OperationRequest::new("t", "k", "act", p, l);

    // Canonical size: a string of n chars is n + 2 bytes.
    let at = json!("x".repeat(limits.max_params_bytes - 2));
    let past = json!("x".repeat(limits.max_params_bytes - 1));
    let ok = new(&at, &limits).expect("exactly at the size limit");
    assert_eq!(ok.canonical_params().len(), limits.max_params_bytes);
    let err = new(&past, &limits).expect_err("one byte past the size limit");
    assert_eq!(err.field(), "params");
    assert!(err.reason().contains("65537"), "{}", err.reason());
    // Whitespace and member order do not count: size is measured canonically.
    let small = Limits {
        max_params_bytes: 13,
        max_depth: 32,
    };
    let doc: serde_json::Value = serde_json::from_str("{ \"b\" : 1 ,  \"a\" : 2 }").expect("json");
    assert_eq!(
        new(&doc, &small)
            .expect("13 canonical bytes")
            .canonical_params(),
        r#"{"a":2,"b":1}"#
    );
    let small = Limits {
        max_params_bytes: 12,
        max_depth: 32,
    };
    assert_eq!(new(&doc, &small).expect_err("too big").field(), "params");

    // Depth: scalar 0, each array/object level adds one.
    let nest = |n: usize| {
        let mut v = json!(true);
        for i in 0..n {
            v = if i % 2 == 0 {
                json!([v])
            } else {
                json!({"k": v})
            };
        }
        v
    };
    new(&nest(limits.max_depth), &limits).expect("exactly at the depth limit");
    let err = new(&nest(limits.max_depth + 1), &limits).expect_err("one past the depth limit");
    assert_eq!(err.field(), "params");
    assert!(err.reason().contains("33"), "{}", err.reason());
    let shallow = Limits {
        max_params_bytes: 1024,
        max_depth: 0,
    };
    new(&json!(5), &shallow).expect("a scalar has depth 0");
    new(&json!([]), &shallow).expect_err("an empty array has depth 1");

    // The largest valid document round-trips through the ledger unchanged.
    let c = e.start(&ok, "x").await;
    assert_eq!(e.get(&ok).await.expect("stored").params, Some(at));
    assert_eq!(c.fingerprint, ok.fingerprint());
}
