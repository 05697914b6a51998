//! `schedule: eager` on Actions driven job by job without act: the plan job, then the
//! conductor (`action conduct`) as a real process against a bare remote and the fake GitHub
//! API, while this harness plays GitHub's runners: every task run the conductor dispatches
//! runs `action work` in its own fresh clone at the run's base, on its own thread (so task
//! runs really run at the same time), and its artifact is served back as a zip through the
//! fake's run, artifact and download endpoints (a redirect to storage, as GitHub does).

use crate::common::lab::{self, task};
use crate::common::{fake_github, git};

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub(crate) const BRANCH: &str = "dagexec/eager";

/// Each task sleeps its own time (task 1 is slow), logs when it ran, and writes its file;
/// task 0 fails its first attempt.
const WORKER: &str = r#"#!/bin/sh
cat > /dev/null
echo "start $DAGEXEC_TASK_INDEX $DAGEXEC_ATTEMPT $(date +%s.%N)" >> "$LAB_TIMES"
case "$DAGEXEC_TASK_INDEX" in
0) sleep 0.3 ;;
1) sleep 6 ;; # long enough for 0, its retry and 2 to start on a loaded machine
*) sleep 0.5 ;;
esac
echo "end $DAGEXEC_TASK_INDEX $DAGEXEC_ATTEMPT $(date +%s.%N)" >> "$LAB_TIMES"
if [ "$DAGEXEC_TASK_INDEX" = 0 ] && [ "$DAGEXEC_ATTEMPT" = 1 ]; then
  echo "FAILED: not on the first try"; exit 0
fi
echo "t$DAGEXEC_TASK_INDEX" > "t$DAGEXEC_TASK_INDEX.txt"
echo "COMPLETED: t$DAGEXEC_TASK_INDEX"
"#;

/// The shared lab ([`crate::common::lab`]) on branch [`BRANCH`], and what this harness
/// keeps while it plays GitHub's runners.
pub(crate) struct Lab {
    lab: lab::Lab,
    /// The workers' log of when each attempt started and ended (`$LAB_TIMES`).
    times: PathBuf,
    /// Task runs started so far (each runs once, however many conductors come and go).
    pub(crate) started: std::sync::Mutex<BTreeSet<u64>>,
    /// (task, attempt) runs that end cancelled, with no artifact.
    lost: std::sync::Mutex<BTreeSet<(String, String)>>,
    /// Task runs also upload a forged artifact.
    forge: std::sync::atomic::AtomicBool,
    /// Rewrites each task run's `result.json` before it is uploaded (task code that forged it).
    pub(crate) tamper: std::sync::Mutex<Option<fn(&mut Value)>>,
}

impl std::ops::Deref for Lab {
    type Target = lab::Lab;
    fn deref(&self) -> &lab::Lab {
        &self.lab
    }
}

impl Lab {
    fn new(tasks: Vec<Value>) -> Lab {
        Lab::with_worker(tasks, WORKER)
    }

    fn with_worker(tasks: Vec<Value>, worker: &str) -> Lab {
        Lab::with_files(tasks, worker, &[])
    }

    /// The lab with `files` committed beside the plan (another harness's, too).
    pub(crate) fn with_files(tasks: Vec<Value>, worker: &str, files: &[(&str, &str)]) -> Lab {
        Lab::with_env(tasks, worker, files, &[])
    }

    /// [`Lab::with_files`] with `env` in every runner job's environment.
    pub(crate) fn with_env(
        tasks: Vec<Value>,
        worker: &str,
        files: &[(&str, &str)],
        env: &[(&str, &str)],
    ) -> Lab {
        let mut builder = lab::lab()
            .plan("Eager", tasks)
            .worker(worker)
            .branch(BRANCH)
            .ref_name(BRANCH);
        for (rel, text) in files {
            builder = builder.file(rel, text);
        }
        let mut lab = builder.start();
        let times = lab.tmp.path().join("times.log");
        lab.set_env("LAB_TIMES", times.to_str().unwrap());
        for (k, v) in env {
            lab.set_env(k, v);
        }
        Lab {
            lab,
            times,
            started: Default::default(),
            lost: Default::default(),
            forge: Default::default(),
            tamper: Default::default(),
        }
    }

    /// A conductor run: the plan job (eager), then `action conduct` started as a process.
    pub(crate) fn conductor(&self, run_id: u64, extra: &[(&str, &str)]) -> Child {
        let planned = self.plan_job(run_id, &[("DAGEXEC_SCHEDULE", "eager")]);
        let (outputs, text) = (&planned.outputs, &planned.log);
        assert_eq!(outputs["conclusion"], "conduct", "{text}");
        assert_eq!(outputs["has-work"], "false", "{text}");
        let dir = self.checkout(&outputs["base"]);
        let mut cmd = self.job(&dir, run_id);
        cmd.args(["action", "conduct"])
            .env("DAGEXEC_BASE", &outputs["base"])
            .env("DAGEXEC_ROUND", &outputs["round"]);
        self.spawn_conducting(cmd, run_id, extra)
    }

    /// Starts `cmd`, a job that conducts run `run_id`: four task runs at once, polling every
    /// 100 ms without a rate limit, its summary and log (`conduct-<run>.log`) in the lab,
    /// then `extra` variables.
    fn spawn_conducting(
        &self,
        mut cmd: std::process::Command,
        run_id: u64,
        extra: &[(&str, &str)],
    ) -> Child {
        let log =
            std::fs::File::create(self.tmp.path().join(format!("conduct-{run_id}.log"))).unwrap();
        cmd.env("DAGEXEC_MAX_PARALLEL", "4")
            .env("DAGEXEC_POLL", "100ms")
            .env("DAGEXEC_POLLS_PER_HOUR", "100000000")
            .env(
                "GITHUB_STEP_SUMMARY",
                self.tmp.path().join(format!("summary-{run_id}.md")),
            )
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        for (k, v) in extra {
            cmd.env(k, v);
        }
        cmd.spawn().unwrap()
    }

    /// A run whose plan job also conducts (`conduct: true`, as `init --schedule eager`
    /// writes it): `action plan` started as a process in a fresh clone of `main`.
    pub(crate) fn plan_conductor(&self, run_id: u64, extra: &[(&str, &str)]) -> Child {
        let dir = self.checkout("main");
        let mut cmd = self.job(&dir, run_id);
        cmd.args(["action", "plan"])
            .env("DAGEXEC_SCHEDULE", "eager")
            .env("DAGEXEC_CONDUCT", "true");
        self.spawn_conducting(cmd, run_id, extra)
    }

    pub(crate) fn conduct_log(&self, run_id: u64) -> String {
        std::fs::read_to_string(self.tmp.path().join(format!("conduct-{run_id}.log")))
            .unwrap_or_default()
    }

    /// The status comment dagexec keeps on the pull request: its id and body.
    pub(crate) fn status_comment(&self) -> Option<(u64, String)> {
        let st = self.gh.state();
        let c = st
            .comments
            .iter()
            .find(|c| c.body.starts_with("<!-- dagexec:status -->"))?;
        Some((c.id, c.body.clone()))
    }

    /// `/execute abort` from octocat, marked on the status comment as the comment job marks
    /// it; `false` while there is no status comment to mark (nothing is asked then).
    pub(crate) fn ask_abort(&self) -> bool {
        let Some((id, body)) = self.status_comment() else {
            return false;
        };
        let asked = self
            .gh
            .add_comment(&self.repository, 1, "octocat", "/execute abort");
        let marked =
            format!("{body}\n<!-- dagexec:abort-requested -->\n<!-- dagexec:abort-by:{asked} -->");
        self.gh.edit_comment(id, &marked);
        true
    }

