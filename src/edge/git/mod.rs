//! Everything dagexec asks of git, through the `git` command line: finding the repository,
//! giving each worker a detached worktree of its own, taking what the worker did there as a
//! binary patch, and committing a round: built in a temporary index, published with one ref
//! update, then brought to the work tree at the round's paths only (`round`), so a crash
//! leaves the old commit or the new one and the user's files are never cleaned up.
//!
//! Worker worktrees live outside the work tree and outside `.git`, by default in the user's
//! cache (`slots`: `~/.cache/dagexec/worktrees/<repo>-<id>/<name>`), so they never show in the
//! user's work tree or `git status`, and agent CLIs that refuse to edit under `.git` work there.
//!
//! Every git process gets the same footing: `core.quotepath=off` (paths come back raw), no
//! hooks, no file-system monitor, no automatic gc, `GIT_TERMINAL_PROMPT=0`, the C locale
//! (git's messages are parsed), and none of the variables a git hook exports (`GIT_DIR`,
//! `GIT_INDEX_FILE`, …) that would aim it at another repository or index; in a worker's
//! worktree, the git directory `worktree add` made for it, never the one the tree's `.git`
//! file names (the worker's to rewrite). Commits are never signed nor verified, and get the
//! identity `dagexec <dagexec@localhost>` where neither the configuration nor the environment
//! (`GIT_AUTHOR_*`, `GIT_COMMITTER_*`, `EMAIL`) gives one.
//!
//! A patch is bytes or a file (`patch`: an artifact's, which git reads from its file in
//! chunks, never held in memory).
//!
//! Paths in the API are repo-relative, `/`-separated strings; paths git reports that are not
//! UTF-8 are converted lossily.

mod apply;
mod branch;
mod checkpoint;
mod cmd;
mod error;
mod history;
mod patch;
mod paths;
mod remote;
mod round;
mod slots;
mod worktree;
mod worktrees;

#[cfg(test)]
mod remote_tests;
#[cfg(test)]
mod repo_tests;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub use apply::ApplyError;
pub use branch::BranchError;
pub use error::GitError;
pub use patch::{Patch, PatchFile, PatchRef};
pub use remote::{OwnRef, Pushed, RemoteAuth};
pub use round::{Merged, Recovered, RoundIndex, StagedRound};
pub use worktree::{Changes, Worktree, changes_in, changes_within};

use cmd::{git, literal, nul_fields, path_from_bytes, text, text_lines};
use error::io_error;
use paths::{covers, normalize, real_path};
use slots::Slots;

/// The identity commits get when the repository has no `user.name` / `user.email`.
const FALLBACK_NAME: &str = "dagexec";
const FALLBACK_EMAIL: &str = "dagexec@localhost";

/// A git repository's work tree: the main one the execution branch is checked out in.
#[derive(Debug, Clone)]
pub struct Repo {
    root: PathBuf,
    common_dir: PathBuf,
    /// Where worker worktrees are made.
    slots: Slots,
    /// The fallback identity's variables its commits get, read once ([`Repo::committing`]).
    fallback: std::sync::Arc<std::sync::OnceLock<Vec<(&'static str, &'static str)>>>,
}

/// Git's worktree bookkeeping (`.git/worktrees/*`) is not safe against concurrent `git
/// worktree` commands in one repository: a `list` can read a half-written entry another
/// thread's `add` is creating. Every add, remove and prune in this process takes this lock.
pub(crate) fn worktree_admin() -> std::sync::MutexGuard<'static, ()> {
    static ADMIN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    crate::edge::lock::held(&ADMIN)
}

