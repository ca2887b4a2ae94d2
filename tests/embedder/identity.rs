//! Identities and parameters an embedder (or an attacker) gets wrong:
//! every refusal names its field and writes nothing.

use handover::ExecutorOutcome;
use handover::PerformOptions;
use handover::PerformOutcome;
use serde_json::{Value, json};

use crate::per_backend;
use crate::support::{App, Backend};

fn confirm() -> impl handover::router::gate::Executor {
    |_ctx| async { Ok(ExecutorOutcome::Confirmed(json!({"id": "rec-1"}))) }
}

async fn bad_identities_name_their_field_and_write_nothing(backend: Backend) {
    let Some(app) = App::open(backend, "", "").await else {
        return;
    };
    let gate = app.handover.gate();
    let p = json!({"sku": "A"});
    let long = "k".repeat(255);
    let too_long = "k".repeat(256);
    let ok = [long.as_str(), "!", "~", "a-b_c.d:e/f@g"];
    for (i, good) in ok.iter().enumerate() {
        let req = gate.request(good, good, "create_shipment", &p).unwrap();
        let out = gate
            .perform(&req, &confirm(), PerformOptions::default())
            .await
            .unwrap();
        assert!(
            matches!(out, PerformOutcome::Confirmed { .. }),
            "{i}: {out:?}"
        );
    }
    let before = app.all().await.len();
    let bad: [(&str, &str); 8] = [
        ("", "empty"),
        (&too_long, "256 bytes"),
        ("tenant-é", "non-ASCII"),
        ("a\nb", "newline"),
        ("a\0b", "NUL"),
        ("a b", "space"),
        ("a\u{7f}", "DEL"),
        ("\u{202e}abc", "bidi override"),
    ];
    for (value, what) in bad {
        for field in ["scope", "key", "action"] {
            let (s, k, a) = match field {
                "scope" => (value, "K-1", "create_shipment"),
                "key" => ("tenant-1", value, "create_shipment"),
                _ => ("tenant-1", "K-1", value),
            };
            let err = gate.request(s, k, a, &p).unwrap_err();
            assert_eq!(err.field(), Some(field), "{what} {field}: {err}");
            assert!(err.to_string().contains(field), "{what}: {err}");
            let err = handover::ledger::OperationId::new(s, k);
            if field != "action" {
                assert_eq!(err.unwrap_err().field(), field, "{what}");
            }
        }
    }
    assert_eq!(app.all().await.len(), before, "nothing was written");
    app.finish().await;
}

fn nested(depth: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..depth {
        v = json!([v]);
    }
    v
}

async fn bad_params_name_their_path_and_write_nothing(backend: Backend) {
    let Some(app) = App::open(backend, "", "").await else {
        return;
    };
    let gate = app.handover.gate();
    let max = (1u64 << 53) - 1;
    let accepted = [
        json!({"n": max}),
        json!({"n": -(max as i64)}),
        json!({"n": 1.5e300}),
        json!({"n": -0.0}),
        json!({"n": 0.1}),
        nested(32),
        json!({"doc": "x".repeat(65_000)}),
    ];
    for (i, p) in accepted.iter().enumerate() {
        let req = gate
            .request("tenant-1", &format!("OK-{i}"), "create_shipment", p)
            .unwrap_or_else(|e| panic!("{i}: {e}"));
        let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
        let s = seen.clone();
        let exec = move |ctx: handover::DispatchContext| {
            *s.lock().unwrap() = Some(ctx.params.clone());
            async { Ok(ExecutorOutcome::Confirmed(json!({"ok": true}))) }
        };
        let out = gate
            .perform(&req, &exec, PerformOptions::default())
            .await
            .unwrap();
        assert!(
            matches!(out, PerformOutcome::Confirmed { .. }),
            "{i}: {out:?}"
        );
        let got = seen.lock().unwrap().clone().unwrap();
        // The executor gets the approved value (as an I-JSON number: -0 is 0).
        assert_eq!(
            serde_json_canonicalize(&got),
            serde_json_canonicalize(p),
            "{i}: the executor got what was approved"
        );
    }
    let before = app.all().await;
    let refused: [(Value, &str); 7] = [
        (json!({"n": max + 1}), "params.n"),
        (json!({"n": -((max + 1) as i64)}), "params.n"),
        (json!({"a": [0, {"n": u64::MAX}]}), "params.a[1].n"),
        (json!({"n": 1e19}), "params.n"),
        (nested(33), "params"),
        (json!({"doc": "x".repeat(70_000)}), "params"),
        (
            json!({"odd key": 9_007_199_254_740_993u64}),
            "params[\"odd key\"]",
        ),
    ];
    for (i, (p, field)) in refused.iter().enumerate() {
        let err = gate
            .request("tenant-1", &format!("BAD-{i}"), "create_shipment", p)
            .unwrap_err();
        assert_eq!(err.field(), Some(*field), "{i}: {err}");
    }
    assert_eq!(app.all().await.len(), before.len(), "nothing was written");
    app.finish().await;
}

fn serde_json_canonicalize(v: &Value) -> String {
    // Compare as I-JSON values: through f64 for every number.
    match v {
        Value::Number(n) => format!("{}", n.as_f64().unwrap() + 0.0),
        Value::Array(a) => format!(
            "[{}]",
            a.iter()
                .map(serde_json_canonicalize)
                .collect::<Vec<_>>()
                .join(",")
        ),
        Value::Object(m) => {
            let mut kv: Vec<_> = m
                .iter()
                .map(|(k, v)| format!("{k:?}:{}", serde_json_canonicalize(v)))
                .collect();
            kv.sort();
            format!("{{{}}}", kv.join(","))
        }
        other => other.to_string(),
    }
}

/// A depth limit past what the stored text can be parsed back at would
/// hand the executor something other than what was approved (serde_json
/// reads at most 127 levels): the library caps it, the config refuses it.
#[test]
fn a_depth_the_ledger_cannot_read_back_is_refused() {
    use handover::ledger::{Limits, OperationRequest};
    let deep = Limits {
        max_depth: 10_000,
        ..Limits::default()
    };
    let err = OperationRequest::new("tenant-1", "K-1", "ship", &nested(200), &deep).unwrap_err();
    assert_eq!(err.field(), "params", "{err}");
    assert!(err.to_string().contains("limit of 64"), "{err}");
    let req = OperationRequest::new("tenant-1", "K-1", "ship", &nested(64), &deep).unwrap();
    assert_eq!(req.params(), nested(64), "what was approved, exactly");
    let text = "[ledger]\nbackend = \"memory\"\nmax_params_depth = 65\n";
    let err = handover::Config::parse(text, &|_| None).unwrap_err();
    assert!(err.to_string().contains("ledger.max_params_depth"), "{err}");
}

per_backend!(
    bad_identities_name_their_field_and_write_nothing,
    bad_params_name_their_path_and_write_nothing
);