    /// Plays the runners ([`Lab::run_dispatched`]) until the status comment exists, then
    /// asks `/execute abort` ([`Lab::ask_abort`]). Returns the threads started.
    pub(crate) fn abort_once_the_status_comment_exists(
        self: &Arc<Self>,
    ) -> Vec<std::thread::JoinHandle<()>> {
        let t0 = Instant::now();
        let mut threads = Vec::new();
        loop {
            threads.extend(self.run_dispatched());
            if self.ask_abort() {
                return threads;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "{}",
                self.conduct_log(1)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Plays GitHub's runners: starts every task run dispatched so far that has not been
    /// started yet, each on its own thread. Returns the threads started.
    pub(crate) fn run_dispatched(self: &Arc<Self>) -> Vec<std::thread::JoinHandle<()>> {
        let mut threads = Vec::new();
        for d in self.gh.state().dispatches {
            let task = d.inputs["task"].as_str().unwrap_or_default().to_string();
            if task.is_empty() || !self.started.lock().unwrap().insert(d.run_id) {
                continue;
            }
            let lab = self.clone();
            threads.push(std::thread::spawn(move || lab.task_run(&d)));
        }
        threads
    }

    /// One task run: the `task` job (`action work` at the run's base), its artifact zipped.
    pub(crate) fn task_run(&self, d: &fake_github::Dispatch) {
        self.gh.start_run(d.run_id);
        let input = |k: &str| d.inputs[k].as_str().unwrap().to_string();
        let (task, attempt, base) = (input("task"), input("attempt"), input("base"));
        // A run GitHub cancelled before its job uploaded anything (a lost runner).
        if self
            .lost
            .lock()
            .unwrap()
            .remove(&(task.clone(), attempt.clone()))
        {
            self.gh.finish_run(d.run_id, "cancelled", Vec::new());
            return;
        }
        assert_eq!(d.git_ref, BRANCH, "task runs are dispatched on the branch");
        let artifacts = self.tmp.path().join(format!("artifact-{}", d.run_id));
        let entry = (task.parse().unwrap(), attempt.parse().unwrap());
        self.work_job(d.run_id, entry, "0", &base, &artifacts);
        if let Some(tamper) = *self.tamper.lock().unwrap() {
            let path = artifacts.join("result.json");
            let mut result: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            tamper(&mut result);
            std::fs::write(&path, result.to_string()).unwrap();
        }
        let name = format!("dagexec-{}-1-task-{task}-attempt-{attempt}", d.run_id);
        let mut uploaded = vec![(name, zip_dir(&artifacts))];
        if self.forge.load(Ordering::SeqCst) {
            // Task code beside the runner's token uploads one of its own.
            let forged = format!("dagexec-{}-1-task-9-attempt-1", d.run_id);
            uploaded.insert(0, (forged, zip_dir(&artifacts)));
        }
        self.gh.finish_run(d.run_id, "success", uploaded);
    }

    /// Runs task runs until the conductor exits; its exit code.
    pub(crate) fn drive(self: &Arc<Self>, mut conductor: Child, limit: Duration) -> i32 {
        let mut threads = Vec::new();
        let t0 = Instant::now();
        loop {
            threads.extend(self.run_dispatched());
            if let Some(status) = conductor.try_wait().unwrap() {
                for t in threads {
                    t.join().unwrap();
                }
                return status.code().unwrap_or(-1);
            }
            if t0.elapsed() > limit {
                let _ = conductor.kill();
                panic!("the conductor did not end within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// (task, attempt) → (start, end) seconds, from the workers' own log.
    pub(crate) fn times(&self) -> BTreeMap<(u64, u64), (f64, f64)> {
        let mut out: BTreeMap<(u64, u64), (f64, f64)> = BTreeMap::new();
        for line in std::fs::read_to_string(&self.times).unwrap().lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let key = (f[1].parse().unwrap(), f[2].parse().unwrap());
            let at: f64 = f[3].parse().unwrap();
            let e = out.entry(key).or_insert((0.0, 0.0));
            if f[0] == "start" {
                e.0 = at;
            } else {
                e.1 = at;
            }
        }
        out
    }
}

fn zip_dir(dir: &Path) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let o = zip::write::SimpleFileOptions::default();
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    for name in names {
        w.start_file(name.as_str(), o).unwrap();
        w.write_all(&std::fs::read(dir.join(&name)).unwrap())
            .unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// 0 and 1 start at once; 2 (after 0) starts while slow 1 still runs — a round would wait
/// for 1; 3 waits for both. Task 0's first attempt fails and is retried from a base whose
/// plan holds its retry prompt.
fn diamond() -> Vec<Value> {
    vec![
        task("zero", &["t0.txt"], &[]),
        task("one (slow)", &["t1.txt"], &[]),
        task("two", &["t2.txt"], &[0]),
        task("three", &["t3.txt"], &[1, 2]),
    ]
}

/// [`WORKER`], but slow task 1 ends only once task 2 has started, and task 0 only once task
/// 1 has (each at most a minute): 0 and 1 run side by side and 2 starts while 1 runs however
/// slow the machine is (under CI's load 1's run started after 0's 0.3 s had ended), and a
/// conductor that waited for 1 fails.
fn worker_until_two_starts() -> String {
    let wait = "1) i=0; while ! grep -q '^start 2 ' \"$LAB_TIMES\" && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done ;;";
    let slow = WORKER.lines().find(|l| l.starts_with("1) ")).unwrap();
    let beside = "0) i=0; while ! grep -q '^start 1 ' \"$LAB_TIMES\" && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done ;;";
    let quick = WORKER.lines().find(|l| l.starts_with("0) ")).unwrap();
    WORKER.replace(slow, wait).replace(quick, beside)
}

#[test]
fn eager_on_actions_starts_each_task_when_its_blockers_land_and_commits_each_arrival() {
    let lab = Arc::new(Lab::with_worker(diamond(), &worker_until_two_starts()));
    let conductor = lab.conductor(1, &[]);
    let code = lab.drive(conductor, Duration::from_secs(120));
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");

    let plan = lab.branch_plan();
    for (i, t) in plan["tasks"].as_array().unwrap().iter().enumerate() {
        assert_eq!(t["status"], "completed", "task {i}: {t:#}\n{log}");
        assert!(
            t.get("dagexecRun").is_none(),
            "task {i} still records a run"
        );
    }
    let attempts: Vec<u64> = plan["progress"]["completedTasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["attempts"].as_u64().unwrap_or(1))
        .collect();
    assert!(attempts.contains(&2), "task 0 took two attempts: {plan:#}");

    // Eager: task 2 started (after 0's retry landed) while slow task 1 was still running,
    // and 0 and 1 ran at the same time.
    let times = lab.times();
    let (one_start, one_end) = times[&(1, 1)];
    let (two_start, _) = times[&(2, 1)];
    let (zero_start, _) = times[&(0, 1)];
    assert!(
        zero_start < one_end && one_start < times[&(0, 1)].1,
        "{times:?}"
    );
    assert!(
        two_start < one_end,
        "task 2 waited for task 1: {times:?}\n{log}"
    );
    assert!(times[&(3, 1)].0 >= one_end, "{times:?}");

    // The job summary lists every attempt the conductor judged, in the order they ended.
    let summary = std::fs::read_to_string(lab.tmp.path().join("summary-1.md")).unwrap_or_default();
    assert!(
        summary.contains("### Attempts judged in this job"),
        "{summary}"
    );
    let rows: Vec<&str> = summary.lines().filter(|l| l.starts_with("| 20")).collect();
    assert_eq!(rows.len(), 5, "{summary}");
    assert!(
        rows.iter()
            .any(|r| r.contains("| 1 | ❌ failed → attempt 2 |")),
        "{summary}"
    );
    assert!(summary.contains("Round "), "{summary}");
    assert!(!summary.contains("0/0 tasks"), "{summary}");

    // One dispatch per attempt, each on the branch with its base; the retry's base holds
    // the retry prompt.
    let dispatches = lab.gh.state().dispatches;
    let tasks: Vec<(String, String)> = dispatches
        .iter()
        .map(|d| {
            (
                d.inputs["task"].as_str().unwrap().to_string(),
                d.inputs["attempt"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(tasks.len(), 5, "{tasks:?}");
    let retry = dispatches
        .iter()
        .find(|d| d.inputs["task"] == "0" && d.inputs["attempt"] == "2")
        .unwrap();
    let at_base: Value = serde_json::from_str(&git(
        &lab.origin,
        &[
            "show",
            &format!(
                "{}:.design/plan.json",
                retry.inputs["base"].as_str().unwrap()
            ),
        ],
    ))
    .unwrap();
    assert!(
        at_base["tasks"][0]["dagexecRetryPrompt"]
            .as_str()
            .unwrap_or_default()
            .contains("not on the first try"),
        "{at_base:#}"
    );

    // A commit per batch of arrivals, in the one round format; the files all landed.
    let commits = lab.branch_log();
    assert!(
        commits
            .iter()
            .filter(|c| c.starts_with("dagexec: round "))
            .count()
            >= 4,
        "{commits:#?}"
    );
    for f in ["t0.txt", "t1.txt", "t2.txt", "t3.txt"] {
        git(&lab.origin, &["cat-file", "-e", &format!("{BRANCH}:{f}")]);
    }
    // The pull request and the check run moved with it.
    let st = lab.gh.state();
    assert_eq!(st.pulls.len(), 1);
    assert!(!st.pulls[0].draft, "completed: ready for review");
    assert_eq!(
        st.check_runs.last().unwrap().conclusion.as_deref(),
        Some("success")
    );
    lab.gh.assert_clean();
}

/// Three tasks that run side by side, each for a second.
fn three_side_by_side() -> (Vec<Value>, &'static str) {
    (
        vec![
            task("one", &["t0.txt"], &[]),
            task("two", &["t1.txt"], &[]),
            task("three", &["t2.txt"], &[]),
        ],
        r#"#!/bin/sh
cat > /dev/null
sleep 1
echo "t$DAGEXEC_TASK_INDEX" > "t$DAGEXEC_TASK_INDEX.txt"; echo "COMPLETED: t$DAGEXEC_TASK_INDEX"
"#,
    )
}

#[test]
fn a_poll_is_one_listing_of_the_branchs_runs_however_many_are_in_flight() {
    let (tasks, worker) = three_side_by_side();
    let lab = Arc::new(Lab::with_worker(tasks, worker));
    let conductor = lab.conductor(1, &[]);
    let code = lab.drive(conductor, Duration::from_secs(120));
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("Conductor: completed."), "{log}");
    // Three runs in flight cost one request a poll, not three: no run is read on its own.
    assert_eq!(lab.gh.state().dispatches.len(), 3, "{log}");
    assert!(
        lab.gh.calls("actions/get-workflow-run").is_empty(),
        "runs read one by one:\n{log}"
    );
    assert!(!lab.gh.calls("actions/list-workflow-runs").is_empty());
    lab.gh.assert_clean();
}

/// After pushing a batch's commit the conductor knows where `HEAD` is: it takes the commit
/// as what it last pushed without asking git again; only building a commit on it asks (the
/// round's index).
#[test]
fn the_conductor_does_not_ask_for_head_again_after_pushing_it() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("git-calls");
    let front = crate::common::git_in_front(
        dir.path(),
        &format!(
            "case \"$(tr '\\0' ' ' < /proc/$PPID/cmdline)\" in *'action conduct'*) echo \"$*\" >> '{}';; esac",
            seen.display()
        ),
    );
    let path = format!("{}:{}", front.display(), std::env::var("PATH").unwrap());
    let (tasks, worker) = three_side_by_side();
    let lab = Arc::new(Lab::with_env(tasks, worker, &[], &[("PATH", &path)]));
    let conductor = lab.conductor(1, &[]);
    let code = lab.drive(conductor, Duration::from_secs(120));
    assert_eq!(code, 0, "{}", lab.conduct_log(1));
    let calls = std::fs::read_to_string(&seen).unwrap();
    let calls: Vec<&str> = calls.lines().collect();
    let head = |c: &str| c.ends_with("rev-parse --verify --quiet HEAD^{commit}");
    let writes = |c: &str| {
        [" commit-tree ", " commit ", " update-ref "]
            .iter()
            .any(|w| c.contains(w))
    };
    let mut windows = 0;
    for (i, call) in calls.iter().enumerate() {
        if !(call.contains(" push ") && call.contains("HEAD:refs/heads/")) {
            continue;
        }
        // From the push to the next commit's start (the plan read, or an index), unless a
        // write comes first; the last push ends the conductor.
        let rest = &calls[i + 1..];
        let starts = |c: &&str| c.contains(" cat-file ") || c.contains(" read-tree ");
        let Some(end) = rest.iter().position(starts) else {
            continue;
        };
        let window = &rest[..=end];
        if window.iter().any(|c| writes(c)) {
            continue;
        }
        windows += 1;
        // Asked only to build a commit on it (an index read from it next).
        for (j, c) in window.iter().enumerate() {
            let next = rest.get(j + 1).copied().unwrap_or_default();
            assert!(!head(c) || next.contains(" read-tree "), "{window:#?}");
        }
    }
    assert!(windows >= 2, "{calls:#?}");
}

#[test]
fn a_run_the_polls_listing_does_not_hold_is_read_on_its_own() {
    // More than 100 newer runs on the branch push a long task's run off the listing's one
    // page (played by a listing that holds none): it is read alone and judged as usual.
    let (tasks, worker) = three_side_by_side();
    let lab = Arc::new(Lab::with_worker(tasks, worker));
    for _ in 0..3 {
        lab.gh.fail_next(
            "actions/list-workflow-runs",
            200,
            &[],
            json!({"total_count": 0, "workflow_runs": []}),
        );
    }
    let conductor = lab.conductor(1, &[]);
    let code = lab.drive(conductor, Duration::from_secs(120));
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    let plan = lab.branch_plan();
    for c in plan["progress"]["completedTasks"].as_array().unwrap() {
        assert_eq!(c["attempts"], 1, "{plan:#}");
    }
    assert_eq!(lab.gh.state().dispatches.len(), 3, "{log}");
    assert!(
        lab.gh.calls("actions/get-workflow-run").len() >= 3,
        "the runs the listing missed were read alone:\n{log}"
    );
    lab.gh.assert_clean();
}

#[test]
fn a_task_its_blocker_unblocked_is_dispatched_before_the_pull_request_is_told() {
    let lab = Arc::new(Lab::with_worker(
        vec![
            task("one", &["t0.txt"], &[]),
            task("two", &["t1.txt"], &[0]),
        ],
        r#"#!/bin/sh
cat > /dev/null
echo "t$DAGEXEC_TASK_INDEX" > "t$DAGEXEC_TASK_INDEX.txt"; echo "COMPLETED: t$DAGEXEC_TASK_INDEX"
"#,
    ));
    let conductor = lab.conductor(1, &[]);
    let code = lab.drive(conductor, Duration::from_secs(120));
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    // Between task 0's dispatch and task 1's: its arrival judged, committed and pushed, and
    // `/execute abort` looked for (the pull request's comments listed), but the pull request's
    // body and status comment are brought up to date only after task 1 is dispatched.
    let calls: Vec<(String, String)> = lab
        .gh
        .requests()
        .iter()
        .map(|r| {
            let task = r
                .body
                .as_ref()
                .and_then(|b| b["inputs"]["task"].as_str())
                .unwrap_or_default()
                .to_string();
            (r.operation_id.clone(), task)
        })
        .collect();
    let dispatch = |t: &str| {
        calls
            .iter()
            .position(|(op, task)| op == "actions/create-workflow-dispatch" && task == t)
            .unwrap_or_else(|| panic!("task {t} dispatched: {calls:?}"))
    };
    let between: Vec<&str> = calls[dispatch("0")..dispatch("1")]
        .iter()
        .map(|(op, _)| op.as_str())
        .collect();
    assert!(
        between.contains(&"issues/list-comments"),
        "abort was looked for: {between:?}"
    );
    for told in ["pulls/update", "issues/update-comment", "pulls/list"] {
        assert!(
            !between.contains(&told),
            "{told} before task 1 was dispatched: {between:?}"
        );
    }
    let after: Vec<&str> = calls[dispatch("1")..]
        .iter()
        .map(|(op, _)| op.as_str())
        .collect();
    assert!(after.contains(&"pulls/update"), "{after:?}");
    // The pull request ends told all the same.
    let st = lab.gh.state();
    assert!(!st.pulls[0].draft, "completed: ready for review");
    lab.gh.assert_clean();
}

#[test]
fn a_conductor_killed_mid_run_is_resumed_from_the_branch_alone() {
    let lab = Arc::new(Lab::new(diamond()));
    let mut conductor = lab.conductor(1, &[]);
    // Play runners until the first arrival is committed and pushed, then kill -9 it.
    let mut threads = Vec::new();
    let t0 = Instant::now();
    while !lab
        .branch_log()
        .iter()
        .any(|c| c.starts_with("dagexec: round 1"))
    {
        threads.extend(lab.run_dispatched());
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{}",
            lab.conduct_log(1)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    conductor.kill().unwrap();
    conductor.wait().unwrap();
    // The runs it started keep running, as GitHub's would.
    threads.extend(lab.run_dispatched());
    let in_flight: Vec<usize> = lab.branch_plan()["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, t)| t.get("dagexecRun").is_some())
        .map(|(i, _)| i)
        .collect();
    assert!(
        !in_flight.is_empty(),
        "the round commit records the runs in flight: {:#}",
        lab.branch_plan()
    );

    // `/execute` (or any dispatch) starts a fresh conductor from the branch alone.
    let second = lab.conductor(2, &[]);
    for t in threads {
        t.join().unwrap();
    }
    let code = lab.drive(second, Duration::from_secs(120));
    let log = lab.conduct_log(2);
    assert_eq!(code, 0, "{log}");
    for i in &in_flight {
        assert!(log.contains(&format!("Adopting task {i} ")), "{log}");
    }
    let plan = lab.branch_plan();
    for (i, t) in plan["tasks"].as_array().unwrap().iter().enumerate() {
        assert_eq!(t["status"], "completed", "task {i}: {t:#}\n{log}");
    }
    // No task was integrated twice: one completedTasks entry each.
    let done: Vec<u64> = plan["progress"]["completedTasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["index"].as_u64().unwrap())
        .collect();
    assert_eq!(done.iter().collect::<BTreeSet<_>>().len(), 4, "{done:?}");
    assert_eq!(done.len(), 4, "{done:?}");
    lab.gh.assert_clean();
}

#[test]
fn a_conductor_hands_over_before_the_job_limit_and_its_successor_adopts_the_runs() {
    let lab = Arc::new(Lab::new(diamond()));
    let first = lab.conductor(1, &[("DAGEXEC_HANDOVER_AFTER", "1s")]);
    let code = lab.drive(first, Duration::from_secs(60));
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("Handed over after"), "{log}");
    let successor = lab
        .gh
        .state()
        .dispatches
        .into_iter()
        .find(|d| d.inputs.get("task").is_none())
        .expect("a successor conductor run was dispatched");
    assert_eq!(successor.git_ref, BRANCH);
    assert!(
        lab.branch_log()
            .iter()
            .any(|c| c.starts_with("dagexec: conductor hands over")),
        "{:#?}",
        lab.branch_log()
    );
    let second = lab.conductor(2, &[]);
    let code = lab.drive(second, Duration::from_secs(120));
    let log = lab.conduct_log(2);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("Adopting task"), "{log}");
    for t in lab.branch_plan()["tasks"].as_array().unwrap() {
        assert_eq!(t["status"], "completed", "{t:#}\n{log}");
    }
    lab.gh.assert_clean();
}

#[test]
fn execute_abort_given_during_a_handover_stops_the_successor_starting_tasks() {
    // `/execute abort` marks the status comment while the successor waits in the branch's
    // group: the successor integrates the runs it adopts and starts nothing new.
    let lab = Arc::new(Lab::new(diamond()));
    let first = lab.conductor(1, &[("DAGEXEC_HANDOVER_AFTER", "1s")]);
    let code = lab.drive(first, Duration::from_secs(60));
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("Handed over after"), "{log}");
    let tasks_dispatched = |lab: &Lab| {
        let st = lab.gh.state();
        st.dispatches
            .iter()
            .filter(|d| d.inputs.get("task").is_some())
            .count()
    };
    let before = tasks_dispatched(&lab);
    assert!(lab.ask_abort(), "the status comment");
    let second = lab.conductor(2, &[]);
    let code = lab.drive(second, Duration::from_secs(120));
    let log = lab.conduct_log(2);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("Conductor: aborted."), "{log}");
    assert_eq!(
        tasks_dispatched(&lab),
        before,
        "nothing new started:\n{log}"
    );
    let plan = lab.branch_plan();
    for (i, t) in plan["tasks"].as_array().unwrap().iter().enumerate() {
        assert_ne!(t["status"], "in_progress", "task {i}: {t:#}\n{log}");
        assert!(t.get("dagexecRun").is_none(), "task {i}: {t:#}\n{log}");
    }
    lab.gh.assert_clean();
}

#[test]
fn a_conductor_that_found_execute_abort_stops_at_its_handover_instead_of_starting_a_successor() {
    // The abort is found at quick task 1's batch while slow task 0 runs; the handover comes
    // before task 0 ends. A successor would not know of the abort (its marker is consumed):
    // the conductor stops as aborted, task 0's run left recorded for a later `/execute`.
    let lab = Arc::new(Lab::with_worker(
        vec![
            task("slow", &["t0.txt"], &[]),
            task("quick", &["t1.txt"], &[]),
            task("after", &["t2.txt"], &[1]),
        ],
        r#"#!/bin/sh
cat > /dev/null
[ "$DAGEXEC_TASK_INDEX" = 0 ] && sleep 14
echo x > "t$DAGEXEC_TASK_INDEX.txt"; echo "COMPLETED: t$DAGEXEC_TASK_INDEX"
"#,
    ));
    let conductor = lab.conductor(1, &[("DAGEXEC_HANDOVER_AFTER", "8s")]);
    let threads = lab.abort_once_the_status_comment_exists();
    let code = lab.drive(conductor, Duration::from_secs(60));
    for t in threads {
        t.join().unwrap();
    }
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("`/execute abort`: no new task starts"),
        "{log}"
    );
    assert!(log.contains("Conductor: aborted."), "{log}");
    let dispatched: Vec<Value> = lab
        .gh
        .state()
        .dispatches
        .iter()
        .map(|d| d.inputs.get("task").cloned().unwrap_or(Value::Null))
        .collect();
    assert_eq!(
        dispatched,
        vec![json!("0"), json!("1")],
        "no successor, nothing new:\n{log}"
    );
    let plan = lab.branch_plan();
    assert_eq!(plan["tasks"][1]["status"], "completed", "{plan:#}");
    assert_eq!(plan["tasks"][2]["status"], "pending", "{plan:#}");
    let slow = &plan["tasks"][0];
    assert_eq!(slow["status"], "in_progress", "{slow:#}");
    assert!(slow.get("dagexecRun").is_some(), "{slow:#}");
    lab.gh.assert_clean();
}

/// Task 0 never works; 1–3 need it; 4 is slow and independent.
/// Task 0 always fails; slow task 4 outlasts task 0's three attempts: it ends only once the
/// conductor has (its last line, `Conductor: …`, in the lab's conduct-1.log beside
/// `$LAB_TIMES`; at most two minutes), so it is in flight when the breaker stops the conductor
/// however long the three attempts take.
const BREAKER_WORKER: &str = r#"#!/bin/sh
cat > /dev/null
case "$DAGEXEC_TASK_INDEX" in
0) echo "FAILED: never works" ;;
4) log="$(dirname "$LAB_TIMES")/conduct-1.log"; i=0
   while ! grep -q '^Conductor: ' "$log" 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done
   echo t4 > t4.txt; echo "COMPLETED: t4" ;;
*) echo "t$DAGEXEC_TASK_INDEX" > "t$DAGEXEC_TASK_INDEX.txt"; echo "COMPLETED: t$DAGEXEC_TASK_INDEX" ;;
esac
"#;

#[test]
fn the_circuit_breaker_stops_the_conductor_with_its_numbers_and_keeps_the_runs_in_flight() {
    let lab = Arc::new(Lab::with_worker(
        vec![
            task("base", &["t0.txt"], &[]),
            task("a", &["t1.txt"], &[0]),
            task("b", &["t2.txt"], &[0]),
            task("c", &["t3.txt"], &[0]),
            task("slow", &["t4.txt"], &[]),
        ],
        BREAKER_WORKER,
    ));
    let conductor = lab.conductor(1, &[]);
    let code = lab.drive(conductor, Duration::from_secs(120));
    let log = lab.conduct_log(1);
    assert_eq!(code, 1, "a breaker stop fails the job:\n{log}");
    let plan = lab.branch_plan();
    assert_eq!(plan["tasks"][0]["status"], "failed", "{plan:#}");
    assert_eq!(plan["tasks"][0]["attempts"], 3, "{plan:#}");
    for i in 1..=3 {
        assert_eq!(plan["tasks"][i]["status"], "skipped", "{plan:#}");
    }
    // Slow task 4 was still running: recorded, for a later conductor to adopt.
    assert!(plan["tasks"][4].get("dagexecRun").is_some(), "{plan:#}");
    let st = lab.gh.state();
    let check = st.check_runs.last().unwrap();
    assert_eq!(check.conclusion.as_deref(), Some("failure"));
    let text = check.output.as_ref().unwrap().to_string();
    // Pending when the cascade ran: 1–3 (task 4 was running, not pending).
    assert!(
        text.contains("3/3 pending tasks"),
        "the breaker's numbers: {text}"
    );
    lab.gh.assert_clean();
}

const BLOCKED_WORKER: &str = r#"#!/bin/sh
cat > /dev/null
case "$DAGEXEC_TASK_INDEX" in
0) echo "BLOCKED: which database should the cache use?" ;;
*) echo t1 > t1.txt; echo "COMPLETED: t1" ;;
esac
"#;

#[test]
fn a_blocked_task_asks_on_the_pull_request_and_the_conductor_ends_waiting_for_the_answer() {
    let lab = Arc::new(Lab::with_worker(
        vec![
            task("cache", &["t0.txt"], &[]),
            task("docs", &["t1.txt"], &[]),
            task("use cache", &["t2.txt"], &[0]),
        ],
        BLOCKED_WORKER,
    ));
    let conductor = lab.conductor(1, &[]);
    let code = lab.drive(conductor, Duration::from_secs(120));
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("Conductor: needs-input."), "{log}");
    let plan = lab.branch_plan();
    assert_eq!(plan["tasks"][0]["status"], "blocked", "{plan:#}");
    assert_eq!(plan["tasks"][1]["status"], "completed", "{plan:#}");
    let st = lab.gh.state();
    assert!(
        st.comments
            .iter()
            .any(|c| c.body.contains("<!-- dagexec:question:0 -->")
                && c.body.contains("which database")),
        "{:#?}",
        st.comments
    );
    assert_eq!(
        st.check_runs.last().unwrap().conclusion.as_deref(),
        Some("action_required")
    );
    lab.gh.assert_clean();
}

/// An answer given while the conductor runs: its steer job waits in the branch's group until
/// the conductor ends, so the conductor applies it at its next commit — the blocked task
/// runs again with the answer, and the run completes instead of stopping for input.
#[test]
fn an_answer_queued_while_the_conductor_runs_is_applied_at_its_next_commit() {
    let flag = tempfile::tempdir().unwrap();
    let go = flag.path().join("go");
    let worker = format!(
        r#"#!/bin/sh
prompt=$(cat)
case "$DAGEXEC_TASK_INDEX" in
0) if printf '%s' "$prompt" | grep -q 'use sqlite'; then echo t0 > t0.txt; echo "COMPLETED: used sqlite";
   else echo "BLOCKED: which database should the cache use?"; fi ;;
*) i=0; while [ ! -f '{}' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
   echo t1 > t1.txt; echo "COMPLETED: t1" ;;
esac
"#,
        go.display()
    );
    let lab = Arc::new(Lab::with_worker(
        vec![
            task("cache", &["t0.txt"], &[]),
            task("docs", &["t1.txt"], &[]),
        ],
        &worker,
    ));
    let conductor = lab.conductor(1, &[]);
    // Once task 0's question is on the pull request (task 1 still running), the user answers.
    let user = {
        let lab = lab.clone();
        std::thread::spawn(move || {
            let t0 = Instant::now();
            while !lab
                .gh
                .state()
                .comments
                .iter()
                .any(|c| c.body.starts_with("<!-- dagexec:question:0 -->"))
            {
                assert!(t0.elapsed() < Duration::from_secs(60), "no question asked");
                std::thread::sleep(Duration::from_millis(50));
            }
            let (id, text) = lab.comment_jobs(90, 1, "/execute answer 0 use sqlite", false);
            std::fs::write(&go, "").unwrap();
            (id, text)
        })
    };
    let code = lab.drive(conductor, Duration::from_secs(120));
    let (id, text) = user.join().unwrap();
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}\n{text}");
    assert!(log.contains("Conductor: completed."), "{log}");
    let plan = lab.branch_plan();
    assert_eq!(plan["progress"]["dagexecSteered"], json!([id]), "{plan:#}");
    assert!(
        lab.branch_log()
            .iter()
            .any(|s| s.starts_with("dagexec: answer to task 0")),
        "{:?}",
        lab.branch_log()
    );
    // Kept beside the branch with the push that applied it: a force-push that drops that
    // commit does not make the answer queued again.
    let settled = format!("refs/dagexec/settled/{BRANCH}:dagexec-settled");
    let settled = git(&lab.origin, &["show", &settled]);
    assert!(settled.lines().any(|l| l == id.to_string()), "{settled:?}");
    lab.gh.assert_clean();
}

