//! The CI scripts honour `CARGO_TARGET_DIR` as cargo does: they find what cargo built through
//! `.ci/target-dir.sh` (cargo's own answer), never through a literal `target/`, so `.ci/run`
//! works for a developer who sets it globally. (`.ci/run` itself runs `.ci/release-path.sh`
//! with `CARGO_TARGET_DIR` set, end to end.)

use std::path::Path;
use std::process::Command;

use crate::common::manifest;

/// Where a line of shell names cargo's output by a fixed path: `target/…` (but the act tests'
/// own folder, `target/act`, which tests/it/action.rs fixes under the repository), or
/// `${CARGO_TARGET_DIR:-target}` (blind to a relative value's base and to .cargo/config).
fn fixed_target_path(line: &str) -> bool {
    let code = line.split(" #").next().unwrap_or("");
    if code.trim_start().starts_with('#') {
        return false;
    }
    let literal = code.match_indices("target/").any(|(i, _)| {
        let before = code[..i].chars().last();
        let word_start =
            before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '-' || c == '$'));
        word_start && !code[i..].starts_with("target/act/")
    });
    literal || code.contains(":-target}")
}

#[test]
fn the_ci_scripts_find_builds_where_cargo_puts_them() {
    let dir = manifest().join(".ci");
    let mut scripts = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_file() && (p.extension().is_some_and(|e| e == "sh") || p.ends_with("run")) {
            scripts.push(p);
        }
    }
    scripts.sort();
    assert!(scripts.iter().any(|p| p.ends_with("release-path.sh")));
    let mut found = Vec::new();
    for script in &scripts {
        let text = std::fs::read_to_string(script).unwrap();
        for (n, line) in text.lines().enumerate() {
            if fixed_target_path(line) {
                found.push(format!("{}:{}: {line}", script.display(), n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "these lines name cargo's output by a fixed path; use $(bash .ci/target-dir.sh):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_lines_that_broke_are_found() {
    // What release-path.sh and lint-init.sh said before they asked cargo.
    assert!(fixed_target_path(
        r#"tar -czf "$out/$asset" -C "target/$target/release" dagexec"#
    ));
    assert!(fixed_target_path(
        r#"bin="${CARGO_TARGET_DIR:-target}/debug/dagexec""#
    ));
    assert!(!fixed_target_path(
        r#"  local act="target/act/build/debug" from="$target_dir/debug" d"#
    ));
    assert!(!fixed_target_path(r#"x="$target_dir/release-path""#));
}

/// `.ci/target-dir.sh` says what cargo says: CARGO_TARGET_DIR, a relative one from the current
/// directory, else the repository's `target`.
#[test]
fn target_dir_sh_resolves_as_cargo_does() {
    let script = manifest().join(".ci/target-dir.sh");
    let scratch = tempfile::tempdir().unwrap();
    let ask = |cwd: &Path, value: Option<&str>| {
        let mut cmd = Command::new("bash");
        cmd.arg(&script)
            .current_dir(cwd)
            .env_remove("CARGO_TARGET_DIR");
        if let Some(v) = value {
            cmd.env("CARGO_TARGET_DIR", v);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .trim_end()
            .to_string()
    };
    let elsewhere = scratch.path().join("elsewhere");
    assert_eq!(
        ask(scratch.path(), Some(elsewhere.to_str().unwrap())),
        elsewhere.display().to_string()
    );
    assert_eq!(
        ask(scratch.path(), Some("rel/out")),
        scratch.path().join("rel/out").display().to_string()
    );
    let config = manifest().join(".cargo/config.toml");
    if !config.exists() {
        assert_eq!(
            ask(scratch.path(), None),
            manifest().join("target").display().to_string()
        );
    }
}
