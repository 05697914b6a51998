//! The repository stands on its own: no test, benchmark or CI script reads a file beside the
//! repository (a user's clone and GitHub's CI have nothing there). `.ci/alone.sh` enforces the
//! same at run time by hiding the repository's siblings; this test catches the usual way such a
//! read is written, everywhere, even where `.ci/alone.sh` cannot hide anything.

use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            if ![
                "target",
                ".git",
                "tools",
                "node_modules",
                "fixtures",
                "snapshots",
            ]
            .contains(&name.as_str())
            {
                files(&path, out);
            }
        } else if [".rs", ".sh", ".py", ".yml", ".toml"]
            .iter()
            .any(|ext| name.ends_with(ext))
            || name == "run"
        {
            out.push(path);
        }
    }
}

/// The specification folder beside the repository, spelled so that this file does not match
/// its own search.
const SPEC: &str = concat!("sha", "red");

/// A path that leaves the repository from its root: the specification folder as a sibling,
/// `"/../x"` after
/// `CARGO_MANIFEST_DIR`, `join("..")` and the like.
fn escapes(line: &str) -> bool {
    let l = line.replace(' ', "");
    l.contains(&format!("../{SPEC}"))
        || l.contains(&format!("\"..\",\"{SPEC}\""))
        || (l.contains("CARGO_MANIFEST_DIR") && l.contains("\"/../"))
        || (l.contains("manifest()") && l.contains("join(\"..\")"))
}

#[test]
fn nothing_reads_beside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    for dir in ["src", "tests", "bench", ".ci", "scripts", ".github"] {
        if root.join(dir).is_dir() {
            files(&root.join(dir), &mut all);
        }
    }
    all.push(root.join("action.yml"));
    let this = root.join("tests/it/self_contained.rs");
    let mut found = Vec::new();
    for path in all.iter().filter(|p| **p != this) {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            if escapes(line) {
                found.push(format!(
                    "{}:{}: {}",
                    path.strip_prefix(root).unwrap().display(),
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "these lines read outside the repository; copy what they need into tests/fixtures/:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_sees_the_usual_shapes() {
    assert!(escapes(&format!(
        r#"let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../{SPEC}/github/webhooks/");"#
    )));
    assert!(escapes(&format!(r#"manifest().join("../{SPEC}/plans")"#)));
    assert!(escapes(&format!(
        r#"os.path.join(here, "..", "{SPEC}", "tools")"#
    )));
    assert!(!escapes(
        r#"concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/github/")"#
    ));
}
