//! The README's first command: `dagexec demo` runs a real plan with the bundled scripted worker
//! and no GitHub or API key, in a temporary directory or in a new one the user names (any
//! depth), and refuses a directory that holds something.

use crate::common;
use crate::common::local::exec;

use common::git;

#[test]
fn the_demo_runs_in_a_new_nested_directory_and_commits_round_by_round() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("not/yet/there");
    let out = exec(tmp.path(), &["demo", "--dir", dir.to_str().unwrap()]);
    let text = common::text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let log = git(&dir.join("repo"), &["log", "--format=%s"]);
    let rounds = log
        .lines()
        .filter(|l| l.starts_with("dagexec: round "))
        .count();
    assert!(rounds >= 2, "{log}");
    assert!(log.lines().any(|l| l.contains("completed")), "{log}");
    the_readme_shows_what_the_demo_prints(&text);

    // A directory that holds something is refused, and nothing in it is touched.
    let again = exec(tmp.path(), &["demo", "--dir", dir.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("exists and is not empty"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}

/// `--dir` relative to the current directory: the bundled worker is found from the task's
/// worktree too, and the demo completes.
#[test]
fn the_demo_runs_in_a_directory_named_relative_to_here() {
    let tmp = tempfile::tempdir().unwrap();
    let out = exec(tmp.path(), &["demo", "--dir", "rel/demo"]);
    let text = common::text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains("cannot open"), "{text}");
    let log = git(&tmp.path().join("rel/demo/repo"), &["log", "--format=%s"]);
    assert!(log.lines().any(|l| l.contains("completed")), "{log}");
}

/// README.md's "A run" shows the demo's output, cut where it says `…`: every line it shows is a
/// line the demo prints, times and commit ids aside (they differ run to run). Lines of a round
/// may come in another order (workers run in parallel), so each is looked up on its own.
fn the_readme_shows_what_the_demo_prints(output: &str) {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let run = readme
        .split("\n## A run\n")
        .nth(1)
        .and_then(|s| s.split("```\n").nth(1))
        .expect("README.md has a section \"A run\" with the demo's output in a code block");
    let vary = regex::Regex::new(r"\b(\d+ms|\d+s|[0-9a-f]{7,12})\b").unwrap();
    let printed: Vec<String> = output
        .lines()
        .map(|l| vary.replace_all(l, "#").into_owned())
        .collect();
    let shown: Vec<&str> = run.lines().filter(|l| !l.is_empty() && *l != "…").collect();
    assert!(shown.len() >= 10, "{run}");
    for line in shown {
        let line = vary.replace_all(line, "#");
        assert!(
            printed.contains(&line.to_string()),
            "README.md shows a line the demo does not print: {line}\n{output}"
        );
    }
}
