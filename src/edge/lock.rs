//! One run per repository: an exclusive `flock` on a lock file, which the kernel releases
//! when the run's process ends however it ends, so no stale lock can stop a later run and no
//! two runs can both decide a lock is stale. The file holds the holder's pid, for messages;
//! one left with a pid by a process that died (a crash, `kill -9`) is taken over, with a
//! message. And the one way this process takes a mutex of its own ([`held`]).

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, Mode, OFlags};

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// `pid`: the holder's, when it wrote it.
    #[error(
        "another dagexec run{} is executing this repository's plan",
        pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Held { pid: Option<i32> },
    #[error("cannot create the lock {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The held lock: the open file its `flock` is on. On drop its pid is cleared and the file
/// closed, which releases the lock. The file stays: removing it would let a run that opened
/// it just before lock the removed file while a third locked a new one.
#[derive(Debug)]
pub struct RunLock {
    file: File,
    path: PathBuf,
    /// The pid of a dead run this lock was taken over from, put back as it lets go
    /// ([`RunLock::for_a_change`]).
    left_by: Option<i32>,
}

/// What taking the lock found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    Fresh,
    /// A lock from a process that is gone (its pid).
    TakenOver(i32),
}

impl RunLock {
    /// Takes the lock at `path` (its directory is created).
    pub fn acquire(path: &Path) -> Result<(RunLock, Taken), LockError> {
        let io = |source| LockError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        // A holder writes its pid just after taking the lock and clears it as it lets go:
        // a held lock without a pid is looked at again, a moment later.
        let mut tries = 0;
        loop {
            tries += 1;
            let file = open(path).map_err(io)?;
            match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {}
                Err(e) if e == rustix::io::Errno::WOULDBLOCK => match pid_in(&file) {
                    Some(pid) => return Err(LockError::Held { pid: Some(pid) }),
                    None if tries >= 100 => return Err(LockError::Held { pid: None }),
                    None => {
                        std::thread::sleep(std::time::Duration::from_millis(10));
                        continue;
                    }
                },
                Err(e) => return Err(io(e.into())),
            }
            // Locked; but if the name no longer leads to this file (removed or replaced
            // meanwhile), another run may lock what it leads to now: take that one instead.
            let (ours, named) = (
                file.metadata().map_err(io)?,
                std::fs::symlink_metadata(path),
            );
            if !named.is_ok_and(|n| n.dev() == ours.dev() && n.ino() == ours.ino()) {
                continue;
            }
            let own = std::process::id() as i32;
            let taken = match pid_in(&file) {
                Some(pid) if pid != own => Taken::TakenOver(pid),
                _ => Taken::Fresh,
            };
            // The pid then its end: a reader never finds an earlier holder's pid in it.
            let line = format!("{own}\n");
            file.write_all_at(line.as_bytes(), 0).map_err(io)?;
            file.set_len(line.len() as u64).map_err(io)?;
            let path = path.to_path_buf();
            let lock = RunLock {
                file,
                path,
                left_by: None,
            };
            return Ok((lock, taken));
        }
    }
}

impl RunLock {
    /// The lock taken for a command's change of the plan (`retry`, `answer`), which a run
    /// executing it would save its own copy over. A dead run's pid found in it is put back
    /// as it lets go, so the next run still stops what that one left running.
    pub fn for_a_change(path: &Path) -> Result<RunLock, LockError> {
        let (mut lock, taken) = RunLock::acquire(path)?;
        if let Taken::TakenOver(pid) = taken {
            lock.left_by = Some(pid);
        }
        Ok(lock)
    }
}

/// The lock file at `path`, opened for reading and writing (created if missing). It sits in
/// the git directory, where task code can write: a link there is never followed, and
/// whatever is not a regular file (a link, a fifo) is removed and a file made in its place.
fn open(path: &Path) -> std::io::Result<File> {
    for _ in 0..3 {
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let opened = rustix::fs::open(path, flags | OFlags::NONBLOCK, Mode::from_raw_mode(0o644));
        match opened.map(File::from) {
            Ok(file) if file.metadata()?.is_file() => return Ok(file),
            Ok(_) | Err(rustix::io::Errno::LOOP) => std::fs::remove_file(path)?,
            Err(e) => return Err(e.into()),
        }
    }
    Err(std::io::Error::other(
        "it is replaced as fast as it is made",
    ))
}

/// Where a repository's run lock is: `<git-common-dir>/dagexec/run.lock`.
pub fn path_in(common_dir: &Path) -> PathBuf {
    common_dir.join("dagexec").join("run.lock")
}

/// The pid of a run that held the lock at `path` and died holding it (a `kill -9`, a crash,
/// a machine that went down): the pid is still in the file and no such process is alive. A
/// run that ended cleared its pid; a live one is not named. Read without locking (a probe
/// that took the lock, even shared, would make a run starting at that instant refuse to),
/// and without following a link or waiting on a FIFO.
pub fn died_holding(path: &Path) -> Option<i32> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = File::from(rustix::fs::open(path, flags, Mode::empty()).ok()?);
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let pid = pid_in(&file)?;
    let gone = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
        == Err(nix::errno::Errno::ESRCH);
    gone.then_some(pid)
}

