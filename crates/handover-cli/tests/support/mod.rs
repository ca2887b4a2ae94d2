//! Running the real `handover` binary as a user would.

#![allow(dead_code, unreachable_pub)]

use std::path::Path;
use std::process::{Command, Output};

/// The binary under test.
pub fn handover() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_handover"));
    cmd.env("NO_COLOR", "1");
    cmd
}

/// Runs `handover ARGS` in `dir` and returns its output.
pub fn run_in(dir: &Path, args: &[&str]) -> Output {
    handover()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run the handover binary")
}

/// Runs `handover ARGS` in the current directory.
pub fn run(args: &[&str]) -> Output {
    handover()
        .args(args)
        .output()
        .expect("run the handover binary")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts success and returns stdout.
pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "expected success, got {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        stdout(o),
        stderr(o)
    );
    stdout(o)
}

/// Asserts failure and returns stderr.
pub fn failed(o: &Output) -> String {
    assert!(
        !o.status.success(),
        "expected failure\nstdout:\n{}\nstderr:\n{}",
        stdout(o),
        stderr(o)
    );
    stderr(o)
}
