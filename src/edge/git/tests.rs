//! Tests against real repositories in temporary directories. Every git call (ours and the
//! fixtures') goes through `cmd::git`, which strips `GIT_DIR`, `GIT_WORK_TREE`,
//! `GIT_INDEX_FILE` and the like, so the tests also pass when run from a git hook; each test
//! also gets an empty `HOME`, no system config and a ceiling directory, so the developer's own
//! git configuration cannot change the outcome.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use super::cmd::TEST_ENV;
pub(super) use super::cmd::git;
use super::*;

/// Every file outside `.git`: path → (content, executable).
pub(super) type TreeFiles = BTreeMap<String, (Vec<u8>, bool)>;

/// A repository in a temporary directory, with git isolated from the user's configuration.
pub(super) struct Fixture {
    pub(super) tmp: TempDir,
    pub(super) repo: Repo,
}

pub(super) const FILES: &[(&str, &str)] = &[
    ("mod.txt", "one\ntwo\nthree\n"),
    ("keep.txt", "untouched\n"),
    ("del.txt", "delete me\n"),
    ("script.sh", "#!/bin/sh\necho hi\n"),
    (".gitignore", "*.log\nbuild/\n"),
    (".design/plan.json", "{\"tasks\": []}\n"),
];

/// Points every git call of this thread at an empty HOME, no system config, and a ceiling at
/// `tmp`; removes identity and `-c` variables a parent git may have exported.
pub(super) fn isolate(tmp: &Path) {
    let home = tmp.join("home");
    fs::create_dir_all(&home).unwrap();
    let set = |k: &str, v: &Path| (k.into(), Some(v.as_os_str().to_owned()));
    let mut env = vec![
        set("HOME", &home),
        set("XDG_CONFIG_HOME", &home.join(".config")),
        set("GIT_CONFIG_NOSYSTEM", Path::new("1")),
        set("GIT_CEILING_DIRECTORIES", tmp),
    ];
    for key in [
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "EMAIL",
    ] {
        env.push((key.into(), None));
    }
    TEST_ENV.with(|e| *e.borrow_mut() = env);
}

impl Fixture {
    /// A repository with [`FILES`] committed and `user.name`/`user.email` configured.
    pub(super) fn new() -> Fixture {
        let f = Fixture::empty(true);
        for (path, content) in FILES {
            f.write(path, content);
        }
        f.commit_all("initial");
        f
    }

    /// `git init` only, with or without a configured identity.
    pub(super) fn empty(identity: bool) -> Fixture {
        let tmp = TempDir::new().unwrap();
        isolate(tmp.path());
        let root = tmp.path().join("repo");
        fs::create_dir(&root).unwrap();
        run(&root, &["init", "--quiet"]);
        if identity {
            run(&root, &["config", "user.name", "Test User"]);
            run(&root, &["config", "user.email", "test@localhost"]);
        }
        let repo = Repo::discover(&root)
            .unwrap()
            .with_worktrees_home(&tmp.path().join("cache"))
            .unwrap();
        Fixture { tmp, repo }
    }

    pub(super) fn root(&self) -> &Path {
        self.repo.root()
    }

    pub(super) fn git(&self, args: &[&str]) -> String {
        run(self.root(), args)
    }

    pub(super) fn write(&self, path: &str, content: impl AsRef<[u8]>) {
        write(self.root(), path, content);
    }

    pub(super) fn read(&self, path: &str) -> Vec<u8> {
        fs::read(self.root().join(path)).unwrap()
    }

    /// Commits everything as a fixture identity (leaving the repository's config alone).
    pub(super) fn commit_all(&self, message: &str) -> String {
        self.git(&["add", "--all"]);
        git(self.root(), "test commit")
            .config("user.name=Fixture")
            .config("user.email=fixture@localhost")
            .args(["commit", "--quiet", "-m", message])
            .run()
            .unwrap();
        self.repo.head().unwrap()
    }

