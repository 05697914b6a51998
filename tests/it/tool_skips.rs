//! Tests that need an outside program (act, the agent CLIs, Taskmaster's CLI) are skipped by a
//! plain `cargo test` on a machine without it, with a note naming how to install it, and fail
//! under `DAGEXEC_REQUIRE_TOOLS=1` (`.ci/run`). Each case runs one such test of this very
//! binary in a child process with no tools installed (an empty tool prefix, a PATH without
//! them); the skip returns before the test starts anything else.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::text;

/// `test` of this binary, alone, with an empty tool prefix and PATH, and `require` for
/// `DAGEXEC_REQUIRE_TOOLS`.
fn without_tools(test: &str, require: Option<&str>) -> Output {
    let empty = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--test-threads", "1"])
        .env("PATH", empty.path())
        .env("DAGEXEC_TOOLS_DIR", empty.path())
        .env("DAGEXEC_AGENTS_BIN", empty.path().join("bin"))
        .env_remove("DAGEXEC_SKIP_REAL_AGENTS")
        .env_remove("DAGEXEC_REQUIRE_TOOLS");
    if let Some(v) = require {
        cmd.env("DAGEXEC_REQUIRE_TOOLS", v);
    }
    let out = cmd.output().unwrap();
    assert!(Path::new(empty.path()).read_dir().unwrap().next().is_none());
    out
}

/// (test, the note's program, its install hint)
const CASES: &[(&str, &str, &str)] = &[
    (
        "action::a_circuit_breaker_fails_the_run_with_a_check_run",
        "act is not installed",
        "`source .ci/install-tools.sh`",
    ),
    (
        "real_agents::claude_completes_a_plan_with_its_spend",
        "claude, codex, gemini",
        "`bash .ci/install-agents.sh`",
    ),
    (
        "taskmaster_cli::taskmaster_reads_what_dagexec_writes_and_dagexec_honours_its_set_status",
        "task-master",
        "`bash .ci/install-agents.sh`",
    ),
];

#[test]
fn a_test_whose_program_is_missing_is_skipped_with_how_to_install_it() {
    for (test, what, install) in CASES {
        let out = without_tools(test, None);
        let log = text(&out);
        assert!(out.status.success(), "{test}:\n{log}");
        assert!(log.contains("1 passed"), "{test} ran:\n{log}");
        let note = log
            .lines()
            .find(|l| l.starts_with("note: ") && l.contains("skipped"))
            .unwrap_or_else(|| panic!("{test}: no note of the skip:\n{log}"));
        assert!(
            note.contains(what)
                && note.contains(install)
                && note.contains("DAGEXEC_REQUIRE_TOOLS=1"),
            "{test}: {note}"
        );
    }
}

#[test]
fn under_dagexec_require_tools_a_missing_program_fails_the_test() {
    for (test, what, install) in CASES {
        let out = without_tools(test, Some("1"));
        let log = text(&out);
        assert!(!out.status.success(), "{test} passed:\n{log}");
        assert!(log.contains("1 failed"), "{test}:\n{log}");
        assert!(
            log.contains(what) && log.contains(install) && log.contains("may not be skipped"),
            "{test}:\n{log}"
        );
    }
}
