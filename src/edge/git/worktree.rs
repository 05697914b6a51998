//! A worker's worktree and what the worker changed in it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::cmd::{Git, git, nul_fields};
use super::{GitError, Patch, PatchRef};
use crate::pure::paths::Link;

/// A detached worktree of the repository at a base commit, where one worker works. Removed
/// by [`Worktree::remove`], or on drop (best effort).
#[derive(Debug)]
pub struct Worktree {
    pub(super) path: PathBuf,
    pub(super) root: PathBuf,
    pub(super) name: String,
    pub(super) base: String,
    pub(super) removed: bool,
}

/// The most bytes a task's added and changed files may hold together: GitHub refuses any
/// file over 100 MiB, and a change is held whole while it is integrated.
const MAX_CHANGE_BYTES: u64 = 100 * 1024 * 1024;

/// The line of a git failure that says the disk (or the user's quota) is full, if one does.
fn disk_full(e: &GitError) -> Option<String> {
    let text = e.to_string();
    text.lines()
        .find(|l| {
            [
                "No space left on device",
                "Disk quota exceeded",
                "File too large",
            ]
            .iter()
            .any(|m| l.contains(m))
        })
        .map(|l| {
            // git's own words, without the worktree's path before them.
            let from = ["error:", "fatal:"].iter().filter_map(|m| l.find(m)).min();
            l[from.unwrap_or(0)..].trim().to_string()
        })
}

/// What a worker did in its worktree, relative to the base commit.
#[derive(Debug, Clone, Default)]
pub struct Changes {
    /// A binary patch (full index lines) that [`Repo::apply_patch`](super::Repo::apply_patch)
    /// applies onto a tree at the base; empty when nothing changed. In an unlinked temporary
    /// file, as git wrote it: never in memory whole.
    pub patch: Patch,
    /// Repo-relative paths added, modified, deleted or renamed (both names of a rename),
    /// including executable-bit and type changes.
    pub changed: BTreeSet<String>,
    /// Those of `changed` that are regular files in the worktree now (not deleted, not a
    /// symlink).
    pub present: BTreeSet<String>,
    /// The symlinks the change adds or changes (mode 120000 after it), with their targets, and
    /// the gitlinks (mode 160000: a nested repository) it adds or changes.
    pub links: Vec<Link>,
    /// Paths the worker wrote inside git's own directory under another case (`.GIT/hooks/x`,
    /// `sub/.Git`): never staged, listed so the attempt is refused with them named.
    pub forbidden: Vec<String>,
    worktree: PathBuf,
    base: String,
    excluded: Vec<String>,
}

impl Worktree {
    /// The worktree's top directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes the worktree a clean checkout of `base` again for the next task: `HEAD`, the
    /// index and the files (only those that differ are rewritten), with untracked and ignored
    /// files removed. Much cheaper than a new worktree once the tree is large.
    pub fn reset_to(&mut self, base: &str) -> Result<(), GitError> {
        git(&self.path, "reset --hard")
            .args(["reset", "--hard", "--quiet", base])
            .run()?;
        git(&self.path, "clean").args(["clean", "-ffdxq"]).run()?;
        base.clone_into(&mut self.base);
        Ok(())
    }

    /// Moves the worktree to `name` in the same folder (`git worktree move`): a process that
    /// knows the old path but holds nothing in the tree can no longer reach it. Refused by git
    /// for a tree with submodules.
    pub fn move_to(&mut self, name: &str) -> Result<(), GitError> {
        super::paths::check_name(name)?;
        let parent = self.path.parent().unwrap_or(Path::new("/"));
        let to = parent.join(name);
        let _admin = super::worktree_admin();
        git(&self.root, "worktree move")
            .args(["worktree", "move"])
            .arg(&self.path)
            .arg(&to)
            .run()?;
        // Its git directory stays where it was.
        if let Some(git_dir) = super::cmd::unpin(&self.path) {
            super::cmd::pin(&to, git_dir);
        }
        self.path = to;
        name.clone_into(&mut self.name);
        Ok(())
    }