    pub(super) fn worktrees_dir(&self) -> PathBuf {
        self.repo.worktrees_dir().to_path_buf()
    }

    /// The registered worktrees other than the main one.
    pub(super) fn linked_worktrees(&self) -> Vec<PathBuf> {
        let mut all = self.repo.registered_worktrees().unwrap();
        all.remove(0);
        all
    }

    /// (work tree, index) as a comparable snapshot.
    pub(super) fn state(&self) -> (TreeFiles, String, String) {
        (
            files(self.root()),
            self.repo.status_porcelain().unwrap(),
            self.git(&["write-tree"]),
        )
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        TEST_ENV.with(|e| e.borrow_mut().clear());
    }
}

pub(super) fn run(dir: &Path, args: &[&str]) -> String {
    git(dir, "test").args(args).run_text().unwrap()
}

/// Commits what is staged in `dir` as a worker would, under its own name.
fn commit_as_worker(dir: &Path, message: &str) {
    run(
        dir,
        &[
            "-c",
            "user.name=w",
            "-c",
            "user.email=w@x",
            "commit",
            "-qm",
            message,
        ],
    );
}

pub(super) fn write(dir: &Path, path: &str, content: impl AsRef<[u8]>) {
    let full = dir.join(path);
    fs::create_dir_all(full.parent().unwrap()).unwrap();
    fs::write(full, content).unwrap();
}

