//! The Handover gateway (`handover serve`): an OpenAI-compatible HTTP front
//! for agent backends in any language, plus an operations API that puts
//! their tool calls through the ledger.
//!
//! How it fits: a Python or TypeScript agent points its OpenAI SDK at the
//! gateway. `POST /v1/chat/completions` runs the request through the
//! [`handover_router::route::Router`] under the policy its `model` names (or a
//! `[gateway.models]` alias), with the policy's budget, fallback and stream
//! commit point. Business actions go through `/v1/operations`, which maps
//! onto the [`handover_ledger::Ledger`] trait (begin → dispatch → outcome),
//! with the operation **scope taken from the client's token**, never from
//! the request. Operators list and resolve unresolved operations under
//! `/v1/admin`. `GET /metrics` exposes Prometheus metrics, `GET /healthz`
//! liveness. The full HTTP contract is `docs/openapi.yaml`; the reasoning is
//! in `docs/gateway.md`.
//!
//! A call naming its user task (`x-handover-task`) draws from that task's
//! one budget in the ledger's store, shared by every call of the task on
//! every replica.
//!
//! Build an [`axum::Router`] with [`app`] from a [`GatewayState`] over an
//! opened [`handover::Handover`], or let [`serve`] / [`Gateway::bind`] open
//! what the configuration names and serve with graceful shutdown.
//!
//! ```no_run
//! # async fn run() -> Result<(), handover_gateway::GatewayError> {
//! use handover::Config;
//!
//! let config = Config::load("config/handover.example.toml").map_err(handover_gateway::GatewayError::Router)?;
//! let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
//! // Keep `stop_tx`; send on it (e.g. on SIGTERM) to shut down gracefully.
//! handover_gateway::serve(config, None, async move { stop_rx.await.ok(); }).await?;
//! # drop(stop_tx);
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

mod api_error;
mod auth;
mod body;
mod conn;
mod detach;
mod error;
mod fields;
mod headers;
mod limits;
mod metrics;
mod openai;
mod ops;
mod serve;
mod state;
mod task;

pub use auth::{AuthError, AuthenticatedClient, ClientTokens, hash_token};
pub use error::GatewayError;
pub use serve::{Gateway, serve, serve_router};
pub use state::GatewayState;

/// The gateway's HTTP routes over `state`, with the configured body limit.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use handover::{Config, Handover};
///
/// let config = Config::parse(r#"
///     [ledger]
///     backend = "memory"
///     [providers.local]
///     kind = "openai_compatible"
///     base_url = "http://127.0.0.1:9/v1"
///     model = "m"
///     [policies.default]
///     chain = ["local"]
///     [gateway.clients.bot]
///     token_sha256 = "50f88aa457efc9d22985f9f0efd335f30b8fd187a999b69a70f11e6a8be39f4f"
///     scope = "tenant-1"
/// "#, &|_| None).unwrap();
/// let handover = Handover::open(&config).await.unwrap();
/// let state = handover_gateway::GatewayState::new(handover).unwrap();
/// let app: axum::Router = handover_gateway::app(state);
/// # let _ = app;
/// # }
/// ```
pub fn app(state: GatewayState) -> axum::Router {
    use axum::routing::{get, post};

    let limit = state.settings().max_body_bytes;
    axum::Router::new()
        .route("/v1/chat/completions", post(openai::chat::completions))
        .route("/v1/responses", post(openai::responses::create))
        .route("/v1/models", get(openai::models::list))
        .route("/v1/models/{*model}", get(openai::models::get))
        .route("/v1/operations", post(ops::begin).get(ops::list::list))
        .route("/v1/operations/{key}", get(ops::get))
        .route("/v1/operations/{key}/approve", post(ops::approve))
        .route("/v1/operations/{key}/dispatch", post(ops::dispatch))
        .route("/v1/operations/{key}/outcome", post(ops::outcome))
        .route("/v1/reconcile/lease", post(ops::pull::lease))
        .route("/v1/reconcile/{key}/report", post(ops::pull::report))
        .route("/v1/admin/operations", get(ops::admin::list))
        .route("/v1/admin/operations/{scope}/{key}", get(ops::admin::get))
        .route(
            "/v1/admin/operations/{scope}/{key}/resolve",
            post(ops::admin::resolve),
        )
        .route("/healthz", get(metrics::healthz))
        .route("/metrics", get(metrics::render))
        .fallback(api_error::not_found)
        .method_not_allowed_fallback(api_error::method_not_allowed)
        // One layer: the request's span, log line and metrics around the
        // per-client limit.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            metrics::track,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(limit))
        .with_state(state)
}
