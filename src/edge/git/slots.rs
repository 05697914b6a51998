//! Where a repository's worker worktrees live: outside its work tree (the project's own
//! tools — test runners, workspaces, file watchers — never see them, and nothing of them can
//! be committed) and outside `.git` (agent CLIs refuse to edit anything under a `.git`
//! directory).
//!
//! The default home is the user's cache, `$XDG_CACHE_HOME/dagexec/worktrees` (else
//! `~/.cache/dagexec/worktrees`); `DAGEXEC_WORKTREES` or `worktrees:` in
//! `.design/dagexec.yml` name another, which must not lie inside the work tree. In the home,
//! each repository has a folder of its own, `<name>-<id>` (`id`: a hash of the repository's
//! common git directory), holding a `repository` file that names that directory: a folder
//! naming another repository is never used, so two repositories never share slots. Without a
//! home directory at all, the folder is `<git-common-dir>/dagexec/worktrees` (where every
//! worktree lived before).
//!
//! The folder in use is recorded in `<git-common-dir>/dagexec/worktrees-dir`, so that a later
//! run finds it again after the setting changed or the repository moved, and removes what a
//! killed run left there ([`super::Repo::prune_worktrees`]); a run removes its folder when it
//! ends ([`super::Repo::remove_worktrees_dir`]).

use std::io;
use std::path::{Path, PathBuf};

use super::GitError;
use super::error::io_error;
use super::paths::real_path;

/// The marker file in a repository's folder: the repository's common git directory.
pub(super) const MARKER: &str = "repository";

/// Where worktrees are made for one repository.
#[derive(Debug, Clone)]
pub(super) struct Slots {
    /// The home: a directory the user named or the cache; trusted, created as needed.
    pub base: PathBuf,
    /// This repository's folder: `<base>/<name>-<id>`, or `<git-common-dir>/dagexec/worktrees`.
    pub dir: PathBuf,
    /// Whether `dir` is the fallback inside the common directory (no marker needed there).
    pub inside_git: bool,
}

