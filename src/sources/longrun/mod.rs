//! Long-run plans (`seeds/long-run-executor.md`): a folder of numbered `NN-PLAN.md` files run
//! through the same engine as `plan.json`, one fresh worker per PLAN.md.
//!
//! Layout (the seed's `state_path`, given to `dagexec run --long-run DIR`):
//! ```text
//! DIR/plans/NN-PLAN.md          the plans (or DIR/NN-PLAN.md); front matter `depends_on`, `title`
//! DIR/plans/NN-CHECKPOINT.json  written by the worker; its resume state on the next attempt
//!                               (kept with the attempt's work in `.git/dagexec/checkpoints/`
//!                               when it fails or the runner dies, see [`partial`])
//! DIR/summaries/NN-SUMMARY.md   written by dagexec when a plan completes; a completed one is skipped
//! DIR/ISSUES.md                 the seed's issue log (the worker's)
//! DIR/STATE.md                  its "Current Position" section rewritten with each round commit
//! DIR/logs/NN-attempt-K.log     a worker's raw output when its OUTPUT_JSON block is unusable
//! DIR/spec/spec.md              the spec (or DIR/spec.md), `planning/requirements.md`, `tasks.md`
//! DIR/plan.json                 the generated dagexec plan: the run's state, committed per round
//! ```
//! [`prepare`] reads the folder and writes `DIR/plan.json` (carrying over the state of an
//! earlier run); the runner then executes it like any plan. [`folder`] builds the plan,
//! [`prompt`] the seed's executor prompt and summaries, [`output`] parses the worker's
//! `OUTPUT_JSON` block.

pub mod folder;
pub mod output;
pub mod partial;
pub mod prompt;
pub mod state;

use std::path::{Path, PathBuf};

use folder::{Paths, PlanFile};

use super::Prepared;
use super::generated::rel;

