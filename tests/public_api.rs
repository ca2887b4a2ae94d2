//! The public surface of every library crate, kept in `docs/public-api.txt`
//! so that changing it is a deliberate act (issue 13: "keep a list in the
//! repo so changes to the surface are deliberate").
//!
//! Stable Rust has no rustdoc JSON, so this reads the sources: from each
//! crate's `lib.rs` it follows `pub mod` declarations and lists every
//! top-level `pub` item (`pub(crate)` and anything indented, such as
//! methods, are not part of it) and every `pub use`. When the list differs,
//! the test fails with the difference; after a deliberate change, rewrite
//! the file with `HANDOVER_BLESS=1 cargo test --test public_api`.

use std::path::{Path, PathBuf};

const CRATES: &[(&str, &str)] = &[
    ("handover", "src/lib.rs"),
    ("handover_ledger", "crates/handover-ledger/src/lib.rs"),
    ("handover_providers", "crates/handover-providers/src/lib.rs"),
    ("handover_router", "crates/handover-router/src/lib.rs"),
    ("handover_gateway", "crates/handover-gateway/src/lib.rs"),
    ("handover_mcp", "crates/handover-mcp/src/lib.rs"),
    ("handover_testkit", "crates/handover-testkit/src/lib.rs"),
];

const KINDS: &[&str] = &[
    "async fn", "fn", "struct", "enum", "trait", "type", "const", "static", "mod", "use",
];

/// Where `mod name;` declared in `file` lives.
fn child_file(file: &Path, name: &str) -> PathBuf {
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let dir = if stem == "lib" || stem == "mod" {
        file.parent().unwrap().to_path_buf()
    } else {
        file.with_extension("")
    };
    let flat = dir.join(format!("{name}.rs"));
    if flat.exists() {
        flat
    } else {
        dir.join(name).join("mod.rs")
    }
}

/// Appends the public items of the module in `file` (path `path`) to `out`.
fn surface(file: &Path, path: &str, out: &mut Vec<String>) {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.strip_prefix("pub ") else {
            continue;
        };
        let Some(kind) = KINDS
            .iter()
            .find(|k| rest.strip_prefix(**k).is_some_and(|r| r.starts_with(' ')))
        else {
            continue;
        };
        let after = rest[kind.len()..].trim_start();
        if *kind == "use" {
            let mut statement = after.to_owned();
            while !statement.contains(';') {
                match lines.next() {
                    Some(next) => {
                        statement.push(' ');
                        statement.push_str(next.trim());
                    }
                    None => break,
                }
            }
            let statement: String = statement.split_whitespace().collect::<Vec<_>>().join(" ");
            let statement = statement
                .trim_end_matches(';')
                .replace(", }", " }")
                .replace("{ ", "{")
                .replace(" }", "}");
            out.push(format!("{path} use {statement}"));
            continue;
        }
        let name: String = after
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        out.push(format!("{path} {kind} {name}"));
        if *kind == "mod" && after.trim_end().ends_with(';') {
            surface(&child_file(file, &name), &format!("{path}::{name}"), out);
        }
    }
}

#[test]
fn the_public_surface_is_the_recorded_one() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut items = Vec::new();
    for (name, lib) in CRATES {
        surface(&root.join(lib), name, &mut items);
    }
    let actual = items.join("\n") + "\n";
    let list = root.join("docs/public-api.txt");
    if std::env::var_os("HANDOVER_BLESS").is_some() {
        std::fs::write(&list, &actual).unwrap();
        return;
    }
    let recorded = std::fs::read_to_string(&list).unwrap_or_default();
    if recorded != actual {
        let old: Vec<&str> = recorded.lines().collect();
        let new: Vec<&str> = actual.lines().collect();
        let added: Vec<_> = new.iter().filter(|l| !old.contains(l)).collect();
        let removed: Vec<_> = old.iter().filter(|l| !new.contains(l)).collect();
        panic!(
            "the public API changed; if that is deliberate, run \
             `HANDOVER_BLESS=1 cargo test --test public_api` and commit docs/public-api.txt\n\
             added: {added:#?}\nremoved: {removed:#?}"
        );
    }
}
