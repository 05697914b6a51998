//! Resume (seed Step 1): tasks that were in progress start again with their partial work
//! removed; completed tasks are checked against the commits, and the ones whose round never
//! got committed run again.

use std::collections::BTreeMap;

use super::{RunError, RunOptions, Ui, list, save};
use crate::git::Repo;
use crate::plan;
use crate::plan::model::{Plan, Status};
use crate::update;

/// Seed Step 1 resume: in-progress tasks back to pending with their partial work removed,
/// completed tasks checked against the commits.
pub(super) fn resume(
    repo: &Repo,
    plan: &mut Plan,
    opts: &RunOptions,
    ui: &Ui,
) -> Result<(), RunError> {
    let work = update::prepare_resume(plan);
    for c in &work.cleanup {
        let paths: Vec<String> = c.revert.iter().chain(&c.delete).cloned().collect();
        repo.restore(&paths)?;
    }
    if !work.reset.is_empty() {
        ui.say(format!(
            "Tasks {} were in progress when the last run stopped; they start again.",
            list(&work.reset)
        ));
    }
    // A completed task is verified against the commits: its round was committed when the
    // plan at HEAD records it completed. (Checking its files alone is not enough: a later,
    // uncommitted round may have changed the same files.) Otherwise every file it declares
    // must be committed, as the seed checks. A task that declares no files has nothing to
    // verify.
    let committed: Option<Plan> = repo
        .read_at_head(&opts.plan_rel)?
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .and_then(|text| plan::parse(&text, &opts.plan).ok());
    let committed_done = |i: usize| {
        committed
            .as_ref()
            .and_then(|p| p.tasks.get(i))
            .is_some_and(|t| t.status == Status::Completed)
    };
    let mut failures = BTreeMap::new();
    for v in &work.verify {
        if v.creates.is_empty() && v.modifies.is_empty() {
            continue;
        }
        let why = if let Some(f) = v.creates.iter().find(|f| !repo.root().join(f).is_file()) {
            Some(format!("{f} does not exist"))
        } else if committed_done(v.task) {
            None
        } else {
            // Not recorded at HEAD (a plan run by another executor commits only the files):
            // the seed's check, every declared file committed as it is.
            let mut uncommitted = None;
            for f in v.modifies.iter().chain(&v.creates) {
                if !repo.is_committed(f)? {
                    uncommitted = Some(format!("{f} is not committed"));
                    break;
                }
            }
            uncommitted
        };
        if let Some(why) = why {
            failures.insert(v.task, why);
        }
    }
    for &t in failures.keys() {
        let task = &plan.tasks[t];
        let paths: Vec<String> = task.files().cloned().collect();
        repo.restore(&paths)?;
    }
    if !failures.is_empty() {
        for (t, why) in &failures {
            ui.say(format!(
                "Task {t} was marked completed but {why}; it runs again."
            ));
        }
        update::fail_verification(plan, &failures);
    }
    save(plan, opts)
}
