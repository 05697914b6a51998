//! A long-run worker's committed progress, read while the worker is still at work: the commit
//! its worktree's `HEAD` is at, and the changes from the attempt's base to that commit as a
//! binary patch. Read-only, and nothing here touches the worktree's index, so it never
//! contends with the worker's own `git commit`.

use std::path::Path;

use super::cmd::{git, text};
use super::{GitError, Repo};

/// `git diff` of two commits as [`super::Worktree::apply`] takes it: no colour, no external
/// diff or textconv (a hostile configuration runs nothing), full indexes, binary content.
const COMMIT_DIFF: &[&str] = &[
    "diff",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--binary",
    "--full-index",
];

impl Repo {
    /// The commit `HEAD` of the worktree at `tree` points at.
    pub fn head_of(&self, tree: &Path) -> Result<String, GitError> {
        let out = git(tree, "rev-parse HEAD")
            .args(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
            .run()?;
        Ok(text(&out))
    }

    /// The changes from commit `from` to commit `to`, as a binary patch that applies to a
    /// tree at `from`; empty when they are the same.
    pub fn diff_commits(&self, from: &str, to: &str) -> Result<Vec<u8>, GitError> {
        git(self.root(), "diff commits")
            .args(COMMIT_DIFF)
            .args([from, to, "--"])
            .run()
    }
}
