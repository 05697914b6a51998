//! Repository paths compared the way the file system compares them (pure).
//!
//! - One lexical normal form for every declared or changed path: `./src//a.txt`,
//!   `src/./a.txt` and `src/a.txt/` are all `src/a.txt`; `..`, absolute paths and NUL bytes are
//!   refused ([`normalize`]). The overlap matrix, conflicts, spot-checks, patch checks and git
//!   all use it.
//! - `.git` under any case (`.GIT`, `.Git`), with the trailing dots and spaces Windows drops and
//!   its short name `git~1`, is git's own directory wherever it appears ([`git_dir_component`]).
//! - A symlink's target resolved lexically against the link's directory ([`resolve_link`]), to
//!   tell whether it stays inside the repository.

/// Why a path is not a plain repository-relative path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unclean {
    /// Nothing but separators and `.`.
    #[error("names no file")]
    Empty,
    /// Starts at the file system's root (or a home directory, or a drive).
    #[error("must be relative to the repository root")]
    Absolute,
    /// Has a `..` component.
    #[error("must not contain `..`")]
    ParentDir,
    /// Has a NUL byte.
    #[error("contains a NUL byte")]
    Nul,
}

/// `path` in its one normal form: `/`-separated components with empty ones and `.` dropped.
/// Backslashes separate too (a Windows-written plan), so `a\b` is `a/b`.
pub fn normalize(path: &str) -> Result<String, Unclean> {
    if path.contains('\0') {
        return Err(Unclean::Nul);
    }
    let bytes = path.as_bytes();
    let drive = bytes.len() >= 2 && bytes[1] == b':' && bytes[0].is_ascii_alphabetic();
    if path.starts_with(['/', '\\', '~']) || drive {
        return Err(Unclean::Absolute);
    }
    let mut parts = Vec::new();
    for part in path.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => return Err(Unclean::ParentDir),
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err(Unclean::Empty);
    }
    Ok(parts.join("/"))
}

/// [`normalize`]d, or `path` as given when it cannot be (validation reports those): the key
/// paths are compared by.
pub fn key(path: &str) -> String {
    normalize(path).unwrap_or_else(|_| path.to_string())
}

/// Whether `path` is already in [`normalize`]'s form (so a caller can skip the allocation).
pub fn is_clean(path: &str) -> bool {
    !path.is_empty()
        && !path.contains('\\')
        && path
            .split('/')
            .all(|p| !p.is_empty() && p != "." && p != "..")
}

/// Whether one path component names git's directory on some file system: `.git` in any case,
/// with trailing dots or spaces, or its 8.3 short name `git~1`.
pub fn git_dir_component(part: &str) -> bool {
    let trimmed = part.trim_end_matches(['.', ' ']);
    trimmed.eq_ignore_ascii_case(".git") || trimmed.eq_ignore_ascii_case("git~1")
}

/// The prefix of `path` (normalised) that ends in a git-directory component, if any:
/// `a/.GIT/hooks/x` → `a/.GIT`.
pub fn git_dir_prefix(path: &str) -> Option<String> {
    let norm = key(path);
    let parts: Vec<&str> = norm.split('/').collect();
    let at = parts.iter().position(|p| git_dir_component(p))?;
    Some(parts[..=at].join("/"))
}

/// Whether `path` is `dir` or inside it, comparing components without regard to ASCII case
/// (as case-insensitive file systems do).
pub fn within(path: &str, dir: &str) -> bool {
    let (path, dir) = (key(path), key(dir));
    let mut p = path.split('/');
    dir.split('/')
        .all(|d| p.next().is_some_and(|c| c.eq_ignore_ascii_case(d)))
}

/// Whether `a` and `b` are one file on a case-insensitive file system.
pub fn same_file(a: &str, b: &str) -> bool {
    key(a).eq_ignore_ascii_case(&key(b))
}

/// A symlink in a change: where it is and what it points at, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Repo-relative path of the link.
    pub path: String,
    /// Its target, as stored in the link; for a gitlink, the commit it names.
    pub target: String,
    /// A gitlink (mode 160000: a nested repository's commit, what a worker's `sub/.git`
    /// makes of `sub`), not a symbolic link.
    pub gitlink: bool,
}

/// The repo-relative path a link at `link` pointing at `target` resolves to, lexically;
/// `None` when it leaves the repository (an absolute target, or `..` past the root).
pub fn resolve_link(link: &str, target: &str) -> Option<String> {
    if target.is_empty() || target.starts_with('/') || target.contains('\0') {
        return None;
    }
    let link = key(link);
    let mut parts: Vec<&str> = link.split('/').collect();
    parts.pop();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_path_one_file() {
        for p in [
            "src/a.txt",
            "./src/a.txt",
            "src//a.txt",
            "src/./a.txt",
            "src/a.txt/",
            "././src///a.txt",
        ] {
            assert_eq!(normalize(p), Ok("src/a.txt".into()), "{p}");
        }
        assert_eq!(normalize("docs/"), Ok("docs".into()));
        assert_eq!(normalize("src/../../x"), Err(Unclean::ParentDir));
        assert_eq!(normalize("a/./../b"), Err(Unclean::ParentDir));
        assert_eq!(normalize("a..b/c"), Ok("a..b/c".into()));
        assert_eq!(normalize("/etc/passwd"), Err(Unclean::Absolute));
        assert_eq!(normalize("C:\\x"), Err(Unclean::Absolute));
        assert_eq!(normalize("./"), Err(Unclean::Empty));
        assert_eq!(normalize("a\0b"), Err(Unclean::Nul));
    }

    #[test]
    fn git_dir_under_any_case() {
        for p in [
            ".git/config",
            ".GIT/hooks/x",
            ".Git/config",
            "sub/.gIt",
            ".git./x",
        ] {
            assert!(git_dir_prefix(p).is_some(), "{p}");
        }
        assert_eq!(git_dir_prefix("a/.GIT/hooks/x").as_deref(), Some("a/.GIT"));
        for p in [".gitignore", ".github/x", "git/x", "a.git"] {
            assert_eq!(git_dir_prefix(p), None, "{p}");
        }
        assert!(within(".DESIGN/Plan.json", ".design"));
        assert!(!within(".designs/x", ".design"));
        assert!(same_file("./.Design/PLAN.json", ".design/plan.json"));
    }

    #[test]
    fn links_resolve_lexically() {
        assert_eq!(resolve_link("a/b", "c"), Some("a/c".into()));
        assert_eq!(resolve_link("a/b", "../c"), Some("c".into()));
        assert_eq!(resolve_link("a/b", "../../c"), None);
        assert_eq!(resolve_link("a", "/etc/passwd"), None);
        assert_eq!(
            resolve_link("x", "./.git/config"),
            Some(".git/config".into())
        );
        assert_eq!(resolve_link("x", ""), None);
    }
}
