//! A newcomer's first hour (issue 33), as they meet it: `init` writes the plan they have and
//! warns about what would not work on GitHub, a worker's name means one command everywhere,
//! `run` says where it commits (and `--branch` puts the rounds on a new branch), what `run`
//! says after the end or between two task lists, `validate` and `init` outside a repository,
//! a very long cycle, and the guide's first plan run as written.

use std::path::Path;

use crate::common;
use crate::common::local::{exec, local, simple_plan};

use common::{commit_new, git, manifest, write_files};

fn workflow(dir: &Path) -> serde_yaml::Value {
    let text = std::fs::read_to_string(dir.join(".github/workflows/dagexec.yml")).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

fn plan_input(wf: &serde_yaml::Value) -> String {
    wf["on"]["workflow_dispatch"]["inputs"]["plan"]["default"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The plan of the `/execute` jobs (a comment's run has no dispatch inputs).
fn steering_plan(wf: &serde_yaml::Value, job: &str) -> Option<String> {
    wf["jobs"][job]["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|s| s["with"]["command"].as_str() == Some(job))
        .and_then(|s| s["with"]["plan"].as_str().map(str::to_string))
}

const TASKMASTER: &str = r#"{"tasks": [{"id": 1, "title": "One", "description": "d", "status": "pending", "dependencies": []}]}"#;

#[test]
fn init_writes_the_plan_the_user_has() {
    // `--plan` names it.
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), [(".taskmaster/tasks/tasks.json", TASKMASTER)]);
    commit_new(dir.path());
    let out = exec(
        dir.path(),
        &[
            "--plan",
            ".taskmaster/tasks/tasks.json",
            "init",
            "--worker",
            "claude",
        ],
    );
    assert_eq!(out.code(), Some(0), "{}", out.text());
    let wf = workflow(dir.path());
    assert_eq!(plan_input(&wf), ".taskmaster/tasks/tasks.json");
    for job in ["comment", "steer"] {
        assert_eq!(
            steering_plan(&wf, job).as_deref(),
            Some(".taskmaster/tasks/tasks.json"),
            "{job}"
        );
    }
    assert!(out.stdout().contains("plan .taskmaster/tasks/tasks.json"));

    // Without `--plan`: the one task list `run` finds by itself.
    let out = exec(dir.path(), &["init", "--worker", "claude", "--force"]);
    assert_eq!(out.code(), Some(0), "{}", out.text());
    assert_eq!(
        plan_input(&workflow(dir.path())),
        ".taskmaster/tasks/tasks.json"
    );

    // A repository with a plan.json keeps the default, and the `/execute` jobs theirs.
    let plain = common::repo(&simple_plan(&[("a", &[], &["a.txt"], &[])]), &[]);
    let out = exec(plain.path(), &["init", "--worker", "claude"]);
    assert_eq!(out.code(), Some(0), "{}", out.text());
    let wf = workflow(plain.path());
    assert_eq!(plan_input(&wf), ".design/plan.json");
    assert_eq!(steering_plan(&wf, "comment"), None);
}

#[test]
fn init_warns_about_what_would_not_work_on_github() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    // A path of this machine in the worker.
    let out = exec(
        dir.path(),
        &[
            "init",
            "--stdout",
            "--worker",
            "/home/me/worker.sh --fast",
            "--action",
            "acme/dagexec@v1",
        ],
    );
    assert_eq!(out.code(), Some(0), "{}", out.text());
    let err = out.stderr();
    assert!(
        err.contains("warning: --worker names /home/me/worker.sh, a path on this machine"),
        "{err}"
    );
    assert!(err.contains("./scripts/worker.sh"), "{err}");
    assert!(!err.contains("placeholder"), "{err}");
    assert!(out.stdout().contains("uses: acme/dagexec@v1\n"));

    // The placeholder repository of the Cargo metadata, by default or named.
    let out = exec(dir.path(), &["init", "--stdout", "--worker", "claude"]);
    assert_eq!(out.code(), Some(0), "{}", out.text());
    let err = out.stderr();
    assert!(
        err.contains("the placeholder repository of dagexec's Cargo metadata"),
        "{err}"
    );
    assert!(err.contains("--action OWNER/REPO@REF"), "{err}");
    assert!(!err.contains("a path on this machine"), "{err}");

    // A reference that is not OWNER/REPO@REF is refused with the form.
    for bad in ["dagexec@v1", "acme/dagexec", "acme/@v1", "acme/dagexec@"] {
        let out = exec(
            dir.path(),
            &["init", "--stdout", "--worker", "claude", "--action", bad],
        );
        assert_eq!(out.code(), Some(2), "{bad}: {}", out.text());
        assert!(out.stderr().contains("OWNER/REPO@REF"), "{}", out.stderr());
    }
}

#[test]
fn init_outside_a_repository_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = exec(dir.path(), &["init", "--worker", "claude"]);
    assert_eq!(out.code(), Some(2), "{}", out.text());
    assert!(
        out.stderr().contains("is not in a git repository"),
        "{}",
        out.stderr()
    );
    assert!(!dir.path().join(".github").exists());
}

/// `run --worker claude` runs the command line `init --worker claude` writes.
#[test]
fn a_worker_name_means_what_init_writes() {
    let dir = common::repo(&simple_plan(&[("a", &[], &["a.txt"], &[])]), &[]);
    let bin = tempfile::tempdir().unwrap();
    let seen = bin.path().join("args");
    write_files(
        bin.path(),
        [(
            "claude",
            format!(
                "#!/bin/sh\necho \"$@\" > '{}'\ncat > /dev/null\necho a > a.txt\necho 'COMPLETED: ok'\n",
                seen.display()
            ),
        )],
    );
    std::process::Command::new("chmod")
        .args(["+x", bin.path().join("claude").to_str().unwrap()])
        .status()
        .unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = local(dir.path()).worker("claude").env("PATH", path).run();
    let args = std::fs::read_to_string(&seen).unwrap_or_else(|_| panic!("{}", o.text()));
    assert_eq!(
        args.trim(),
        "-p --output-format json --permission-mode acceptEdits",
        "{}",
        o.text()
    );
}

/// Before the first round `run` says which branch the rounds go on; `--branch NAME` makes that
/// a new branch from HEAD (the old one keeps its commit), and refuses a name in use.
#[test]
fn run_says_where_it_commits_and_branch_starts_a_new_one() {
    let plan = simple_plan(&[("a", &[], &["a.txt"], &[])]);
    let script = "cat > /dev/null; echo a > a.txt; echo 'COMPLETED: ok'";

    let here = common::repo(&plan, &[]);
    let o = local(here.path()).script(script).run();
    let out = o.expect_code(0);
    let said = out
        .find(
            "Committing rounds on main (the current branch; --branch NAME puts them on a new one).",
        )
        .unwrap_or_else(|| panic!("{out}"));
    assert!(said < out.find("Round 1").unwrap(), "{out}");

    let dir = common::repo(&plan, &[]);
    let start = git(dir.path(), &["rev-parse", "HEAD"]);
    let o = local(dir.path())
        .script(script)
        .args(["--branch", "dagexec/hello"])
        .run();
    let out = o.expect_code(0);
    assert!(
        out.contains(
            "Committing rounds on dagexec/hello, a new branch from main (now checked out)."
        ),
        "{out}"
    );
    assert_eq!(
        git(dir.path(), &["symbolic-ref", "--short", "HEAD"]).trim(),
        "dagexec/hello"
    );
    assert_eq!(git(dir.path(), &["rev-parse", "main"]), start, "main stays");
    let log = git(dir.path(), &["log", "--format=%s", "main..dagexec/hello"]);
    assert!(log.contains("dagexec: round 1"), "{log}");

    // A name in use: refused before anything runs, with the fix.
    let again = common::repo(&plan, &[]);
    git(again.path(), &["branch", "taken"]);
    let o = local(again.path())
        .script(script)
        .args(["--branch", "taken"])
        .run();
    assert_eq!(o.code(), Some(2), "{}", o.text());
    let err = o.stderr();
    assert!(
        err.contains("--branch \"taken\": the branch taken exists already"),
        "{err}"
    );
    assert!(err.contains("git switch taken"), "{err}");
    assert!(!o.stdout().contains("Round 1"), "{}", o.stdout());
    assert_eq!(
        git(again.path(), &["symbolic-ref", "--short", "HEAD"]).trim(),
        "main"
    );
}

/// The same `run --branch NAME` again after that run was killed — the command in the shell's
/// history — goes on with the run on NAME, which it is on: the branch "exists already" only
/// because the killed run made it. It used to be refused, telling to `git switch` to the
/// branch already checked out.
#[test]
fn the_same_branch_run_again_after_a_kill_goes_on() {
    let plan = simple_plan(&[("a", &[], &["a.txt"], &[]), ("b", &[0], &["b.txt"], &[])]);
    let dir = common::repo(&plan, &[]);
    let start = git(dir.path(), &["rev-parse", "HEAD"]);
    // Task 0's first attempt kills dagexec (the worker's grandparent).
    let script = r#"cat > /dev/null
if [ "$DAGEXEC_TASK_INDEX$DAGEXEC_ATTEMPT" = 01 ]; then kill -9 "$(ps -o ppid= -p $PPID | tr -d ' ')"; sleep 5; exit 0; fi
echo x > "$( [ $DAGEXEC_TASK_INDEX = 0 ] && echo a || echo b).txt"; echo 'COMPLETED: ok'"#;
    let o = local(dir.path())
        .script(script)
        .args(["--branch", "feat"])
        .run();
    assert_eq!(o.code(), None, "killed: {}", o.text());
    let o = local(dir.path())
        .script(script)
        .args(["--branch", "feat"])
        .run();
    let out = o.expect_code(0);
    assert!(
        out.contains("Committing rounds on feat (the current branch, which --branch names)."),
        "{out}"
    );
    assert_eq!(git(dir.path(), &["rev-parse", "main"]), start, "main stays");
    let log = git(dir.path(), &["log", "--format=%s", "main..feat"]);
    assert!(log.contains("all 2 tasks completed"), "{log}");
}

/// `run` after the plan completed: it says so and where the plan is archived, exit 0.
#[test]
fn run_after_the_end_says_the_plan_is_complete() {
    let plan = simple_plan(&[("a", &[], &["a.txt"], &[]), ("b", &[], &["b.txt"], &[])]);
    let dir = common::repo(&plan, &[]);
    let script = "cat > /dev/null; echo x > \"$( [ $DAGEXEC_TASK_INDEX = 0 ] && echo a || echo b).txt\"; echo 'COMPLETED: ok'";
    local(dir.path()).script(script).run().expect_code(0);
    let o = local(dir.path()).script(script).run();
    let out = o.expect_code(0);
    assert_eq!(
        o.stdout(),
        "Nothing to run: the plan is complete. All 2 tasks completed.\n\
         It is archived as .design/plan.done.json; `dagexec status` shows how it went. For a new plan, write .design/plan.json (/design <goal>) and run again.\n",
        "{out}"
    );
}

/// Two task lists and no `--plan`: both listed, and how to choose.
#[test]
fn two_task_lists_are_named_with_how_to_choose() {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        [
            (".taskmaster/tasks/tasks.json", TASKMASTER),
            (
                "specs/001-x/tasks.md",
                "# Tasks\n\n- [ ] T001 Write a.txt\n",
            ),
        ],
    );
    commit_new(dir.path());
    for args in [&["run", "--worker", "true"][..], &["status"], &["init"]] {
        let o = exec(dir.path(), args);
        assert_eq!(o.code(), Some(2), "{args:?}: {}", o.text());
        let err = o.stderr();
        assert!(
            err.contains(
                "  .taskmaster/tasks/tasks.json (Taskmaster)\n  specs/001-x/tasks.md (Spec Kit)\n"
            ),
            "{err}"
        );
        assert!(
            err.contains("dagexec --plan .taskmaster/tasks/tasks.json run"),
            "{err}"
        );
        assert!(!err.contains("No plan found"), "{err}");
    }
}

