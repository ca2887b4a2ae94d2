//! `[mcp]` and `[actions.NAME] mcp = {...}`: every mistake names its field.

use handover_router::config::{Config, LookupValues, McpServer};
use serde_json::json;

const BASE: &str = r#"
[mcp]
scope = "agent-1"
[mcp.servers.shipping]
command = "python3"
args = ["server.py"]

[actions.create_shipment]
mcp = { server = "shipping", tool = "create_shipment", key_from = ["order_id"], key_argument = "reference" }
[actions.create_shipment.lookup]
visibility_lag = "2s"
mcp_tool = "find_shipment"
arguments = { reference = "{destination_key}", order = "{params.order_id}", limit = 5 }
"#;

fn err(text: &str) -> String {
    Config::parse(text, &|_| None).unwrap_err().to_string()
}

#[test]
fn a_valid_mcp_section_resolves_servers_tools_and_the_lookup_template() {
    let config = Config::parse(BASE, &|_| None).unwrap();
    let mcp = config.mcp().unwrap();
    assert_eq!(mcp.scope, "agent-1");
    // stdio unless `listen` is set; HTTP limits have defaults.
    assert_eq!(mcp.listen, None);
    assert_eq!(mcp.max_sessions, 64);
    assert_eq!(mcp.max_sessions_per_client, 16, "a quarter of the pool");
    assert!(mcp.allowed_origins.is_empty());
    assert_eq!(
        mcp.servers["shipping"],
        McpServer::Command {
            command: "python3".into(),
            args: vec!["server.py".into()]
        }
    );
    let tool = mcp.action_for("shipping", "create_shipment").unwrap();
    assert_eq!(tool.action, "create_shipment");
    assert_eq!(tool.key_from, ["order_id"]);
    assert_eq!(tool.key_argument.as_deref(), Some("reference"));
    // An isError result may follow the effect: unknown unless opted in.
    assert!(!tool.is_error_rejects);
    assert!(mcp.action_for("shipping", "get_rate").is_none());
    let lookup = tool.lookup.as_ref().unwrap();
    assert_eq!(lookup.tool, "find_shipment");
    let args = lookup.arguments_for(LookupValues {
        scope: "s",
        key: "k",
        destination_key: "ho1-abc",
        params: &json!({"order_id": "A-1"}),
    });
    assert_eq!(
        serde_json::Value::Object(args),
        json!({"reference": "ho1-abc", "order": "A-1", "limit": 5})
    );
    // What the proxy requires the lookup tool to declare: the arguments
    // naming the operation, at any depth (JSON Pointers).
    assert_eq!(lookup.naming_pointers(), ["/reference"]);
    let nested = BASE.replace(
        r#"arguments = { reference = "{destination_key}","#,
        r#"arguments = { "a/b" = { s = "{scope}", k = ["{key}"] },"#,
    );
    let nested = Config::parse(&nested, &|_| None).unwrap();
    let nested = nested.mcp().unwrap().tools["create_shipment"]
        .lookup
        .clone();
    let mut pointers = nested.unwrap().naming_pointers();
    pointers.sort();
    assert_eq!(pointers, ["/a~1b/k/0", "/a~1b/s"]);
    // The action's write contract is the usual one.
    assert!(config.action("create_shipment").unwrap().lookup.is_some());
}

#[test]
fn no_mcp_section_means_no_mcp_settings() {
    let config = Config::parse("[ledger]\nbackend = \"memory\"", &|_| None).unwrap();
    assert!(config.mcp().is_none());
}

