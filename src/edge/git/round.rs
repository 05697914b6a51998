//! The round commit, built apart from the user's index and work tree.
//!
//! A round's patches are applied to a temporary index (`GIT_INDEX_FILE` at
//! `<git-common-dir>/dagexec/round-index`, read from `HEAD`), with dagexec's own state files
//! added from the work tree (or, like a Spec Kit tasks.md's ticks, written into the index
//! only: [`RoundIndex::write_entry`]); `write-tree` and `commit-tree` make the commit, and one
//! `update-ref HEAD <new> <old>` (compare-and-swap) is the single commit point. Only then are
//! the work tree and the real index brought to the new commit, and only at the round's paths.
//!
//! Before the ref moves, the round is recorded in a journal (`<git-common-dir>/dagexec/round.json`,
//! written atomically): the old and new commits and every path the round changes. A crash at
//! any moment leaves `HEAD` at the old commit (the work tree untouched) or at the new one; the
//! next start reads the journal ([`Repo::recover_round`]) and finishes bringing exactly those
//! paths to the new commit. A path whose file is neither the old nor the new content is the
//! user's and is left alone. (In the moment between the commit point and that sync, `git
//! status` shows the round's paths as changed back; a crash there is what the record is for.)

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::cmd::{describe_failure, git, literal, nul_fields};
use super::error::io_error;
use super::paths::normalize;
use super::worktree::{RawChange, read_raw};
use super::{GitError, Repo};

mod aside;
mod index;
mod merge;
pub use merge::Merged;

/// A temporary index at the base commit that a round's patches are applied to. Removed on drop.
#[derive(Debug)]
pub struct RoundIndex {
    root: PathBuf,
    dir: PathBuf,
    pub(super) index: PathBuf,
    base: String,
}

/// What a round commit records before its commit point: enough to finish it after a crash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    /// The commit `HEAD` was at (the parent).
    pub old: String,
    /// The round's commit.
    pub new: String,
    /// Every path that differs between the two, repo-relative.
    pub paths: Vec<String>,
}

impl Journal {
    /// Object names that are hex, paths that are repo-relative and plainly written.
    fn is_sound(&self) -> bool {
        let sha =
            |s: &str| (40..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit());
        sha(&self.old)
            && sha(&self.new)
            && self
                .paths
                .iter()
                .all(|p| normalize(p).is_ok_and(|n| &n == p))
    }
}

/// A round commit made but not yet published: [`StagedRound::publish`] moves `HEAD`,
/// [`StagedRound::sync`] brings the work tree to it.
#[derive(Debug)]
pub struct StagedRound {
    pub journal: Journal,
    /// What the round changes, both sides (its paths are the journal's).
    changes: Vec<RawChange>,
}

/// What [`Repo::recover_round`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovered {
    /// No interrupted round commit.
    Nothing,
    /// The round's commit had not been published; nothing had changed.
    NotCommitted,
    /// The round was committed; its paths were brought to it. The paths kept as the user had
    /// them are listed.
    Finished { sha: String, kept: Vec<String> },
    /// `HEAD` is neither the old nor the new commit (someone else moved it); the record was
    /// dropped, nothing was changed.
    Moved,
}

/// How long a lock file a git process holds is waited for before it is taken for a crash's:
/// after a `kill -9`, the git commands the killed run had started finish on their own.
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(3);

