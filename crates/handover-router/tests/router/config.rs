//! Configuration: every shipped file parses, and every kind of mistake is
//! reported with the path of the offending value.

use std::time::Duration;

use handover_providers::Capability;
use handover_router::RouterError;
use handover_router::config::{
    BlockSetting, ClassAction, CommitPoint, Config, ErrorClass, LedgerBackend, OpenAiApi,
};

/// Pretends every API-key variable is set.
fn all_set(_: &str) -> Option<String> {
    Some("set".to_owned())
}

fn errors(text: &str) -> String {
    match Config::parse(text, &all_set) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(RouterError::Config(issues)) => issues.to_string(),
        Err(other) => panic!("unexpected error {other}"),
    }
}

const BASE: &str = r#"
[providers.a]
kind = "openai_compatible"
base_url = "http://127.0.0.1:1/v1"
model = "m"
data_classes = ["public"]

[providers.b]
kind = "deepseek"
model = "deepseek-chat"
api_key_env = "DS_KEY"
data_classes = ["public", "internal"]

[policies.default]
chain = ["a", "b"]
"#;

#[test]
fn every_file_in_config_dir_parses() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config");
    let mut count = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let text = std::fs::read_to_string(&path).unwrap();
            let (config, _missing_keys) = Config::check(&text, &|_| None)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(
                !config.policies().is_empty(),
                "{} has no policy",
                path.display()
            );
            count += 1;
        }
    }
    assert!(count >= 2, "expected the example files, found {count}");
}

#[test]
fn example_resolves_every_section() {
    let text = include_str!("../../../../config/handover.example.toml");
    let config = Config::parse(text, &all_set).unwrap();
    assert_eq!(
        config.ledger().backend,
        LedgerBackend::Sqlite {
            path: "handover.db".into()
        }
    );
    assert_eq!(
        config.ledger().replay_window,
        Duration::from_secs(72 * 3600)
    );
    let policy = config.policy("default").unwrap();
    let chain: Vec<String> = policy.chain.iter().map(|h| h.provider.clone()).collect();
    assert_eq!(chain, ["openai", "deepseek", "local"]);
    assert_eq!(policy.max_requests, 6);
    assert_eq!(policy.commit_point, CommitPoint::FirstToken);
    assert_eq!(
        policy.action_for(ErrorClass::InvalidRequest),
        ClassAction::Fail
    );
    assert_eq!(
        policy.action_for(ErrorClass::RateLimited),
        ClassAction::Retry
    );
    let deepseek = config.provider("deepseek").unwrap();
    assert!(deepseek.no_reasoning_passback.contains("deepseek-reasoner"));
    let openai = &config.provider("openai").unwrap().timeouts;
    assert_eq!(openai.first_byte, Duration::from_secs(30));
    assert_eq!(openai.stream_first_byte, Duration::from_secs(10));
    let ship = config.action("create_shipment").unwrap();
    assert_eq!(ship.block, BlockSetting::Scope);
    assert_eq!(
        ship.idempotency.as_ref().unwrap().retention,
        Duration::from_secs(24 * 3600)
    );
    assert_eq!(ship.lookup.unwrap().visibility_lag, Duration::from_secs(30));
    let http = ship.http_lookup.as_ref().unwrap();
    assert!(http.url.contains("{destination_key}"));
    assert_eq!(http.records.as_deref(), Some("/data"));
    assert_eq!(http.match_fields["sku"], "/sku");
    assert_eq!(
        config.gateway().unwrap().reconcile_every,
        Duration::from_secs(1)
    );
}

