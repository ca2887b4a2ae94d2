//! One provider entry serving many models: `models` in its three spellings,
//! `provider/model` chain entries, `[gateway.routes]` patterns, and how a
//! request's model name resolves — each mistake named by its path.

use handover_router::RouterError;
use handover_router::config::{Config, Hop, ModelSet, RouteVia};

fn parse(text: &str) -> Result<Config, String> {
    Config::parse(text, &|_| None).map_err(|e| match e {
        RouterError::Config(issues) => issues.to_string(),
        other => panic!("unexpected error {other}"),
    })
}

fn errors(text: &str) -> String {
    parse(text).map(|_| ()).expect_err(text)
}

const PROVIDERS: &str = r#"
[providers.wall]
kind = "openai_compatible"
base_url = "http://127.0.0.1:1/v1"
model = "fb-default"
models = "*"

[providers.openai]
kind = "openai"
model = "gpt-4o-mini"
models = ["gpt-4.1", "o3/mini"]
data_classes = ["internal"]

[providers.deepseek]
kind = "deepseek"
model = "deepseek-chat"
[providers.deepseek.models.deepseek-reasoner]
reasoning_passback = "never"

[policies.default]
chain = ["openai/gpt-4.1", "openai", "deepseek/deepseek-reasoner"]
"#;

fn hop(provider: &str, model: &str) -> Hop {
    Hop {
        provider: provider.to_owned(),
        model: model.to_owned(),
    }
}

/// `extra` goes right under `[gateway]` (its keys first, then its tables).
fn with_gateway(extra: &str) -> String {
    format!(
        "{PROVIDERS}\n[policies.strict]\nchain = [\"openai\"]\ndata_classes = [\"internal\"]\n\n[gateway]\n{extra}\n[gateway.clients.a]\ntoken_sha256 = \"{}\"\nscope = \"s\"\n",
        "ab".repeat(32)
    )
}

#[test]
fn models_in_three_spellings_and_chain_entries_with_models() {
    let config = parse(PROVIDERS).unwrap();
    assert_eq!(config.provider("wall").unwrap().models, ModelSet::Any);
    let openai = &config.provider("openai").unwrap().models;
    for m in ["gpt-4o-mini", "gpt-4.1", "o3/mini"] {
        assert!(openai.serves(m), "{m}: the default and the listed ones");
    }
    assert!(!openai.serves("gpt-5"));
    let deepseek = config.provider("deepseek").unwrap();
    assert!(
        deepseek.models.serves("deepseek-reasoner"),
        "a table lists too"
    );
    assert!(deepseek.no_reasoning_passback.contains("deepseek-reasoner"));
    assert_eq!(
        config.policy("default").unwrap().chain,
        [
            hop("openai", "gpt-4.1"),
            hop("openai", "gpt-4o-mini"),
            hop("deepseek", "deepseek-reasoner"),
        ]
    );
}

