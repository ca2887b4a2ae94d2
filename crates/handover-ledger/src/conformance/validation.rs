//! Identifier and parameter validation boundaries.

use serde_json::json;

use super::{Setup, Subject, env, req};
use crate::{BeginOutcome, Limits, MAX_IDENT_BYTES, OperationRecord, OperationRequest, Retention};

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

/// A NUL character (which PostgreSQL `text` cannot hold) gets the same
/// answer from every backend: in text a caller chooses (a holder or
/// executor name, an operator's evidence, reason or name, a cancellation
/// reason) it is refused naming the field, and nothing is written; in
/// text reported from a destination's answer (an outcome's reason and
/// evidence, a lookup's evidence, the reconciler's note) it is stored as
/// U+FFFD, so a definitive answer is still recorded.
pub async fn nul_in_text<F: Fn(Setup) -> Fut, Fut: Future<Output = Subject>>(make: F) {
    use crate::{
        AttemptKind, AttemptOutcome, Dispatch, NewAttempt, Owner, ReleaseReason, Resolution,
        ResolvedAs, State, UnknownReport, UnknownUpdate,
    };
    const NUL: &str = "bad\u{0}text";
    const SHOWN: &str = "bad\u{FFFD}text";
    let e = env(make, Retention::default()).await;
    let unchanged = |what: &str, err: crate::LedgerError, field: &str| {
        assert_eq!(err.field(), Some(field), "{what}: {err}");
        assert!(err.to_string().contains("NUL"), "{what}: {err}");
    };

    // Caller-chosen names: refused before anything is recorded.
    let r = req("t", "holder", json!({}));
    let err = e
        .ledger
        .begin(&r, &super::opts(NUL))
        .await
        .expect_err("holder with NUL");
    unchanged("begin", err, "holder");
    assert_eq!(e.get(&r).await, None, "a refused begin records nothing");

    let r = req("t", "executor", json!({}));
    let c = e.start(&r, "exec-a").await;
    let before = e.snapshot(&r).await;
    let bad = Dispatch {
        executor: NUL.into(),
        metadata: None,
    };
    let err = e
        .ledger
        .mark_dispatched(&c, bad.clone())
        .await
        .expect_err("executor with NUL");
    unchanged("mark_dispatched", err, "executor");
    assert_eq!(
        e.snapshot(&r).await,
        before,
        "a refused dispatch changes nothing"
    );
    let fresh = req("t", "executor-2", json!({}));
    let err = e
        .ledger
        .begin_dispatched(&fresh, &super::opts("exec-a"), bad)
        .await
        .expect_err("executor with NUL");
    unchanged("begin_dispatched", err, "executor");
    assert_eq!(e.get(&fresh).await, None, "nothing claimed");
    let err = e
        .ledger
        .cancel(r.id(), NUL.into())
        .await
        .expect_err("cancel reason with NUL");
    unchanged("cancel", err, "reason");
    assert_eq!(e.snapshot(&r).await, before);

    // Destination answers: recorded, NUL shown as U+FFFD.
    e.dispatch(&c).await;
    let rec = e
        .ledger
        .reject(&c, NUL.into(), Some(NUL.into()))
        .await
        .expect("a refusal whose text holds NUL is recorded");
    let State::Rejected {
        reason, evidence, ..
    } = &rec.state
    else {
        panic!("expected rejected, got {:?}", rec.state);
    };
    assert_eq!((reason.as_str(), evidence.as_deref()), (SHOWN, Some(SHOWN)));
    assert_eq!(e.get(&r).await.expect("stored").state, rec.state);
    let attempts = e.ledger.attempts(r.id()).await.expect("attempts");
    assert_eq!(
        attempts.last().and_then(|a| a.evidence.as_deref()),
        Some(SHOWN)
    );

    let r = req("t", "confirmed", json!({}));
    let c = e.in_flight(&r).await;
    e.ledger
        .confirm(&c, json!({"id": "a\u{0}b"}), Some(NUL.into()))
        .await
        .expect("confirm");
    let stored = e.get(&r).await.expect("stored");
    assert!(
        matches!(&stored.state, State::Confirmed { result, evidence, .. }
            if result == &json!({"id": "a\u{0}b"}) && evidence.as_deref() == Some(SHOWN)),
        "the result is JSON and kept exactly; the evidence shows U+FFFD: {:?}",
        stored.state
    );

    let r = req("t", "not-sent", json!({}));
    let c = e.in_flight(&r).await;
    e.ledger
        .release(
            &c,
            ReleaseReason::NotSent {
                evidence: NUL.into(),
            },
        )
        .await
        .expect("not sent");
    let attempts = e.ledger.attempts(r.id()).await.expect("attempts");
    assert_eq!(
        attempts.last().and_then(|a| a.evidence.as_deref()),
        Some(SHOWN)
    );

    let r = req("t", "unknown", json!({}));
    let c = e.in_flight(&r).await;
    let report = UnknownReport {
        reason: NUL.into(),
        evidence: Some(NUL.into()),
        owner: Owner::Review,
        next_check_at: None,
    };
    e.ledger.mark_unknown(&c, report).await.expect("unknown");
    let reason_of = |rec: OperationRecord| match rec.state {
        State::Unknown(info) => info.reason,
        other => panic!("expected unknown, got {other:?}"),
    };
    assert_eq!(reason_of(e.get(&r).await.expect("stored")), SHOWN);
    let update = UnknownUpdate {
        owner: Owner::Review,
        reason: format!("lookup said {NUL}"),
        next_check_at: None,
        diverged: false,
    };
    let rec = e
        .ledger
        .update_unknown(r.id(), update)
        .await
        .expect("update");
    assert_eq!(reason_of(rec), format!("lookup said {SHOWN}"));
    let lookup = |executor: &str| NewAttempt {
        kind: AttemptKind::Lookup,
        executor: executor.into(),
        outcome: AttemptOutcome::Unknown,
        evidence: Some(NUL.into()),
        metadata: None,
        sent_at: None,
    };
    e.ledger
        .append_attempt(r.id(), lookup("reconciler"))
        .await
        .expect("lookup attempt");
    let attempts = e.ledger.attempts(r.id()).await.expect("attempts");
    assert_eq!(
        attempts.last().and_then(|a| a.evidence.as_deref()),
        Some(SHOWN)
    );
    let before = e.snapshot(&r).await;
    let err = e
        .ledger
        .append_attempt(r.id(), lookup(NUL))
        .await
        .expect_err("executor with NUL");
    unchanged("append_attempt", err, "executor");

    // An operator's words: refused, and the operation stays unknown.
    let resolution = |outcome, evidence: &str, actor: &str| Resolution {
        outcome,
        evidence: evidence.into(),
        actor: actor.into(),
    };
    let confirmed = || ResolvedAs::Confirmed { result: json!({}) };
    for (res, field) in [
        (resolution(confirmed(), NUL, "operator:olga"), "evidence"),
        (resolution(confirmed(), "checked", NUL), "actor"),
        (
            resolution(
                ResolvedAs::Rejected { reason: NUL.into() },
                "checked",
                "operator:olga",
            ),
            "reason",
        ),
    ] {
        let err = e
            .ledger
            .resolve(r.id(), res)
            .await
            .expect_err("NUL refused");
        unchanged("resolve", err, field);
    }
    assert_eq!(e.snapshot(&r).await, before, "refusals changed nothing");
    e.ledger
        .resolve(r.id(), resolution(confirmed(), "checked", "operator:olga"))
        .await
        .expect("the same resolution without NUL");
}

