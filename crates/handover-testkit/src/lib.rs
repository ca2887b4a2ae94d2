//! Test doubles for Handover users: mock LLM providers and mock
//! destinations on real HTTP servers, so loss-of-confirmation scenarios can
//! be tested end to end against the real router and ledger — Handover's own
//! proof suite (`tests/proof/` in the repository) is built from these parts.
//!
//! * [`MockProvider`] — an OpenAI- or DeepSeek-speaking provider on
//!   wiremock, scriptable per call ([`Reply`]): answers, tool calls, error
//!   statuses with real bodies, Retry-After, delays past a timeout, dropped
//!   connections, whole SSE bodies (with keep-alives). Real time only: its
//!   server runs on its own thread, so under paused tokio time a client's
//!   timers would fire while it answers.
//! * [`TcpProvider`] — a raw TCP provider on the test's runtime (delays in
//!   tokio time), for streams that break or stall after N events, with or
//!   without keep-alives, and answers that arrive late ([`Plan`]). Works
//!   with `#[tokio::test(start_paused = true)]`.
//! * [`MockDestination`] — a business system (scriptable per request: apply
//!   and confirm, apply and lose the response, reject, 5xx, idempotency keys
//!   with a retention window, a lookup with a visibility lag). It counts
//!   **effects** (records created) apart from requests, overall and per
//!   operation ([`MockDestination::effects_for`]). It reads a
//!   [`Clock`](handover_ledger::Clock): share the ledger's `ManualClock` to
//!   move retention windows and lags without sleeping.
//! * [`ModelsProvider`] — an upstream serving any model by name: answers
//!   with the model asked for, fails the models it is told to fail.
//! * [`bodies`] — realistic provider wire bodies.
//!
//! # Testing your own tool
//!
//! Point your tool's executor at a [`MockDestination`], script the fault,
//! and assert the effect count — not the number of requests, and not what
//! your code *reported*:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::time::Duration;
//! use handover_testkit::{Behaviour, MockDestination};
//!
//! let dest = MockDestination::builder()
//!     .idempotency("Idempotency-Key", Duration::from_secs(600))
//!     .start()
//!     .await;
//! // The first request is applied, then the connection drops: the caller
//! // cannot know it worked.
//! dest.script([Behaviour::ApplyAndDrop]);
//! let client = reqwest::Client::new();
//! let ship = || {
//!     client
//!         .post(dest.records_url())
//!         .header("Idempotency-Key", "ho1-k701")
//!         .json(&serde_json::json!({"order": "O-1001", "sku": "KETTLE"}))
//!         .send()
//! };
//! assert!(ship().await.is_err(), "the confirmation was lost");
//! // A re-send with the same key inside the window is deduplicated.
//! assert_eq!(ship().await.unwrap().status(), 200);
//! assert_eq!(dest.action_requests().await, 2);
//! assert_eq!(dest.effect_count(), 1);
//! assert_eq!(dest.effects_for("ho1-k701"), 1);
//! # }
//! ```
//!
//! With Handover, the executor you pass to the write gate is exactly such a
//! client (see `docs/testing.md` for the full loop: router, approval, write
//! gate, reconciler, and the assertions that matter).

#![forbid(unsafe_code)]

pub mod bodies;
mod destination;
mod models;
mod provider;
mod tcp_provider;

pub use bodies::Flavor;
pub use destination::{
    Behaviour, DestinationBuilder, LookedUp, MockDestination, Record, lookup_records,
};
pub use models::ModelsProvider;
pub use provider::{MockProvider, Reply};
pub use tcp_provider::{After, Plan, TcpProvider};
