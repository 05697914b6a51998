//! The round commit's point of no return, for every way a round is run (`rounds` and
//! `eager`, `overlap: serial` and `merge`): a run killed anywhere before its round commit is
//! published leaves no plan that says the round's tasks completed, and the next run does the
//! round again; one killed after it finishes the round. Tasks here only *modify* a file that
//! exists already, so nothing but the commit tells whether their work landed.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use crate::common;
use common::local::{local, plan_or_done, simple_plan};
use common::{git, repo};

/// Each task rewrites its own line of `list.txt` (task 0 the first line, …).
const EDIT_MY_LINE: &str = r#"n=$((DAGEXEC_TASK_INDEX + 1))
sed -i "${n}s/.*/line $n done by task $DAGEXEC_TASK_INDEX/" list.txt
echo "COMPLETED: rewrote line $n""#;

const LIST: &str = "line 1\nline 2\nline 3\n";
const DONE: &str = "line 1 done by task 0\nline 2 done by task 1\nline 3 done by task 2\n";

/// The ways a round is run, as `run` flags.
const MODES: &[&[&str]] = &[
    &["--schedule", "rounds", "--overlap", "serial"],
    &["--schedule", "rounds", "--overlap", "merge"],
    &["--schedule", "eager", "--overlap", "serial"],
    &["--schedule", "eager", "--overlap", "merge"],
];

fn three_on_one_file() -> tempfile::TempDir {
    let p = simple_plan(&[
        ("first line", &[], &[], &["list.txt"]),
        ("second line", &[], &[], &["list.txt"]),
        ("third line", &[], &[], &["list.txt"]),
    ]);
    repo(&p, &[("list.txt", LIST)])
}

/// After an interrupted run: the next run completes the plan, every task's line is
/// committed, nothing is left uncommitted.
fn the_next_run_does_the_round(dir: &Path, mode: &[&str], label: &str) {
    let ran = local(dir)
        .script(EDIT_MY_LINE)
        .jobs(3)
        .args(mode)
        .run_within(Duration::from_secs(120));
    let text = ran.text();
    assert_eq!(ran.code(), Some(0), "{label}: {text}");
    assert_eq!(
        git(dir, &["show", "HEAD:list.txt"]),
        DONE,
        "{label}: every task's change is committed\n{text}"
    );
    assert_eq!(git(dir, &["status", "--porcelain"]), "", "{label}: {text}");
    let p = plan_or_done(dir);
    for t in p["tasks"].as_array().unwrap() {
        assert_eq!(t["status"], "completed", "{label}: {text}");
    }
}

/// The plan in the work tree after a kill before the commit point: no task of the round is
/// recorded as completed there (only a published commit may say so).
fn no_task_recorded_completed(dir: &Path, label: &str) {
    let p = plan_or_done(dir);
    for (i, t) in p["tasks"].as_array().unwrap().iter().enumerate() {
        assert_ne!(
            t["status"],
            "completed",
            "{label}: task {i} is recorded completed in the work tree's plan, yet HEAD's list.txt is {:?}",
            git(dir, &["show", "HEAD:list.txt"])
        );
    }
}

#[test]
fn a_run_killed_before_its_round_commit_does_the_round_again() {
    for mode in MODES {
        for point in ["after-apply:1", "before-commit:1"] {
            let label = format!("{} at {point}", mode.join(" "));
            let dir = three_on_one_file();
            let head = git(dir.path(), &["rev-parse", "HEAD"]);
            let ran = local(dir.path())
                .script(EDIT_MY_LINE)
                .jobs(3)
                .args(*mode)
                .env("DAGEXEC_FAILPOINT", point)
                .run_within(Duration::from_secs(120));
            assert_eq!(ran.code(), None, "{label}: killed\n{}", ran.text());
            assert_eq!(git(dir.path(), &["rev-parse", "HEAD"]), head, "{label}");
            no_task_recorded_completed(dir.path(), &label);
            the_next_run_does_the_round(dir.path(), mode, &label);
        }
    }
}

