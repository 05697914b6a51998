//! Safe file writes: every file dagexec writes, creates or deletes goes through here, so that
//! nothing a worker left in the repository (a symlink at `.design/plan.json.tmp`, a `.design`
//! that is a link to `/etc`) can turn a write into one outside the tree.
//!
//! - A write creates a temp file with a random name, `O_CREAT|O_EXCL|O_NOFOLLOW`, in the
//!   target's directory, flushes it to disk and renames it over the target: a link at the temp
//!   name makes the create fail (another name is tried), a link at the target is refused.
//! - Every directory between the root and the file is checked with `lstat` (never followed)
//!   to be a real directory, and missing ones are created one at a time the same way.
//! - A deletion removes the link itself, never what it points at, and refuses a path whose
//!   parent directories include a link.
//!
//! The root is the directory the caller trusts (the repository's top, a temp dir dagexec made);
//! without one ([`write_atomic`]), it is the nearest enclosing git work tree, else the parent.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

/// Why a safe write, creation or deletion was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A component of the path (or the target itself) is a symlink dagexec did not create.
    #[error(
        "refusing to write {path}: {link} is a symbolic link (dagexec never writes through a link; remove it and run again)"
    )]
    Link {
        /// The file dagexec was writing.
        path: PathBuf,
        /// The link found on the way.
        link: PathBuf,
    },
    /// A component of the path exists but is not a directory.
    #[error("cannot write {path}: {blocker} is not a directory")]
    NotADirectory {
        /// The file dagexec was writing.
        path: PathBuf,
        /// The non-directory found on the way.
        blocker: PathBuf,
    },
    /// The path is not under the root it was checked against.
    #[error("refusing to write {path}: it is not inside {root}")]
    Outside {
        /// The file dagexec was writing.
        path: PathBuf,
        /// The root.
        root: PathBuf,
    },
    /// The file system said no.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        let kind = match &e {
            Error::Io { source, .. } => source.kind(),
            Error::Link { .. } | Error::Outside { .. } => io::ErrorKind::PermissionDenied,
            Error::NotADirectory { .. } => io::ErrorKind::NotADirectory,
        };
        io::Error::new(kind, e)
    }
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> Error + 'a {
    move |source| Error::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// The directories from `root` (exclusive) down to `dir` (inclusive), lexically: `dir` must be
/// `root` or below it, written without `..`.
fn chain(root: &Path, dir: &Path, target: &Path) -> Result<Vec<PathBuf>, Error> {
    let outside = || Error::Outside {
        path: target.to_path_buf(),
        root: root.to_path_buf(),
    };
    let rel = dir.strip_prefix(root).map_err(|_| outside())?;
    let mut at = root.to_path_buf();
    let mut out = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(part) => {
                at.push(part);
                out.push(at.clone());
            }
            Component::CurDir => {}
            _ => return Err(outside()),
        }
    }
    Ok(out)
}

/// Checks (and with `create`, makes) every directory between `root` and `dir`, never
/// following a link. Without `create`, a missing directory ends the check (nothing below it
/// exists either).
fn walk(root: &Path, dir: &Path, target: &Path, create: bool) -> Result<(), Error> {
    for d in chain(root, dir, target)? {
        match fs::symlink_metadata(&d) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(Error::Link {
                    path: target.to_path_buf(),
                    link: d,
                });
            }
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Error::NotADirectory {
                    path: target.to_path_buf(),
                    blocker: d,
                });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if !create {
                    return Ok(());
                }
                match fs::create_dir(&d) {
                    Ok(()) => {}
                    // Made meanwhile: check what it is on the next pass.
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        return walk(root, dir, target, create);
                    }
                    Err(e) => return Err(io_err("create directory", &d)(e)),
                }
            }
            Err(e) => return Err(io_err("inspect", &d)(e)),
        }
    }
    Ok(())
}