/// Whether the file at `path` is gone, or goes within `patience` (looked at every 50 ms).
fn gone_within(path: &Path, patience: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + patience;
    while std::fs::symlink_metadata(path).is_ok() {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    true
}

impl Repo {
    fn dagexec_dir(&self) -> PathBuf {
        self.common_dir.join("dagexec")
    }

    /// A new folder `<prefix><random>` in `<git-common-dir>/dagexec` (made, never through a
    /// link), for a scratch index of its own; removed on drop.
    pub(super) fn scratch(&self, prefix: &str) -> Result<tempfile::TempDir, GitError> {
        let parent = self.dagexec_dir();
        crate::edge::fsx::create_dir_all(&self.common_dir, &parent)
            .map_err(io_error("create directory", &parent))?;
        tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(&parent)
            .map_err(io_error("create a temporary folder in", &parent))
    }

    fn journal_path(&self) -> PathBuf {
        self.dagexec_dir().join("round.json")
    }

    /// Whether an interrupted run left a round commit's record ([`Repo::recover_round`]
    /// finishes or drops it).
    pub fn round_left_unfinished(&self) -> bool {
        self.journal_path().symlink_metadata().is_ok()
    }

    /// A temporary index at `HEAD` for building a round commit. A stale one left by a crash is
    /// replaced.
    pub fn round_index(&self) -> Result<RoundIndex, GitError> {
        let head = self.head()?;
        self.round_index_holding(&head, &head)
    }

    /// [`Repo::round_index`] for a round on `base` (its commits' parent) that holds `tree`,
    /// written earlier from such an index: what was applied to it is not applied again.
    pub fn round_index_holding(&self, base: &str, tree: &str) -> Result<RoundIndex, GitError> {
        let mut index = RoundIndex::read(&self.root, &self.dagexec_dir(), "round-index", tree)?;
        base.clone_into(&mut index.base);
        Ok(index)
    }

    /// Of `paths` (repo-relative; a directory covers what is under it), the entries whose
    /// state differs from `HEAD` in the index or the work tree, as `(path, status)`: staged or
    /// unstaged changes, untracked and ignored files. These are the user's, not the run's.
    pub fn uncommitted(&self, paths: &[String]) -> Result<Vec<(String, String)>, GitError> {
        // A path that is not repo-relative names nothing of the user's here (validation
        // reports it elsewhere).
        let paths: Vec<String> = paths.iter().filter_map(|p| normalize(p).ok()).collect();
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let options = ["--ignored=traditional", "--no-renames", "--"];
        let out = super::cmd::status(&self.root, "status", &options)
            .args(paths.iter().map(|p| literal(p)))
            .run()?;
        Ok(nul_fields(&out)
            .filter(|f| f.len() > 3)
            .map(|f| {
                let code = match &f.as_bytes()[..2] {
                    b"??" => "untracked",
                    b"!!" => "ignored",
                    [_, b'D'] | [b'D', _] => "deleted",
                    [b'A', _] => "added",
                    _ => "modified",
                };
                (f[3..].to_string(), code.into())
            })
            .collect())
    }

    /// Fails with [`GitError::IndexLocked`] when the index lock file exists and stays for
    /// few seconds: another git process is running (a short one is waited for — after a
    /// `kill -9`, the git commands the killed run had started finish on their own), or one
    /// crashed and left it.
    pub fn check_index_lock(&self) -> Result<(), GitError> {
        let path = super::cmd::git_path(&self.root, "index.lock")?;
        if gone_within(&path, LOCK_PATIENCE) {
            Ok(())
        } else {
            Err(GitError::IndexLocked {
                path,
                dir: self.root.clone(),
            })
        }
    }

    /// Finishes or drops a round commit an interrupted run left (see the module docs), and
    /// removes the temporary index. `own` are dagexec's own files (the plan): a published
    /// round brings them to the commit's version whatever the work tree holds, since the run
    /// writes them there only after its commit point.
    pub fn recover_round(&self, own: &[String]) -> Result<Recovered, GitError> {
        let dir = self.dagexec_dir();
        // A git the killed run started may still be writing the round's index (it is not in
        // dagexec's process group, so a kill -9 left it running): its lock goes when it ends.
        // Removed under it, its rename would bring back a half-built index later. A lock that
        // stays is a crash's, and goes with the index.
        gone_within(&dir.join("round-index.lock"), LOCK_PATIENCE);
        for stale in [dir.join("round-index"), dir.join("round-index.lock")] {
            super::paths::remove_any(&stale)?;
        }
        let path = self.journal_path();
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Recovered::Nothing),
            Err(e) => return Err(io_error("read", &path)(e)),
        };
        // Written atomically, so never half; anything else (not JSON, a path that is not
        // plainly inside the repository, an object name that is not one) is not ours to trust.
        let journal = serde_json::from_slice::<Journal>(&bytes)
            .ok()
            .filter(Journal::is_sound);
        let Some(journal) = journal else {
            tracing::warn!(path = %path.display(), "ignoring an unreadable round record");
            super::paths::remove_any(&path)?;
            return Ok(Recovered::Nothing);
        };
        let head = self.head()?;
        let found = if head == journal.new {
            let changes = self.changes(&journal.old, &journal.new, &journal.paths)?;
            let kept = self.sync_round(&journal.new, &changes, own)?;
            Recovered::Finished {
                sha: journal.new.clone(),
                kept,
            }
        } else if head == journal.old {
            Recovered::NotCommitted
        } else {
            Recovered::Moved
        };
        super::paths::remove_any(&path)?;
        Ok(found)
    }

    /// Brings the paths of `changes` (a round's, from its old commit to commit `new`) of the
    /// work tree and the index to `new`: a file at the old content (or absent, as in the old
    /// commit) gets the new one; a file already at the new content is left, or written again
    /// when the round changed its mode; any other file is the user's and is left (its path
    /// returned), unless it is one of `own` (dagexec's files, a regular file or absent:
    /// brought to the new content). The index gets the new commit's entries for all of them.
    fn sync_round(
        &self,
        new_commit: &str,
        changes: &[RawChange],
        own: &[String],
    ) -> Result<Vec<String>, GitError> {
        if changes.is_empty() {
            return Ok(Vec::new());
        }
        let paths: Vec<String> = changes.iter().map(|c| c.path.clone()).collect();
        let side =
            |of: fn(&RawChange) -> Option<(&str, &str)>| -> BTreeMap<&str, (String, String)> {
                changes
                    .iter()
                    .filter_map(|c| {
                        of(c).map(|(mode, id)| (c.path.as_str(), (mode.to_owned(), id.to_owned())))
                    })
                    .collect()
            };
        let (old, new) = (side(RawChange::before), side(RawChange::after));
        let classify = |paths: &[String]| -> Result<Sync, GitError> {
            let work = self.work_blobs(paths)?;
            let mut sync = Sync::default();
            for p in paths {
                let w = work.get(p).unwrap_or(&WorkState::Other);
                let (o, n) = (old.get(p.as_str()), new.get(p.as_str()));
                let (o_id, n_id) = (o.map(|(_, id)| id), n.map(|(_, id)| id));
                // A mode the round changed (a file made executable): the new one is written
                // even where the content is already the new one.
                let new_mode = o.zip(n).is_some_and(|(o, n)| o.0 != n.0);
                let to = if n.is_some() {
                    &mut sync.write
                } else {
                    &mut sync.delete
                };
                match w {
                    WorkState::Blob(b) if Some(b) == n_id && !new_mode => {}
                    WorkState::Absent if n.is_none() => {}
                    WorkState::Blob(b) if Some(b) == o_id || Some(b) == n_id => {
                        to.push(p.clone());
                    }
                    WorkState::Absent if o.is_none() => to.push(p.clone()),
                    WorkState::Blob(_) | WorkState::Absent if own.contains(p) => to.push(p.clone()),
                    _ => sync.kept.push(p.clone()),
                }
            }
            Ok(sync)
        };
        let Sync {
            mut write,
            delete,
            mut kept,
        } = classify(&paths)?;
        git(&self.root, "reset")
            .args(["reset", "--quiet", new_commit, "--"])
            .args(paths.iter().map(|p| literal(p)))
            .run()?;
        // Deletions first: a path whose type the round changed (a directory that became a
        // file or a link, a file or a link that became a directory) is in the way of its new
        // version until the old one is gone; such paths are looked at again after.
        for p in &delete {
            self.delete_inside(p)?;
        }
        if !delete.is_empty() && !kept.is_empty() {
            let again = classify(&kept)?;
            for p in &again.delete {
                self.delete_inside(p)?;
            }
            write.extend(again.write);
            kept = again.kept;
        }
        if !write.is_empty() {
            git(&self.root, "checkout")
                .args(["checkout", "--quiet", new_commit, "--"])
                .args(write.iter().map(|p| literal(p)))
                .run()?;
        }
        Ok(kept)
    }

    /// What differs between commits or trees `from` and `to` (renames as a delete and an
    /// add), within `paths` when there are any: each path with both sides' mode and object,
    /// one `git diff-tree --raw`.
    pub(super) fn changes(
        &self,
        from: &str,
        to: &str,
        paths: &[String],
    ) -> Result<Vec<RawChange>, GitError> {
        let out = git(&self.root, "diff-tree --raw")
            .args([
                "diff-tree",
                "-r",
                "--raw",
                "--no-abbrev",
                "--no-renames",
                "-z",
            ])
            .args([from, to, "--"])
            .args(paths.iter().map(|p| literal(p)))
            .run()?;
        read_raw(&out, "diff-tree --raw", &self.root)
    }

    /// What is in the work tree at each of `paths`, as git would store it.
    fn work_blobs(&self, paths: &[String]) -> Result<BTreeMap<String, WorkState>, GitError> {
        let mut states = BTreeMap::new();
        let mut files = Vec::new();
        for p in paths {
            let full = self.root.join(p);
            let state = if self.leading_link(p) {
                WorkState::Other
            } else {
                match std::fs::symlink_metadata(&full) {
                    Err(e) if e.kind() == io::ErrorKind::NotFound => WorkState::Absent,
                    Err(e) => return Err(io_error("inspect", &full)(e)),
                    Ok(m) if m.file_type().is_symlink() => {
                        let target = std::fs::read_link(&full).map_err(io_error("read", &full))?;
                        use std::os::unix::ffi::OsStrExt;
                        let id = git(&self.root, "hash-object")
                            .args(["hash-object", "--stdin", "--no-filters"])
                            .stdin(target.as_os_str().as_bytes())
                            .run_text()?;
                        WorkState::Blob(id)
                    }
                    Ok(m) if m.is_file() => {
                        files.push(p.clone());
                        continue;
                    }
                    Ok(_) => WorkState::Other,
                }
            };
            states.insert(p.clone(), state);
        }
        if !files.is_empty() {
            let input: Vec<u8> = files
                .iter()
                .flat_map(|p| p.bytes().chain([b'\n']))
                .collect();
            let out = git(&self.root, "hash-object")
                .args(["hash-object", "--stdin-paths"])
                .stdin(&input)
                .run()?;
            let ids: Vec<String> = String::from_utf8_lossy(&out)
                .lines()
                .map(str::to_owned)
                .collect();
            if ids.len() != files.len() {
                return Err(GitError::Unexpected {
                    command: "hash-object --stdin-paths".into(),
                    dir: self.root.clone(),
                    detail: format!("{} ids for {} files", ids.len(), files.len()),
                });
            }
            for (p, id) in files.into_iter().zip(ids) {
                states.insert(p, WorkState::Blob(id));
            }
        }
        Ok(states)
    }

    /// Whether a directory on the way to repo-relative `path` is a symbolic link (or not a
    /// directory): nothing is read or written through it.
    fn leading_link(&self, path: &str) -> bool {
        let mut at = self.root.clone();
        let parts: Vec<&str> = path.split('/').collect();
        for part in &parts[..parts.len().saturating_sub(1)] {
            at.push(part);
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.is_dir() => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => return false,
                _ => return true,
            }
        }
        false
    }

    /// Deletes the file at repo-relative `path` (never through a link), then directories left
    /// empty, up to the root.
    fn delete_inside(&self, path: &str) -> Result<(), GitError> {
        if self.leading_link(path) {
            return Ok(());
        }
        let full = self.root.join(path);
        match std::fs::symlink_metadata(&full) {
            Ok(m) if !m.is_dir() => {
                std::fs::remove_file(&full).map_err(io_error("delete", &full))?;
            }
            _ => return Ok(()),
        }
        let mut dir = full.parent();
        while let Some(d) = dir {
            if d == self.root || std::fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
        Ok(())
    }
}

