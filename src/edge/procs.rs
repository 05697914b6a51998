//! What a command dagexec starts leaves behind, found and killed.
//!
//! Every worker, reviewer and check runs in its own process group, `SIGKILLed` when it ends.
//! A process can leave the group (`setsid`, a double fork into a new session), so each command
//! also gets a unique tag in its environment, [`TAG_VAR`]; when the command ends, every process
//! still carrying the tag is `SIGKILLed` too, found through `/proc/<pid>/environ` (Linux; the way
//! Jenkins' process-tree killer finds what a build left running).
//!
//! The limit: a process that both leaves the group *and* drops the tag from its environment
//! (`setsid env -i …`), or that runs as another user, cannot be told apart from the user's own
//! processes and is left alone. Elsewhere than Linux only the group is killed.
//!
//! A tag starts with the pid of the dagexec process that made it, so the next run after a
//! `kill -9` stops what the dead one left ([`kill_left_by`]); and [`inside`] finds the
//! processes that still hold anything in a directory — how a worktree is proven quiet before
//! another attempt gets it.

use std::sync::atomic::{AtomicU64, Ordering};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// The environment variable that tags everything one command started.
pub const TAG_VAR: &str = "DAGEXEC_PROCESS_TAG";

/// `sh -c command` in `cwd`, the one way dagexec starts task code (a worker, a check): in a
/// process group of its own, tagged with `tag` ([`TAG_VAR`]), its environment scrubbed of
/// the runner's secrets and file commands ([`crate::edge::child_env::scrub_child_env`]), as
/// the agent user when there is one ([`crate::edge::agent_user::drop_to`]).
pub fn sh(command: &str, cwd: &std::path::Path, tag: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .env(TAG_VAR, tag);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    crate::edge::child_env::scrub_child_env(&mut cmd);
    crate::edge::agent_user::drop_to(&mut cmd);
    cmd
}

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
    let killed = kill_found(|| tagged(needle.as_bytes()));
    if killed > 0 {
        tracing::debug!("killed {killed} process(es) that had left the group of {tag}");
    }
    killed
}

/// SIGKILLs every process still carrying a tag of the dagexec process `pid` — one that is gone
/// (a `kill -9`, a crash): the workers, checks and reviewers it left running, which would
/// otherwise go on working (and spending) for nobody. Returns how many it killed.
pub fn kill_left_by(pid: i32) -> usize {
    let prefix = format!("{TAG_VAR}={pid}-");
    kill_found(|| matching(|entry| entry.starts_with(prefix.as_bytes())))
}

/// SIGKILLs the processes `find` finds, looking again (a few times) for what they started
/// meanwhile; how many were killed.
fn kill_found(find: impl Fn() -> Vec<Pid>) -> usize {
    let mut killed = std::collections::BTreeSet::new();
    for _ in 0..10 {
        let found = find();
        if found.is_empty() {
            break;
        }
        for pid in found {
            if kill(pid, Signal::SIGKILL).is_ok() {
                killed.insert(pid);
            }
        }
    }
    killed.len()
}

/// The live processes (not zombies, not this one) whose environment holds `needle`.
fn tagged(needle: &[u8]) -> Vec<Pid> {
    matching(|entry| entry == needle)
}

/// The pids listed in `/proc`, but this process's own.
pub(crate) fn others() -> std::io::Result<impl Iterator<Item = i32>> {
    let me = std::process::id();
    Ok(std::fs::read_dir("/proc")?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(move |&pid| u32::try_from(pid) != Ok(me)))
}

/// The live processes (not zombies, not this one) with an environment entry `wanted` accepts.
fn matching(wanted: impl Fn(&[u8]) -> bool) -> Vec<Pid> {
    others()
        .into_iter()
        .flatten()
        .filter(|&pid| {
            // A zombie's environ reads empty; another user's fails: both are skipped.
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(&wanted))
        })
        .map(Pid::from_raw)
        .collect()
}

/// A process that still has a hold on a directory: see [`inside`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: i32,
    /// Its command name (`/proc/<pid>/comm`).
    pub name: String,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} `{}`", self.pid, self.name)
    }
}

