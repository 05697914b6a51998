//! The logs each attempt leaves.
//!
//! Each attempt's stdout, stderr and work log — one Ctrl-C stopped too, up to the stop — are
//! kept as `<git-common-dir>/dagexec/logs/run-R/task-N-attempt-K.{stdout,stderr,log}` ([`keep_logs`]):
//! every run that keeps logs gets a folder of its own, numbered on ([`RunLogs`]), so no attempt
//! ever overwrites another's (`dagexec retry N` and a new plan start a task's attempts at 1
//! again, in a new run). When a run makes its folder, older runs are pruned ([`prune_logs`]:
//! the newest [`KEEP_RUNS`] kept, older ones dropped while all logs pass [`LOGS_CAP`]). The
//! logs are listed by `dagexec status` and the run's summary ([`kept_logs`]). The folder is
//! inside git's own directory, where no patch can place a file; it is still written without
//! following links (each folder checked, a run's folder made anew, each file created anew with
//! `O_EXCL|O_NOFOLLOW`).

use crate::edge::lock::held;
use crate::edge::worker::{self};
use std::path::{Path, PathBuf};

/// The folder of kept attempt logs in the repository's common git directory.
pub(crate) fn logs_dir(common_dir: &Path) -> PathBuf {
    common_dir.join("dagexec").join("logs")
}

/// [`logs_dir`] as shown to the user: relative to the work tree `root` when inside it.
pub(crate) fn logs_dir_shown(root: &Path, common_dir: &Path) -> String {
    shown(root, &logs_dir(common_dir))
}

/// A folder as shown to the user: relative to the work tree `root` when inside it.
pub(crate) fn shown(root: &Path, dir: &Path) -> String {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    dir.strip_prefix(&root).unwrap_or(dir).display().to_string()
}

/// Runs kept in [`logs_dir`]: when a run makes its folder, only the newest this many (its own
/// included) stay.
pub(crate) const KEEP_RUNS: usize = 20;

/// Older runs' folders are also dropped, oldest first, while everything in [`logs_dir`] is
/// larger than this (the current run's folder is never dropped).
pub(crate) const LOGS_CAP: u64 = 256 << 20;

/// This run's folder of kept logs (`run-R` in [`logs_dir`]), made on first use, so a run that
/// starts no attempt neither makes one nor prunes the earlier runs' logs.
#[derive(Debug, Default)]
pub(crate) struct RunLogs {
    dir: std::sync::Mutex<Option<PathBuf>>,
}

impl RunLogs {
    /// The folder, made ([`new_run_dir`]) and the older runs pruned ([`prune_logs`]) the first
    /// time.
    pub(crate) fn dir(&self, common_dir: &Path) -> Result<PathBuf, crate::edge::fsx::Error> {
        let mut dir = held(&self.dir);
        if let Some(d) = dir.as_ref() {
            return Ok(d.clone());
        }
        let made = new_run_dir(common_dir)?;
        if let Err(e) = prune_logs(common_dir, &made, KEEP_RUNS, LOGS_CAP) {
            tracing::warn!("cannot prune the kept logs of earlier runs: {e}");
        }
        *dir = Some(made.clone());
        Ok(made)
    }

    /// The folder, when this run has made it (an attempt's logs were kept).
    pub(crate) fn made(&self) -> Option<PathBuf> {
        held(&self.dir).clone()
    }
}

/// The run number of a folder name in [`logs_dir`] (`run-12` → 12).
pub(crate) fn run_number(name: &str) -> Option<u32> {
    let n = name.strip_prefix("run-")?;
    (!n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit()))
        .then(|| n.parse().ok())
        .flatten()
}

/// Makes the next run's folder in [`logs_dir`]: `run-R`, R one more than any run there (so
/// numbers keep rising while older runs are pruned). The folder is created anew (`mkdir`,
/// never an existing one or a link planted at its name: another number is taken then).
pub(crate) fn new_run_dir(common_dir: &Path) -> Result<PathBuf, crate::edge::fsx::Error> {
    let dir = logs_dir(common_dir);
    crate::edge::fsx::create_dir_all(common_dir, &dir)?;
    let last = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| run_number(&e.file_name().to_string_lossy()))
        .max()
        .unwrap_or(0);
    let mut n = last.saturating_add(1);
    loop {
        let path = dir.join(format!("run-{n}"));
        match std::fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < u32::MAX => n += 1,
            Err(source) => {
                return Err(crate::edge::fsx::Error::Io {
                    action: "create",
                    path,
                    source,
                });
            }
        }
    }
}

/// Bytes in `path`: a file's size, or the files directly in a folder (links not followed).
pub(crate) fn size_of(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::symlink_metadata(e.path()).ok())
        .map(|m| m.len())
        .sum()
}

