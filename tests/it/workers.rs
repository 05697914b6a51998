//! Hostile and broken workers against the real binary: whatever a worker does to its output
//! and its processes, `dagexec run` and `dagexec action work` end with a verdict in words (no
//! panic), leave nothing of the worker's running, keep each attempt's stdout, stderr and log,
//! and print and commit no escape sequence. A panic, when there is one, is a bug report.

use std::path::Path;

use serde_json::Value;

use crate::common;
use common::local::{Local, exec, local, one_file_each, plan_or_done};
use common::{codex_on_path, dagexec, git, text, worker};

/// A committed repository whose `.design/plan.json` has one task per entry of `creates`,
/// each creating that file.
fn repo(creates: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let plan = one_file_each("workers", creates);
    std::fs::create_dir_all(dir.path().join(".design")).unwrap();
    std::fs::write(
        dir.path().join(".design/plan.json"),
        serde_json::to_string_pretty(&plan).unwrap(),
    )
    .unwrap();
    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "start"]);
    dir
}

/// `dagexec run` as these tests run it: four jobs.
fn run(dir: &Path) -> Local {
    local(dir).jobs(4)
}

fn result(plan: &Value, i: usize) -> String {
    plan["tasks"][i]["result"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// Whether `pid` no longer runs (gone, or a zombie no one reaps).
fn gone(pid: &str) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let alive = Path::new(&format!("/proc/{pid}")).exists();
    !alive || stat.contains(") Z ")
}

/// Every pid listed (one per line) in the files of `dir` named `pids*` is gone, after a
/// moment for SIGKILL to land.
fn all_gone(dir: &Path) {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if entry.file_name().to_string_lossy().starts_with("pids") {
            let text = std::fs::read_to_string(entry.path()).unwrap();
            pids.extend(text.split_whitespace().map(String::from));
        }
    }
    assert!(!pids.is_empty(), "the workers recorded their processes");
    for _ in 0..150 {
        if pids.iter().all(|p| gone(p)) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let alive: Vec<_> = pids.iter().filter(|p| !gone(p)).collect();
    panic!("left running after the run: {alive:?}");
}

/// A worker command that closes its stdout and stderr, then hangs.
const HANGS_WITH_OUTPUT_CLOSED: &str = "exec >/dev/null 2>&1; sleep 100";

/// Regression: a worker that closed its output and then hung made `dagexec run` panic at the
/// timeout (exit 101), leaving the task in progress.
#[test]
fn closed_output_then_hang_is_a_timeout_not_a_panic() {
    let dir = repo(&["a.txt"]);
    // The command itself, not a script: no shell in between keeps the pipes open.
    let o = run(dir.path())
        .worker(HANGS_WITH_OUTPUT_CLOSED)
        .timeout("2s")
        .run();
    let out = o.expect_code(1);
    assert!(!out.contains("panicked"), "{out}");
    let plan = plan_or_done(dir.path());
    assert_eq!(plan["tasks"][0]["status"], "failed");
    assert_eq!(result(&plan, 0), "timed out after 2s");
}

/// The same worker under the Action's work job: an artifact with the verdict, no panic.
#[test]
fn closed_output_then_hang_in_the_action_work_job() {
    let dir = repo(&["a.txt"]);
    let base = git(dir.path(), &["rev-parse", "HEAD"]).trim().to_string();
    let artifacts = tempfile::tempdir().unwrap();
    let o = dagexec(dir.path())
        .args(["action", "work"])
        .env("GITHUB_RUN_ID", "77")
        .env("DAGEXEC_TASK", "0")
        .env("DAGEXEC_ATTEMPT", "1")
        .env("DAGEXEC_ROUND", "1")
        .env("DAGEXEC_BASE", &base)
        .env("DAGEXEC_WORKER", HANGS_WITH_OUTPUT_CLOSED)
        .env("DAGEXEC_TIMEOUT", "2s")
        .env("DAGEXEC_ARTIFACTS", artifacts.path())
        .output()
        .unwrap();
    let out = text(&o);
    assert_ne!(o.status.code(), Some(101), "{out}");
    assert!(!out.contains("panicked"), "{out}");
    let result = std::fs::read_to_string(artifacts.path().join("result.json")).expect("artifact");
    assert!(
        result.contains("TimedOut") || result.contains("timed"),
        "{result}"
    );
}

/// The behaviour matrix through the real binary: each task's worker misbehaves its own way,
/// records its processes in `pids-<task>` beside the script, and nothing it started survives.
#[test]
fn misbehaving_workers_get_a_verdict_and_leave_nothing_running() {
    let files = ["t0", "t1", "t2", "t3", "t4", "t5", "t6"];
    let dir = repo(&files);
    let rec = tempfile::tempdir().unwrap();
    let body = format!(
        r#"pids='{rec}/pids-'"$DAGEXEC_TASK_INDEX-$DAGEXEC_ATTEMPT"
echo $$ > "$pids"
case "$DAGEXEC_TASK_INDEX" in
0) exec >&-; sleep 100 ;;
1) exec 2>&-; echo x > t1; echo 'COMPLETED: no stderr' ;;
2) sleep 100 & echo $! >> "$pids"; echo x > t2; echo 'COMPLETED: forked' ;;
3) setsid sh -c 'echo $$ >> "$1"; exec sleep 100' sh "$pids" &
   while [ "$(wc -l < "$pids")" -lt 2 ]; do sleep 0.05; done
   echo x > t3; echo 'COMPLETED: escaped' ;;