/// What [`Repo::sync_round`] does with each path: bring it to the new commit's file, delete
/// it, or leave it as the user has it.
#[derive(Debug, Default)]
struct Sync {
    write: Vec<String>,
    delete: Vec<String>,
    kept: Vec<String>,
}

/// A work-tree path's content, for [`Repo::sync_round`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum WorkState {
    Absent,
    Blob(String),
    /// A directory, a device, or behind a link: not something a round wrote.
    Other,
}

impl RoundIndex {
    /// The index file `name` in `dir` (made as needed; a stale index and its lock replaced),
    /// read from commit `at` by git in `root`; removed on drop.
    pub(super) fn read(
        root: &Path,
        dir: &Path,
        name: &str,
        at: &str,
    ) -> Result<RoundIndex, GitError> {
        std::fs::create_dir_all(dir).map_err(io_error("create directory", dir))?;
        let index = dir.join(name);
        for stale in [index.clone(), dir.join(format!("{name}.lock"))] {
            super::paths::remove_any(&stale)?;
        }
        let round = RoundIndex {
            root: root.to_path_buf(),
            dir: dir.to_path_buf(),
            index,
            base: at.to_string(),
        };
        round.git("read-tree").args(["read-tree", at]).run()?;
        Ok(round)
    }

    /// The tree of commit (or tree) `rev`.
    fn tree_of(&self, rev: &str) -> Result<String, GitError> {
        git(&self.root, "rev-parse")
            .args(["rev-parse", "--verify", &format!("{rev}^{{tree}}")])
            .run_text()
    }
}

