//! Resume (seed Step 1): tasks that were in progress start again; completed tasks are checked
//! against the commits, and the ones whose round never got committed run again.
//!
//! Nothing the user has is cleaned up: a task's work never reaches the work tree before its
//! round is committed (workers run in their own worktrees, the round is built in a temporary
//! index), so the only files to put right are those of a round commit a crash interrupted,
//! and [`recover`] finishes exactly those, from the record the round wrote before its commit
//! point. Files the user changed at declared paths are the pre-flight's question, not
//! something to restore.

use std::collections::BTreeMap;

use crate::edge::git::{Recovered, Repo};
use crate::flow::{RunError, RunOptions, Ui, save};
use crate::pure::graph::Dag;
use crate::pure::plan::model::{Plan, Status};
use crate::pure::{plan, update};

/// Seed Step 1 resume: in-progress tasks back to pending with their partial work removed,
/// completed tasks checked against the commits.
pub(super) fn resume(
    repo: &Repo,
    plan: &mut Plan,
    interrupted: Interrupted,
    opts: &RunOptions,
    ui: &Ui,
) -> Result<(), RunError> {
    let work = update::prepare_resume(plan);
    say_reset(plan, &work, ui);
    // A completed task is verified against the commits: its round was committed when the
    // plan at HEAD records it completed. (Checking its files alone is not enough: a later,
    // uncommitted round may have changed the same files.) Otherwise every file it declares
    // must be committed, as the seed checks. A task that declares no files has nothing to
    // verify.
    let committed: Option<Plan> = repo
        .read_at("HEAD", &opts.plan_rel)?
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .and_then(|text| plan::parse(&text, &opts.plan).ok());
    let committed_done = |i: usize| {
        committed
            .as_ref()
            .and_then(|p| p.tasks.get(i))
            .is_some_and(|t| t.status == Status::Completed)
    };
    // Whether dagexec's own rounds decide what is completed: it commits every completed
    // task with its round's plan, so a task completed in the work tree and not at HEAD never
    // had its round committed. Known when HEAD's plan records a round, when a round was
    // recorded and never published, or when HEAD has the plan and the task has attempts
    // dagexec recorded (no plan at HEAD: an archiving commit finished, or a plan never
    // committed — the seed's file check decides).
    let rounds_recorded = interrupted == Interrupted::NotCommitted
        || committed
            .as_ref()
            .is_some_and(|p| crate::flow::round_counter(p) > 0);
    let ran_here: std::collections::BTreeSet<usize> = crate::pure::usage::records(plan)
        .iter()
        .map(|r| r.task)
        .collect();
    let dagexec_ran = |i: usize| rounds_recorded || (committed.is_some() && ran_here.contains(&i));
    let mut failures = BTreeMap::new();
    for v in &work.verify {
        if v.creates.is_empty() && v.modifies.is_empty() {
            continue;
        }
        let why = if let Some(f) = v.creates.iter().find(|f| !repo.root().join(f).is_file()) {
            Some(format!("{f} does not exist"))
        } else if committed_done(v.task) {
            None
        } else if dagexec_ran(v.task) {
            // dagexec commits every completed task with its round's plan; a crash before that
            // commit point left the task's work uncommitted (and out of the work tree).
            Some("its round was not committed".to_string())
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
    if !failures.is_empty() {
        let names = plan::ids::TaskNames::of(plan);
        for (&t, why) in &failures {
            ui.say(format!(
                "Task {} was marked completed but {why}; it runs again.",
                names.get(t)
            ));
        }
        update::fail_verification(plan, &failures);
    }
    save(plan, opts)
}

/// What resuming did to the tasks in progress when the last run stopped.
fn say_reset(plan: &Plan, work: &update::ResumeWork, ui: &Ui) {
    if !work.given_back.is_empty() {
        ui.say(format!(
            "{} before the last run stopped, but {} round was never committed: {} not counted.",
            plan::ids::tasks_subject(plan, &work.given_back, "completed", "completed"),
            if work.given_back.len() == 1 {
                "its"
            } else {
                "their"
            },
            if work.given_back.len() == 1 {
                "that attempt is"
            } else {
                "those attempts are"
            },
        ));
    }
    if !work.reset.is_empty() {
        ui.say(format!(
            "{} in progress when the last run stopped; {} again.",
            plan::ids::tasks_subject(plan, &work.reset, "was", "were"),
            if work.reset.len() == 1 {
                "it starts"
            } else {
                "they start"
            }
        ));
    }
}

/// Pending tasks that have used every attempt (the last one's result never committed: a crash
/// or `kill -9` cut it short, or it failed and a Ctrl-C came before its round's commit) fail
/// instead of getting a fourth, and their dependents are skipped.
pub(super) fn fail_exhausted(
    plan: &mut Plan,
    dag: &Dag,
    opts: &RunOptions,
    ui: &Ui,
) -> Result<(), RunError> {
    let exhausted = update::fail_exhausted(plan, dag);
    if exhausted.failed.is_empty() {
        return Ok(());
    }
    let names = plan::ids::TaskNames::of(plan);
    for &t in &exhausted.failed {
        ui.say(format!(
            "Task {} has used all {} attempts (the last one's result was never committed: the run was killed while it ran, or interrupted after it failed); it fails.",
            names.get(t),
            crate::pure::outcome::MAX_ATTEMPTS
        ));
    }
    if !exhausted.skipped.is_empty() {
        ui.say(format!(
            "  skipped because a dependency failed or was blocked: {}",
            names.list(&exhausted.skipped)
        ));
    }
    save(plan, opts)
}

/// Finishes or drops a round commit an interrupted run left (see `git::round`), before
/// anything else looks at the work tree. What it found decides how the plan is read
/// ([`Interrupted`]).
pub(super) fn recover(repo: &Repo, plan_rel: &str, ui: &Ui) -> Result<Interrupted, RunError> {
    repo.check_index_lock()?;
    let found = repo.recover_round(&[plan_rel.to_owned()])?;
    Ok(match found {
        Recovered::Nothing => Interrupted::Nothing,
        Recovered::NotCommitted => Interrupted::NotCommitted,
        Recovered::Finished { sha, kept } => {
            ui.say(format!(
                "Finished bringing the work tree to round commit {} that an interrupted run had made.",
                &sha[..sha.len().min(12)]
            ));
            for path in kept {
                ui.say(format!(
                    "  {path}: left as you changed it (the round committed another version)"
                ));
            }
            Interrupted::Finished
        }
        Recovered::Moved => {
            ui.say(
                "An interrupted round commit was dropped: HEAD has moved since; nothing was changed.",
            );
            Interrupted::Nothing
        }
    })
}

/// What an interrupted run left of its last round commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Interrupted {
    /// No round commit was in flight (or `HEAD` has moved past it).
    Nothing,
    /// A round was recorded but never published: nothing it decided is true, whatever a
    /// plan in the work tree says.
    NotCommitted,
    /// A published round was finished: the plan in the work tree is the commit's now.
    Finished,
}
