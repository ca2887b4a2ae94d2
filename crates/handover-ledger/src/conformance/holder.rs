//! A claim is its epoch *and* its holder: another holder presenting the
//! current epoch (a small counter anyone reading the record sees) can
//! neither dispatch, renew, give back nor finish it.

use serde_json::json;

use super::{Setup, Subject, env, req};
use crate::{Claim, Dispatch, LedgerError, Retention, UnknownReport};

/// Every holder write under another holder's epoch is [`LedgerError::NotHolder`]
/// (stale: record nothing, send nothing) and changes nothing, before and
/// after dispatch; the real holder's writes still land.
pub async fn another_holder_cannot_write_under_the_epoch<
    F: Fn(Setup) -> Fut,
    Fut: std::future::Future<Output = Subject>,
>(
    make: F,
) {
    let e = env(make, Retention::default()).await;
    let r = req("t", "held", json!({"n": 1}));
    let real = e.start(&r, "client:a").await;
    let forged = Claim {
        holder: "client:b".into(),
        ..real.clone()
    };
    let dispatch = || Dispatch {
        executor: "client:b".into(),
        metadata: None,
    };
    let refused = |err: LedgerError, what: &str| {
        assert!(err.is_stale(), "{what}: {err:?}");
        assert!(
            matches!(&err, LedgerError::NotHolder { holder, given, .. }
                if holder == "client:a" && given == "client:b"),
            "{what}: {err:?}"
        );
    };
    let before = e.snapshot(&r).await;
    let l = &e.ledger;
    refused(
        l.mark_dispatched(&forged, dispatch()).await.unwrap_err(),
        "dispatch",
    );
    refused(l.renew(&forged, super::LEASE).await.unwrap_err(), "renew");
    refused(
        l.release(&forged, crate::ReleaseReason::Abandoned)
            .await
            .unwrap_err(),
        "release",
    );
    assert_eq!(e.snapshot(&r).await, before, "claimed: nothing changed");

    e.dispatch(&real).await;
    let before = e.snapshot(&r).await;
    refused(
        l.reject(&forged, "made up".into(), None).await.unwrap_err(),
        "reject",
    );
    refused(
        l.confirm(&forged, json!({"by": "b"}), None)
            .await
            .unwrap_err(),
        "confirm",
    );
    let unknown = UnknownReport {
        reason: "made up".into(),
        evidence: None,
        owner: crate::Owner::Reconciler,
        next_check_at: None,
    };
    refused(
        l.mark_unknown(&forged, unknown).await.unwrap_err(),
        "unknown",
    );
    assert_eq!(e.snapshot(&r).await, before, "dispatched: nothing changed");
    l.confirm(&real, json!({"by": "a"}), None)
        .await
        .expect("the holder confirms");
}
