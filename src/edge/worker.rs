//! Running one worker process under the binding contract: `sh -c <command>` in the task's
//! tree, the prompt on stdin and in `DAGEXEC_PROMPT_FILE`, the `DAGEXEC_*` variables set,
//! stdout and stderr captured (tails only), the work log read back afterwards.
//!
//! The worker gets its own process group and a process tag ([`crate::edge::procs`]), both `SIGKILLed`
//! on every way out (exit, timeout, cancellation, a dropped future), so nothing it started
//! outlives the attempt — not even a process that left the group with `setsid`.
//!
//! Whatever the worker does to its pipes (closes them, hands them to a background child,
//! floods them with tens of megabytes of binary), this returns a [`WorkerRun`]: memory stays
//! bounded (tails only) and nothing here panics.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::watch;

use crate::pure::outcome::Exit;

mod failure;

#[cfg(test)]
use failure::stderr_tail_line;
pub use failure::{classify, failure_detail};

// Bytes kept (the tail) of stdout, stderr and the work log; the mark in front of a cut one.
const STDOUT_CAP: usize = 1 << 20;
const STDERR_CAP: usize = 64 << 10;
pub(crate) const LOG_CAP: usize = 4 << 20;
pub(crate) const CUT_MARKER: &str = "… (output cut)\n";
/// After the worker exits, how long what it left behind may keep stdout/stderr open.
const EOF_GRACE: Duration = Duration::from_secs(2);
/// After SIGTERM on cancellation, how long before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(3);
/// After `SIGKILLing` the group, how long to drain what is left in the pipes.
const DRAIN_GRACE: Duration = Duration::from_millis(250);

/// Everything needed to run one attempt of one task's worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerSpec {
    /// The user's shell command line, run with `sh -c`.
    pub command: String,
    /// The task's tree (a git worktree); the worker's working directory.
    pub cwd: PathBuf,
    /// The assembled prompt: written to stdin and to `prompt_file`.
    pub prompt: String,
    /// `DAGEXEC_TASK_INDEX`.
    pub task_index: usize,
    /// `DAGEXEC_ATTEMPT`, 1-based.
    pub attempt: u32,
    /// `DAGEXEC_ROUND`.
    pub round: u32,
    /// `DAGEXEC_MODEL`: the task's `agent.model`, may be empty.
    pub model: String,
    /// `DAGEXEC_PROMPT_FILE` (made absolute): written, parent dirs created, before spawning.
    pub prompt_file: PathBuf,
    /// `DAGEXEC_LOG_FILE` (made absolute): removed before spawning, read back after the run.
    pub log_file: PathBuf,
    /// `DAGEXEC_USAGE_FILE` (made absolute) when set: where the worker may report what it spent
    /// (see [`crate::pure::usage`]); removed before spawning, read back after the run.
    pub usage_file: Option<PathBuf>,
    /// The per-task timeout; the process group is `SIGKILLed` when it elapses.
    pub timeout: Duration,
    /// More environment variables (the `DAGEXEC_*` ones win on a clash).
    pub extra_env: Vec<(String, String)>,
}

/// What one finished (not cancelled) worker run left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerRun {
    /// Captured stdout (lossy UTF-8): at most the last 1 MiB, after `"… (output cut)\n"` if cut.
    pub stdout: String,
    /// The last 64 KiB of stderr (lossy UTF-8).
    pub stderr_tail: String,
    /// How the process ended.
    pub exit: Exit,
    /// The log file after the run (its last 4 MiB, marked like `stdout` when cut); `None` if
    /// the worker wrote none.
    pub log: Option<String>,
    /// Wall time from the start of [`run`] to its end.
    pub duration: Duration,
    /// The usage file's text (at most 64 KiB), when the worker wrote one (a regular file).
    pub usage: Option<String>,
}

/// How [`run`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The worker ran to an end (a timeout and a failure to start included).
    Finished(WorkerRun),
    /// Cancellation was requested; the process group has been killed and the child reaped.
    /// What the worker printed and logged until then, for its kept logs (`None` when it was
    /// never started: cancellation came first).
    Cancelled(Option<Box<WorkerRun>>),
}