/// The pruning rule of [`logs_dir`], applied when `current` (a run's new folder) is made: the
/// newest `keep_runs` runs stay (by run number; `current` is the newest), and older ones are
/// dropped, oldest first, while the folder holds more than `cap` bytes — never `current`. Files
/// kept flat by an older dagexec (`task-N-attempt-K.*`) count as the oldest run. Returns the
/// runs removed, oldest first.
pub(crate) fn prune_logs(
    common_dir: &Path,
    current: &Path,
    keep_runs: usize,
    cap: u64,
) -> Result<Vec<String>, crate::edge::fsx::Error> {
    let dir = logs_dir(common_dir);
    // (run number, the paths that make it up, their size); the flat files are run 0.
    let mut runs: Vec<(u32, Vec<PathBuf>, u64)> = Vec::new();
    let mut flat = (0, Vec::new(), 0);
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let path = entry.path();
        if path == current {
            continue;
        }
        if let Some(n) = run_number(&name) {
            let size = size_of(&path);
            runs.push((n, vec![path], size));
        } else if name.starts_with("task-") {
            flat.2 += size_of(&path);
            flat.1.push(path);
        }
    }
    if !flat.1.is_empty() {
        runs.push(flat);
    }
    runs.sort_by_key(|r| std::cmp::Reverse(r.0));
    let mut total = size_of(current) + runs.iter().map(|r| r.2).sum::<u64>();
    let mut removed = Vec::new();
    // Newest first: the first `keep_runs - 1` older runs may stay (with `current`).
    for (kept, (n, paths, size)) in runs.into_iter().enumerate().rev() {
        if kept + 1 < keep_runs && total <= cap {
            continue;
        }
        for path in &paths {
            crate::edge::fsx::remove_all(common_dir, path)?;
        }
        total = total.saturating_sub(size);
        removed.push(if n == 0 {
            "task-*".to_string()
        } else {
            format!("run-{n}")
        });
    }
    Ok(removed)
}

/// Keeps what attempt `attempt` of task `index` printed — its stdout and stderr (the tails the
/// worker runner keeps) and its work log — as `task-N-attempt-K.{stdout,stderr,log}` in the
/// run's folder `run_dir` ([`RunLogs::dir`]), through [`crate::edge::fsx`] (a link on the way is
/// refused; one at a file's name is removed, not followed). An attempt number is started once
/// per run, so nothing of another attempt is overwritten. Returns the files written.
pub(crate) fn keep_logs(
    common_dir: &Path,
    run_dir: &Path,
    index: usize,
    attempt: u32,
    run: &worker::WorkerRun,
) -> Result<Vec<PathBuf>, crate::edge::fsx::Error> {
    keep_run_logs(
        common_dir,
        run_dir,
        &format!("task-{index}-attempt-{attempt}"),
        run,
    )
}

/// Writes `run`'s stdout, stderr tail and work log to `<stem>.{stdout,stderr,log}` in
/// `run_dir`, as [`keep_logs`] does for a worker (the reviewer's are `<stem>.review`).
pub(crate) fn keep_run_logs(
    common_dir: &Path,
    run_dir: &Path,
    stem: &str,
    run: &worker::WorkerRun,
) -> Result<Vec<PathBuf>, crate::edge::fsx::Error> {
    crate::edge::fsx::create_dir_all(common_dir, run_dir)?;
    let mut written = Vec::new();
    let files = [
        ("stdout", Some(&run.stdout)),
        ("stderr", Some(&run.stderr_tail)),
        ("log", run.log.as_ref()),
    ];
    for (ext, text) in files {
        // What an earlier run of the same stem kept goes first, a kind this run lacks
        // included: a retry that wrote no work log never shows the one before it as its own.
        let path = run_dir.join(format!("{stem}.{ext}"));
        crate::edge::fsx::remove_file(common_dir, &path)?;
        let Some(text) = text else { continue };
        crate::edge::fsx::write(common_dir, &path, text.as_bytes())?;
        written.push(path);
    }
    Ok(written)
}

/// `task-N-attempt-K.kind` → (N, K, kind).
pub(crate) fn parse_log_name(name: &str) -> Option<(usize, u32, String)> {
    let rest = name.strip_prefix("task-")?;
    let (task, rest) = rest.split_once("-attempt-")?;
    let (attempt, kind) = rest.split_once('.')?;
    Some((task.parse().ok()?, attempt.parse().ok()?, kind.to_string()))
}

/// The kept logs: for each task index, each attempt kept (its run, its number, the kinds kept:
/// `stdout`, `stderr`, `log`), oldest run first. Files kept flat by an older dagexec are run 0.
/// Empty when there are none.
pub(crate) fn kept_logs(common_dir: &Path) -> crate::pure::render::status::KeptLogs {
    use crate::pure::render::status::KeptAttempt;
    let mut found: std::collections::BTreeMap<(usize, u32, u32), Vec<String>> =
        std::collections::BTreeMap::new();
    let dir = logs_dir(common_dir);
    let mut add = |run: u32, name: &str| {
        if let Some((task, attempt, kind)) = parse_log_name(name) {
            found.entry((task, run, attempt)).or_default().push(kind);
        }
    };
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        match run_number(&name) {
            Some(run) if is_dir => {
                for file in std::fs::read_dir(entry.path())
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    add(run, &file.file_name().to_string_lossy());
                }
            }
            _ => add(0, &name),
        }
    }
    let mut kept = crate::pure::render::status::KeptLogs::default();
    for ((task, run, attempt), mut kinds) in found {
        let rank = |k: &String| ["stdout", "stderr", "log"].iter().position(|x| x == k);
        kinds.sort_by_key(|k| (rank(k).unwrap_or(3), k.clone()));
        kept.entry(task).or_default().push(KeptAttempt {
            run,
            attempt,
            kinds,
        });
    }
    kept
}