/// The processes other than this one that can still write into `dir`: whose working or root
/// directory, an open file or directory, or a mapped file is in it, or whose command line
/// names it. `None` where that cannot be known (no `/proc`): then nothing proves `dir` quiet.
///
/// What escapes this: a process of another user (it cannot write our files either), and one
/// that holds nothing in `dir` yet knows its path from elsewhere (a file, a variable) and opens
/// it later.
pub fn inside(dir: &std::path::Path) -> Option<Vec<Holder>> {
    use std::os::unix::ffi::OsStrExt;
    let pids = others().ok()?;
    std::fs::read_link("/proc/self/cwd").ok()?;
    let mut prefixes: Vec<Vec<u8>> = vec![dir.as_os_str().as_bytes().to_vec()];
    // Its real path through the folders above it, never through a link in its own place (a
    // worker that put one there to another folder: who works there is not in `dir`).
    let real = dir.parent().zip(dir.file_name());
    if let Some(real) = real.and_then(|(up, name)| Some(up.canonicalize().ok()?.join(name)))
        && real != dir
    {
        prefixes.push(real.as_os_str().as_bytes().to_vec());
    }
    let under = |p: &[u8]| {
        prefixes.iter().any(|d| {
            p.starts_with(d) && (p.len() == d.len() || p[d.len()] == b'/' || p[d.len()] == b' ')
        })
    };
    // A command line names `dir` when one of its NUL-separated words holds it followed by
    // nothing, `/` or a quote (`…/slot-1` does not name `…/slot-10`).
    let names = |cmdline: &[u8]| {
        cmdline.split(|&b| b == 0).any(|word| {
            prefixes.iter().any(|d| {
                (0..=word.len().saturating_sub(d.len())).any(|i| {
                    word[i..].starts_with(d)
                        && matches!(
                            word.get(i + d.len()),
                            None | Some(b'/' | b'\'' | b'"' | b' ')
                        )
                })
            })
        })
    };
    let mut found = Vec::new();
    for pid in pids {
        let base = format!("/proc/{pid}");
        let link = |name: &str| {
            std::fs::read_link(format!("{base}/{name}"))
                .ok()
                .is_some_and(|t| under(t.as_os_str().as_bytes()))
        };
        let holds = link("cwd")
            || link("root")
            || std::fs::read_dir(format!("{base}/fd"))
                .into_iter()
                .flatten()
                .flatten()
                .any(|fd| {
                    std::fs::read_link(fd.path()).is_ok_and(|t| under(t.as_os_str().as_bytes()))
                })
            || std::fs::read(format!("{base}/maps")).is_ok_and(|maps| {
                maps.split(|&b| b == b'\n').any(|line| {
                    // `address perms offset dev inode path`: the path starts at the first `/`.
                    line.iter()
                        .position(|&b| b == b'/')
                        .is_some_and(|i| under(&line[i..]))
                })
            })
            || std::fs::read(format!("{base}/cmdline")).is_ok_and(|c| names(&c));
        if holds {
            let name = std::fs::read_to_string(format!("{base}/comm"))
                .map(|n| n.trim_end().to_string())
                .unwrap_or_default();
            found.push(Holder { pid, name });
        }
    }
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[test]
    #[cfg(target_os = "linux")]
    fn a_process_working_in_a_directory_is_found_until_it_ends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).expect("dir");
        let other = tempfile::tempdir().expect("tempdir");
        assert_eq!(inside(dir.path()), Some(Vec::new()), "nothing there yet");
        // Working in it (a subdirectory), with a cleared environment: no tag to find it by.
        let mut child = Command::new("sleep")
            .arg("60")
            .current_dir(&sub)
            .env_clear()
            .spawn()
            .expect("sleep starts");
        let pid = i32::try_from(child.id()).unwrap();
        let found = inside(dir.path()).expect("linux has /proc");
        assert!(found.iter().any(|h| h.pid == pid), "{found:?}");
        assert_eq!(inside(other.path()), Some(Vec::new()), "not elsewhere");
        child.kill().expect("kill");
        child.wait().expect("reaped");
        assert!(!inside(dir.path()).unwrap().iter().any(|h| h.pid == pid));
        // Holding a file open there while working elsewhere.
        let mut child = Command::new("sh")
            .args(["-c", "exec 3>>\"$1\"; exec sleep 60", "sh"])
            .arg(dir.path().join("held"))
            .current_dir(other.path())
            .spawn()
            .expect("sh starts");
        let pid = i32::try_from(child.id()).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !inside(dir.path()).unwrap().iter().any(|h| h.pid == pid) {
            assert!(std::time::Instant::now() < deadline, "never found");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child.kill().expect("kill");
        child.wait().expect("reaped");
    }

    /// A worker that puts a link to another folder in place of its tree: the processes working
    /// in that folder are not in the tree (the release said they were the attempt's own).
    #[test]
    #[cfg(target_os = "linux")]
    fn a_link_in_place_of_the_directory_is_not_followed() {
        let elsewhere = tempfile::tempdir().expect("tempdir");
        let trees = tempfile::tempdir().expect("tempdir");
        let tree = trees.path().join("slot-1");
        std::os::unix::fs::symlink(elsewhere.path(), &tree).expect("link");
        let mut child = Command::new("sleep")
            .arg("60")
            .current_dir(elsewhere.path())
            .spawn()
            .expect("sleep starts");
        let pid = i32::try_from(child.id()).unwrap();
        let there = inside(elsewhere.path()).expect("linux has /proc");
        let found = inside(&tree).expect("linux has /proc");
        child.kill().expect("kill");
        child.wait().expect("reaped");
        assert!(there.iter().any(|h| h.pid == pid), "{there:?}");
        assert_eq!(found, Vec::new());
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn what_a_dead_run_left_is_found_by_its_pid_and_nothing_else() {
        // Tags of a dagexec process 999999937 (no such pid runs here) and of a similar one.
        let spawn = |tag: &str| {
            Command::new("sleep")
                .arg("60")
                .env(TAG_VAR, tag)
                .spawn()
                .expect("sleep starts")
        };
        let mut left = spawn("999999937-4");
        let mut other = spawn("9999999370-4");
        let pid = Pid::from_raw(i32::try_from(left.id()).unwrap());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !tagged(format!("{TAG_VAR}=999999937-4").as_bytes()).contains(&pid) {
            assert!(std::time::Instant::now() < deadline, "never tagged");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(kill_left_by(999_999_937), 1);
        let status = left.wait().expect("reaped");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        assert!(other.try_wait().expect("waits").is_none(), "not its tag");
        other.kill().expect("kill");
        other.wait().expect("reaped");
    }

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
