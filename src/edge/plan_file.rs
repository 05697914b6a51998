//! The plan file on disk: read ([`load`]), written atomically and never through a link
//! ([`save`], [`write_atomic`]: a fresh temp file beside it, fsync, rename — the seed's "Atomic
//! write" convention, through [`crate::edge::fsx`]), and its declared paths checked against
//! the work tree ([`check_in`]).

use std::path::Path;

use crate::pure::graph::Dag;
use crate::pure::plan::load::{parse, to_text};
use crate::pure::plan::{Plan, PlanError, PlanErrors};
use crate::pure::validate::{check, declared};

/// Reads and parses the plan at `path` (no semantic validation; see [`crate::pure::validate`]).
pub fn load(path: &Path) -> Result<Plan, PlanError> {
    let text = match read_regular(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(PlanError::NoPlan {
                path: path.to_path_buf(),
            });
        }
        Err(source) => {
            return Err(PlanError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    parse(&text, path)
}

/// The text of the regular file at `path` ([`crate::edge::fsx::open_regular`]).
fn read_regular(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    crate::edge::fsx::open_regular(path)?.read_to_string(&mut text)?;
    Ok(text)
}

/// Writes the plan atomically and never through a link (see [`crate::edge::fsx`]): a temp file
/// with a random name beside it, flushed to disk, then renamed over `path`.
pub fn save(plan: &Plan, path: &Path) -> std::io::Result<()> {
    write_atomic(path, to_text(plan).as_bytes())
}

/// Atomic write of any file inside the work tree it belongs to, never through a link
/// ([`crate::edge::fsx::write_atomic`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    crate::edge::fsx::write_atomic(path, bytes).map_err(Into::into)
}

/// [`check`], then the declared paths against the work tree at `root` (this part reads the
/// file system: `lstat` only): a path whose parent directory is a symbolic link in the
/// repository (`d -> /outside`, a task declaring `d/x`) is refused, naming the link.
pub fn check_in(plan: &Plan, plan_rel: Option<&str>, root: &Path) -> Result<Dag, PlanErrors> {
    let checked = check(plan, plan_rel);
    let mut errors = Vec::new();
    for (i, task) in plan.tasks.iter().enumerate() {
        for (field, path) in declared(task) {
            let Ok(norm) = crate::pure::paths::normalize(path) else {
                continue;
            };
            let parts: Vec<&str> = norm.split('/').collect();
            for end in 1..parts.len() {
                let link = parts[..end].join("/");
                let Ok(meta) = std::fs::symlink_metadata(root.join(&link)) else {
                    break;
                };
                if meta.file_type().is_symlink() {
                    let target = std::fs::read_link(root.join(&link))
                        .map(|t| t.display().to_string())
                        .unwrap_or_default();
                    errors.push(PlanError::LinkedPath {
                        task: i,
                        field: field.clone(),
                        path: path.to_string(),
                        link,
                        target,
                    });
                    break;
                }
            }
        }
    }
    match checked {
        Ok(dag) if errors.is_empty() => Ok(dag),
        Ok(_) => Err(PlanErrors(errors)),
        Err(PlanErrors(mut all)) => {
            all.extend(errors);
            Err(PlanErrors(all))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::OpenOptionsExt;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.json");
        fs::write(&path, "old").unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
        assert!(!dir.path().join("plan.json.tmp").exists());
    }

    #[test]
    fn missing_file_is_no_plan() {
        let e = load(Path::new("/nonexistent/.design/plan.json")).unwrap_err();
        assert!(matches!(e, PlanError::NoPlan { .. }));
        assert_eq!(
            e.to_string(),
            "No plan found at /nonexistent/.design/plan.json"
        );
    }

    /// A FIFO where the plan (or a task list's generated plan) should be — task code can leave
    /// one in the checkout — is refused at once, not waited on forever.
    #[test]
    fn a_fifo_at_the_plan_is_refused_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.clone();
        std::thread::spawn(move || tx.send(load(&p).map(|_| ()).map_err(|e| e.to_string())));
        let got = rx.recv_timeout(std::time::Duration::from_secs(5));
        // Unblock a reader still waiting, so the test process can end.
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(&path);
        let err = got.expect("load returned").unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
    }
}
