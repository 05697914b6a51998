//! The Action's git edge against real repositories: a patch made in one checkout applies in
//! another byte for byte (binary files, renames, deletions, new files, modes), its paths are
//! read back, and a push the remote rejects is fetched, rebased and pushed again.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::cmd::{TEST_ENV, git};
use super::*;

/// Each thread's git calls get an empty HOME and no system config.
fn isolate(tmp: &Path) {
    let home = tmp.join("home");
    fs::create_dir_all(&home).unwrap();
    TEST_ENV.with(|e| {
        *e.borrow_mut() = vec![
            ("HOME".into(), Some(home.into_os_string())),
            ("GIT_CONFIG_NOSYSTEM".into(), Some("1".into())),
            ("GIT_CONFIG_GLOBAL".into(), None),
        ];
    });
}

fn run(dir: &Path, args: &[&str]) -> String {
    let out = git(dir, "test")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .run()
        .unwrap();
    String::from_utf8(out).unwrap()
}

/// A bare remote with one commit, and two clones of it.
fn remote(tmp: &Path) -> (PathBuf, PathBuf, PathBuf) {
    isolate(tmp);
    let bare = tmp.join("origin.git");
    fs::create_dir_all(&bare).unwrap();
    run(&bare, &["init", "-q", "--bare"]);
    let seed = tmp.join("seed");
    fs::create_dir_all(&seed).unwrap();
    run(&seed, &["init", "-q"]);
    fs::write(seed.join("mod.txt"), "one\ntwo\n").unwrap();
    fs::write(
        seed.join("old-name.txt"),
        "moved\ncontent\nthat is long enough\n",
    )
    .unwrap();
    fs::write(seed.join("gone.txt"), "bye\n").unwrap();
    fs::write(seed.join("run.sh"), "#!/bin/sh\n").unwrap();
    run(&seed, &["add", "-A"]);
    run(&seed, &["commit", "-qm", "seed"]);
    run(&seed, &["remote", "add", "origin", bare.to_str().unwrap()]);
    run(&seed, &["push", "-q", "origin", "HEAD:refs/heads/main"]);
    let a = tmp.join("a");
    let b = tmp.join("b");
    for d in [&a, &b] {
        run(
            tmp,
            &["clone", "-q", bare.to_str().unwrap(), d.to_str().unwrap()],
        );
    }
    (bare, a, b)
}

fn tree(dir: &Path) -> Vec<(String, Vec<u8>, bool)> {
    let mut out = Vec::new();
    for e in walk(dir) {
        let rel = e.strip_prefix(dir).unwrap().to_string_lossy().to_string();
        let exec = fs::metadata(&e).unwrap().permissions().mode() & 0o111 != 0;
        out.push((rel, fs::read(&e).unwrap(), exec));
    }
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for e in fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if e.file_name() == ".git" {
            continue;
        }
        if p.is_dir() {
            v.extend(walk(&p));
        } else {
            v.push(p);
        }
    }
    v
}

