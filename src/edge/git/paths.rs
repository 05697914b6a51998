//! Checking and comparing paths, and deleting files around git.

use std::path::{Path, PathBuf};

use super::GitError;
use super::error::io_error;

/// Whether `listing` (paths git printed) has `path` itself or something under it.
pub(super) fn covers(listing: &[String], path: &str) -> bool {
    listing.iter().any(|entry| {
        entry == path
            || entry
                .strip_prefix(path)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// `path` checked to be repo-relative and written plainly ([`crate::pure::paths::normalize`]:
/// `a//./b/` becomes `a/b`), and not inside git's own directory under any case.
pub(super) fn normalize(path: &str) -> Result<String, GitError> {
    let invalid = |reason| GitError::InvalidPath {
        path: path.to_owned(),
        reason,
    };
    let norm = crate::pure::paths::normalize(path).map_err(|e| {
        invalid(match e {
            crate::pure::paths::Unclean::Nul => "contains a NUL byte",
            crate::pure::paths::Unclean::ParentDir => "must not contain `..`",
            crate::pure::paths::Unclean::Absolute => "must be relative to the repository root",
            crate::pure::paths::Unclean::Empty => "names no file",
        })
    })?;
    if crate::pure::paths::git_dir_prefix(&norm).is_some() {
        return Err(invalid("is inside .git"));
    }
    Ok(norm)
}

/// [`normalize`] of each of `paths`, in order; the first refusal.
pub(super) fn normalize_all(paths: &[String]) -> Result<Vec<String>, GitError> {
    paths.iter().map(|p| normalize(p)).collect()
}

/// A worktree name must be one plain path component.
pub(super) fn check_name(name: &str) -> Result<(), GitError> {
    let invalid = |reason| GitError::InvalidName {
        name: name.to_owned(),
        reason,
    };
    if name.is_empty() || name == "." || name == ".." {
        return Err(invalid("must be a plain file name"));
    }
    if name.contains(['/', '\\', '\0']) {
        return Err(invalid("must not contain `/`, `\\` or NUL"));
    }
    if name.starts_with('-') {
        return Err(invalid("must not start with `-`"));
    }
    if crate::pure::paths::git_dir_component(name) {
        return Err(invalid(
            "must not be git's own directory name under any case",
        ));
    }
    Ok(())
}

/// `path` with symlinks resolved as far as it exists (so missing paths still compare).
pub(super) fn real_path(path: &Path) -> PathBuf {
    if let Ok(real) = path.canonicalize() {
        return real;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => real_path(parent).join(name),
        _ => path.to_path_buf(),
    }
}

/// Deletes whatever is at `path` (a directory recursively, a link itself and never what it
/// points at); nothing there is fine.
pub(super) fn remove_any(path: &Path) -> Result<(), GitError> {
    let parent = path.parent().unwrap_or(Path::new(""));
    crate::edge::fsx::remove_all(parent, path).map_err(io_error("delete", path))
}