    /// Why the tree is not exactly a clean checkout of its base, if it is not: `HEAD` elsewhere,
    /// or any path `git status` lists — modified, staged, untracked or ignored. `None` when it
    /// is exactly the base.
    pub fn differs_from_base(&self) -> Result<Option<String>, GitError> {
        // One `git status` says both: `HEAD` in its `# branch.oid` header, then the entries.
        let status = super::cmd::status(&self.path, "status --ignored", &["--ignored=matching"])
            .args(["--porcelain=v2", "--branch"])
            .run()?;
        let fields: Vec<String> = nul_fields(&status).collect();
        let (headers, entries): (Vec<&String>, Vec<&String>) =
            fields.iter().partition(|f| f.starts_with("# "));
        let head = headers
            .iter()
            .find_map(|h| h.strip_prefix("# branch.oid "))
            .unwrap_or("(none)");
        if head != self.base {
            return Ok(Some(format!("HEAD is at {head}, not {}", self.base)));
        }
        Ok(entries
            .first()
            .map(|entry| format!("it holds `{}`", entry_v1(entry))))
    }

    /// Applies `patch` (a [`Changes::patch`] made against this tree's base) to the tree and its
    /// index; all or nothing. Used to let a retry continue from a rejected attempt's work.
    pub fn apply<'p>(&self, patch: impl Into<PatchRef<'p>>) -> Result<(), super::ApplyError> {
        super::apply::apply(&self.path, patch.into(), false)
    }

    /// Everything changed relative to the base ([`changes_in`]) within `MAX_CHANGE_BYTES`
    /// ([`changes_within`]).
    pub fn changes_within(&self) -> Result<Result<Changes, String>, GitError> {
        changes_within(&self.path, &self.base)
    }

    /// Everything changed relative to the base: modified, added (untracked and not ignored
    /// included), deleted, renamed, binary files and mode changes, committed by the worker or
    /// not. Stages everything in the worktree's own index (`git add --all`) to get there; the
    /// main work tree and index are not touched.
    #[cfg(test)]
    pub fn changes(&self) -> Result<Changes, GitError> {
        changes_in(&self.path, &self.base)
    }

    /// Unregisters the worktree (`git worktree remove --force`) and deletes its directory.
    #[cfg(test)]
    pub fn remove(mut self) -> Result<(), GitError> {
        self.remove_now()
    }

    fn remove_now(&mut self) -> Result<(), GitError> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        let _admin = super::worktree_admin();
        remove(&self.root, &self.path, true)
    }
}

/// Why the change in the checkout at `dir` against `base` is refused when the files the
/// worker added or changed (the untracked ones `git add --all` would stage, and the tracked
/// ones that differ from `base`, in the work tree or in a commit the worker made) hold more than [`MAX_CHANGE_BYTES`] together — `its added and changed files hold
/// 200.0 MiB (big.bin 200.0 MiB), over the 100 MiB …`, largest first; `None` within it. Read
/// from the file system (lstat) before anything is staged, so an oversized change never
/// reaches the object store or memory. `untracked`: [`untracked`]'s listing of `dir`.
fn oversized(dir: &Path, base: &str, untracked: &[u8]) -> Result<Option<String>, GitError> {
    let changed = git(dir, "diff --name-only")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .args([
            "diff",
            "--name-only",
            "-z",
            "--no-renames",
            "--no-ext-diff",
            base,
        ])
        .arg("--")
        .run()?;
    let mut files: Vec<(String, u64)> = nul_fields(untracked)
        .chain(nul_fields(&changed))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter_map(|p| {
            let m = std::fs::symlink_metadata(dir.join(&p)).ok()?;
            m.is_file().then_some((p, m.len()))
        })
        .collect();
    let total: u64 = files.iter().map(|(_, n)| n).sum();
    if total <= MAX_CHANGE_BYTES {
        return Ok(None);
    }
    files.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    #[expect(
        clippy::cast_precision_loss,
        reason = "sizes shown to a tenth of a MiB"
    )]
    let mib = |n: u64| format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0));
    let mut shown: Vec<String> = files
        .iter()
        .take(3)
        .map(|(p, n)| format!("{p} {}", mib(*n)))
        .collect();
    if files.len() > 3 {
        shown.push(format!("and {} more", files.len() - 3));
    }
    Ok(Some(format!(
        "refused: its added and changed files hold {} ({}), over the {} MiB a task's change may hold; nothing of it was integrated (keep large outputs out of the repository, or list them in .gitignore)",
        mib(total),
        shown.join(", "),
        MAX_CHANGE_BYTES / (1024 * 1024)
    )))
}

