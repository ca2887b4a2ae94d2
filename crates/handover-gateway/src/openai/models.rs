//! `GET /v1/models`: every policy and alias a client may name in `model`.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::auth::Client;
use crate::state::GatewayState;

pub(crate) async fn list(State(state): State<GatewayState>, _client: Client) -> Json<Value> {
    let policies = state.config().policies().keys().map(|name| {
        json!({"id": name, "object": "model", "created": 0, "owned_by": "handover",
            "handover": {"policy": name}})
    });
    let aliases = state.settings().models.iter().map(|(alias, policy)| {
        json!({"id": alias, "object": "model", "created": 0, "owned_by": "handover",
            "handover": {"policy": policy}})
    });
    Json(json!({"object": "list", "data": policies.chain(aliases).collect::<Vec<_>>()}))
}
