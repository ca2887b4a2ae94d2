//! `handover check`: every shipped config passes; broken ones fail with the
//! path of each problem; an unset API-key variable is a warning.

use crate::support;

use std::path::{Path, PathBuf};

use support::*;

/// `handover serve` on `path`, on any free port: only for files it must
/// refuse before binding (a file it accepts would serve until killed).
fn serve(path: &Path) -> std::process::Output {
    let config = path.to_str().unwrap();
    run(&["serve", "--config", config, "--listen", "127.0.0.1:0"])
}

fn config_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config")
}

#[test]
fn every_shipped_config_passes() {
    let mut checked = 0;
    for entry in std::fs::read_dir(config_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let out = ok(&run(&["check", "--config", path.to_str().unwrap()]));
            assert!(out.contains("OK"), "{out}");
            for section in ["ledger", "providers", "policies", "actions"] {
                assert!(
                    out.contains(section),
                    "{path:?} output lacks {section}:\n{out}"
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 2, "config/ has the example files");
}

#[test]
fn the_example_prints_resolved_chains_budgets_error_tables_and_contracts() {
    let path = config_dir().join("handover.example.toml");
    let out = handover()
        .args(["check", "--config", path.to_str().unwrap()])
        .env_remove("OPENAI_API_KEY")
        .env("DEEPSEEK_API_KEY", "sk-secret-value-never-printed")
        .output()
        .unwrap();
    let text = ok(&out);
    for needle in [
        "chain openai/gpt-4o-mini -> deepseek/deepseek-chat -> local/llama-3.1-8b-instruct",
        "models: gpt-4.1, gpt-4.1-mini, gpt-4o-mini",
        "gpt-4o-mini  (alias) -> chain openai/gpt-4o-mini -> ",
        "openai/gpt-4.1  -> that step alone, under policy default",
        "local/*  (any model)",
        r#""gpt-4.1*"  (pattern; {model} = the requested name) -> chain openai/{model} -> deepseek under policy default"#,
        "deadline 1m, max 6 request(s) sent",
        "overloaded=next",
        "invalid_request=fail",
        "data classes: internal, public",
        "supports: structured_outputs, json_mode, logprobs, reasoning_effort, parallel_tool_calls, temperature_above_1, stop_sequences, not images (declared), not audio (declared), not files (declared)",
        "supports: json_mode, logprobs, temperature_above_1, stop_sequences\n",
        "$OPENAI_API_KEY (NOT SET)",
        "$DEEPSEEK_API_KEY (set)",
        "idempotency: header Idempotency-Key",
        "lookup: visibility lag 30s",
        // What the MCP proxy checks only when it runs.
        "refund_payment: tool refund on billing, keyed by order_id, reason (each value of the JSON type the tool's inputSchema declares",
        "lookup over MCP: tool find_refund, naming the operation by reference: the tool must declare it in its inputSchema",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    let err = stderr(&out);
    assert!(
        err.contains("warning") && err.contains("OPENAI_API_KEY"),
        "{err}"
    );
    assert!(!err.contains("DEEPSEEK_API_KEY is not set"), "{err}");
    assert!(
        !text.contains("sk-secret") && !err.contains("sk-secret"),
        "keys are never printed"
    );
}

#[test]
fn a_provider_without_data_classes_is_shown_to_receive_only_unclassed_requests() {
    let path = config_dir().join("minimal.toml");
    let out = ok(&run(&["check", "--config", path.to_str().unwrap()]));
    assert!(
        out.contains("data classes: none (receives only requests without a data class)"),
        "{out}"
    );
    assert!(out.contains("data classes: none declared"), "{out}");
    assert!(
        !out.contains("(any)"),
        "nothing with no data class reads as any:\n{out}"
    );
}

fn check_text(dir: &Path, text: &str) -> (String, String) {
    let path = dir.join("broken.toml");
    std::fs::write(&path, text).unwrap();
    let out = run(&["check", "--config", path.to_str().unwrap()]);
    let err = failed(&out);
    (err, path.display().to_string())
}

#[test]
fn broken_configs_fail_naming_the_path_of_every_problem() {
    let dir = tempfile::tempdir().unwrap();
    let provider = "[providers.primary]\nkind = \"openai_compatible\"\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"m\"\n";

    let (err, file) = check_text(
        dir.path(),
        &format!("{provider}[policies.default]\nchain = [\"primary\", \"deepsek\"]\n"),
    );
    assert!(
        err.contains(r#"policies.default.chain[1]: unknown provider "deepsek""#),
        "{err}"
    );
    assert!(err.contains(&file), "names the file: {err}");

    let (err, _) = check_text(
        dir.path(),
        &format!("{provider}[ledger]\nbackend = \"sqlite\"\nbogus = 1\n"),
    );
    assert!(err.contains("ledger.bogus"), "{err}");

    let (err, _) = check_text(
        dir.path(),
        &format!(
            "{provider}[policies.default]\nchain = [\"primary\"]\ndeadline = \"soon\"\n[actions.ship]\nblock = \"galaxy\"\n"
        ),
    );
    assert!(err.contains("policies.default.deadline"), "{err}");
    assert!(
        err.contains("actions.ship.block"),
        "every problem, not just the first: {err}"
    );

    let (err, _) = check_text(dir.path(), "this is = = not toml");
    assert!(err.contains("invalid TOML"), "{err}");

    let missing = dir.path().join("nope.toml");
    let err = failed(&run(&["check", "--config", missing.to_str().unwrap()]));
    assert!(err.contains("nope.toml"), "{err}");
}

#[test]
fn model_flag_prints_what_a_name_runs_and_fails_on_names_that_resolve_to_nothing() {
    let path = config_dir().join("handover.example.toml");
    let path = path.to_str().unwrap();
    let out = ok(&run(&[
        "check",
        "--config",
        path,
        "--model",
        "gpt-4.1-mini",
        "--model",
        "llama-3.2",
    ]));
    for needle in [
        r#"gpt-4.1-mini  (route "gpt-4.1*") -> chain openai/gpt-4.1-mini -> deepseek/deepseek-chat under policy default"#,
        r#"llama-3.2  (route "llama-*") -> chain local/llama-3.2 -> local/llama-3.1-8b-instruct under the built-in defaults"#,
    ] {
        assert!(out.contains(needle), "missing {needle:?} in:\n{out}");
    }
    let out = run(&["check", "--config", path, "--model", "gpt-4.1-nano"]);
    assert!(
        !out.status.success(),
        "a name that resolves to nothing fails"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(r#"provider "openai" does not serve model "gpt-4.1-nano""#),
        "{text}"
    );
}

/// What `serve` refuses (or would fail on per request), `check` refuses
/// too, naming the path: an overflowing duration, a URL with no host, a
/// gateway nobody may call. Each alone, so one cannot mask another.
#[test]
fn check_refuses_what_serve_refuses_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let base = |ledger_extra: &str, base_url: &str, gateway: &str| {
        format!(
            "[ledger]\nbackend = \"memory\"\n{ledger_extra}\n[providers.p]\nkind = \"openai_compatible\"\nbase_url = \"{base_url}\"\nmodel = \"m\"\n[policies.default]\nchain = [\"p\"]\n{gateway}"
        )
    };
    let client = "[gateway]\n[gateway.clients.a]\ntoken_sha256 = \"50f88aa457efc9d22985f9f0efd335f30b8fd187a999b69a70f11e6a8be39f4f\"\nscope = \"t\"\n";
    let cases = [
        (
            base("lease = \"500000000000y\"", "http://127.0.0.1:9/v1", client),
            "ledger.lease: duration \"500000000000y\" is too long",
        ),
        (
            base("", "http://", client),
            "providers.p.base_url: \"http://\" is not a valid URL",
        ),
        (
            base(
                "",
                "http://127.0.0.1:9/v1",
                "[gateway]\nlisten = \"127.0.0.1:0\"\n",
            ),
            "gateway.clients: the gateway needs at least one client",
        ),
        (
            base(
                "",
                "http://127.0.0.1:9/v1",
                &format!("{client}[telemetry]\notlp_endpoint = \"http://\"\n"),
            ),
            "telemetry.otlp_endpoint: \"http://\" is not a valid URL",
        ),
        (
            base(
                "",
                "http://127.0.0.1:9/v1",
                &format!(
                    "{client}[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318\"\nexport_timeout = \"500000000000y\"\n"
                ),
            ),
            "telemetry.export_timeout: duration \"500000000000y\" is too long",
        ),
        // A claim that could lapse while the destination call still runs.
        (
            base(
                "",
                "http://127.0.0.1:9/v1",
                &format!("{client}[actions.ship]\nlease = \"1s\"\ntimeout = \"10s\"\n"),
            ),
            "actions.ship.lease: 1s is shorter than actions.ship.timeout = 10s",
        ),
        // A lookup that could confirm from another operation's record.
        (
            base(
                "",
                "http://127.0.0.1:9/v1",
                &format!(
                    "{client}[actions.ship.lookup]\nvisibility_lag = \"1s\"\nurl = \"http://127.0.0.1:9/shipments?order={{params.order}}\"\n"
                ),
            ),
            "actions.ship.lookup.url: must name the operation",
        ),
    ];
    for (i, (text, expected)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("case{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let out = run(&["check", "--config", path.to_str().unwrap()]);
        assert!(!out.status.success(), "case {i} passed check:\n{text}");
        let err = stderr(&out);
        assert!(err.contains(expected), "case {i}: {err}");
        // And `serve` refuses it the same way, before binding anything.
        let out = serve(&path);
        assert!(!out.status.success(), "case {i} was served");
        assert!(
            stderr(&out).contains(expected),
            "case {i}: {}",
            stderr(&out)
        );
    }
    // The valid variant passes both ways (serve is not started here).
    let path = dir.path().join("ok.toml");
    std::fs::write(
        &path,
        base(
            "",
            "http://127.0.0.1:9/v1",
            &format!("{client}[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318\"\n"),
        ),
    )
    .unwrap();
    let printed = ok(&run(&["check", "--config", path.to_str().unwrap()]));
    assert!(
        printed.contains("OTLP/HTTP JSON to http://127.0.0.1:4318/v1/traces"),
        "{printed}"
    );
}

/// Output that cannot be written is never a panic: a closed pipe
/// (`handover check ... | head -1`, the reader gone) ends the command
/// quietly with success, a full disk is an error saying so (exit 1).
/// A path naming something that is no configuration file (an endless
/// device, a huge file) fails at once, naming the file and why, instead of
/// reading until memory runs out.
#[test]
fn a_config_path_to_something_endless_or_huge_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let huge = dir.path().join("huge.toml");
    let mut text = "# padding\n".repeat(500_000);
    text.push_str("[ledger]\nbackend = \"memory\"\n");
    std::fs::write(&huge, text).unwrap();
    for path in ["/dev/zero", huge.to_str().unwrap()] {
        let out = run(&["check", "--config", path]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{path}: {err}");
        assert!(
            err.contains(path) && err.contains("larger than 4 MiB"),
            "{err}"
        );
    }
}

#[test]
fn a_closed_pipe_or_a_full_disk_on_stdout_is_not_a_panic() {
    let path = config_dir().join("handover.example.toml");
    let args = ["check", "--config", path.to_str().unwrap()];
    let mut child = handover()
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before the command writes anything.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");

    let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
    let Ok(full) = full else { return };
    let out = handover()
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .stdout(full)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot write to stdout"), "{err}");
}

/// `api` is shown for the kinds that choose one, with what it means for the
/// capabilities (no stop sequences or audio through the Responses API), and
/// refused naming the path for a kind that has one API.
#[test]
fn the_api_a_provider_is_called_through_is_shown_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let text = "[ledger]\nbackend = \"memory\"\n[providers.az]\nkind = \"azure_openai\"\nbase_url = \"https://r.openai.azure.com\"\napi = \"responses\"\nmodel = \"gpt-5-deployment\"\n[policies.default]\nchain = [\"az\"]\n";
    let path = dir.path().join("responses.toml");
    std::fs::write(&path, text).unwrap();
    let out = ok(&run(&["check", "--config", path.to_str().unwrap()]));
    for needle in [
        // Azure's v1 Responses path pins no version unless one is set.
        "az  kind azure_openai, model gpt-5-deployment, base_url https://r.openai.azure.com, api responses\n",
        "supports: structured_outputs, json_mode, logprobs, reasoning_effort, images, files, parallel_tool_calls, temperature_above_1\n",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in:\n{out}");
    }
    let (err, _) = check_text(
        dir.path(),
        &text.replace("kind = \"azure_openai\"", "kind = \"gemini\""),
    );
    assert!(
        err.contains(r#"providers.az.api: kind "gemini" has one API"#),
        "{err}"
    );
}

/// A file without `[gateway]` is valid (the library, `chat` and `mcp` on
/// stdio do not need one), but `serve` cannot run it: a client token has no default.
/// `check` says so as a warning; `serve` refuses it, saying what to add.
#[test]
fn check_warns_that_serve_needs_a_gateway_section_and_serve_refuses_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no-gateway.toml");
    std::fs::write(
        &path,
        "[ledger]\nbackend = \"memory\"\n[providers.p]\nkind = \"openai_compatible\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n[policies.default]\nchain = [\"p\"]\n",
    )
    .unwrap();
    let out = run(&["check", "--config", path.to_str().unwrap()]);
    let printed = ok(&out);
    assert!(printed.contains("OK (1 warning(s))"), "{printed}");
    assert!(
        printed.contains("(none: `handover serve` refuses this file"),
        "{printed}"
    );
    assert!(
        stderr(&out).starts_with("warning: ")
            && stderr(&out).contains(
                "no-gateway.toml: no [gateway] section: `handover serve` refuses this file (it needs [gateway] with at least one [gateway.clients.NAME])"
            ),
        "{}",
        stderr(&out)
    );
    let out = serve(&path);
    assert!(!out.status.success(), "served without [gateway]");
    assert!(
        stderr(&out).contains("no [gateway] section: `handover serve` needs one, with at least one client ([gateway.clients.NAME]"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("no-gateway.toml"),
        "the refusal names the file: {}",
        stderr(&out)
    );
}

/// MCP over HTTP knows a caller by its `[gateway.clients.NAME]` token, so
/// `[mcp] listen` without `[gateway]` is an error for `check` (not an OK
/// with a warning), and `handover mcp` refuses it, or an address given with
/// `--listen`, before it listens or says it does.
#[test]
fn mcp_over_http_without_a_gateway_is_refused_by_check_and_before_mcp_listens() {
    let dir = tempfile::tempdir().unwrap();
    let stdio = "[ledger]\nbackend = \"memory\"\n[mcp.servers.up]\ncommand = \"true\"\n";
    let why = "serving MCP over HTTP needs [gateway] with at least one [gateway.clients.NAME] bearer token (they decide each caller's scope)";
    let (err, file) = check_text(
        dir.path(),
        &stdio.replace(
            "[mcp.servers.up]",
            "[mcp]\nlisten = \"127.0.0.1:8790\"\n[mcp.servers.up]",
        ),
    );
    assert!(err.contains(&format!("{file}: mcp.listen: {why}")), "{err}");
    assert!(!err.contains("warning"), "{err}");
    let out = run(&["mcp", "--config", &file]);
    let err = failed(&out);
    assert!(err.contains(&format!("mcp.listen: {why}")), "{err}");
    assert!(!err.contains("listening"), "{err}");

    // Without listen the file is fine (stdio); --listen is refused alike.
    let path = dir.path().join("stdio.toml");
    std::fs::write(&path, stdio).unwrap();
    ok(&run(&["check", "--config", path.to_str().unwrap()]));
    let out = run(&[
        "mcp",
        "--config",
        path.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ]);
    let err = failed(&out);
    assert!(err.contains(why), "{err}");
    assert!(!err.contains("listening"), "{err}");
}

/// A declared HTTP lookup without `match` confirms an operation from any
/// record found under its destination key: valid, but `check` says what
/// it means and what to add; with `match` it says nothing.
#[test]
fn check_warns_about_an_http_lookup_that_matches_no_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lookup.toml");
    let base = "[ledger]\nbackend = \"memory\"\n[providers.p]\nkind = \"openai_compatible\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n[policies.default]\nchain = [\"p\"]\n[gateway]\n[gateway.clients.a]\ntoken_sha256 = \"e0b107f9f96f69a2b6165a2ac7ae551643a4240881e2c14a01e8e9a56212a39a\"\nscope = \"a\"\n[actions.lk.lookup]\nvisibility_lag = \"5s\"\nurl = \"http://127.0.0.1:9/records?key={destination_key}\"\n";
    std::fs::write(&path, base).unwrap();
    let out = run(&["check", "--config", path.to_str().unwrap()]);
    assert!(ok(&out).contains("OK (1 warning(s))"), "{}", ok(&out));
    let err = stderr(&out);
    assert!(
        err.contains("lookup.toml: actions.lk.lookup: no `match` fields: any record the lookup finds under the destination key confirms the operation")
            && err.contains("add [actions.lk.lookup.match]"),
        "{err}"
    );

    std::fs::write(
        &path,
        format!("{base}[actions.lk.lookup.match]\norder = \"/order\"\n"),
    )
    .unwrap();
    let out = run(&["check", "--config", path.to_str().unwrap()]);
    assert!(!ok(&out).contains("warning"), "{}", ok(&out));
    assert!(!stderr(&out).contains("match"), "{}", stderr(&out));
}
