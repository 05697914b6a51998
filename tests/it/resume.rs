//! Resume and the round commit against a user's real working tree: dagexec never loses what
//! the run did not create (ignored files, uncommitted edits, files behind a committed symlink),
//! never runs a task more than three attempts, never leaves a staged stray file or a lock, and
//! survives `kill -9` at any moment. Every dagexec process here has a hard time limit, so a
//! regression (a run that never ends) fails instead of hanging.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;
use common::local::{Ran, local, plan_or_done, simple_plan};
use common::{dagexec, git, repo};

/// A worker script (outside the repository) that first appends a line to `count` (one line
/// per worker run: `<task> <attempt>`), then runs `body`.
struct Worker {
    dir: tempfile::TempDir,
    cmd: String,
}

impl Worker {
    fn new(body: &str) -> Worker {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("worker.sh");
        let count = dir.path().join("count");
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\necho \"$DAGEXEC_TASK_INDEX $DAGEXEC_ATTEMPT\" >> '{}'\n{body}\n",
                count.display()
            ),
        )
        .unwrap();
        let cmd = format!("sh '{}'", path.display());
        Worker { dir, cmd }
    }

    /// The worker runs so far, one `<task> <attempt>` line each.
    fn runs(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("count"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// `dagexec run` as these tests run it: two jobs, 20 s an attempt, at most 90 s in all.
fn run(dir: &Path, worker: &str, extra: &[&str]) -> Ran {
    local(dir)
        .worker(worker)
        .jobs(2)
        .timeout("20s")
        .args(extra)
        .run_within(Duration::from_secs(90))
}

fn read(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join(rel)).unwrap()
}

/// Sets task fields in the committed plan (a state an interrupted run left), committed.
fn commit_plan_state(dir: &Path, edit: impl FnOnce(&mut Value)) {
    let mut p = plan_or_done(dir);
    edit(&mut p);
    std::fs::write(
        dir.join(".design/plan.json"),
        serde_json::to_string_pretty(&p).unwrap(),
    )
    .unwrap();
    git(dir, &["commit", "-qam", "state"]);
}

/// Writes every file the prompt lists, appending a marker line naming the task.
const WRITE_DECLARED: &str = r#"sed -n -e 's/^Files to create: //p' -e 's/^Files to modify: //p' "$DAGEXEC_PROMPT_FILE" | tr ',' '\n' | sed 's/^ *//' | grep -v '^(none)$' | while read -r f; do mkdir -p "$(dirname "$f")"; echo "dagexec-task-$DAGEXEC_TASK_INDEX" >> "$f"; done
echo "COMPLETED: wrote the files""#;

/// Issue 33 §4: a user's uncommitted edit to a file a pending task declares can never be
/// integrated (dagexec never overwrites it), so `--yes` does not run into it: the run stops
/// before the first attempt, naming the file and the task — no worker, no commit. (It used
/// to spend three attempts and commit three "0/1 tasks" rounds.)
#[test]
fn a_users_edit_to_a_declared_file_stops_the_run_before_any_attempt_even_with_yes() {
    let p = simple_plan(&[
        ("app", &[], &[], &["src/app.txt"]),
        ("after app", &[0], &["b.txt"], &[]),
    ]);
    let dir = repo(&p, &[("src/app.txt", "base\n")]);
    std::fs::write(dir.path().join("src/app.txt"), "base\nWIP\n").unwrap();
    let head = git(dir.path(), &["rev-parse", "HEAD"]);
    let w = Worker::new(WRITE_DECLARED);
    let ran = run(dir.path(), &w.cmd, &["--yes"]);
    let out = &ran.text();
    assert_eq!(ran.code(), Some(2), "{out}");
    assert!(w.runs().is_empty(), "no worker ran: {out}");
    assert!(
        out.contains("  src/app.txt (modified) — task 0 (app)"),
        "the pre-flight named the file and the task: {out}"
    );
    assert!(
        out.contains(
            "error: uncommitted changes at 1 file(s) that pending tasks declare: src/app.txt"
        ) && out.contains("git stash")
            && out.contains("--yes does not skip this"),
        "{out}"
    );
    assert!(!out.contains("starting 1 task(s)"), "{out}");
    assert_eq!(git(dir.path(), &["rev-parse", "HEAD"]), head, "no commit");
    let p = plan_or_done(dir.path());
    assert_eq!(p["tasks"][0]["status"], "pending", "{out}");
    assert!(p["tasks"][0].get("attempts").is_none(), "{out}");
    assert_eq!(
        read(dir.path(), "src/app.txt"),
        "base\nWIP\n",
        "the edit is intact"
    );
}

#[test]
fn preflight_asks_about_uncommitted_declared_files_before_any_worker_runs() {
    let p = simple_plan(&[
        ("app", &[], &["config.local"], &["src/app.txt"]),
        ("docs", &[], &["docs.txt"], &[]),
    ]);
    let dir = repo(
        &p,
        &[
            ("src/app.txt", "base\n"),
            (".gitignore", "config.local\n"),
            ("other.txt", "x\n"),
        ],
    );
    std::fs::write(dir.path().join("src/app.txt"), "base\nWIP\n").unwrap();
    std::fs::write(dir.path().join("config.local"), "secret\n").unwrap();
    // Not declared by any task: not asked about.
    std::fs::write(dir.path().join("other.txt"), "edited\n").unwrap();
    let w = Worker::new(WRITE_DECLARED);
    let ran = run(dir.path(), &w.cmd, &[]);
    let out = &ran.text();
    assert_eq!(ran.code(), Some(2), "{out}");
    assert!(w.runs().is_empty(), "no worker ran: {out}");
    assert!(
        out.contains("  config.local (ignored) — task 0 (app)"),
        "{out}"
    );
    assert!(
        out.contains("  src/app.txt (modified) — task 0 (app)"),
        "{out}"
    );
    assert!(!out.contains("other.txt"), "{out}");
    assert!(
        out.contains(
            "error: uncommitted changes at 2 file(s) that pending tasks declare: config.local, src/app.txt"
        ) && out.contains("--yes"),
        "{out}"
    );
    assert_eq!(read(dir.path(), "config.local"), "secret\n");
    assert_eq!(read(dir.path(), "src/app.txt"), "base\nWIP\n");
}

#[test]
fn dagexecs_own_plan_file_is_not_reported_as_an_uncommitted_change() {
    let p = simple_plan(&[("a", &[], &["a.txt"], &[])]);
    let dir = repo(&p, &[]);
    // The plan as a resumed run finds it: saved by dagexec, not committed.
    let text = read(dir.path(), ".design/plan.json");
    std::fs::write(dir.path().join(".design/plan.json"), format!("{text}\n")).unwrap();
    std::fs::write(dir.path().join(".design/processor-batch-1.json"), "[]").unwrap();
    let w = Worker::new(WRITE_DECLARED);
    let ran = run(dir.path(), &w.cmd, &[]);
    assert_eq!(ran.code(), Some(0), "{}", ran.text());
    assert!(!ran.text().contains("uncommitted"), "{}", ran.text());
}

#[test]
fn resume_keeps_ignored_files_and_uncommitted_edits_at_declared_paths() {
    let p = simple_plan(&[
        ("app", &[], &["config.local"], &["src/app.txt"]),
        ("other", &[], &["o.txt"], &[]),
    ]);
    let dir = repo(
        &p,
        &[("src/app.txt", "base\n"), (".gitignore", "config.local\n")],
    );
    // An interrupted run: both tasks were in progress.
    commit_plan_state(dir.path(), |p| {
        for t in p["tasks"].as_array_mut().unwrap() {
            t["status"] = "in_progress".into();
            t["attempts"] = 1.into();
        }
    });
    std::fs::write(dir.path().join("config.local"), "secret\n").unwrap();
    std::fs::write(dir.path().join("src/app.txt"), "base\nWIP\n").unwrap();
    let w = Worker::new(WRITE_DECLARED);
    let ran = run(dir.path(), &w.cmd, &["--yes"]);
    let out = &ran.text();
    assert_eq!(read(dir.path(), "config.local"), "secret\n", "{out}");
    assert_eq!(read(dir.path(), "src/app.txt"), "base\nWIP\n", "{out}");
    // The resume put nothing right in the work tree; the user's files at task 0's paths
    // stop the run before any attempt (issue 33 §4: task 0 could never be integrated).
    assert_eq!(ran.code(), Some(2), "{out}");
    assert!(w.runs().is_empty(), "{:?}", w.runs());
    let p = plan_or_done(dir.path());
    assert_eq!(p["tasks"][0]["status"], "pending", "{out}");
    assert_eq!(p["tasks"][0]["attempts"], 1, "{out}");
}

#[test]
fn resume_never_deletes_through_a_committed_symlinked_directory() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("victim.txt"), "keep me\n").unwrap();
    let p = simple_plan(&[("through the link", &[], &["link/victim.txt"], &[])]);
    let dir = repo(&p, &[]);
    std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
    git(dir.path(), &["add", "link"]);
    git(dir.path(), &["commit", "-qm", "link"]);
    commit_plan_state(dir.path(), |p| {
        p["tasks"][0]["status"] = "in_progress".into();
    });
    let w = Worker::new(r#"echo "COMPLETED: nothing""#);
    let ran = run(dir.path(), &w.cmd, &["--yes"]);
    assert_eq!(
        std::fs::read_to_string(outside.path().join("victim.txt")).unwrap(),
        "keep me\n",
        "{}",
        ran.text()
    );
}

