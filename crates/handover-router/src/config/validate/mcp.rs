//! `[mcp]` and every `[actions.NAME] mcp = {...}`: the MCP proxy's upstream
//! servers and the tools it guards as actions.

use std::collections::BTreeMap;

use super::super::defaults as d;
use super::super::issues::ConfigIssues;
use super::super::model::{McpLookupTool, McpServer, McpSettings, McpTool, placeholder};
use super::super::raw::{RawActionMcp, RawMcp, RawMcpServer};
use super::{name_ok, positive_u32};

/// What an action contributes to `[mcp]`: its binding and its lookup's
/// MCP part (`mcp_tool`, `arguments`).
pub(super) struct ActionMcp {
    pub(super) binding: Option<RawActionMcp>,
    pub(super) lookup_tool: Option<String>,
    pub(super) lookup_arguments: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Why MCP cannot be served over HTTP without `[gateway]`: a caller is
/// known by its `[gateway.clients.NAME]` bearer token, which decides the
/// scope of its operations (and `[gateway]` sets the connection limits and
/// deadlines). Said by validation for `mcp.listen` and by
/// [`Config::mcp_http_gateway`](crate::Config::mcp_http_gateway) for
/// `handover mcp --listen`, so both refuse alike and before anything listens.
pub(crate) const HTTP_NEEDS_GATEWAY: &str = "serving MCP over HTTP needs [gateway] with at least one [gateway.clients.NAME] bearer token (they decide each caller's scope); add them, or leave listen unset to serve stdio";

pub(super) fn validate(
    issues: &mut ConfigIssues,
    raw: Option<RawMcp>,
    actions: BTreeMap<String, ActionMcp>,
    has_gateway: bool,
) -> Option<McpSettings> {
    let any_binding = actions.values().any(|a| a.binding.is_some());
    let raw = match raw {
        Some(raw) => raw,
        None => RawMcp {
            scope: None,
            listen: None,
            allowed_origins: Vec::new(),
            max_sessions: None,
            max_sessions_per_client: None,
            session_idle: None,
            servers: BTreeMap::new(),
        },
    };
    let listen = raw.listen.as_deref().and_then(|text| {
        text.parse::<std::net::SocketAddr>()
            .map_err(|_| {
                issues.push(
                    "mcp.listen",
                    format!("invalid address {text:?} (expected IP:PORT, e.g. \"127.0.0.1:8788\")"),
                );
            })
            .ok()
    });
    if listen.is_some() && !has_gateway {
        issues.push("mcp.listen", HTTP_NEEDS_GATEWAY);
    }
    for (i, o) in raw.allowed_origins.iter().enumerate() {
        if !(o.starts_with("http://") || o.starts_with("https://")) || o.ends_with('/') {
            issues.push(
                format!("mcp.allowed_origins[{i}]"),
                format!("{o:?} is not an origin (scheme://host[:port], no path)"),
            );
        }
    }
    let max_sessions = positive_u32(
        issues,
        "mcp.max_sessions",
        raw.max_sessions,
        d::MCP_MAX_SESSIONS,
    );
    let max_sessions_per_client = positive_u32(
        issues,
        "mcp.max_sessions_per_client",
        raw.max_sessions_per_client,
        (max_sessions / 4).max(1),
    );
    if max_sessions_per_client > max_sessions {
        issues.push(
            "mcp.max_sessions_per_client",
            format!("{max_sessions_per_client} is more than mcp.max_sessions ({max_sessions})"),
        );
    }
    let session_idle = duration!(issues, "mcp", raw.session_idle, d::MCP_SESSION_IDLE);
    let scope = raw.scope.unwrap_or_else(|| "local".to_owned());
    if scope.is_empty() || scope.len() > 255 || !scope.bytes().all(|b| b.is_ascii_graphic()) {
        issues.push(
            "mcp.scope",
            format!("invalid scope {scope:?} (1-255 visible ASCII characters)"),
        );
    }
    let servers: BTreeMap<_, _> = raw
        .servers
        .into_iter()
        .filter_map(|(name, s)| server(issues, &name, s).map(|s| (name, s)))
        .collect();
    let mut tools = BTreeMap::new();
    for (action, a) in actions {
        if let Some(t) = tool(issues, &servers, &tools, &action, a) {
            tools.insert(action, t);
        }
    }
    lookups_only_read(issues, &tools);
    (any_binding || !servers.is_empty()).then_some(McpSettings {
        scope,
        listen,
        allowed_origins: raw.allowed_origins,
        max_sessions,
        max_sessions_per_client,
        session_idle,
        servers,
        tools,
    })
}

fn server(issues: &mut ConfigIssues, name: &str, s: RawMcpServer) -> Option<McpServer> {
    let path = format!("mcp.servers.{name}");
    name_ok(issues, &path, name);
    match (s.command, s.url) {
        (Some(command), None) if !command.is_empty() => Some(McpServer::Command {
            command,
            args: s.args,
        }),
        (None, Some(url)) if url.starts_with("http://") || url.starts_with("https://") => {
            if !s.args.is_empty() {
                issues.push(format!("{path}.args"), "only a `command` server takes args");
            }
            let parsed = reqwest::Url::parse(&url).ok();
            if let Some(why) = parsed.as_ref().and_then(super::provider::credentials) {
                issues.push(format!("{path}.url"), why);
            }
            Some(McpServer::Url(url))
        }
        (None, Some(_)) => {
            // Not echoed: it may carry a credential.
            issues.push(format!("{path}.url"), "must be an http:// or https:// URL");
            None
        }
        (Some(_), None) => {
            issues.push(format!("{path}.command"), "must not be empty");
            None
        }
        (Some(_), Some(_)) => {
            issues.push(&path, "set either `command` (stdio) or `url`, not both");
            None
        }
        (None, None) => {
            issues.push(&path, "needs `command` (stdio child process) or `url`");
            None
        }
    }
}

fn tool(
    issues: &mut ConfigIssues,
    servers: &BTreeMap<String, McpServer>,
    seen: &BTreeMap<String, McpTool>,
    action: &str,
    a: ActionMcp,
) -> Option<McpTool> {
    let path = format!("actions.{action}");
    let Some(b) = a.binding else {
        if a.lookup_tool.is_some() || a.lookup_arguments.is_some() {
            issues.push(
                format!("{path}.lookup.mcp_tool"),
                format!("an MCP lookup needs the action's MCP tool (`{path}.mcp`)"),
            );
        }
        return None;
    };
    let mut ok = true;
    if !servers.contains_key(&b.server) {
        issues.push(
            format!("{path}.mcp.server"),
            format!(
                "unknown MCP server {:?} (declare [mcp.servers.{}])",
                b.server, b.server
            ),
        );
        ok = false;
    }
    if b.tool.is_empty() {
        issues.push(format!("{path}.mcp.tool"), "must not be empty");
        ok = false;
    }
    if let Some(other) = seen
        .values()
        .find(|t| t.server == b.server && t.tool == b.tool)
    {
        issues.push(
            format!("{path}.mcp.tool"),
            format!(
                "tool {:?} of server {:?} is already action {:?}",
                b.tool, b.server, other.action
            ),
        );
        ok = false;
    }
    ok &= key_fields_ok(issues, &path, &b);
    let is_error_rejects = match b.is_error.as_deref() {
        None | Some("unknown") => false,
        Some("rejected") => true,
        Some(other) => {
            issues.push(
                format!("{path}.mcp.is_error"),
                format!(
                    "{other:?} is neither \"unknown\" (the default: an isError result may come after the tool's effect) nor \"rejected\" (this tool's isError always means it did nothing)"
                ),
            );
            ok = false;
            false
        }
    };
    let lookup = lookup(issues, &path, a.lookup_tool, a.lookup_arguments);
    ok.then_some(McpTool {
        action: action.to_owned(),
        server: b.server,
        tool: b.tool,
        key_from: b.key_from,
        key_argument: b.key_argument,
        is_error_rejects,
        lookup,
    })
}

/// `key_from` names each argument once; `key_argument`, which carries the
/// destination key, is none of them.
fn key_fields_ok(issues: &mut ConfigIssues, path: &str, b: &RawActionMcp) -> bool {
    let mut ok = true;
    for (i, f) in b.key_from.iter().enumerate() {
        if f.is_empty() || b.key_from[..i].contains(f) {
            issues.push(
                format!("{path}.mcp.key_from[{i}]"),
                format!("{f:?} is empty or listed twice"),
            );
            ok = false;
        }
    }
    match b.key_argument.as_deref() {
        Some("") => {
            issues.push(format!("{path}.mcp.key_argument"), "must not be empty");
            ok = false;
        }
        Some(field) if b.key_from.iter().any(|f| f == field) => {
            issues.push(
                format!("{path}.mcp.key_argument"),
                format!(
                    "{field:?} is one of key_from: the upstream would get the destination key in place of the value that identifies the action"
                ),
            );
            ok = false;
        }
        _ => {}
    }
    ok
}

fn lookup(
    issues: &mut ConfigIssues,
    path: &str,
    tool: Option<String>,
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
) -> Option<McpLookupTool> {
    let Some(tool) = tool else {
        if arguments.is_some() {
            issues.push(
                format!("{path}.lookup.arguments"),
                "only an MCP lookup (`lookup.mcp_tool`) takes arguments",
            );
        }
        return None;
    };
    if tool.is_empty() {
        issues.push(format!("{path}.lookup.mcp_tool"), "must not be empty");
        return None;
    }
    let arguments = arguments.unwrap_or_default();
    for (k, v) in &arguments {
        check_template(issues, &format!("{path}.lookup.arguments.{k}"), v);
    }
    let mut named = Vec::new();
    placeholders(&serde_json::Value::Object(arguments.clone()), &mut named);
    let has = |p: &str| named.iter().any(|n| n == p);
    if !(has("{destination_key}") || (has("{scope}") && has("{key}"))) {
        issues.push(
            format!("{path}.lookup.arguments"),
            "must name the operation (an argument \"{destination_key}\", or both \"{scope}\" and \"{key}\", that the lookup tool declares in its inputSchema and searches by): a record found by business fields alone ({params.FIELD}) may be another scope's or another key's operation, and would confirm this one",
        );
    }
    Some(McpLookupTool { tool, arguments })
}

/// Every placeholder string in a template, at any depth.
fn placeholders(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) if placeholder(s).is_some() => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| placeholders(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| placeholders(x, out)),
        _ => {}
    }
}

