//! What a command dagexec starts leaves behind, found and killed.
//!
//! Every worker, reviewer and check runs in its own process group, SIGKILLed when it ends.
//! A process can leave the group (`setsid`, a double fork into a new session), so each command
//! also gets a unique tag in its environment, [`TAG_VAR`]; when the command ends, every process
//! still carrying the tag is SIGKILLed too, found through `/proc/<pid>/environ` (Linux; the way
//! Jenkins' process-tree killer finds what a build left running).
//!
//! The limit: a process that both leaves the group *and* drops the tag from its environment
//! (`setsid env -i …`), or that runs as another user, cannot be told apart from the user's own
//! processes and is left alone. Elsewhere than Linux only the group is killed.

use std::sync::atomic::{AtomicU64, Ordering};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// The environment variable that tags everything one command started.
pub const TAG_VAR: &str = "DAGEXEC_PROCESS_TAG";

/// A tag no other command of this or any other dagexec process has: `<pid>-<n>`.
pub fn new_tag() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// SIGKILLs the process group `pgid` and every process whose environment holds
/// `DAGEXEC_PROCESS_TAG=<tag>`; repeats the sweep while it finds some (a process may fork
/// while it is swept). Returns how many tagged processes it killed.
pub fn kill_all(pgid: Option<Pid>, tag: &str) -> usize {
    if let Some(pgid) = pgid {
        // ESRCH (an empty group) is the normal case after a clean exit.
        let _ = killpg(pgid, Signal::SIGKILL);
    }
    let needle = format!("{TAG_VAR}={tag}");
    let mut killed = std::collections::BTreeSet::new();
    for _ in 0..10 {
        let found = tagged(needle.as_bytes());
        if found.is_empty() {
            break;
        }
        for pid in found {
            if kill(pid, Signal::SIGKILL).is_ok() {
                killed.insert(pid);
            }
        }
    }
    let killed = killed.len();
    if killed > 0 {
        tracing::debug!("killed {killed} process(es) that had left the group of {tag}");
    }
    killed
}

/// The live processes (not zombies, not this one) whose environment holds `needle` exactly as
/// one `KEY=value` entry.
fn tagged(needle: &[u8]) -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|&pid| {
            // A zombie's environ reads empty; another user's fails: both are skipped.
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|entry| entry == needle))
        })
        .filter_map(|pid| i32::try_from(pid).ok().map(Pid::from_raw))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[test]
    fn tags_are_unique() {
        assert_ne!(new_tag(), new_tag());
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn kills_a_tagged_process_outside_any_group_we_know() {
        let tag = new_tag();
        let mut child = Command::new("sleep")
            .arg("60")
            .env(TAG_VAR, &tag)
            .stdin(Stdio::null())
            .spawn()
            .expect("sleep starts");
        let mut other = Command::new("sleep")
            .arg("60")
            .env(TAG_VAR, format!("{tag}0"))
            .spawn()
            .expect("sleep starts");
        // Until the child has exec'd, its /proc environ is still its parent's: wait for the
        // tag to show, as it has long before any worker's end is swept.
        let needle = format!("{TAG_VAR}={tag}");
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !tagged(needle.as_bytes()).contains(&pid) {
            assert!(
                std::time::Instant::now() < deadline,
                "the child never showed its tag"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(kill_all(None, &tag), 1);
        let status = child.wait().expect("reaped");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        assert!(
            other.try_wait().expect("waits").is_none(),
            "a similar tag is not ours"
        );
        other.kill().expect("kill");
        other.wait().expect("reaped");
    }
}
