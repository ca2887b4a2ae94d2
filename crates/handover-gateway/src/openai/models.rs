//! `GET /v1/models`: every policy, alias and listed `provider/model` a
//! client may name in `model` (route patterns and `models = "*"` providers
//! match more names than can be listed).

use axum::Json;
use axum::extract::State;
use handover_router::config::ModelSet;
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
    let direct = state.config().providers().values().flat_map(|p| {
        let models = match &p.models {
            ModelSet::Listed(m) => m.iter().collect(),
            ModelSet::Any => Vec::new(),
        };
        models.into_iter().map(|m| {
            json!({"id": format!("{}/{m}", p.name), "object": "model", "created": 0,
                "owned_by": "handover", "handover": {"provider": p.name}})
        })
    });
    let data: Vec<Value> = policies.chain(aliases).chain(direct).collect();
    Json(json!({"object": "list", "data": data}))
}
