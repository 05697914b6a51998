//! The branch a local run commits its rounds on: the current one (named, or a detached
//! `HEAD`), or a new one `run --branch NAME` makes from `HEAD` and checks out first.

use super::cmd::{git, text};
use super::{GitError, Repo};

/// Why `run --branch NAME` cannot start the branch.
#[derive(Debug, thiserror::Error)]
pub enum BranchError {
    /// The name is not one git accepts for a branch.
    #[error("--branch {0:?} is not a valid branch name")]
    BadName(String),
    /// A branch of that name exists: it is not reused (its commits are someone's).
    #[error("--branch {0:?}: the branch {0} exists already")]
    Exists(String),
    #[error(transparent)]
    Git(#[from] GitError),
}

impl Repo {
    /// The branch `HEAD` is on (`main`), or `None` on a detached `HEAD`.
    pub fn current_branch(&self) -> Result<Option<String>, GitError> {
        let (named, out) = git(self.root(), "symbolic-ref HEAD")
            .args(["symbolic-ref", "--quiet", "--short", "HEAD"])
            .answer()?;
        Ok(named.then(|| text(&out)))
    }

    /// Makes the new branch `name` at `HEAD` and checks it out (the work tree and index are
    /// left as they are); refuses a name in use.
    pub fn start_branch(&self, name: &str) -> Result<(), BranchError> {
        let valid = git(self.root(), "check-ref-format --branch")
            .args(["check-ref-format", "--branch", name])
            .output()?
            .status
            .success();
        if !valid || name.starts_with('-') {
            return Err(BranchError::BadName(name.to_string()));
        }
        if self.rev_parse(&format!("refs/heads/{name}"))?.is_some() {
            return Err(BranchError::Exists(name.to_string()));
        }
        git(self.root(), "switch -c")
            .args(["switch", "--quiet", "--no-track", "-c", name])
            .run()?;
        Ok(())
    }
}