/// Why a long-run folder cannot run.
#[derive(Debug, thiserror::Error)]
pub enum LongRunError {
    #[error("{}: {message}", path.display())]
    Read { path: PathBuf, message: String },
    #[error("{dir}: no NN-PLAN.md files (looked in {dir}/plans and {dir})")]
    NoPlans { dir: String },
    #[error("{dir}: no spec.md (looked for {tried})")]
    NoSpec { dir: String, tried: String },
    #[error("{path}: front matter: {message}")]
    FrontMatter { path: String, message: String },
    #[error("{path}: depends_on names plan {dep:?}, which is not in the folder (plans: {known})")]
    UnknownDependency {
        path: String,
        dep: String,
        known: String,
    },
    #[error("{path}: depends_on names the plan itself ({number})")]
    SelfDependency { path: String, number: String },
    #[error("{}: depends_on makes a cycle: {}", cycle.first().map_or("", String::as_str), cycle.join(" → "))]
    Cycle {
        /// The plan files along `depends_on`, the first repeated at the end.
        cycle: Vec<String>,
    },
    #[error("the PLAN.md files changed since plan.json was generated")]
    Changed,
    #[error("{} is outside the repository {}", dir.display(), root.display())]
    Outside { dir: PathBuf, root: PathBuf },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl LongRunError {
    /// What to do about it.
    pub fn hint(&self) -> String {
        match self {
            LongRunError::NoPlans { .. } => {
                "Name the plans 01-PLAN.md, 02-PLAN.md, … in DIR/plans.".into()
            }
            LongRunError::NoSpec { .. } => {
                "Put the spec at DIR/spec/spec.md (requirements at DIR/spec/planning/requirements.md)."
                    .into()
            }
            LongRunError::FrontMatter { .. } => {
                "The front matter is YAML between two --- lines, e.g. depends_on: [\"01\"].".into()
            }
            LongRunError::UnknownDependency { .. } => {
                "depends_on lists plan numbers of this folder; fix or remove the entry.".into()
            }
            LongRunError::SelfDependency { .. } => {
                "Remove the plan's own number from its depends_on.".into()
            }
            LongRunError::Cycle { .. } => {
                "Each plan in the cycle waits for the next: remove one of these depends_on entries.".into()
            }
            LongRunError::Changed => {
                "Finish or drop the earlier run: delete DIR/plan.json to start over from the summaries."
                    .into()
            }
            LongRunError::Outside { .. } => "Run dagexec from the repository holding DIR.".into(),
            LongRunError::Read { .. } | LongRunError::Write { .. } => String::new(),
        }
    }
}

/// A long-run task's prompt with its resume state filled in from the checkpoint file in
/// `tree` (the task's worktree, or the repository for `dagexec prompt`) when it is a regular
/// file; other tasks' prompts unchanged.
pub fn with_checkpoint(task: &crate::pure::plan::model::Task, tree: &Path, prompt: &str) -> String {
    let Some(path) = task
        .extra
        .get(folder::LONG_RUN_FIELD)
        .and_then(|v| v.get("checkpoint"))
        .and_then(|v| v.as_str())
    else {
        return prompt.to_string();
    };
    // The worker's file, read as the checkpoint watcher reads it: not through a link, never
    // waiting on a FIFO, at most 1 MiB (a longer one is cut, so not JSON: ignored).
    let checkpoint = crate::edge::worker::read_tail(&tree.join(path), 1 << 20)
        .map(|t| t.into_string(crate::edge::worker::CUT_MARKER));
    prompt::with_resume_state(prompt, checkpoint.as_deref())
}

/// The seed's "defer" for long-run task `index` of `plan` (in `root`), after `dagexec answer
/// N defer` marked it skipped: its decision logged to `DIR/ISSUES.md` and a skipped
/// `NN-SUMMARY.md` written, so later runs skip the plan and the next plans continue. Returns
/// the files written (repository-relative); nothing for a task that is not a deferred
/// long-run plan.
pub fn defer(
    root: &Path,
    plan: &crate::pure::plan::model::Plan,
    index: usize,
) -> Result<Vec<String>, LongRunError> {
    let Some(task) = plan.tasks.get(index) else {
        return Ok(Vec::new());
    };
    let (Some(lr), Some(q)) = (
        task.extra.get(folder::LONG_RUN_FIELD),
        crate::pure::question::get(task),
    ) else {
        return Ok(Vec::new());
    };
    if !crate::pure::question::deferred(task) {
        return Ok(Vec::new());
    }
    let field = |k: &str| lr.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
    let (number, title, summary) = (field("number"), field("title"), field("summary"));
    let state = plan
        .extra
        .get(folder::LONG_RUN_FIELD)
        .and_then(|v| v.get("state"))
        .and_then(|v| v.as_str())
        .unwrap_or(".");
    let issues = format!("{state}/ISSUES.md");
    // Paths from the plan file: written only below `root`, never through a link (fsx).
    let write = |rel: &str, text: &str, append: bool| -> Result<(), LongRunError> {
        let path = root.join(rel);
        let io = |e: crate::edge::fsx::Error| LongRunError::Write {
            path: path.clone(),
            source: e.into(),
        };
        if append {
            let existed = std::fs::symlink_metadata(&path).is_ok();
            let text = if existed {
                text.to_string()
            } else {
                format!("# Issues\n{text}")
            };
            crate::edge::fsx::append(root, &path, text.as_bytes()).map_err(io)
        } else {
            crate::edge::fsx::write(root, &path, text.as_bytes()).map_err(io)
        }
    };
    write(&issues, &prompt::deferred_issue(&number, &title, &q), true)?;
    write(
        &summary,
        &prompt::skipped_summary_markdown(&number, &title, &q),
        false,
    )?;
    Ok(vec![issues, summary])
}

fn read(path: &Path) -> Result<Option<String>, LongRunError> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(LongRunError::Read {
            path: path.to_path_buf(),
            message: e.to_string(),
        }),
    }
}

/// The plan files of `plans_dir` (`NN-PLAN.md`), in number order: number, its text, path.
fn numbered_plans(
    plans_dir: &Path,
    state: &str,
) -> Result<Vec<(u64, String, PathBuf)>, LongRunError> {
    let entries = std::fs::read_dir(plans_dir).map_err(|e| LongRunError::Read {
        path: plans_dir.to_path_buf(),
        message: e.to_string(),
    })?;
    let mut found: Vec<(u64, String, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let n = folder::plan_number(&name)?.to_string();
            Some((n.parse().unwrap_or(u64::MAX), n, e.path()))
        })
        .collect();
    found.sort();
    if found.is_empty() {
        return Err(LongRunError::NoPlans {
            dir: state.to_string(),
        });
    }
    Ok(found)
}

