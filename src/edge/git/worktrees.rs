//! The repository's worktrees: added for an attempt, pruned at a start (here, in the folder
//! an earlier run recorded, and the folders of repositories that are gone), and the folder
//! removed at the end of a run.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use super::cmd::{git, path_from_bytes};
use super::error::io_error;
use super::paths::{check_name, real_path, remove_any};
use super::{GitError, Repo, Worktree, slots, worktree, worktree_admin};

impl Repo {
    /// A new worktree with a detached `HEAD` at `base`, at `<worktrees folder>/<name>` (the
    /// folder [`super::slots`] claims for this repository).
    /// A worktree or directory left there by an earlier run that crashed is removed first.
    pub fn add_worktree(&self, base: &str, name: &str) -> Result<Worktree, GitError> {
        check_name(name)?;
        if name == slots::MARKER {
            return Err(GitError::InvalidName {
                name: name.to_owned(),
                reason: "is the name of the folder's marker file",
            });
        }
        let _admin = worktree_admin();
        let sha = self.resolve_commit(base)?;
        self.slots.ensure(&self.common_dir)?;
        let path = self.slots.dir.join(name);
        let real = real_path(&path);
        let registered = self.registered_worktrees()?;
        self.remove_worktree_at(&path, registered.iter().any(|r| real_path(r) == real))?;
        git(&self.root, "worktree add")
            .args(["worktree", "add", "--quiet", "--detach"])
            .arg(&path)
            .arg(&sha)
            .run()?;
        // The git directory git made it with, read before any worker could rewrite the tree's
        // `.git` file: every later call in the tree uses it.
        let file = path.join(".git");
        let named = std::fs::read_to_string(&file).map_err(io_error("read", &file))?;
        let git_dir = named
            .strip_prefix("gitdir:")
            .ok_or_else(|| GitError::Unexpected {
                command: "worktree add".into(),
                dir: path.clone(),
                detail: format!("its .git file holds {named:?}, no gitdir line"),
            })?;
        super::cmd::pin(&path, path.join(git_dir.trim()));
        Ok(Worktree {
            path,
            root: self.root.clone(),
            name: name.to_owned(),
            base: sha,
            removed: false,
        })
    }

    /// Removes every dagexec worktree — registered, or a left-over directory — in
    /// this repository's worktrees folder ([`super::slots`]), in the folder the last run recorded when that was another (the
    /// setting changed, the repository moved) and in `<git-common-dir>/dagexec/worktrees`
    /// (older versions); deletes the folders of repositories that no longer exist from the
    /// home; then runs `git worktree prune`. Returns how many worktrees were removed.
    pub fn prune_worktrees(&self) -> Result<usize, GitError> {
        let _admin = worktree_admin();
        let registered = self.registered_worktrees()?;
        let legacy = slots::legacy_dir(&self.common_dir);
        let mut folders = vec![self.slots.dir.clone()];
        for other in [slots::recorded(&self.common_dir), Some(legacy.clone())]
            .into_iter()
            .flatten()
        {
            let real = real_path(&other);
            if folders.iter().any(|f| real_path(f) == real) {
                continue;
            }
            let claimed = slots::read_marker(&other)
                .is_some_and(|m| m == slots::marker_text(&self.common_dir));
            if other == legacy || claimed || slots::orphaned(&other) {
                folders.push(other);
            }
        }
        let mut removed = BTreeSet::new();
        for (i, folder) in folders.iter().enumerate() {
            // In a folder found through the record (not derived from this repository, nor in
            // its git directory), only what dagexec makes there is deleted.
            let only_slots = i > 0 && *folder != legacy;
            let folder_real = real_path(folder);
            for path in &registered {
                if real_path(path).parent() == Some(folder_real.as_path()) {
                    self.remove_worktree_at(path, true)?;
                    removed.insert((i, path.file_name().map(std::borrow::ToOwned::to_owned)));
                }
            }
            match std::fs::read_dir(folder) {
                Ok(entries) => {
                    for entry in entries {
                        let entry = entry.map_err(io_error("list", folder))?;
                        let name = entry.file_name();
                        let ours = name.to_string_lossy().starts_with("slot-");
                        if name == slots::MARKER || (only_slots && !ours) {
                            continue;
                        }
                        remove_any(&entry.path())?;
                        removed.insert((i, Some(name)));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error("list", folder)(e)),
            }
            if i > 0 {
                slots::remove_if_empty(folder);
            }
        }
        // The home's folders of repositories that are gone.
        if !self.slots.inside_git
            && let Ok(entries) = std::fs::read_dir(&self.slots.base)
        {
            for entry in entries.flatten() {
                let path = entry.path();
                if path != self.slots.dir
                    && entry.file_type().is_ok_and(|t| t.is_dir())
                    && slots::orphaned(&path)
                {
                    tracing::info!(path = %path.display(), "removing the worktrees of a repository that is gone");
                    for e in std::fs::read_dir(&path).into_iter().flatten().flatten() {
                        if e.file_name().to_string_lossy().starts_with("slot-") {
                            remove_any(&e.path())?;
                        }
                    }
                    slots::remove_if_empty(&path);
                }
            }
        }
        git(&self.root, "worktree prune")
            .args(["worktree", "prune"])
            .run()?;
        Ok(removed.len())
    }

    /// Removes this repository's worktree folder and its record when no worktree is left in
    /// it (the end of a run); a folder still holding something is left for the next start.
    pub fn remove_worktrees_dir(&self) -> Result<(), GitError> {
        let _admin = worktree_admin();
        let dir = &self.slots.dir;
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_error("list", dir)(e)),
        };
        for entry in entries {
            let entry = entry.map_err(io_error("list", dir))?;
            if entry.file_name() != slots::MARKER || self.slots.inside_git {
                return Ok(());
            }
        }
        remove_any(dir)?;
        let record = slots::record_path(&self.common_dir);
        crate::edge::fsx::remove_file(&self.common_dir, &record)
            .map_err(io_error("delete", &record))
    }

    /// The paths of all registered worktrees, the main one first.
    pub(super) fn registered_worktrees(&self) -> Result<Vec<PathBuf>, GitError> {
        let out = git(&self.root, "worktree list")
            .args(["worktree", "list", "--porcelain"])
            .run()?;
        Ok(out
            .split(|b| *b == b'\n')
            .filter_map(|line| line.strip_prefix(b"worktree "))
            .map(path_from_bytes)
            .collect())
    }

    /// Removes the worktree an earlier run left at `path`: unregisters it when `registered`,
    /// deletes what is on disk.
    fn remove_worktree_at(&self, path: &Path, registered: bool) -> Result<(), GitError> {
        if registered {
            tracing::info!(path = %path.display(), "removing a stale dagexec worktree");
        }
        worktree::remove(&self.root, path, registered)
    }
}
