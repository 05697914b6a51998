//! Talking to the remote (`origin`) for the GitHub Action: fetch a branch or commit, move to a
//! commit, push a round (rebasing onto whatever landed meanwhile), and read a patch's paths.
//! A token, when given, travels as an `http.extraheader` in git's environment
//! (`GIT_CONFIG_*`), never on a command line or in `.git/config`.

use base64::Engine as _;

use super::cmd::{Git, git, nul_fields};
use super::{GitError, PatchRef, Repo, RoundIndex};
use crate::pure::paths::Link;

/// Credentials for the remote: the token GitHub's own checkout would use.
#[derive(Clone, Default)]
pub struct RemoteAuth {
    header: Option<String>,
}

impl std::fmt::Debug for RemoteAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.header.is_some() {
            "RemoteAuth(token ***)"
        } else {
            "RemoteAuth(none)"
        })
    }
}

impl RemoteAuth {
    /// Basic auth as `x-access-token:<token>`, the form GitHub documents for app and Actions
    /// tokens over HTTPS. An empty token means none.
    pub fn token(token: &str) -> RemoteAuth {
        if token.is_empty() {
            return RemoteAuth::default();
        }
        let basic =
            base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{token}"));
        RemoteAuth {
            header: Some(format!("AUTHORIZATION: basic {basic}")),
        }
    }
}

/// How a push ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pushed {
    Done,
    /// The remote has commits we lack (non-fast-forward).
    Rejected(String),
}

/// A ref of this process's own on `origin` (a full name outside `refs/heads`, e.g.
/// `refs/dagexec/…`) moved to `sha` (empty: deleted) only while it still is `expected`
/// (`None`: only while it does not exist), a lease another writer's push breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnRef {
    pub sha: String,
    pub name: String,
    pub expected: Option<String>,
}

impl OwnRef {
    pub fn new(sha: &str, name: &str, expected: Option<&str>) -> Self {
        OwnRef {
            sha: sha.into(),
            name: name.into(),
            expected: expected.map(str::to_string),
        }
    }
}

impl Repo {
    fn remote_git<'a>(&'a self, label: &'static str, auth: &RemoteAuth) -> Git<'a> {
        let mut g = git(self.root(), label);
        if let Some(h) = &auth.header {
            g = g
                .env("GIT_CONFIG_COUNT", "1")
                .env("GIT_CONFIG_KEY_0", "http.extraheader")
                .env("GIT_CONFIG_VALUE_0", h);
        }
        g
    }

    /// Fetches `branch` from `origin` into `refs/remotes/origin/<branch>`; `Ok(None)` when the
    /// remote has no such branch, else its commit.
    pub fn fetch_branch(
        &self,
        branch: &str,
        auth: &RemoteAuth,
    ) -> Result<Option<String>, GitError> {
        let local = format!("refs/remotes/origin/{branch}");
        self.fetch_into(&format!("refs/heads/{branch}"), &local, auth)
    }

