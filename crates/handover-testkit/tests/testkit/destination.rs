//! The mock destination behaves as scripted, and counts effects apart from
//! requests.

use std::sync::Arc;
use std::time::Duration;

use handover_ledger::{ManualClock, Timestamp};
use handover_testkit::{Behaviour, MockDestination};
use serde_json::{Value, json};

fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder().timeout(timeout).build().unwrap()
}

#[tokio::test]
async fn each_behaviour_counts_effects_apart_from_requests() {
    let dest = MockDestination::builder().start().await;
    dest.script([
        Behaviour::Confirm,
        Behaviour::ApplyAndDrop,
        Behaviour::ApplyAndFail(502),
        Behaviour::Reject {
            status: 422,
            reason: "bad address".into(),
        },
        Behaviour::FailWithoutApplying(503),
        Behaviour::ConfirmAfter(Duration::from_secs(30)),
    ]);
    let c = client(Duration::from_millis(300));
    let send = || c.post(dest.records_url()).json(&json!({"sku": "A"})).send();

    assert_eq!(send().await.unwrap().status(), 201);
    assert!(
        send().await.is_err(),
        "connection dropped after the request was read"
    );
    assert_eq!(send().await.unwrap().status(), 502);
    let rejected = send().await.unwrap();
    assert_eq!(rejected.status(), 422);
    assert_eq!(
        rejected.json::<Value>().await.unwrap()["error"],
        "bad address"
    );
    assert_eq!(send().await.unwrap().status(), 503);
    assert!(
        send().await.unwrap_err().is_timeout(),
        "response delayed past the timeout"
    );

    assert_eq!(dest.action_requests().await, 6);
    // Confirm, drop, 502 and the late confirmation applied; reject and 503 did not.
    assert_eq!(dest.effect_count(), 4);
}

#[tokio::test]
async fn idempotency_key_replays_inside_the_window_only() {
    let clock = ManualClock::new(Timestamp::from_millis(0));
    let dest = MockDestination::builder()
        .idempotency("Idempotency-Key", Duration::from_secs(60))
        .clock(Arc::new(clock.clone()))
        .start()
        .await;
    let c = client(Duration::from_secs(5));
    let send = || {
        c.post(dest.records_url())
            .header("Idempotency-Key", "ho1-abc")
            .json(&json!({"sku": "A"}))
            .send()
    };
    let first = send().await.unwrap();
    assert_eq!(first.status(), 201);
    let again = send().await.unwrap();
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(dest.effect_count(), 1);
    clock.advance(Duration::from_secs(61));
    assert_eq!(send().await.unwrap().status(), 201);
    assert_eq!(
        dest.effect_count(),
        2,
        "after the window the destination creates again"
    );
}

#[tokio::test]
async fn lookup_sees_records_only_after_the_visibility_lag() {
    let clock = ManualClock::new(Timestamp::from_millis(0));
    let dest = MockDestination::builder()
        .visibility_lag(Duration::from_secs(30))
        .clock(Arc::new(clock.clone()))
        .start()
        .await;
    let c = client(Duration::from_secs(5));
    c.post(dest.records_url())
        .json(&json!({"reference": "K-701", "sku": "A"}))
        .send()
        .await
        .unwrap();
    let look = || async {
        c.get(dest.lookup_url("K-701"))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    assert_eq!(look().await["records"], json!([]));
    clock.advance(Duration::from_secs(30));
    let found = look().await;
    assert_eq!(found["records"][0]["record"]["sku"], "A");
    assert_eq!(dest.lookup_requests().await, 2);
}

#[tokio::test]
async fn a_remembered_key_is_not_applied_again_even_when_the_answer_is_dropped() {
    let clock = ManualClock::new(Timestamp::from_millis(0));
    let dest = MockDestination::builder()
        .idempotency("Idempotency-Key", Duration::from_secs(60))
        .clock(Arc::new(clock.clone()))
        .start()
        .await;
    dest.script([Behaviour::ApplyAndDrop, Behaviour::ApplyAndDrop]);
    let c = client(Duration::from_secs(5));
    let send = || {
        c.post(dest.records_url())
            .header("Idempotency-Key", "ho1-abc")
            .json(&json!({"sku": "A"}))
            .send()
    };
    assert!(send().await.is_err());
    assert!(send().await.is_err());
    assert_eq!(dest.action_requests().await, 2);
    assert_eq!(dest.effect_count(), 1);
    assert_eq!(dest.effects_for("ho1-abc"), 1);
}
