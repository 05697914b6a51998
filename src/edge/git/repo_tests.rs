//! The repository edge against real repositories: commits stage exactly what they are given,
//! discovery and errors, and hostile configuration, hooks and file names. The
//! fixtures are in `tests.rs`.

use std::fs;

use super::tests::*;
use super::*;

#[test]
fn commit_stages_only_the_given_paths() {
    let f = Fixture::new();
    f.write("mod.txt", "committed\n");
    f.write("keep.txt", "dirty, not committed\n");
    let message = "Round 1: tasks 1, 2\n\n# not a comment\nünïcödé ✓";
    let sha = f
        .repo
        .commit(message, &strings(&["mod.txt"]))
        .unwrap()
        .unwrap();
    assert_eq!(sha.len(), 40);
    assert_eq!(f.repo.head().unwrap(), sha);
    assert_eq!(
        f.git(&["show", "--name-only", "--format=", &sha]),
        "mod.txt"
    );
    assert_eq!(f.git(&["log", "-1", "--format=%B"]), message);
    assert_eq!(f.repo.status_porcelain().unwrap(), " M keep.txt\n");
    assert_eq!(
        f.repo.commit("again", &strings(&["mod.txt"])).unwrap(),
        None
    );

    // Deletions are staged; a path that never existed and an ignored file are skipped.
    fs::remove_file(f.root().join("del.txt")).unwrap();
    f.write("debug.log", "ignored\n");
    let long = "x".repeat(200_000);
    let paths = strings(&["del.txt", "never.txt", "debug.log"]);
    f.repo.commit(&long, &paths).unwrap().unwrap();
    assert_eq!(
        f.git(&["ls-tree", "HEAD", "--", "del.txt", "debug.log"]),
        ""
    );
    assert_eq!(f.git(&["log", "-1", "--format=%B"]), long);
    assert_eq!(f.repo.status_porcelain().unwrap(), " M keep.txt\n");

    for bad in ["/etc/passwd", "../x", "a/../../x", "", ".", ".git/config"] {
        assert!(
            matches!(
                f.repo.commit("bad", &strings(&[bad])),
                Err(GitError::InvalidPath { .. })
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn commit_commits_what_apply_staged() {
    let f = Fixture::new();
    let wt = f.repo.add_worktree("HEAD", "w").unwrap();
    write(wt.path(), "mod.txt", "worker\n");
    write(wt.path(), "new.txt", "new\n");
    let c = wt.changes().unwrap();
    f.repo.apply_patch(&c.patch).unwrap();
    let paths: Vec<String> = c.changed.iter().cloned().collect();
    let sha = f.repo.commit("round", &paths).unwrap().unwrap();
    assert_eq!(
        f.git(&["show", "--name-only", "--format=", &sha]),
        "mod.txt\nnew.txt"
    );
    assert_eq!(f.repo.status_porcelain().unwrap(), "");
    assert!(f.repo.is_committed("new.txt").unwrap());
}

/// `EMAIL` is an address git itself takes when none is configured: the fallback identity
/// fills in what neither the configuration nor the environment gives, never more.
#[test]
fn commit_takes_the_email_the_environment_gives_before_the_fallback() {
    let f = Fixture::empty(false);
    super::cmd::TEST_ENV.with(|e| {
        e.borrow_mut()
            .push(("EMAIL".into(), Some("me@example.com".into())));
    });
    f.write("a.txt", "first\n");
    f.repo
        .commit("first", &strings(&["a.txt"]))
        .unwrap()
        .unwrap();
    assert_eq!(
        f.git(&["log", "-1", "--format=%an <%ae>|%cn <%ce>"]),
        "dagexec <me@example.com>|dagexec <me@example.com>"
    );
}

#[test]
fn commit_without_a_configured_identity_uses_the_fallback() {
    let f = Fixture::empty(false);
    assert!(!f.git(&["config", "--list"]).contains("user."));
    f.write("a.txt", "first\n");
    let sha = f
        .repo
        .commit("first", &strings(&["a.txt"]))
        .unwrap()
        .unwrap();
    assert_eq!(f.repo.head().unwrap(), sha, "a root commit");
    assert_eq!(
        f.git(&["log", "-1", "--format=%an <%ae>|%cn <%ce>"]),
        "dagexec <dagexec@localhost>|dagexec <dagexec@localhost>"
    );

    let g = Fixture::new();
    g.write("mod.txt", "x\n");
    g.repo
        .commit("mine", &strings(&["mod.txt"]))
        .unwrap()
        .unwrap();
    assert_eq!(
        g.git(&["log", "-1", "--format=%an <%ae>|%cn <%ce>"]),
        "Test User <test@localhost>|Test User <test@localhost>"
    );
}

#[test]
fn is_committed_cases() {
    let f = Fixture::new();
    f.write("mod.txt", "unstaged change\n");
    f.write("keep.txt", "staged change\n");
    f.git(&["add", "keep.txt"]);
    fs::remove_file(f.root().join("del.txt")).unwrap();
    f.write("untracked.txt", "new\n");
    assert!(f.repo.is_committed("script.sh").unwrap());
    assert!(f.repo.is_committed(".design/plan.json").unwrap());
    assert!(f.repo.is_committed("./.design//plan.json").unwrap());
    for path in [
        "mod.txt",
        "keep.txt",
        "del.txt",
        "untracked.txt",
        "never.txt",
    ] {
        assert!(!f.repo.is_committed(path).unwrap(), "{path}");
    }
}

#[test]
fn head_on_an_empty_repository_says_so() {
    let f = Fixture::empty(true);
    let err = f.repo.head().unwrap_err();
    assert!(matches!(err, GitError::NoCommits { .. }));
    assert!(
        err.to_string()
            .contains("the repository has no commits; commit something first"),
        "{err}"
    );
    assert!(!f.repo.is_committed("a.txt").unwrap());
    assert!(matches!(
        f.repo.add_worktree("HEAD", "w"),
        Err(GitError::BadRevision { .. })
    ));
}

#[test]
fn discover_finds_the_top_or_says_not_a_repository() {
    let f = Fixture::new();
    fs::create_dir_all(f.root().join("deep/er")).unwrap();
    let repo = Repo::discover(&f.root().join("deep/er")).unwrap();
    assert_eq!(repo.root(), f.root());

    let outside = f.tmp.path().join("outside");
    fs::create_dir(&outside).unwrap();
    let err = Repo::discover(&outside).unwrap_err();
    assert!(matches!(err, GitError::NotARepository { .. }), "{err:?}");
    assert!(err.to_string().contains("not a git repository"), "{err}");
    assert!(matches!(
        Repo::discover(&f.tmp.path().join("missing")),
        Err(GitError::Io { .. })
    ));
}

/// One `rev-parse` answers both questions, a path a line; a path holding a line end (which
/// could make two answers look like others) is asked for on its own, never misread.
#[test]
fn discover_reads_a_path_holding_a_line_end_whole() {
    let f = Fixture::new();
    for name in ["two\nlines", "ends\n", "\nstarts"] {
        let linked = f.tmp.path().join(name).join("linked\ntree");
        f.git(&[
            "worktree",
            "add",
            "-q",
            "--detach",
            linked.to_str().unwrap(),
        ]);
        let repo = Repo::discover(&linked).unwrap();
        assert_eq!(repo.root(), linked.canonicalize().unwrap(), "{name:?}");
        assert_eq!(
            repo.common_dir(),
            f.root().join(".git").canonicalize().unwrap(),
            "{name:?}"
        );
    }
}

#[test]
fn errors_name_the_command_the_directory_and_stderr() {
    let f = Fixture::new();
    let err = git(f.root(), "frobnicate")
        .arg("frobnicate")
        .run()
        .unwrap_err();
    let root = f.root().display();
    assert!(
        err.to_string().starts_with(&format!(
            "git frobnicate failed in {root}: git: 'frobnicate' is not a git command"
        )),
        "{err}"
    );
}

#[test]
fn hostile_configuration_and_hooks_do_not_get_in_the_way() {
    let f = Fixture::new();
    let hooks = f.tmp.path().join("hooks");
    for hook in [
        "pre-commit",
        "commit-msg",
        "post-checkout",
        "post-commit",
        "reference-transaction",
    ] {
        write(&hooks, hook, "#!/bin/sh\necho hook ran >&2\nexit 1\n");
        set_executable(&hooks.join(hook));
    }
    for (key, value) in [
        ("core.hooksPath", hooks.to_str().unwrap()),
        ("commit.gpgsign", "true"),
        ("user.signingkey", "no-such-key"),
        ("commit.cleanup", "strip"),
        ("commit.template", "/nonexistent/template"),
        ("core.editor", "false"),
        ("diff.noprefix", "true"),
        ("diff.mnemonicPrefix", "true"),
        ("diff.external", "false"),
        ("diff.renames", "copies"),
        ("diff.submodule", "log"),
        ("color.ui", "always"),
        ("apply.whitespace", "error"),
        ("apply.ignoreWhitespace", "change"),
        ("core.whitespace", "trailing-space,space-before-tab"),
        ("status.showUntrackedFiles", "no"),
        ("i18n.commitEncoding", "ISO-8859-1"),
    ] {
        f.git(&["config", key, value]);
    }
    let wt = f.repo.add_worktree("HEAD", "w").unwrap();
    write(wt.path(), "mod.txt", "one \ntwo\t \nthree\n");
    write(wt.path(), "copy.txt", "one\ntwo\nthree\n");
    let c = wt.changes().unwrap();
    assert_eq!(c.changed, set(&["copy.txt", "mod.txt"]));
    let patch = String::from_utf8_lossy(&c.patch.read_to_vec()).into_owned();
    assert!(patch.contains("diff --git a/mod.txt b/mod.txt"), "{patch}");
    assert!(!patch.contains('\u{1b}'), "no colour");
    f.repo.apply_patch(&c.patch).unwrap();
    assert_eq!(
        f.read("mod.txt"),
        b"one \ntwo\t \nthree\n",
        "whitespace untouched"
    );
    let message = "# round 1\nü";
    let sha = f.repo.commit(message, &strings(&["mod.txt", "copy.txt"]));
    let sha = sha.unwrap().unwrap();
    let object = f.git(&["cat-file", "commit", &sha]);
    assert!(
        object.ends_with("\n\n# round 1\nü"),
        "kept verbatim, UTF-8: {object}"
    );
    assert!(
        !object.contains("gpgsig") && !object.contains("encoding"),
        "{object}"
    );
    assert!(f.repo.is_committed("copy.txt").unwrap());
    wt.remove().unwrap();
}

#[test]
fn odd_file_names_are_taken_literally() {
    let f = Fixture::new();
    for name in [":odd", "st*r", "stXr", "-dash", "spa ce", "ünï"] {
        f.write(name, "v1\n");
    }
    f.commit_all("odd names");
    f.write("st*r", "v2\n");
    f.write("stXr", "v2\n");
    let sha = f.repo.commit("star", &strings(&["st*r"])).unwrap().unwrap();
    assert_eq!(f.git(&["show", "--name-only", "--format=", &sha]), "st*r");
    assert!(f.repo.is_committed(":odd").unwrap());
    assert!(f.repo.is_committed("st*r").unwrap());
    assert!(!f.repo.is_committed("stXr").unwrap());
    f.git(&["checkout", "--", "stXr"]);
    assert_eq!(f.repo.status_porcelain().unwrap(), "");

    let wt = f.repo.add_worktree("HEAD", "odd").unwrap();
    for name in [":odd", "-dash", "ünï"] {
        write(wt.path(), name, "v3\n");
    }
    let c = wt.changes().unwrap();
    assert_eq!(c.changed, set(&["-dash", ":odd", "ünï"]));
    let d = c.without(&[":odd", "ünï"]).unwrap();
    assert_eq!(d.changed, set(&["-dash"]));
    f.repo.apply_patch(&d.patch).unwrap();
    assert_eq!(f.read("-dash"), b"v3\n");
    assert_eq!(f.read(":odd"), b"v1\n");
}

#[test]
fn history_is_read_at_a_commit_along_first_parents_and_by_the_last_change_of_a_path() {
    let f = Fixture::new();
    let first = f.repo.head().unwrap();
    f.git(&["mv", ".design/plan.json", ".design/plan.done.json"]);
    f.git(&["commit", "-qm", "archive"]);
    f.write("a.txt", "later\n");
    let last = f.commit_all("later");
    assert_eq!(
        f.repo.first_parents(10).unwrap(),
        [last.clone(), f.git(&["rev-parse", "HEAD~1"]), first.clone()]
    );
    assert_eq!(f.repo.first_parents(1).unwrap(), [last]);
    assert_eq!(
        f.repo
            .read_at(&first, ".design/plan.json")
            .unwrap()
            .as_deref(),
        Some(&b"{\"tasks\": []}\n"[..])
    );
    assert_eq!(f.repo.read_at("HEAD", ".design/plan.json").unwrap(), None);
    assert_eq!(f.repo.read_at("0000000", "a.txt").unwrap(), None);
    // The commit that removed the plan is the one that archived it.
    assert_eq!(
        f.repo.files_of_last_change(".design/plan.json").unwrap(),
        [".design/plan.done.json", ".design/plan.json"]
    );
    assert!(f.repo.files_of_last_change("never.txt").unwrap().is_empty());
}

/// A user's `log.showSignature` prints each signed commit's verification before the commit
/// in `git log`; the history dagexec reads back (the steering records, the plan's last
/// change) is read without it. The signature is made and verified by a stand-in for gpg.
#[test]
fn signed_commits_read_back_under_log_show_signature() {
    let f = Fixture::new();
    let gpg = f.tmp.path().join("gpg");
    write(
        f.tmp.path(),
        "gpg",
        "#!/bin/sh\ncase \"$*\" in\n*--verify*) echo 'gpg: Good signature from \"Someone\"' >&2; echo '[GNUPG:] GOODSIG 0 Someone';;\n*) cat >/dev/null; printf '\\n[GNUPG:] SIG_CREATED D 1 8 00 1 X\\n' >&2; printf -- '-----BEGIN PGP SIGNATURE-----\\n\\nZmFrZQ==\\n-----END PGP SIGNATURE-----\\n';;\nesac\n",
    );
    set_executable(&gpg);
    f.git(&["config", "gpg.program", gpg.to_str().unwrap()]);
    f.git(&["config", "user.signingkey", "X"]);
    f.write("a.txt", "a\n");
    f.git(&["add", "a.txt"]);
    f.git(&["commit", "-q", "-S", "-m", "steer\n\nDagexec-Steered: yes"]);
    let sha = f.git(&["rev-parse", "HEAD"]);
    assert!(f.git(&["cat-file", "commit", "HEAD"]).contains("gpgsig"));
    f.git(&["config", "log.showSignature", "true"]);
    // Plain `git log` (without dagexec's settings) shows the verification first.
    let plain = std::process::Command::new("git")
        .args(["log", "-1", "--format=%H"])
        .current_dir(f.root())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&plain.stdout).starts_with("gpg: Good signature"));
    let found = f.repo.commits_mentioning("Dagexec-Steered", None).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].sha, sha);
    assert_eq!(found[0].message, "steer\n\nDagexec-Steered: yes");
    assert_eq!(f.repo.files_of_last_change("a.txt").unwrap(), ["a.txt"]);
}

#[test]
fn the_history_before_the_first_commit_mentions_nothing_and_a_bad_range_is_an_error() {
    let empty = Fixture::empty(false);
    assert!(empty.repo.commits_mentioning("x", None).unwrap().is_empty());
    let f = Fixture::new();
    assert!(f.repo.commits_mentioning("x", None).unwrap().is_empty());
    let missing = "0123456789012345678901234567890123456789";
    let err = f.repo.commits_mentioning("x", Some(missing)).unwrap_err();
    assert!(err.to_string().contains("log"), "{err}");
}