    /// Fetches the remote ref `remote` into the local ref `local` (forced); `Ok(None)` when
    /// the remote has no such ref, else its commit here.
    fn fetch_into(
        &self,
        remote: &str,
        local: &str,
        auth: &RemoteAuth,
    ) -> Result<Option<String>, GitError> {
        let refspec = format!("+{remote}:{local}");
        let mut call = self.remote_git("fetch", auth).args([
            "fetch",
            "--quiet",
            "--no-tags",
            "origin",
            &refspec,
        ]);
        let out = call.output()?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            if err.contains("couldn't find remote ref") || err.contains("could not find remote ref")
            {
                return Ok(None);
            }
            return Err(call.error(&out));
        }
        self.rev_parse(local)
    }

    /// Makes sure commit `sha` is present, fetching it from `origin` when it is not.
    pub fn ensure_commit(&self, sha: &str, auth: &RemoteAuth) -> Result<(), GitError> {
        if self.rev_parse(&format!("{sha}^{{commit}}"))?.is_some() {
            return Ok(());
        }
        self.remote_git("fetch", auth)
            .args(["fetch", "--quiet", "--no-tags", "origin", sha])
            .run()
            .map(drop)
    }

    /// Checks out `sha` detached, discarding local changes (a fresh job's workspace).
    pub fn checkout_detached(&self, sha: &str) -> Result<(), GitError> {
        git(self.root(), "checkout")
            .args(["checkout", "--quiet", "--force", "--detach", sha])
            .run()
            .map(drop)
    }

    /// Pushes `HEAD` to `refs/heads/<branch>` on `origin` (no force), and `with` in the same
    /// push (`--atomic`: both or neither).
    pub fn push_head(
        &self,
        branch: &str,
        with: Option<&OwnRef>,
        auth: &RemoteAuth,
    ) -> Result<Pushed, GitError> {
        self.push(Some(&format!("HEAD:refs/heads/{branch}")), with, auth)
    }

    /// `git push origin <refspec> <own>`, `own` under its lease, atomically when both are
    /// given: refused by the remote (not a fast-forward, or the lease no longer holds) is
    /// [`Pushed::Rejected`].
    fn push(
        &self,
        refspec: Option<&str>,
        own: Option<&OwnRef>,
        auth: &RemoteAuth,
    ) -> Result<Pushed, GitError> {
        let expected = |r: &OwnRef| r.expected.clone().unwrap_or_default();
        let lease = own.map(|r| format!("--force-with-lease={}:{}", r.name, expected(r)));
        let refspecs = (refspec.map(str::to_string))
            .into_iter()
            .chain(own.map(|r| format!("{}:{}", r.sha, r.name)));
        let mut call = self
            .remote_git("push", auth)
            .args(["push", "--quiet", "--porcelain"])
            .args(refspec.and(own).map(|_| "--atomic"))
            .args(lease)
            .arg("origin")
            .args(refspecs);
        let out = call.output()?;
        if out.status.success() {
            return Ok(Pushed::Done);
        }
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let refused = [
            "[rejected]",
            "non-fast-forward",
            "fetch first",
            "stale info",
        ];
        if refused.iter().any(|r| text.contains(r)) {
            return Ok(Pushed::Rejected(text.trim().to_string()));
        }
        Err(call.error(&out))
    }

    /// A commit whose parent is `parent` and whose tree is `parent`'s with the file `rel` set
    /// to `bytes` (mode 100644, converted as `git add` would), made in a scratch index under
    /// `<git-common-dir>/dagexec`: `HEAD`, the index and the work tree are left alone. Its SHA.
    pub fn commit_file_onto(
        &self,
        parent: &str,
        rel: &str,
        bytes: &[u8],
        message: &str,
    ) -> Result<String, GitError> {
        let rel = super::paths::normalize(rel)?;
        let tmp = self.scratch("record-")?;
        let index = RoundIndex::read(self.root(), tmp.path(), "index", parent)?;
        index.put(&rel, "100644", &format!("--path={rel}"), bytes)?;
        index.commit_tree(self, &index.write_tree()?, message)
    }

    /// Pushes commit `sha` to the ref `name` (a full name outside `refs/heads`, e.g.
    /// `refs/dagexec/…`) on `origin`, replacing it only while it still is `expected` (`None`:
    /// only while it does not exist): a record of this process's own, which another writer's
    /// push makes [`Pushed::Rejected`].
    pub fn push_ref(
        &self,
        sha: &str,
        name: &str,
        expected: Option<&str>,
        auth: &RemoteAuth,
    ) -> Result<Pushed, GitError> {
        let own = OwnRef::new(sha, name, expected);
        self.push(None, Some(&own), auth)
    }

    /// Deletes the ref `name` (a full name) on `origin` while it is still at `expected` (a
    /// lease: a ref another writer moved is left, [`Pushed::Rejected`]).
    pub fn delete_remote_ref(
        &self,
        name: &str,
        expected: &str,
        auth: &RemoteAuth,
    ) -> Result<Pushed, GitError> {
        self.push(None, Some(&OwnRef::new("", name, Some(expected))), auth)
    }

    /// Fetches the ref `name` (a full name) from `origin` into the same name here; `Ok(None)`
    /// when the remote has no such ref, else its commit.
    pub fn fetch_ref(&self, name: &str, auth: &RemoteAuth) -> Result<Option<String>, GitError> {
        self.fetch_into(name, name, auth)
    }

    /// Replays the commits since `upstream` onto it (`git rebase`); on a conflict the rebase
    /// is aborted and the error says which.
    pub fn rebase_onto(&self, upstream: &str) -> Result<(), GitError> {
        let mut call = self
            .committing("rebase")?
            .args(["rebase", "--quiet", upstream]);
        let out = call.output()?;
        if out.status.success() {
            return Ok(());
        }
        let _ = git(self.root(), "rebase --abort")
            .args(["rebase", "--abort"])
            .run();
        Err(call.error(&out))
    }
}

