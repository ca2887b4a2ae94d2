//! A mock destination: the business system a tool writes to (a shipping
//! API, a payment processor), on a real HTTP server (wiremock).
//!
//! Endpoints:
//! * `POST /records` — perform the action. The JSON body is the record; the
//!   response is `201 {"id": "rec-N", ...}`. With an idempotency contract, a
//!   repeated key inside the retention window replays the first answer
//!   (`200`, header `idempotent-replayed: true`) without a new effect.
//! * `GET /records?key=K` — the authoritative lookup: records whose
//!   idempotency key or `reference` body field is `K`, but only those older
//!   than the visibility lag.
//!
//! Each request is scripted ([`Behaviour`]), and the destination counts
//! **effects** (records actually created) apart from requests received.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use handover_ledger::{Clock, SystemClock, Timestamp};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Match, Mock, MockServer, Request, ResponseTemplate};

/// What the destination does with the next action request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behaviour {
    /// Create the record and answer `201`.
    Confirm,
    /// Create the record, but answer only after this delay (past the
    /// client's timeout, the confirmation is lost).
    ConfirmAfter(Duration),
    /// Create the record, then drop the connection without answering.
    ApplyAndDrop,
    /// Create the record, then answer with this 5xx status.
    ApplyAndFail(u16),
    /// Do not create anything; answer this status (e.g. 422) with a reason.
    Reject {
        /// HTTP status, e.g. 422.
        status: u16,
        /// Reason in the JSON body.
        reason: String,
    },
    /// Do not create anything; answer this status (e.g. 503).
    FailWithoutApplying(u16),
}

/// A record the destination created.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Destination-assigned id (`rec-1`, `rec-2`, ...).
    pub id: String,
    /// The idempotency key the request carried, if any.
    pub idempotency_key: Option<String>,
    /// The request body.
    pub body: Value,
    /// When it was created (destination clock).
    pub created_at: Timestamp,
}

#[derive(Debug)]
struct State {
    script: VecDeque<Behaviour>,
    default: Behaviour,
    records: Vec<Record>,
    idempotency: Option<(String, Duration)>,
    visibility_lag: Duration,
    clock: Arc<dyn Clock>,
}

impl State {
    fn next_behaviour(&mut self) -> Behaviour {
        self.script
            .pop_front()
            .unwrap_or_else(|| self.default.clone())
    }

    fn peek_behaviour(&self) -> &Behaviour {
        self.script.front().unwrap_or(&self.default)
    }

    fn idempotency_key(&self, req: &Request) -> Option<String> {
        let (header, _) = self.idempotency.as_ref()?;
        req.headers
            .get(header.as_str())
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }

    /// A record created for the same key within the retention window.
    fn replay(&self, key: Option<&str>) -> Option<&Record> {
        let (_, retention) = self.idempotency.as_ref()?;
        let now = self.clock.now();
        self.records.iter().find(|r| {
            r.idempotency_key.as_deref() == key
                && key.is_some()
                && r.created_at.plus(*retention) > now
        })
    }

    fn apply(&mut self, req: &Request) -> Record {
        let record = Record {
            id: format!("rec-{}", self.records.len() + 1),
            idempotency_key: self.idempotency_key(req),
            body: serde_json::from_slice(&req.body).unwrap_or(Value::Null),
            created_at: self.clock.now(),
        };
        self.records.push(record.clone());
        record
    }
}

fn record_json(r: &Record) -> Value {
    json!({ "id": r.id, "status": "created", "idempotency_key": r.idempotency_key, "record": r.body })
}

/// Builder for a [`MockDestination`].
#[derive(Debug)]
pub struct DestinationBuilder {
    idempotency: Option<(String, Duration)>,
    visibility_lag: Duration,
    clock: Arc<dyn Clock>,
    default: Behaviour,
}

impl DestinationBuilder {
    /// Honour an idempotency-key header for `retention` (destination clock).
    pub fn idempotency(mut self, header: &str, retention: Duration) -> Self {
        self.idempotency = Some((header.to_ascii_lowercase(), retention));
        self
    }

    /// New records become visible to the lookup only after `lag`.
    pub fn visibility_lag(mut self, lag: Duration) -> Self {
        self.visibility_lag = lag;
        self
    }

    /// Use this clock for retention and visibility (share the ledger's
    /// `ManualClock` to move both at once).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// What unscripted requests get (default [`Behaviour::Confirm`]).
    pub fn default_behaviour(mut self, behaviour: Behaviour) -> Self {
        self.default = behaviour;
        self
    }