#[test]
fn an_interrupted_task_with_two_attempts_resumes_as_attempt_three_and_gets_no_fourth() {
    let p = simple_plan(&[("flaky", &[], &["a.txt"], &[])]);
    let dir = repo(&p, &[]);
    commit_plan_state(dir.path(), |p| {
        p["tasks"][0]["status"] = "in_progress".into();
        p["tasks"][0]["attempts"] = 2.into();
    });
    let w = Worker::new(r#"echo "FAILED: still broken""#);
    let ran = run(dir.path(), &w.cmd, &[]);
    assert_eq!(ran.code(), Some(1), "{}", ran.text());
    assert_eq!(w.runs(), ["0 3"], "{}", ran.text());
    let p = plan_or_done(dir.path());
    assert_eq!(p["tasks"][0]["status"], "failed");
    assert_eq!(p["tasks"][0]["attempts"], 3);
    // Run again: nothing is left to try.
    let ran = run(dir.path(), &w.cmd, &[]);
    assert_eq!(ran.code(), Some(1), "{}", ran.text());
    assert_eq!(w.runs(), ["0 3"]);
}

#[test]
fn a_task_interrupted_in_its_third_attempt_fails_without_a_fourth() {
    let p = simple_plan(&[
        ("flaky", &[], &["a.txt"], &[]),
        ("after", &[0], &["b.txt"], &[]),
    ]);
    let dir = repo(&p, &[]);
    commit_plan_state(dir.path(), |p| {
        p["tasks"][0]["status"] = "in_progress".into();
        p["tasks"][0]["attempts"] = 3.into();
    });
    let w = Worker::new(WRITE_DECLARED);
    let ran = run(dir.path(), &w.cmd, &[]);
    assert_eq!(ran.code(), Some(1), "{}", ran.text());
    assert!(w.runs().is_empty(), "{}", ran.text());
    assert!(
        ran.text()
            .contains("Task 0 has used all 3 attempts (the last one's result was never committed: the run was killed while it ran, or interrupted after it failed); it fails."),
        "{}",
        ran.text()
    );
    let p = plan_or_done(dir.path());
    assert_eq!(p["tasks"][0]["status"], "failed");
    assert_eq!(p["tasks"][1]["status"], "skipped");
}

#[test]
fn a_crash_in_every_attempt_never_runs_a_task_more_than_three_times() {
    // The worker kills dagexec itself (its grandparent) every time: a crash loop.
    let p = simple_plan(&[("crashy", &[], &["a.txt"], &[])]);
    let dir = repo(&p, &[]);
    let w = Worker::new(r#"kill -9 "$(ps -o ppid= -p $PPID | tr -d ' ')"; sleep 1"#);
    for _ in 0..5 {
        run(dir.path(), &w.cmd, &[]);
    }
    assert_eq!(w.runs(), ["0 1", "0 2", "0 3"]);
    assert_eq!(plan_or_done(dir.path())["tasks"][0]["status"], "failed");
}

/// `dagexec status` after a run was killed with tasks in progress says that no run executes
/// them (naming the dead run's pid) and that `run` resumes; while a run executes them (the
/// worker asks, from inside the run) it says nothing of the kind. It used to show "in
/// progress" alone either way.
#[test]
fn status_tells_a_run_that_died_from_one_that_runs() {
    let p = simple_plan(&[("a", &[], &["a.txt"], &[])]);
    let dir = repo(&p, &[]);
    let status = || {
        let out = dagexec(dir.path()).arg("status").output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let said = dir.path().join("said-inside");
    let bin = assert_cmd::cargo::cargo_bin("dagexec");
    // Attempt 1 kills dagexec (the worker's grandparent); attempt 2 asks for the status
    // while its run holds the lock, then completes.
    let w = Worker::new(&format!(
        r#"if [ "$DAGEXEC_ATTEMPT" = 1 ]; then kill -9 "$(ps -o ppid= -p $PPID | tr -d ' ')"; sleep 5; exit 0; fi
(cd '{}' && '{}' status) > '{}'
{WRITE_DECLARED}"#,
        dir.path().display(),
        bin.display(),
        said.display(),
    ));
    let ran = run(dir.path(), &w.cmd, &[]);
    assert_eq!(ran.code(), None, "killed: {}", ran.text());
    let after_kill = status();
    let pid = std::fs::read_to_string(dir.path().join(".git/dagexec/run.lock")).unwrap();
    assert!(
        after_kill.contains(&format!("\nNo run is executing these tasks: the run that started them (pid {}) stopped before it finished (killed, or its machine went down). `dagexec run` resumes: they start again.\n", pid.trim())),
        "{after_kill}"
    );
    let ran = run(dir.path(), &w.cmd, &["--yes"]);
    assert_eq!(ran.code(), Some(0), "{}", ran.text());
    let inside = std::fs::read_to_string(&said).unwrap();
    assert!(inside.contains("in_progress"), "{inside}");
    assert!(!inside.contains("No run is executing"), "{inside}");
}

#[test]
fn a_crash_between_apply_and_commit_leaves_nothing_staged() {
    let p = simple_plan(&[("a", &[], &["a.txt"], &["README.md"])]);
    let w = Worker::new(WRITE_DECLARED);
    for point in ["after-apply:1", "before-commit:1"] {
        let dir = repo(&p, &[("README.md", "readme\n")]);
        let head = git(dir.path(), &["rev-parse", "HEAD"]);
        let ran = local(dir.path())
            .worker(&w.cmd)
            .env("DAGEXEC_FAILPOINT", point)
            .run_within(Duration::from_secs(60));
        assert_eq!(ran.code(), None, "{point}: killed: {}", ran.text());
        assert_eq!(git(dir.path(), &["rev-parse", "HEAD"]), head, "{point}");
        assert_eq!(
            git(dir.path(), &["diff", "--cached", "--name-only"]),
            "",
            "{point}: nothing staged"
        );
        assert_eq!(read(dir.path(), "README.md"), "readme\n", "{point}");
        assert!(!dir.path().join("a.txt").exists(), "{point}");
        assert!(!dir.path().join(".git/index.lock").exists(), "{point}");
        let ran = run(dir.path(), &w.cmd, &[]);
        assert_eq!(ran.code(), Some(0), "{point}: {}", ran.text());
        assert_eq!(git(dir.path(), &["status", "--porcelain"]), "", "{point}");
        assert_eq!(
            read(dir.path(), "README.md"),
            "readme\ndagexec-task-0\n",
            "{point}"
        );
    }
}

#[test]
fn a_crash_after_the_ref_moved_is_finished_on_the_next_start() {
    let p = simple_plan(&[
        ("a", &[], &["a.txt"], &["README.md"]),
        ("b", &[0], &["b.txt"], &[]),
    ]);
    let dir = repo(&p, &[("README.md", "readme\n")]);
    let w = Worker::new(WRITE_DECLARED);
    let ran = local(dir.path())
        .worker(&w.cmd)
        .env("DAGEXEC_FAILPOINT", "after-ref:1")
        .run_within(Duration::from_secs(60));
    assert_eq!(ran.code(), None, "{}", ran.text());
    assert!(
        git(dir.path(), &["log", "-1", "--format=%s"]).starts_with("dagexec: round 1"),
        "the commit point was passed"
    );
    let ran = run(dir.path(), &w.cmd, &[]);
    assert_eq!(ran.code(), Some(0), "{}", ran.text());
    assert!(
        ran.text().contains("that an interrupted run had made."),
        "{}",
        ran.text()
    );
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
    assert_eq!(read(dir.path(), "a.txt"), "dagexec-task-0\n");
    assert_eq!(w.runs(), ["0 1", "1 1"], "task 0 ran once");
}

/// A run killed while it brought the work tree to the archiving commit, after it removed the
/// plan there: the next `run` (no plan.json, the archive beside it) finishes that commit before
/// it says the plan is complete, so no round record is left for a later run to act on.
#[test]
fn a_crash_in_the_archiving_commits_sync_is_finished_by_the_next_run() {
    let p = simple_plan(&[("a", &[], &["a.txt"], &[])]);
    let dir = repo(&p, &[]);
    let d = dir.path();
    let w = Worker::new(WRITE_DECLARED);
    let ran = local(d)
        .worker(&w.cmd)
        .env("DAGEXEC_FAILPOINT", "archive-after-ref:0")
        .run_within(Duration::from_secs(60));
    assert_eq!(ran.code(), None, "{}", ran.text());
    assert!(
        git(d, &["log", "-1", "--format=%B"]).contains("archived"),
        "the archiving commit was published: {}",
        git(d, &["log", "--format=%s"])
    );
    // The sync's first step (deletions before writes) had removed the plan.
    std::fs::remove_file(d.join(".design/plan.json")).unwrap();
    assert!(d.join(".git/dagexec/round.json").exists());
    let ran = run(d, &w.cmd, &[]);
    assert_eq!(ran.code(), Some(0), "{}", ran.text());
    assert!(
        ran.text().contains("that an interrupted run had made.")
            && ran.text().contains("the plan is complete"),
        "{}",
        ran.text()
    );
    assert!(
        !d.join(".git/dagexec/round.json").exists(),
        "the round record is left"
    );
    assert_eq!(git(d, &["status", "--porcelain"]), "");
    assert_eq!(w.runs(), ["0 1"], "task 0 ran once");
}

#[test]
fn a_stale_index_lock_is_reported_as_such_with_the_fix() {
    let p = simple_plan(&[("a", &[], &["a.txt"], &[])]);
    let dir = repo(&p, &[]);
    std::fs::write(dir.path().join(".git/index.lock"), "").unwrap();
    let w = Worker::new(WRITE_DECLARED);
    let ran = run(dir.path(), &w.cmd, &[]);
    assert_eq!(ran.code(), Some(2), "{}", ran.text());
    let lock = dir.path().join(".git/index.lock");
    assert!(
        ran.text().contains(&format!(
            "{} exists. Another git process is running in this repository, or one stopped without removing its lock; if no git process is running, delete {} and run again",
            lock.display(),
            lock.display()
        )),
        "{}",
        ran.text()
    );
    assert!(
        !ran.text().contains("at least one commit"),
        "{}",
        ran.text()
    );
    assert!(w.runs().is_empty());
    std::fs::remove_file(&lock).unwrap();
    let ran = run(dir.path(), &w.cmd, &[]);
    assert_eq!(ran.code(), Some(0), "{}", ran.text());
}

/// Waits (bounded) until git processes a killed run left have finished and dropped the
/// index lock; fails if it stays.
fn wait_for_no_lock(dir: &Path, label: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while dir.join(".git/index.lock").exists() {
        assert!(Instant::now() < deadline, "{label}: .git/index.lock stays");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kill -9 at ≥ 50 seeded points (in scenarios of one or two kills, each followed by a run to
/// the end) — at each step of a round commit (between apply and commit,
/// after the ref moved, …) and at random times — then run to the end: every task's change is
/// in exactly one commit, nothing staged or stray, no lock, the user's ignored, untracked and
/// uncommitted files intact.
#[test]
fn kill_9_at_fifty_points_loses_and_duplicates_nothing() {
    let p = simple_plan(&[
        ("a", &[], &["a.txt"], &[]),
        ("b", &[], &["b/b.txt"], &["README.md"]),
        ("c", &[0], &[], &["a.txt"]),
        ("d", &[1], &["d.txt"], &[]),
        ("e", &[2, 3], &[], &["README.md", "b/b.txt"]),
    ]);
    let w = Worker::new(
        r#"case "$DAGEXEC_TASK_INDEX" in
  0) echo dagexec-task-0 >> a.txt ;;
  1) mkdir -p b; echo dagexec-task-1 >> b/b.txt; echo dagexec-task-1 >> README.md ;;
  2) echo dagexec-task-2 >> a.txt ;;
  3) echo dagexec-task-3 >> d.txt ;;
  4) echo dagexec-task-4 >> README.md; echo dagexec-task-4 >> b/b.txt ;;
esac
echo "COMPLETED: wrote the files""#,
    );
    // DAGEXEC_KILL9_SEED picks other points and times (for hunting a rare failure).
    let seed = std::env::var("DAGEXEC_KILL9_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0x00da_6e7e_c000_0010);
    // Each interrupted run's output, for the message of a failure.
    let logs = tempfile::tempdir().unwrap();
    // Four lanes of scenarios side by side (each scenario is a repository of its own and its
    // runs mostly wait on workers and git), each with its own random stream from the seed, and
    // a quarter of the kills each.
    const LANES: u64 = 4;
    const KILLS: usize = 50;
    std::thread::scope(|s| {
        let lanes: Vec<_> = (0..LANES)
            .map(|lane| {
                let (p, w, logs) = (&p, &w, logs.path());
                s.spawn(move || {
                    let seed = seed.wrapping_add(lane);
                    let mut rng = fastrand::Rng::with_seed(seed);
                    let mut kills = 0;
                    let mut scenario = 0;
                    while kills < KILLS.div_ceil(LANES as usize) {
                        scenario += 1;
                        assert!(
                            scenario <= 20,
                            "lane {lane}: only {kills} kills in {scenario} scenarios"
                        );
                        kills += kill_scenario(
                            p,
                            w,
                            logs,
                            &mut rng,
                            seed,
                            &format!("{lane}.{scenario}"),
                        );
                    }
                })
            })
            .collect();
        for l in lanes {
            l.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
        }
    });
}

/// The round commit's failpoints a scenario kills at.
const STEPS: &[&str] = &[
    "after-workers",
    "after-apply",
    "before-commit",
    "after-ref",
    "after-commit",
];

/// One scenario of [`kill_9_at_fifty_points_loses_and_duplicates_nothing`] in a repository of
/// its own: one or two runs killed (at a failpoint or a random time), then a run to the end;
/// nothing lost, nothing duplicated, the user's files as they were. The kills it made.
fn kill_scenario(
    p: &Value,
    w: &Worker,
    logs: &Path,
    rng: &mut fastrand::Rng,
    seed: u64,
    scenario: &str,
) -> usize {
    let mut kills = 0;
    let dir = repo(
        p,
        &[
            ("README.md", "readme\n"),
            (".gitignore", "local.cfg\n"),
            ("notes.txt", "notes\n"),
        ],
    );
    let d = dir.path();
    std::fs::write(d.join("local.cfg"), "mine\n").unwrap();
    std::fs::write(d.join("notes.txt"), "notes\nWIP\n").unwrap();
    std::fs::write(d.join("scratch.txt"), "untracked\n").unwrap();
    let mut history = Vec::new();
    // At most two kills a scenario: each interrupted attempt counts, and a task has three.
    for _ in 0..rng.usize(1..=2) {
        let mut cmd = dagexec(d);
        cmd.args(["run", "--worker", &w.cmd, "--jobs", "2"]);
        let timed = rng.bool();
        let label = if timed {
            format!("scenario {scenario}: at a random time")
        } else {
            let point = match rng.usize(..=STEPS.len()) {
                n if n == STEPS.len() => "archive-after-ref:0".to_string(),
                n => format!("{}:{}", STEPS[n], rng.u32(1..=3)),
            };
            cmd.env("DAGEXEC_FAILPOINT", &point);
            format!("scenario {scenario}: at {point}")
        };
        let log = logs.join(format!("{scenario}-{}.log", history.len()));
        let out = std::fs::File::create(&log).unwrap();
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        if timed {
            std::thread::sleep(Duration::from_millis(rng.u64(0..600)));
            let _ = child.kill();
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "{label}: the run hangs");
            std::thread::sleep(Duration::from_millis(10));
        };
        if status.code().is_none() {
            kills += 1;
        }
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = said.lines().rev().take(6).collect();
        history.push(format!(
            "{label}: {status} (seed {seed:#x}; last lines, newest first: {tail:?})"
        ));
        if status.success() {
            break;
        }
        wait_for_no_lock(d, &label);
        // Nothing staged, unless a round commit was published and its record says so
        // (the next start brings the work tree and index to it).
        let staged = git(d, &["diff", "--cached", "--name-only"]);
        if !staged.is_empty() {
            let record: Value = serde_json::from_str(
                &std::fs::read_to_string(d.join(".git/dagexec/round.json"))
                    .unwrap_or_else(|_| panic!("{label}: staged with no round record: {staged}")),
            )
            .unwrap();
            assert_eq!(
                record["new"].as_str().unwrap(),
                git(d, &["rev-parse", "HEAD"]).trim(),
                "{label}: staged: {staged}"
            );
        }
        assert_eq!(read(d, "local.cfg"), "mine\n", "{label}");
        assert_eq!(read(d, "notes.txt"), "notes\nWIP\n", "{label}");
        assert_eq!(read(d, "scratch.txt"), "untracked\n", "{label}");
    }
    let label = format!("scenario {scenario} after {history:?}");
    // Run again as a user would, also when the plan was archived: that run says the plan
    // is complete, after finishing an archiving commit a kill interrupted.
    let last = {
        let ran = run(d, &w.cmd, &[]);
        assert_eq!(ran.code(), Some(0), "{label}: {}", ran.text());
        ran.text()
    };
    let label = format!("{label}; the last run said: {last}");
    assert!(d.join(".design/plan.done.json").exists(), "{label}");
    wait_for_no_lock(d, &label);
    assert_eq!(
        git(d, &["status", "--porcelain"]),
        " M notes.txt\n?? scratch.txt\n",
        "{label}: only the user's changes remain"
    );
    assert_eq!(read(d, "local.cfg"), "mine\n", "{label}");
    assert_eq!(read(d, "notes.txt"), "notes\nWIP\n", "{label}");
    assert!(
        !d.join(".git/dagexec/round.json").exists(),
        "{label}; the round record left: {}",
        std::fs::read_to_string(d.join(".git/dagexec/round.json")).unwrap_or_default()
    );
    for (i, files) in [
        (0, &["a.txt"][..]),
        (1, &["b/b.txt", "README.md"][..]),
        (2, &["a.txt"][..]),
        (3, &["d.txt"][..]),
        (4, &["README.md", "b/b.txt"][..]),
    ] {
        let marker = format!("dagexec-task-{i}");
        for f in files {
            let content = read(d, f);
            assert_eq!(
                content.lines().filter(|l| *l == marker).count(),
                1,
                "{label}: task {i} in {f}: {content}"
            );
            let commits = git(
                d,
                &["log", "--format=%h", "-G", &format!("^{marker}$"), "--", f],
            );
            assert_eq!(
                commits.lines().count(),
                1,
                "{label}: task {i}'s change to {f} is in exactly one commit"
            );
        }
    }
    kills
}

#[test]
fn the_generated_long_run_plan_is_not_reported_as_an_uncommitted_change() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (rel, text) in [
        (".long-run/spec/spec.md", "# Spec\nA tiny app.\n"),
        (
            ".long-run/plans/01-PLAN.md",
            "# Models\n<task>1. m.txt</task>\n",
        ),
    ] {
        std::fs::create_dir_all(d.join(rel).parent().unwrap()).unwrap();
        std::fs::write(d.join(rel), text).unwrap();
    }
    git(d, &["init", "-q"]);
    git(d, &["add", "-A"]);
    git(d, &["commit", "-qm", "start"]);
    let w = Worker::new(
        r#"echo 1 > 01.txt
printf 'OUTPUT_JSON_START\n{"status":"COMPLETED","summary":"done","tasks_completed":["1"],"files_modified":["01.txt"]}\nOUTPUT_JSON_END\n'"#,
    );
    let ran = run(d, &w.cmd, &["--long-run", ".long-run"]);
    assert_eq!(ran.code(), Some(0), "{}", ran.text());
    assert!(!ran.text().contains("uncommitted"), "{}", ran.text());
}