#[test]
fn mistakes_name_their_field() {
    let cases = [
        (
            BASE.replace(r#"server = "shipping""#, r#"server = "shiping""#),
            r#"actions.create_shipment.mcp.server: unknown MCP server "shiping""#,
        ),
        (
            BASE.replace(r#"command = "python3""#, r#"url = "ftp://x""#),
            "mcp.servers.shipping.url: must be an http:// or https:// URL",
        ),
        (
            BASE.replace(r#"args = ["server.py"]"#, r#"url = "http://x""#),
            "mcp.servers.shipping: set either `command` (stdio) or `url`, not both",
        ),
        (
            BASE.replace(r#""{destination_key}""#, r#""{destination}""#),
            "actions.create_shipment.lookup.arguments.reference: unknown placeholder \"{destination}\"",
        ),
        (
            BASE.replace(
                r#"key_from = ["order_id"]"#,
                r#"key_from = ["order_id", "order_id"]"#,
            ),
            "actions.create_shipment.mcp.key_from[1]",
        ),
        (
            BASE.replace(
                "tool = \"create_shipment\",",
                "tool = \"create_shipment\", tol = 1,",
            ),
            "actions.create_shipment.mcp",
        ),
        (
            BASE.replace("scope = \"agent-1\"", "scope = \"agent 1\""),
            "mcp.scope: invalid scope",
        ),
        (
            BASE.replace("scope = \"agent-1\"", "listen = \"localhost\""),
            "mcp.listen: invalid address \"localhost\"",
        ),
        (
            BASE.replace(
                "scope = \"agent-1\"",
                "allowed_origins = [\"https://a.example/\"]",
            ),
            "mcp.allowed_origins[0]",
        ),
        (
            BASE.replace("scope = \"agent-1\"", "max_sessions = 0"),
            "mcp.max_sessions",
        ),
        (
            BASE.replace(
                "scope = \"agent-1\"",
                "max_sessions = 4\nmax_sessions_per_client = 5",
            ),
            "mcp.max_sessions_per_client: 5 is more than mcp.max_sessions (4)",
        ),
        (
            BASE.replace("scope = \"agent-1\"", "session_idle = \"soon\""),
            "mcp.session_idle",
        ),
        (
            BASE.replace(
                r#"key_argument = "reference""#,
                r#"key_argument = "reference", is_error = "rejection""#,
            ),
            r#"actions.create_shipment.mcp.is_error: "rejection" is neither "unknown""#,
        ),
        (
            BASE.replace("mcp = { server", "# mcp = { server"),
            "actions.create_shipment.lookup.mcp_tool: an MCP lookup needs the action's MCP tool",
        ),
    ];
    for (text, expected) in cases {
        let e = err(&text);
        assert!(e.contains(expected), "expected {expected:?} in:\n{e}");
    }
}

#[test]
fn one_tool_is_one_action() {
    let text = format!(
        "{BASE}\n[actions.ship_again]\nmcp = {{ server = \"shipping\", tool = \"create_shipment\" }}\n"
    );
    let e = err(&text);
    assert!(
        e.contains("actions.ship_again.mcp.tool: tool \"create_shipment\" of server \"shipping\" is already action \"create_shipment\""),
        "{e}"
    );
}

#[test]
fn is_error_says_what_a_tools_error_result_means() {
    let with = |value: &str| {
        let text = BASE.replace(
            r#"key_argument = "reference""#,
            &format!(r#"key_argument = "reference", is_error = "{value}""#),
        );
        let config = Config::parse(&text, &|_| None).unwrap();
        let mcp = config.mcp().unwrap();
        mcp.action_for("shipping", "create_shipment")
            .unwrap()
            .is_error_rejects
    };
    assert!(with("rejected"));
    assert!(!with("unknown"));
}

/// A lookup's arguments must name the operation, as a lookup URL must: a
/// record found by business fields alone may be another scope's (another
/// tenant's) and would confirm this operation with it.
#[test]
fn lookup_arguments_must_name_the_operation() {
    let with = |arguments: &str| {
        BASE.replace(
            r#"arguments = { reference = "{destination_key}", order = "{params.order_id}", limit = 5 }"#,
            &format!("arguments = {arguments}"),
        )
    };
    for unnamed in [
        r#"{ order_id = "{params.order_id}" }"#,
        r#"{ order_id = "{params.order_id}", tenant = "{scope}" }"#,
        r#"{ key = "{key}" }"#,
        r#"{ note = "{destination_key} " }"#,
        "{}",
    ] {
        let e = err(&with(unnamed));
        assert!(
            e.contains("actions.create_shipment.lookup.arguments: must name the operation"),
            "{unnamed}: {e}"
        );
    }
    for named in [
        r#"{ reference = "{destination_key}" }"#,
        r#"{ tenant = "{scope}", key = "{key}", order_id = "{params.order_id}" }"#,
        r#"{ filter = { refs = ["{destination_key}"] } }"#,
    ] {
        assert!(Config::parse(&with(named), &|_| None).is_ok(), "{named}");
    }
}

/// The reconciler calls a lookup tool on every check, outside the write
/// gate: a guarded tool (this action's or another's) would be performed
/// each time. And the destination key replaces `key_argument`'s value, so
/// it cannot be one of the values that identify the action.
#[test]
fn a_lookup_that_is_a_guarded_tool_and_a_key_argument_from_key_from_are_refused() {
    let charge = "\n[actions.charge]\nmcp = { server = \"shipping\", tool = \"charge\", key_from = [\"order_no\"] }\n";
    let cases = [
        (
            BASE.replace(
                r#"mcp_tool = "find_shipment""#,
                r#"mcp_tool = "create_shipment""#,
            ),
            r#"actions.create_shipment.lookup.mcp_tool: "create_shipment" is the tool of action "create_shipment""#,
        ),
        (
            format!(
                "{}{charge}",
                BASE.replace(r#"mcp_tool = "find_shipment""#, r#"mcp_tool = "charge""#)
            ),
            r#"actions.create_shipment.lookup.mcp_tool: "charge" is the tool of action "charge""#,
        ),
        (
            BASE.replace(
                r#"key_argument = "reference""#,
                r#"key_argument = "order_id""#,
            ),
            r#"actions.create_shipment.mcp.key_argument: "order_id" is one of key_from"#,
        ),
    ];
    for (text, expected) in cases {
        let e = err(&text);
        assert!(e.contains(expected), "expected {expected:?} in:\n{e}");
    }
    // Another server's tool of the same name is not this server's.
    let other_server = format!(
        "{}\n[mcp.servers.billing]\ncommand = \"python3\"\n[actions.charge]\nmcp = {{ server = \"billing\", tool = \"find_shipment\", key_from = [\"order_no\"] }}\n",
        BASE
    );
    assert!(Config::parse(&other_server, &|_| None).is_ok());
}