impl Repo {
    /// The repository-relative paths `patch` touches (both names of a rename), found by
    /// applying it to a scratch index of `HEAD` and diffing that: exact whatever the names
    /// hold. Nothing in the work tree or the real index changes. `Err` when the patch does not
    /// apply to `HEAD`.
    #[cfg(test)]
    pub fn patch_paths<'p>(&self, patch: impl Into<PatchRef<'p>>) -> Result<Vec<String>, GitError> {
        self.patch_changes(patch).map(|(paths, _)| paths)
    }

    /// [`Repo::patch_paths`] and the symlinks the patch adds or changes, with their targets
    /// as git stores them (so a hand-made patch cannot hide one from the check).
    #[cfg(test)]
    pub fn patch_changes<'p>(
        &self,
        patch: impl Into<PatchRef<'p>>,
    ) -> Result<(Vec<String>, Vec<Link>), GitError> {
        self.patch_changes_at("HEAD", patch)
    }

    /// The repository-relative paths a patch made at commit `base` touches (both names of a
    /// rename) and the symlinks it adds or changes, with their targets as git stores them (so
    /// a hand-made patch cannot hide one from the check), found by applying it to a scratch
    /// index of `base` and diffing that: exact whatever the names hold, nothing in the work
    /// tree or the real index changed, `Err` when it does not apply. For the conductor's
    /// arrivals under `overlap: merge`, whose runs started before the branch moved.
    pub fn patch_changes_at<'p>(
        &self,
        base: &str,
        patch: impl Into<PatchRef<'p>>,
    ) -> Result<(Vec<String>, Vec<Link>), GitError> {
        let patch = patch.into();
        if patch.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        // Git refuses to apply a path in `.GIT/` (any case) and would only say the patch does
        // not apply; its names as written let the caller refuse it in words.
        let listed = git(self.root(), "apply --numstat")
            .args(["apply", "--numstat", "-z", "-"])
            .stdin(patch)
            .run()?;
        let in_git_dir: Vec<String> = nul_fields(&listed)
            // `added\tdeleted\tpath`, or `added\tdeleted\t` before a rename's two names.
            .map(|f| f.splitn(3, '\t').nth(2).unwrap_or(&f).to_string())
            .filter(|p| crate::pure::paths::git_dir_prefix(p).is_some())
            .collect();
        if !in_git_dir.is_empty() {
            return Ok((in_git_dir, Vec::new()));
        }
        let tmp = self.scratch("paths-")?;
        let scratch = RoundIndex::read(self.root(), tmp.path(), "index", base)?;
        scratch.apply_cached(patch)?;
        let staged = super::worktree::Staged(self.root(), Some(&scratch.index), base, &[]);
        let (paths, links) = staged.paths_and_links()?;
        Ok((paths.into_iter().collect(), links))
    }
}