    /// Starts the server on a random loopback port.
    pub async fn start(self) -> MockDestination {
        let server = MockServer::start().await;
        let state = Arc::new(Mutex::new(State {
            script: VecDeque::new(),
            default: self.default,
            records: Vec::new(),
            idempotency: self.idempotency,
            visibility_lag: self.visibility_lag,
            clock: self.clock,
        }));
        mount(&server, &state).await;
        MockDestination { server, state }
    }
}

/// Matches action requests whose scripted behaviour is (or is not) a dropped
/// connection, so the two kinds can be served by different wiremock mocks.
struct NextIsDrop(Arc<Mutex<State>>, bool);

impl Match for NextIsDrop {
    fn matches(&self, _request: &Request) -> bool {
        let state = lock(&self.0);
        (*state.peek_behaviour() == Behaviour::ApplyAndDrop) == self.1
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

async fn mount(server: &MockServer, state: &Arc<Mutex<State>>) {
    let s = state.clone();
    Mock::given(method("POST"))
        .and(path("/records"))
        .and(NextIsDrop(state.clone(), true))
        .respond_with_err(move |req: &Request| {
            let mut st = lock(&s);
            st.next_behaviour();
            // A key the destination still remembers is deduplicated even
            // when the answer is then lost: no second effect.
            let key = st.idempotency_key(req);
            if st.replay(key.as_deref()).is_none() {
                st.apply(req);
            }
            std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "mock destination dropped the connection",
            )
        })
        .mount(server)
        .await;
    let s = state.clone();
    Mock::given(method("POST"))
        .and(path("/records"))
        .and(NextIsDrop(state.clone(), false))
        .respond_with(move |req: &Request| respond(&mut lock(&s), req))
        .mount(server)
        .await;
    let s = state.clone();
    Mock::given(method("GET"))
        .and(path("/records"))
        .respond_with(move |req: &Request| lookup(&lock(&s), req))
        .mount(server)
        .await;
}

fn respond(st: &mut State, req: &Request) -> ResponseTemplate {
    let behaviour = st.next_behaviour();
    let key = st.idempotency_key(req);
    if let Some(first) = st.replay(key.as_deref()) {
        return ResponseTemplate::new(200)
            .insert_header("idempotent-replayed", "true")
            .set_body_json(record_json(first));
    }
    match behaviour {
        Behaviour::Confirm => ResponseTemplate::new(201).set_body_json(record_json(&st.apply(req))),
        Behaviour::ConfirmAfter(delay) => ResponseTemplate::new(201)
            .set_body_json(record_json(&st.apply(req)))
            .set_delay(delay),
        Behaviour::ApplyAndFail(status) => {
            st.apply(req);
            ResponseTemplate::new(status).set_body_json(json!({"error": "internal error"}))
        }
        Behaviour::Reject { status, reason } => {
            ResponseTemplate::new(status).set_body_json(json!({"error": reason}))
        }
        Behaviour::FailWithoutApplying(status) => {
            ResponseTemplate::new(status).set_body_json(json!({"error": "unavailable"}))
        }
        // Routed to the dropping mock; reaching here means a concurrent
        // request took the scripted drop first: apply and drop is not
        // possible from this responder, so fail loudly for the test author.
        Behaviour::ApplyAndDrop => ResponseTemplate::new(500).set_body_json(
            json!({"error": "testkit: concurrent requests raced for a scripted drop"}),
        ),
    }
}

fn lookup(st: &State, req: &Request) -> ResponseTemplate {
    let Some(key) = req
        .url
        .query_pairs()
        .find(|(k, _)| k == "key")
        .map(|(_, v)| v.into_owned())
    else {
        return ResponseTemplate::new(400)
            .set_body_json(json!({"error": "missing query parameter key"}));
    };
    let now = st.clock.now();
    let found: Vec<Value> = st
        .records
        .iter()
        .filter(|r| r.created_at.plus(st.visibility_lag) <= now)
        .filter(|r| {
            r.idempotency_key.as_deref() == Some(key.as_str())
                || r.body.get("reference").and_then(Value::as_str) == Some(key.as_str())
        })
        .map(record_json)
        .collect();
    ResponseTemplate::new(200).set_body_json(json!({ "records": found }))
}

/// A scriptable destination on a real HTTP server.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use handover_testkit::{Behaviour, MockDestination};
///
/// let dest = MockDestination::builder().start().await;
/// dest.script([Behaviour::Reject { status: 422, reason: "address invalid".into() }]);
/// let client = reqwest::Client::new();
/// let resp = client.post(dest.records_url()).json(&serde_json::json!({"sku": "A"})).send().await.unwrap();
/// assert_eq!(resp.status(), 422);
/// assert_eq!(dest.effect_count(), 0);
/// assert_eq!(dest.action_requests().await, 1);
/// # }
/// ```
#[derive(Debug)]
pub struct MockDestination {
    server: MockServer,
    state: Arc<Mutex<State>>,
}

impl MockDestination {
    /// A builder with no idempotency support, no visibility lag, the system
    /// clock and [`Behaviour::Confirm`] for unscripted requests.
    pub fn builder() -> DestinationBuilder {
        DestinationBuilder {
            idempotency: None,
            visibility_lag: Duration::ZERO,
            clock: Arc::new(SystemClock),
            default: Behaviour::Confirm,
        }
    }

