//! `scripts/install-action.sh`, the action's installer, run as action.yml runs it: a source
//! build already in the tool cache (restored by actions/cache, or left on a self-hosted runner)
//! is used, even where cargo is absent, only when its SHA-256 is the `build` pin (or, with no
//! pin, on the default branch) — a poisoned one is removed with a warning and built afresh —
//! and a release asset is installed and run only when its SHA-256 is the one
//! `dist/checksums.txt` pins (the full release path, with the real archive, is
//! `.ci/release-path.sh`).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{executable, manifest};

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
        "openssl",
        "cut",
        "mkdir",
        "rm",
        "tar",
        "gzip",
        "curl",
        "flock",
        "dirname",
        "basename",
        "mv",
        "chmod",
        "mktemp",
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
    // What actions/cache restores: the build of this very source, pinned by the trusted job
    // that started the run (its SHA-256, the `build` input).
    let bin = Path::new(&dir).join("bin/dagexec");
    let sum = put_exe(&bin, "dagexec 0.0.0-cached");
    let warm = install(&action, tmp.path(), None, &[("DAGEXEC_BUILD_SHA256", &sum)]);
    assert!(warm.status.success(), "{}", text(&warm));
    assert!(
        text(&warm).contains("dagexec 0.0.0-cached"),
        "{}",
        text(&warm)
    );
    let outs = outputs(tmp.path());
    for line in [
        format!("bin={}\n", bin.display()),
        format!("build={sum}\n"),
        "fresh=false\n".into(),
    ] {
        assert!(outs.contains(&line), "{line} in {outs}");
    }
    // Another source is another build: the key follows the source.
    std::fs::write(action.join("src/main.rs"), "fn main() { }\n").unwrap();
    let _ = std::fs::remove_file(tmp.path().join("github-output"));
    install(&action, tmp.path(), Some("locate"), &[]);
    assert!(!outputs(tmp.path()).contains(&format!("key={key}\n")));
}

