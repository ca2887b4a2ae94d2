//! Test doubles for Handover users: mock LLM providers and mock
//! destinations on real HTTP servers, so loss-of-confirmation scenarios can
//! be tested end to end against the real router and ledger.
//!
//! * [`MockDestination`] — a business system (scriptable per request: apply
//!   and confirm, apply and lose the response, reject, 5xx, idempotency keys
//!   with a retention window, a lookup with a visibility lag). It counts
//!   **effects** (records created) separately from requests.

#![forbid(unsafe_code)]

mod destination;

pub use destination::{Behaviour, DestinationBuilder, MockDestination, Record};