#[test]
fn a_run_lost_without_an_artifact_is_a_failed_attempt_and_the_task_is_retried() {
    let lab = Arc::new(Lab::with_worker(
        vec![task("one", &["t1.txt"], &[])],
        r#"#!/bin/sh
cat > /dev/null
echo t1 > t1.txt; echo "COMPLETED: t1"
"#,
    ));
    lab.lost
        .lock()
        .unwrap()
        .insert(("0".to_string(), "1".to_string()));
    // GitHub's rate limit on the first poll: the conductor waits and polls again.
    let reset = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 1)
    .to_string();
    lab.gh.fail_next(
        "actions/list-workflow-runs",
        403,
        &[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", &reset),
        ],
        json!({"message": "API rate limit exceeded"}),
    );
    let conductor = lab.conductor(1, &[]);
    let code = lab.drive(conductor, Duration::from_secs(120));
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("no artifact from its job"), "{log}");
    let plan = lab.branch_plan();
    assert_eq!(plan["tasks"][0]["status"], "completed", "{plan:#}");
    assert_eq!(
        plan["progress"]["completedTasks"][0]["attempts"], 2,
        "{plan:#}"
    );
    // Every finished attempt leaves its record, the cancelled one too (spanning its run).
    let records: Vec<(Value, Value, Value)> = plan["progress"]["dagexecAttempts"]
        .as_array()
        .unwrap_or_else(|| panic!("{plan:#}"))
        .iter()
        .map(|r| {
            (
                r["task"].clone(),
                r["attempt"].clone(),
                r["outcome"].clone(),
            )
        })
        .collect();
    assert_eq!(
        records,
        [
            (json!(0), json!(1), json!("failed")),
            (json!(0), json!(2), json!("completed"))
        ],
        "{plan:#}"
    );
    assert!(lab.gh.calls("actions/list-workflow-runs").len() >= 2);
    lab.gh.assert_clean();
}