/// Everything changed in the checkout at `dir` against `base` ([`changes_in`]), or why it is
/// not taken, in the words the attempt's failure gives: the checkout is gone (the worker
/// removed it, or put something else than a folder in its place), its added and changed files
/// hold more than `MAX_CHANGE_BYTES` (seen before anything is staged), or the disk filled up
/// while it was staged. Each is the attempt's own failure, never the run's. Shared by the
/// local executor and the Action's work job.
pub fn changes_within(dir: &Path, base: &str) -> Result<Result<Changes, String>, GitError> {
    if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return Ok(Err(
            "refused: its worktree is gone: the worker removed it (or put something else in its place); nothing of it was integrated".into(),
        ));
    }
    let untracked = untracked(dir, None)?;
    if let Some(why) = oversized(dir, base, &untracked)? {
        return Ok(Err(why));
    }
    match changes_listed(dir, base, &untracked) {
        Ok(changes) => Ok(Ok(changes)),
        Err(e) => match disk_full(&e) {
            Some(line) => Ok(Err(format!(
                "the disk filled up while this attempt's changes were staged ({line}); nothing of it was integrated, and its tree is discarded, which frees the space"
            ))),
            None => Err(e),
        },
    }
}

impl Drop for Worktree {
    fn drop(&mut self) {
        if let Err(e) = self.remove_now() {
            tracing::warn!(worktree = %self.name, "could not remove worktree: {e}");
        }
    }
}

/// Removes the worktree at `path` of the repository at `root`: unregisters it when
/// `registered` (`git worktree remove --force --force`: the second force also takes a locked
/// one), deletes what is on disk, and when unregistering failed, drops the registration left
/// behind (`git worktree prune`, once the directory is gone).
pub(super) fn remove(root: &Path, path: &Path, registered: bool) -> Result<(), GitError> {
    let unregistered = !registered
        || git(root, "worktree remove")
            .args(["worktree", "remove", "--force", "--force"])
            .arg(path)
            .run()
            .inspect_err(|e| tracing::debug!("{e}; deleting the directory and pruning instead"))
            .is_ok();
    super::paths::remove_any(path)?;
    super::cmd::unpin(path);
    if !unregistered {
        git(root, "worktree prune")
            .args(["worktree", "prune"])
            .run()?;
    }
    Ok(())
}

impl Changes {
    /// No change taken from the checkout at `dir`: one refused before it was staged
    /// ([`changes_within`]).
    pub fn nothing(dir: &Path) -> Changes {
        Changes {
            worktree: dir.to_path_buf(),
            ..Changes::default()
        }
    }

    /// The same changes without `paths` (files, or directories and all under them): the
    /// worktree is diffed again with those paths excluded, so the worktree must still exist.
    /// When none of them changed (no changed path is one of them or under one, compared
    /// without regard to case), leaving them out changes no diff: these changes are kept as
    /// they are, without running git again.
    pub fn without(&self, paths: &[&str]) -> Result<Changes, GitError> {
        let mut excluded = self.excluded.clone();
        let mut touched = false;
        for path in paths {
            let path = super::paths::normalize(path)?;
            touched |= self
                .changed
                .iter()
                .any(|c| crate::pure::paths::within(c, &path));
            excluded.push(path);
        }
        if !touched {
            return Ok(Changes {
                excluded,
                ..self.clone()
            });
        }
        diff(&self.worktree, &self.base, excluded, self.forbidden.clone())
    }
}

