//! [`GitError`], what every git operation here fails with.

use std::io;
use std::path::{Path, PathBuf};

/// A failed git operation. The messages name the git command, the directory it ran in and
/// what git said on stderr.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// git could not be started (not installed, or the directory is gone).
    #[error("cannot run git {command} in {}: {source}", dir.display())]
    Spawn {
        command: String,
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    /// git ran and exited unsuccessfully.
    #[error("git {command} failed in {}: {stderr}", dir.display())]
    Failed {
        command: String,
        dir: PathBuf,
        stderr: String,
    },
    /// [`Repo::discover`](crate::edge::git::Repo::discover) outside any repository.
    #[error("not a git repository (or any parent directory): {}", dir.display())]
    NotARepository { dir: PathBuf },
    /// The repository has no commit yet (an unborn branch).
    #[error("{}: the repository has no commits; commit something first", dir.display())]
    NoCommits { dir: PathBuf },
    /// A revision that does not name a commit.
    #[error("{rev:?} does not name a commit in {}", dir.display())]
    BadRevision { rev: String, dir: PathBuf },
    /// A worktree name that is not a single plain path component.
    #[error("invalid worktree name {name:?}: {reason}")]
    InvalidName { name: String, reason: &'static str },
    /// A path that is not repo-relative.
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath { path: String, reason: &'static str },
    /// A file-system operation around git failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The index is locked: `path` exists. Another git process is running in the repository,
    /// or one crashed and left its lock.
    #[error(
        "git cannot lock the index of {}: {} exists. Another git process is running in this repository, or one stopped without removing its lock; if no git process is running, delete {} and run again",
        dir.display(), path.display(), path.display()
    )]
    IndexLocked { path: PathBuf, dir: PathBuf },
    /// A round commit could not move `HEAD` from the commit the round started from (it moved,
    /// or its ref is locked).
    #[error("{}: the round commit could not move HEAD from {expected} (did a commit land while the round ran, or does another git process hold the branch?); nothing was committed and the work tree is as it was: {detail}", dir.display())]
    HeadMoved {
        dir: PathBuf,
        expected: String,
        detail: String,
    },
    /// The worktrees folder named by the settings lies inside the work tree.
    #[error("the worktrees folder {} is inside the repository's work tree {}: the project's own tools (test runners, workspaces, file watchers) would see every worker's copy, and `git add -A` would take them", dir.display(), root.display())]
    WorktreesInWorkTree { dir: PathBuf, root: PathBuf },
    /// The repository's worktrees folder is claimed by another repository.
    #[error("the worktrees folder {} belongs to another repository ({other}, named in its `repository` file); dagexec never shares it: set DAGEXEC_WORKTREES to another folder, or delete this one if that repository is gone", dir.display())]
    WorktreesTaken { dir: PathBuf, other: String },
    /// git succeeded but printed something we could not make sense of.
    #[error("git {command} in {}: unexpected output: {detail}", dir.display())]
    Unexpected {
        command: String,
        dir: PathBuf,
        detail: String,
    },
}

/// The [`GitError::Io`] for `action` on `path`, from an I/O error (or one that becomes one).
pub(super) fn io_error<E: Into<io::Error>>(
    action: &'static str,
    path: &Path,
) -> impl FnOnce(E) -> GitError {
    let path = path.to_path_buf();
    move |source| GitError::Io {
        action,
        path,
        source: source.into(),
    }
}