#[test]
fn execute_abort_stops_starting_tasks_and_integrates_what_is_in_flight() {
    let lab = Arc::new(Lab::with_worker(
        vec![
            task("slow", &["t0.txt"], &[]),
            task("after", &["t1.txt"], &[0]),
        ],
        r#"#!/bin/sh
cat > /dev/null
[ "$DAGEXEC_TASK_INDEX" = 0 ] && sleep 2
echo x > "t$DAGEXEC_TASK_INDEX.txt"; echo "COMPLETED: t$DAGEXEC_TASK_INDEX"
"#,
    ));
    let conductor = lab.conductor(1, &[]);
    // Once the status comment exists, `/execute abort` marks it (as the comment job does).
    let threads = lab.abort_once_the_status_comment_exists();
    let code = lab.drive(conductor, Duration::from_secs(60));
    for t in threads {
        t.join().unwrap();
    }
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("Conductor: aborted."), "{log}");
    let plan = lab.branch_plan();
    assert_eq!(plan["tasks"][0]["status"], "completed", "{plan:#}");
    assert_eq!(plan["tasks"][1]["status"], "pending", "{plan:#}");
    let started: Vec<Value> = lab
        .gh
        .state()
        .dispatches
        .iter()
        .map(|d| d.inputs["task"].clone())
        .collect();
    assert_eq!(
        started,
        vec![json!("0")],
        "nothing new started after the abort"
    );
    lab.gh.assert_clean();
}