#[test]
fn validate_outside_a_repository_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        [(
            ".design/plan.json",
            serde_json::to_string(&simple_plan(&[("a", &[], &["a.txt"], &[])])).unwrap(),
        )],
    );
    let o = exec(dir.path(), &["validate"]);
    assert_eq!(o.code(), Some(2), "{}", o.text());
    assert!(
        o.stderr().contains("is not in a git repository"),
        "{}",
        o.stderr()
    );
    assert!(!o.text().contains("fatal:"), "{}", o.text());
}

/// A cycle through 100,000 tasks is a plan error (exit 2) naming it by its ends, not a stack
/// overflow (exit 134).
#[test]
fn a_cycle_of_100000_tasks_is_reported() {
    let n = 100_000;
    let tasks: Vec<serde_json::Value> = (0..n)
        .map(|i| serde_json::json!({"subject": format!("t{i}"), "blockedBy": [(i + 1) % n]}))
        .collect();
    let plan = serde_json::json!({"schemaVersion": 2, "goal": "g", "tasks": tasks});
    let dir = common::repo(&plan, &[]);
    let o = exec(dir.path(), &["validate", "--no-checks"]);
    assert_eq!(
        o.code(),
        Some(2),
        "{}",
        &o.text()[..o.text().len().min(2000)]
    );
    let err = o.stderr();
    assert!(
        err.contains(
            "task 0 blockedBy: cycle: 0 → 1 → 2 → 3 → 4 → 5 → 6 → 7 → 8 → 9 → … → 99991 → 99992 → 99993 → 99994 → 99995 → 99996 → 99997 → 99998 → 99999 → 0 (100000 tasks)"
        ),
        "{}",
        &err[..err.len().min(2000)]
    );
    assert!(err.len() < 2000, "a short message: {} bytes", err.len());
}