/// Runs one worker per `spec`, stopping it when `cancel` becomes `true` (SIGTERM to the
/// group, SIGKILL 3 s later) or when `spec.timeout` elapses (SIGKILL to the group).
/// Returns [`Stop::Cancelled`] without spawning if `cancel` is already `true`.
pub async fn run(spec: &WorkerSpec, cancel: &watch::Receiver<bool>) -> Stop {
    let mut cancel = cancel.clone();
    if *cancel.borrow_and_update() {
        return Stop::Cancelled(None);
    }
    let started = Instant::now();
    let tag = crate::edge::procs::new_tag();
    let (mut child, log_file, usage_file) = match spawn(spec, &tag).await {
        Ok(spawned) => spawned,
        Err(reason) => {
            return Stop::Finished(WorkerRun {
                stdout: String::new(),
                stderr_tail: String::new(),
                exit: Exit::SpawnFailed(reason),
                log: None,
                duration: started.elapsed(),
                usage: None,
            });
        }
    };
    // Dropping `group` SIGKILLs the whole group: the final sweep on every way out.
    let group = ProcessGroup {
        pgid: child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw),
        tag,
    };
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (mut out, mut err) = (Tail::new(STDOUT_CAP), Tail::new(STDERR_CAP));
    let (exit, cancelled) = {
        let pumps = async { tokio::join!(pump(stdout, &mut out), pump(stderr, &mut err)) };
        let feed = feed(stdin, spec.prompt.as_bytes());
        supervise(&mut child, &group, pumps, feed, spec.timeout, &mut cancel).await
    };
    drop(group);
    let (stdout, stderr_tail) = (out.into_string(CUT_MARKER), err.into_string(""));
    // The work log's last LOG_CAP bytes; a usage file bigger than USAGE_CAP is no report.
    let log = read_back(&log_file, LOG_CAP).await;
    let usage = match &usage_file {
        Some(path) => read_back(path, USAGE_CAP).await.filter(|t| !t.cut),
        None => None,
    };
    let run = WorkerRun {
        stdout,
        stderr_tail,
        exit,
        log: log.map(|t| t.into_string(CUT_MARKER)),
        duration: started.elapsed(),
        usage: usage.map(|t| t.into_string("")),
    };
    if cancelled {
        Stop::Cancelled(Some(Box::new(run)))
    } else {
        Stop::Finished(run)
    }
}

/// Writes the prompt file, removes a stale log (and usage file) and starts `sh -c`; returns
/// the child and the absolute log and usage paths. Paths are made absolute because the worker
/// runs elsewhere.
#[expect(
    clippy::unused_async,
    reason = "called on the runtime that owns the child it spawns (tokio's process driver)"
)]
async fn spawn(spec: &WorkerSpec, tag: &str) -> Result<(Child, PathBuf, Option<PathBuf>), String> {
    let prompt_file = std::path::absolute(&spec.prompt_file).map_err(|e| e.to_string())?;
    let log_file = std::path::absolute(&spec.log_file).map_err(|e| e.to_string())?;
    let usage_file = spec
        .usage_file
        .as_ref()
        .map(std::path::absolute)
        .transpose();
    let usage_file = usage_file.map_err(|e| e.to_string())?;
    let usage_dir = usage_file.as_deref().and_then(Path::parent);
    for dir in [prompt_file.parent(), log_file.parent(), usage_dir]
        .into_iter()
        .flatten()
    {
        let created = crate::edge::fsx::create_dir_all(crate::edge::fsx::default_root(dir), dir);
        created.map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let written = crate::edge::fsx::write_atomic(&prompt_file, spec.prompt.as_bytes());
    written.map_err(|e| format!("cannot write {}: {e}", prompt_file.display()))?;
    // Nothing there is fine (fsx::remove_file).
    for stale in std::iter::once(&log_file).chain(usage_file.as_ref()) {
        let removed = crate::edge::fsx::remove_file(crate::edge::fsx::default_root(stale), stale);
        removed.map_err(|e| format!("cannot remove the old {}: {e}", stale.display()))?;
    }
    // In the Action's work job, as the agent's unprivileged user (nothing elsewhere).
    let mut command = Command::from(crate::edge::procs::sh(&spec.command, &spec.cwd, tag));
    // A worker the model gateway serves gets no provider key or base URL of dagexec's own:
    // only the gateway's, in `extra_env`.
    if spec
        .extra_env
        .iter()
        .any(|(k, _)| k == crate::edge::gateway::URL_VAR)
    {
        for var in crate::edge::gateway::withheld_vars() {
            command.env_remove(var);
        }
    }
    command
        .kill_on_drop(true)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .envs(spec.extra_env.iter().map(|(k, v)| (k, v)))
        .env("DAGEXEC_TASK_INDEX", spec.task_index.to_string())
        .env("DAGEXEC_ATTEMPT", spec.attempt.to_string())
        .env("DAGEXEC_ROUND", spec.round.to_string())
        .env("DAGEXEC_MODEL", &spec.model)
        .env("DAGEXEC_PROMPT_FILE", &prompt_file)
        .env("DAGEXEC_LOG_FILE", &log_file);
    // Only this attempt's file: never one inherited from dagexec's own environment.
    match &usage_file {
        Some(f) => command.env(crate::pure::usage::USAGE_FILE_VAR, f),
        None => command.env_remove(crate::pure::usage::USAGE_FILE_VAR),
    };
    let child = command.spawn().map_err(|e| e.to_string())?;
    Ok((child, log_file, usage_file))
}

/// Waits for the child, the timeout or cancellation while the pipes are served: the worker's
/// exit, and whether cancellation stopped it. The child has been reaped on return, and what it
/// printed until then read (a stopped worker's pipes are drained for a moment after its group
/// is killed, so its output is kept too).
async fn supervise(
    child: &mut Child,
    group: &ProcessGroup,
    pumps: impl Future<Output = ((), ())>,
    feed: impl Future<Output = ()>,
    timeout: Duration,
    cancel: &mut watch::Receiver<bool>,
) -> (Exit, bool) {
    tokio::pin!(pumps, feed);
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let (mut pumped, mut fed) = (false, false);
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            _ = &mut pumps, if !pumped => pumped = true,
            () = &mut feed, if !fed => fed = true,
            () = &mut deadline => {
                group.kill();
                let _ = child.wait().await;
                // A finished future must not be polled again (it panics): a worker that
                // closed its output and then hung has finished pumps here.
                if !pumped {
                    let _ = tokio::time::timeout(DRAIN_GRACE, &mut pumps).await;
                }
                return (Exit::TimedOut(timeout), false);
            }
            () = cancelled(cancel) => {
                if let Some(pgid) = group.pgid {
                    // ESRCH: the group is empty already.
                    let _ = killpg(pgid, Signal::SIGTERM);
                }
                let status = if let Ok(status) =
                    tokio::time::timeout(TERM_GRACE, child.wait()).await
                {
                    status
                } else {
                    group.kill();
                    child.wait().await
                };
                // What it printed before it stopped is kept with the attempt's logs.
                group.kill();
                if !pumped {
                    let _ = tokio::time::timeout(DRAIN_GRACE, &mut pumps).await;
                }
                return (exit_of_wait(status), true);
            }
        }
    };
    // The worker is gone; what it left behind may still hold stdout/stderr open.
    if !pumped {
        tokio::select! {
            _ = &mut pumps => {}
            () = tokio::time::sleep(EOF_GRACE) => {
                tracing::debug!("worker's leftovers hold its output open; killing its group");
                group.kill();
                let _ = tokio::time::timeout(DRAIN_GRACE, &mut pumps).await;
            }
            () = cancelled(cancel) => return (exit_of_wait(status), true),
        }
    }
    (exit_of_wait(status), false)
}

