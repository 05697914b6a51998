//! Running one shell command line (`sh -c`) with a timeout: assumption checks now, acceptance
//! checks later. The command runs in its own process group with a process tag
//! ([`crate::edge::procs`]); when it exits or times out, everything it started is `SIGKILLed`, so a
//! check cannot leave a server or a `sleep` running. stdout and stderr are captured together,
//! cut at a limit.

use std::io::Read;
use std::path::Path;
use std::process::{Child, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Output kept per command; the rest is replaced by a note.
pub const OUTPUT_LIMIT: usize = 16 * 1024;

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellOutcome {
    /// Exit status 0 within the timeout.
    pub passed: bool,
    /// Exit code, if it exited.
    pub code: Option<i32>,
    /// Killed after the timeout.
    pub timed_out: bool,
    /// stdout and stderr interleaved, trimmed, cut at [`OUTPUT_LIMIT`].
    pub output: String,
}

/// Reads the pipe to its end on a thread, keeping the first [`OUTPUT_LIMIT`] bytes; they
/// arrive on the channel, with whether more came.
fn read_all(mut reader: std::io::PipeReader) -> mpsc::Receiver<(Vec<u8>, bool)> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut buf, mut cut) = (Vec::new(), false);
        let mut chunk = [0u8; 8192];
        while let Ok(k @ 1..) = reader.read(&mut chunk) {
            let room = OUTPUT_LIMIT - buf.len();
            buf.extend_from_slice(&chunk[..k.min(room)]);
            cut |= k > room;
        }
        let _ = tx.send((buf, cut));
    });
    rx
}

/// Waits for the child, killing its process group at `timeout`; the status (when there is
/// one) and whether it timed out. The wait blocks (a check's end is seen at once, not at the
/// next poll); a watchdog thread kills the group if the timeout comes first.
fn wait_or_kill(child: &mut Child, timeout: Duration) -> (Option<ExitStatus>, bool) {
    let (ended, watch) = mpsc::channel::<()>();
    let pgid = i32::try_from(child.id()).ok().map(Pid::from_raw);
    let watchdog = std::thread::spawn(move || {
        let expired = matches!(
            watch.recv_timeout(timeout),
            Err(mpsc::RecvTimeoutError::Timeout)
        );
        if expired && let Some(pgid) = pgid {
            let _ = killpg(pgid, Signal::SIGKILL);
        }
        expired
    });
    let status = child.wait().ok();
    drop(ended);
    let timed_out = watchdog.join().unwrap_or(false);
    (status, timed_out)
}