4) (yes out | head -c 20000000) ; (yes err | head -c 20000000 >&2); echo x > t4; echo 'COMPLETED: loud' ;;
5) head -c 100000 /dev/urandom; echo x > t5; printf '\nCOMPLETED: bin \377\n' ;;
6) echo 'about to crash' >&2; kill -SEGV $$ ;;
esac"#,
        rec = rec.path().display()
    );
    let (_w, cmd) = worker(&body);
    let o = run(dir.path()).worker(&cmd).timeout("3s").run();
    let out = o.expect_code(1);
    assert!(!out.contains("panicked"), "{out}");
    let plan = plan_or_done(dir.path());
    let status = |i: usize| plan["tasks"][i]["status"].as_str().unwrap().to_string();
    assert_eq!(
        (0..7).map(status).collect::<Vec<_>>(),
        [
            "failed",
            "completed",
            "completed",
            "completed",
            "completed",
            "completed",
            "failed"
        ],
        "{out}"
    );
    assert_eq!(result(&plan, 0), "timed out after 3s");
    assert_eq!(result(&plan, 3), "escaped");
    assert_eq!(result(&plan, 5), "bin \u{FFFD}");
    let crashed = result(&plan, 6);
    assert!(
        crashed.starts_with("worker crashed: killed by signal 11")
            && crashed.contains("; stderr: about to crash"),
        "{crashed}"
    );
    all_gone(rec.path());
}

/// A worker named by an agent CLI that is not installed is found before anything starts:
/// exit 2 with how to install it, no task attempted, no commit, the plan untouched. It used to
/// start the first round, fail each of its tasks (not retried) and commit the failures.
#[test]
fn a_missing_worker_program_is_found_before_any_task_starts() {
    let dir = repo(&["a.txt", "b.txt"]);
    let head = git(dir.path(), &["rev-parse", "HEAD"]);
    let o = run(dir.path())
        .worker("claude")
        .env("PATH", "/usr/bin:/bin")
        .run();
    let out = o.expect_code(2);
    assert!(
        out.contains("worker command not found: `claude` (not on PATH), from --worker (or DAGEXEC_WORKER, or `worker:` in .design/dagexec.yml): `claude -p ")
            && out.contains("Install Claude Code (`npm install --global --no-audit --no-fund @anthropic-ai/claude-code@")
            && out.contains("no task was started."),
        "{out}"
    );
    assert_eq!(git(dir.path(), &["rev-parse", "HEAD"]), head);
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
}

