//! A long-run worker's progress, read while the worker is still at work: everything its
//! worktree holds against the attempt's base — its commits and what it has not committed —
//! as a binary patch ([`Repo::tree_changes`], in an unlinked temporary file). Read-only on
//! the worktree: its index is copied, never written, so this never contends with the worker's
//! own `git add` or `git commit`.

use std::path::Path;

use super::cmd::{git, git_path};
use super::{GitError, Patch, Repo};

impl Repo {
    /// Everything the worktree at `tree` holds against commit `base` — the commits made there
    /// and every change not committed, untracked files included (ignored ones, `excluded` paths
    /// and anything in a directory named like git's own are left out) — as a binary patch that
    /// applies to a tree at `base`. Staged into a copy of the worktree's index (in a temporary
    /// folder under `<git-common-dir>/dagexec`), never into the index itself.
    pub fn tree_changes(
        &self,
        tree: &Path,
        base: &str,
        excluded: &[String],
    ) -> Result<Patch, GitError> {
        let tmp = self.scratch("snapshot-")?;
        let index = tmp.path().join("index");
        let own = git_path(tree, "index")?;
        // The worktree's own index spares re-reading every unchanged file; git replaces it by
        // a rename, so the copy is one whole version. Without one, start from `HEAD`.
        if std::fs::copy(&own, &index).is_err() {
            git(tree, "read-tree HEAD")
                .env("GIT_INDEX_FILE", &index)
                .args(["read-tree", "HEAD"])
                .run()?;
        }
        super::worktree::add_all(tree, Some(&index))?;
        let excluded = super::paths::normalize_all(excluded)?;
        let pathspec = super::worktree::excluding(&excluded);
        super::worktree::Staged(tree, Some(&index), base, &pathspec).patch()
    }
}