/// A pinned build is read once: the SHA-256 that is checked against the pin is the `build`
/// output (a source build may be hundreds of MB; every read is job start-up, issue 36).
#[test]
fn a_pinned_source_build_is_hashed_once() {
    let tmp = tempfile::tempdir().unwrap();
    let action = action_copy(tmp.path(), None);
    assert!(
        install(&action, tmp.path(), Some("locate"), &[])
            .status
            .success()
    );
    let dir = PathBuf::from(
        outputs(tmp.path())
            .lines()
            .find_map(|l| l.strip_prefix("dir="))
            .unwrap(),
    );
    let bin = dir.join("bin/dagexec");
    let sum = put_exe(&bin, "dagexec 0.0.0-cached");
    // The hashing tools, each noting what it reads, first on PATH (install() puts the real
    // ones among the basic tools at <dir>/path).
    let wrap = tmp.path().join("wrap");
    std::fs::create_dir_all(&wrap).unwrap();
    let seen = tmp.path().join("hashed");
    for tool in ["sha256sum", "openssl", "shasum"] {
        let Some(real) = which(tool) else { continue };
        executable(
            &wrap.join(tool),
            &format!(
                "#!/bin/sh\nfor a; do echo \"$a\"; done >> '{}'\nexec '{}' \"$@\"\n",
                seen.display(),
                real.display()
            ),
        );
    }
    let path = format!("{}:{}", wrap.display(), tmp.path().join("path").display());
    let _ = std::fs::remove_file(tmp.path().join("github-output"));
    let out = install(
        &action,
        tmp.path(),
        None,
        &[("DAGEXEC_BUILD_SHA256", &sum), ("PATH", &path)],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(outputs(tmp.path()).contains(&format!("build={sum}\n")));
    let reads = std::fs::read_to_string(&seen).unwrap_or_default();
    let of_bin = reads
        .lines()
        .filter(|l| l.trim() == bin.to_str().unwrap())
        .count();
    assert_eq!(of_bin, 1, "the build was hashed {of_bin} times: {reads}");
}

/// An executable script at `path` that prints `says`; its SHA-256.
fn put_exe(path: &Path, says: &str) -> String {
    executable(path, &format!("#!/bin/sh\necho '{says}'\n"));
    sha256_of(path)
}

fn sha256_of(path: &Path) -> String {
    let sum = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8_lossy(&sum.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// A `cargo` whose `install --root DIR` leaves a `DIR/bin/dagexec` that prints "rebuilt" (the
/// real build takes minutes); its directory, to put first on PATH.
fn fake_cargo(dir: &Path) -> PathBuf {
    let bin = dir.join("fake-cargo");
    executable(
        &bin.join("cargo"),
        "#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = --root ] && root=$2; shift; done\n\
         mkdir -p \"$root/bin\" && printf '#!/bin/sh\\necho rebuilt\\n' > \"$root/bin/dagexec\" && chmod 755 \"$root/bin/dagexec\"\n",
    );
    bin
}

/// What task code that became root can do in a work job: save a build of its own under the
/// action's cache key in the execution branch's scope (which actions/cache prefers), or leave
/// one in a self-hosted runner's tool cache. A later job runs it only when it is the build the
/// run was pinned to; otherwise the job warns, removes it and builds afresh.
#[test]
fn a_poisoned_source_build_is_not_run_without_the_pin_and_is_built_afresh() {
    let tmp = tempfile::tempdir().unwrap();
    let action = action_copy(tmp.path(), None);
    assert!(
        install(&action, tmp.path(), Some("locate"), &[])
            .status
            .success()
    );
    let dir = PathBuf::from(
        outputs(tmp.path())
            .lines()
            .find_map(|l| l.strip_prefix("dir="))
            .unwrap(),
    );
    let bin = dir.join("bin/dagexec");
    let cargo = fake_cargo(tmp.path());
    // (install() puts the basic tools at <dir>/path.)
    let path = format!("{}:{}", cargo.display(), tmp.path().join("path").display());
    let pinned = "a".repeat(64);
    let cases: [(&str, Vec<(&str, &str)>); 3] = [
        // Pinned to another build (the one the plan job built or checked).
        (
            "not the",
            vec![
                ("DAGEXEC_BUILD_SHA256", pinned.as_str()),
                ("PATH", path.as_str()),
            ],
        ),
        // No pin, on the execution branch.
        (
            "no build pin",
            vec![
                ("GITHUB_REF", "refs/heads/dagexec/x"),
                ("DAGEXEC_DEFAULT_BRANCH", "main"),
                ("PATH", path.as_str()),
            ],
        ),
        // No pin and no idea which branch this is.
        ("no build pin", vec![("PATH", path.as_str())]),
    ];
    for (why, env) in cases {
        let _ = std::fs::remove_file(tmp.path().join("github-output"));
        put_exe(&bin, "owned");
        let out = install(&action, tmp.path(), None, &env);
        let t = text(&out);
        assert!(out.status.success(), "{t}");
        assert!(!t.contains("owned"), "the poisoned build ran: {t}");
        assert!(
            t.contains("::warning title=dagexec install::not running"),
            "{t}"
        );
        assert!(t.contains(why), "{why} in {t}");
        assert!(t.contains("rebuilt"), "{t}");
        let outs = outputs(tmp.path());
        let rebuilt = sha256_of(&bin);
        assert!(outs.contains(&format!("build={rebuilt}\n")), "{outs}");
        assert!(outs.contains("fresh=true\n"), "{outs}");
    }
    // A pin that is no SHA-256 is refused before anything runs.
    put_exe(&bin, "owned");
    let out = install(
        &action,
        tmp.path(),
        None,
        &[("DAGEXEC_BUILD_SHA256", "$(id)")],
    );
    assert!(!out.status.success());
    assert!(!text(&out).contains("owned"), "{}", text(&out));
    // The default branch's scope is written by no task code: an unpinned build is used there.
    let _ = std::fs::remove_file(tmp.path().join("github-output"));
    let sum = put_exe(&bin, "dagexec from the default branch");
    let out = install(
        &action,
        tmp.path(),
        None,
        &[
            ("GITHUB_REF", "refs/heads/main"),
            ("DAGEXEC_DEFAULT_BRANCH", "main"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("dagexec from the default branch"),
        "{}",
        text(&out)
    );
    assert!(outputs(tmp.path()).contains(&format!("build={sum}\n")));
}

/// A release archive holding a `dagexec` that prints `says`, and its SHA-256.
fn archive(dir: &Path, says: &str) -> (Vec<u8>, String) {
    let stage = dir.join(format!("stage-{says}"));
    executable(
        &stage.join("dagexec"),
        &format!("#!/bin/sh\necho '{says}'\n"),
    );
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

    // A binary left in a self-hosted runner's tool cache (by task code of an earlier job) is
    // never run: the checked archive beside it is extracted afresh ...
    let left = two.join(format!("toolcache/dagexec/v9.9.9/{}", target()));
    put_exe(&left.join("dagexec"), "owned");
    let out = install(&action, &two, None, &env);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("dagexec 9.9.9"), "{}", text(&out));
    assert!(!text(&out).contains("owned"), "{}", text(&out));
    // ... and without an archive that checks out, everything there is removed and the asset
    // downloaded again.
    std::fs::write(left.join(&asset), &evil).unwrap();
    put_exe(&left.join("dagexec"), "owned");
    let out = install(&action, &two, None, &env);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("::warning title=dagexec install::"),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("dagexec 9.9.9"), "{}", text(&out));
    assert!(!text(&out).contains("owned"), "{}", text(&out));
}
