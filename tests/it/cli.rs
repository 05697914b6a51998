//! The `dagexec` binary end to end: real plan files in real git repositories in temp dirs,
//! the exact stdout/stderr a user sees (insta snapshots), and the exit codes.

use std::path::Path;

use crate::common;
use common::{dagexec, git, manifest};

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(dir: &Path, args: &[&str]) -> Output {
    let o = dagexec(dir).args(args).output().expect("dagexec runs");
    Output {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr: String::from_utf8(o.stderr).unwrap(),
    }
}

/// A committed repository whose `.design/plan.json` is `plan_text`.
fn repo_with_plan(plan_text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".design")).unwrap();
    std::fs::write(dir.path().join(".design/plan.json"), plan_text).unwrap();
    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "plan"]);
    dir
}

fn example(name: &str) -> String {
    std::fs::read_to_string(manifest().join("examples").join(name)).unwrap()
}

#[test]
fn every_bad_plan_gets_its_error() {
    let dir = manifest().join("tests/fixtures/bad");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names.len(), 6);
    for name in names {
        let name = name.to_string_lossy().to_string();
        let out = run(&dir, &["validate", "--no-checks", "--plan", &name]);
        assert_eq!(out.code, 2, "{name}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{name} printed to stdout");
        insta::assert_snapshot!(name.clone(), out.stderr);
        // Every command refuses a broken plan the same way.
        for cmd in [&["status"][..], &["graph"], &["prompt", "0"]] {
            let other = run(&dir, &[cmd, &["--plan", &name]].concat());
            assert_eq!(
                (other.code, other.stderr.as_str()),
                (2, out.stderr.as_str()),
                "{name} {cmd:?}"
            );
        }
    }
}

#[test]
fn no_plan_says_how_to_make_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["validate"]);
    assert_eq!(out.code, 2);
    assert_eq!(
        out.stderr,
        "error: No plan found at .design/plan.json\n  hint: Run /design <goal> first, or pass --plan PATH to use a plan elsewhere.\n"
    );
}

#[test]
fn validate_report_and_json_on_examples() {
    for name in [
        "auth-v2.json",
        "auth-v3.json",
        "auth-v2-waves.json",
        "random-40-v2.json",
    ] {
        let repo = repo_with_plan(&example(name));
        let human = run(repo.path(), &["validate", "--no-checks"]);
        assert_eq!(human.code, 0, "{name}: {}", human.stderr);
        insta::assert_snapshot!(format!("validate_{name}"), human.stdout);
        let json = run(repo.path(), &["validate", "--no-checks", "--json"]);
        assert_eq!(json.code, 0);
        assert_eq!(json.stdout.lines().count(), 1, "one JSON line");
        let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "goal",
                "contextSummary",
                "isResume",
                "validation",
                "taskIdMapping",
                "fileOverlapMatrix",
                "taskCount",
                "maxDepth",
                "depthSummary"
            ]
        );
        insta::assert_json_snapshot!(format!("setup_{name}"), v);
    }
}