#[test]
fn chain_entries_name_only_models_their_provider_serves() {
    let bad = PROVIDERS.replace(
        r#""openai/gpt-4.1", "openai""#,
        r#""openai", "openai/gpt-5""#,
    );
    let e = errors(&bad);
    assert!(
        e.contains(r#"policies.default.chain[1]: provider "openai" does not serve model "gpt-5" (list it in providers.openai.models)"#),
        "{e}"
    );
    let e = errors(&PROVIDERS.replace(r#""openai/gpt-4.1", "openai""#, r#""openai/""#));
    assert!(
        e.contains(r#"policies.default.chain[0]: "openai/" names no model"#),
        "{e}"
    );
    let e = errors(&PROVIDERS.replace(r#""openai/gpt-4.1", "openai""#, r#""wall/{model}""#));
    assert!(
        e.contains("policies.default.chain[0]: {model} is only known in [gateway.routes]"),
        "{e}"
    );
    let e = errors(&PROVIDERS.replace(r#""openai/gpt-4.1", "openai""#, r#""opena/gpt-4.1""#));
    assert!(
        e.contains(r#"policies.default.chain[0]: unknown provider "opena""#),
        "{e}"
    );
}

#[test]
fn bad_models_values_name_their_path() {
    let e = errors(&PROVIDERS.replace(r#"models = "*""#, r#"models = "all""#));
    assert!(
        e.contains(r#"providers.wall.models: "all" is not "*""#),
        "{e}"
    );
    let e = errors(&PROVIDERS.replace(r#"models = "*""#, r#"models = ["a", "*"]"#));
    assert!(
        e.contains(r#"providers.wall.models[1]: "*" stands alone"#),
        "{e}"
    );
    let e = errors(&PROVIDERS.replace(r#"models = "*""#, r#"models = ["ok", "two words"]"#));
    assert!(
        e.contains(r#"providers.wall.models[1]: invalid model name "two words""#),
        "{e}"
    );
    let e = errors(&PROVIDERS.replace(r#"models = "*""#, "models = 3"));
    assert!(e.contains("providers.wall.models"), "{e}");
    assert!(
        e.contains(r#""*", a list of model names, or a table"#),
        "{e}"
    );
    let e = errors(&PROVIDERS.replace("reasoning_passback = \"never\"", "reasoning = \"never\""));
    assert!(e.contains("unknown field `reasoning`"), "{e}");
}

#[test]
fn names_resolve_in_order_policy_alias_direct_pattern() {
    let config = parse(&with_gateway(
        r#"
direct_policy = "strict"
[gateway.models]
fast = "default"
[gateway.routes]
"fb-*" = { chain = ["wall/{model}", "wall/fb-ok"], policy = "default" }
"fb-special-*" = { chain = ["openai/gpt-4.1"] }
"*" = { chain = ["wall/{model}"], policy = "default" }
"#,
    ))
    .unwrap();
    let r = config.route("default").unwrap();
    assert_eq!(
        (r.via, r.policy.as_deref()),
        (RouteVia::Policy, Some("default"))
    );
    let r = config.route("fast").unwrap();
    assert_eq!(
        (r.via, r.policy.as_deref()),
        (RouteVia::Alias, Some("default"))
    );
    assert_eq!(r.chain.len(), 3);

    let r = config.route("openai/o3/mini").unwrap();
    assert_eq!(r.via, RouteVia::Direct);
    assert_eq!(r.chain, [hop("openai", "o3/mini")]);
    assert_eq!(config.route_policy(&r).name, "strict");

    let r = config.route("fb-7").unwrap();
    assert_eq!(r.via, RouteVia::Pattern("fb-*".into()));
    assert_eq!(r.chain, [hop("wall", "fb-7"), hop("wall", "fb-ok")]);
    assert_eq!(config.route_policy(&r).name, "default");
    // The substitution repeating a step: it is walked once.
    assert_eq!(config.route("fb-ok").unwrap().chain, [hop("wall", "fb-ok")]);
    // The most specific pattern wins, whatever the file's order.
    let r = config.route("fb-special-1").unwrap();
    assert_eq!(r.via, RouteVia::Pattern("fb-special-*".into()));
    assert_eq!(
        config.route_policy(&r).name,
        "(defaults)",
        "no policy: the defaults"
    );
    // A provider/model that the provider does not serve falls through to
    // the patterns; "*" catches it.
    let r = config.route("openai/gpt-5").unwrap();
    assert_eq!(r.chain, [hop("wall", "openai/gpt-5")]);
}

#[test]
fn unresolvable_names_say_why() {
    let config = parse(&with_gateway(
        r#"
[gateway.routes]
"gpt-*" = { chain = ["openai/{model}"] }
"#,
    ))
    .unwrap();
    let why = |name: &str| config.route(name).unwrap_err().to_string();
    let e = why("openai/gpt-5");
    assert!(
        e.contains(r#"provider "openai" does not serve model "gpt-5""#),
        "{e}"
    );
    let e = why("gpt-5");
    assert!(
        e.contains(r#"route "gpt-*", chain[0]: provider "openai" does not serve model "gpt-5""#),
        "{e}"
    );
    assert_eq!(
        config.route("gpt-4.1").unwrap().chain,
        [hop("openai", "gpt-4.1")]
    );
    let e = why("claude");
    assert!(e.contains("neither a policy, an alias"), "{e}");
    // Without direct_policy, provider/model runs under the built-in defaults.
    let r = config.route("wall/x").unwrap();
    assert_eq!(config.route_policy(&r).name, "(defaults)");
    assert_eq!(config.route_policy(&r).max_requests, 6);
}

#[test]
fn bad_routes_name_their_path() {
    let e = errors(&with_gateway(
        r#"
direct_policy = "nope"
[gateway.routes]
"a-*" = { chain = ["wall/{model}", "ghost"], policy = "missing" }
"b-*" = { chain = [] }
"c-*" = { chain = ["{model}"] }
"d-*" = { chain = ["openai/gpt-5", "openai", "openai/gpt-4o-mini"] }
"*-x" = { chain = ["wall"] }
"y-*" = { chain = ["wall"] }
"strict" = { chain = ["wall"] }
"exact" = { chain = ["openai/{model}"] }
"e-*" = { chain = ["deepseek"], policy = "strict" }
"#,
    ));
    for needle in [
        r#"gateway.direct_policy: unknown policy "nope""#,
        r#"gateway.routes."a-*".chain[1]: unknown provider "ghost""#,
        r#"gateway.routes."a-*".policy: unknown policy "missing""#,
        r#"gateway.routes."b-*".chain: must name at least one provider"#,
        r#"gateway.routes."c-*".chain[0]: {model} may stand only after the provider"#,
        r#"gateway.routes."d-*".chain[0]: provider "openai" does not serve model "gpt-5""#,
        r#"gateway.routes."d-*".chain[2]: duplicate step "openai/gpt-4o-mini""#,
        r#"gateway.routes."y-*": overlaps "*-x" at the same specificity"#,
        r#"gateway.routes."strict": "strict" is already a policy or an alias"#,
        r#"gateway.routes."exact".chain[0]: provider "openai" does not serve model "exact""#,
        r#"gateway.routes."e-*".policy: policy "strict" serves data class "internal", which no provider of this chain accepts"#,
    ] {
        assert!(e.contains(needle), "missing {needle:?} in:\n{e}");
    }
    let e = errors(&with_gateway(
        "[gateway.routes]\n\"f-*\" = { chain = [\"wall\"], extra = 1 }\n",
    ));
    assert!(e.contains("unknown field `extra`"), "{e}");
}

/// A pattern every matching name of which is a `provider/model` a provider
/// serves can never be reached (those names resolve as that one step
/// first): a mistake, reported naming the pattern. A pattern that some
/// name only it reaches still matches is fine.
#[test]
fn routes_that_can_never_match_are_errors() {
    let e = errors(&with_gateway(
        r#"
[gateway.routes]
"openai/gpt-4.1" = { chain = ["wall"] }
"wall/fb-*" = { chain = ["wall"] }
"#,
    ));
    for pattern in ["openai/gpt-4.1", "wall/fb-*"] {
        let needle = format!("gateway.routes.{pattern:?}: never matches");
        assert!(e.contains(&needle), "missing {needle:?} in:\n{e}");
    }
    // openai serves a list, so other openai/... names reach the route; a
    // pattern like wall/* still matches the name "wall/" (no model).
    parse(&with_gateway(
        r#"
[gateway.routes]
"openai/gpt-5*" = { chain = ["wall"] }
"wall/*" = { chain = ["wall"] }
"#,
    ))
    .expect("reachable routes");
}