    /// The server's base URL.
    pub fn uri(&self) -> String {
        self.server.uri()
    }

    /// `POST` here to perform the action.
    pub fn records_url(&self) -> String {
        format!("{}/records", self.server.uri())
    }

    /// `GET` here with `?key=K` to look records up.
    pub fn lookup_url(&self, key: &str) -> String {
        format!("{}/records?key={key}", self.server.uri())
    }

    /// Queues behaviours for the next action requests, in order.
    pub fn script(&self, behaviours: impl IntoIterator<Item = Behaviour>) {
        lock(&self.state).script.extend(behaviours);
    }

    /// Records actually created: the number of effects.
    pub fn effect_count(&self) -> usize {
        lock(&self.state).records.len()
    }

    /// Records created for one operation: those whose idempotency key or
    /// `reference` body field is `key` (the operation's destination key).
    /// More than one means the action took effect more than once.
    pub fn effects_for(&self, key: &str) -> usize {
        lock(&self.state)
            .records
            .iter()
            .filter(|r| {
                r.idempotency_key.as_deref() == Some(key)
                    || r.body.get("reference").and_then(Value::as_str) == Some(key)
            })
            .count()
    }

    /// Every record created, in order.
    pub fn records(&self) -> Vec<Record> {
        lock(&self.state).records.clone()
    }

    /// Action requests received (`POST /records`), counted by the server.
    pub async fn action_requests(&self) -> usize {
        self.count("POST").await
    }

    /// Lookup requests received (`GET /records`), counted by the server.
    pub async fn lookup_requests(&self) -> usize {
        self.count("GET").await
    }

    /// Every action request received, in order (headers and body included).
    pub async fn received_actions(&self) -> Vec<Request> {
        self.server
            .received_requests()
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r.method.as_str() == "POST")
            .collect()
    }

    async fn count(&self, m: &str) -> usize {
        self.server
            .received_requests()
            .await
            .unwrap_or_default()
            .iter()
            .filter(|r| r.method.as_str() == m && r.url.path() == "/records")
            .count()
    }
}

/// A record as a [`MockDestination`]'s lookup returns it, split for the
/// application's comparison: the request body it was created from (without
/// the `reference` field an executor may add) and the whole record.
#[derive(Debug, Clone, PartialEq)]
pub struct LookedUp {
    /// The body the record was created from, minus `reference`.
    pub params: Value,
    /// The record as the destination reports it.
    pub record: Value,
}

/// Calls a [`MockDestination`]'s lookup (`GET {base}/records?key=K`) the way
/// an application's lookup function would. `Err` when the lookup itself
/// failed — which is never evidence of anything.
pub async fn lookup_records(
    client: &reqwest::Client,
    base: &str,
    key: &str,
) -> Result<Vec<LookedUp>, String> {
    let resp = client
        .get(format!("{base}/records"))
        .query(&[("key", key)])
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !resp.status().is_success() {
        return Err(format!("lookup answered {}", resp.status()));
    }
    let body: Value = resp.json().await.map_err(|e| e.to_string())?;
    Ok(body["records"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|record| {
            let mut params = record["record"].clone();
            if let Some(obj) = params.as_object_mut() {
                obj.shift_remove("reference");
            }
            LookedUp { params, record }
        })
        .collect())
}