/// The nearest ancestor of `dir` (itself included) holding a `.git` entry: the work tree
/// a path belongs to. `None` outside one.
fn work_tree_of(dir: &Path) -> Option<&Path> {
    dir.ancestors()
        .find(|a| fs::symlink_metadata(a.join(".git")).is_ok())
}

/// The regular file at `path`, open for reading (a link to one is followed); anything else —
/// a FIFO task code left there, a device — is an error at once, never waited on.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// The root to check `path` against when the caller names none: the git work tree it is in,
/// else its directory.
pub fn default_root(path: &Path) -> &Path {
    let parent = path.parent().unwrap_or(Path::new(""));
    work_tree_of(parent).unwrap_or(parent)
}

/// Refuses `path` itself being a symlink.
fn not_a_link(path: &Path) -> Result<(), Error> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(Error::Link {
            path: path.to_path_buf(),
            link: path.to_path_buf(),
        }),
        _ => Ok(()),
    }
}

/// Creates `dir` and its missing parents below `root`, refusing any link on the way.
pub fn create_dir_all(root: &Path, dir: &Path) -> Result<(), Error> {
    walk(root, dir, dir, true)
}

/// Writes `bytes` to `path` (under `root`) atomically, never through a link: parents made
/// as needed, a fresh temp file beside it, fsync, rename.
pub fn write(root: &Path, path: &Path, bytes: &[u8]) -> Result<(), Error> {
    write_with(root, path, |file| file.write_all(bytes))
}

/// [`write()`] with the content written by `fill` into the temp file (a patch copied in chunks,
/// never whole in memory).
pub fn write_with(
    root: &Path,
    path: &Path,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> Result<(), Error> {
    let parent = path.parent().unwrap_or(Path::new(""));
    walk(root, parent, path, true)?;
    not_a_link(path)?;
    let (tmp, mut file) = temp_file(parent, path)?;
    let written = fill(&mut file)
        .and_then(|()| file.sync_all())
        .map_err(io_err("write", &tmp));
    drop(file);
    let renamed = written.and_then(|()| fs::rename(&tmp, path).map_err(io_err("replace", path)));
    if let Err(e) = renamed {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    // The rename itself is durable once the directory is.
    if let Ok(d) = File::open(if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    }) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// [`write()`] with the root taken to be the git work tree `path` is in (else its directory).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    write(default_root(path), path, bytes)
}

/// A new file in `dir` named after `target` with a random suffix, opened with
/// `O_CREAT|O_EXCL|O_NOFOLLOW`; a name taken (by anything, a link included) is never reused.
fn temp_file(dir: &Path, target: &Path) -> Result<(PathBuf, File), Error> {
    let stem = target
        .file_name()
        .map_or_else(|| OsString::from("file"), ToOwned::to_owned);
    let mut last = None;
    for _ in 0..16 {
        let mut name = OsString::from(".");
        name.push(&stem);
        name.push(format!(".dagexec-{:016x}.tmp", fastrand::u64(..)));
        let tmp = dir.join(name);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
            .mode(0o644)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(io_err("create", &tmp)(e)),
        }
    }
    Err(io_err("create a temp file for", target)(
        last.unwrap_or_else(|| io::Error::other("no free name")),
    ))
}

/// Appends `bytes` to `path` (created if missing), refusing a link at `path` or on the way
/// from `root`.
pub fn append(root: &Path, path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let parent = path.parent().unwrap_or(Path::new(""));
    walk(root, parent, path, true)?;
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .mode(0o644)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(nix::libc::ELOOP) {
                Error::Link {
                    path: path.to_path_buf(),
                    link: path.to_path_buf(),
                }
            } else {
                io_err("open", path)(e)
            }
        })?;
    f.write_all(bytes).map_err(io_err("write", path))
}