pub(super) fn set_executable(path: &Path) {
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// Every file under `dir` outside `.git`: (content, executable).
pub(super) fn files(dir: &Path) -> TreeFiles {
    fn walk(base: &Path, dir: &Path, out: &mut TreeFiles) {
        for entry in fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_name() == ".git" {
                continue;
            }
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                walk(base, &path, out);
            } else {
                let rel = path
                    .strip_prefix(base)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned();
                let exec = meta.permissions().mode() & 0o111 != 0;
                out.insert(rel, (fs::read(&path).unwrap(), exec));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

pub(super) fn set(paths: &[&str]) -> BTreeSet<String> {
    paths.iter().map(std::string::ToString::to_string).collect()
}

pub(super) fn strings(paths: &[&str]) -> Vec<String> {
    paths.iter().map(std::string::ToString::to_string).collect()
}

pub(super) fn long_text(tag: &str) -> String {
    (1..=20).fold(String::new(), |mut s, i| {
        s.push_str(&format!("{tag} line {i}\n"));
        s
    })
}

#[test]
fn worktree_at_an_older_base_sees_that_base() {
    let f = Fixture::new();
    let first = f.repo.head().unwrap();
    f.write("mod.txt", "changed on the branch\n");
    let second = f.commit_all("second");
    let wt = f.repo.add_worktree(&first, "old").unwrap();
    assert_eq!(wt.path(), f.worktrees_dir().join("old"));
    assert_eq!(
        fs::read(wt.path().join("mod.txt")).unwrap(),
        b"one\ntwo\nthree\n"
    );
    assert_eq!(run(wt.path(), &["rev-parse", "HEAD"]), first);
    assert_eq!(f.repo.head().unwrap(), second, "the main HEAD did not move");
    assert_eq!(
        f.repo.status_porcelain().unwrap(),
        "",
        "the worktree is invisible"
    );
    let by_expr = f.repo.add_worktree("HEAD~1", "expr").unwrap();
    assert_eq!(run(by_expr.path(), &["rev-parse", "HEAD"]), first);
    assert!(matches!(
        f.repo.add_worktree("no-such-branch", "x"),
        Err(GitError::BadRevision { .. })
    ));
    for bad in ["", "..", "a/b", "-f"] {
        assert!(
            matches!(
                f.repo.add_worktree("HEAD", bad),
                Err(GitError::InvalidName { .. })
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn changed_between_names_each_path_that_differs_and_a_patch_reads_at_its_own_base() {
    let f = Fixture::new();
    let first = f.repo.head().unwrap();
    f.write("mod.txt", "changed on the branch\n");
    f.write("dir/new name.txt", "new\n");
    let second = f.commit_all("second");
    assert_eq!(
        f.repo.changed_between(&first, &second).unwrap(),
        strings(&["dir/new name.txt", "mod.txt"])
    );
    assert!(f.repo.changed_between(&second, &second).unwrap().is_empty());
    // A patch made at `first` that no longer applies at `HEAD` is still read at `first`.
    let patch = b"diff --git a/mod.txt b/mod.txt\n--- a/mod.txt\n+++ b/mod.txt\n@@ -1,3 +1,3 @@\n-one\n+ONE\n two\n three\n";
    assert!(f.repo.patch_changes(&patch[..]).is_err());
    assert_eq!(
        f.repo.patch_changes_at(&first, &patch[..]).unwrap().0,
        strings(&["mod.txt"])
    );
}

#[test]
fn changes_capture_everything_and_the_patch_reproduces_it() {
    let f = Fixture::new();
    f.write("ren.txt", long_text("renamed"));
    f.write("bin.dat", [0u8, 1, 2, 0, 255, 254, 0, 0]);
    let base = f.commit_all("more files");
    let wt = f.repo.add_worktree(&base, "w").unwrap();
    let w = wt.path();
    write(w, "mod.txt", "one\nTWO\nthree\n");
    write(w, "new/dir/added.txt", "brand new\n");
    write(w, "spaced name ü.txt", "unicode name\n");
    fs::remove_file(w.join("del.txt")).unwrap();
    fs::create_dir_all(w.join("moved")).unwrap();
    fs::rename(w.join("ren.txt"), w.join("moved/renamed.txt")).unwrap();
    write(w, "bin.dat", (0..=255u8).collect::<Vec<_>>());
    write(w, "new.bin", (0..=255u8).rev().collect::<Vec<_>>());
    set_executable(&w.join("script.sh"));
    write(w, "worker.log", "ignored\n");
    write(w, "build/out.o", "ignored too\n");

    let c = wt.changes().unwrap();
    let changed = [
        "bin.dat",
        "del.txt",
        "mod.txt",
        "moved/renamed.txt",
        "new.bin",
        "new/dir/added.txt",
        "ren.txt",
        "script.sh",
        "spaced name ü.txt",
    ];
    assert_eq!(c.changed, set(&changed));
    let present: Vec<&str> = changed
        .into_iter()
        .filter(|p| !["del.txt", "ren.txt"].contains(p))
        .collect();
    assert_eq!(c.present, set(&present));
    // git wrote the patch into a file of its own: it never passes through memory whole.
    assert!(matches!(c.patch, super::Patch::File(_)), "{:?}", c.patch);
    let patch = String::from_utf8_lossy(&c.patch.read_to_vec()).into_owned();
    assert!(patch.contains("rename from ren.txt"), "{patch}");
    assert!(patch.contains("GIT binary patch"), "{patch}");
    assert!(patch.contains("new mode 100755"), "{patch}");
    assert!(!patch.contains("worker.log") && !patch.contains("out.o"));
    assert_eq!(
        f.repo.status_porcelain().unwrap(),
        "",
        "main tree untouched"
    );

    f.repo.check_patch(&c.patch).unwrap();
    f.repo.apply_patch(&c.patch).unwrap();
    let mut expected = files(w);
    expected.remove("worker.log");
    expected.remove("build/out.o");
    assert_eq!(files(f.root()), expected, "byte for byte, modes included");
    assert_eq!(
        f.git(&["write-tree"]),
        run(w, &["write-tree"]),
        "same index"
    );
    let status = f.repo.status_porcelain().unwrap();
    assert!(
        status.lines().all(|l| l.as_bytes()[1] == b' '),
        "all staged: {status}"
    );
}

#[test]
fn no_changes_is_an_empty_patch() {
    let f = Fixture::new();
    let wt = f.repo.add_worktree("HEAD", "idle").unwrap();
    write(wt.path(), "only.log", "ignored\n");
    let c = wt.changes().unwrap();
    assert!(c.patch.is_empty());
    assert!(c.changed.is_empty() && c.present.is_empty());
    f.repo.check_patch(&c.patch).unwrap();
    f.repo.apply_patch(&c.patch).unwrap();
    assert_eq!(f.repo.commit("nothing", &[]).unwrap(), None);
}

#[test]
fn without_drops_paths() {
    let f = Fixture::new();
    let wt = f.repo.add_worktree("HEAD", "w").unwrap();
    write(wt.path(), ".design/plan.json", "{\"tasks\": [\"mine\"]}\n");
    write(wt.path(), ".dagexec/logs/w.txt", "worker log\n");
    write(wt.path(), "src/lib.rs", "pub fn f() {}\n");
    let c = wt.changes().unwrap();
    assert_eq!(
        c.changed,
        set(&[".dagexec/logs/w.txt", ".design/plan.json", "src/lib.rs"])
    );

    let d = c
        .without(&[".design/plan.json", ".dagexec/logs/w.txt"])
        .unwrap();
    assert_eq!(d.changed, set(&["src/lib.rs"]));
    assert_eq!(d.present, set(&["src/lib.rs"]));
    let patch = String::from_utf8_lossy(&d.patch.read_to_vec()).into_owned();
    assert!(
        !patch.contains("plan.json") && !patch.contains("w.txt"),
        "{patch}"
    );
    assert_eq!(c.changed.len(), 3, "the original is unchanged");
    assert_eq!(
        c.without(&["./.dagexec/"]).unwrap().changed.len(),
        2,
        "a directory"
    );
    assert_eq!(
        d.without(&["src/lib.rs"]).unwrap().changed,
        set(&[]),
        "cumulative"
    );
    // Paths nothing changed under (not even under another case) leave the changes as they
    // are; a path under another case is diffed again.
    let same = d.without(&["src/lib", "src/lib.rs/x", "docs"]).unwrap();
    assert_eq!(
        (same.patch.read_to_vec(), &same.changed),
        (d.patch.read_to_vec(), &d.changed)
    );
    assert_eq!(
        d.without(&["SRC/LIB.RS"]).unwrap().changed,
        d.changed,
        "git's own pathspec decides under another case"
    );

    f.repo.apply_patch(&d.patch).unwrap();
    assert_eq!(f.read(".design/plan.json"), b"{\"tasks\": []}\n");
    assert_eq!(f.read("src/lib.rs"), b"pub fn f() {}\n");
    assert!(!f.root().join(".dagexec").exists());
}

#[test]
fn disjoint_patches_both_apply() {
    let f = Fixture::new();
    let w1 = f.repo.add_worktree("HEAD", "one").unwrap();
    let w2 = f.repo.add_worktree("HEAD", "two").unwrap();
    write(w1.path(), "mod.txt", "one\ntwo\nthree\nfour\n");
    write(w2.path(), "keep.txt", "touched\n");
    write(w2.path(), "added.txt", "added\n");
    let (c1, c2) = (w1.changes().unwrap(), w2.changes().unwrap());
    f.repo.check_patch(&c1.patch).unwrap();
    f.repo.apply_patch(&c1.patch).unwrap();
    f.repo.check_patch(&c2.patch).unwrap();
    f.repo.apply_patch(&c2.patch).unwrap();
    assert_eq!(f.read("mod.txt"), b"one\ntwo\nthree\nfour\n");
    assert_eq!(f.read("keep.txt"), b"touched\n");
    assert_eq!(f.read("added.txt"), b"added\n");
}

#[test]
fn overlapping_patches_conflict_and_leave_the_tree_alone() {
    let f = Fixture::new();
    let w1 = f.repo.add_worktree("HEAD", "one").unwrap();
    let w2 = f.repo.add_worktree("HEAD", "two").unwrap();
    write(w1.path(), "mod.txt", "one\nTWO\nthree\n");
    write(w2.path(), "mod.txt", "one\n2\nthree\n");
    write(w2.path(), "other.txt", "would be added\n");
    let (c1, c2) = (w1.changes().unwrap(), w2.changes().unwrap());
    f.repo.apply_patch(&c1.patch).unwrap();
    let before = f.state();

    let err = f.repo.check_patch(&c2.patch).unwrap_err();
    assert_eq!(err.paths, ["mod.txt"]);
    let root = f.root().display().to_string();
    assert!(
        err.message
            .starts_with(&format!("git apply --check failed in {root}: ")),
        "{err}"
    );
    assert!(err.message.contains("patch failed: mod.txt:1"), "{err}");

    let err = f.repo.apply_patch(&c2.patch).unwrap_err();
    assert_eq!(err.paths, ["mod.txt"]);
    assert_eq!(f.state(), before, "nothing changed");
    assert!(!f.root().join("other.txt").exists());
}

#[test]
fn prune_removes_crashed_and_left_over_worktrees() {
    let f = Fixture::new();
    let crashed = f.repo.add_worktree("HEAD", "crashed").unwrap();
    let crashed_path = crashed.path().to_owned();
    write(&crashed_path, "dirty.txt", "work in progress\n");
    std::mem::forget(crashed);
    let ghost = f.repo.add_worktree("HEAD", "ghost").unwrap();
    fs::remove_dir_all(ghost.path()).unwrap(); // registered, directory gone
    std::mem::forget(ghost);
    let leftover = f.worktrees_dir().join("leftover");
    write(&leftover, "sub/file.txt", "not a worktree\n");
    assert_eq!(f.linked_worktrees().len(), 2);

    assert_eq!(f.repo.prune_worktrees().unwrap(), 3);
    assert!(!crashed_path.exists() && !leftover.exists());
    assert!(f.linked_worktrees().is_empty());
    assert_eq!(
        f.git(&["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
    assert_eq!(f.repo.prune_worktrees().unwrap(), 0);
    assert_eq!(f.repo.status_porcelain().unwrap(), "");
}

#[test]
fn prune_finds_the_worktrees_of_an_earlier_location_and_of_older_versions() {
    let f = Fixture::new();
    // A run with another home (the setting changed since) was killed: its worktree is left.
    let first_home = f.tmp.path().join("first-home");
    let first = f.repo.clone().with_worktrees_home(&first_home).unwrap();
    let crashed = first.add_worktree("HEAD", "slot-a-0").unwrap();
    let crashed_path = crashed.path().to_owned();
    std::mem::forget(crashed);
    write(
        &first.worktrees_dir().join("unrelated"),
        "keep.txt",
        "not dagexec's\n",
    );
    // An older version's worktree inside .git.
    let legacy = f.root().join(".git/dagexec/worktrees/slot-0");
    f.git(&[
        "worktree",
        "add",
        "--quiet",
        "--detach",
        &legacy.to_string_lossy(),
        "HEAD",
    ]);
    // Folders of other repositories in the home: one gone, one alive.
    let gone = f
        .worktrees_dir()
        .parent()
        .unwrap()
        .join("gone-0000000000000000");
    write(&gone, "repository", "/no/such/repository/.git\n");
    write(&gone, "slot-x-0/f.txt", "left\n");
    let alive = f
        .worktrees_dir()
        .parent()
        .unwrap()
        .join("alive-0000000000000000");
    write(&alive, "repository", slots::marker_text(f.tmp.path()));
    write(&alive, "slot-y-0/f.txt", "in use\n");
    assert_eq!(f.linked_worktrees().len(), 2);

    assert_eq!(f.repo.prune_worktrees().unwrap(), 2);
    assert!(f.linked_worktrees().is_empty());
    assert!(!crashed_path.exists() && !legacy.exists());
    // Only what dagexec makes is deleted from a folder found through the record.
    assert!(first.worktrees_dir().join("unrelated/keep.txt").exists());
    assert!(!gone.exists(), "the folder of a repository that is gone");
    assert!(
        alive.join("slot-y-0/f.txt").exists(),
        "another repository's slots"
    );
    // The end of a run removes the folder and its record.
    let wt = f.repo.add_worktree("HEAD", "slot-b-0").unwrap();
    assert_eq!(
        slots::recorded(f.repo.common_dir()).as_deref(),
        Some(f.worktrees_dir().as_path())
    );
    wt.remove().unwrap();
    f.repo.remove_worktrees_dir().unwrap();
    assert!(!f.worktrees_dir().exists());
    assert_eq!(slots::recorded(f.repo.common_dir()), None);
}

#[test]
fn a_home_inside_the_work_tree_is_refused_one_inside_git_is_not() {
    let f = Fixture::new();
    for inside in ["wt", "sub/dir", "."] {
        let err = f
            .repo
            .clone()
            .with_worktrees_home(Path::new(inside))
            .unwrap_err();
        assert!(
            matches!(err, GitError::WorktreesInWorkTree { .. }),
            "{inside}: {err}"
        );
    }
    let in_git = f
        .repo
        .clone()
        .with_worktrees_home(Path::new(".git/wt"))
        .unwrap();
    let wt = in_git.add_worktree("HEAD", "w").unwrap();
    assert!(wt.path().starts_with(f.repo.common_dir()));
    assert!(
        f.repo
            .clone()
            .with_worktrees_home(Path::new("../beside"))
            .is_ok()
    );
}

#[test]
fn add_worktree_replaces_a_stale_one_of_the_same_name() {
    let f = Fixture::new();
    let stale = f.repo.add_worktree("HEAD", "t").unwrap();
    write(stale.path(), "dirty.txt", "from the crashed run\n");
    std::mem::forget(stale);
    write(&f.worktrees_dir().join("u"), "junk.txt", "left over\n");

    let t = f.repo.add_worktree("HEAD", "t").unwrap();
    assert!(!t.path().join("dirty.txt").exists());
    assert_eq!(fs::read(t.path().join("keep.txt")).unwrap(), b"untouched\n");
    let u = f.repo.add_worktree("HEAD", "u").unwrap();
    assert!(!u.path().join("junk.txt").exists());
    assert_eq!(f.linked_worktrees().len(), 2);
}

#[test]
fn drop_and_remove_delete_the_worktree() {
    let f = Fixture::new();
    let dropped_path = {
        let wt = f.repo.add_worktree("HEAD", "dropped").unwrap();
        write(wt.path(), "dirty.txt", "x\n");
        wt.path().to_owned()
    };
    assert!(!dropped_path.exists());
    assert!(f.linked_worktrees().is_empty());

    let wt = f.repo.add_worktree("HEAD", "removed").unwrap();
    let path = wt.path().to_owned();
    // A change to leave out, so `without` must diff the (gone) worktree again.
    write(wt.path(), "x", "x\n");
    let c = wt.changes().unwrap();
    wt.remove().unwrap();
    assert!(!path.exists());
    assert!(f.linked_worktrees().is_empty());
    let err = c.without(&["x"]).unwrap_err();
    assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");

    // A worktree whose directory vanished under it is still unregistered.
    let wt = f.repo.add_worktree("HEAD", "vanished").unwrap();
    fs::remove_dir_all(wt.path()).unwrap();
    wt.remove().unwrap();
    assert!(f.linked_worktrees().is_empty());
}

#[test]
fn reset_to_makes_a_used_worktree_a_clean_checkout_of_another_base() {
    let f = Fixture::new();
    f.write(".gitignore", "*.log\n");
    f.write("a.txt", "one\n");
    let first = f.commit_all("first");
    f.write("a.txt", "two\n");
    f.write("b.txt", "new in second\n");
    let second = f.commit_all("second");
    let mut wt = f.repo.add_worktree(&first, "pooled").unwrap();
    // A worker's leftovers: a modified file, a new one, an ignored one, a staged change, a
    // commit of its own.
    write(wt.path(), "a.txt", "worker\n");
    write(wt.path(), "untracked.txt", "x\n");
    write(wt.path(), "build.log", "x\n");
    run(wt.path(), &["add", "a.txt"]);
    commit_as_worker(wt.path(), "worker's own");
    write(wt.path(), "later.txt", "x\n");
    assert!(wt.differs_from_base().unwrap().is_some());
    wt.reset_to(&second).unwrap();
    assert_eq!(wt.differs_from_base().unwrap(), None);
    // An ignored file written after the reset (by a process still at work there) is seen.
    write(wt.path(), "late.log", "x\n");
    let why = wt.differs_from_base().unwrap().unwrap();
    assert!(why.contains("late.log"), "{why}");
    fs::remove_file(wt.path().join("late.log")).unwrap();
    // Moved to a new path, it is the same tree, registered there.
    let old = wt.path().to_owned();
    wt.move_to("moved").unwrap();
    assert!(!old.exists() && wt.path() == f.worktrees_dir().join("moved"));
    assert_eq!(f.linked_worktrees(), [wt.path().to_owned()]);
    let want = files(f.root());
    let got = files(wt.path());
    assert_eq!(
        got, want,
        "the worktree is the second commit's tree, nothing else"
    );
    let c = wt.changes().unwrap();
    assert!(
        c.patch.is_empty() && c.changed.is_empty(),
        "{:?}",
        c.changed
    );
}

#[test]
fn changes_name_links_with_targets_and_leave_git_dirs_under_another_case_unstaged() {
    let f = Fixture::new();
    let base = f.repo.head().unwrap();
    let wt = f.repo.add_worktree(&base, "links").unwrap();
    let w = wt.path();
    std::os::unix::fs::symlink("/etc/passwd", w.join("out")).unwrap();
    std::os::unix::fs::symlink("../mod.txt", w.join(".design/plan.json.tmp")).unwrap();
    write(w, ".GIT/hooks/pre-commit", "#!/bin/sh\n");
    write(w, "sub/.Git/config", "[core]\n");
    write(w, "other/.git", "gitdir: /nowhere\n");
    write(w, "ok.txt", "fine\n");
    let c = wt
        .changes()
        .expect("a .GIT directory does not make the changes fail");
    // `other/.git` makes `other/` a repository git cannot read: git skips it, nothing to refuse.
    assert_eq!(c.forbidden, strings(&[".GIT", "sub/.Git"]));
    assert_eq!(c.changed, set(&[".design/plan.json.tmp", "ok.txt", "out"]));
    let links: Vec<(&str, &str)> = c
        .links
        .iter()
        .map(|l| (l.path.as_str(), l.target.as_str()))
        .collect();
    assert_eq!(
        links,
        [
            (".design/plan.json.tmp", "../mod.txt"),
            ("out", "/etc/passwd")
        ]
    );
    // The same facts from the patch alone, as finalize sees it.
    let (paths, from_patch) = f.repo.patch_changes(&c.patch).unwrap();
    assert_eq!(paths, strings(&[".design/plan.json.tmp", "ok.txt", "out"]));
    assert_eq!(from_patch, c.links);
    // A forged patch writing `.GIT/config` is named, not "does not apply".
    let forged = b"diff --git a/.GIT/config b/.GIT/config\nnew file mode 100644\n--- /dev/null\n+++ b/.GIT/config\n@@ -0,0 +1 @@\n+x\n";
    assert_eq!(
        f.repo.patch_changes(forged).unwrap().0,
        strings(&[".GIT/config"])
    );
    let without = c.without(&["out"]).unwrap();
    assert_eq!(without.forbidden, c.forbidden);
    assert_eq!(without.links.len(), 1);
}

#[test]
fn paths_into_git_are_refused_however_written() {
    // (Resume no longer restores or deletes declared files at all; a round's own paths are
    // brought to its commit without following links: see `round::tests`.)
    let f = Fixture::new();
    for bad in [".GIT/config", "sub/.Git/hooks/x", "src//../x"] {
        assert!(
            matches!(f.repo.is_committed(bad), Err(GitError::InvalidPath { .. })),
            "{bad:?}"
        );
    }
}

#[test]
fn tree_changes_take_commits_and_uncommitted_work_without_touching_the_index() {
    let f = Fixture::new();
    let base = f.repo.head().unwrap();
    let wt = f.repo.add_worktree(&base, "worker").unwrap();
    // Task 1 committed; task 2's work staged, modified, untracked; an ignored build file.
    write(wt.path(), "one.txt", "task 1\n");
    run(wt.path(), &["add", "one.txt"]);
    commit_as_worker(wt.path(), "t1");
    write(wt.path(), "staged.txt", "staged\n");
    run(wt.path(), &["add", "staged.txt"]);
    write(wt.path(), "mod.txt", "changed, not staged\n");
    write(wt.path(), "new/untracked.txt", "untracked\n");
    write(wt.path(), "build/out.bin", "ignored\n");
    write(wt.path(), ".design/worker-0.log", "log\n");
    let index = run(wt.path(), &["rev-parse", "--git-path", "index"]);
    let index = wt.path().join(index.trim());
    // (status may refresh the index: before the bytes are taken.)
    let status_before = run(wt.path(), &["status", "--porcelain"]);
    let before = fs::read(&index).unwrap();

    let patch = f
        .repo
        .tree_changes(wt.path(), &base, &[".design/worker-0.log".to_string()])
        .unwrap();
    assert_eq!(
        fs::read(&index).unwrap(),
        before,
        "the worker's index untouched"
    );
    assert_eq!(run(wt.path(), &["status", "--porcelain"]), status_before);
    assert!(
        f.repo
            .common_dir()
            .join("dagexec")
            .read_dir()
            .unwrap()
            .all(|e| !e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("snapshot-")),
        "the temporary index is gone"
    );
    // Applied to a fresh tree at the base, it is the worker's tree less the ignored and
    // excluded files.
    let fresh = f.repo.add_worktree(&base, "fresh").unwrap();
    fresh.apply(&patch).unwrap();
    for (path, text) in [
        ("one.txt", "task 1\n"),
        ("staged.txt", "staged\n"),
        ("mod.txt", "changed, not staged\n"),
        ("new/untracked.txt", "untracked\n"),
    ] {
        assert_eq!(
            fs::read_to_string(fresh.path().join(path)).unwrap(),
            text,
            "{path}"
        );
    }
    assert!(!fresh.path().join("build/out.bin").exists());
    assert!(!fresh.path().join(".design/worker-0.log").exists());
}

/// The cap on a change counts what differs from the base, as the change does: a worker that
/// commits its oversized file in its worktree is refused as one that leaves it uncommitted.
#[test]
fn a_change_over_the_cap_is_refused_when_the_worker_committed_it_too() {
    let f = Fixture::new();
    let base = f.repo.head().unwrap();
    let wt = f.repo.add_worktree(&base, "big").unwrap();
    // Sparse: 101 MiB long, no disk.
    let big = fs::File::create(wt.path().join("big.bin")).unwrap();
    big.set_len(101 << 20).unwrap();
    run(wt.path(), &["add", "big.bin"]);
    commit_as_worker(wt.path(), "a large output");
    let why = wt.changes_within().unwrap().unwrap_err();
    assert!(
        why.starts_with("refused: its added and changed files hold 101.0 MiB (big.bin 101.0 MiB)"),
        "{why}"
    );
}
