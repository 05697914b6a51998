//! The round's own index: patches checked and applied into it, the plan and tasks.md
//! staged, the commit prepared without touching the user's index.

use super::super::apply::{ApplyError, apply_to, applying};
use super::super::cmd::{Git, git, literal, nul_fields};
use super::super::error::io_error;
use super::super::paths::normalize;
use super::super::{GitError, PatchRef, Repo};
use super::{Journal, RoundIndex, StagedRound, cleanup_message};

impl RoundIndex {
    pub(super) fn git(&self, label: &'static str) -> Git<'_> {
        git(&self.root, label).index(Some(&self.index))
    }

    /// The commit the round is built on: its commits' parent.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The tree the index holds (`git write-tree`).
    pub fn write_tree(&self) -> Result<String, GitError> {
        self.git("write-tree").arg("write-tree").run_text()
    }

    /// Whether `patch` applies to the index as it is now; nothing is changed.
    pub fn check_patch<'p>(&self, patch: impl Into<PatchRef<'p>>) -> Result<(), ApplyError> {
        apply_to(&self.root, Some(&self.index), patch.into(), true)
    }

    /// Applies `patch` to the index (all or nothing). The work tree is not touched.
    pub fn apply_patch<'p>(&self, patch: impl Into<PatchRef<'p>>) -> Result<(), ApplyError> {
        apply_to(&self.root, Some(&self.index), patch.into(), false)
    }

    /// Applies `patch`, made on this index's tree, to it; a failure is git's error.
    pub(in super::super) fn apply_cached(&self, patch: PatchRef<'_>) -> Result<(), GitError> {
        let mut call = applying(self.git("apply --cached"), "--cached", patch, false);
        call.run().map(drop)
    }

    /// Puts dagexec's own files (the plan, its state file) into the index as they are in the
    /// work tree; a path that no longer exists is removed, one that is ignored and untracked
    /// is skipped (with a warning), as `git add` would.
    pub fn add_own_files(&self, repo: &Repo, paths: &[String]) -> Result<(), GitError> {
        repo.add_all(paths, Some(&self.index)).map(drop)
    }

    /// Puts `content` into the index at `path` as one of dagexec's own files, without writing
    /// the work tree: the file keeps its mode (a new one is `100644`). `false` when git would
    /// not commit the file (not in this index, untracked and ignored): nothing is staged.
    pub fn stage_own(&self, repo: &Repo, path: &str, content: &[u8]) -> Result<bool, GitError> {
        let path = normalize(path)?;
        let entry = self.entry(&path)?;
        if entry.is_none() && repo.stageable(vec![path.clone()])?.is_empty() {
            return Ok(false);
        }
        let executable = entry.is_some_and(|(mode, _)| mode == "100755");
        let mode = if executable { "100755" } else { "100644" };
        self.write_entry(&path, mode, content)?;
        Ok(true)
    }

    /// The index entry at `path` (normalized) as `(mode, object)`, if there is one.
    fn entry(&self, path: &str) -> Result<Option<(String, String)>, GitError> {
        let out = self
            .git("ls-files --stage")
            .args(["ls-files", "--stage", "-z", "--"])
            .arg(literal(path))
            .run()?;
        let suffix = format!("\t{path}");
        // `<mode> SP <object> SP <stage> TAB <path>`
        Ok(nul_fields(&out).find_map(|f| {
            let mut fields = f.strip_suffix(&suffix)?.split(' ');
            Some((fields.next()?.to_owned(), fields.next()?.to_owned()))
        }))
    }

    /// The index entry at `path`, as `(mode, content)`: what the round's commit will hold
    /// there. `None` when the index has no file at `path`.
    pub fn read_entry(&self, path: &str) -> Result<Option<(String, Vec<u8>)>, GitError> {
        let entry = self.entry(&normalize(path)?)?;
        let Some((mode, id)) = entry.filter(|(mode, _)| mode != "160000") else {
            return Ok(None);
        };
        let bytes = self.git("cat-file").args(["cat-file", "blob", &id]).run()?;
        Ok(Some((mode, bytes)))
    }

    /// Puts `content` at `path` in the index with `mode` (as [`RoundIndex::read_entry`] gave
    /// it); the work tree is not touched. The bytes are stored as they are (no filters).
    pub fn write_entry(&self, path: &str, mode: &str, content: &[u8]) -> Result<(), GitError> {
        self.put(&normalize(path)?, mode, "--no-filters", content)
    }

    /// Stores `content` (hashed with `filters`: `--no-filters`, or `--path=<path>` to convert
    /// it as `git add` would) and puts it at `path` in the index with `mode`.
    pub(in super::super) fn put(
        &self,
        path: &str,
        mode: &str,
        filters: &str,
        content: &[u8],
    ) -> Result<(), GitError> {
        let id = self
            .git("hash-object -w")
            .args(["hash-object", "-w", "--stdin", filters])
            .stdin(content)
            .run_text()?;
        self.git("update-index --cacheinfo")
            .args(["update-index", "--add", "--cacheinfo"])
            .arg(format!("{mode},{id},{path}"))
            .run()?;
        Ok(())
    }

    /// Takes `paths` out of the index (the work tree is not touched); absent ones are fine.
    pub fn remove(&self, paths: &[String]) -> Result<(), GitError> {
        let paths = super::super::paths::normalize_all(paths)?;
        if paths.is_empty() {
            return Ok(());
        }
        self.git("rm --cached")
            .args(["rm", "--cached", "-r", "--quiet", "--ignore-unmatch", "--"])
            .args(paths.iter().map(|p| literal(p)))
            .run()?;
        Ok(())
    }

    /// A commit of the index as it is now (parent: the base), published nowhere: the base a
    /// later group of the round starts from, with the earlier groups' patches applied. The
    /// base itself when nothing was applied. No ref moves and no journal is written; an
    /// unreferenced commit is garbage git collects in time.
    pub fn snapshot(&self, repo: &Repo) -> Result<String, GitError> {
        let Some(tree) = self.changed_tree()? else {
            return Ok(self.base.clone());
        };
        let message = "dagexec: the round so far (the base of its next group)\n";
        self.commit_tree(repo, &tree, message)
    }

    /// The tree the index holds now; `None` when it is the base's.
    fn changed_tree(&self) -> Result<Option<String>, GitError> {
        let tree = self.write_tree()?;
        Ok((tree != self.tree_of(&self.base)?).then_some(tree))
    }

    /// `git commit-tree` of `tree` with the base as its parent and `message` exactly as given,
    /// as the repository's identity or dagexec's where it has none. The new commit's SHA.
    pub(in super::super) fn commit_tree(
        &self,
        repo: &Repo,
        tree: &str,
        message: &str,
    ) -> Result<String, GitError> {
        repo.committing("commit-tree")?
            .args([
                "commit-tree",
                "--no-gpg-sign",
                tree,
                "-p",
                &self.base,
                "-F",
                "-",
            ])
            .stdin(message.as_bytes())
            .run_text()
    }

    /// Writes the tree and the commit (parent: the base) with `message`, and records the
    /// round in the journal. `None` when the tree is the base's: nothing to commit.
    pub fn prepare(&self, repo: &Repo, message: &str) -> Result<Option<StagedRound>, GitError> {
        let tree = self.write_tree()?;
        let changes = repo.changes(&self.base, &tree, &[])?;
        if changes.is_empty() {
            return Ok(None);
        }
        let new = self.commit_tree(repo, &tree, &cleanup_message(message))?;
        let mut paths: Vec<String> = changes.iter().map(|c| c.path.clone()).collect();
        paths.sort();
        let journal = Journal {
            old: self.base.clone(),
            new,
            paths,
        };
        // Atomically, never through a link: a fresh temporary file beside it, synced, renamed.
        let path = repo.journal_path();
        let bytes = serde_json::to_vec_pretty(&journal).expect("the journal serialises");
        crate::edge::fsx::write(&self.dir, &path, &bytes).map_err(io_error("write", &path))?;
        Ok(Some(StagedRound { journal, changes }))
    }
}

impl Drop for RoundIndex {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.index);
    }
}