/// Names of who did something are at most 1 KiB and caller-chosen text
/// at most 64 KiB, refused past that naming the field (nothing written);
/// text reported from a destination's answer is kept, cut at 64 KiB with
/// a note, so a definitive answer is still recorded. A record is read and
/// replayed whole: no client stores megabytes in one.
pub async fn long_names_and_texts_are_bounded<
    F: Fn(Setup) -> Fut,
    Fut: Future<Output = Subject>,
>(
    make: F,
) {
    use crate::{Dispatch, State};
    let e = env(make, Retention::default()).await;
    let long_name = "n".repeat(1025);
    let r = req("t", "long-holder", json!({}));
    let err = e
        .ledger
        .begin(&r, &super::opts(&long_name))
        .await
        .expect_err("a holder past 1 KiB");
    assert_eq!(err.field(), Some("holder"), "{err}");
    assert_eq!(e.get(&r).await, None, "nothing written");

    let r = req("t", "long-texts", json!({}));
    let c = e.start(&r, &"h".repeat(1024)).await;
    let before = e.snapshot(&r).await;
    let err = e
        .ledger
        .mark_dispatched(
            &c,
            Dispatch {
                executor: long_name,
                metadata: None,
            },
        )
        .await
        .expect_err("an executor past 1 KiB");
    assert_eq!(err.field(), Some("executor"), "{err}");
    let err = e
        .ledger
        .cancel(r.id(), "r".repeat(64 * 1024 + 1))
        .await
        .expect_err("a cancellation reason past 64 KiB");
    assert_eq!(err.field(), Some("reason"), "{err}");
    assert_eq!(e.snapshot(&r).await, before, "nothing changed");

    e.dispatch(&c).await;
    // 3 MB of a destination's refusal, with a multi-byte character at the cut.
    let huge = "é".repeat(1_500_000);
    let rec = e
        .ledger
        .reject(&c, huge.clone(), Some(huge))
        .await
        .expect("a huge refusal is still recorded");
    let State::Rejected { reason, .. } = &rec.state else {
        panic!("{:?}", rec.state)
    };
    assert!(reason.len() <= 64 * 1024, "{}", reason.len());
    assert!(reason.starts_with("éé"));
    assert!(
        reason.ends_with("[cut: longer than 64 KiB]"),
        "{}",
        &reason[reason.len() - 40..]
    );
}