#[test]
fn a_patch_round_trips_binary_files_renames_deletions_and_modes() {
    let tmp = tempfile::tempdir().unwrap();
    let (_bare, a, b) = remote(tmp.path());
    let base = run(&a, &["rev-parse", "HEAD"]).trim().to_string();
    // Every kind of change a worker can make.
    fs::write(a.join("mod.txt"), "one\nTWO\n").unwrap();
    fs::rename(a.join("old-name.txt"), a.join("new-name.txt")).unwrap();
    fs::remove_file(a.join("gone.txt")).unwrap();
    fs::create_dir_all(a.join("new/dir")).unwrap();
    fs::write(
        a.join("new/dir/blob.bin"),
        [0u8, 159, 146, 150, 255, 0, 10, 13],
    )
    .unwrap();
    fs::write(a.join("spaced name ü.txt"), "unicode\n").unwrap();
    fs::set_permissions(a.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    let changes = changes_in(&a, &base).unwrap();
    let paths = Repo::discover(&b)
        .unwrap()
        .patch_paths(&changes.patch)
        .unwrap();
    assert_eq!(
        paths,
        vec![
            "gone.txt",
            "mod.txt",
            "new-name.txt",
            "new/dir/blob.bin",
            "old-name.txt",
            "run.sh",
            "spaced name ü.txt"
        ]
    );
    assert_eq!(
        paths
            .iter()
            .cloned()
            .collect::<std::collections::BTreeSet<_>>(),
        changes.changed
    );
    let other = Repo::discover(&b).unwrap();
    other.check_patch(&changes.patch).unwrap();
    other.apply_patch(&changes.patch).unwrap();
    assert_eq!(tree(&a), tree(&b));
    assert!(other.patch_paths(b"").unwrap().is_empty());
    // Once HEAD has the changes, the patch no longer applies to it, and that is an error.
    run(&b, &["commit", "-qm", "applied"]);
    assert!(other.patch_paths(&changes.patch).is_err());
}

#[test]
fn a_rejected_push_is_fetched_rebased_and_pushed_again() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare, a, b) = remote(tmp.path());
    let repo = Repo::discover(&a).unwrap();
    let auth = RemoteAuth::token("ghs_secret");
    assert!(!format!("{auth:?}").contains("ghs_secret"));
    // The branch does not exist yet: the first push creates it.
    assert_eq!(repo.fetch_branch("dagexec/x", &auth).unwrap(), None);
    fs::write(a.join("mine.txt"), "round 1\n").unwrap();
    repo.commit("round 1", &["mine.txt".into()]).unwrap();
    assert_eq!(
        repo.push_head("dagexec/x", None, &auth).unwrap(),
        Pushed::Done
    );
    // Someone else pushes to it meanwhile.
    run(&b, &["fetch", "-q", "origin"]);
    run(&b, &["checkout", "-q", "-b", "x", "origin/dagexec/x"]);
    fs::write(b.join("theirs.txt"), "a human fix\n").unwrap();
    run(&b, &["add", "theirs.txt"]);
    run(&b, &["commit", "-qm", "human"]);
    run(&b, &["push", "-q", "origin", "HEAD:refs/heads/dagexec/x"]);
    fs::write(a.join("mine.txt"), "round 2\n").unwrap();
    repo.commit("round 2", &["mine.txt".into()]).unwrap();
    let Pushed::Rejected(why) = repo.push_head("dagexec/x", None, &auth).unwrap() else {
        panic!("a non-fast-forward push is rejected");
    };
    assert!(why.contains("rejected"), "{why}");
    let tip = repo.fetch_branch("dagexec/x", &auth).unwrap().unwrap();
    repo.rebase_onto("refs/remotes/origin/dagexec/x").unwrap();
    assert_eq!(
        repo.push_head("dagexec/x", None, &auth).unwrap(),
        Pushed::Done
    );
    let log = run(&bare, &["log", "--format=%s", "dagexec/x"]);
    assert_eq!(log, "round 2\nhuman\nround 1\nseed\n");
    assert_eq!(repo.rev_parse("HEAD~1").unwrap().unwrap(), tip);
    // And a commit only the remote has is fetched on demand.
    let fresh = Repo::discover(&b).unwrap();
    let head = repo.head().unwrap();
    fresh.ensure_commit(&head, &auth).unwrap();
    fresh.checkout_detached(&head).unwrap();
    assert_eq!(fresh.head().unwrap(), head);
}