/// What changed in the checkout at `dir` against `base`, as for a worktree (the Action's
/// worker job runs in a plain checkout): `git add --all`, leaving out (and reporting) what
/// lies in a directory named like git's own under another case — git itself would refuse to
/// add it and fail the whole command — then the staged changes against `base`.
pub fn changes_in(dir: &Path, base: &str) -> Result<Changes, GitError> {
    changes_listed(dir, base, &untracked(dir, None)?)
}

/// [`changes_in`] with `dir`'s [`untracked`] files listed already.
fn changes_listed(dir: &Path, base: &str, untracked: &[u8]) -> Result<Changes, GitError> {
    let forbidden = add_listed(dir, None, untracked)?;
    diff(dir, base, Vec::new(), forbidden.into_iter().collect())
}

/// The untracked files in the checkout at `dir` that `git add --all` would add (into the
/// index file `index` instead of its own, when given), as `git ls-files -z` lists them.
fn untracked(dir: &Path, index: Option<&Path>) -> Result<Vec<u8>, GitError> {
    git(dir, "ls-files --others")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .index(index)
        .args(["ls-files", "--others", "--exclude-standard", "-z"])
        .run()
}

/// `git add --all` in the checkout at `dir` (into the index file `index` instead of its own,
/// when given), leaving out what lies in a directory named like git's own under another case;
/// returns those left out.
pub(super) fn add_all(dir: &Path, index: Option<&Path>) -> Result<BTreeSet<String>, GitError> {
    add_listed(dir, index, &untracked(dir, index)?)
}

/// [`add_all`] with the [`untracked`] files listed already.
fn add_listed(
    dir: &Path,
    index: Option<&Path>,
    untracked: &[u8],
) -> Result<BTreeSet<String>, GitError> {
    let forbidden: BTreeSet<String> = nul_fields(untracked)
        .filter_map(|f| crate::pure::paths::git_dir_prefix(&f))
        .collect();
    if crate::edge::agent_user::current().is_some() {
        forget_nested(dir, index)?;
    }
    git(dir, "add --all")
        .index(index)
        .args(["add", "--all", "--", "."])
        .args(excluding(&forbidden))
        .run()?;
    Ok(forbidden)
}

/// Drops from the index the gitlinks whose nested repository is there (`sub/.git`), for
/// `git add --all` to add them again as it adds a new one, from their `HEAD`: a gitlink it
/// finds unchanged it checks for changes inside with a `git status` there, under that
/// repository's config, which is task code's — its filters would run as root
/// ([`super::cmd`]'s `disarmed` keeps status and diff out of it).
fn forget_nested(dir: &Path, index: Option<&Path>) -> Result<(), GitError> {
    let staged = git(dir, "ls-files --stage")
        .index(index)
        .args(["ls-files", "--stage", "-z"])
        .run()?;
    let nested: Vec<String> = nul_fields(&staged)
        .filter_map(|entry| {
            let (meta, path) = entry.split_once('\t')?;
            meta.starts_with("160000 ").then(|| path.to_string())
        })
        .filter(|path| std::fs::symlink_metadata(dir.join(path).join(".git")).is_ok())
        .collect();
    if !nested.is_empty() {
        git(dir, "update-index --force-remove")
            .index(index)
            .args(["update-index", "--force-remove", "--"])
            .args(&nested)
            .run()?;
    }
    Ok(())
}

/// `Staged(dir, index, base, pathspec)`: the changes staged in the checkout at `dir` (in the
/// index file `index` instead of its own, when given) against `base`, less `pathspec`, read
/// with `git diff --cached`.
#[derive(Clone, Copy)]
pub(super) struct Staged<'a>(
    pub &'a Path,
    pub Option<&'a Path>,
    pub &'a str,
    pub &'a [String],
);

/// The options every `git diff --cached` here uses: fixed whatever the user's configuration
/// (prefixes, renames, external diff, colour, submodule format).
const DIFF_OPTIONS: &[&str] = &[
    "diff",
    "--cached",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--find-renames",
    "--submodule=short",
    "--ignore-submodules=none",
];