/// docs/src/first-plan.md's plan and five-line worker, run as the page says.
#[test]
fn the_guides_first_plan_runs_as_written() {
    let page = std::fs::read_to_string(manifest().join("docs/src/first-plan.md")).unwrap();
    let block = |lang: &str, first: &str| -> String {
        page.split(&format!("```{lang}\n"))
            .skip(1)
            .map(|b| b.split("```").next().unwrap().to_string())
            .find(|b| b.starts_with(first))
            .unwrap_or_else(|| panic!("a ```{lang} block starting {first:?}"))
    };
    let plan = block("json", "{");
    let worker = block("sh", "#!/bin/sh");
    assert!(worker.lines().count() <= 5, "five lines:\n{worker}");
    let commands = block("sh", "git init");
    let run_line = commands
        .lines()
        .find(|l| l.starts_with("dagexec run"))
        .expect("the run command");
    let run_args: Vec<&str> = run_line
        .split('#')
        .next()
        .unwrap()
        .split_whitespace()
        .skip(1)
        .collect();

    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        [
            (".design/plan.json", plan.as_str()),
            ("worker.sh", worker.as_str()),
        ],
    );
    // `git init -q && chmod +x worker.sh && git add -A && git commit -qm …`, with the tests'
    // identity.
    git(dir.path(), &["init", "-q"]);
    std::process::Command::new("chmod")
        .args(["+x", "worker.sh"])
        .current_dir(dir.path())
        .status()
        .unwrap();
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "A first plan"]);

    let v = exec(dir.path(), &["validate"]);
    assert_eq!(v.code(), Some(0), "{}", v.text());
    let o = exec(dir.path(), &run_args);
    let out = o.expect_code(0);
    assert!(out.contains("All 2 tasks completed."), "{out}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("hello.txt")).unwrap(),
        "Hello!\n-- dagexec\n"
    );
    let log = git(dir.path(), &["log", "--format=%s"]);
    assert!(log.starts_with("dagexec: all 2 tasks completed\n"), "{log}");
    assert!(log.contains("dagexec: round 2"), "{log}");
    assert!(
        commands.contains("dagexec: all 2 tasks completed"),
        "the page says what the log shows"
    );
}

