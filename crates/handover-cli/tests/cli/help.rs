//! Every command has `--help` with an example.

use crate::support;

use support::*;

#[test]
fn every_command_has_help_with_an_example() {
    for args in [
        vec!["demo"],
        vec!["check"],
        vec!["chat"],
        vec!["ops", "list"],
        vec!["ops", "show"],
        vec!["ops", "resolve"],
        vec!["ops", "purge"],
    ] {
        let mut full = args.clone();
        full.push("--help");
        let out = ok(&run(&full));
        assert!(
            out.contains("Example"),
            "{args:?} --help has no example:\n{out}"
        );
    }
    let out = ok(&run(&["--help"]));
    assert!(out.contains("handover demo"), "{out}");
}
