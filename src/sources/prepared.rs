//! Every plan source read one way: a [`Source`] (a task list, a long-run folder, a GitHub
//! issue's sub-issues) is prepared into the plan a run reads — a [`Prepared`], whatever the
//! source — and what stops it is said as [`Problem`]s.

use std::path::{Path, PathBuf};

use super::{Format, Problem, issues, longrun};

/// Where a plan comes from when it is not a plan.json.
#[derive(Debug, Clone)]
pub enum Source {
    /// A task list (`--plan specs/001-x/tasks.md`, `.taskmaster/tasks/tasks.json`, …).
    TaskList { format: Format, path: PathBuf },
    /// A long-run folder of `NN-PLAN.md` (`run --long-run DIR`).
    LongRun(PathBuf),
    /// A GitHub issue's sub-issues (`--issue N`).
    Issues(issues::read::Options),
}

impl Source {
    /// The source a path names as the Action's `plan` input, when it is one: a folder is a
    /// long-run folder, a file in a task-list format a task list; anything else is a
    /// plan.json (`None`).
    pub fn at(path: &Path) -> Option<Source> {
        if path.is_dir() {
            return Some(Source::LongRun(path.to_path_buf()));
        }
        let format = Format::detect(path).filter(|_| path.is_file())?;
        Some(Source::TaskList {
            format,
            path: path.to_path_buf(),
        })
    }

    /// Reads the source (paths inside `root`) and writes its plan where runs keep it, carrying
    /// over an earlier run's state — with `write` false in a temporary directory instead
    /// (`validate`, `status`, `run --dry-run`).
    pub fn prepare(&self, root: &Path, write: bool) -> Result<Prepared, Vec<Problem>> {
        match self {
            Source::TaskList { format, path } => super::prepare(*format, root, path, write),
            Source::LongRun(dir) => longrun::prepare(root, dir, write)
                .map_err(|e| vec![Problem::new(e.to_string(), e.hint())]),
            Source::Issues(opts) => issues::read::prepare(root, opts, write).map_err(|p| vec![p]),
        }
    }
}

/// A source's plan, prepared: where it is and what reading it said.
#[derive(Debug)]
pub struct Prepared {
    /// The generated plan (`<dir>/.dagexec/plan.json`, `DIR/plan.json`,
    /// `.design/issues/N/plan.json`, or in `scratch`).
    pub plan: PathBuf,
    /// Where the plan is kept, relative to the root (also when it went to `scratch`).
    pub plan_rel: String,
    /// Findings about the source that do not stop the run.
    pub warnings: Vec<String>,
    /// What reading the source did and cost, for the person who started it (lines).
    pub notes: String,
    /// When the plan was not written in place, the temporary directory holding it (removed
    /// on drop).
    pub scratch: Option<tempfile::TempDir>,
    /// Every task is completed already and the plan archived (`plan` is the archive):
    /// nothing is left to run.
    pub archived: bool,
    /// What reading the issues found (`Source::Issues`, when they were read rather than the
    /// committed plan used): the Action's status comment on the parent lists it.
    pub read: Option<issues::read::ReadReport>,
    /// What writing the plan created (its folder, else the file) and the plan's hash as
    /// written: [`Prepared::forget_unused`].
    pub(crate) created: Option<(PathBuf, u64)>,
}

/// What writing a plan at `plan_path` would create: its folder when that is missing, else
/// the file when that is.
pub(crate) fn created_by(plan_path: &Path) -> Option<PathBuf> {
    match plan_path.parent() {
        Some(dir) if !dir.exists() => Some(dir.to_path_buf()),
        _ => (!plan_path.exists()).then(|| plan_path.to_path_buf()),
    }
}

impl Prepared {
    /// The plan at `plan` (kept at `plan_rel`), nothing said about it yet.
    pub fn at(plan: PathBuf, plan_rel: String, scratch: Option<tempfile::TempDir>) -> Self {
        Prepared {
            plan,
            plan_rel,
            warnings: Vec::new(),
            notes: String::new(),
            scratch,
            archived: false,
            read: None,
            created: None,
        }
    }

    /// Notes that writing the plan created `created` ([`created_by`], taken before), with
    /// the plan as it is now.
    pub(crate) fn creating(self, created: Option<PathBuf>) -> Self {
        let written = std::fs::read(&self.plan).ok();
        let created = created.zip(written.map(|b| crate::pure::hash::fnv1a(&b)));
        Prepared { created, ..self }
    }

    /// After the command: what preparing created is removed again when the plan is still as
    /// it was written — a run refused before it started leaves the tree as it found it.
    pub fn forget_unused(&self) {
        let Some((created, hash)) = &self.created else {
            return;
        };
        let unchanged =
            std::fs::read(&self.plan).is_ok_and(|b| crate::pure::hash::fnv1a(&b) == *hash);
        let Some(base) = created.parent().filter(|_| unchanged) else {
            return;
        };
        if crate::edge::fsx::remove_file(base, &self.plan).is_ok() && *created != self.plan {
            // Only when empty; removing a directory never follows a link.
            let _ = std::fs::remove_dir(created);
        }
    }

    /// `plan` written at `plan_path` (kept at `plan_rel`), or with `write` false in a
    /// temporary directory instead (removed when the `Prepared` drops); `Err`: the path that
    /// could not be written, and why.
    pub(crate) fn save(
        plan: &crate::pure::plan::model::Plan,
        plan_path: PathBuf,
        plan_rel: String,
        write: bool,
    ) -> Result<Prepared, (PathBuf, std::io::Error)> {
        let scratch = if write {
            None
        } else {
            Some(tempfile::tempdir().map_err(|e| (std::env::temp_dir(), e))?)
        };
        let target = scratch
            .as_ref()
            .map_or(plan_path, |d| d.path().join("plan.json"));
        crate::edge::plan_file::save(plan, &target).map_err(|e| (target.clone(), e))?;
        Ok(Prepared::at(target, plan_rel, scratch))
    }
}