/// Issue 11 §7: a failing worker's stderr is shown in the reason and kept with its stdout and
/// log, listed by `status` and the run's summary; 127 says which command was not found.
#[test]
fn a_failing_workers_stderr_is_shown_and_kept() {
    let dir = repo(&["a.txt", "b.txt"]);
    let (_w, cmd) = worker(
        r#"if [ "$DAGEXEC_TASK_INDEX" = 1 ]; then exec no-such-agent-cli --print; fi
echo "working on attempt $DAGEXEC_ATTEMPT" > "$DAGEXEC_LOG_FILE"
echo 'some progress'
echo 'error: ANTHROPIC_API_KEY is not set' >&2
exit 1"#,
    );
    let o = run(dir.path()).worker(&cmd).timeout("20s").run();
    let out = o.expect_code(1);
    let plan = plan_or_done(dir.path());
    assert_eq!(
        result(&plan, 0),
        "worker exited with status 1 (last output: \"some progress\"); stderr: error: ANTHROPIC_API_KEY is not set"
    );
    let missing = result(&plan, 1);
    assert!(
        missing.starts_with("worker exited with status 127")
            && missing.contains("— `no-such-agent-cli`: not found; stderr: "),
        "{missing}"
    );
    let logs = dir.path().join(".git/dagexec/logs");
    for k in 1..=3 {
        let file = |ext: &str| {
            std::fs::read_to_string(logs.join(format!("run-1/task-0-attempt-{k}.{ext}")))
        };
        assert_eq!(file("stdout").unwrap(), "some progress\n");
        assert_eq!(
            file("stderr").unwrap(),
            "error: ANTHROPIC_API_KEY is not set\n"
        );
        assert_eq!(file("log").unwrap(), format!("working on attempt {k}\n"));
    }
    assert!(
        out.contains("Attempt logs in .git/dagexec/logs (run-R/task-N-attempt-K.stdout, .stderr, .log):\n  task 0: run-1 attempt 1 (stdout, stderr, log), run-1 attempt 2 (stdout, stderr, log), run-1 attempt 3 (stdout, stderr, log)\n  task 1: run-1 attempt 1 (stdout, stderr)"),
        "{out}"
    );
    let status = dagexec(dir.path()).arg("status").output().unwrap();
    let status = text(&status);
    assert!(
        status.contains("\nAttempt logs in .git/dagexec/logs (run-R/task-N-attempt-K.stdout, .stderr, .log):\n  task 0: run-1 attempt 1 (stdout, stderr, log),"),
        "{status}"
    );
    let json = exec(dir.path(), &["status", "--json"]);
    let rows: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        rows[1]["logs"][0],
        ".git/dagexec/logs/run-1/task-1-attempt-1.stdout"
    );
}