/// What waiting for the worker gave, as an [`Exit`].
fn exit_of_wait(status: io::Result<ExitStatus>) -> Exit {
    match status.map(|s| (s.code(), s.signal())) {
        Ok((Some(0), _)) => Exit::Success,
        Ok((Some(code), _)) => Exit::Code(code),
        Ok((None, signal)) => signal.map_or(Exit::Code(-1), Exit::Signal),
        Err(e) => Exit::SpawnFailed(format!("waiting for the worker failed: {e}")),
    }
}

/// Resolves once cancellation is requested; never if the sender is gone.
async fn cancelled(cancel: &mut watch::Receiver<bool>) {
    if cancel.wait_for(|&c| c).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Writes the prompt to the worker's stdin, then closes it (by dropping it).
async fn feed(stdin: Option<ChildStdin>, prompt: &[u8]) {
    if let Some(mut stdin) = stdin {
        // The only expected error is EPIPE: the worker exited without reading. Not our problem.
        let _ = stdin.write_all(prompt).await;
    }
}

/// Reads `src` to EOF (or an error) into `tail`.
async fn pump(src: Option<impl AsyncRead + Unpin>, tail: &mut Tail) {
    let Some(mut src) = src else { return };
    let mut chunk = vec![0; 64 * 1024];
    while let Ok(n @ 1..) = src.read(&mut chunk).await {
        tail.push(&chunk[..n]);
    }
}

/// The last `cap` bytes of the file the worker left at `path` ([`read_tail`]), read off the
/// runtime's threads.
async fn read_back(path: &Path, cap: usize) -> Option<Tail> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || read_tail(&path, cap))
        .await
        .ok()
        .flatten()
}

/// The last `cap` bytes of the file a worker left at `path` (cut, when it holds more); `None`
/// if there is none or it is not a regular file: a link (the worker could point one at any
/// file of the user's) is not followed, and a FIFO is opened without waiting for a writer
/// that never comes. At most `cap` + 1 bytes are read, however the file grows meanwhile.
pub(crate) fn read_tail(path: &Path, cap: usize) -> Option<Tail> {
    use std::io::{Read, Seek, SeekFrom};
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok().filter(std::fs::Metadata::is_file)?;
    // One byte over the cap, so that a longer file is cut (and marked) as the tail is read.
    let over = cap as u64 + 1;
    file.seek(SeekFrom::Start(meta.len().saturating_sub(over)))
        .ok()?;
    let mut bytes = Vec::new();
    file.take(over).read_to_end(&mut bytes).ok()?;
    let mut tail = Tail::new(cap);
    tail.push(&bytes);
    tail.trim();
    Some(tail)
}

