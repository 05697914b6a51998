//! Applying a worker's patch onto the main work tree and index, and reading which paths git
//! says failed.

use std::path::Path;

use super::PatchRef;
use super::cmd::{Git, describe_failure, git};

/// A patch that does not apply (or could not be tried).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApplyError {
    /// What failed: the command, the directory and git's stderr.
    pub message: String,
    /// The repo-relative paths git named as failing, in the order it named them; empty when
    /// it named none.
    pub paths: Vec<String>,
}

/// `git apply [--check] --index --binary --whitespace=nowarn` of `patch` in `root`. An empty
/// patch applies trivially (git itself would call it "no valid patches").
pub(super) fn apply(root: &Path, patch: PatchRef<'_>, check_only: bool) -> Result<(), ApplyError> {
    apply_to(root, None, patch, check_only)
}

/// `git apply [--check] --binary --whitespace=nowarn` of `patch` in `dir`: to the work tree
/// and its index (`--index`), or to the index file `index` alone (`--cached`) when given. An
/// empty patch applies trivially; whitespace is taken as it is.
pub(super) fn apply_to(
    dir: &Path,
    index: Option<&Path>,
    patch: PatchRef<'_>,
    check_only: bool,
) -> Result<(), ApplyError> {
    if patch.is_blank() {
        return Ok(());
    }
    let (label, target) = match (index.is_some(), check_only) {
        (false, false) => ("apply", "--index"),
        (false, true) => ("apply --check", "--index"),
        (true, false) => ("apply --cached", "--cached"),
        (true, true) => ("apply --cached --check", "--cached"),
    };
    let mut call = applying(git(dir, label).index(index), target, patch, check_only);
    let out = call.output().map_err(|e| ApplyError {
        message: e.to_string(),
        paths: Vec::new(),
    })?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = describe_failure(&out);
    Err(ApplyError {
        message: format!("git {label} failed in {}: {stderr}", dir.display()),
        paths: failing_paths(&stderr),
    })
}

/// `call` made `git apply [--check] <target> --binary --whitespace=nowarn -` of `patch`,
/// whitespace taken as it is.
pub(super) fn applying<'a>(
    call: Git<'a>,
    target: &str,
    patch: PatchRef<'a>,
    check_only: bool,
) -> Git<'a> {
    call.config("apply.ignoreWhitespace=no")
        .arg("apply")
        .args(check_only.then_some("--check"))
        .args([target, "--binary", "--whitespace=nowarn", "-"])
        .stdin(patch)
}

/// Messages of `git apply` (C locale) of the form `error: <path>: <reason>`.
const PATH_FIRST: &[&str] = &[
    ": patch does not apply",
    ": already exists in index",
    ": already exists in working directory",
    ": does not exist in index",
    ": does not match index",
    ": wrong type",
    ": No such file or directory",
    ": removal patch leaves file contents",
    ": Permission denied",
];

/// The paths named in `git apply`'s error lines, each once, in order.
pub(super) fn failing_paths(stderr: &str) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for line in stderr.lines() {
        let Some(rest) = line.strip_prefix("error: ") else {
            continue;
        };
        let path = if let Some(at) = rest.strip_prefix("patch failed: ") {
            // `patch failed: <path>:<line>`
            at.rsplit_once(':').map(|(path, _)| path)
        } else if let Some(suffix) = PATH_FIRST.iter().find(|s| rest.ends_with(*s)) {
            rest.strip_suffix(suffix)
        } else if let (Some(open), Some(close)) = (rest.find('\''), rest.rfind('\'')) {
            // `the patch applies to '<path>' (<sha>), which …`, `binary patch does not
            // apply to '<path>'`, `affected file '<path>' is beyond a symbolic link`, …
            (open < close).then(|| &rest[open + 1..close])
        } else {
            None
        };
        if let Some(path) = path.filter(|p| !p.is_empty() && !paths.iter().any(|q| q == p)) {
            paths.push(path.to_owned());
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_paths_reads_git_apply_messages() {
        let stderr = "error: patch failed: src/a b.rs:12\n\
                      error: src/a b.rs: patch does not apply\n\
                      error: the patch applies to 'img.png' (75fffe28ea7e), which does not match the current contents.\n\
                      error: img.png: patch does not apply\n\
                      error: new.txt: already exists in index\n\
                      error: x:y.txt: does not match index\n\
                      error: cannot apply binary patch to 'bin/z' without full index line\n\
                      error: gone.txt: does not exist in index\n\
                      warning: something about 'w.txt'\n\
                      error: No valid patches in input (allow with \"--allow-empty\")\n\
                      error: corrupt patch at line 7";
        assert_eq!(
            failing_paths(stderr),
            [
                "src/a b.rs",
                "img.png",
                "new.txt",
                "x:y.txt",
                "bin/z",
                "gone.txt"
            ]
        );
        assert!(failing_paths("fatal: unrecognized input").is_empty());
    }

    #[test]
    fn empty_patch_applies_without_git() {
        let nowhere = Path::new("/nonexistent/dagexec-test");
        assert_eq!(apply(nowhere, b"".into(), true), Ok(()));
        assert_eq!(apply(nowhere, b"\n".into(), false), Ok(()));
        let err = apply(nowhere, b"diff --git a/x b/x\n".into(), true).unwrap_err();
        assert!(err.message.contains("/nonexistent/dagexec-test"), "{err}");
        assert!(err.paths.is_empty());
    }
}
