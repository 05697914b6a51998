//! Running one shell command line (`sh -c`) with a timeout: assumption checks now, acceptance
//! checks later. The command runs in its own process group so a timeout kills everything it
//! started; stdout and stderr are captured together, cut at a limit.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

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

/// Runs `command` with `sh -c` in `cwd`, stdin closed, killing its process group after
/// `timeout`.
pub fn run(command: &str, cwd: &Path, timeout: Duration) -> ShellOutcome {
    let failed = |output: String| ShellOutcome {
        passed: false,
        code: None,
        timed_out: false,
        output,
    };
    let (mut reader, writer) = match std::io::pipe() {
        Ok(p) => p,
        Err(e) => return failed(format!("cannot create a pipe: {e}")),
    };
    let writer2 = match writer.try_clone() {
        Ok(w) => w,
        Err(e) => return failed(format!("cannot create a pipe: {e}")),
    };
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer2);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    crate::actions::runtime::scrub_child_env(&mut cmd);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return failed(format!("cannot run sh: {e}")),
    };
    // The parent's copies of the write end went into `cmd`; drop them so EOF can arrive.
    drop(cmd);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            match reader.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(k) => {
                    if buf.len() < OUTPUT_LIMIT {
                        buf.extend_from_slice(&chunk[..k]);
                    }
                }
            }
        }
        let _ = tx.send(buf);
    });
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if start.elapsed() >= timeout => {
                timed_out = true;
                let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
                break child.wait().ok();
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => break None,
        }
    };
    // A process that left the group may hold the pipe open; do not wait for it forever.
    let bytes = rx.recv_timeout(Duration::from_secs(2)).unwrap_or_default();
    let mut output = String::from_utf8_lossy(&bytes).trim().to_string();
    if bytes.len() >= OUTPUT_LIMIT {
        output.push_str("\n… (output cut)");
    }
    if timed_out {
        let note = format!(
            "timed out after {}",
            crate::outcome::human_duration(timeout)
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
}