/// Issue 20 §4: `dagexec retry N` starts task N's attempts at 1 again, and the next run used
/// to overwrite the first run's `task-N-attempt-1..3` logs (attempt 1 even cleared them all).
/// Every attempt ever made keeps its own logs: each run keeps them in a folder of its own.
#[test]
fn every_attempt_keeps_its_logs_after_a_retry_and_a_new_run() {
    let dir = repo(&["a.txt"]);
    let (_w, cmd) = worker(
        r#"n=$(cat "$MARK" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$MARK"
echo "call $n" > "$DAGEXEC_LOG_FILE"
echo "call $n"
if [ $n -le 3 ]; then echo "FAILED: call $n"; exit 0; fi
echo x > a.txt; echo "COMPLETED: call $n""#,
    );
    let mark = tempfile::tempdir().unwrap();
    let mark = mark.path().join("calls");
    let run = |dir: &Path| {
        dagexec(dir)
            .env("MARK", &mark)
            .args(["run", "--timeout", "20s", "--worker", &cmd])
            .output()
            .unwrap()
    };
    let o = run(dir.path());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let o = exec(dir.path(), &["retry", "0"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(dir.path());
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    let logs = dir.path().join(".git/dagexec/logs");
    let read = |rel: &str| std::fs::read_to_string(logs.join(rel)).unwrap_or_default();
    for k in 1..=3 {
        assert_eq!(
            read(&format!("run-1/task-0-attempt-{k}.stdout")),
            format!("call {k}\nFAILED: call {k}\n")
        );
        assert_eq!(
            read(&format!("run-1/task-0-attempt-{k}.log")),
            format!("call {k}\n")
        );
    }
    assert_eq!(
        read("run-2/task-0-attempt-1.stdout"),
        "call 4\nCOMPLETED: call 4\n"
    );
    let json = exec(dir.path(), &["status", "--json"]);
    let rows: Value = serde_json::from_slice(&json.stdout).unwrap();
    let files: Vec<&str> = rows[0]["logs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|f| f.ends_with(".stdout"))
        .collect();
    assert_eq!(
        files,
        [
            ".git/dagexec/logs/run-1/task-0-attempt-1.stdout",
            ".git/dagexec/logs/run-1/task-0-attempt-2.stdout",
            ".git/dagexec/logs/run-1/task-0-attempt-3.stdout",
            ".git/dagexec/logs/run-2/task-0-attempt-1.stdout",
        ]
    );
}

/// The kept logs are written without following a link planted where one of them goes.
#[test]
fn kept_logs_do_not_follow_planted_links() {
    let dir = repo(&["a.txt"]);
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let logs = dir.path().join(".git/dagexec/logs");
    std::fs::create_dir_all(logs.join("run-1")).unwrap();
    std::os::unix::fs::symlink(&victim, logs.join("run-1/task-0-attempt-1.stderr")).unwrap();
    // A planted run folder that links out of the repository.
    std::os::unix::fs::symlink(outside.path(), logs.join("run-2")).unwrap();
    let (_w, cmd) = worker("echo overwritten >&2; echo x > a.txt; echo 'COMPLETED: ok'");
    let o = run(dir.path()).worker(&cmd).timeout("20s").run();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // The run made a folder of its own, past every name already there.
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
    let stderr = logs.join("run-3/task-0-attempt-1.stderr");
    assert!(
        !std::fs::symlink_metadata(&stderr)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(stderr).unwrap(), "overwritten\n");
}

/// A work log that is a link (at `$DAGEXEC_LOG_FILE` or in the task's tree) is not read: its
/// target would end up in the reason, the plan and the kept logs.
#[test]
fn a_linked_work_log_is_not_read() {
    let dir = repo(&["a.txt", "b.txt"]);
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "TOPSECRET\n").unwrap();
    let (_w, cmd) = worker(&format!(
        r#"if [ "$DAGEXEC_TASK_INDEX" = 0 ]; then ln -sf '{s}' "$DAGEXEC_LOG_FILE"
else mkdir -p .design; ln -s '{s}' ".design/worker-$DAGEXEC_TASK_INDEX.log"; fi
echo 'no status line'"#,
        s = secret.display()
    ));
    let o = run(dir.path()).worker(&cmd).timeout("20s").run();
    let out = o.expect_code(1);
    assert!(!out.contains("TOPSECRET"), "{out}");
    let plan = plan_or_done(dir.path());
    assert!(
        result(&plan, 0).starts_with(
            "No status line returned (last output: \"no status line\") and no log file found; the last non-empty line of stdout must be the status line"
        ),
        "{}",
        result(&plan, 0)
    );
    // The link in the tree is also a change that adds a link: refused for that.
    assert!(
        !result(&plan, 1).contains("TOPSECRET"),
        "{}",
        result(&plan, 1)
    );
    let logs = dir.path().join(".git/dagexec/logs/run-1");
    for entry in std::fs::read_dir(logs).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        assert!(!text.contains("TOPSECRET"), "{}", entry.path().display());
    }
}

/// A FIFO the worker leaves at `$DAGEXEC_LOG_FILE` or at its usage file is no log and no
/// usage report: reading either back does not wait for a writer that never comes (the
/// worker has exited), so the run goes on and the attempt is judged without them.
#[test]
fn a_fifo_left_at_the_work_log_or_usage_file_does_not_hang_the_run() {
    let dir = repo(&["a.txt"]);
    let (_w, cmd) = worker(
        r#"rm -f "$DAGEXEC_LOG_FILE" "$DAGEXEC_USAGE_FILE"; mkfifo "$DAGEXEC_LOG_FILE" "$DAGEXEC_USAGE_FILE"
echo x > a.txt; echo 'COMPLETED: made a.txt'"#,
    );
    let o = run(dir.path())
        .worker(&cmd)
        .timeout("20s")
        .run_within(std::time::Duration::from_secs(120));
    o.expect_code(0);
}

/// Terminal escapes in a status line reach neither the output nor the commit message.
#[test]
fn escape_sequences_in_a_status_line_are_neutralised() {
    let dir = repo(&["a.txt"]);
    let (_w, cmd) = worker(r"echo x > a.txt; printf 'COMPLETED: \033]0;pwned\007\033[2J done\n'");
    let o = run(dir.path()).worker(&cmd).timeout("20s").run();
    let out = o.expect_code(0);
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
    let log = git(dir.path(), &["log", "--format=%B"]);
    assert!(!log.contains('\u{1b}') && !log.contains('\u{7}'), "{log:?}");
    assert!(
        log.contains("- task 0: make a.txt — completed: done"),
        "{log}"
    );
}

/// Regression: a NUL or an escape in a subject passed validation (and every commit failed).
#[test]
fn control_characters_in_a_subject_are_refused_before_anything_runs() {
    let dir = repo(&["a.txt"]);
    let path = dir.path().join(".design/plan.json");
    let mut plan: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    plan["tasks"][0]["subject"] = "make\u{0} a.txt \u{1b}[2J".into();
    std::fs::write(&path, serde_json::to_string(&plan).unwrap()).unwrap();
    let (_w, cmd) = worker("touch ran; echo 'COMPLETED: ok'");
    let o = run(dir.path()).worker(&cmd).timeout("20s").run();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "task 0 subject: \"make\\0 a.txt \\u{1b}[2J\" contains a control character (U+0000)"
        ),
        "{err}"
    );
    assert!(!dir.path().join("ran").exists());
}