#[test]
fn a_run_deleted_on_github_is_a_failed_attempt_not_a_dead_conductor() {
    let lab = Arc::new(Lab::with_worker(
        vec![task("one", &["t1.txt"], &[])],
        r#"#!/bin/sh
cat > /dev/null
echo t1 > t1.txt; echo "COMPLETED: t1"
"#,
    ));
    // The poll's listing no longer holds the run, and reading it alone finds it gone.
    lab.gh.fail_next(
        "actions/list-workflow-runs",
        200,
        &[],
        json!({"total_count": 0, "workflow_runs": []}),
    );
    lab.gh.fail_next(
        "actions/get-workflow-run",
        404,
        &[],
        json!({"message": "Not Found"}),
    );
    let conductor = lab.conductor(1, &[]);
    let code = lab.drive(conductor, Duration::from_secs(120));
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("ended (gone)"), "{log}");
    let plan = lab.branch_plan();
    let attempts = plan["progress"]["dagexecAttempts"].as_array().map(Vec::len);
    assert_eq!(
        attempts,
        Some(2),
        "a record for the run that is gone too: {plan:#}"
    );
    assert_eq!(
        plan["progress"]["completedTasks"][0]["attempts"], 2,
        "{plan:#}"
    );
    lab.gh.assert_clean();
}

#[test]
fn another_artifact_in_a_task_run_is_ignored_and_reported() {
    let lab = Arc::new(Lab::with_worker(
        vec![task("one", &["t1.txt"], &[])],
        r#"#!/bin/sh
cat > /dev/null
echo t1 > t1.txt; echo "COMPLETED: t1"
"#,
    ));
    lab.forge.store(true, Ordering::SeqCst);
    let conductor = lab.conductor(1, &[]);
    let code = lab.drive(conductor, Duration::from_secs(120));
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    let plan = lab.branch_plan();
    assert_eq!(plan["tasks"][0]["status"], "completed", "{plan:#}");
    assert!(
        log.contains("ignored artifact dagexec-7001-1-task-9-attempt-1 of run 7001"),
        "{log}"
    );
    // Only the task's own artifact was downloaded.
    assert_eq!(lab.gh.calls("actions/download-artifact").len(), 1);
    lab.gh.assert_clean();
}

/// Every task reports $0.40 in its usage file.
const PAYING_WORKER: &str = r#"#!/bin/sh
cat > /dev/null
printf '{"cost_usd": 0.4, "model": "m-1"}' > "$DAGEXEC_USAGE_FILE"
echo "t$DAGEXEC_TASK_INDEX" > "t$DAGEXEC_TASK_INDEX.txt"
echo "COMPLETED: t$DAGEXEC_TASK_INDEX"
"#;

/// The `max-cost` budget stops the conductor from starting task runs once the recorded spend
/// reaches it: what ran is committed with its cost, and the check run fails naming the budget.
#[test]
fn the_budget_stops_the_conductor_starting_runs() {
    let lab = Arc::new(Lab::with_worker(
        vec![
            task("a", &["t0.txt"], &[]),
            task("b", &["t1.txt"], &[]),
            task("after both", &["t2.txt"], &[0, 1]),
        ],
        PAYING_WORKER,
    ));
    let conductor = lab.conductor(1, &[("DAGEXEC_MAX_COST", "0.5")]);
    let code = lab.drive(conductor, Duration::from_secs(120));
    let log = lab.conduct_log(1);
    assert_eq!(code, 1, "a spent budget fails the job:\n{log}");
    let dispatched: Vec<String> = lab
        .gh
        .state()
        .dispatches
        .iter()
        .filter_map(|d| d.inputs["task"].as_str().map(str::to_string))
        .collect();
    assert_eq!(dispatched.len(), 2, "{dispatched:?}\n{log}");
    assert!(!dispatched.contains(&"2".to_string()), "{dispatched:?}");
    let plan = lab.branch_plan();
    assert_eq!(plan["tasks"][2]["status"], "pending", "{plan:#}");
    let costs: Vec<_> = plan["progress"]["dagexecAttempts"]
        .as_array()
        .unwrap_or_else(|| panic!("{plan:#}"))
        .iter()
        .map(|r| r["costUsd"].clone())
        .collect();
    assert_eq!(costs, [json!(0.4), json!(0.4)], "{plan:#}");
    let st = lab.gh.state();
    let check = st.check_runs.last().unwrap();
    assert_eq!(check.conclusion.as_deref(), Some("failure"));
    let text = check.output.as_ref().unwrap().to_string();
    assert!(
        text.contains("the budget of $0.50 is spent: $0.80 recorded over 2 attempt(s) bought 2 of 3 task(s) completed"),
        "{text}"
    );
    lab.gh.assert_clean();
}

const ONE_WORKER: &str = r#"#!/bin/sh
cat > /dev/null
echo t1 > t1.txt; echo "COMPLETED: t1"
"#;

/// Killed (kill -9) right after its final push: the branch holds only the archived plan
/// (`.design/plan.done.json`), the pull request is a draft and no check run was written. The
/// next job (Run workflow or `/execute`: the plan job, then finalize) finishes the run.
#[test]
fn a_conductor_killed_after_its_final_push_is_finished_by_the_next_run() {
    let lab = Arc::new(Lab::with_worker(
        vec![task("one", &["t1.txt"], &[])],
        ONE_WORKER,
    ));
    let conductor = lab.conductor(1, &[("DAGEXEC_FAILPOINT", "final-push:1")]);
    let code = lab.drive(conductor, Duration::from_secs(120));
    let log = lab.conduct_log(1);
    assert_eq!(code, -1, "killed by its failpoint:\n{log}");
    git(
        &lab.origin,
        &[
            "cat-file",
            "-e",
            &format!("{BRANCH}:.design/plan.done.json"),
        ],
    );
    let st = lab.gh.state();
    assert!(st.pulls[0].draft, "{log}");
    assert!(st.check_runs.is_empty(), "{:?}", st.check_runs);

    // `/execute` on the pull request starts a run on the branch, as for a dead conductor.
    let dispatched = lab.dispatches();
    let (_, text) = lab.comment_jobs(2, st.pulls[0].number, "/execute", false);
    assert_eq!(lab.dispatches(), dispatched + 1, "{text}");
    let planned = lab.plan_job(3, &[("DAGEXEC_SCHEDULE", "eager")]);
    assert_eq!(
        planned.outputs["conclusion"], "completed",
        "{}",
        planned.log
    );
    let (ok, text) = lab.finalize_job(3, &planned, &lab.tmp.path().join("none"));
    assert!(ok, "{text}");
    let st = lab.gh.state();
    assert_eq!(st.pulls.len(), 1, "{text}");
    assert!(!st.pulls[0].draft, "ready for review:\n{text}");
    let check = st.check_runs.last().expect("a check run");
    assert_eq!(check.conclusion.as_deref(), Some("success"));
    assert!(
        st.comments
            .iter()
            .any(|c| c.body.starts_with("<!-- dagexec:status -->")),
        "{:#?}",
        st.comments
    );
    // A plan change asked of the archived plan is refused, saying why; the branch stays.
    let tip = git(&lab.origin, &["rev-parse", BRANCH]);
    let (_, text) = lab.comment_jobs(4, st.pulls[0].number, "/execute retry 0", true);
    assert!(text.contains("nothing left to change"), "{text}");
    assert_eq!(git(&lab.origin, &["rev-parse", BRANCH]), tip);
    lab.gh.assert_clean();
}