/// A lookup tool that is a guarded tool of its server would be performed
/// by the reconciler on every check, outside the write gate.
fn lookups_only_read(issues: &mut ConfigIssues, tools: &BTreeMap<String, McpTool>) {
    for (action, t) in tools {
        let Some(lookup) = &t.lookup else { continue };
        if let Some(guarded) = tools
            .values()
            .find(|g| g.server == t.server && g.tool == lookup.tool)
        {
            issues.push(
                format!("actions.{action}.lookup.mcp_tool"),
                format!(
                    "{:?} is the tool of action {:?}: a lookup must only read (the reconciler calls it on every check, outside the write gate, and would perform that action each time)",
                    lookup.tool, guarded.action
                ),
            );
        }
    }
}

/// Every string that looks like a placeholder must be one.
fn check_template(issues: &mut ConfigIssues, path: &str, v: &serde_json::Value) {
    match v {
        serde_json::Value::String(s)
            if s.starts_with('{') && s.ends_with('}') && placeholder(s).is_none() =>
        {
            issues.push(
                path,
                format!(
                    "unknown placeholder {s:?} (expected \"{{destination_key}}\", \"{{key}}\", \"{{scope}}\" or \"{{params.FIELD}}\")"
                ),
            );
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                check_template(issues, &format!("{path}[{i}]"), x);
            }
        }
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                check_template(issues, &format!("{path}.{k}"), x);
            }
        }
        _ => {}
    }
}