/// Bytes of a usage file read; a bigger one is not a usage report.
const USAGE_CAP: usize = 64 << 10;

/// The last `cap` bytes of a stream.
pub(crate) struct Tail {
    buf: Vec<u8>,
    cap: usize,
    cut: bool,
}

impl Tail {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            buf: Vec::new(),
            cap,
            cut: false,
        }
    }

    pub(crate) fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
        // Trim only past twice the cap, so the copying stays amortised O(1) per byte.
        if self.buf.len() > 2 * self.cap {
            self.trim();
        }
    }

    fn trim(&mut self) {
        if self.buf.len() > self.cap {
            self.buf.drain(..self.buf.len() - self.cap);
            self.cut = true;
        }
    }

    /// The bytes, when none were cut.
    pub(crate) fn whole(mut self) -> Option<Vec<u8>> {
        self.trim();
        (!self.cut).then_some(self.buf)
    }

    /// Lossy UTF-8, with `marker` in front (and no half character after it) if cut.
    pub(crate) fn into_string(mut self, marker: &str) -> String {
        self.trim();
        if !self.cut {
            return String::from_utf8_lossy(&self.buf).into_owned();
        }
        let skip = self.buf.iter().position(|b| b & 0xC0 != 0x80);
        let text = String::from_utf8_lossy(&self.buf[skip.unwrap_or(0).min(3)..]);
        format!("{marker}{text}")
    }
}

/// The worker's process group and tag; everything in either is `SIGKILLed` when dropped.
struct ProcessGroup {
    pgid: Option<Pid>,
    tag: String,
}