/// The conductor killed (kill -9, or its runner lost) after it pushed task 0's arrival and
/// before it dispatched task 1, which that arrival unblocked: the re-run of its job (the same
/// workflow run, its next attempt, the plan job's outputs as they were) finds the branch moved
/// by its own earlier attempt and carries on from there to the end.
#[test]
fn a_conductor_killed_after_a_push_is_carried_on_by_its_re_run() {
    let lab = Arc::new(Lab::with_worker(
        vec![
            task("one", &["t1.txt"], &[]),
            task("two", &["t2.txt"], &[0]),
        ],
        r#"#!/bin/sh
cat > /dev/null
f="t$((DAGEXEC_TASK_INDEX + 1)).txt"; echo "$f" > "$f"; echo "COMPLETED: $f"
"#,
    ));
    let planned = lab.plan_job(1, &[("DAGEXEC_SCHEDULE", "eager")]);
    let conduct = |extra: &[(&str, &str)]| {
        let o = &planned.outputs;
        let mut cmd = lab.job(&lab.checkout(&o["base"]), 1);
        cmd.args(["action", "conduct"])
            .env("DAGEXEC_BASE", &o["base"])
            .env("DAGEXEC_ROUND", &o["round"]);
        lab.spawn_conducting(cmd, 1, extra)
    };
    let code = lab.drive(
        conduct(&[("DAGEXEC_FAILPOINT", "push:1")]),
        Duration::from_secs(60),
    );
    let first = lab.conduct_log(1);
    assert_eq!(code, -1, "killed by its failpoint:\n{first}");
    assert_eq!(lab.branch_plan()["tasks"][0]["status"], "completed");
    assert_eq!(lab.gh.state().dispatches.len(), 1, "{first}");

    let code = lab.drive(
        conduct(&[("GITHUB_RUN_ATTEMPT", "2")]),
        Duration::from_secs(120),
    );
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("Conductor: completed."), "{log}");
    assert!(!log.contains("that run carries on"), "{log}");
    let st = lab.gh.state();
    assert_eq!(st.dispatches.len(), 2, "one run for each task:\n{log}");
    let check = st.check_runs.last().expect("a check run");
    assert_eq!(check.conclusion.as_deref(), Some("success"), "{log}");
    lab.gh.assert_clean();
}

/// Killed right after its final push (the plan archived on the branch, the pull request a
/// draft, no check run): the re-run of the conductor's job finishes the run itself.
#[test]
fn a_conductor_killed_after_its_final_push_is_finished_by_its_re_run() {
    let lab = Arc::new(Lab::with_worker(
        vec![task("one", &["t1.txt"], &[])],
        ONE_WORKER,
    ));
    let planned = lab.plan_job(1, &[("DAGEXEC_SCHEDULE", "eager")]);
    let conduct = |extra: &[(&str, &str)]| {
        let o = &planned.outputs;
        let mut cmd = lab.job(&lab.checkout(&o["base"]), 1);
        cmd.args(["action", "conduct"])
            .env("DAGEXEC_BASE", &o["base"])
            .env("DAGEXEC_ROUND", &o["round"]);
        lab.spawn_conducting(cmd, 1, extra)
    };
    let killed = conduct(&[("DAGEXEC_FAILPOINT", "final-push:1")]);
    assert_eq!(lab.drive(killed, Duration::from_secs(60)), -1);
    assert!(lab.gh.state().check_runs.is_empty());
    let code = lab.drive(
        conduct(&[("GITHUB_RUN_ATTEMPT", "2")]),
        Duration::from_secs(120),
    );
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    let st = lab.gh.state();
    assert!(!st.pulls[0].draft, "ready for review:\n{log}");
    let check = st.check_runs.last().expect("a check run");
    assert_eq!(check.conclusion.as_deref(), Some("success"), "{log}");
    lab.gh.assert_clean();
}

/// A conductor killed after its final push, re-run, then re-run once more after it finished:
/// each re-run at the archived plan only publishes what was left (the pull request ready, one
/// `success` check run); the branch keeps the killed attempt's commits as they were.
#[test]
fn a_conductors_re_run_at_its_runs_archived_plan_changes_nothing_on_the_branch() {
    let lab = Arc::new(Lab::with_worker(
        vec![task("one", &["t1.txt"], &[])],
        ONE_WORKER,
    ));
    let planned = lab.plan_job(1, &[("DAGEXEC_SCHEDULE", "eager")]);
    let conduct = |extra: &[(&str, &str)]| {
        let o = &planned.outputs;
        let mut cmd = lab.job(&lab.checkout(&o["base"]), 1);
        cmd.args(["action", "conduct"])
            .env("DAGEXEC_BASE", &o["base"])
            .env("DAGEXEC_ROUND", &o["round"]);
        lab.spawn_conducting(cmd, 1, extra)
    };
    let killed = conduct(&[("DAGEXEC_FAILPOINT", "final-push:1")]);
    assert_eq!(lab.drive(killed, Duration::from_secs(60)), -1);
    let pushed = lab.branch_log();
    for attempt in ["2", "3"] {
        let code = lab.drive(
            conduct(&[("GITHUB_RUN_ATTEMPT", attempt)]),
            Duration::from_secs(120),
        );
        let log = lab.conduct_log(1);
        assert_eq!(code, 0, "{log}");
        assert_eq!(lab.branch_log(), pushed, "attempt {attempt}:\n{log}");
        let st = lab.gh.state();
        assert!(!st.pulls[0].draft, "ready for review:\n{log}");
        assert_eq!(st.check_runs.len(), 1, "attempt {attempt}:\n{log}");
        assert_eq!(st.check_runs[0].conclusion.as_deref(), Some("success"));
    }
    assert_eq!(lab.dispatches(), 1, "the one task run");
    lab.gh.assert_clean();
}

/// A conductor that stopped at `/execute abort` (given on the pull request, through the
/// comment job) is re-run: it stops as its earlier attempt did, starts nothing and commits
/// nothing.
#[test]
fn a_conductors_re_run_after_it_stopped_at_execute_abort_changes_nothing() {
    let lab = Arc::new(Lab::with_worker(
        vec![
            task("slow", &["t0.txt"], &[]),
            task("after", &["t1.txt"], &[0]),
        ],
        r#"#!/bin/sh
cat > /dev/null
[ "$DAGEXEC_TASK_INDEX" = 0 ] && sleep 2
echo x > "t$DAGEXEC_TASK_INDEX.txt"; echo "COMPLETED: t$DAGEXEC_TASK_INDEX"
"#,
    ));
    let planned = lab.plan_job(1, &[("DAGEXEC_SCHEDULE", "eager")]);
    let conduct = |extra: &[(&str, &str)]| {
        let o = &planned.outputs;
        let mut cmd = lab.job(&lab.checkout(&o["base"]), 1);
        cmd.args(["action", "conduct"])
            .env("DAGEXEC_BASE", &o["base"])
            .env("DAGEXEC_ROUND", &o["round"]);
        lab.spawn_conducting(cmd, 1, extra)
    };
    let conductor = conduct(&[]);
    let (t0, mut threads) = (Instant::now(), Vec::new());
    while lab.gh.state().pulls.is_empty() {
        threads.extend(lab.run_dispatched());
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{}",
            lab.conduct_log(1)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    lab.comment_jobs(50, 1, "/execute abort", false);
    let code = lab.drive(conductor, Duration::from_secs(60));
    for t in threads {
        t.join().unwrap();
    }
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("Conductor: aborted."), "{log}");
    let (stopped, dispatched) = (lab.branch_log(), lab.dispatches());
    let code = lab.drive(
        conduct(&[("GITHUB_RUN_ATTEMPT", "2")]),
        Duration::from_secs(60),
    );
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("Conductor: aborted."), "{log}");
    assert_eq!(lab.dispatches(), dispatched, "started again:\n{log}");
    assert_eq!(lab.branch_log(), stopped, "{log}");
    lab.gh.assert_clean();
}

/// Two tasks, one after the other, under a GitHub outage of `operation` (`calls` answers of
/// 502 in a row), the retry policy's back-off shortened so that the outage outlasts its
/// tries in moments: the outage costs waiting time, never an attempt and never the
/// conductor.
fn outage_costs_only_time(operation: &str, calls: usize, waited: bool) {
    let lab = Arc::new(Lab::with_worker(
        vec![
            task("one", &["t1.txt"], &[]),
            task("two", &["t2.txt"], &[0]),
        ],
        r#"#!/bin/sh
cat > /dev/null
f="t$((DAGEXEC_TASK_INDEX + 1)).txt"; echo "$f" > "$f"; echo "COMPLETED: $f"
"#,
    ));
    lab.gh.outage(operation, calls);
    let conductor = lab.conductor(
        1,
        &[
            ("DAGEXEC_API_RETRY_BASE", "10ms"),
            ("DAGEXEC_API_RETRY_CAP", "40ms"),
        ],
    );
    let code = lab.drive(conductor, Duration::from_secs(120));
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("Conductor: completed."), "{log}");
    if waited {
        assert!(
            log.contains("GitHub could not give") && log.contains("GitHub answers again"),
            "the wait is said in the log:\n{log}"
        );
    }
    let done = lab.branch_plan();
    for t in 0..2 {
        assert_eq!(
            done["progress"]["completedTasks"][t]["attempts"], 1,
            "the outage cost no attempt:\n{done:#}\n{log}"
        );
    }
    assert_eq!(
        lab.gh.state().dispatches.len(),
        2,
        "one run for each attempt:\n{log}"
    );
    assert!(
        lab.gh.calls(operation).len() > calls,
        "{operation} was asked again after the outage"
    );
    lab.gh.assert_clean();
}

#[test]
fn an_outage_of_the_run_status_poll_costs_time_not_the_conductor() {
    // Several polls' worth of the retry policy's six tries.
    outage_costs_only_time("actions/list-workflow-runs", 20, true);
}