impl StagedRound {
    /// The new commit's SHA.
    pub fn sha(&self) -> &str {
        &self.journal.new
    }

    /// The commit point: `HEAD` (or the branch it names) moves from the old commit to the new
    /// one, or nothing happens when it is no longer at the old one.
    pub fn publish(&self, repo: &Repo) -> Result<(), GitError> {
        let mut call = git(&repo.root, "update-ref").args([
            "update-ref",
            "-m",
            "dagexec: round commit",
            "HEAD",
            &self.journal.new,
            &self.journal.old,
        ]);
        let out = call.output()?;
        if out.status.success() {
            return Ok(());
        }
        let _ = std::fs::remove_file(repo.journal_path());
        Err(GitError::HeadMoved {
            dir: repo.root.clone(),
            expected: self.journal.old.clone(),
            detail: describe_failure(&out),
        })
    }

    /// Brings the round's paths of the work tree and the index to the new commit (files the
    /// user changed meanwhile are left, their paths returned), then drops the journal.
    pub fn sync(&self, repo: &Repo) -> Result<Vec<String>, GitError> {
        let kept = repo.sync_round(&self.journal.new, &self.changes, &[])?;
        super::paths::remove_any(&repo.journal_path())?;
        Ok(kept)
    }
}

/// `git commit --cleanup=whitespace`: trailing whitespace off every line, runs of blank lines
/// made one, no blank lines at either end, one final newline.
fn cleanup_message(message: &str) -> String {
    let mut out = String::new();
    let mut blank = false;
    for line in message.lines().map(str::trim_end) {
        if line.is_empty() {
            blank = !out.is_empty();
            continue;
        }
        if blank {
            out.push('\n');
            blank = false;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::super::tests::*;
    use super::*;

    /// A worktree change: `new.txt` created, `del.txt` deleted, `mod.txt` changed.
    fn patch(f: &Fixture) -> Vec<u8> {
        let wt = f.repo.add_worktree("HEAD", "w").unwrap();
        write(wt.path(), "sub/new.txt", "new\n");
        write(wt.path(), "mod.txt", "changed\n");
        fs::remove_file(wt.path().join("del.txt")).unwrap();
        wt.changes().unwrap().patch.read_to_vec()
    }

    fn commit(f: &Fixture, patch: &[u8]) -> StagedRound {
        let index = f.repo.round_index().unwrap();
        index.check_patch(patch).unwrap();
        index.apply_patch(patch).unwrap();
        index.prepare(&f.repo, "round\n\n- a\n").unwrap().unwrap()
    }

    #[test]
    fn a_round_commit_touches_only_its_paths_and_leaves_the_users_index_alone() {
        let f = Fixture::new();
        let patch = patch(&f);
        let old = f.repo.head().unwrap();
        f.write("keep.txt", "staged by the user\n");
        f.git(&["add", "keep.txt"]);
        f.write("build/out.log", "ignored\n");
        f.write("scratch.txt", "untracked\n");
        let prepared = commit(&f, &patch);
        assert_eq!(f.repo.head().unwrap(), old, "not published yet");
        assert_eq!(
            f.read("mod.txt"),
            b"one\ntwo\nthree\n",
            "work tree untouched"
        );
        assert_eq!(
            prepared.journal.paths,
            strings(&["del.txt", "mod.txt", "sub/new.txt"])
        );
        assert!(f.repo.journal_path().exists());
        prepared.publish(&f.repo).unwrap();
        assert_eq!(prepared.sync(&f.repo).unwrap(), Vec::<String>::new());
        assert_eq!(f.repo.head().unwrap(), prepared.sha());
        assert_eq!(f.git(&["log", "-1", "--format=%B"]), "round\n\n- a");
        assert_eq!(f.read("mod.txt"), b"changed\n");
        assert_eq!(f.read("sub/new.txt"), b"new\n");
        assert!(!f.root().join("del.txt").exists());
        // The user's staged change is still staged, and the only change; their other files stay.
        assert_eq!(
            f.repo.status_porcelain().unwrap(),
            "M  keep.txt\n?? scratch.txt\n"
        );
        assert_eq!(f.read("build/out.log"), b"ignored\n");
        assert!(!f.repo.journal_path().exists());
        assert!(
            !f.repo.common_dir().join("dagexec/round-index").exists(),
            "the temporary index goes with its RoundIndex"
        );
    }

    #[test]
    fn the_users_uncommitted_files_are_reported() {
        let f = Fixture::new();
        f.write("mod.txt", "edited\n");
        f.write("build/out.log", "ignored\n");
        f.write("new.txt", "untracked\n");
        fs::remove_file(f.root().join("del.txt")).unwrap();
        let found = f
            .repo
            .uncommitted(&strings(&[
                "mod.txt",
                "build/out.log",
                "new.txt",
                "del.txt",
                "keep.txt",
            ]))
            .unwrap();
        let mut found: Vec<(&str, &str)> = found
            .iter()
            .map(|(p, h)| (p.as_str(), h.as_str()))
            .collect();
        found.sort_unstable();
        assert_eq!(
            found,
            [
                ("build/out.log", "ignored"),
                ("del.txt", "deleted"),
                ("mod.txt", "modified"),
                ("new.txt", "untracked")
            ]
        );
    }

    #[test]
    fn recovery_finishes_a_published_round_and_keeps_what_the_user_changed() {
        let f = Fixture::new();
        let patch = patch(&f);
        let prepared = commit(&f, &patch);
        prepared.publish(&f.repo).unwrap();
        // The run died here. Meanwhile the user edits one of the round's files.
        f.write("mod.txt", "the user's\n");
        let found = f.repo.recover_round(&[]).unwrap();
        assert_eq!(
            found,
            Recovered::Finished {
                sha: prepared.sha().to_owned(),
                kept: strings(&["mod.txt"])
            }
        );
        assert_eq!(f.read("mod.txt"), b"the user's\n");
        assert_eq!(f.read("sub/new.txt"), b"new\n");
        assert!(!f.root().join("del.txt").exists());
        assert_eq!(f.repo.status_porcelain().unwrap(), " M mod.txt\n");
        assert_eq!(f.repo.recover_round(&[]).unwrap(), Recovered::Nothing);
    }

    /// A task that changes what a path is: a directory becomes a link, a file becomes a
    /// directory, a directory becomes a file. The work tree ends as the commit, clean, and
    /// nothing is reported as the user's. (A link that becomes a directory is a patch git
    /// refuses to apply: "beyond a symbolic link".)
    #[test]
    fn a_round_that_changes_a_paths_type_brings_the_work_tree_to_it() {
        let f = Fixture::new();
        f.write("d/x.txt", "in d\n");
        f.write("f", "a file\n");
        f.write("e/z.txt", "in e\n");
        f.git(&["add", "-A"]);
        f.git(&["commit", "-qm", "types"]);
        let wt = f.repo.add_worktree("HEAD", "w").unwrap();
        fs::remove_dir_all(wt.path().join("d")).unwrap();
        std::os::unix::fs::symlink("mod.txt", wt.path().join("d")).unwrap();
        fs::remove_file(wt.path().join("f")).unwrap();
        write(wt.path(), "f/inside.txt", "now a directory\n");
        fs::remove_dir_all(wt.path().join("e")).unwrap();
        write(wt.path(), "e", "was a directory\n");
        let patch = wt.changes().unwrap().patch.read_to_vec();
        let prepared = commit(&f, &patch);
        prepared.publish(&f.repo).unwrap();
        assert_eq!(prepared.sync(&f.repo).unwrap(), Vec::<String>::new());
        assert_eq!(
            fs::read_link(f.root().join("d")).unwrap(),
            Path::new("mod.txt")
        );
        assert_eq!(f.read("f/inside.txt"), b"now a directory\n");
        assert_eq!(f.read("e"), b"was a directory\n");
        assert_eq!(f.repo.status_porcelain().unwrap(), "");
    }

    /// The plan is written in the work tree only after the commit point: a crash between
    /// the two leaves it at the old version, and recovery brings it to the commit's.
    #[test]
    fn recovery_brings_dagexecs_own_files_to_the_commit() {
        let f = Fixture::new();
        let index = f.repo.round_index().unwrap();
        assert!(
            index
                .stage_own(&f.repo, "mod.txt", b"the plan, round 1\n")
                .unwrap()
        );
        let prepared = index.prepare(&f.repo, "round 1").unwrap().unwrap();
        prepared.publish(&f.repo).unwrap();
        // The work tree's copy moved on before the round (an attempt was counted).
        f.write("mod.txt", "the plan, attempt counted\n");
        let found = f.repo.recover_round(&strings(&["mod.txt"])).unwrap();
        assert!(
            matches!(found, Recovered::Finished { ref kept, .. } if kept.is_empty()),
            "{found:?}"
        );
        assert_eq!(f.read("mod.txt"), b"the plan, round 1\n");
        assert_eq!(f.repo.status_porcelain().unwrap(), "");
    }

    #[test]
    fn recovery_of_an_unpublished_round_changes_nothing() {
        let f = Fixture::new();
        let patch = patch(&f);
        let old = f.repo.head().unwrap();
        let prepared = commit(&f, &patch);
        drop(prepared);
        assert_eq!(f.repo.recover_round(&[]).unwrap(), Recovered::NotCommitted);
        assert_eq!(f.repo.head().unwrap(), old);
        assert_eq!(f.repo.status_porcelain().unwrap(), "");
    }

    #[test]
    fn a_moved_head_refuses_the_commit_point() {
        let f = Fixture::new();
        let patch = patch(&f);
        let prepared = commit(&f, &patch);
        f.write("keep.txt", "someone else\n");
        let theirs = f.commit_all("meanwhile");
        let err = prepared.publish(&f.repo).unwrap_err();
        assert!(matches!(err, GitError::HeadMoved { .. }), "{err}");
        assert_eq!(f.repo.head().unwrap(), theirs);
        assert_eq!(f.repo.recover_round(&[]).unwrap(), Recovered::Nothing);
    }

    #[test]
    fn recovery_never_deletes_through_a_symlinked_directory() {
        let f = Fixture::new();
        f.write("d/x.txt", "x\n");
        f.commit_all("d");
        let wt = f.repo.add_worktree("HEAD", "w").unwrap();
        fs::remove_file(wt.path().join("d/x.txt")).unwrap();
        let prepared = commit(&f, &wt.changes().unwrap().patch.read_to_vec());
        prepared.publish(&f.repo).unwrap();
        // Before the work tree follows, `d` becomes a link to a directory outside.
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("x.txt"), "x\n").unwrap();
        fs::remove_dir_all(f.root().join("d")).unwrap();
        std::os::unix::fs::symlink(outside.path(), f.root().join("d")).unwrap();
        let found = f.repo.recover_round(&[]).unwrap();
        assert!(
            matches!(&found, Recovered::Finished { kept, .. } if kept == &strings(&["d/x.txt"])),
            "{found:?}"
        );
        assert_eq!(fs::read(outside.path().join("x.txt")).unwrap(), b"x\n");
    }

    #[test]
    fn a_forged_round_record_is_dropped_untouched() {
        let f = Fixture::new();
        let head = f.repo.head().unwrap();
        for paths in [
            vec!["../outside.txt"],
            vec!["/etc/passwd"],
            vec![".git/config"],
        ] {
            let journal = Journal {
                old: "0".repeat(40),
                new: head.clone(),
                paths: strings(&paths),
            };
            fs::create_dir_all(f.repo.dagexec_dir()).unwrap();
            fs::write(f.repo.journal_path(), serde_json::to_vec(&journal).unwrap()).unwrap();
            assert_eq!(
                f.repo.recover_round(&[]).unwrap(),
                Recovered::Nothing,
                "{paths:?}"
            );
            assert!(!f.repo.journal_path().exists());
        }
    }

    #[test]
    fn a_held_index_lock_is_named_with_the_fix() {
        let f = Fixture::new();
        let lock = f.root().join(".git/index.lock");
        fs::write(&lock, "").unwrap();
        f.write("keep.txt", "changed\n");
        let err = f.repo.commit("x", &strings(&["keep.txt"])).unwrap_err();
        assert!(matches!(err, GitError::IndexLocked { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains(&format!("{} exists", lock.display()))
                && text.contains("if no git process is running, delete"),
            "{text}"
        );
    }

    /// Issue 31 §9: after a kill -9, a git the killed run started may still be writing the
    /// round's index. Recovery waits for its lock to go instead of removing the files under
    /// it (its rename would bring a half-built index back afterwards).
    #[test]
    fn recovery_waits_for_a_git_still_writing_the_round_index() {
        let f = Fixture::new();
        let dir = f.repo.common_dir().join("dagexec");
        fs::create_dir_all(&dir).unwrap();
        let lock = dir.join("round-index.lock");
        fs::write(&lock, "half-built").unwrap();
        let orphan = {
            let (lock, index) = (lock.clone(), dir.join("round-index"));
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(300));
                // git ends as it does: its lock becomes the index.
                fs::rename(&lock, &index).is_ok()
            })
        };
        f.repo.recover_round(&[]).unwrap();
        assert!(
            orphan.is_finished(),
            "recovery went on while the lock was held"
        );
        assert!(
            orphan.join().unwrap(),
            "the lock was removed under the writer"
        );
        assert!(!dir.join("round-index").exists() && !lock.exists());
        // A lock nobody holds (a crash's) is removed after the wait.
        fs::write(&lock, "stale").unwrap();
        f.repo.recover_round(&[]).unwrap();
        assert!(!lock.exists());
    }

    /// A round that only makes a file executable (its content unchanged) brings the work
    /// tree's file to that mode: the commit and the work tree agree.
    #[test]
    fn a_round_that_changes_only_a_mode_brings_the_work_tree_to_it() {
        let f = Fixture::new();
        let wt = f.repo.add_worktree("HEAD", "w").unwrap();
        set_executable(&wt.path().join("mod.txt"));
        let prepared = commit(&f, &wt.changes().unwrap().patch.read_to_vec());
        prepared.publish(&f.repo).unwrap();
        assert_eq!(prepared.sync(&f.repo).unwrap(), Vec::<String>::new());
        assert_eq!(
            f.git(&["ls-files", "-s", "mod.txt"]).split(' ').next(),
            Some("100755")
        );
        assert_eq!(f.repo.status_porcelain().unwrap(), "");
    }

    #[test]
    fn messages_are_cleaned_like_git_commit() {
        assert_eq!(
            cleanup_message("\n\ntitle  \n\n\n- a \n- b\n\n"),
            "title\n\n- a\n- b\n"
        );
        assert_eq!(cleanup_message(""), "");
    }
}