/// A panic is a bug report: what, where, where to report it, and the plan's state; the plan
/// file stays valid and a second run resumes.
#[test]
fn a_panic_is_reported_as_a_bug_and_the_plan_stays_valid() {
    let dir = repo(&["a.txt", "b.txt"]);
    let (_w, cmd) = worker(
        r#"echo x > "$( [ "$DAGEXEC_TASK_INDEX" = 0 ] && echo a.txt || echo b.txt )"; echo 'COMPLETED: ok'"#,
    );
    let o = dagexec(dir.path())
        .args(["run", "--timeout", "20s", "--worker", &cmd])
        .env("DAGEXEC_FAILPOINT", "panic:after-workers:1")
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(101), "{err}");
    assert!(
        err.contains("dagexec: internal error — this is a bug in dagexec, not in your plan or worker.\n  what:  failpoint after-workers:1 reached (DAGEXEC_FAILPOINT asked for a panic)\n  where: src/flow/mod.rs:"),
        "{err}"
    );
    assert!(
        err.contains("  plan:  .design/plan.json is intact (2 tasks: 0 pending, 2 in progress, 0 completed); it is saved whenever a status changes, so run `dagexec run` again to resume"),
        "{err}"
    );
    assert!(err.contains("Please report it at https://"), "{err}");
    assert!(!err.contains("panicked at"), "no raw panic message: {err}");
    plan_or_done(dir.path());
    let again = run(dir.path()).worker(&cmd).timeout("20s").run();
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
}

/// Issue 21 §4: a failure a retry cannot help is not retried — a usage error (the real
/// message codex 0.169.0 gives `--full-auto`), exit 127 — and refused credentials (the real
/// result object claude 2.1.328 prints for a 401) stop the run with exit 6, naming the
/// secret; the task after them never starts.
#[test]
fn failures_no_retry_can_help_are_not_retried_and_refused_credentials_stop_the_run() {
    let dir = repo(&["a.txt", "b.txt", "c.txt", "d.txt"]);
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agents");
    let (_w, cmd) = worker(&format!(
        r#"case "$DAGEXEC_TASK_INDEX" in
0) cat '{usage}' >&2; exit 2 ;;
1) exec no-such-agent-cli -p ;;
2) cat '{auth}'; exit 1 ;;
3) echo x > d.txt; echo 'COMPLETED: d' ;;
esac"#,
        usage = fixtures.join("codex-usage-error.stderr").display(),
        auth = fixtures.join("claude-401.json").display(),
    ));
    let o = exec(
        dir.path(),
        &["run", "--jobs", "1", "--timeout", "20s", "--worker", &cmd],
    );
    let out = o.expect_code(6);
    let plan = plan_or_done(dir.path());
    let attempts = |i: usize| plan["tasks"][i]["attempts"].as_u64();
    assert_eq!(
        (attempts(0), attempts(1), attempts(2), attempts(3)),
        (Some(1), Some(1), Some(1), None),
        "{out}"
    );
    assert!(
        result(&plan, 0).contains(
            "— not retried: the agent CLI refused its command line (error: unexpected argument '--full-auto' found)"
        ),
        "{}",
        result(&plan, 0)
    );
    assert!(
        result(&plan, 1).contains("— not retried: the command was not found"),
        "{}",
        result(&plan, 1)
    );
    assert!(
        result(&plan, 2).starts_with(
            "claude: API error 401: Invalid API key · Fix external API key — not retried, and the run stops"
        ),
        "{}",
        result(&plan, 2)
    );
    assert_eq!(plan["tasks"][3]["status"], "pending", "{out}");
    assert!(
        out.contains("Stopped: task 2: claude: API error 401")
            && out.contains("set the secret ANTHROPIC_API_KEY"),
        "{out}"
    );
}