/// An attempt that completed is not spent by a crash that came after it: a run killed at its
/// commit point three times (an out-of-memory kill in a later task, a laptop's battery) left
/// every task at "3 of 3 attempts used" and the fourth run failed them all, each "killed while
/// it ran" — though each had completed every time.
#[test]
fn completed_attempts_a_crash_kept_from_their_commit_do_not_use_up_the_task() {
    // Eager with merge starts all three at once: at the first commit the other two are still
    // running, cut short by each kill, and those attempts count.
    for mode in &MODES[..3] {
        let label = mode.join(" ");
        let dir = three_on_one_file();
        for kill in 1..=3 {
            let ran = local(dir.path())
                .script(EDIT_MY_LINE)
                .jobs(3)
                .args(*mode)
                .env("DAGEXEC_FAILPOINT", "before-commit:1")
                .run_within(Duration::from_secs(120));
            assert_eq!(ran.code(), None, "{label}: kill {kill}\n{}", ran.text());
        }
        the_next_run_does_the_round(dir.path(), mode, &label);
    }
}

/// A plan in the work tree that says the round's tasks completed while the round's commit
/// was never published (what a run killed at its commit point left before this was fixed,
/// or a hand edit): the journal says the round did not commit, so the tasks run again.
#[test]
fn a_plan_that_claims_an_unpublished_round_is_not_believed() {
    let mode: &[&str] = &["--schedule", "rounds", "--overlap", "serial"];
    let dir = three_on_one_file();
    let ran = local(dir.path())
        .script(EDIT_MY_LINE)
        .jobs(3)
        .args(mode)
        .env("DAGEXEC_FAILPOINT", "before-commit:1")
        .run_within(Duration::from_secs(120));
    assert_eq!(ran.code(), None, "killed\n{}", ran.text());
    let path = dir.path().join(".design/plan.json");
    let mut p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for t in p["tasks"].as_array_mut().unwrap() {
        t["status"] = "completed".into();
        t["result"] = "rewrote the line".into();
    }
    std::fs::write(&path, serde_json::to_string_pretty(&p).unwrap()).unwrap();
    the_next_run_does_the_round(dir.path(), mode, "a plan claiming the round");
}

/// A `git` in front of the real one that stops for good in the `commit-tree` of a round
/// commit (the one given its message on stdin, `-F -`), after writing its pid to `mark`.
fn stalling_git(dir: &Path, mark: &Path) -> PathBuf {
    common::git_in_front(
        dir,
        &format!(
            "case \" $* \" in *' commit-tree '*' -F '*) if [ ! -e '{mark}' ]; then echo $$ > '{mark}'; exec sleep 600; fi ;; esac",
            mark = mark.display()
        ),
    )
}