#[test]
fn an_outage_of_the_artifact_listing_costs_time_not_the_attempt() {
    outage_costs_only_time("actions/list-workflow-run-artifacts", 9, true);
}

#[test]
fn an_outage_of_the_dispatch_costs_time_not_the_conductor() {
    outage_costs_only_time("actions/create-workflow-dispatch", 9, false);
}

#[test]
fn an_outage_of_the_pull_request_update_costs_time_not_the_conductor() {
    // The first round's news on the pull request (told once task two is dispatched)
    // outlasts the policy's six tries; the push had landed.
    outage_costs_only_time("pulls/update", 7, false);
}

#[test]
fn a_failing_download_from_artifact_storage_is_retried() {
    outage_costs_only_time("storage", 2, false);
}

/// Killed (kill -9) right after dispatching a task run, before any commit records its run:
/// the attempt was committed as started before its dispatch, so the next conductor finds the
/// run by its run-name and adopts it, and the task whose dispatch never happened counts an
/// interrupted attempt. No task is ever dispatched twice as the same attempt.
#[test]
fn a_conductor_killed_after_a_dispatch_it_had_not_recorded_adopts_that_run() {
    let lab = Arc::new(Lab::new(diamond()));
    // Round 1's first dispatch: task 0 attempt 1 (the longest chain first), then task 1's.
    let first = lab.conductor(1, &[("DAGEXEC_FAILPOINT", "dispatched:1")]);
    let code = lab.drive(first, Duration::from_secs(60));
    assert_eq!(code, -1, "killed by its failpoint:\n{}", lab.conduct_log(1));
    let dispatched: Vec<(String, String)> = lab
        .gh
        .state()
        .dispatches
        .iter()
        .map(|d| {
            (
                d.inputs["task"].as_str().unwrap_or_default().to_string(),
                d.inputs["attempt"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(dispatched, [("0".to_string(), "1".to_string())]);
    // A run with task 1 attempt 1's run-name from before that start was recorded (as one
    // from before a `/execute retry` would be) is not task 1's current attempt.
    let before = git(&lab.origin, &["rev-parse", &format!("{BRANCH}~1")]);
    let decoy = lab.gh.add_run(
        "dagexec.yml",
        BRANCH,
        before.trim(),
        "dagexec dagexec/eager: task 1 attempt 1",
    );

    let second = lab.conductor(2, &[]);
    let code = lab.drive(second, Duration::from_secs(120));
    let log = lab.conduct_log(2);
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("Adopting task 0 attempt 1 (run 7001), dispatched by a conductor that died"),
        "{log}"
    );
    assert!(
        log.contains("Task 1: attempt 1 was interrupted before its run started")
            && !log.contains(&format!("(run {decoy})")),
        "{log}"
    );
    let plan = lab.branch_plan();
    for (i, t) in plan["tasks"].as_array().unwrap().iter().enumerate() {
        assert_eq!(t["status"], "completed", "task {i}: {t:#}\n{log}");
    }
    let mut pairs: Vec<(String, String)> = lab
        .gh
        .state()
        .dispatches
        .iter()
        .filter_map(|d| {
            Some((
                d.inputs.get("task")?.as_str()?.to_string(),
                d.inputs["attempt"].as_str()?.to_string(),
            ))
        })
        .collect();
    let all = pairs.len();
    pairs.sort();
    pairs.dedup();
    assert_eq!(
        pairs.len(),
        all,
        "an attempt dispatched twice: {pairs:?}\n{log}"
    );
    lab.gh.assert_clean();
}

/// GitHub fails the dispatch of the successor conductor at a handover for longer than the
/// retry policy's tries: the conductor waits it out (its state is pushed already) and the
/// successor is started, rather than the run being left without a conductor.
#[test]
fn an_outage_at_the_handover_is_waited_out_and_the_successor_started() {
    let lab = Arc::new(Lab::with_worker(
        vec![task("slow", &["t1.txt"], &[])],
        "#!/bin/sh\ncat > /dev/null\nsleep 5; echo t1 > t1.txt; echo \"COMPLETED: t1\"\n",
    ));
    let mut conductor = lab.conductor(
        1,
        &[
            ("DAGEXEC_HANDOVER_AFTER", "2s"),
            ("DAGEXEC_API_RETRY_BASE", "10ms"),
            ("DAGEXEC_API_RETRY_CAP", "40ms"),
        ],
    );
    // Once the task's run is dispatched, every dispatch fails for a while: the next one is
    // the successor's.
    let t0 = Instant::now();
    while lab.gh.state().dispatches.is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{}",
            lab.conduct_log(1)
        );
        if conductor.try_wait().unwrap().is_some() {
            panic!("the conductor ended early:\n{}", lab.conduct_log(1));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    lab.gh.outage("actions/create-workflow-dispatch", 9);
    let code = lab.drive(conductor, Duration::from_secs(60));
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("GitHub could not start the successor conductor")
            && log.contains("Handed over after"),
        "{log}"
    );
    let successors = lab
        .gh
        .state()
        .dispatches
        .iter()
        .filter(|d| d.inputs.get("task").is_none())
        .count();
    assert_eq!(successors, 1, "{log}");
    lab.gh.assert_clean();
}

/// The (task, attempt) of every task run dispatched so far, in order.
fn dispatched_attempts(lab: &Lab) -> Vec<(String, String)> {
    lab.gh
        .state()
        .dispatches
        .iter()
        .filter_map(|d| {
            Some((
                d.inputs.get("task")?.as_str()?.to_string(),
                d.inputs["attempt"].as_str()?.to_string(),
            ))
        })
        .collect()
}

/// Issue 31 §3: GitHub started the task's run but answered its dispatch 502 (a gateway that
/// timed out after the backend acted). The client's own retry sent the dispatch again and
/// started a second run of the same attempt; the run is looked for by its run-name before
/// any dispatch is sent again, and found.
#[test]
fn a_dispatch_answered_502_after_github_started_its_run_is_never_sent_again() {
    let lab = Arc::new(Lab::with_worker(
        vec![task("one", &["t1.txt"], &[])],
        ONE_WORKER,
    ));
    lab.gh.fail_after("actions/create-workflow-dispatch", 502);
    let conductor = lab.conductor(
        1,
        &[
            ("DAGEXEC_API_RETRY_BASE", "10ms"),
            ("DAGEXEC_API_RETRY_CAP", "40ms"),
        ],
    );
    let code = lab.drive(conductor, Duration::from_secs(120));
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        dispatched_attempts(&lab),
        [("0".to_string(), "1".to_string())],
        "one run for the one attempt:\n{log}"
    );
    assert!(
        log.contains("GitHub could not start the run of task 0 attempt 1")
            && log.contains("found its run 7001"),
        "{log}"
    );
    let done = lab.branch_plan();
    assert_eq!(
        done["progress"]["completedTasks"][0]["attempts"], 1,
        "{done:#}\n{log}"
    );
    lab.gh.assert_clean();
}

/// Issue 31 §7: a run that ended days before a conductor asks for its result (the conductor
/// that dispatched it was killed; `/execute` started the next one later) meets an outage of
/// the artifact listing. The result was judged missing ("cannot list the run's artifacts")
/// and the task ran again; an outage costs waiting, never an attempt.
#[test]
fn an_artifact_listing_outage_for_a_run_that_ended_days_ago_costs_no_attempt() {
    let lab = Arc::new(Lab::with_worker(
        vec![task("one", &["t1.txt"], &[])],
        ONE_WORKER,
    ));
    let first = lab.conductor(1, &[("DAGEXEC_FAILPOINT", "dispatched:1")]);
    let code = lab.drive(first, Duration::from_secs(60));
    assert_eq!(code, -1, "killed by its failpoint:\n{}", lab.conduct_log(1));
    let run = lab.gh.state().dispatches[0].run_id;
    lab.gh.age_run(run, 72);
    lab.gh.outage("actions/list-workflow-run-artifacts", 9);
    let second = lab.conductor(
        2,
        &[
            ("DAGEXEC_API_RETRY_BASE", "10ms"),
            ("DAGEXEC_API_RETRY_CAP", "40ms"),
        ],
    );
    let code = lab.drive(second, Duration::from_secs(120));
    let log = lab.conduct_log(2);
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("GitHub could not give") && log.contains("GitHub answers again"),
        "{log}"
    );
    assert!(!log.contains("cannot list the run's artifacts"), "{log}");
    assert_eq!(dispatched_attempts(&lab).len(), 1, "{log}");
    let done = lab.branch_plan();
    assert_eq!(
        done["progress"]["completedTasks"][0]["attempts"], 1,
        "{done:#}\n{log}"
    );
    lab.gh.assert_clean();
}

/// Issue 31 §7: a conductor killed before its dispatch reached GitHub (its start recorded, no
/// run started) cost the task an attempt: "completed, 2 attempts" for one run. An attempt is
/// counted once per run GitHub started; the successor says the attempt was interrupted.
#[test]
fn a_conductor_killed_before_its_dispatch_reached_github_costs_no_attempt() {
    let lab = Arc::new(Lab::with_worker(
        vec![task("one", &["t1.txt"], &[])],
        ONE_WORKER,
    ));
    let first = lab.conductor(1, &[("DAGEXEC_FAILPOINT", "dispatching:1")]);
    let code = lab.drive(first, Duration::from_secs(60));
    assert_eq!(code, -1, "killed by its failpoint:\n{}", lab.conduct_log(1));
    assert!(dispatched_attempts(&lab).is_empty());
    let second = lab.conductor(2, &[]);
    let code = lab.drive(second, Duration::from_secs(120));
    let log = lab.conduct_log(2);
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("Task 0: attempt 1 was interrupted before its run started"),
        "{log}"
    );
    assert_eq!(
        dispatched_attempts(&lab),
        [("0".to_string(), "1".to_string())],
        "{log}"
    );
    let done = lab.branch_plan();
    assert_eq!(
        done["progress"]["completedTasks"][0]["attempts"], 1,
        "one run, one attempt:\n{done:#}\n{log}"
    );
    let st = lab.gh.state();
    let status = st
        .comments
        .last()
        .map(|c| c.body.clone())
        .unwrap_or_default();
    assert!(!status.contains("2 attempts"), "{status}");
    lab.gh.assert_clean();
}