#[test]
fn blocking_checks_run_and_fail_with_exit_1() {
    let mut plan: serde_json::Value = serde_json::from_str(&example("auth-v2.json")).unwrap();
    plan["tasks"][0]["agent"]["assumptions"] = serde_json::json!([
        {"claim": "shell works", "verify": "echo yes", "severity": "blocking"},
        {"claim": "tool present", "verify": "echo 'tool: not found' >&2; exit 127", "severity": "blocking"},
        {"claim": "only a warning", "verify": "exit 1", "severity": "warning"}
    ]);
    plan["tasks"][1]["agent"]["assumptions"] = serde_json::json!([]);
    let repo = repo_with_plan(&serde_json::to_string_pretty(&plan).unwrap());
    std::fs::create_dir_all(repo.path().join("prisma")).unwrap();
    std::fs::write(repo.path().join("prisma/schema.prisma"), "").unwrap();
    std::fs::write(repo.path().join("untracked.txt"), "").unwrap();
    let out = run(repo.path(), &["validate"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    insta::assert_snapshot!(out.stdout);
    let json = run(repo.path(), &["validate", "--json"]);
    assert_eq!(json.code, 1);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        v["validation"],
        serde_json::json!({
            "gitClean": false,
            "gitStatus": "?? prisma/\n?? untracked.txt",
            "blockingChecks": [
                {"claim": "shell works", "passed": true, "output": "yes"},
                {"claim": "tool present", "passed": false, "output": "tool: not found"}
            ],
            "contextFilesValid": false,
            "missingContextFiles": ["src/auth/password.ts", "src/middleware.ts"]
        })
    );
}

#[test]
fn a_hanging_check_times_out() {
    let mut plan: serde_json::Value = serde_json::from_str(&example("auth-v2.json")).unwrap();
    for t in plan["tasks"].as_array_mut().unwrap() {
        t["agent"]["assumptions"] = serde_json::json!([]);
    }
    plan["tasks"][3]["agent"]["assumptions"] =
        serde_json::json!([{"claim": "hangs", "verify": "sleep 30", "severity": "blocking"}]);
    let repo = repo_with_plan(&serde_json::to_string(&plan).unwrap());
    let start = std::time::Instant::now();
    let out = run(
        repo.path(),
        &["validate", "--json", "--check-timeout", "500ms"],
    );
    assert_eq!(out.code, 1);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        v["validation"]["blockingChecks"][0]["output"],
        "timed out after 500ms"
    );
    assert!(start.elapsed().as_secs() < 20);
}

#[test]
fn resume_is_detected_and_nothing_to_do_is_said() {
    let mut plan: serde_json::Value = serde_json::from_str(&example("auth-v2.json")).unwrap();
    for t in plan["tasks"].as_array_mut().unwrap() {
        t["status"] = "completed".into();
    }
    plan["tasks"][4]["status"] = "failed".into();
    let repo = repo_with_plan(&serde_json::to_string(&plan).unwrap());
    let out = run(repo.path(), &["validate", "--no-checks"]);
    assert!(
        out.stdout
            .contains("Resuming execution.\nAll tasks are already resolved — nothing to do.\n"),
        "{}",
        out.stdout
    );
    let json = run(repo.path(), &["validate", "--no-checks", "--json"]);
    assert!(json.stdout.contains("\"isResume\":true"));
}

/// Scheduling by file locks and the streamed matrix print the very bytes the pairwise matrix
/// did: the outputs in tests/fixtures/scale were written by dagexec before the change (see
/// regen.sh there), on plans with every task on one file, with many shared files, and a v3
/// plan whose `fileOverlaps` miss conflicts.
#[test]
fn outputs_match_the_matrix_based_ones_byte_for_byte() {
    let dir = manifest().join("tests/fixtures/scale");
    for name in ["hot-120", "mixed-150", "v3-missed-80"] {
        let repo =
            repo_with_plan(&std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap());
        let cases: [(&str, &[&str]); 5] = [
            ("validate-json", &["validate", "--no-checks", "--json"]),
            ("validate", &["validate", "--no-checks"]),
            (
                "dry-run-rounds",
                &["run", "--dry-run", "--schedule", "rounds"],
            ),
            (
                "dry-run-eager",
                &["run", "--dry-run", "--schedule", "eager"],
            ),
            (
                "dry-run-waves",
                &["run", "--dry-run", "--schedule", "waves"],
            ),
        ];
        for (case, args) in cases {
            let out = run(repo.path(), args);
            let want = std::fs::read_to_string(dir.join(format!("{name}.{case}.out"))).unwrap();
            // regen.sh kept stderr and stdout together; each case writes to one of them.
            let got = format!("{}{}", out.stderr, out.stdout);
            assert!(got == want, "{name} {case} differs:\n{got}");
        }
    }
}

