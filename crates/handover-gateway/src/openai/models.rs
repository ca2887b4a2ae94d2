//! `GET /v1/models` (every policy and alias a client may name in `model`)
//! and `GET /v1/models/{model}` (whether a name resolves, and to what).

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use handover_router::config::RouteVia;
use serde_json::{Value, json};

use crate::api_error::ApiError;
use crate::auth::Client;
use crate::state::GatewayState;

/// An OpenAI model object for `id`, served under `policy` (`None`: the
/// built-in defaults, for a `provider/model` or a route without one).
fn model(id: &str, policy: Option<&str>, via: &str) -> Value {
    json!({"id": id, "object": "model", "created": 0, "owned_by": "handover",
        "handover": {"policy": policy, "via": via}})
}

pub(crate) async fn list(State(state): State<GatewayState>, _client: Client) -> Json<Value> {
    let policies = state
        .config()
        .policies()
        .keys()
        .map(|name| model(name, Some(name), "policy"));
    let aliases = state
        .settings()
        .models
        .iter()
        .map(|(alias, policy)| model(alias, Some(policy), "alias"));
    Json(json!({"object": "list", "data": policies.chain(aliases).collect::<Vec<_>>()}))
}

/// One name as a chat request would resolve it (`Config::route`): a
/// policy, an alias, a `provider/model` or a name a route pattern matches
/// (which `list` cannot enumerate). The path is a wildcard, as names hold
/// `/`; a name that resolves to nothing is the same 404
/// `model_not_found` a chat request naming it gets, saying why.
pub(crate) async fn get(
    State(state): State<GatewayState>,
    _client: Client,
    name: Result<Path<String>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    // A name that is no UTF-8 (`%FF`) is named like any bad field, in
    // JSON, not axum's plain-text rejection.
    let Path(name) = name.map_err(|e| {
        ApiError::invalid(
            "invalid_path",
            "model",
            format!("model: invalid in the path: {}", e.body_text()),
        )
    })?;
    let route = state
        .config()
        .route(&name)
        .map_err(|e| super::chat::router_error(&e))?;
    let via = match route.via {
        RouteVia::Policy => "policy",
        RouteVia::Alias => "alias",
        RouteVia::Direct => "direct",
        _ => "route",
    };
    Ok(Json(model(&name, route.policy.as_deref(), via)))
}
