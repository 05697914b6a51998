//! Bakes what `dagexec init` needs to pin the action by commit:
//! - a release build: the release workflow sets `DAGEXEC_RELEASE_TAG` (v1.2.3) and
//!   `DAGEXEC_RELEASE_COMMIT` (the commit the tag names);
//! - a build from a git checkout: the commit it was built from (`git rev-parse HEAD`) and
//!   `git describe --tags --always`;
//! - anything else (a crates.io package, a tarball): nothing, and `init` says it cannot pin.
//!
//! Sets `DAGEXEC_BUILD_KIND` (release | source | unknown), `DAGEXEC_BUILD_COMMIT`,
//! `DAGEXEC_BUILD_DESCRIBE` for `env!`.

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string()).filter(|s| !s.is_empty())
}

fn main() {
    println!("cargo:rerun-if-env-changed=DAGEXEC_RELEASE_TAG");
    println!("cargo:rerun-if-env-changed=DAGEXEC_RELEASE_COMMIT");
    let dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let tag = std::env::var("DAGEXEC_RELEASE_TAG").unwrap_or_default();
    let commit = std::env::var("DAGEXEC_RELEASE_COMMIT").unwrap_or_default();
    let (kind, commit, describe) = if !tag.is_empty() && !commit.is_empty() {
        ("release", commit, tag)
    } else {
        // Only this package's own repository counts: a checkout that merely contains the
        // source (vendored, or copied into another repository) is not the action's history.
        let top = git(&dir, &["rev-parse", "--show-toplevel"]);
        let own = top
            .as_deref()
            .map(Path::new)
            .and_then(|t| t.canonicalize().ok())
            == dir.canonicalize().ok()
            && dir.join("action.yml").is_file();
        match (own, git(&dir, &["rev-parse", "HEAD"])) {
            (true, Some(head)) => {
                // Rebuild when HEAD moves (a commit, a checkout).
                if let Some(git_dir) = git(&dir, &["rev-parse", "--absolute-git-dir"]) {
                    println!("cargo:rerun-if-changed={git_dir}/HEAD");
                    if let Some(r) = git(&dir, &["symbolic-ref", "-q", "HEAD"])
                        && let Some(common) = git(
                            &dir,
                            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
                        )
                    {
                        // A missing path would make cargo rerun this on every build.
                        for f in [format!("{common}/{r}"), format!("{common}/packed-refs")] {
                            if Path::new(&f).is_file() {
                                println!("cargo:rerun-if-changed={f}");
                            }
                        }
                    }
                }
                let describe = git(&dir, &["describe", "--tags", "--always"]).unwrap_or_default();
                ("source", head, describe)
            }
            _ => ("unknown", String::new(), String::new()),
        }
    };
    println!("cargo:rustc-env=DAGEXEC_BUILD_KIND={kind}");
    println!("cargo:rustc-env=DAGEXEC_BUILD_COMMIT={commit}");
    println!("cargo:rustc-env=DAGEXEC_BUILD_DESCRIBE={describe}");
}
