//! `dagexec demo`: a real run with no API key. A small repository and plan (embedded from
//! `examples/demo/`) are written to a new directory, committed, and executed by a bundled
//! scripted worker that follows the worker contract — parallel rounds, a retry, two tasks
//! sharing a file run one after another inside a round, and one commit per round to review
//! with `git log`.

use std::path::PathBuf;
use std::time::Duration;

use crate::edge::git::run_in;
use crate::flow::{RunEnd, RunError, RunOptions, Settings, Ui, cannot_write};
use crate::pure::engine::Schedule;

const FILES: &[(&str, &str)] = &[
    (
        "README.md",
        include_str!("../../examples/demo/repo/README.md"),
    ),
    (
        "CHANGELOG.md",
        include_str!("../../examples/demo/repo/CHANGELOG.md"),
    ),
    (
        "src/app.txt",
        include_str!("../../examples/demo/repo/src/app.txt"),
    ),
    (
        ".design/plan.json",
        include_str!("../../examples/demo/plan.json"),
    ),
];
const WORKER: &str = include_str!("../../examples/demo/worker.sh");

/// Writes the demo into `dir` (a new directory; a temporary one when `None`) and runs it.
pub fn demo(dir: Option<PathBuf>, jobs: usize, ui: &Ui) -> Result<RunEnd, RunError> {
    let top = match dir {
        Some(d) => {
            if d.exists() && d.read_dir().map_or(true, |mut e| e.next().is_some()) {
                return Err(RunError::Other(format!(
                    "{} exists and is not empty; give the demo a new directory",
                    d.display()
                )));
            }
            // A new directory may be several levels deep; the user named it, so make it. The
            // worker runs in each task's worktree: its path must not be relative to here.
            std::fs::create_dir_all(&d)
                .and_then(|()| std::path::absolute(&d))
                .map_err(|e| RunError::Other(format!("cannot create {}: {e}", d.display())))?
        }
        None => tempfile::Builder::new()
            .prefix("dagexec-demo-")
            .tempdir()
            .map_err(|e| RunError::Other(format!("cannot create a temporary directory: {e}")))?
            .keep(),
    };
    let repo = top.join("repo");
    let write = |path: PathBuf, text: &str| -> Result<(), RunError> {
        crate::edge::fsx::write(&top, &path, text.as_bytes()).map_err(cannot_write(&path))
    };
    for (rel, text) in FILES {
        write(repo.join(rel), text)?;
    }
    let worker = top.join("worker.sh");
    write(worker.clone(), WORKER)?;
    run_in(&repo, "init", &["init", "-q", "-b", "main"])?;
    let config = [
        ("user.name", "dagexec demo"),
        ("user.email", "demo@dagexec.invalid"),
        ("commit.gpgsign", "false"),
    ];
    for (key, value) in config {
        run_in(&repo, "config", &["config", key, value])?;
    }
    run_in(&repo, "add", &["add", "-A"])?;
    run_in(
        &repo,
        "commit",
        &[
            "commit",
            "-q",
            "--no-verify",
            "-m",
            "demo: the app and its plan",
        ],
    )?;
    ui.say(format!("Demo repository: {}", repo.display()));
    ui.say(format!(
        "Worker: the bundled script {} (no API key needed)\n",
        worker.display()
    ));
    let opts = RunOptions {
        plan: repo.join(".design/plan.json"),
        plan_rel: ".design/plan.json".into(),
        root: repo.clone(),
        // The bundled script as the worker, `jobs` at once, rounds.
        settings: Settings {
            worker: format!("sh '{}'", worker.display()),
            jobs,
            timeout: Duration::from_secs(60),
            schedule: Schedule::Rounds,
            overlap: crate::pure::overlap::Policy::Serial,
            reviewer: None,
            max_cost: None,
            worktrees: None,
        },
        yes: true,
        dry_run: false,
        check_timeout: Duration::from_secs(10),
        branch: None,
    };
    let end = crate::local::run(&opts, ui)?;
    let log = run_in(&repo, "log", &["log", "--format=%h %s"])?;
    ui.say("\nThe branch, one commit per round (git log):");
    for line in log.lines() {
        ui.say(format!("  {line}"));
    }
    ui.say(format!("\nReview it: cd {} && git log -p", repo.display()));
    Ok(end)
}