impl ProcessGroup {
    /// SIGKILLs the group and every process that left it carrying the tag.
    fn kill(&self) {
        crate::edge::procs::kill_all(self.pgid, &self.tag);
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use tokio::time::{sleep, timeout};

    const MS: Duration = Duration::from_millis(1);
    /// Starts a background `sleep` and writes `$$ $!` (leader and child) to `pids`.
    const BG: &str = "sleep 60 & echo \"$$ $!\" > pids;";

    /// Writes `<name>.sh` into a tempdir; the spec runs it with `exec`, so `$$` leads the group.
    fn setup(name: &str, body: &str) -> (tempfile::TempDir, WorkerSpec) {
        let dir = tempfile::tempdir().expect("tempdir");
        let tree = dir.path().join("tree");
        let script = dir.path().join(format!("{name}.sh"));
        fs::create_dir(&tree).expect("tree");
        fs::write(&script, body).expect("script");
        let spec = WorkerSpec {
            command: format!("exec sh '{}'", script.display()),
            cwd: tree,
            prompt: "do the thing\nsecond line".into(),
            task_index: 4,
            attempt: 2,
            round: 7,
            model: "opus".into(),
            prompt_file: dir.path().join("run/prompt.md"),
            log_file: dir.path().join("run/log.md"),
            usage_file: Some(dir.path().join("run/usage.json")),
            timeout: Duration::from_secs(10),
            extra_env: vec![("EXTRA_VAR".into(), "extra".into())],
        };
        (dir, spec)
    }

    async fn go(spec: &WorkerSpec) -> WorkerRun {
        let (_tx, rx) = watch::channel(false);
        match timeout(Duration::from_secs(8), run(spec, &rx)).await {
            Ok(Stop::Finished(run)) => run,
            other => panic!("unexpected: {other:?}"),
        }
    }

    /// Waits briefly until the pids the script wrote to `file` fail `kill -0`: the first (our
    /// child, which we must have reaped) at once; the others may stay zombie orphans (a
    /// sandbox's PID 1 may never reap them; not ours to fix).
    async fn all_gone(file: &Path) {
        let text = fs::read_to_string(file).expect("pid file");
        let gone = |(i, pid): (usize, &str)| {
            let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let pid = Pid::from_raw(pid.parse().expect("pid"));
            (i > 0 && stat.contains(") Z ")) || nix::sys::signal::kill(pid, None).is_err()
        };
        let leader = text.split_whitespace().next().expect("leader pid");
        assert!(
            gone((0, leader)),
            "our child {leader} is still there (not reaped?)"
        );
        for _ in 0..50 {
            if text.split_whitespace().enumerate().all(gone) {
                return;
            }
            sleep(20 * MS).await;
        }
        panic!("still alive: {text}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn succeeds() {
        let body = r#"prompt=$(cat)
{ echo "$DAGEXEC_TASK_INDEX $DAGEXEC_ATTEMPT $DAGEXEC_ROUND $DAGEXEC_MODEL $EXTRA_VAR"
  echo "$DAGEXEC_PROMPT_FILE $DAGEXEC_LOG_FILE $(pwd -P)"; echo "$prompt"; } > "$DAGEXEC_LOG_FILE"
echo noise; echo 'to stderr' >&2; echo 'COMPLETED: ok'"#;
        let (dir, spec) = setup("succeeds", body);
        let run = go(&spec).await;
        assert_eq!(run.exit, Exit::Success);
        assert_eq!(run.stdout, "noise\nCOMPLETED: ok\n");
        assert_eq!(run.stderr_tail, "to stderr\n");
        let (d, tree) = (dir.path().display(), spec.cwd.canonicalize().expect("tree"));
        let paths = format!("{d}/run/prompt.md {d}/run/log.md {}", tree.display());
        let log = format!("4 2 7 opus extra\n{paths}\ndo the thing\nsecond line\n");
        assert_eq!(run.log, Some(log));
        let prompt = fs::read_to_string(&spec.prompt_file).expect("prompt");
        assert_eq!(prompt, spec.prompt);
    }

    /// The usage file is this attempt's own: a stale one is removed, a link or a huge file is
    /// not read, and without one the variable is unset even if dagexec itself had it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_back_the_usage_file() {
        let body = r#"test -e "$DAGEXEC_USAGE_FILE" && echo stale
printf '{"cost_usd": 0.5}' > "$DAGEXEC_USAGE_FILE"; echo 'COMPLETED: paid'"#;
        let (_dir, spec) = setup("writes_usage", body);
        let file = spec.usage_file.clone().expect("a usage file");
        fs::create_dir_all(file.parent().expect("parent")).expect("run dir");
        fs::write(&file, "old").expect("stale usage");
        let run = go(&spec).await;
        assert_eq!(run.stdout, "COMPLETED: paid\n");
        assert_eq!(run.usage.as_deref(), Some(r#"{"cost_usd": 0.5}"#));

        let body = r#"ln -s /etc/passwd "$DAGEXEC_USAGE_FILE"; echo 'COMPLETED: linked'"#;
        assert_eq!(go(&setup("links_usage", body).1).await.usage, None);
        let body = r#"head -c 100000 /dev/zero > "$DAGEXEC_USAGE_FILE"; echo 'COMPLETED: big'"#;
        assert_eq!(go(&setup("huge_usage", body).1).await.usage, None);
        let body = r#"echo "COMPLETED: [${DAGEXEC_USAGE_FILE-unset}]""#;
        let (_dir, mut spec) = setup("no_usage", body);
        spec.usage_file = None;
        spec.extra_env.push((
            crate::pure::usage::USAGE_FILE_VAR.into(),
            "/tmp/inherited".into(),
        ));
        let run = go(&spec).await;
        assert_eq!(
            (run.stdout.as_str(), run.usage),
            ("COMPLETED: [unset]\n", None)
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_prompt_file_never_stdin() {
        let body = "wc -c < \"$DAGEXEC_PROMPT_FILE\"; echo 'COMPLETED: read'";
        let (_dir, mut spec) = setup("reads_prompt_file_never_stdin", body);
        spec.prompt = "p".repeat(1 << 20);
        let run = go(&spec).await;
        assert_eq!(run.exit, Exit::Success);
        let words: Vec<_> = run.stdout.split_whitespace().collect();
        assert_eq!(words, ["1048576", "COMPLETED:", "read"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn exits_and_crashes() {
        for (name, body, exit, stdout) in [
            (
                "fails_with_exit_3",
                "echo partial; exit 3",
                Exit::Code(3),
                "partial\n",
            ),
            (
                "prints_failed_exits_0",
                "echo 'FAILED: x'",
                Exit::Success,
                "FAILED: x\n",
            ),
            (
                "crashes_via_kill_9",
                "echo before; kill -9 $$",
                Exit::Signal(9),
                "before\n",
            ),
        ] {
            let run = go(&setup(name, body).1).await;
            assert_eq!((run.exit, run.stdout.as_str()), (exit, stdout), "{name}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failure_detail_names_the_command_and_shows_stderr() {
        let (dir, mut spec) = setup("unused", "");
        spec.command = "nonexistent-cmd-xyz --flag".into();
        let run = go(&spec).await;
        assert_eq!(run.exit, Exit::Code(127));
        let detail = failure_detail(&run, &spec.command);
        assert!(
            detail.starts_with(" — `nonexistent-cmd-xyz`: not found; stderr: "),
            "{detail}"
        );
        let script = dir.path().join("not-executable.sh");
        fs::write(&script, "#!/bin/sh\necho hi\n").expect("script");
        spec.command = format!("'{}' arg", script.display());
        let run = go(&spec).await;
        assert_eq!(run.exit, Exit::Code(126));
        let detail = failure_detail(&run, &spec.command);
        let expected = format!(" — `{}`: not executable", script.display());
        assert!(detail.starts_with(&expected), "{detail}");

        let body = "echo out; printf 'one\\n\\033]0;pwned\\007two\\n\\nthree\\n' >&2; exit 1";
        let (_dir, spec) = setup("fails_loudly", body);
        let run = go(&spec).await;
        assert_eq!(run.exit, Exit::Code(1));
        assert_eq!(
            failure_detail(&run, &spec.command),
            "; stderr: one | two | three"
        );
        // A clean exit that explains itself on stderr (its missing status line is the failure).
        let body = "echo 'Starting…'; echo 'error: the API key is not set' >&2";
        let (_dir, spec) = setup("exits_0_quietly", body);
        let run = go(&spec).await;
        assert_eq!(run.exit, Exit::Success);
        assert_eq!(
            failure_detail(&run, &spec.command),
            "; stderr: error: the API key is not set"
        );
        let many: String = (1..=50).fold(String::new(), |mut s, i| {
            s.push_str(&format!("line {i}\n"));
            s
        });
        assert_eq!(
            stderr_tail_line(&many),
            "line 46 | line 47 | line 48 | line 49 | line 50"
        );
        assert!(stderr_tail_line(&"x".repeat(1000)).starts_with('…'));
        assert_eq!(stderr_tail_line(&"x".repeat(1000)).chars().count(), 400);
    }

    /// The real messages the pinned CLIs give a command line they do not accept (codex
    /// 0.169.0 and `--full-auto`, claude and gemini an unknown option): no retry can help.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_usage_error_a_missing_command_and_a_spawn_failure_are_not_retried() {
        use crate::pure::said::Halt;
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agents");
        for (name, code) in [
            ("codex-usage-error.stderr", 2),
            ("claude-usage-error.stderr", 1),
            ("gemini-usage-error.stderr", 1),
        ] {
            let body = format!("cat '{}' >&2; exit {code}", fixtures.join(name).display());
            let (_dir, spec) = setup("usage", &body);
            let run = go(&spec).await;
            let said = classify(&run);
            assert!(
                matches!(&said.halt, Some(Halt::Task { why }) if why.starts_with("the agent CLI refused its command line (")),
                "{name}: {said:?}"
            );
        }
        // An ordinary failure is retried: output on stdout, or stderr without a usage message.
        for body in [
            "echo working; echo 'error: unknown option' >&2; exit 1",
            "echo 'error: the tests failed' >&2; exit 1",
            "echo 'Usage: see above' >&2; exit 1",
        ] {
            let (_dir, spec) = setup("ordinary", body);
            assert_eq!(classify(&go(&spec).await).halt, None, "{body}");
        }
        let (_dir, mut spec) = setup("unused", "");
        spec.command = "nonexistent-cmd-xyz".into();
        assert!(matches!(
            classify(&go(&spec).await).halt,
            Some(Halt::Task { .. })
        ));
        spec.cwd = spec.cwd.join("missing");
        assert!(matches!(
            classify(&go(&spec).await).halt,
            Some(Halt::Task { .. })
        ));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn command_not_found_or_unstartable() {
        let (_dir, mut spec) = setup("unused", "");
        spec.command = "nonexistent-cmd-xyz".into();
        let run = go(&spec).await;
        assert_eq!(run.exit, Exit::Code(127));
        assert!(run.stderr_tail.contains("not found"), "{}", run.stderr_tail);
        spec.cwd = spec.cwd.join("missing");
        assert!(matches!(go(&spec).await.exit, Exit::SpawnFailed(_)));
        spec.prompt_file = spec.prompt_file.join("under-a-file");
        let run = go(&spec).await;
        assert!(
            matches!(&run.exit, Exit::SpawnFailed(r) if r.contains("cannot")),
            "{run:?}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hangs_or_leaves_children_behind() {
        let detached = "sleep 60 >/dev/null 2>&1 & echo \"$$ $!\" > pids; echo 'COMPLETED: y'";
        let rows = [
            ("hangs", format!("{BG} wait"), Exit::TimedOut(300 * MS), ""),
            (
                "holds_stdout",
                format!("{BG} echo 'COMPLETED: x'"),
                Exit::Success,
                "COMPLETED: x\n",
            ),
            (
                "detaches",
                detached.to_string(),
                Exit::Success,
                "COMPLETED: y\n",
            ),
        ];
        for (name, body, exit, stdout) in rows {
            let (_dir, mut spec) = setup(name, &body);
            if name == "hangs" {
                spec.timeout = 300 * MS;
            }
            // The children sleep 60 s: that the run ends at all (well before them) is the
            // point; how fast is the benchmarks' business, not a test's.
            let run = timeout(Duration::from_secs(30), go(&spec))
                .await
                .unwrap_or_else(|_| panic!("{name}: the run waited for the worker's children"));
            assert_eq!((run.exit, run.stdout.as_str()), (exit, stdout), "{name}");
            all_gone(&spec.cwd.join("pids")).await;
        }
    }

    /// Regression: a worker that closed its output and then hung made the timeout poll the
    /// finished output pumps again, a panic ("`async fn` resumed after completion").
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn closes_its_output_then_hangs() {
        let body = "echo \"$$\" > pids; exec >/dev/null 2>&1; sleep 60";
        let (_dir, mut spec) = setup("closes_output_then_hangs", body);
        spec.timeout = 300 * MS;
        let run = go(&spec).await;
        assert_eq!(run.exit, Exit::TimedOut(300 * MS));
        all_gone(&spec.cwd.join("pids")).await;
    }

    /// The matrix's rows: name, worker body, timeout (ms), the exit and the stdout expected.
    fn behaviour_rows() -> Vec<(&'static str, String, Option<u32>, Exit, &'static str)> {
        // Waits (inside the worker) until `f` exists; the escaped process writes it.
        let await_file = |f: &str| format!("while [ ! -s {f} ]; do sleep 0.05; done;");
        let escaped = "setsid sh -c 'echo $$ > esc.tmp; mv esc.tmp esc; exec sleep 60'";
        vec![
            (
                "closes_stdout",
                "echo $$ > pids; exec >&-; echo lost; echo 'to stderr' >&2".into(),
                None,
                Exit::Success,
                "",
            ),
            (
                "closes_stdout_then_hangs",
                "echo $$ > pids; exec >&-; sleep 60".into(),
                Some(300),
                Exit::TimedOut(300 * MS),
                "",
            ),
            (
                "closes_stderr",
                "echo $$ > pids; exec 2>&-; echo 'COMPLETED: fine'".into(),
                None,
                Exit::Success,
                "COMPLETED: fine\n",
            ),
            (
                "closes_stderr_then_hangs",
                "echo $$ > pids; exec 2>&-; echo partial; sleep 60".into(),
                Some(300),
                Exit::TimedOut(300 * MS),
                "partial\n",
            ),
            (
                "double_fork",
                "( (sleep 60 & echo \"$$ $!\" > pids) & ); sleep 0.2; echo 'COMPLETED: df'".into(),
                None,
                Exit::Success,
                "COMPLETED: df\n",
            ),
            (
                "setsid_holds_stdout",
                format!(
                    "{escaped} & {} echo \"$$ $(cat esc)\" > pids; echo 'COMPLETED: s'",
                    await_file("esc")
                ),
                None,
                Exit::Success,
                "COMPLETED: s\n",
            ),
            (
                "setsid_detached",
                format!(
                    "{escaped} >/dev/null 2>&1 </dev/null & {} echo \"$$ $(cat esc)\" > pids; echo 'COMPLETED: d'",
                    await_file("esc")
                ),
                None,
                Exit::Success,
                "COMPLETED: d\n",
            ),
            (
                "setsid_then_hangs",
                format!(
                    "{escaped} >/dev/null 2>&1 </dev/null & {} echo \"$$ $(cat esc)\" > pids; sleep 60",
                    await_file("esc")
                ),
                Some(1000),
                Exit::TimedOut(1000 * MS),
                "",
            ),
            (
                "segfaults",
                "echo $$ > pids; echo before; kill -SEGV $$".into(),
                None,
                Exit::Signal(11),
                "before\n",
            ),
        ]
    }

    /// The worker-behaviour matrix: whatever a worker does to its pipes and processes, the
    /// run ends with the right exit, keeps what it can of the output, and leaves no process
    /// of the worker's behind (`pids` lists the leader, then the leftovers to check).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn worker_behaviour_matrix() {
        for (name, body, timeout_ms, exit, stdout) in behaviour_rows() {
            let (_dir, mut spec) = setup(name, &body);
            if let Some(ms) = timeout_ms {
                spec.timeout = ms * MS;
            }
            let run = go(&spec).await;
            assert_eq!((&run.exit, run.stdout.as_str()), (&exit, stdout), "{name}");
            all_gone(&spec.cwd.join("pids")).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tens_of_mib_and_binary_output() {
        // 24 MiB on each stream: only the tails are kept.
        let body = "(yes err | head -c 25165824 >&2) &
                    yes 0123456789abcde | head -c 25165824; wait; echo 'COMPLETED: huge'";
        let run = go(&setup("prints_24_mib_twice", body).1).await;
        assert_eq!(run.exit, Exit::Success);
        assert_eq!(run.stdout.len(), CUT_MARKER.len() + STDOUT_CAP);
        assert_eq!(run.stdout.lines().last(), Some("COMPLETED: huge"));
        assert_eq!(run.stderr_tail.len(), STDERR_CAP);

        let body = "head -c 300000 /dev/urandom; head -c 3000 /dev/urandom >&2
                    printf '\\nCOMPLETED: bin \\377\\376 end\\n'";
        let run = go(&setup("prints_binary", body).1).await;
        assert_eq!(run.exit, Exit::Success);
        assert_eq!(
            run.stdout.lines().last(),
            Some("COMPLETED: bin \u{FFFD}\u{FFFD} end")
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn prints_5_mib() {
        let body = "(yes err | head -c 1000000 >&2) &
                    yes 0123456789abcde | head -c 5242880; wait; echo 'COMPLETED: big'";
        let run = go(&setup("prints_5_mib", body).1).await;
        assert_eq!(run.exit, Exit::Success);
        assert!(run.stdout.starts_with(CUT_MARKER));
        assert_eq!(run.stdout.len(), CUT_MARKER.len() + STDOUT_CAP);
        assert_eq!(run.stdout.lines().last(), Some("COMPLETED: big"));
        assert_eq!(run.stderr_tail.len(), STDERR_CAP);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_no_log_and_stale_log_is_removed() {
        let body = "test -e \"$DAGEXEC_LOG_FILE\" && echo stale; echo 'COMPLETED: quiet'";
        let (_dir, spec) = setup("writes_no_log", body);
        fs::create_dir_all(spec.log_file.parent().expect("parent")).expect("run dir");
        fs::write(&spec.log_file, "old log").expect("stale log");
        let run = go(&spec).await;
        assert_eq!((run.stdout.as_str(), run.log), ("COMPLETED: quiet\n", None));
        assert!(!spec.log_file.exists());
    }

    /// Starts `body`, cancels once it wrote `pids`, checks all is gone; returns the time taken.
    async fn cancel_mid_run(name: &str, body: &str) -> Duration {
        cancel_mid_run_kept(name, body).await.0
    }

    /// [`cancel_mid_run`], also returning what the stopped worker left.
    async fn cancel_mid_run_kept(name: &str, body: &str) -> (Duration, WorkerRun) {
        let (_dir, spec) = setup(name, body);
        let pids = spec.cwd.join("pids");
        let (tx, rx) = watch::channel(false);
        let task = tokio::spawn(async move { run(&spec, &rx).await });
        for _ in 0..250 {
            if fs::read_to_string(&pids).is_ok_and(|s| s.ends_with('\n')) {
                break;
            }
            sleep(20 * MS).await;
        }
        let sent = Instant::now();
        tx.send(true).expect("send");
        let stop = timeout(Duration::from_secs(8), task)
            .await
            .expect("in time");
        let Stop::Cancelled(Some(kept)) = stop.expect("join") else {
            panic!("not cancelled mid-run");
        };
        all_gone(&pids).await;
        (sent.elapsed(), *kept)
    }

    /// Issue 33 §3: a worker stopped by Ctrl-C leaves what it printed and logged until then,
    /// for the attempt's kept logs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_worker_leaves_its_output_so_far() {
        let body = format!(
            "echo 'working on it'; echo 'the key is slow' >&2; echo 'step 1' > \"$DAGEXEC_LOG_FILE\"; {BG} wait"
        );
        let (_, kept) = cancel_mid_run_kept("prints_then_waits", &body).await;
        assert_eq!(kept.stdout, "working on it\n");
        assert_eq!(kept.stderr_tail, "the key is slow\n");
        assert_eq!(kept.log.as_deref(), Some("step 1\n"));
        assert_ne!(kept.exit, Exit::Success);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancelled_mid_run() {
        // Both end (cancel_mid_run bounds the wait and checks every process is gone).
        cancel_mid_run("cancelled", &format!("{BG} wait")).await;
        let stubborn = format!("trap '' TERM; {BG} wait"); // SIGKILL after 3 s
        let took = cancel_mid_run("ignores_sigterm", &stubborn).await;
        // SIGTERM's grace is honoured: the SIGKILL never comes before it.
        assert!(took >= 2900 * MS, "{took:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancelled_before_start_spawns_nothing() {
        let (_dir, spec) = setup("would_touch", "touch started");
        let (_tx, rx) = watch::channel(true);
        assert_eq!(run(&spec, &rx).await, Stop::Cancelled(None));
        assert!(!spec.cwd.join("started").exists() && !spec.prompt_file.exists());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn several_runs_at_once() {
        let (_dir, spec) = setup("echoes_index", "echo \"COMPLETED: $DAGEXEC_TASK_INDEX\"");
        let tasks: Vec<_> = (0..6)
            .map(|i| WorkerSpec {
                task_index: i,
                ..spec.clone()
            })
            .map(|spec| tokio::spawn(async move { go(&spec).await.stdout }))
            .collect();
        for (i, task) in tasks.into_iter().enumerate() {
            assert_eq!(task.await.expect("join"), format!("COMPLETED: {i}\n"));
        }
    }
}