/// Reads the long-run folder `dir` (inside `root`) and writes its plan as `dir/plan.json`,
/// keeping the state an earlier run left there. Without `write` the folder is not written to:
/// the plan goes to a temporary directory (`run --dry-run`).
pub fn prepare(root: &Path, dir: &Path, write: bool) -> Result<Prepared, LongRunError> {
    let abs = root.join(dir);
    let (root_c, abs_c, Some(state)) = super::generated::within(root, dir) else {
        return Err(LongRunError::Outside {
            dir: abs,
            root: root.to_path_buf(),
        });
    };
    // DIR/plans and DIR/spec, else DIR itself.
    let inside = |name: &str| Some(abs_c.join(name)).filter(|d| d.is_dir());
    let plans_dir = inside("plans").unwrap_or_else(|| abs_c.clone());
    let found = numbered_plans(&plans_dir, &state)?;
    let spec_dir = inside("spec").unwrap_or_else(|| abs_c.clone());
    let spec = read(&spec_dir.join("spec.md"))?.ok_or_else(|| LongRunError::NoSpec {
        dir: state.clone(),
        tried: format!("{state}/spec/spec.md and {state}/spec.md"),
    })?;
    let requirements = read(&spec_dir.join("planning/requirements.md"))?.unwrap_or_default();
    let paths = Paths {
        state: state.clone(),
        spec: rel(&root_c, &spec_dir),
    };
    let mut files = Vec::new();
    for (_, number, path) in found {
        let content = read(&path)?.unwrap_or_default();
        let summary = read(&root_c.join(paths.summary(&number)))?;
        files.push(PlanFile {
            path: rel(&root_c, &path),
            completed: summary.as_deref().is_some_and(folder::summary_completed),
            deferred: summary.as_deref().is_some_and(folder::summary_skipped),
            number,
            content,
        });
    }
    let mut plan = folder::build(&files, &paths, &spec, &requirements)?;
    let plan_path = abs.join("plan.json");
    if !plan_path.is_file() && write {
        // A fresh start (no plan.json, or the user deleted it to start over): no partial work
        // of an earlier run's attempts carries over.
        if let Ok(repo) = crate::edge::git::Repo::discover(root) {
            let store = partial::Store::new(repo.common_dir());
            for f in &files {
                store.remove(&paths.checkpoint(&f.number));
            }
        }
    }
    if plan_path.is_file() {
        let old = crate::edge::plan_file::load(&plan_path).map_err(|e| LongRunError::Read {
            path: plan_path.clone(),
            message: e.to_string(),
        })?;
        folder::carry_over(&mut plan, &old)?;
    }
    folder::skip_after_deferred(&mut plan);
    let created = write
        .then(|| super::prepared::created_by(&plan_path))
        .flatten();
    Prepared::save(&plan, plan_path, format!("{state}/plan.json"), write)
        .map(|p| p.creating(created))
        .map_err(|(path, source)| LongRunError::Write { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checkpoint file is the worker's: a link there is not followed (it could point at
    /// any file dagexec can read, which would go into the next prompt), and a FIFO is not
    /// waited on, as the checkpoint watcher reads it.
    #[test]
    fn a_checkpoint_that_is_a_link_or_a_fifo_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("secret.json");
        std::fs::write(&outside, r#"{"last_completed_task": 7, "secret": "s3"}"#).unwrap();
        let tree = dir.path().join("tree");
        std::fs::create_dir(&tree).unwrap();
        std::os::unix::fs::symlink(&outside, tree.join("link.json")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(tree.join("fifo.json"))
            .status();
        assert!(made.unwrap().success());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let prompt = |rel: &str| {
                let mut task = crate::pure::plan::model::Task::default();
                let lr = serde_json::json!({ "checkpoint": rel });
                task.extra.insert(folder::LONG_RUN_FIELD.into(), lr);
                with_checkpoint(&task, &tree, prompt::RESUME_STATE)
            };
            tx.send([prompt("link.json"), prompt("fifo.json")]).unwrap();
        });
        let prompts = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("read without waiting for a writer");
        assert_eq!(
            prompts,
            ["Starting fresh from Task 1."; 2].map(String::from)
        );
    }
}