#[test]
fn anthropic_azure_and_gemini_kinds_are_configured() {
    let text = format!(
        "{BASE}{}",
        r#"
[providers.claude]
kind = "anthropic"
model = "claude-sonnet-4-5"
api_key_env = "ANTHROPIC_API_KEY"

[providers.azure]
kind = "azure_openai"
base_url = "https://my-resource.openai.azure.com"
api_version = "2025-01-01-preview"
model = "gpt-4o-deployment"
api_key_env = "AZURE_OPENAI_API_KEY"

[providers.gemini]
kind = "gemini"
model = "gemini-2.5-flash"
api_key_env = "GEMINI_API_KEY"

[policies.cross]
chain = ["azure", "claude", "gemini"]
"#
    );
    let config = Config::parse(&text, &all_set).unwrap();
    let azure = &config.providers()["azure"];
    assert_eq!(azure.api_version.as_deref(), Some("2025-01-01-preview"));
    assert_eq!(config.providers()["claude"].base_url, None);
    assert_eq!(config.providers()["gemini"].base_url, None);

    // Azure has no default endpoint; only Azure and Anthropic pin versions
    // (Gemini's version is its base URL's path: `/v1beta`, `/v1`).
    let e = errors(&text.replace("base_url = \"https://my-resource.openai.azure.com\"\n", ""));
    assert!(
        e.contains(r#"providers.azure.base_url: required for kind "azure_openai""#),
        "{e}"
    );
    let e = errors(&BASE.replace("model = \"m\"", "model = \"m\"\napi_version = \"v1\""));
    assert!(
        e.contains(
            r#"providers.a.api_version: kind "openai_compatible" has no API version to pin"#
        ),
        "{e}"
    );
    let e = errors(&text.replace("2025-01-01-preview", "2025 01/01"));
    assert!(e.contains("providers.azure.api_version"), "{e}");
    let e = errors(&text.replace(
        "model = \"gemini-2.5-flash\"",
        "model = \"gemini-2.5-flash\"\napi_version = \"v1\"",
    ));
    assert!(
        e.contains(r#"providers.gemini.api_version: kind "gemini" has no API version to pin"#),
        "{e}"
    );
    let e = errors(&text.replace("kind = \"anthropic\"", "kind = \"claude\""));
    assert!(e.contains(r#"unknown provider kind "claude""#), "{e}");
    assert!(
        e.contains(r#""anthropic""#),
        "the error lists the kinds: {e}"
    );
}

#[test]
fn openai_and_azure_choose_their_api_and_nobody_else_can() {
    let text = format!(
        "{BASE}{}",
        r#"
[providers.o]
kind = "openai"
api = "responses"
model = "gpt-5-mini"

[providers.az]
kind = "azure_openai"
base_url = "https://my-resource.openai.azure.com"
api = "responses"
model = "gpt-5-deployment"

[providers.plain]
kind = "openai"
model = "gpt-4o-mini"
"#
    );
    let config = Config::parse(&text, &all_set).unwrap();
    let p = config.providers();
    assert_eq!(p["o"].api, OpenAiApi::Responses);
    assert_eq!(p["az"].api, OpenAiApi::Responses);
    assert_eq!(p["plain"].api, OpenAiApi::ChatCompletions, "the default");
    assert_eq!(p["b"].api, OpenAiApi::ChatCompletions);
    // What the Responses API cannot express is never the provider's.
    assert!(!p["o"].supports(Capability::StopSequences));
    assert!(!p["o"].supports(Capability::Audio));
    assert!(p["o"].supports(Capability::StructuredOutputs));
    assert!(p["plain"].supports(Capability::StopSequences));

    let e = errors(&text.replace(
        "api = \"responses\"\nmodel = \"gpt-5-mini\"",
        "api = \"respones\"\nmodel = \"gpt-5-mini\"",
    ));
    assert!(
        e.contains(r#"providers.o.api: unknown API "respones" (expected "chat_completions" or "responses")"#),
        "{e}"
    );
    let e = errors(&BASE.replace(
        "kind = \"deepseek\"",
        "kind = \"deepseek\"\napi = \"responses\"",
    ));
    assert!(
        e.contains(r#"providers.b.api: kind "deepseek" has one API"#),
        "{e}"
    );
    // A declaration cannot claim what the API cannot express.
    let e = errors(&text.replace(
        "model = \"gpt-5-mini\"",
        "model = \"gpt-5-mini\"\nsupports = { stop_sequences = true, logprobs = false }",
    ));
    assert!(
        e.contains(
            "providers.o.supports.stop_sequences: the responses API cannot express stop_sequences"
        ),
        "{e}"
    );
    assert!(
        !e.contains("logprobs"),
        "declaring off is always allowed: {e}"
    );
}

#[test]
fn declared_capabilities_override_the_kinds_and_unknown_names_are_errors() {
    let text = BASE.replace(
        "data_classes = [\"public\"]\n",
        "data_classes = [\"public\"]\nsupports = { structured_outputs = false, logprobs = true }\n",
    );
    let text = text.replace(
        "api_key_env = \"DS_KEY\"\n",
        "api_key_env = \"DS_KEY\"\nsupports = { reasoning_effort = true }\n",
    );
    let config = Config::parse(&text, &all_set).unwrap();
    let (a, b) = (&config.providers()["a"], &config.providers()["b"]);
    assert!(!a.supports(Capability::StructuredOutputs), "declared off");
    assert!(a.supports(Capability::Logprobs));
    assert!(a.supports(Capability::Images), "undeclared: the kind's");
    assert!(b.supports(Capability::ReasoningEffort), "declared on");
    assert!(
        !b.supports(Capability::StructuredOutputs),
        "DeepSeek's default"
    );

    let e = errors(&BASE.replace(
        "model = \"m\"\n",
        "model = \"m\"\nsupports = { structured_output = false }\n",
    ));
    assert!(
        e.contains(
            r#"providers.a.supports.structured_output: unknown capability "structured_output""#
        ),
        "{e}"
    );
    assert!(
        e.contains("structured_outputs, json_mode"),
        "lists the names: {e}"
    );
    let e = errors(&BASE.replace(
        "model = \"m\"\n",
        "model = \"m\"\nsupports = { logprobs = \"yes\" }\n",
    ));
    assert!(e.contains("supports"), "{e}");
}

#[test]
fn unknown_provider_in_chain_names_index_and_value() {
    let text = BASE.replace(r#"chain = ["a", "b"]"#, r#"chain = ["a", "deepsek"]"#);
    assert!(errors(&text).contains(r#"policies.default.chain[1]: unknown provider "deepsek""#));
}

#[test]
fn duplicate_and_empty_chains_are_errors() {
    let dup = BASE.replace(r#"chain = ["a", "b"]"#, r#"chain = ["a", "b", "a"]"#);
    assert!(errors(&dup).contains(r#"policies.default.chain[2]: duplicate step "a/m" in chain"#));
    // The default model named explicitly is the same step.
    let dup = BASE.replace(r#"chain = ["a", "b"]"#, r#"chain = ["a", "b", "a/m"]"#);
    assert!(errors(&dup).contains(r#"policies.default.chain[2]: duplicate step "a/m" in chain"#));
    let empty = BASE.replace(r#"chain = ["a", "b"]"#, "chain = []");
    assert!(errors(&empty).contains("policies.default.chain: must name at least one provider"));
}

#[test]
fn unknown_fields_are_errors_with_their_path() {
    let text = BASE.replace("model = \"m\"", "model = \"m\"\ntimeout = \"5s\"");
    let e = errors(&text);
    assert!(e.contains("providers.a"), "{e}");
    assert!(e.contains("unknown field `timeout`"), "{e}");
}

#[test]
fn zero_negative_and_malformed_durations_are_errors() {
    for (value, expect) in [
        ("0s", "must be greater than zero"),
        ("-5s", "invalid duration"),
        ("soon", "invalid duration"),
        ("500000000years", "too long (at most 100 years)"),
        // Past what a duration can hold: too long too, not "malformed".
        ("99999999999999999999s", "too long (at most 100 years)"),
    ] {
        let text = format!("{BASE}deadline = \"{value}\"\n");
        let e = errors(&text);
        assert!(e.contains("policies.default.deadline: "), "{e}");
        assert!(e.contains(expect), "{value}: {e}");
    }
}

/// A stream's headers default to 10 s, below `first_byte`'s 30 s; set, the
/// value is read and checked like every duration, under its own path.
#[test]
fn stream_first_byte_has_its_default_and_its_own_path() {
    let config = Config::parse(BASE, &all_set).unwrap();
    let t = config.provider("a").unwrap().timeouts;
    assert_eq!(t.stream_first_byte, Duration::from_secs(10));
    assert_eq!(t.first_byte, Duration::from_secs(30));
    let set = BASE.replacen(
        "[providers.b]",
        "[providers.a.timeouts]\nstream_first_byte = \"3s\"\n\n[providers.b]",
        1,
    );
    let config = Config::parse(&set, &all_set).unwrap();
    let t = config.provider("a").unwrap().timeouts;
    assert_eq!(t.stream_first_byte, Duration::from_secs(3));
    let bad = set.replace("\"3s\"", "\"0s\"");
    let e = errors(&bad);
    assert!(
        e.contains("providers.a.timeouts.stream_first_byte: "),
        "{e}"
    );
    assert!(e.contains("must be greater than zero"), "{e}");
}

#[test]
fn unknown_error_class_and_action_are_errors() {
    let text = format!(
        "{BASE}\n[policies.default.on]\nrate_limted = \"retry\"\nserver_error = \"again\"\n"
    );
    let e = errors(&text);
    assert!(
        e.contains(r#"policies.default.on.rate_limted: unknown error class "rate_limted""#),
        "{e}"
    );
    assert!(
        e.contains(r#"policies.default.on.server_error: unknown action "again""#),
        "{e}"
    );
}

#[test]
fn data_class_no_provider_accepts_is_an_error() {
    let text = format!("{BASE}data_classes = [\"internal\", \"secret\"]\n");
    let e = errors(&text);
    assert!(
        e.contains(r#"policies.default.data_classes[1]: no provider in the chain accepts data class "secret""#),
        "{e}"
    );
    assert!(
        !e.contains("data_classes[0]"),
        "internal is accepted by b: {e}"
    );
}

#[test]
fn unset_api_key_env_is_an_error_at_startup_and_a_warning_for_check() {
    let e = match Config::parse(BASE, &|_| None) {
        Err(RouterError::Config(issues)) => issues.to_string(),
        other => panic!("expected a config error, got {other:?}"),
    };
    assert!(
        e.contains("providers.b.api_key_env: environment variable DS_KEY is not set"),
        "{e}"
    );
    let (_config, warnings) = Config::check(BASE, &|_| None).unwrap();
    assert_eq!(warnings.iter().count(), 1);
    assert!(Config::parse(BASE, &|v| (v == "DS_KEY").then(|| "k".to_owned())).is_ok());
    // Set to blanks is not set: the provider would answer 401 to every
    // call and its breaker open at once.
    for blank in ["", "  ", "\t\n"] {
        let env = |v: &str| (v == "DS_KEY").then(|| blank.to_owned());
        let e = match Config::parse(BASE, &env) {
            Err(RouterError::Config(issues)) => issues.to_string(),
            other => panic!("expected a config error, got {other:?}"),
        };
        assert!(
            e.contains(
                "providers.b.api_key_env: environment variable DS_KEY is not set (or is blank)"
            ),
            "{e}"
        );
    }
}

/// A name no environment can hold is an error of the file, not a
/// variable reported "not set" forever (`check` used to pass it).
#[test]
fn a_key_variable_name_no_environment_can_hold_is_refused() {
    for name in ["A=B", "DS KEY", "DS_KEY\n"] {
        let text = BASE.replace(
            r#"api_key_env = "DS_KEY""#,
            &format!("api_key_env = {name:?}"),
        );
        let e = match Config::check(&text, &|_| None) {
            Err(RouterError::Config(issues)) => issues.to_string(),
            other => panic!("{name:?}: expected a config error, got {other:?}"),
        };
        assert!(
            e.contains("providers.b.api_key_env: not an environment variable name"),
            "{name:?}: {e}"
        );
    }
}

#[test]
fn every_problem_is_reported_at_once() {
    let text = BASE
        .replace(r#"kind = "deepseek""#, r#"kind = "deepseak""#)
        .replace(r#"chain = ["a", "b"]"#, "chain = [\"a\"]\nmax_requests = 0");
    let e = errors(&text);
    assert!(
        e.contains(r#"providers.b.kind: unknown provider kind "deepseak""#),
        "{e}"
    );
    assert!(
        e.contains("policies.default.max_requests: must be greater than zero"),
        "{e}"
    );
}

#[test]
fn action_contracts_are_validated() {
    let text = format!(
        "{BASE}\n[actions.ship]\nblock = \"tenant\"\n[actions.ship.idempotency]\nheader = \"Idem Key\"\nretention = \"0s\"\n"
    );
    let e = errors(&text);
    assert!(
        e.contains(r#"actions.ship.block: unknown block width "tenant""#),
        "{e}"
    );
    assert!(
        e.contains(r#"actions.ship.idempotency.header: "Idem Key" is not a valid header name"#),
        "{e}"
    );
    assert!(
        e.contains("actions.ship.idempotency.retention: duration \"0s\" must be greater than zero"),
        "{e}"
    );
}

#[test]
fn invalid_toml_is_reported() {
    let e = errors("[providers.a\nkind = 1");
    assert!(e.contains("invalid TOML"), "{e}");
    assert!(e.contains("line 1"), "where: {e}");
}

/// A key or table given twice names what was repeated and where, as every
/// other problem names its path.
#[test]
fn a_duplicate_key_or_table_names_its_path_and_line() {
    let text = format!("{BASE}\n[providers.a]\nkind = \"openai\"\n");
    let e = errors(&text);
    assert!(e.contains("providers.a"), "which table: {e}");
    assert!(e.contains("line 17"), "where: {e}");
    let text = format!("{BASE}\n[ledger]\nbackend = \"sqlite\"\nbackend = \"memory\"\n");
    let e = errors(&text);
    assert!(e.contains("ledger.backend"), "which key: {e}");
    assert!(e.contains("line 19"), "where: {e}");
}

/// An empty path opens a temporary SQLite database and `:memory:` an
/// in-memory one: neither is durable, and nothing would say so.
#[test]
fn a_sqlite_path_must_name_a_file() {
    for path in ["", "  ", ":memory:"] {
        let text = format!("[ledger]\nbackend = \"sqlite\"\npath = {path:?}\n{BASE}");
        let e = errors(&text);
        assert!(e.contains("ledger.path: "), "{path:?}: {e}");
        assert!(e.contains("backend = \"memory\""), "{path:?}: {e}");
    }
}

#[test]
fn postgres_needs_url_env() {
    let text = format!("[ledger]\nbackend = \"postgres\"\n{BASE}");
    assert!(errors(&text).contains("ledger.url_env: required for backend \"postgres\""));
}

const GATEWAY: &str = r#"
[gateway]
listen = "127.0.0.1:0"
max_body_bytes = 1024
keepalive = "2s"

[gateway.clients.bot]
token_sha256 = "50f88aa457efc9d22985f9f0efd335f30b8fd187a999b69a70f11e6a8be39f4f"
scope = "tenant-1"

[gateway.operators.alice]
token_sha256 = "cadaee6d96cfc6f48b78f8783c9493f48be29ff3e90ac85c219f014cb73b1eae"

[gateway.models]
"gpt-4o-mini" = "default"
"#;

#[test]
fn gateway_section_is_validated_into_settings() {
    let config = Config::parse(&format!("{BASE}{GATEWAY}"), &all_set).unwrap();
    let g = config.gateway().expect("gateway section");
    assert_eq!(g.listen.to_string(), "127.0.0.1:0");
    assert_eq!(g.max_body_bytes, 1024);
    assert_eq!(g.keepalive, Duration::from_secs(2));
    assert_eq!(g.shutdown_grace, Duration::from_secs(30));
    let bot = &g.clients["bot"];
    assert_eq!(bot.scope, "tenant-1");
    assert_eq!(bot.token_sha256[0], 0x50);
    assert_eq!(bot.token_sha256[31], 0x4f);
    assert_eq!(g.operators["alice"].token_sha256[0], 0xca);
    assert_eq!(g.models["gpt-4o-mini"], "default");
    assert!(Config::parse(BASE, &all_set).unwrap().gateway().is_none());
}

#[test]
fn gateway_errors_name_their_path() {
    let bad = GATEWAY
        .replace("127.0.0.1:0", "localhost")
        .replace("\"tenant-1\"", "\"tenant 1\"")
        .replace("cadaee6d", "zzzz")
        .replace("= \"default\"", "= \"defualt\"")
        .replace("keepalive = \"2s\"", "keepalive = \"2s\"\ntoken = \"x\"");
    let err = errors(&format!("{BASE}{bad}"));
    assert!(err.contains("unknown field `token`"), "{err}");
    let bad = bad.replace("token = \"x\"\n", "");
    let err = errors(&format!("{BASE}{bad}"));
    assert!(
        err.contains("gateway.listen: invalid address \"localhost\""),
        "{err}"
    );
    assert!(err.contains("gateway.clients.bot.scope: "), "{err}");
    assert!(
        err.contains("gateway.operators.alice.token_sha256: must be the SHA-256"),
        "{err}"
    );
    assert!(
        err.contains("gateway.models.gpt-4o-mini: unknown policy \"defualt\""),
        "{err}"
    );
}

#[test]
fn a_token_hash_belongs_to_one_principal() {
    let twice = GATEWAY.replace(
        "cadaee6d96cfc6f48b78f8783c9493f48be29ff3e90ac85c219f014cb73b1eae",
        "50f88aa457efc9d22985f9f0efd335f30b8fd187a999b69a70f11e6a8be39f4f",
    );
    let err = errors(&format!("{BASE}{twice}"));
    assert!(
        err.contains("gateway.operators.alice.token_sha256: the same token is already used by gateway.clients.bot"),
        "{err}"
    );
}

#[test]
fn abandon_after_is_read_under_its_old_name_hedge_after_too() {
    for key in ["abandon_after", "hedge_after"] {
        let text = format!("{BASE}{key} = \"8s\"\n");
        let config = Config::parse(&text, &all_set).unwrap();
        assert_eq!(
            config.policy("default").unwrap().abandon_after,
            Some(Duration::from_secs(8)),
            "{key}"
        );
    }
    let both = format!("{BASE}abandon_after = \"8s\"\nhedge_after = \"9s\"\n");
    assert!(
        errors(&both).contains("policies.default"),
        "{}",
        errors(&both)
    );
    assert!(
        errors(&format!("{BASE}abandon_after = \"0s\"\n"))
            .contains("policies.default.abandon_after")
    );
}

#[test]
fn http_lookup_mistakes_name_their_path() {
    let text = format!(
        r#"{BASE}
[actions.ship.lookup]
visibility_lag = "30s"
method = "DELETE"
url = "https://dest.example/s?ref={{destination_key}}&x={{order}}"
records = "items"
not_found_status = [404, 42, 200, 503, 410]
[actions.ship.lookup.headers]
"Bad Header" = "x"
Authorization = {{ env = "" }}
[actions.ship.lookup.match]
sku = "sku"

[actions.other.lookup]
visibility_lag = "30s"
records = "/items"
"#
    );
    let e = errors(&text);
    for path in [
        "actions.ship.lookup.method: unknown method \"DELETE\"",
        "actions.ship.lookup.url: unknown placeholder {order}",
        "actions.ship.lookup.records: must be a JSON pointer",
        "actions.ship.lookup.not_found_status[1]: 42 is not an HTTP status",
        "actions.ship.lookup.not_found_status[2]: 200 cannot mean \"no such record\": only a 4xx can",
        "actions.ship.lookup.not_found_status[3]: 503 cannot mean \"no such record\"",
        "actions.ship.lookup.headers.Bad Header: \"Bad Header\" is not a valid header name",
        "actions.ship.lookup.headers.Authorization.env: must name an environment variable",
        "actions.ship.lookup.match.sku: must be a JSON pointer",
        "actions.other.lookup.records: needs lookup.url",
    ] {
        assert!(e.contains(path), "missing {path:?} in:\n{e}");
    }
    assert!(!e.contains("not_found_status[4]"), "410 is a 4xx: {e}");
    let bad_url = format!(
        "{BASE}\n[actions.ship.lookup]\nvisibility_lag = \"30s\"\nurl = \"ftp://x/{{key}}\"\n"
    );
    assert!(
        errors(&bad_url).contains("actions.ship.lookup.url: must be an http:// or https:// URL")
    );
    let unclosed = format!(
        "{BASE}\n[actions.ship.lookup]\nvisibility_lag = \"30s\"\nurl = \"https://x/{{key\"\n"
    );
    assert!(errors(&unclosed).contains("actions.ship.lookup.url: unclosed '{'"));
}

#[test]
fn an_unset_lookup_secret_is_an_error_at_startup_and_a_warning_for_check() {
    let text = format!(
        r#"{BASE}
[actions.ship.lookup]
visibility_lag = "30s"
url = "https://dest.example/s?ref={{destination_key}}"
[actions.ship.lookup.headers]
Authorization = {{ env = "SHIP_TOKEN", prefix = "Bearer " }}
"#
    );
    let only_ds = |v: &str| (v == "DS_KEY").then(|| "k".to_owned());
    let Err(RouterError::Config(issues)) = Config::parse(&text, &only_ds) else {
        panic!("an unset lookup secret must fail parse")
    };
    assert!(
        issues
            .to_string()
            .contains("actions.ship.lookup.headers.Authorization.env: environment variable SHIP_TOKEN is not set"),
        "{issues}"
    );
    let (config, warnings) = Config::check(&text, &only_ds).unwrap();
    assert_eq!(warnings.iter().count(), 1);
    let spec = config.action("ship").unwrap().http_lookup.as_ref().unwrap();
    assert_eq!(spec.method, "GET");
    assert_eq!(spec.not_found_status, [404]);
}

#[test]
fn telemetry_section_is_validated_naming_each_field() {
    let ok = Config::parse(
        &format!(
            "{BASE}\n[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318\"\nexport_timeout = \"2s\"\n[telemetry.headers]\nx-api-key = {{ env = \"OTLP_KEY\" }}\n"
        ),
        &all_set,
    )
    .unwrap();
    let t = ok.telemetry().expect("exported");
    assert_eq!(t.otlp_endpoint, "http://127.0.0.1:4318/v1/traces");
    assert_eq!(t.service_name, "handover");
    assert_eq!(t.export_timeout, Duration::from_secs(2));
    // A URL with a path is used as written; no endpoint: nothing exported.
    let with_path =
        format!("{BASE}\n[telemetry]\notlp_endpoint = \"https://c.example/otlp/traces\"\n");
    let c = Config::parse(&with_path, &all_set).unwrap();
    assert_eq!(
        c.telemetry().unwrap().otlp_endpoint,
        "https://c.example/otlp/traces"
    );
    let off = Config::parse(
        &format!("{BASE}\n[telemetry]\nservice_name = \"x\"\n"),
        &all_set,
    )
    .unwrap();
    assert!(off.telemetry().is_none());

    for (field, expect) in [
        (
            "otlp_endpoint = \"http://\"",
            "telemetry.otlp_endpoint: \"http://\" is not a valid URL",
        ),
        (
            "otlp_endpoint = \"grpc://c:4317\"",
            "telemetry.otlp_endpoint: \"grpc://c:4317\" is not an http(s) URL",
        ),
        (
            "export_timeout = \"500000000000y\"",
            "telemetry.export_timeout: duration",
        ),
        (
            "export_interval = \"0s\"",
            "telemetry.export_interval: duration \"0s\" must be greater than zero",
        ),
        (
            "max_queued_spans = 0",
            "telemetry.max_queued_spans: must be greater than zero",
        ),
        (
            "service_name = \"\"",
            "telemetry.service_name: must be 1-255",
        ),
        ("endpoint = \"http://c\"", "unknown field `endpoint`"),
    ] {
        let e = errors(&format!("{BASE}\n[telemetry]\n{field}\n"));
        assert!(e.contains(expect), "{field}: {e}");
    }
    let no_key = format!(
        "{BASE}\n[telemetry]\notlp_endpoint = \"http://c:4318\"\n[telemetry.headers]\nauthorization = {{ env = \"OTLP_KEY\", prefix = \"Bearer \" }}\n"
    );
    let e = match Config::parse(&no_key, &|v| (v == "DS_KEY").then(|| "k".to_owned())) {
        Err(RouterError::Config(issues)) => issues.to_string(),
        other => panic!("expected a config error, got {other:?}"),
    };
    assert!(
        e.contains("telemetry.headers.authorization.env: environment variable OTLP_KEY is not set"),
        "{e}"
    );
}

/// Secrets come from the environment, never from the file: a URL with
/// `user:password@` is refused, naming its path and not the password
/// (`handover check` would otherwise print it with the resolved URL).
#[test]
fn urls_with_credentials_are_errors_that_do_not_repeat_them() {
    let text = BASE.replace(
        "http://127.0.0.1:1/v1",
        "http://admin:hunter2-secret@127.0.0.1:1/v1",
    ) + r#"
[actions.ship.lookup]
visibility_lag = "1s"
url = "https://bot:hunter3-secret@shipments.example/v1?ref={destination_key}"

[telemetry]
otlp_endpoint = "http://otel:hunter4-secret@127.0.0.1:4318"

[mcp.servers.up]
url = "http://mcp:hunter5-secret@127.0.0.1:9/mcp"
[mcp.servers.odd]
url = "ftp://mcp:hunter6-secret@127.0.0.1:9/mcp"
"#;
    let e = errors(&text);
    for path in [
        "providers.a.base_url",
        "actions.ship.lookup.url",
        "telemetry.otlp_endpoint",
        "mcp.servers.up.url",
        "mcp.servers.odd.url",
    ] {
        assert!(e.contains(&format!("{path}: ")), "{path}: {e}");
    }
    assert!(!e.contains("hunter"), "{e}");
}

/// Nor in a header written out: a credential header (lookup or telemetry)
/// must come from the environment, and the error does not repeat it
/// (a `Config`'s `Debug` would otherwise print it).
#[test]
fn literal_credential_headers_are_errors_that_do_not_repeat_them() {
    let text = format!(
        r#"{BASE}
[actions.ship.lookup]
visibility_lag = "1s"
url = "https://shipments.example/v1?ref={{destination_key}}"
[actions.ship.lookup.headers]
Authorization = "Bearer hunter5-secret"
x-api-key = "hunter6-secret"
Accept = "application/json"

[telemetry]
otlp_endpoint = "http://127.0.0.1:4318"
[telemetry.headers]
Cookie = "session=hunter7-secret"
"#
    );
    let e = errors(&text);
    for path in [
        "actions.ship.lookup.headers.Authorization",
        "actions.ship.lookup.headers.x-api-key",
        "telemetry.headers.Cookie",
    ] {
        assert!(e.contains(&format!("{path}: a credential")), "{path}: {e}");
    }
    assert!(!e.contains("Accept"), "a literal Accept is fine: {e}");
    assert!(!e.contains("hunter"), "{e}");
}

/// A claim that can lapse while its destination call may still run invites
/// a second claimant (the reconciler re-sending) and loses the answer:
/// refused, naming both fields and values, wherever the lease comes from.
#[test]
fn a_lease_shorter_than_the_action_timeout_is_refused() {
    let own = errors(&format!(
        "{BASE}\n[actions.ship]\nlease = \"1s\"\ntimeout = \"10s\"\n"
    ));
    assert!(
        own.contains("actions.ship.lease: 1s is shorter than actions.ship.timeout = 10s"),
        "{own}"
    );
    let inherited = errors(&format!(
        "[ledger]\nbackend = \"memory\"\nlease = \"45s\"\n{BASE}\n[actions.ship]\ntimeout = \"1m\"\n"
    ));
    assert!(
        inherited.contains(
            "actions.ship.lease: 45s (from ledger.lease) is shorter than actions.ship.timeout = 1m"
        ),
        "{inherited}"
    );
    let default_timeout = errors(&format!("{BASE}\n[actions.ship]\nlease = \"5s\"\n"));
    assert!(
        default_timeout.contains(
            "actions.ship.lease: 5s is shorter than actions.ship.timeout (default) = 30s"
        ),
        "{default_timeout}"
    );
    // An action the file does not declare gets ledger.lease and the default timeout.
    let undeclared = errors(&format!(
        "[ledger]\nbackend = \"memory\"\nlease = \"10s\"\n{BASE}\n[actions.ship]\nlease = \"5s\"\ntimeout = \"5s\"\n"
    ));
    assert!(
        undeclared.contains(
            "ledger.lease: 10s is shorter than the default action timeout (30s), which applies to every action this file does not declare"
        ) && undeclared.contains("raise ledger.lease to at least 30s"),
        "{undeclared}"
    );
    // Equal is enough: the claim covers the whole call.
    let ok = Config::parse(
        &format!("{BASE}\n[actions.ship]\nlease = \"10s\"\ntimeout = \"10s\"\n"),
        &all_set,
    )
    .unwrap();
    assert_eq!(ok.action("ship").unwrap().lease, Duration::from_secs(10));
}

/// The reconciler confirms from the record the lookup URL returns; a URL
/// that does not name the operation could return another operation's
/// record (the same parameters approved under another key), `match` or not.
#[test]
fn a_lookup_url_that_does_not_name_the_operation_is_refused() {
    for (url, with_match) in [
        ("https://dest.example/shipments?order={params.order}", false),
        ("https://dest.example/shipments?order={params.order}", true),
        ("https://dest.example/shipments/{key}", false),
        ("https://dest.example/shipments", false),
    ] {
        let matching = if with_match {
            "[actions.ship.lookup.match]\norder = \"/order\"\n"
        } else {
            ""
        };
        let text = format!(
            "{BASE}\n[actions.ship.lookup]\nvisibility_lag = \"30s\"\nurl = \"{url}\"\n{matching}"
        );
        let e = errors(&text);
        assert!(
            e.contains("actions.ship.lookup.url: must name the operation ({destination_key}, or both {scope} and {key})"),
            "{url}: {e}"
        );
    }
    for url in [
        "https://dest.example/shipments?reference={destination_key}",
        "https://dest.example/{scope}/shipments/{key}",
    ] {
        let text =
            format!("{BASE}\n[actions.ship.lookup]\nvisibility_lag = \"30s\"\nurl = \"{url}\"\n");
        let config = Config::parse(&text, &all_set).unwrap();
        assert!(
            config.action("ship").unwrap().http_lookup.is_some(),
            "{url}"
        );
    }
}

/// Only the path and the query are sent and narrow the answer: a fragment
/// never leaves the client (the destination answers the URL without it, and
/// the reconciler would confirm from another operation's record), and the
/// userinfo or host choose where to ask, not which record. Each is refused,
/// naming the field and saying why; the path and query forms are accepted.
#[test]
fn a_lookup_url_must_send_what_names_the_operation() {
    let lookup = |url: &str| {
        format!("{BASE}\n[actions.ship.lookup]\nvisibility_lag = \"30s\"\nurl = \"{url}\"\n")
    };
    for url in [
        "http://127.0.0.1:9200/shipments#{destination_key}",
        "http://127.0.0.1:9200/shipments#{scope}/{key}",
        // A fragment is refused even when the path names the operation.
        "http://127.0.0.1:9200/shipments/{destination_key}#top",
        "http://127.0.0.1:9200/shipments?ref={destination_key}#",
    ] {
        let e = errors(&lookup(url));
        assert!(
            e.contains("actions.ship.lookup.url: has a fragment ('#'): a fragment is never sent"),
            "{url}: {e}"
        );
    }
    for url in [
        "https://{destination_key}.shipments.example/v1/shipments",
        "https://{scope}.{key}.shipments.example/v1/shipments",
        "https://{scope}.shipments.example/v1/{key}",
        "https://{destination_key}@shipments.example/v1/shipments",
        "https://{scope}:{key}@shipments.example/v1/shipments",
    ] {
        let e = errors(&lookup(url));
        assert!(
            e.contains(
                "actions.ship.lookup.url: must name the operation ({destination_key}, or both {scope} and {key}) in its path or query"
            ),
            "{url}: {e}"
        );
    }
    // A dot segment written in the path is removed before sending.
    let dots = errors(&lookup(
        "http://127.0.0.1:9200/v1/../shipments/{destination_key}",
    ));
    assert!(
        dots.contains("actions.ship.lookup.url: a path segment is '.' or '..'"),
        "{dots}"
    );
    // Misplaced names are said to be misplaced.
    let host = errors(&lookup("https://{destination_key}.shipments.example/v1"));
    assert!(host.contains("sit in the userinfo or the host"), "{host}");
    for url in [
        "http://127.0.0.1:9200/shipments/{destination_key}",
        "http://127.0.0.1:9200/shipments?reference={destination_key}",
        "http://127.0.0.1:9200/shipments?scope={scope}&key={key}",
        "http://127.0.0.1:9200/{scope}/shipments?key={key}",
        // A host chosen by the scope is fine while the path names the operation.
        "https://{scope}.shipments.example/v1/{destination_key}",
    ] {
        let config = Config::parse(&lookup(url), &all_set).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert!(
            config.action("ship").unwrap().http_lookup.is_some(),
            "{url}"
        );
    }
}