/// Deletes the file or link at `path` (the link itself, never its target); nothing there is
/// fine. A link among the directories from `root` to it is refused.
pub fn remove_file(root: &Path, path: &Path) -> Result<(), Error> {
    let parent = path.parent().unwrap_or(Path::new(""));
    walk(root, parent, path, false)?;
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err("delete", path)(e)),
        _ => Ok(()),
    }
}

/// Deletes whatever is at `path`: a directory with everything in it (links inside are removed,
/// not followed), a file, or a link itself. Nothing there is fine; a link among the
/// directories from `root` to it is refused.
pub fn remove_all(root: &Path, path: &Path) -> Result<(), Error> {
    let parent = path.parent().unwrap_or(Path::new(""));
    walk(root, parent, path, false)?;
    let result = match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) => Err(e),
    };
    match result {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err("delete", path)(e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        let outside = dir.path().join("outside");
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("file"), "precious").unwrap();
        (dir, root, outside)
    }

    #[test]
    fn writes_atomically_and_makes_parents() {
        let (_d, root, _) = setup();
        let path = root.join(".design/deep/plan.json");
        write(&root, &path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        let left: Vec<_> = fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temp file left behind");
    }

    #[test]
    fn never_writes_through_a_link() {
        let (_d, root, outside) = setup();
        fs::create_dir_all(root.join(".design")).unwrap();
        // The old `{path}.tmp` name is a link: irrelevant now, the temp name is random.
        symlink(outside.join("file"), root.join(".design/plan.json.tmp")).unwrap();
        write_atomic(&root.join(".design/plan.json"), b"plan").unwrap();
        // The target itself a link: refused, naming it.
        symlink(outside.join("file"), root.join(".design/batch.json")).unwrap();
        let err = write(&root, &root.join(".design/batch.json"), b"x").unwrap_err();
        assert!(matches!(&err, Error::Link { link, .. } if link.ends_with("batch.json")));
        // A parent a link: refused, naming the parent.
        symlink(&outside, root.join("d")).unwrap();
        let err = write_atomic(&root.join("d/x/y.txt"), b"x").unwrap_err();
        assert!(
            matches!(&err, Error::Link { link, .. } if *link == root.join("d")),
            "{err}"
        );
        assert!(err.to_string().contains("is a symbolic link"), "{err}");
        let err = append(&root, &root.join(".design/batch.json"), b"x").unwrap_err();
        assert!(matches!(err, Error::Link { .. }), "{err}");
        assert_eq!(
            fs::read_to_string(outside.join("file")).unwrap(),
            "precious"
        );
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 1);
    }

    #[test]
    fn deletes_links_not_their_targets() {
        let (_d, root, outside) = setup();
        symlink(&outside, root.join("d")).unwrap();
        remove_all(&root, &root.join("d")).unwrap();
        assert!(fs::symlink_metadata(root.join("d")).is_err());
        symlink(&outside, root.join("d")).unwrap();
        let err = remove_file(&root, &root.join("d/file")).unwrap_err();
        assert!(matches!(err, Error::Link { .. }), "{err}");
        let err = remove_all(&root, &root.join("d/file")).unwrap_err();
        assert!(matches!(err, Error::Link { .. }), "{err}");
        fs::create_dir_all(root.join("tree")).unwrap();
        symlink(&outside, root.join("tree/inner")).unwrap();
        remove_all(&root, &root.join("tree")).unwrap();
        assert_eq!(
            fs::read_to_string(outside.join("file")).unwrap(),
            "precious"
        );
        remove_file(&root, &root.join("missing")).unwrap();
    }

    #[test]
    fn paths_outside_the_root_are_refused() {
        let (_d, root, outside) = setup();
        let err = write(&root, &outside.join("x"), b"x").unwrap_err();
        assert!(matches!(err, Error::Outside { .. }), "{err}");
        let err = write(&root, &root.join("a/../../x"), b"x").unwrap_err();
        assert!(matches!(err, Error::Outside { .. }), "{err}");
    }
}