/// Issue 31 §8: a record kept beside a branch — a commit on a given parent with one file
/// replaced, made without touching HEAD, the index or the work tree — is pushed to a ref of
/// its own, replaced only while it is what this writer last pushed, and fetched back.
#[test]
fn a_record_beside_the_branch_is_committed_aside_pushed_with_a_lease_and_fetched() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare, a, b) = remote(tmp.path());
    let repo = Repo::discover(&a).unwrap();
    let auth = RemoteAuth::default();
    let head = repo.head().unwrap();
    fs::write(a.join("mod.txt"), "edited, not committed\n").unwrap();
    let record = repo
        .commit_file_onto(&head, "mod.txt", b"recorded\n", "dagexec: starting task 0")
        .unwrap();
    assert_eq!(repo.head().unwrap(), head, "HEAD stays");
    assert_eq!(
        fs::read_to_string(a.join("mod.txt")).unwrap(),
        "edited, not committed\n",
        "the work tree stays"
    );
    assert_eq!(
        run(&a, &["diff", "--cached", "--name-only"]),
        "",
        "the index stays"
    );
    assert_eq!(run(&a, &["rev-parse", &format!("{record}^")]).trim(), head);
    assert_eq!(
        run(&a, &["show", &format!("{record}:mod.txt")]),
        "recorded\n"
    );
    assert_eq!(
        run(&a, &["diff", "--name-only", &head, &record]),
        "mod.txt\n",
        "nothing else changed"
    );
    let name = "refs/dagexec/starts/dagexec/x";
    assert_eq!(
        repo.push_ref(&record, name, None, &auth).unwrap(),
        Pushed::Done
    );
    // A second writer that believes the ref does not exist is refused.
    let other = repo
        .commit_file_onto(&head, "mod.txt", b"other\n", "another writer")
        .unwrap();
    assert!(matches!(
        repo.push_ref(&other, name, None, &auth).unwrap(),
        Pushed::Rejected(_)
    ));
    // Replaced (not a fast-forward) by the writer that pushed it last.
    assert_eq!(
        repo.push_ref(&other, name, Some(&record), &auth).unwrap(),
        Pushed::Done
    );
    assert_eq!(run(&bare, &["rev-parse", name]).trim(), other);
    let fresh = Repo::discover(&b).unwrap();
    assert_eq!(fresh.fetch_ref(name, &auth).unwrap(), Some(other));
    assert_eq!(
        fresh.fetch_ref("refs/dagexec/starts/none", &auth).unwrap(),
        None
    );
    assert_eq!(
        run(
            &bare,
            &["for-each-ref", "--format=%(refname)", "refs/heads"]
        ),
        "refs/heads/main\n",
        "no branch was made"
    );
}

/// A branch pushed with a ref of dagexec's own goes with it or not at all (`--atomic`): a
/// lease the ref no longer holds leaves the branch where it was, and a push that holds moves
/// both.
#[test]
fn a_branch_pushed_with_its_own_ref_moves_both_or_neither() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare, a, _) = remote(tmp.path());
    let repo = Repo::discover(&a).unwrap();
    let auth = RemoteAuth::default();
    let name = "refs/dagexec/settled/dagexec/x";
    let head = repo.head().unwrap();
    let first = repo.commit_file_onto(&head, "f", b"1\n", "one").unwrap();
    assert_eq!(
        repo.push_ref(&first, name, None, &auth).unwrap(),
        Pushed::Done
    );
    fs::write(a.join("mine.txt"), "round 1\n").unwrap();
    repo.commit("round 1", &["mine.txt".into()]).unwrap();
    let record = repo
        .commit_file_onto(&repo.head().unwrap(), "f", b"2\n", "two")
        .unwrap();
    let stale = OwnRef::new(&record, name, None);
    let Pushed::Rejected(why) = repo.push_head("dagexec/x", Some(&stale), &auth).unwrap() else {
        panic!("a lease that no longer holds is refused");
    };
    assert!(why.contains("rejected"), "{why}");
    let heads = ["for-each-ref", "--format=%(refname)", "refs/heads"];
    assert_eq!(
        run(&bare, &heads),
        "refs/heads/main\n",
        "no branch was made"
    );
    let held = OwnRef::new(&record, name, Some(&first));
    assert_eq!(
        repo.push_head("dagexec/x", Some(&held), &auth).unwrap(),
        Pushed::Done
    );
    assert_eq!(run(&bare, &["rev-parse", name]).trim(), record);
    let tip = run(&bare, &["rev-parse", "refs/heads/dagexec/x"]);
    assert_eq!(tip.trim(), repo.head().unwrap());
}
