//! The README's first command: `dagexec demo` runs a real plan with the bundled scripted worker
//! and no GitHub or API key, in a temporary directory or in a new one the user names (any
//! depth), and refuses a directory that holds something.

use crate::common;

use common::{dagexec, git};

#[test]
fn the_demo_runs_in_a_new_nested_directory_and_commits_round_by_round() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("not/yet/there");
    let out = dagexec(tmp.path())
        .args(["demo", "--dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    let log = git(&dir.join("repo"), &["log", "--format=%s"]);
    let rounds = log
        .lines()
        .filter(|l| l.starts_with("dagexec: round "))
        .count();
    assert!(rounds >= 2, "{log}");
    assert!(log.lines().any(|l| l.contains("completed")), "{log}");

    // A directory that holds something is refused, and nothing in it is touched.
    let again = dagexec(tmp.path())
        .args(["demo", "--dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("exists and is not empty"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}