/// Every place a message or a help text sends the user — `docs/src/<page>.md` (and its
/// `#section`), `README, "Section"`, a file of the repository — exists.
#[test]
fn every_reference_in_messages_and_help_resolves() {
    let root = manifest();
    let mut files = vec![root.join("action.yml")];
    let mut dirs = vec![root.join("src"), root.join("templates")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs" || x == "yml") {
                files.push(p);
            }
        }
    }
    files.sort();
    let page = regex::Regex::new(r"docs/src/([a-z0-9-]+\.md)(#[a-z0-9-]+)?").unwrap();
    let section =
        regex::Regex::new(r#"(README|SECURITY|ARCHITECTURE)(?:\.md)?, \\?"([^"\\]+)\\?""#).unwrap();
    let slug = |heading: &str| {
        heading
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' | '-' => Some('-'),
                c if c.is_alphanumeric() || c == '_' => Some(c),
                _ => None,
            })
            .collect::<String>()
    };
    let headings = |path: &Path| -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with('#'))
            .map(|l| l.trim_start_matches('#').trim().to_string())
            .collect()
    };
    let mut broken = Vec::new();
    let mut seen = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let rel = f.strip_prefix(&root).unwrap().display().to_string();
        for c in page.captures_iter(&text) {
            seen += 1;
            let path = root.join("docs/src").join(&c[1]);
            if !path.is_file() {
                broken.push(format!("{rel}: {} does not exist", &c[0]));
            } else if let Some(anchor) = c.get(2) {
                let want = &anchor.as_str()[1..];
                if !headings(&path).iter().any(|h| slug(h) == want) {
                    broken.push(format!("{rel}: {} has no such section", &c[0]));
                }
            }
        }
        for c in section.captures_iter(&text) {
            seen += 1;
            let path = root.join(format!("{}.md", &c[1]));
            if !headings(&path).iter().any(|h| h == &c[2]) {
                broken.push(format!("{rel}: {} has no section {:?}", &c[1], &c[2]));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "references that lead nowhere:\n{}",
        broken.join("\n")
    );
    assert!(seen >= 4, "the references are found ({seen})");
}