/// Starts `dagexec run` as a terminal starts a foreground job (a process group of its own),
/// waits until task 0's worker has printed its first lines, then sends `signal` to that whole
/// group, as Ctrl-C (SIGINT) or a polite stop (SIGTERM) does. Returns the run once it ended.
fn interrupt(dir: &Path, w: &Worker, signal: nix::sys::signal::Signal, args: &[&str]) -> Ran {
    use std::os::unix::process::CommandExt;
    let ready = w.dir.path().join("ready-0");
    let _ = std::fs::remove_file(&ready);
    let logs = tempfile::tempdir().unwrap();
    let out_path = logs.path().join("out");
    let out = std::fs::File::create(&out_path).unwrap();
    let mut cmd = local(dir)
        .worker(&w.cmd)
        .jobs(2)
        .timeout("60s")
        .args(args)
        .command();
    let mut child = cmd
        .env("SLOW", "30")
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let group = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready.exists() {
        assert!(
            Instant::now() < deadline && child.try_wait().unwrap().is_none(),
            "the worker never started: {}",
            std::fs::read_to_string(&out_path).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    match signal {
        nix::sys::signal::Signal::SIGKILL => nix::sys::signal::kill(group, signal).unwrap(),
        _ => nix::sys::signal::killpg(group, signal).unwrap(),
    }
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "dagexec did not stop after {signal}: {}",
                std::fs::read_to_string(&out_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = std::fs::read(&out_path).unwrap();
    common::local::ran(
        dir,
        std::process::Output {
            status,
            stdout,
            stderr: Vec::new(),
        },
    )
}

/// Issue 33 §3: an interrupt the user asked for (Ctrl-C, SIGTERM), delivered to dagexec's
/// process group as a terminal does, uses no attempt: after three of them the task runs
/// attempt 1 again. Each interrupted attempt's stdout, stderr and work log are kept in its
/// run's folder, and the run says what it kept and how to go on. A `kill -9` (no record of
/// an interrupt) still counts the attempt it cut short.
#[test]
fn interrupts_use_no_attempt_and_keep_every_log_while_kill_9_still_counts() {
    use nix::sys::signal::Signal;
    let p = simple_plan(&[
        ("slow", &[], &["a.txt"], &[]),
        ("after", &[0], &["b.txt"], &[]),
    ]);
    let dir = repo(&p, &[]);
    let w = Worker::new(&format!(
        r#"echo "started task $DAGEXEC_TASK_INDEX attempt $DAGEXEC_ATTEMPT"
echo "warming up" >&2
echo "worked on it" > "$DAGEXEC_LOG_FILE"
touch "$(dirname "$0")/ready-$DAGEXEC_TASK_INDEX"
sleep "${{SLOW:-0}}"
{WRITE_DECLARED}"#
    ));
    let signals = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGINT];
    for (k, signal) in signals.into_iter().enumerate() {
        let run_no = k + 1;
        // The second run schedules eagerly: its loop gives the attempt back too.
        let args: &[&str] = if k == 1 {
            &["--schedule", "eager"]
        } else {
            &[]
        };
        let ran = interrupt(dir.path(), &w, signal, args);
        let text = ran.text();
        assert_eq!(ran.code(), Some(130), "{signal}: {text}");
        assert!(
            text.contains(&format!("Interrupted by {signal}"))
                && text.contains("stopped task 0 attempt 1")
                && text.contains("not counted")
                && text.contains(&format!(".git/dagexec/logs/run-{run_no}"))
                && text.contains("`dagexec run`"),
            "{signal}: {text}"
        );
        let plan = ran.plan();
        assert_eq!(plan["tasks"][0]["status"], "in_progress", "{signal}");
        assert_eq!(
            plan["tasks"][0]
                .get("attempts")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            0,
            "{signal}: an interrupt uses no attempt"
        );
        let records: Vec<(String, String)> = plan["progress"]["dagexecAttempts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["outcome"].as_str().unwrap_or_default().to_string(),
                    r["signal"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        let want: Vec<(String, String)> = signals[..=k]
            .iter()
            .map(|s| ("interrupted".to_string(), s.to_string()))
            .collect();
        assert_eq!(records, want, "{signal}");
        let kept = dir
            .path()
            .join(format!(".git/dagexec/logs/run-{run_no}/task-0-attempt-1"));
        let file = |ext: &str| {
            std::fs::read_to_string(kept.with_extension(ext))
                .unwrap_or_else(|e| panic!("{signal}: {}.{ext}: {e}\n{text}", kept.display()))
        };
        assert_eq!(file("stdout"), "started task 0 attempt 1\n", "{signal}");
        assert_eq!(file("stderr"), "warming up\n", "{signal}");
        assert_eq!(file("log"), "worked on it\n", "{signal}");
    }
    // Power loss: dagexec dies without a word; the attempt it started stays counted.
    let ran = interrupt(dir.path(), &w, Signal::SIGKILL, &[]);
    assert_eq!(ran.code(), None, "{}", ran.text());
    assert_eq!(plan_or_done(dir.path())["tasks"][0]["attempts"], 1);
    let ran = run(dir.path(), &w.cmd, &[]);
    assert_eq!(ran.code(), Some(0), "{}", ran.text());
    let runs = w.runs();
    let of = |task: &str| -> Vec<&str> {
        runs.iter()
            .filter(|r| r.starts_with(task))
            .map(String::as_str)
            .collect()
    };
    assert_eq!(
        of("0 "),
        ["0 1", "0 1", "0 1", "0 1", "0 2"],
        "{}",
        ran.text()
    );
    assert_eq!(of("1 "), ["1 1"], "{}", ran.text());
    let done = plan_or_done(dir.path());
    let attempts: Vec<(u64, u64)> = done["progress"]["completedTasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["index"].as_u64().unwrap(),
                c["attempts"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(attempts, [(0, 2), (1, 1)], "{}", ran.text());
}

/// A run killed while it wrote the plan leaves the write's temporary file beside it
/// (`.design/.plan.json.dagexec-<16 hex>.tmp`: written, never renamed). Whatever the next run
/// finds — tasks to run, or a plan already complete that it only reports or archives — it
/// removes what a dead writer left (it holds the lock: no other dagexec is writing), and ends
/// with nothing stray. (`kill_9_at_fifty_points…` met this now and then: a random kill landed
/// inside a plan write, and the run after it found the plan complete.) A file of the user's
/// that only looks alike stays.
#[test]
fn a_temporary_file_a_killed_plan_write_left_is_removed_by_the_next_run() {
    let p = simple_plan(&[("a", &[], &["a.txt"], &[])]);
    let dir = repo(&p, &[("README.md", "readme\n")]);
    let d = dir.path();
    let w = Worker::new(WRITE_DECLARED);
    let users = d.join(".design/.plan.json.dagexec-mine.tmp");
    std::fs::write(&users, "mine\n").unwrap();
    for (when, names) in [
        (
            "with a task to run",
            &[".plan.json.dagexec-00c0ffee12345678.tmp"][..],
        ),
        (
            "with the plan complete",
            &[
                ".plan.json.dagexec-0123456789abcdef.tmp",
                ".plan.done.json.dagexec-fedcba9876543210.tmp",
            ][..],
        ),
    ] {
        for name in names {
            std::fs::write(d.join(".design").join(name), "{\"schemaVersion\": 2, \"tas").unwrap();
        }
        let ran = run(d, &w.cmd, &[]);
        assert_eq!(ran.code(), Some(0), "{when}: {}", ran.text());
        for name in names {
            assert!(
                !d.join(".design").join(name).exists(),
                "{when}: the dead write's {name} is left: {}",
                ran.text()
            );
        }
        assert_eq!(
            read(d, ".design/.plan.json.dagexec-mine.tmp"),
            "mine\n",
            "{when}"
        );
        assert_eq!(
            git(d, &["status", "--porcelain"]),
            "?? .design/.plan.json.dagexec-mine.tmp\n",
            "{when}"
        );
    }
    assert_eq!(w.runs(), ["0 1"]);
}
