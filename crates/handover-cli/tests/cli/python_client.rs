//! The Python client (`clients/python`) against the real `handover serve`:
//! its pytest suite starts this very binary on a SQLite file and on
//! PostgreSQL, with a real HTTP destination that counts effects.
//!
//! The interpreter comes from `HANDOVER_TEST_PYTHON` (a virtualenv with
//! `tests/python/requirements.txt` and `clients/python` installed; `.ci/run`
//! makes it). Unset, the test says it was skipped; set, pytest must pass.
//! `HANDOVER_TEST_POSTGRES_URL` is passed on: the PostgreSQL cases run when
//! it is set and fail when it is set but unreachable.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The whole suite takes well under a minute; this bounds a hang.
const DEADLINE: Duration = Duration::from_secs(600);

#[test]
fn the_python_client_suite_passes_against_the_real_binary() {
    let Ok(python) = std::env::var("HANDOVER_TEST_PYTHON") else {
        println!("SKIPPED: set HANDOVER_TEST_PYTHON to a python with clients/python installed");
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let child = Command::new(&python)
        .current_dir(&root)
        .args([
            "-m",
            "pytest",
            "clients/python/tests",
            "-q",
            "-p",
            "no:cacheprovider",
        ])
        .env("HANDOVER_BIN", env!("CARGO_BIN_EXE_handover"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("HANDOVER_TEST_PYTHON={python} cannot run: {e}"));
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(DEADLINE) {
        Ok(out) => out.expect("wait for pytest"),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("pytest did not finish within {DEADLINE:?}");
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the Python client suite failed ({}); install it with \
         `{python} -m pip install -r tests/python/requirements.txt -e clients/python`:\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{stdout}");
}