#[test]
fn v3_warns_about_overlaps_the_plan_missed() {
    let mut plan: serde_json::Value = serde_json::from_str(&example("auth-v3.json")).unwrap();
    for t in plan["tasks"].as_array_mut().unwrap() {
        t["fileOverlaps"] = serde_json::json!([]);
    }
    let repo = repo_with_plan(&serde_json::to_string(&plan).unwrap());
    let out = run(repo.path(), &["validate", "--no-checks", "--json"]);
    assert_eq!(out.code, 0);
    assert!(
        out.stdout.contains("\"fileOverlapMatrix\":{}"),
        "the plan's own matrix is reported"
    );
    assert_eq!(
        out.stderr,
        "warning: the plan's fileOverlaps miss 2 conflict(s) dagexec found (first: 1 ↔ 3); they will not run at the same time either\n"
    );
    let human = run(repo.path(), &["validate", "--no-checks"]);
    assert!(
        human.stdout.contains(
            "Warning: the plan's fileOverlaps miss conflicts dagexec found: 1 ↔ 3, 2 ↔ 3"
        )
    );
}

#[test]
fn prompt_command() {
    let mut plan: serde_json::Value = serde_json::from_str(&example("auth-v2.json")).unwrap();
    plan["tasks"][0]["status"] = "completed".into();
    plan["tasks"][0]["result"] = "User model with unique email".into();
    let repo = repo_with_plan(&serde_json::to_string(&plan).unwrap());
    let out = run(repo.path(), &["prompt", "3"]);
    assert_eq!(out.code, 0);
    assert!(out.stdout.contains(
        "Dependency results (from prior tasks):\n- Task 0: User model with unique email\n"
    ));
    let raw = run(repo.path(), &["prompt", "3", "--raw"]);
    assert!(
        raw.stdout
            .contains("[Dependency results — deferred: lead appends actual results at spawn time]")
    );
    let bad = run(repo.path(), &["prompt", "6"]);
    assert_eq!(bad.code, 2);
    assert_eq!(
        bad.stderr,
        "error: no task \"6\": the plan's tasks are numbered 0 to 5\n  hint: `dagexec status` lists the tasks and where each stands\n"
    );
    let v3 = repo_with_plan(&example("auth-v3.json"));
    let out = run(v3.path(), &["prompt", "0"]);
    assert!(
        out.stdout
            .starts_with("You are a backend engineer.\n\n## Task: Create user model\n")
    );
}

#[test]
fn help_teaches() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["--help"]);
    assert_eq!(out.code, 0);
    insta::assert_snapshot!("help", out.stdout);
    let out = run(dir.path(), &["validate", "--help"]);
    insta::assert_snapshot!("help_validate", out.stdout);
    let out = run(dir.path(), &["run", "--help"]);
    insta::assert_snapshot!("help_run", out.stdout);
    let out = run(dir.path(), &["frobnicate"]);
    assert_eq!(out.code, 2);
}

/// One exit-code table (`dagexec::cli::Exit`): `run --help` and the guide's command table
/// give every code in it, and no other.
#[test]
fn the_exit_codes_taught_are_the_exit_code_table() {
    use dagexec::cli::Exit;
    let dir = tempfile::tempdir().unwrap();
    let help = run(dir.path(), &["run", "--help"]).stdout;
    let help = help
        .split("Exit status:")
        .nth(1)
        .expect("run --help has Exit status:");
    let guide = std::fs::read_to_string(manifest().join("docs/src/commands.md")).unwrap();
    let row = guide
        .lines()
        .find(|l| l.starts_with("| `dagexec run "))
        .expect("the guide's row for run");
    let exit = row.rsplit('|').nth(1).unwrap();
    let codes = |text: &str, sep: &str| -> Vec<u8> {
        text.split(sep)
            .filter_map(|part| part.split_whitespace().next()?.parse().ok())
            .collect()
    };
    let table: Vec<u8> = Exit::TABLE.iter().map(|(_, code, _)| *code).collect();
    let in_help: Vec<u8> = codes(&help.split("\n\n").next().unwrap().replace('\n', " "), ";")
        .into_iter()
        .collect();
    assert_eq!(in_help, table, "run --help: {help}");
    assert_eq!(codes(exit, "·"), table, "docs/src/commands.md: {exit}");
}