impl<'a> Staged<'a> {
    /// `git diff --cached <DIFF_OPTIONS> <format> <base> -- <pathspec>`.
    fn diff(&self, label: &'static str, format: &[&str]) -> Git<'a> {
        let Staged(dir, index, base, pathspec) = *self;
        git(dir, label)
            .index(index)
            .args(DIFF_OPTIONS)
            .args(format)
            .args([base, "--"])
            .args(pathspec)
    }

    /// The changes as a binary patch (full index lines), in an unlinked temporary file.
    pub(super) fn patch(&self) -> Result<Patch, GitError> {
        let mut call = self.diff("diff --cached --binary", &["--binary", "--full-index"]);
        call.run_to_file().map(Into::into)
    }

    /// The paths changed (both names of a rename).
    pub(super) fn paths(&self) -> Result<BTreeSet<String>, GitError> {
        Ok(self
            .raw()?
            .iter()
            .flat_map(RawChange::paths)
            .cloned()
            .collect())
    }

    /// The paths changed (both names of a rename), and the symlinks (and gitlinks) among the
    /// changes with their targets read from the object database: one `git diff --raw`.
    pub(super) fn paths_and_links(&self) -> Result<(BTreeSet<String>, Vec<Link>), GitError> {
        let raw = self.raw()?;
        let mut links = Vec::new();
        for entry in &raw {
            let target = match entry.new_mode.as_str() {
                "160000" => entry.new_sha.clone(),
                "120000" => git(self.0, "cat-file blob")
                    .index(self.1)
                    .args(["cat-file", "blob", &entry.new_sha])
                    .run()
                    .map(|t| String::from_utf8_lossy(&t).into_owned())?,
                _ => continue,
            };
            links.push(Link {
                path: entry.path.clone(),
                target,
                gitlink: entry.new_mode == "160000",
            });
        }
        let paths = raw.iter().flat_map(RawChange::paths).cloned().collect();
        Ok((paths, links))
    }

    /// The staged changes, one entry each (`git diff --cached --raw -z`).
    fn raw(&self) -> Result<Vec<RawChange>, GitError> {
        let label = "diff --cached --raw";
        let out = self.diff(label, &["--raw", "--no-abbrev", "-z"]).run()?;
        read_raw(&out, label, self.0)
    }
}

/// A `git status --porcelain=v2` entry as v1 shows it (`XY path`, `?? path`, `!! path`).
fn entry_v1(entry: &str) -> String {
    let fields: Vec<&str> = entry.splitn(11, ' ').collect();
    let path = |n: usize| fields.get(n).copied().unwrap_or("");
    match fields[0] {
        "?" => format!("?? {}", path(1)),
        "!" => format!("!! {}", path(1)),
        "1" => format!("{} {}", path(1), entry.splitn(9, ' ').nth(8).unwrap_or("")),
        "2" => format!("{} {}", path(1), entry.splitn(10, ' ').nth(9).unwrap_or("")),
        "u" => format!("{} {}", path(1), path(10)),
        _ => entry.to_owned(),
    }
}

/// One change in `git diff --raw -z` (or `diff-tree --raw -z`) output.
#[derive(Debug, PartialEq)]
pub(super) struct RawChange {
    old_mode: String,
    old_sha: String,
    new_mode: String,
    new_sha: String,
    /// Where the change is (a rename's or copy's destination).
    pub(super) path: String,
    /// A rename's source, which the change empties too (a copy's source is unchanged).
    renamed_from: Option<String>,
}

impl RawChange {
    /// The paths the change touches.
    fn paths(&self) -> impl Iterator<Item = &String> {
        std::iter::once(&self.path).chain(&self.renamed_from)
    }

    /// `(mode, object)` before the change; `None` where there was nothing.
    pub(super) fn before(&self) -> Option<(&str, &str)> {
        (self.old_mode != "000000").then_some((&self.old_mode, &self.old_sha))
    }