/// Runs `command` with `sh -c` in `cwd`, stdin closed, killing its process group after
/// `timeout`, and whatever it left running when it exits.
pub fn run(command: &str, cwd: &Path, timeout: Duration) -> ShellOutcome {
    let failed = |output: String| ShellOutcome {
        passed: false,
        code: None,
        timed_out: false,
        output,
    };
    let pipe = std::io::pipe().and_then(|(r, w)| Ok((r, w.try_clone()?, w)));
    let (reader, writer2, writer) = match pipe {
        Ok(p) => p,
        Err(e) => return failed(format!("cannot create a pipe: {e}")),
    };
    let tag = crate::edge::procs::new_tag();
    // In the Action's work job, as the agent's unprivileged user (nothing elsewhere).
    let mut cmd = crate::edge::procs::sh(command, cwd, &tag);
    cmd.stdin(Stdio::null()).stdout(writer).stderr(writer2);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return failed(format!("cannot run sh: {e}")),
    };
    // The parent's copies of the write end went into `cmd`; drop them so EOF can arrive.
    drop(cmd);
    let rx = read_all(reader);
    let (status, timed_out) = wait_or_kill(&mut child, timeout);
    // Whatever the command left running (in its group, or escaped and tagged) goes with it;
    // that also closes the pipe it may hold.
    let pgid = i32::try_from(child.id()).ok().map(Pid::from_raw);
    crate::edge::procs::kill_all(pgid, &tag);
    // A process that escaped both may hold the pipe open; do not wait for it forever.
    let (bytes, cut) = rx.recv_timeout(Duration::from_secs(2)).unwrap_or_default();
    let mut output = String::from_utf8_lossy(&bytes).trim().to_string();
    if cut {
        output.push_str("\n… (output cut)");
    }
    if timed_out {
        let note = format!(
            "timed out after {}",
            crate::pure::outcome::human_duration(timeout)
        );
        output = if output.is_empty() {
            note
        } else {
            format!("{output}\n{note}")
        };
    }
    let code = status.and_then(|s| s.code());
    ShellOutcome {
        passed: !timed_out && code == Some(0),
        code,
        timed_out,
        output,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn outcomes() {
        let dir = std::env::temp_dir();
        let t = Duration::from_secs(10);
        let ok = run("echo out; echo err >&2", &dir, t);
        assert!(ok.passed);
        assert_eq!(ok.output, "out\nerr");
        let bad = run("echo nope; exit 3", &dir, t);
        assert_eq!(
            (bad.passed, bad.code, bad.output.as_str()),
            (false, Some(3), "nope")
        );
        let start = Instant::now();
        let slow = run(
            "sleep 5 & sleep 5; echo never",
            &dir,
            Duration::from_millis(300),
        );
        assert!(slow.timed_out && !slow.passed);
        assert!(
            slow.output.ends_with("timed out after 300ms"),
            "{}",
            slow.output
        );
        assert!(
            start.elapsed() < Duration::from_secs(4),
            "the whole group was killed"
        );
    }

    /// Output of exactly the limit was said to be cut, and longer output kept up to a read
    /// past it (16 KiB + 8 KiB): output is cut at the limit, and said so only when cut.
    #[test]
    fn output_is_cut_at_the_limit_and_said_so_only_then() {
        let dir = std::env::temp_dir();
        let t = Duration::from_secs(10);
        let just = run(
            &format!("head -c {OUTPUT_LIMIT} /dev/zero | tr '\\0' a"),
            &dir,
            t,
        );
        assert!(
            just.output == "a".repeat(OUTPUT_LIMIT),
            "{}",
            &just.output[16_000..]
        );
        let more = run(
            &format!("head -c {} /dev/zero | tr '\\0' a", OUTPUT_LIMIT + 1),
            &dir,
            t,
        );
        let cut = format!("{}\n… (output cut)", "a".repeat(OUTPUT_LIMIT));
        assert!(more.output == cut, "{}", &more.output[16_000..]);
    }
}

#[cfg(test)]
mod leftovers {
    use super::*;

    /// Whether `pid` is gone (or a zombie nobody reaps: not running any more).
    fn gone(pid: &str) -> bool {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let pid = Pid::from_raw(pid.trim().parse().expect("pid"));
        stat.contains(") Z ") || nix::sys::signal::kill(pid, None).is_err()
    }

    fn wait_gone(pid: &str) {
        for _ in 0..100 {
            if gone(pid) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("process {pid} outlived the command that started it");
    }

    /// Regression: a check's background child (here a `sleep`) survived the check.
    #[test]
    fn background_children_die_with_the_command() {
        let dir = tempfile::tempdir().expect("tempdir");
        let t = Duration::from_secs(10);
        let quiet = run(
            "sleep 60 >/dev/null 2>&1 & echo $! > bg; echo ok",
            dir.path(),
            t,
        );
        assert!(quiet.passed, "{quiet:?}");
        wait_gone(&std::fs::read_to_string(dir.path().join("bg")).expect("pid"));
        let holding = run("sleep 60 & echo $! > bg2; exit 4", dir.path(), t);
        assert_eq!((holding.passed, holding.code), (false, Some(4)));
        wait_gone(&std::fs::read_to_string(dir.path().join("bg2")).expect("pid"));
        let escaped = run(
            "setsid sh -c 'echo $$ > esc.tmp; mv esc.tmp esc; exec sleep 60' >/dev/null 2>&1 &
             while [ ! -s esc ]; do sleep 0.05; done; true",
            dir.path(),
            t,
        );
        assert!(escaped.passed, "{escaped:?}");
        wait_gone(&std::fs::read_to_string(dir.path().join("esc")).expect("pid"));
    }
}