/// Issue 20 §4: a 900 KB `COMPLETED:` line was stored whole in the plan's result, its
/// `completedTasks` and a 921 KB commit message. A result is clipped to 4 KiB with a marker;
/// the whole line stays in the attempt's kept stdout.
#[test]
fn a_900_kb_status_line_is_clipped_everywhere_and_kept_whole_in_the_log() {
    let dir = repo(&["a.txt"]);
    let (_w, cmd) = worker(
        r#"echo x > a.txt
printf 'COMPLETED: '; head -c 900000 /dev/zero | tr '\0' 'y'; echo"#,
    );
    let o = run(dir.path()).worker(&cmd).timeout("30s").run();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{}", &out[..out.len().min(2000)]);
    assert!(out.len() < 64 << 10, "the run printed {} bytes", out.len());
    let marker = " … [clipped: 900000 bytes in all; the whole text is in the attempt's log]";
    let plan = plan_or_done(dir.path());
    let r = result(&plan, 0);
    assert!(
        r.len() <= 4096 && r.starts_with("yyy") && r.ends_with(marker),
        "{}",
        r.len()
    );
    let summary = plan["progress"]["completedTasks"][0]["summary"]
        .as_str()
        .unwrap();
    assert_eq!(summary, r);
    let message = git(dir.path(), &["log", "--format=%B"]);
    assert!(
        message.len() < 16 << 10,
        "commit messages of {} bytes",
        message.len()
    );
    assert!(message.contains(marker), "{message}");
    let kept = std::fs::read_to_string(
        dir.path()
            .join(".git/dagexec/logs/run-1/task-0-attempt-1.stdout"),
    )
    .unwrap();
    assert_eq!(kept.trim_end().len(), "COMPLETED: ".len() + 900_000);
}

/// Issue 33 §4: a failure says why. A worker that exits 0 with no status line but explains
/// itself on stderr fails with that stderr and the status line that was expected; a status
/// line in lower case, or one that is not the last non-empty line, is named as such.
#[test]
fn a_missing_status_line_says_what_was_expected_and_what_stderr_said() {
    let dir = repo(&["a.txt", "b.txt", "c.txt"]);
    let (_w, cmd) = worker(
        r#"echo x > "$(printf 'abc' | cut -c $((DAGEXEC_TASK_INDEX + 1))).txt"
case "$DAGEXEC_TASK_INDEX" in
0) echo 'Starting the agent…'; echo 'error: the API key is not set' >&2 ;;
1) echo 'completed: wrote b.txt' ;;
2) echo 'COMPLETED: wrote c.txt'; echo 'bye'; echo ;;
esac"#,
    );
    let o = run(dir.path()).worker(&cmd).timeout("20s").run();
    o.expect_code(1);
    let plan = plan_or_done(dir.path());
    let reasons: Vec<String> = (0..3)
        .map(|i| format!("task {i}: {}", result(&plan, i)))
        .collect();
    insta::assert_snapshot!(reasons.join("\n"));
}

/// A Codex worker whose configuration the model gateway cannot follow — a provider it refuses,
/// or a `config.toml` it cannot read — is refused with the other pre-start checks, before
/// anything is written: `--branch` made no branch, the tree is as it was, and the error names
/// the file, the field and the fix.
#[test]
fn a_broken_codex_configuration_is_refused_before_anything_is_written() {
    let home = tempfile::tempdir().unwrap();
    let codex = home.path().join(".codex/config.toml");
    let path = codex_on_path(home.path());
    std::fs::create_dir_all(codex.parent().unwrap()).unwrap();
    std::fs::write(&codex, "model_provider = \"nowhere\"\n").unwrap();
    let broken = [
        "model_provider: \"nowhere\" names no [model_providers.nowhere] table",
        "cannot be read",
    ];
    for said in broken {
        if said == "cannot be read" {
            std::fs::remove_file(&codex).unwrap();
            std::fs::create_dir_all(&codex).unwrap();
        }
        let dir = repo(&["a.txt"]);
        let out = local(dir.path())
            .worker("codex")
            .args(["--branch", "feature"])
            .env("HOME", home.path())
            .env("PATH", &path)
            .env_remove("CODEX_HOME")
            .env_remove("OPENAI_BASE_URL")
            .run();
        let log = out.expect_code(2);
        assert!(
            log.contains(&format!("{}: {said}", codex.display()))
                && log.contains("OPENAI_BASE_URL"),
            "{log}"
        );
        assert_eq!(
            git(dir.path(), &["branch", "--list", "feature"]),
            "",
            "{log}"
        );
        assert_eq!(git(dir.path(), &["status", "--porcelain"]), "", "{log}");
    }
}