/// The pid the lock file holds (its first line), if any.
fn pid_in(mut file: &File) -> Option<i32> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    text.lines().next()?.trim().parse().ok().filter(|&p| p > 0)
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Cleared while still locked, so the next run finds no pid and starts fresh (or the
        // dead run's pid put back).
        let line = self
            .left_by
            .map(|pid| format!("{pid}\n"))
            .unwrap_or_default();
        let written = self.file.write_all_at(line.as_bytes(), 0);
        if let Err(e) = written.and_then(|()| self.file.set_len(line.len() as u64)) {
            tracing::warn!("could not clear the run lock {}: {e}", self.path.display());
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
    use std::fs;

    /// A holder that never wrote its pid (one stopped before it could, or another program
    /// holding the file): the refusal names no pid rather than "pid 0".
    #[test]
    fn a_lock_held_without_a_pid_is_named_without_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.lock");
        let holder = open(&path).unwrap();
        rustix::fs::flock(&holder, FlockOperation::NonBlockingLockExclusive).unwrap();
        let e = RunLock::acquire(&path).unwrap_err().to_string();
        assert_eq!(e, "another dagexec run is executing this repository's plan");
    }

    #[test]
    fn held_stale_and_released() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dagexec/run.lock");
        let (lock, taken) = RunLock::acquire(&path).unwrap();
        assert_eq!(taken, Taken::Fresh);
        let own = std::process::id() as i32;
        // Held (by this process, through another open file: the lock is the file's, not the
        // process's).
        assert!(
            matches!(RunLock::acquire(&path), Err(LockError::Held { pid }) if pid == Some(own))
        );
        drop(lock);
        assert_eq!(fs::read_to_string(&path).unwrap(), "", "released on drop");
        // What a run killed with the lock leaves: its pid, and no lock.
        fs::write(&path, "4194303\n").unwrap();
        let (lock, taken) = RunLock::acquire(&path).unwrap();
        assert_eq!(taken, Taken::TakenOver(4_194_303));
        assert_eq!(fs::read_to_string(&path).unwrap(), format!("{own}\n"));
        drop(lock);
        assert_eq!(RunLock::acquire(&path).unwrap().1, Taken::Fresh);
    }

    /// `retry` over a lock a dead run left holds it for its change and puts the dead pid
    /// back: the next run still takes it over from that run (and stops what it left).
    #[test]
    fn a_change_over_a_dead_runs_lock_leaves_it_to_the_next_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.lock");
        fs::write(&path, "4194303\n").unwrap();
        let change = RunLock::for_a_change(&path).unwrap();
        assert!(matches!(
            RunLock::acquire(&path),
            Err(LockError::Held { .. })
        ));
        assert_eq!(died_holding(&path), None, "held by this live process");
        drop(change);
        assert_eq!(died_holding(&path), Some(4_194_303));
        assert_eq!(
            RunLock::acquire(&path).unwrap().1,
            Taken::TakenOver(4_194_303)
        );
        let fresh = RunLock::for_a_change(&path).unwrap();
        drop(fresh);
        assert_eq!(fs::read_to_string(&path).unwrap(), "", "none to put back");
    }

    /// Runs starting together over a lock a dead run left: exactly one takes it. When the
    /// lock was a pid file, each read the dead pid, removed the file and made its own, and
    /// two could go on side by side (the second removing the first's fresh lock).
    #[test]
    fn runs_starting_together_over_a_stale_lock_take_it_once() {
        let dir = tempfile::tempdir().unwrap();
        // A lock file each time: a child another test forks holds the lock of the open file
        // it inherits until it execs, so a lock let go is not free at once in this process.
        for i in 0..100 {
            let path = dir.path().join(format!("run-{i}.lock"));
            fs::write(&path, "4194303").unwrap();
            let start = std::sync::Barrier::new(6);
            let taken = std::sync::Barrier::new(6);
            let won = std::thread::scope(|s| {
                let runs: Vec<_> = (0..6)
                    .map(|_| {
                        s.spawn(|| {
                            start.wait();
                            let lock = RunLock::acquire(&path);
                            taken.wait();
                            lock.is_ok()
                        })
                    })
                    .collect();
                runs.into_iter()
                    .map(|r| r.join().unwrap())
                    .filter(|&w| w)
                    .count()
            });
            assert_eq!(won, 1, "{won} runs took the lock");
        }
    }

    /// A run that finds the lock held names its holder, however soon after the holder took
    /// it: never pid 0.
    #[test]
    fn a_held_lock_always_names_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dagexec/run.lock");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let own = std::process::id() as i32;
        let done = std::sync::atomic::AtomicBool::new(false);
        let named = std::thread::scope(|s| {
            let other = s.spawn(|| {
                let mut named = Vec::new();
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Err(LockError::Held { pid }) = RunLock::acquire(&path) {
                        named.push(pid);
                    }
                }
                named
            });
            for _ in 0..2000 {
                drop(RunLock::acquire(&path));
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            other.join().unwrap()
        });
        assert!(
            named.iter().all(|&p| p == Some(own)),
            "named {:?}",
            named
                .iter()
                .filter(|&&p| p != Some(own))
                .collect::<Vec<_>>()
        );
    }

    /// A link or a fifo left at the lock's name is replaced by a file, never written through
    /// (the git directory is task code's to write).
    #[test]
    fn a_link_or_fifo_at_the_lock_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dagexec/run.lock");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        let (lock, _) = RunLock::acquire(&path).unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep");
        let own = std::process::id();
        assert_eq!(fs::read_to_string(&path).unwrap(), format!("{own}\n"));
        drop(lock);
        fs::remove_file(&path).unwrap();
        let made = std::process::Command::new("mkfifo").arg(&path).status();
        assert!(made.unwrap().success());
        let (_lock, _) = RunLock::acquire(&path).unwrap();
        assert!(fs::metadata(&path).unwrap().is_file());
    }
}
