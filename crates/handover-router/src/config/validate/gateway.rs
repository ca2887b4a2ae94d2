//! `[gateway]`: listen address, limits, client and operator tokens (SHA-256
//! hashes, never tokens) and model aliases.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

use super::super::defaults as d;
use super::super::issues::ConfigIssues;
use super::super::model::{
    GatewayClient, GatewayOperator, GatewaySettings, PolicySettings, ProviderConfig,
};
use super::super::raw::{RawGateway, RawGatewayClient, RawGatewayOperator};
use super::{name_ok, positive, positive_u32, routes};

pub(super) fn validate(
    issues: &mut ConfigIssues,
    providers: &BTreeMap<String, ProviderConfig>,
    policies: &BTreeMap<String, PolicySettings>,
    raw: RawGateway,
) -> GatewaySettings {
    let listen = listen(issues, raw.listen.as_deref());
    // Each `[gateway]` count and duration is named `gateway.<field>` in errors.
    macro_rules! count {
        ($field:ident, $default:expr) => {
            positive_u32(
                issues,
                concat!("gateway.", stringify!($field)),
                raw.$field,
                $default,
            )
        };
    }
    macro_rules! within {
        ($field:ident, $default:expr) => {
            duration!(issues, "gateway", raw.$field, $default)
        };
    }
    let max_body_bytes = positive(
        issues,
        "gateway.max_body_bytes",
        raw.max_body_bytes,
        d::GATEWAY_MAX_BODY_BYTES as u64,
    ) as usize;
    let reconcile_every = within!(reconcile_every, d::GATEWAY_RECONCILE_EVERY);
    let keepalive = within!(keepalive, d::GATEWAY_KEEPALIVE);
    let shutdown_grace = within!(shutdown_grace, d::GATEWAY_SHUTDOWN_GRACE);
    let header_read_timeout = within!(header_read_timeout, d::GATEWAY_HEADER_READ_TIMEOUT);
    let body_read_timeout = within!(body_read_timeout, d::GATEWAY_BODY_READ_TIMEOUT);
    let idle_timeout = within!(idle_timeout, d::GATEWAY_IDLE_TIMEOUT);
    let max_connections = count!(max_connections, d::GATEWAY_MAX_CONNECTIONS);
    let max_in_flight_per_client = count!(
        max_in_flight_per_client,
        d::GATEWAY_MAX_IN_FLIGHT_PER_CLIENT
    );
    let (clients, operators) = principals(issues, raw.clients, raw.operators);
    aliases(issues, policies, &raw.models);
    if let Some(p) = &raw.direct_policy
        && !policies.contains_key(p)
    {
        issues.push("gateway.direct_policy", format!("unknown policy {p:?}"));
    }
    let routes = routes::validate(issues, providers, policies, &raw.models, raw.routes);
    GatewaySettings {
        listen,
        reconcile_every,
        max_body_bytes,
        keepalive,
        shutdown_grace,
        header_read_timeout,
        body_read_timeout,
        idle_timeout,
        max_connections,
        max_in_flight_per_client,
        clients,
        operators,
        models: raw.models,
        direct_policy: raw.direct_policy,
        routes,
    }
}

/// `gateway.listen`: an IP:PORT (the default when unset).
fn listen(issues: &mut ConfigIssues, text: Option<&str>) -> SocketAddr {
    let text = text.unwrap_or(d::GATEWAY_LISTEN);
    text.parse::<SocketAddr>().unwrap_or_else(|_| {
        issues.push(
            "gateway.listen",
            format!("invalid address {text:?} (expected IP:PORT, e.g. \"127.0.0.1:8787\")"),
        );
        SocketAddr::from(([127, 0, 0, 1], 0))
    })
}

/// The clients and operators, each token hash used once across both.
fn principals(
    issues: &mut ConfigIssues,
    clients_raw: BTreeMap<String, RawGatewayClient>,
    operators_raw: BTreeMap<String, RawGatewayOperator>,
) -> (
    BTreeMap<String, GatewayClient>,
    BTreeMap<String, GatewayOperator>,
) {
    let mut tokens = Tokens::default();
    if clients_raw.is_empty() {
        issues.push(
            "gateway.clients",
            "the gateway needs at least one client ([gateway.clients.NAME] with token_sha256 and scope)",
        );
    }
    let clients = clients(issues, &mut tokens, clients_raw);
    let operators = operators(issues, &mut tokens, operators_raw);
    (clients, operators)
}

/// The token hashes seen so far. One token, one principal: a hash listed
/// twice would make the scope (or the operator role) of a request ambiguous.
#[derive(Default)]
struct Tokens(HashMap<[u8; 32], String>);

impl Tokens {
    fn check(&mut self, issues: &mut ConfigIssues, path: &str, hex: &str) -> [u8; 32] {
        let tpath = format!("{path}.token_sha256");
        let Some(hash) = parse_sha256(hex) else {
            issues.push(
                tpath,
                "must be the SHA-256 of the token as 64 hex digits (e.g. `printf %s TOKEN | sha256sum`)",
            );
            return [0; 32];
        };
        if let Some(first) = self.0.insert(hash, path.to_owned()) {
            issues.push(tpath, format!("the same token is already used by {first}"));
        }
        hash
    }
}

fn clients(
    issues: &mut ConfigIssues,
    tokens: &mut Tokens,
    raw: BTreeMap<String, RawGatewayClient>,
) -> BTreeMap<String, GatewayClient> {
    raw.into_iter()
        .map(|(name, c)| {
            let path = format!("gateway.clients.{name}");
            name_ok(issues, &path, &name);
            let token_sha256 = tokens.check(issues, &path, &c.token_sha256);
            if let Err(e) = handover_ledger::Scope::new(&c.scope) {
                issues.push(format!("{path}.scope"), e.reason().to_owned());
            }
            let client = GatewayClient {
                name: name.clone(),
                token_sha256,
                scope: c.scope,
            };
            (name, client)
        })
        .collect()
}

fn operators(
    issues: &mut ConfigIssues,
    tokens: &mut Tokens,
    raw: BTreeMap<String, RawGatewayOperator>,
) -> BTreeMap<String, GatewayOperator> {
    raw.into_iter()
        .map(|(name, o)| {
            let path = format!("gateway.operators.{name}");
            name_ok(issues, &path, &name);
            let token_sha256 = tokens.check(issues, &path, &o.token_sha256);
            let operator = GatewayOperator {
                name: name.clone(),
                token_sha256,
            };
            (name, operator)
        })
        .collect()
}

/// Each alias is visible ASCII, names a policy, and hides no other policy.
fn aliases(
    issues: &mut ConfigIssues,
    policies: &BTreeMap<String, PolicySettings>,
    models: &BTreeMap<String, String>,
) {
    for (alias, policy) in models {
        let path = format!("gateway.models.{alias}");
        let visible =
            !alias.is_empty() && alias.len() <= 255 && alias.bytes().all(|b| b.is_ascii_graphic());
        if !visible {
            issues.push(&path, "an alias must be 1-255 visible ASCII characters");
        }
        if !policies.contains_key(policy) {
            issues.push(&path, format!("unknown policy {policy:?}"));
        } else if policies.contains_key(alias) && alias != policy {
            issues.push(
                &path,
                format!("alias {alias:?} would hide the policy of the same name"),
            );
        }
    }
}

fn parse_sha256(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim().as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let digit = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; 32];
    for (i, pair) in hex.chunks_exact(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}
