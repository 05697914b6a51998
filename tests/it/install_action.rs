//! `scripts/install-action.sh`, the action's installer, run as action.yml runs it: a source
//! build already in the tool cache (restored by actions/cache) is used even where cargo is
//! absent, and a release asset is installed only when its SHA-256 is the one
//! `dist/checksums.txt` pins (the full release path, with the real archive, is
//! `.ci/release-path.sh`).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::manifest;

/// A copy of the action (action.yml's directory) at `dir`, with `checksums` as
/// `dist/checksums.txt` when given.
fn action_copy(dir: &Path, checksums: Option<&str>) -> PathBuf {
    let action = dir.join("action");
    std::fs::create_dir_all(action.join("scripts")).unwrap();
    std::fs::copy(
        manifest().join("scripts/install-action.sh"),
        action.join("scripts/install-action.sh"),
    )
    .unwrap();
    for f in ["Cargo.toml", "Cargo.lock", "build.rs"] {
        std::fs::copy(manifest().join(f), action.join(f)).unwrap();
    }
    std::fs::create_dir_all(action.join("src")).unwrap();
    std::fs::write(action.join("src/main.rs"), "fn main() {}\n").unwrap();
    if let Some(c) = checksums {
        std::fs::create_dir_all(action.join("dist")).unwrap();
        std::fs::write(action.join("dist/checksums.txt"), c).unwrap();
    }
    action
}

/// A PATH with the basic tools the script uses and no cargo.
fn path_without_cargo(dir: &Path) -> PathBuf {
    let bin = dir.join("path");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in [
        "bash",
        "sh",
        "uname",
        "sed",
        "awk",
        "head",
        "find",
        "sort",
        "xargs",
        "cat",
        "sha256sum",
        "cut",
        "mkdir",
        "rm",
        "tar",
        "gzip",
        "curl",
        "flock",
        "dirname",
        "basename",
    ] {
        if let Some(p) = which(tool) {
            std::os::unix::fs::symlink(p, bin.join(tool)).unwrap();
        }
    }
    bin
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

fn install(action: &Path, dir: &Path, mode: Option<&str>, extra: &[(&str, &str)]) -> Output {
    let output = dir.join("github-output");
    let mut cmd = Command::new(which("bash").unwrap());
    cmd.arg(action.join("scripts/install-action.sh"))
        .args(mode)
        .env_clear()
        .env("PATH", path_without_cargo(dir))
        .env("GITHUB_ACTION_PATH", action)
        .env("GITHUB_OUTPUT", &output)
        .env("DAGEXEC_TOOL_CACHE", dir.join("toolcache"));
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let _ = std::fs::remove_dir_all(dir.join("path"));
    out
}

fn outputs(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("github-output")).unwrap_or_default()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_cached_source_build_is_used_where_cargo_is_absent() {
    let tmp = tempfile::tempdir().unwrap();
    let action = action_copy(tmp.path(), None);
    let located = install(&action, tmp.path(), Some("locate"), &[]);
    assert!(located.status.success(), "{}", text(&located));
    let outs = outputs(tmp.path());
    assert!(outs.contains("mode=source\n"), "{outs}");
    let dir = outs
        .lines()
        .find_map(|l| l.strip_prefix("dir="))
        .unwrap()
        .to_string();
    let key = outs.lines().find_map(|l| l.strip_prefix("key=")).unwrap();
    assert!(key.starts_with("dagexec-source-"), "{key}");
    // Without a cached build and without cargo: a clear error.
    let cold = install(&action, tmp.path(), None, &[]);
    assert!(!cold.status.success());
    assert!(
        text(&cold).contains("no cargo to build one"),
        "{}",
        text(&cold)
    );
    // What actions/cache restores: the build of this very source.
    let bin = Path::new(&dir).join("bin/dagexec");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::write(&bin, "#!/bin/sh\necho 'dagexec 0.0.0-cached'\n").unwrap();
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let warm = install(&action, tmp.path(), None, &[]);
    assert!(warm.status.success(), "{}", text(&warm));
    assert!(
        text(&warm).contains("dagexec 0.0.0-cached"),
        "{}",
        text(&warm)
    );
    assert!(
        outputs(tmp.path()).contains(&format!("bin={}\n", bin.display())),
        "{}",
        outputs(tmp.path())
    );
    // Another source is another build: the key follows the source.
    std::fs::write(action.join("src/main.rs"), "fn main() { }\n").unwrap();
    let _ = std::fs::remove_file(tmp.path().join("github-output"));
    install(&action, tmp.path(), Some("locate"), &[]);
    assert!(!outputs(tmp.path()).contains(&format!("key={key}\n")));
}

/// A release archive holding a `dagexec` that prints `says`, and its SHA-256.
fn archive(dir: &Path, says: &str) -> (Vec<u8>, String) {
    let stage = dir.join(format!("stage-{says}"));
    std::fs::create_dir_all(&stage).unwrap();
    let exe = stage.join("dagexec");
    std::fs::write(&exe, format!("#!/bin/sh\necho '{says}'\n")).unwrap();
    std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let tgz = dir.join(format!("{says}.tar.gz"));
    let st = Command::new("tar")
        .arg("-czf")
        .arg(&tgz)
        .arg("-C")
        .arg(&stage)
        .arg("dagexec")
        .status()
        .unwrap();
    assert!(st.success());
    let sum = Command::new("sha256sum").arg(&tgz).output().unwrap();
    let sum = String::from_utf8_lossy(&sum.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    (std::fs::read(&tgz).unwrap(), sum)
}

fn target() -> &'static str {
    match std::env::consts::ARCH {
        "aarch64" => "aarch64-unknown-linux-gnu",
        _ => "x86_64-unknown-linux-gnu",
    }
}

#[test]
fn a_release_asset_installs_only_with_the_pinned_checksum() {
    let tmp = tempfile::tempdir().unwrap();
    let (good, sum) = archive(tmp.path(), "dagexec 9.9.9");
    let (evil, _) = archive(tmp.path(), "owned");
    let asset = format!("dagexec-v9.9.9-{}.tar.gz", target());
    let checksums = format!("# version: v9.9.9\n{sum}  {asset}\n");
    let releases = tmp.path().join("releases/v9.9.9");
    std::fs::create_dir_all(&releases).unwrap();
    let base = format!("file://{}", tmp.path().join("releases").display());
    let env = [
        ("DAGEXEC_RELEASE_BASE_URL", base.as_str()),
        ("DAGEXEC_ACTION_REPOSITORY", "org/dagexec"),
    ];

    // A tampered asset is refused, and nothing is left to run.
    std::fs::write(releases.join(&asset), &evil).unwrap();
    let one = tmp.path().join("one");
    std::fs::create_dir_all(&one).unwrap();
    let action = action_copy(&one, Some(&checksums));
    let out = install(&action, &one, None, &env);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("refusing to run it"), "{}", text(&out));
    assert!(!text(&out).contains("owned"), "{}", text(&out));
    assert!(!outputs(&one).contains("bin="));

    // The real one installs.
    std::fs::write(releases.join(&asset), &good).unwrap();
    let two = tmp.path().join("two");
    std::fs::create_dir_all(&two).unwrap();
    let action = action_copy(&two, Some(&checksums));
    let out = install(&action, &two, None, &env);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("dagexec 9.9.9"), "{}", text(&out));
    assert!(outputs(&two).contains("bin="), "{}", outputs(&two));
}