impl Slots {
    /// The default for the repository whose common git directory is `common_dir`, from the
    /// environment (`XDG_CACHE_HOME`, `HOME`).
    pub(super) fn default_for(common_dir: &Path) -> Slots {
        let var = |k: &str| {
            std::env::var_os(k)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        let cache = var("XDG_CACHE_HOME").or_else(|| var("HOME").map(|h| h.join(".cache")));
        match cache {
            Some(cache) => Slots::under(&cache.join("dagexec").join("worktrees"), common_dir),
            // No home directory: `<git-common-dir>/dagexec/worktrees`.
            None => Slots {
                base: common_dir.join("dagexec"),
                dir: legacy_dir(common_dir),
                inside_git: true,
            },
        }
    }

    /// The repository's folder in the home `base`.
    pub(super) fn under(base: &Path, common_dir: &Path) -> Slots {
        Slots {
            base: base.to_path_buf(),
            dir: base.join(folder_name(common_dir)),
            inside_git: false,
        }
    }

    /// Creates the folder (the home with its parents as they are, below it nothing through a
    /// link), claims it for `common_dir` with its marker (refusing one another repository
    /// holds), and records it in the common directory.
    pub(super) fn ensure(&self, common_dir: &Path) -> Result<(), GitError> {
        if self.inside_git {
            return crate::edge::fsx::create_dir_all(common_dir, &self.dir)
                .map_err(io_error("create directory", &self.dir));
        }
        std::fs::create_dir_all(&self.base).map_err(io_error("create directory", &self.base))?;
        crate::edge::fsx::create_dir_all(&self.base, &self.dir)
            .map_err(io_error("create directory", &self.dir))?;
        let marker = self.dir.join(MARKER);
        let ours = marker_text(common_dir);
        match read_marker(&self.dir) {
            Some(text) if text == ours => {}
            Some(text) => {
                return Err(GitError::WorktreesTaken {
                    dir: self.dir.clone(),
                    other: text.trim_end().to_string(),
                });
            }
            None => crate::edge::fsx::write(&self.dir, &marker, ours.as_bytes())
                .map_err(io_error("write", &marker))?,
        }
        let record = record_path(common_dir);
        let text = format!("{}\n", self.dir.display());
        if std::fs::read_to_string(&record).ok().as_deref() != Some(text.as_str()) {
            crate::edge::fsx::write(common_dir, &record, text.as_bytes())
                .map_err(io_error("write", &record))?;
        }
        Ok(())
    }
}

/// Where every worktree lived before: `<git-common-dir>/dagexec/worktrees`.
pub(super) fn legacy_dir(common_dir: &Path) -> PathBuf {
    common_dir.join("dagexec").join("worktrees")
}

/// `<git-common-dir>/dagexec/worktrees-dir`: the folder the last run used.
pub(super) fn record_path(common_dir: &Path) -> PathBuf {
    common_dir.join("dagexec").join("worktrees-dir")
}

/// The folder the last run recorded, if any.
pub(super) fn recorded(common_dir: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(record_path(common_dir)).ok()?;
    let path = PathBuf::from(text.trim_end_matches('\n'));
    path.is_absolute().then_some(path)
}

/// The marker's text for `common_dir`.
pub(super) fn marker_text(common_dir: &Path) -> String {
    format!("{}\n", common_dir.display())
}

/// The marker of the folder `dir`, when it is a regular file (a link is no marker).
pub(super) fn read_marker(dir: &Path) -> Option<String> {
    let path = dir.join(MARKER);
    let meta = std::fs::symlink_metadata(&path).ok()?;
    if !meta.is_file() || meta.len() > 64 * 1024 {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// Whether the folder `dir` of some home belongs to a repository that is gone: its marker
/// names a directory that no longer exists. (Such a folder holds nothing anyone can use.)
pub(super) fn orphaned(dir: &Path) -> bool {
    read_marker(dir).is_some_and(|text| {
        let named = Path::new(text.trim_end_matches('\n'));
        named.is_absolute()
            && matches!(std::fs::symlink_metadata(named), Err(e) if e.kind() == io::ErrorKind::NotFound)
    })
}

/// Deletes the folder `dir` when it holds nothing but its marker (else leaves it as it is).
pub(super) fn remove_if_empty(dir: &Path) {
    let only_marker = std::fs::read_dir(dir)
        .is_ok_and(|entries| entries.flatten().all(|e| e.file_name() == MARKER));
    if only_marker {
        let _ = std::fs::remove_file(dir.join(MARKER));
        let _ = std::fs::remove_dir(dir);
    } else {
        tracing::debug!(
            "left {}: it holds more than dagexec's worktrees",
            dir.display()
        );
    }
}

/// `<name>-<id>`: the repository's directory name (letters, digits, `.`, `_`, `-`; at most 40)
/// and 16 hex digits of a hash of the common directory's path.
pub(super) fn folder_name(common_dir: &Path) -> String {
    let real = real_path(common_dir);
    let named = if real.file_name().is_some_and(|n| n == ".git") {
        real.parent().and_then(Path::file_name)
    } else {
        real.file_name()
    };
    let name: String = named
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let name = name.trim_start_matches(['.', '-']);
    let name = if name.is_empty() { "repo" } else { name };
    format!(
        "{name}-{:016x}",
        crate::pure::hash::fnv1a(real.as_os_str().as_encoded_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_names_are_stable_plain_and_differ_per_repository() {
        let a = folder_name(Path::new("/no/such/place/my repo/.git"));
        assert_eq!(a, folder_name(Path::new("/no/such/place/my repo/.git")));
        assert!(a.starts_with("my_repo-"), "{a}");
        assert_eq!(a.len(), "my_repo-".len() + 16);
        assert_ne!(a, folder_name(Path::new("/no/such/other/my repo/.git")));
        let bare = folder_name(Path::new("/no/such/..hidden.git"));
        assert!(bare.starts_with("hidden.git-"), "{bare}");
        assert!(folder_name(Path::new("/")).starts_with("repo-"));
    }

    #[test]
    fn a_folder_another_repository_claimed_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let (one, two) = (tmp.path().join("one/.git"), tmp.path().join("two/.git"));
        std::fs::create_dir_all(one.join("dagexec")).unwrap();
        std::fs::create_dir_all(two.join("dagexec")).unwrap();
        let home = tmp.path().join("home");
        let slots = Slots::under(&home, &one);
        slots.ensure(&one).unwrap();
        assert_eq!(read_marker(&slots.dir), Some(marker_text(&one)));
        assert_eq!(recorded(&one), Some(slots.dir.clone()));
        slots.ensure(&one).unwrap();
        // The same folder for another repository (a hash collision, a copied marker).
        let err = Slots { ..slots.clone() }.ensure(&two).unwrap_err();
        assert!(matches!(err, GitError::WorktreesTaken { .. }), "{err}");
        assert!(err.to_string().contains(&*one.to_string_lossy()), "{err}");
        assert!(!orphaned(&slots.dir));
        std::fs::remove_dir_all(tmp.path().join("one")).unwrap();
        assert!(orphaned(&slots.dir), "its repository is gone");
    }

    #[test]
    fn a_link_in_the_home_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let common = tmp.path().join("r/.git");
        std::fs::create_dir_all(&common).unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        let slots = Slots::under(&home, &common);
        std::os::unix::fs::symlink(&outside, &slots.dir).unwrap();
        assert!(slots.ensure(&common).is_err());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    }
}