/// `git status --porcelain` (v1, unquoted paths) in `dir`, which need not be a work tree's
/// top (the pre-flight validation reads it before it knows whether there is a repository).
pub fn status_in(dir: &Path) -> Result<String, GitError> {
    let out = git(dir, "status --porcelain")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .args(["status", "--porcelain"])
        .run()?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The URL of `remote` in the repository around `dir`, if it has one.
pub fn remote_url_in(dir: &Path, remote: &str) -> Option<String> {
    let url = git(dir, "remote get-url")
        .args(["remote", "get-url", remote])
        .run_text()
        .ok()?;
    Some(url.trim().to_string()).filter(|u| !u.is_empty())
}

/// A plain `git ARGS` in `dir` with the environment every call gets; its standard output.
/// For a repository dagexec makes itself from nothing (the demo's), where no [`Repo`] exists
/// before `init`.
pub fn run_in(dir: &Path, label: &'static str, args: &[&str]) -> Result<String, GitError> {
    let out = git(dir, label).args(args).run()?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The paths whose content differs between commits or trees `from` and `to` in the repository
/// at `root` (renames as a delete and an add), sorted.
fn changed_between(root: &Path, from: &str, to: &str) -> Result<Vec<String>, GitError> {
    let out = git(root, "diff-tree")
        .args([
            "diff-tree",
            "-r",
            "--no-renames",
            "--name-only",
            "-z",
            from,
            to,
        ])
        .run()?;
    let mut paths: Vec<String> = nul_fields(&out).collect();
    paths.sort();
    Ok(paths)
}

impl Repo {
    /// The repository whose work tree contains `dir` (`git rev-parse --show-toplevel
    /// --git-common-dir`, one process; a path holding a line end makes its answer ambiguous,
    /// and each is asked on its own then); [`GitError::NotARepository`] outside one.
    pub fn discover(dir: &Path) -> Result<Repo, GitError> {
        std::fs::metadata(dir).map_err(io_error("open directory", dir))?;
        let asking = ["rev-parse", "--path-format=absolute", "--show-toplevel"];
        let mut call = git(dir, "rev-parse --show-toplevel")
            .args(asking)
            .arg("--git-common-dir");
        let out = call.output()?;
        if !out.status.success() {
            if String::from_utf8_lossy(&out.stderr).contains("not a git repository") {
                return Err(GitError::NotARepository {
                    dir: dir.to_path_buf(),
                });
            }
            return Err(call.error(&out));
        }
        let lines: Vec<&[u8]> = out.stdout.split(|b| *b == b'\n').collect();
        let (root, common) = match lines[..] {
            [root, common, []] => (path_from_bytes(root), Some(path_from_bytes(common))),
            _ => (
                path_from_bytes(&git(dir, "rev-parse").args(asking).run()?),
                None,
            ),
        };
        if root.as_os_str().is_empty() {
            return Err(GitError::Unexpected {
                command: "rev-parse --show-toplevel".into(),
                dir: dir.to_path_buf(),
                detail: "no work tree (a bare repository?)".into(),
            });
        }
        let common = match common {
            Some(common) => common,
            None => path_from_bytes(
                &git(&root, "rev-parse --git-common-dir")
                    .args(["rev-parse", "--path-format=absolute", "--git-common-dir"])
                    .run()?,
            ),
        };
        let common_dir = common.canonicalize().unwrap_or(common);
        let slots = Slots::default_for(&common_dir);
        Ok(Repo {
            root,
            common_dir,
            slots,
            fallback: std::sync::Arc::default(),
        })
    }

    /// The same repository with its worker worktrees in a folder of its own under `home`
    /// instead of the cache (a relative `home` is taken from the work tree's top). Refused
    /// inside the work tree ([`GitError::WorktreesInWorkTree`]), unless inside its `.git`.
    pub fn with_worktrees_home(mut self, home: &Path) -> Result<Repo, GitError> {
        let home = if home.is_absolute() {
            home.to_path_buf()
        } else {
            self.root.join(home)
        };
        let real = real_path(&home);
        if real.starts_with(real_path(&self.root)) && !real.starts_with(real_path(&self.common_dir))
        {
            return Err(GitError::WorktreesInWorkTree {
                dir: home,
                root: self.root.clone(),
            });
        }
        self.slots = Slots::under(&home, &self.common_dir);
        Ok(self)
    }

    /// The folder this repository's worker worktrees are made in (see the module doc).
    #[cfg(test)]
    pub fn worktrees_dir(&self) -> &Path {
        &self.slots.dir
    }

    /// The top of the work tree.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The repository's common git directory (shared by all its worktrees).
    pub fn common_dir(&self) -> &Path {
        &self.common_dir
    }

    /// The full SHA of `HEAD`; [`GitError::NoCommits`] before the first commit.
    pub fn head(&self) -> Result<String, GitError> {
        let head = self.rev_parse("HEAD^{commit}")?;
        head.ok_or_else(|| GitError::NoCommits {
            dir: self.root.clone(),
        })
    }

    /// The object `rev` names (`git rev-parse --verify`), or `None` when it names none.
    pub fn rev_parse(&self, rev: &str) -> Result<Option<String>, GitError> {
        let (found, out) = git(&self.root, "rev-parse")
            .args(["rev-parse", "--verify", "--quiet", rev])
            .answer()?;
        Ok(found.then(|| text(&out)))
    }

    /// `git status --porcelain` (v1, unquoted paths), as git printed it.
    #[cfg(test)]
    pub fn status_porcelain(&self) -> Result<String, GitError> {
        status_in(&self.root)
    }

    /// Whether `patch` would apply cleanly to the work tree and index
    /// (`git apply --check --index --binary`). Nothing is changed.
    #[cfg(test)]
    pub fn check_patch<'p>(&self, patch: impl Into<PatchRef<'p>>) -> Result<(), ApplyError> {
        apply::apply(&self.root, patch.into(), true)
    }

    /// Applies `patch` to the work tree and index (`git apply --index --binary`,
    /// whitespace untouched). All or nothing: on failure nothing is changed.
    pub fn apply_patch<'p>(&self, patch: impl Into<PatchRef<'p>>) -> Result<(), ApplyError> {
        apply::apply(&self.root, patch.into(), false)
    }

    /// Stages exactly `paths` (repo-relative; one that no longer exists is staged as a
    /// deletion, one that never existed or is ignored and untracked is skipped) and commits
    /// what is staged with `message` as given (only surrounding blank lines and trailing
    /// spaces trimmed). Returns the new commit's SHA, or `None` when nothing is staged.
    pub fn commit(&self, message: &str, paths: &[String]) -> Result<Option<String>, GitError> {
        self.commit_paths(message, paths, false)
    }

    /// `git add --all` of those of `paths` (repo-relative) it can take: in the index, or
    /// present and not ignored (into the index file `index` instead of the repository's own,
    /// when given). Returns them.
    fn add_all(&self, paths: &[String], index: Option<&Path>) -> Result<Vec<String>, GitError> {
        let paths = self.stageable(paths::normalize_all(paths)?)?;
        if !paths.is_empty() {
            git(&self.root, "add")
                .index(index)
                .args(["add", "--all", "--"])
                .args(paths.iter().map(|p| literal(p)))
                .run()?;
        }
        Ok(paths)
    }

    /// Commits exactly `paths` (repo-relative) as the work tree holds them and nothing else
    /// (`git commit --only`): whatever else the user staged stays staged and out of the
    /// commit. Returns the new commit's SHA, or `None` when those paths hold no change.
    pub fn commit_only(&self, message: &str, paths: &[String]) -> Result<Option<String>, GitError> {
        self.commit_paths(message, paths, true)
    }

    /// Stages `paths` as [`Repo::commit`] does, then commits what is staged — of those paths
    /// alone when `only` (`git commit --only`), leaving anything else staged out — with
    /// `message` as given. `None` when that holds no change.
    fn commit_paths(
        &self,
        message: &str,
        paths: &[String],
        only: bool,
    ) -> Result<Option<String>, GitError> {
        // `--only` takes paths git knows: a new file is added first.
        let paths = self.add_all(paths, None)?;
        if only && paths.is_empty() {
            return Ok(None);
        }
        let paths: Vec<String> = paths.iter().filter(|_| only).map(|p| literal(p)).collect();
        let (unchanged, _) = git(&self.root, "diff --cached --quiet")
            .args([
                "diff",
                "--cached",
                "--quiet",
                "--no-ext-diff",
                "--ignore-submodules=none",
                "--",
            ])
            .args(&paths)
            .answer()?;
        if unchanged {
            return Ok(None);
        }
        self.committing("commit")?
            .args(["commit"])
            .args(only.then_some("--only"))
            .args([
                "--no-verify",
                "--quiet",
                "--no-edit",
                "--cleanup=whitespace",
                "--allow-empty-message",
                "--file=-",
                "--",
            ])
            .args(&paths)
            .stdin(message.as_bytes())
            .run()?;
        self.head().map(Some)
    }

    /// The paths the index changes from `HEAD` (both names of a rename).
    pub fn staged_paths(&self) -> Result<Vec<String>, GitError> {
        let staged = worktree::Staged(&self.root, None, "HEAD", &[]);
        Ok(staged.paths()?.into_iter().collect())
    }

    /// Whether `path` is tracked in `HEAD` with no staged or unstaged change.
    pub fn is_committed(&self, path: &str) -> Result<bool, GitError> {
        let path = normalize(path)?;
        // None as well before the first commit.
        if self.rev_parse(&format!("HEAD:{path}"))?.is_none() {
            return Ok(false);
        }
        let status = cmd::status(&self.root, "status", &["--"])
            .arg(literal(&path))
            .run()?;
        Ok(status.is_empty())
    }

    /// The content of `path` in commit `rev`, or `None` when it is not there (or the commit
    /// is not in this clone, or `rev` is `HEAD` before the first commit).
    pub fn read_at(&self, rev: &str, path: &str) -> Result<Option<Vec<u8>>, GitError> {
        let path = normalize(path)?;
        let out = git(&self.root, "cat-file")
            .args(["cat-file", "blob"])
            .arg(format!("{rev}:{path}"))
            .output()?;
        Ok(out.status.success().then_some(out.stdout))
    }

    /// The first `n` commits of `HEAD`'s first-parent history, newest first (fewer in a
    /// shallow clone or a short history).
    pub fn first_parents(&self, n: usize) -> Result<Vec<String>, GitError> {
        let out = git(&self.root, "rev-list")
            .args(["rev-list", "--first-parent"])
            .arg(format!("--max-count={n}"))
            .arg("HEAD")
            .output()?;
        Ok(text_lines(&out.stdout))
    }

    /// The paths whose content differs between commits `from` and `to` (renames as a delete
    /// and an add), sorted.
    pub fn changed_between(&self, from: &str, to: &str) -> Result<Vec<String>, GitError> {
        changed_between(&self.root, from, to)
    }

    /// The files changed by the last commit of `HEAD` that touched `path` (none in a history
    /// that does not reach it).
    pub fn files_of_last_change(&self, path: &str) -> Result<Vec<String>, GitError> {
        let path = normalize(path)?;
        // `--full-diff`: all the commit's files, not only those `path` names.
        let out = git(&self.root, "log")
            .args(["log", "-1", "--format=", "--name-only", "--no-renames"])
            .args(["--full-diff", "--"])
            .arg(literal(&path))
            .output()?;
        Ok(text_lines(&out.stdout))
    }

    /// Of `paths`, those `git add --all` can take: in the index, or present and not ignored.
    fn stageable(&self, paths: Vec<String>) -> Result<Vec<String>, GitError> {
        if paths.is_empty() {
            return Ok(paths);
        }
        let out = git(&self.root, "ls-files")
            .args(["ls-files", "-z", "--cached", "--"])
            .args(paths.iter().map(|p| literal(p)))
            .run()?;
        let indexed: Vec<String> = nul_fields(&out).collect();
        let (tracked, rest): (Vec<String>, Vec<String>) =
            paths.into_iter().partition(|p| covers(&indexed, p));
        let present: Vec<String> = rest
            .into_iter()
            .filter(|p| std::fs::symlink_metadata(self.root.join(p)).is_ok())
            .collect();
        let ignored = if present.is_empty() {
            BTreeSet::new()
        } else {
            let input: Vec<u8> = present.iter().flat_map(|p| p.bytes().chain([0])).collect();
            let (_, out) = git(&self.root, "check-ignore")
                .args(["check-ignore", "-z", "--stdin"])
                .stdin(&input)
                .answer()?;
            nul_fields(&out).collect()
        };
        let mut keep = tracked;
        for path in present {
            if ignored.contains(&path) {
                tracing::warn!(path, "not committing a file .gitignore excludes");
            } else {
                keep.push(path);
            }
        }
        Ok(keep)
    }

    /// A git call named `label` that commits: unsigned, messages taken as UTF-8, and with the
    /// fallback identity in `GIT_{AUTHOR,COMMITTER}_{NAME,EMAIL}` for what neither the
    /// configuration nor the environment provides. Which of them that is, is read once per
    /// `Repo` (a job, a run): the process's environment does not change, dagexec never writes
    /// the configuration, and what task code writes there meanwhile (a local worker shares the
    /// repository's config file) does not choose who the run's later commits are by.
    fn committing(&self, label: &'static str) -> Result<cmd::Git<'_>, GitError> {
        let fallback = if let Some(fallback) = self.fallback.get() {
            fallback
        } else {
            let read = self.fallback_identity()?;
            self.fallback.get_or_init(|| read)
        };
        let mut call = git(&self.root, label)
            .config("commit.gpgsign=false")
            .config("i18n.commitEncoding=UTF-8");
        for (var, value) in fallback {
            call = call.env(var, value);
        }
        Ok(call)
    }

    /// The variables of [`Repo::committing`]'s fallback identity that neither the
    /// configuration nor the environment sets.
    fn fallback_identity(&self) -> Result<Vec<(&'static str, &'static str)>, GitError> {
        let (_, out) = git(&self.root, "config --get-regexp")
            .args([
                "config",
                "--get-regexp",
                r"^(user|author|committer)\.(name|email)$",
            ])
            .answer()?;
        let listing = String::from_utf8_lossy(&out);
        let configured = |key: &str| {
            listing.lines().any(|line| {
                line.split_once(' ')
                    .is_some_and(|(k, v)| k == key && !v.trim().is_empty())
            })
        };
        let roles = [
            ("author", "name", "GIT_AUTHOR_NAME", FALLBACK_NAME),
            ("author", "email", "GIT_AUTHOR_EMAIL", FALLBACK_EMAIL),
            ("committer", "name", "GIT_COMMITTER_NAME", FALLBACK_NAME),
            ("committer", "email", "GIT_COMMITTER_EMAIL", FALLBACK_EMAIL),
        ];
        Ok(roles
            .into_iter()
            .filter(|(role, field, var, _)| {
                // `EMAIL` gives both addresses when nothing else does, as git reads it.
                !(cmd::env_is_set(var)
                    || (*field == "email" && cmd::env_is_set("EMAIL"))
                    || configured(&format!("user.{field}"))
                    || configured(&format!("{role}.{field}")))
            })
            .map(|(_, _, var, value)| (var, value))
            .collect())
    }

    /// The full SHA of the commit `rev` names.
    fn resolve_commit(&self, rev: &str) -> Result<String, GitError> {
        let plain = !rev.is_empty() && !rev.starts_with('-');
        let sha = if plain {
            self.rev_parse(&format!("{rev}^{{commit}}"))?
        } else {
            None
        };
        sha.ok_or_else(|| GitError::BadRevision {
            rev: rev.to_owned(),
            dir: self.root.clone(),
        })
    }
}
