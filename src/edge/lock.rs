//! One run per repository: a lock file holding the runner's pid. A lock left by a process
//! that no longer exists (a crash, `kill -9`) is taken over, with a message. And the one way
//! this process takes a mutex of its own ([`held`]).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use nix::sys::signal::kill;
use nix::unistd::Pid;

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("another dagexec run (pid {pid}) is executing this repository's plan")]
    Held { pid: i32 },
    #[error("cannot create the lock {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The held lock; released (the file removed) on drop.
#[derive(Debug)]
pub struct RunLock {
    path: PathBuf,
}

/// What taking the lock found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    Fresh,
    /// A lock from a process that is gone (its pid).
    TakenOver(i32),
}

fn alive(pid: i32) -> bool {
    // Signal 0 checks for existence; EPERM means it exists but is not ours.
    pid > 0
        && !matches!(
            kill(Pid::from_raw(pid), None),
            Err(nix::errno::Errno::ESRCH)
        )
}

impl RunLock {
    /// Takes the lock at `path` (its directory is created).
    pub fn acquire(path: &Path) -> Result<(RunLock, Taken), LockError> {
        let io = |source| LockError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(io)?;
        }
        let mut taken = Taken::Fresh;
        loop {
            match create_with_pid(path) {
                Ok(()) => {
                    return Ok((
                        RunLock {
                            path: path.to_path_buf(),
                        },
                        taken,
                    ));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let pid: i32 = fs::read_to_string(path)
                        .ok()
                        .and_then(|s| s.trim().parse().ok())
                        .unwrap_or(0);
                    if alive(pid) && pid != std::process::id() as i32 {
                        return Err(LockError::Held { pid });
                    }
                    fs::remove_file(path).map_err(io)?;
                    taken = Taken::TakenOver(pid);
                }
                Err(e) => return Err(io(e)),
            }
        }
    }
}

/// The lock file at `path` created with this process's pid already in it, or `AlreadyExists`:
/// the pid is written to a file of this process's own and hard-linked into place, so a run
/// that reads the lock meanwhile never finds it empty (read as a pid of no process, it was
/// taken over, and two runs went on side by side). Where hard links fail, the file is created
/// and then written, as before.
fn create_with_pid(path: &Path) -> std::io::Result<()> {
    let pid = std::process::id();
    let own = path.with_extension(format!("lock.{pid}.tmp"));
    // Created afresh, never through a link left at its name (task code can write here).
    let _ = fs::remove_file(&own);
    write!(
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&own)?,
        "{pid}"
    )?;
    let linked = fs::hard_link(&own, path);
    let _ = fs::remove_file(&own);
    match linked {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)?;
            write!(f, "{pid}")
        }
        linked => linked,
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_file(&self.path) {
            tracing::warn!("could not remove the run lock {}: {e}", self.path.display());
        }
    }
}

/// Mutex `m` taken, whatever a thread that panicked holding it left: what it guards (a
/// display, a record, a pool) is still the best account there is, and a run that stopped
/// reporting over a panic elsewhere would lose more.
pub fn held<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_stale_and_released() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dagexec/run.lock");
        let (lock, taken) = RunLock::acquire(&path).unwrap();
        assert_eq!(taken, Taken::Fresh);
        // A live process's lock (our parent's pid stands in for another run).
        drop(lock);
        let parent = nix::unistd::getppid().as_raw();
        fs::write(&path, parent.to_string()).unwrap();
        assert!(matches!(RunLock::acquire(&path), Err(LockError::Held { pid }) if pid == parent));
        // A dead process's lock: a child that has exited.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id() as i32;
        child.wait().unwrap();
        fs::write(&path, dead.to_string()).unwrap();
        let (lock, taken) = RunLock::acquire(&path).unwrap();
        assert_eq!(taken, Taken::TakenOver(dead));
        drop(lock);
        assert!(!path.exists(), "released on drop");
    }

    /// Another run reading the lock while this one takes it finds the pid, never an empty
    /// file: an empty one read as pid 0, "no longer running", and a second run took the lock
    /// over and ran beside the first.
    #[test]
    fn a_lock_being_taken_is_never_read_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dagexec/run.lock");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let done = std::sync::atomic::AtomicBool::new(false);
        let empty = std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut empty = 0;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    if fs::read_to_string(&path).is_ok_and(|c| c.is_empty()) {
                        empty += 1;
                    }
                }
                empty
            });
            for _ in 0..3000 {
                drop(RunLock::acquire(&path).unwrap());
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            reader.join().unwrap()
        });
        assert_eq!(empty, 0, "the lock was read empty {empty} times");
    }

    /// A link left where the lock's pid is first written is replaced, never written through.
    #[test]
    fn a_link_at_the_pid_file_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dagexec/run.lock");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "keep").unwrap();
        let own = path.with_extension(format!("lock.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &own).unwrap();
        let (lock, _) = RunLock::acquire(&path).unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            std::process::id().to_string()
        );
        drop(lock);
    }
}