#[test]
fn a_run_killed_while_git_writes_the_round_commit_does_the_round_again() {
    use std::os::unix::process::CommandExt;
    for mode in MODES {
        let label = format!("{} in commit-tree", mode.join(" "));
        let dir = three_on_one_file();
        let tools = tempfile::tempdir().unwrap();
        let mark = tools.path().join("stalled");
        let bin = stalling_git(tools.path(), &mark);
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let head = git(dir.path(), &["rev-parse", "HEAD"]);
        let run = local(dir.path())
            .script(EDIT_MY_LINE)
            .jobs(3)
            .args(*mode)
            .env("PATH", &path);
        let mut child = run
            .command()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        while std::fs::read_to_string(&mark).map_or(true, |s| s.trim().is_empty()) {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("{label}: the run ended ({status}) without a round commit");
            }
            assert!(
                Instant::now() < deadline,
                "{label}: no round commit in time"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Killed as a power loss would: the whole group at once, git included.
        let group = Pid::from_raw(i32::try_from(child.id()).unwrap());
        let _ = killpg(group, Signal::SIGKILL);
        let _ = child.wait();
        if let Ok(pid) = std::fs::read_to_string(&mark)
            && let Ok(pid) = pid.trim().parse::<i32>()
        {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        assert_eq!(git(dir.path(), &["rev-parse", "HEAD"]), head, "{label}");
        no_task_recorded_completed(dir.path(), &label);
        the_next_run_does_the_round(dir.path(), mode, &label);
    }
}

/// The same with a Taskmaster task list: neither the generated plan nor tasks.json says the
/// task is done until its round is committed, and the next run does it.
#[test]
fn a_taskmaster_run_killed_before_its_round_commit_does_the_round_again() {
    const TM: &str = ".taskmaster/tasks/tasks.json";
    const GENERATED: &str = ".taskmaster/tasks/.dagexec/plan.json";
    let json =
        r#"{"tasks": [{"id": 1, "title": "first line", "status": "pending", "dependencies": []}]}"#;
    let dir = tempfile::tempdir().unwrap();
    common::write_files(dir.path(), [(TM, json), ("list.txt", LIST)]);
    common::commit_new(dir.path());
    let run = |failpoint: Option<&str>| {
        let mut run = local(dir.path())
            .global(&["--plan", TM])
            .script("sed -i '1s/.*/line 1 done/' list.txt\necho 'COMPLETED: rewrote line 1'");
        if let Some(point) = failpoint {
            run = run.env("DAGEXEC_FAILPOINT", point);
        }
        run.run_within(Duration::from_secs(120))
    };
    let ran = run(Some("before-commit:1"));
    assert_eq!(ran.code(), None, "killed\n{}", ran.text());
    let generated = std::fs::read_to_string(dir.path().join(GENERATED)).unwrap();
    assert!(!generated.contains("\"completed\""), "{generated}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join(TM)).unwrap(),
        json,
        "tasks.json untouched"
    );
    let ran = run(None);
    assert_eq!(ran.code(), Some(0), "{}", ran.text());
    assert_eq!(
        git(dir.path(), &["show", "HEAD:list.txt"]),
        "line 1 done\nline 2\nline 3\n"
    );
    assert_eq!(
        git(dir.path(), &["show", &format!("HEAD:{TM}")]),
        json.replace("\"pending\"", "\"done\"")
    );
}

/// A task list edited between a crash and the resume: the record a completed attempt left
/// for its task (given back on resume, its round never committed) follows that task, not the
/// plan index it had. Here task 1 completed and task 2 was still running when the run was
/// killed at its commit point; the team then removes task 1, so task 2 takes its index. Task
/// 2's attempt was cut short: it counts, and nothing says it completed.
#[test]
fn a_completed_attempts_record_follows_its_task_through_a_task_list_edited_after_a_crash() {
    const TM: &str = ".taskmaster/tasks/tasks.json";
    const ARCHIVED: &str = ".taskmaster/tasks/.dagexec/plan.done.json";
    let task = |id: u32, title: &str| {
        format!(r#"{{"id": {id}, "title": "{title}", "status": "pending", "dependencies": []}}"#)
    };
    let list = |tasks: &[String]| format!(r#"{{"tasks": [{}]}}"#, tasks.join(", "));
    let dir = tempfile::tempdir().unwrap();
    let both = list(&[task(1, "first line"), task(2, "second line")]);
    common::write_files(dir.path(), [(TM, both.as_str()), ("list.txt", LIST)]);
    common::commit_new(dir.path());
    let script = format!("[ \"$DAGEXEC_TASK_INDEX\" = 1 ] && sleep 30\n{EDIT_MY_LINE}");
    let run = |failpoint: Option<&str>| {
        let mut run = local(dir.path())
            .global(&["--plan", TM])
            .script(&script)
            .jobs(2)
            .args(["--schedule", "eager"]);
        if let Some(point) = failpoint {
            run = run.env("DAGEXEC_FAILPOINT", point);
        }
        run.run_within(Duration::from_secs(120))
    };
    let ran = run(Some("before-commit:1"));
    assert_eq!(ran.code(), None, "killed\n{}", ran.text());
    std::fs::write(dir.path().join(TM), list(&[task(2, "second line")])).unwrap();
    git(dir.path(), &["commit", "-qam", "task 1 is dropped"]);
    let ran = run(None);
    let text = ran.text();
    assert_eq!(ran.code(), Some(0), "{text}");
    assert!(!text.contains("never committed"), "{text}");
    assert!(text.contains("Task 2 was in progress"), "{text}");
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join(ARCHIVED)).unwrap()).unwrap();
    let records = plan["progress"]["dagexecAttempts"].as_array().unwrap();
    let outcomes: Vec<(u64, &str)> = records
        .iter()
        .map(|r| {
            (
                r["attempt"].as_u64().unwrap(),
                r["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(outcomes, [(2, "completed")], "{plan:#}\n{text}");
}
