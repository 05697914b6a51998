//! Checking and comparing paths, and deleting files around git.

use std::io;
use std::path::{Component, Path, PathBuf};

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

/// `path` checked to be repo-relative and written plainly: `a/./b/` becomes `a/b`.
pub(super) fn normalize(path: &str) -> Result<String, GitError> {
    let invalid = |reason| GitError::InvalidPath {
        path: path.to_owned(),
        reason,
    };
    if path.contains('\0') {
        return Err(invalid("contains a NUL byte"));
    }
    let mut parts = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str().unwrap_or_default()),
            Component::CurDir => {}
            Component::ParentDir => return Err(invalid("must not contain `..`")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(invalid("must be relative to the repository root"));
            }
        }
    }
    if parts.is_empty() {
        return Err(invalid("names no file"));
    }
    if parts.first() == Some(&".git") {
        return Err(invalid("is inside .git"));
    }
    Ok(parts.join("/"))
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

/// Deletes whatever is at `path` (a directory recursively); nothing there is fine.
pub(super) fn remove_any(path: &Path) -> Result<(), GitError> {
    let result = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) => Err(e),
    };
    match result {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_error("delete", path)(e)),
        _ => Ok(()),
    }
}
