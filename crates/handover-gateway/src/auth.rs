//! Bearer tokens. The configuration holds only SHA-256 hashes; a presented
//! token is hashed and looked up. A client token carries its operation
//! scope, so the scope of every operation request comes from who is
//! calling, never from what they send. Operator tokens open `/v1/admin`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::request::Parts;
use handover_ledger::Scope;
use handover_router::config::GatewaySettings;
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::api_error::ApiError;
use crate::error::GatewayError;
use crate::state::GatewayState;

/// SHA-256 of a token, as the configuration stores it
/// (`token_sha256 = "<64 hex digits>"`).
///
/// ```
/// assert_eq!(
///     handover_gateway::hash_token("example-client-token"),
///     "50f88aa457efc9d22985f9f0efd335f30b8fd187a999b69a70f11e6a8be39f4f"
/// );
/// ```
pub fn hash_token(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Who a token belongs to.
#[derive(Debug, Clone)]
pub(crate) enum Principal {
    Client {
        name: String,
        scope: Scope,
        /// Its requests in flight (`gateway.max_in_flight_per_client`).
        slots: Arc<Semaphore>,
    },
    Operator {
        name: String,
    },
}

/// Token hash → principal.
#[derive(Debug, Default)]
pub(crate) struct Tokens(HashMap<[u8; 32], Arc<Principal>>);

impl Tokens {
    pub(crate) fn from_settings(s: &GatewaySettings) -> Result<Self, String> {
        let mut map = HashMap::new();
        for c in s.clients.values() {
            let scope = Scope::new(&c.scope)
                .map_err(|e| format!("gateway.clients.{}.scope: {e}", c.name))?;
            let p = Principal::Client {
                name: c.name.clone(),
                scope,
                slots: Arc::new(Semaphore::new(s.max_in_flight_per_client as usize)),
            };
            map.insert(c.token_sha256, Arc::new(p));
        }
        for o in s.operators.values() {
            let p = Principal::Operator {
                name: o.name.clone(),
            };
            map.insert(o.token_sha256, Arc::new(p));
        }
        Ok(Self(map))
    }

    fn lookup(&self, token: &str) -> Option<Arc<Principal>> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        self.0.get(&digest).cloned()
    }
}

/// A principal already established for this request by a middleware
/// (`limits::per_client`), so the handler's extractor does not hash the
/// token a second time. Only our own layers write request extensions.
#[derive(Debug, Clone)]
pub(crate) struct Known(pub(crate) Arc<Principal>);

fn principal(parts: &Parts, state: &GatewayState) -> Result<Arc<Principal>, ApiError> {
    if let Some(Known(p)) = parts.extensions.get::<Known>() {
        return Ok(p.clone());
    }
    principal_of(&parts.headers, state)
}

/// Who sent a request with these headers.
pub(crate) fn principal_of(
    headers: &HeaderMap,
    state: &GatewayState,
) -> Result<Arc<Principal>, ApiError> {
    principal_in(headers, state.tokens())
}

fn principal_in(headers: &HeaderMap, tokens: &Tokens) -> Result<Arc<Principal>, ApiError> {
    let value =
        crate::headers::one(headers, "Authorization").map_err(|m| ApiError::unauthorized(&m))?;
    let Some(value) = value else {
        return Err(ApiError::unauthorized(
            "missing bearer token (send `Authorization: Bearer <token>`)",
        ));
    };
    let token = value
        .to_str()
        .ok()
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            ApiError::unauthorized("malformed Authorization header (expected `Bearer <token>`)")
        })?;
    tokens
        .lookup(token)
        .ok_or_else(|| ApiError::unauthorized("invalid bearer token"))
}

/// An authenticated client: its name and operation scope.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    pub(crate) name: String,
    pub(crate) scope: Scope,
}

impl FromRequestParts<GatewayState> for Client {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &GatewayState,
    ) -> Result<Self, Self::Rejection> {
        match &*principal(parts, state)? {
            Principal::Client { name, scope, .. } => Ok(Client {
                name: name.clone(),
                scope: scope.clone(),
            }),
            Principal::Operator { .. } => Err(ApiError::forbidden(
                "an operator token has no operation scope; use a client token here",
            )),
        }
    }
}

/// An authenticated operator (its name is recorded as the actor).
#[derive(Debug, Clone)]
pub(crate) struct Operator {
    pub(crate) name: String,
}

impl FromRequestParts<GatewayState> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &GatewayState,
    ) -> Result<Self, Self::Rejection> {
        match &*principal(parts, state)? {
            Principal::Operator { name } => Ok(Operator { name: name.clone() }),
            Principal::Client { .. } => {
                Err(ApiError::forbidden("this endpoint needs an operator token"))
            }
        }
    }
}

/// The `[gateway.clients]` bearer tokens as a standalone check, for another
/// HTTP door (the MCP proxy's Streamable HTTP endpoint) that must decide
/// who is calling, and so the scope of their operations, exactly as the
/// gateway does. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ClientTokens(Arc<Tokens>);

/// A caller identified by its client token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticatedClient {
    /// The client's name in `[gateway.clients]`.
    pub name: String,
    /// The operation scope of everything it does.
    pub scope: Scope,
}

/// Why a request was refused: a missing, malformed or unknown token (401)
/// or an operator token where a client one is needed (403).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct AuthError {
    status: axum::http::StatusCode,
    message: String,
}

impl AuthError {
    /// The HTTP status to answer with.
    pub fn status(&self) -> axum::http::StatusCode {
        self.status
    }
}

impl ClientTokens {
    /// The client tokens of `config`'s `[gateway]` section.
    pub fn from_config(config: &handover_router::config::Config) -> Result<Self, GatewayError> {
        let settings = crate::state::settings(config)?;
        Tokens::from_settings(settings)
            .map(|t| Self(Arc::new(t)))
            .map_err(|_| GatewayError::NotConfigured("invalid client scope"))
    }

    /// The client whose token `headers` carry (`Authorization: Bearer ...`).
    pub fn client(&self, headers: &HeaderMap) -> Result<AuthenticatedClient, AuthError> {
        let refused = |e: ApiError| AuthError {
            status: e.status,
            message: e.message,
        };
        match &*principal_in(headers, &self.0).map_err(refused)? {
            Principal::Client { name, scope, .. } => Ok(AuthenticatedClient {
                name: name.clone(),
                scope: scope.clone(),
            }),
            Principal::Operator { .. } => Err(refused(ApiError::forbidden(
                "an operator token has no operation scope; use a client token here",
            ))),
        }
    }
}