    /// `(mode, object)` after the change; `None` where there is nothing.
    pub(super) fn after(&self) -> Option<(&str, &str)> {
        (self.new_mode != "000000").then_some((&self.new_mode, &self.new_sha))
    }
}

/// The entries of the `--raw -z` output of `command` in `dir` ([`parse_raw`]).
pub(super) fn read_raw(out: &[u8], command: &str, dir: &Path) -> Result<Vec<RawChange>, GitError> {
    parse_raw(out).map_err(|detail| GitError::Unexpected {
        command: command.into(),
        dir: dir.to_path_buf(),
        detail,
    })
}

/// The entries of `--raw -z` output: `:<old mode> <new mode> <old sha> <new sha> <status>\0path\0`,
/// or with `R<score>`/`C<score>` two paths (source, destination).
fn parse_raw(out: &[u8]) -> Result<Vec<RawChange>, String> {
    let mut fields = nul_fields(out);
    let mut entries = Vec::new();
    while let Some(head) = fields.next() {
        let parts: Vec<&str> = head.trim_start_matches(':').split(' ').collect();
        let [old_mode, new_mode, old_sha, new_sha, status] = parts[..] else {
            return Err(format!("unexpected raw line {head:?}"));
        };
        let mut path = || {
            fields
                .next()
                .ok_or_else(|| format!("{head:?} without its path"))
        };
        let (path, renamed_from) = match status.chars().next() {
            Some('R') => {
                let from = path()?;
                (path()?, Some(from))
            }
            Some('C') => {
                path()?;
                (path()?, None)
            }
            Some('A' | 'M' | 'D' | 'T' | 'U' | 'X') => (path()?, None),
            _ => return Err(format!("unknown status {status:?}")),
        };
        entries.push(RawChange {
            old_mode: old_mode.to_owned(),
            old_sha: old_sha.to_owned(),
            new_mode: new_mode.to_owned(),
            new_sha: new_sha.to_owned(),
            path,
            renamed_from,
        });
    }
    Ok(entries)
}

/// `paths` as pathspecs that exclude them (literally).
pub(super) fn excluding<'p>(paths: impl IntoIterator<Item = &'p String>) -> Vec<String> {
    paths
        .into_iter()
        .map(|p| format!(":(exclude,literal){p}"))
        .collect()
}

/// The staged changes in `worktree` against `base`, less `excluded`; `forbidden` as
/// [`Changes::forbidden`].
fn diff(
    worktree: &Path,
    base: &str,
    excluded: Vec<String>,
    forbidden: Vec<String>,
) -> Result<Changes, GitError> {
    let pathspec = excluding(&excluded);
    let staged = Staged(worktree, None, base, &pathspec);
    let (changed, links) = staged.paths_and_links()?;
    let present = changed
        .iter()
        .filter(|p| std::fs::symlink_metadata(worktree.join(p)).is_ok_and(|m| m.is_file()))
        .cloned()
        .collect();
    Ok(Changes {
        patch: staged.patch()?,
        changed,
        present,
        links,
        forbidden,
        worktree: worktree.to_path_buf(),
        base: base.to_owned(),
        excluded,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_output_parses_renames_copies_and_links() {
        let z = "0000000000000000000000000000000000000000";
        let x = "1111111111111111111111111111111111111111";
        let out = format!(
            ":100644 100644 {x} {x} M\0a b.txt\0:100644 100644 {x} {x} R087\0old\0new/dir\0\
             :100644 100644 {x} {x} C100\0src\0copy\0:100644 000000 {x} {z} D\0gone\0\
             :000000 120000 {z} {x} A\0\u{fc}\0"
        );
        let raw = parse_raw(out.as_bytes()).unwrap();
        let paths: BTreeSet<&str> = raw
            .iter()
            .flat_map(RawChange::paths)
            .map(String::as_str)
            .collect();
        let expected = ["a b.txt", "old", "new/dir", "copy", "gone", "\u{fc}"];
        assert_eq!(paths, BTreeSet::from(expected));
        assert_eq!(raw[4].new_mode, "120000");
        assert_eq!(raw[1].renamed_from.as_deref(), Some("old"));
        assert!(parse_raw(format!(":100644 100644 {x} {x} R100\0only-one\0").as_bytes()).is_err());
        assert!(parse_raw(format!(":100644 100644 {x} {x} ?\0x\0").as_bytes()).is_err());
        assert!(parse_raw(b"M\0x\0").is_err());
        assert!(parse_raw(b"").unwrap().is_empty());
    }
}