/// Issue 31 §8: the pull request shows one commit per round (and the final one); every
/// dispatch added "dagexec: starting task N attempt K" to the branch. The record of a start
/// lives on a ref of its own beside the branch, and goes when the run ends with nothing in
/// flight (it was left on the remote for good).
#[test]
fn the_branch_holds_round_commits_only_and_starts_are_recorded_beside_it() {
    let lab = Arc::new(Lab::new(diamond()));
    let starts_ref = format!("refs/dagexec/starts/{BRANCH}");
    // Killed right after its first dispatch: the start is recorded beside the branch.
    let first = lab.conductor(1, &[("DAGEXEC_FAILPOINT", "dispatched:1")]);
    let code = lab.drive(first, Duration::from_secs(60));
    assert_eq!(code, -1, "killed by its failpoint:\n{}", lab.conduct_log(1));
    let starts = git(&lab.origin, &["log", "--format=%s", &starts_ref]);
    assert!(
        starts
            .lines()
            .next()
            .unwrap_or("")
            .starts_with("dagexec: starting"),
        "{starts}"
    );
    let conductor = lab.conductor(2, &[]);
    let code = lab.drive(conductor, Duration::from_secs(120));
    let log = lab.conduct_log(2);
    assert_eq!(code, 0, "{log}");
    let subjects = git(&lab.origin, &["log", "--format=%s", BRANCH]);
    assert!(
        !subjects.lines().any(|s| s.starts_with("dagexec: starting")),
        "bookkeeping on the reviewed branch:\n{subjects}"
    );
    let left = std::process::Command::new("git")
        .args(["for-each-ref", "--format=%(refname)", "refs/dagexec/"])
        .current_dir(&lab.origin)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&left.stdout),
        "",
        "the record of starts outlived the run:\n{log}"
    );
    lab.gh.assert_clean();
}

/// Issue 36: a plan job that also conducts holds the write token, so the plan's pre-flight
/// checks run in it as the agent's user: a check that tries to write the checkout (and its
/// `.git`), the runner's `$GITHUB_PATH` and `$GITHUB_ENV`, and to read the token from the
/// environment or any process's, gets none of it — and the job goes on as the conductor.
#[test]
fn a_conducting_plan_jobs_pre_flight_checks_run_as_the_agents_user_and_reach_nothing() {
    // The user is made (again) here and the check's job runs as it: not while the act test
    // of the sudo path has removed it (`common::agent_user`).
    let _agent_user = crate::common::agent_user::shared();
    let Some(agent) = crate::common::agent_user::made() else {
        return;
    };
    let mut tasks = vec![
        task("One", &["t0.txt"], &[]),
        task("Two", &["t1.txt"], &[0]),
    ];
    let lab = Lab::with_worker(Vec::new(), WORKER);
    // What the check managed, in a folder anyone may write (as /tmp is on a runner; the
    // lab's own folder is root's alone, which the agent's user could not even pass through).
    let shared = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        shared.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .unwrap();
    let report = shared.path().join("report.txt");
    // The runner's file commands, where the agent's user can reach them but, as on a runner
    // (they are the runner user's), not write them: the check is not handed them either.
    let (path_file, env_file) = (shared.path().join("path"), shared.path().join("env"));
    for f in [&path_file, &env_file] {
        std::fs::write(f, "").unwrap();
        std::fs::set_permissions(f, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    }
    let hostile = format!(
        "r='{r}'; id -un >> \"$r\"; \
         (echo pwned > pwned.txt) 2>/dev/null && echo wrote-checkout >> \"$r\"; \
         (echo pwned >> .git/config) 2>/dev/null && echo wrote-git >> \"$r\"; \
         (echo /evil >> '{p}') 2>/dev/null && echo wrote-path >> \"$r\"; \
         (echo EVIL=1 >> '{e}') 2>/dev/null && echo wrote-env >> \"$r\"; \
         env | grep -q ghs_token && echo token-in-env >> \"$r\"; \
         cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -q ghs_token && echo read-token >> \"$r\"; \
         true",
        r = report.display(),
        p = path_file.display(),
        e = env_file.display()
    );
    tasks[0]["agent"] = json!({"assumptions": [
        {"claim": "the tree is as it was", "verify": hostile, "severity": "blocking"}
    ]});
    lab.edit_plan(|p| p["tasks"] = json!(tasks));
    git(
        &lab.repo,
        &["commit", "-qam", "a plan with a hostile pre-flight check"],
    );
    git(&lab.repo, &["push", "-q", "origin", "HEAD:main"]);
    let lab = Arc::new(lab);
    let outputs = lab.tmp.path().join("outputs");
    let conductor = lab.plan_conductor(
        1,
        &[
            ("DAGEXEC_AGENT_USER", agent.as_str()),
            ("GITHUB_PATH", path_file.to_str().unwrap()),
            ("GITHUB_ENV", env_file.to_str().unwrap()),
            ("GITHUB_OUTPUT", outputs.to_str().unwrap()),
        ],
    );
    let code = lab.drive(conductor, Duration::from_secs(120));
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");

    // The check ran, as the agent's user, and reached nothing.
    let said = std::fs::read_to_string(&report).unwrap_or_default();
    assert_eq!(said.lines().collect::<Vec<_>>(), [agent.as_str()], "{log}");
    assert_eq!(std::fs::read_to_string(&path_file).unwrap(), "");
    assert_eq!(std::fs::read_to_string(&env_file).unwrap(), "");
    // The same job conducted the run to its end: no conduct job, no finalize.
    let outs = lab::output_file(&std::fs::read_to_string(&outputs).unwrap());
    let conclusions: Vec<&str> = outs
        .iter()
        .filter(|(k, _)| k == "conclusion")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(conclusions, ["conducted"], "{outs:?}");
    let plan = lab.branch_plan();
    for t in plan["tasks"].as_array().unwrap() {
        assert_eq!(t["status"], "completed", "{t:#}\n{log}");
    }
    // Three task runs (the lab's worker fails task 0's first try), and none for the plan.
    assert_eq!(lab.gh.state().dispatches.len(), 3, "{log}");
    git(
        &lab.origin,
        &["cat-file", "-e", &format!("{BRANCH}:t1.txt")],
    );
    assert!(
        git(&lab.origin, &["ls-tree", "-r", "--name-only", BRANCH])
            .lines()
            .all(|f| f != "pwned.txt")
    );
    let summary = std::fs::read_to_string(lab.tmp.path().join("summary-1.md")).unwrap();
    assert!(
        summary.contains(&format!("pre-flight checks ran as {agent}")),
        "{summary}"
    );
    lab.gh.assert_clean();
}

/// A plan.json whose tasks 4 and 5 wait for 0, 1 and 2 through a join (task 3): the conductor
/// never dispatches the join, starts 4 and 5 once 0, 1 and 2 have landed, and the branch's
/// plan has the join completed with them.
#[test]
fn eager_on_actions_never_dispatches_a_join_and_starts_its_dependents_when_its_blockers_land() {
    const QUICK: &str = r#"#!/bin/sh
cat > /dev/null
echo "start $DAGEXEC_TASK_INDEX $DAGEXEC_ATTEMPT $(date +%s.%N)" >> "$LAB_TIMES"
echo "t$DAGEXEC_TASK_INDEX" > "t$DAGEXEC_TASK_INDEX.txt"
echo "end $DAGEXEC_TASK_INDEX $DAGEXEC_ATTEMPT $(date +%s.%N)" >> "$LAB_TIMES"
echo "COMPLETED: t$DAGEXEC_TASK_INDEX"
"#;
    let tasks = vec![
        task("zero", &["t0.txt"], &[]),
        task("one", &["t1.txt"], &[]),
        task("two", &["t2.txt"], &[]),
        json!({"subject": "zero, one and two done", "join": true, "blockedBy": [0, 1, 2]}),
        task("four", &["t4.txt"], &[3]),
        task("five", &["t5.txt"], &[3]),
    ];
    let lab = Arc::new(Lab::with_worker(tasks, QUICK));
    let conductor = lab.conductor(1, &[]);
    let code = lab.drive(conductor, Duration::from_secs(120));
    let log = lab.conduct_log(1);
    assert_eq!(code, 0, "{log}");
    let dispatched: BTreeSet<String> = lab
        .gh
        .state()
        .dispatches
        .iter()
        .map(|d| d.inputs["task"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        dispatched,
        ["0", "1", "2", "4", "5"].map(String::from).into(),
        "{log}"
    );
    let plan = lab.branch_plan();
    for (i, t) in plan["tasks"].as_array().unwrap().iter().enumerate() {
        assert_eq!(t["status"], "completed", "task {i}: {t:#}\n{log}");
    }
    assert_eq!(plan["tasks"][3]["join"], true);
    let times = lab.times();
    let last_of_three = (0..3).map(|i| times[&(i, 1)].1).fold(0.0, f64::max);
    for i in [4, 5] {
        assert!(times[&(i, 1)].0 >= last_of_three, "{times:?}");
    }
    let body = lab.gh.state().pulls[0].body.clone().unwrap_or_default();
    assert!(!body.contains("zero, one and two done"), "{body}");
    assert!(body.contains("**5/5 tasks completed**"), "{body}");
    lab.gh.assert_clean();
}