#[test]
fn status_and_graph_show_a_run_in_progress() {
    let mut plan: serde_json::Value = serde_json::from_str(&example("auth-v2.json")).unwrap();
    plan["tasks"][0]["status"] = "completed".into();
    plan["tasks"][0]["result"] = "User model added".into();
    plan["tasks"][0]["attempts"] = 1.into();
    plan["tasks"][1]["status"] = "failed".into();
    plan["tasks"][1]["result"] = "bcrypt needs a native toolchain".into();
    plan["tasks"][1]["attempts"] = 3.into();
    plan["tasks"][2]["status"] = "skipped".into();
    plan["tasks"][2]["result"] =
        "Skipped: dependency task 1 (Add password hashing helper) failed".into();
    let repo = repo_with_plan(&serde_json::to_string(&plan).unwrap());
    let table = run(repo.path(), &["status"]);
    assert_eq!(table.code, 0);
    insta::assert_snapshot!("status_table", table.stdout);
    let json = run(repo.path(), &["status", "--json"]);
    let rows: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        rows[1],
        serde_json::json!({"index": 1, "subject": "Add password hashing helper", "status": "failed", "attempts": 3, "result": "bcrypt needs a native toolchain"})
    );
    assert_eq!(rows[3]["result"], serde_json::Value::Null);
    let mermaid = run(repo.path(), &["graph"]);
    assert_eq!(mermaid.code, 0);
    assert!(mermaid.stdout.starts_with("flowchart TD\n"));
    assert!(mermaid.stdout.contains("class t1 failed"));
    let dot = run(repo.path(), &["graph", "--format", "dot"]);
    assert!(dot.stdout.starts_with("digraph plan {"));
    assert!(dot.stdout.contains("t0 -> t2"));
    let bad = run(repo.path(), &["graph", "--format", "png"]);
    assert_eq!(bad.code, 2);
}

#[test]
fn a_bad_duration_names_its_flag_and_shows_examples() {
    let dir = tempfile::tempdir().unwrap();
    for (args, flag) in [
        (
            &["validate", "--check-timeout", "5x"][..],
            "--check-timeout",
        ),
        (&["run", "--timeout", "soon"][..], "--timeout"),
        (
            &["action", "plan", "--timeout", "1 fortnight"][..],
            "--timeout",
        ),
    ] {
        let out = run(dir.path(), args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(flag), "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("examples: 30s, 5m, 1h30m"),
            "{args:?}: {}",
            out.stderr
        );
    }
}

/// `--plan ../elsewhere/plan.json` names a plan outside the project: `run` and `init` refuse
/// it before anything runs (no worker spent, no workflow naming `../`), as they refuse an
/// absolute path outside it.
#[test]
fn a_plan_up_the_tree_is_outside_the_project() {
    let top = tempfile::tempdir().unwrap();
    let (project, elsewhere) = (top.path().join("project"), top.path().join("elsewhere"));
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let plan = r#"{"schemaVersion": 2, "goal": "g", "tasks": [{"subject": "s", "description": "d", "files": {"create": ["x.txt"]}}]}"#;
    std::fs::write(elsewhere.join("plan.json"), plan).unwrap();
    git(&project, &["init", "-q"]);
    git(&project, &["commit", "-q", "--allow-empty", "-m", "start"]);
    let marker = top.path().join("worker-ran");
    let worker = format!("touch '{}'; echo 'COMPLETED: done'", marker.display());
    for args in [
        &[
            "--plan",
            "../elsewhere/plan.json",
            "run",
            "--worker",
            &worker,
        ][..],
        &[
            "--plan",
            "../elsewhere/plan.json",
            "init",
            "--worker",
            "claude",
        ][..],
    ] {
        let out = run(&project, args);
        assert_eq!(out.code, 2, "{args:?}: {}{}", out.stdout, out.stderr);
        assert!(
            out.stderr
                .contains("../elsewhere/plan.json is outside the project directory"),
            "{args:?}: {}",
            out.stderr
        );
    }
    assert!(
        !marker.exists(),
        "no worker runs for a plan outside the project"
    );
    assert!(!project.join(".github").exists(), "no workflow is written");
}
