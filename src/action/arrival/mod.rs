//! An arrival: a worker job's artifact, found by its exact name and judged. Shared by
//! finalize (a round's matrix entries, [`crate::action::jobs::finalize`]) and the conductor (a task run's
//! artifact, [`crate::action::jobs::conduct`]). The artifact is hostile until checked: only the name each
//! entry's job uploads counts ([`accepted_names`], [`collect`]; forged ones are reported and
//! ignored), and a patch that touches what no task may change — the plan, `.github/`, the
//! action's own files — is refused ([`refused`]) before the local runner's processor judges
//! the rest ([`crate::pure::outcome`], and the reviewer's verdict by [`crate::pure::review::conclude`]).
//! Under `overlap: merge`, an arrival that meets what landed is merged aside by the ledger's
//! one sequence with the writer's I/O (`aside::merge_aside`).

mod aside;
mod integrate;

pub(crate) use aside::{Aside, merge_aside};
pub(crate) use integrate::{Integrator, commit_round, done_stop, integrate, prepare_arrivals};

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::artifact::{self, Collected};
use super::matrix::{self, MatrixEntry};
use super::{ActionError, Inputs};
use crate::edge::git::Repo;
use crate::flow::Ui;
use crate::flow::attempt::Judged;
use crate::pure::outcome::{self, AttemptReport, Exit, Verdict};
use crate::pure::plan::{self, model::Status};

/// Where a writer (finalize, the conductor) judges arrivals: its checkout, the plan as it
/// stands there, the job's inputs and the display.
#[derive(Clone, Copy)]
pub(crate) struct Judge<'a> {
    pub repo: &'a Repo,
    pub plan: &'a plan::model::Plan,
    pub inputs: &'a Inputs,
    pub ui: &'a Ui,
}

/// Judges one matrix entry from its artifact (a missing one is the seed's "no status line and
/// no log"), refusing patches that touch what a task may never change. Its job started at
/// `base` (`None`: the checkout's `HEAD`), and its patch is read against that commit or tree:
/// the conductor's arrivals under `overlap: merge`, whose runs started before the branch
/// moved, and a rounds rebase built on the chain's merged changes.
pub(super) fn judge_entry_at(
    at: Judge<'_>,
    e: &MatrixEntry,
    base: Option<&str>,
    found: Option<&Result<Collected, String>>,
) -> Judged {
    let Judge {
        repo,
        plan,
        inputs,
        ui,
    } = at;
    let task = &plan.tasks[e.task];
    let (mut report, mut patch, duration, reviewed) = read_found(found, e, ui);
    // What the job's result file says, bounded and made safe again below: the file is the job's.
    let result = found.and_then(|f| f.as_ref().ok()).map(|c| &c.result);
    // The attempt's time and cost, within bounds (nothing is known of a job without artifact).
    let measured = result.map(|r| r.measured(jiff::Timestamp::now()));
    let timed_out = matches!(report.exit, Exit::TimedOut(_));
    let (touched, links, broken) = touched_by(repo, &mut patch, base.unwrap_or("HEAD"));
    report.changed.extend(touched.iter().cloned());
    // A task list a plan was generated from is dagexec's to write back: the work job drops a
    // worker's edit of it from the patch, as it drops the plan's.
    let tasks_md = crate::sources::own_file(plan);
    let own = outcome::OwnFiles {
        plan: &inputs.plan_rel,
        task_list: tasks_md.as_deref(),
    };
    let mut verdict = outcome::judge_among(e.task, task, &report, own);
    // What the agent CLI said (its failure, refusals, no retry), as the work job read it;
    // bounded again, since the file is the job's.
    if let Some(r) = result {
        heed_said(&mut verdict, &r.said);
    }
    crate::flow::steps::longrun::quiet_long_run(task, &mut verdict);
    // A worker that stops for the user (the long-run seed's NEEDS_DECISION / NEEDS_ACTION, as
    // an OUTPUT_JSON block or a `NEEDS_DECISION: …` / `NEEDS_ACTION: …` last line) blocks
    // with a question.
    let question = stop_for_user(&mut verdict, &report.output);
    // What the work job refused to take of the worker's tree (too large, a full disk):
    // bounded and made safe again, since the file is the job's.
    let refused_by_job = result
        .and_then(|r| r.refused.as_deref())
        .map(|r| outcome::clip_result(crate::pure::sanitize::line(r).trim()));
    let refusal = broken
        .or(refused_by_job)
        .or_else(|| outcome::refused_changes(task, &touched, &links, &inputs.plan_rel))
        .or_else(|| {
            let protected = Protected::at(repo.root(), inputs.allow_workflow_changes);
            refused(&touched, own, protected)
        });
    if let Some(reason) = refusal {
        verdict = Verdict::refused(reason, verdict.warnings);
    }
    // The reviewer's verdict, concluded by the seed's rules as locally. A merge's re-check
    // (`overlap: merge`) continues an attempt whose review concluded when it arrived.
    let recheck = matches!(
        crate::action::rounds::FollowUp::of(plan, e.task, e.attempt),
        Some(crate::action::rounds::FollowUp::Recheck { .. })
    );
    let concluded = if recheck {
        None
    } else {
        conclude_review(e, task, &mut verdict, reviewed)
    };
    let (reviews, question) = match concluded {
        Some((reviews, question)) => (Some(reviews), question),
        None => (None, question),
    };
    for w in &verdict.warnings {
        ui.say(format!("  task {}: warning: {w}", e.task));
    }
    ui.say(format!(
        "  task {} ({}) attempt {}: {} — {}",
        e.task, task.subject, e.attempt, verdict.status, verdict.result
    ));
    Judged {
        index: e.task,
        attempt: e.attempt,
        verdict,
        patch,
        touched,
        duration,
        reviews,
        question,
        measured,
        timed_out,
        rebase: false,
        reported: None,
        // What the work job's network guards saw.
        network: result.map(|r| r.network.checked()).unwrap_or_default(),
    }
}

/// What the entry's job left: its report, patch, duration and review (a missing or unreadable
/// artifact is the seed's "no status line and no log", said in the log).
fn read_found<'a>(
    found: Option<&'a Result<Collected, String>>,
    e: &MatrixEntry,
    ui: &Ui,
) -> (
    AttemptReport,
    crate::edge::git::Patch,
    Duration,
    Option<&'a artifact::ReviewRecord>,
) {
    match found {
        Some(Ok(c)) => {
            return (
                c.result.report(c.log.clone()),
                c.patch.clone(),
                Duration::from_millis(c.result.duration_ms),
                c.result.review.as_ref(),
            );
        }
        Some(Err(why)) => ui.say(format!("  task {}: unreadable artifact: {why}", e.task)),
        None => ui.say(format!("  task {}: no artifact from its job", e.task)),
    }
    (Default::default(), Default::default(), Duration::ZERO, None)
}

/// What the patch touches (paths, links): the patch is what gets applied, so this comes from
/// the patch itself (applied to a scratch index of the base), not from the job's own account.
/// A patch that does not apply is cleared, and why is the third value.
fn touched_by(
    repo: &Repo,
    patch: &mut crate::edge::git::Patch,
    base: &str,
) -> (Vec<String>, Vec<crate::pure::paths::Link>, Option<String>) {
    match repo.patch_changes_at(base, &*patch) {
        Ok((touched, links)) => (touched, links, None),
        Err(err) => {
            let broken = format!(
                "the job's changes.patch does not apply to the round's base ({})",
                err.to_string().lines().next().unwrap_or("")
            );
            patch.clear();
            (Vec::new(), Vec::new(), Some(broken))
        }
    }
}

/// A worker that stops for the user blocks with its question (an attempt that completed
/// asks none).
fn stop_for_user(verdict: &mut Verdict, output: &str) -> Option<crate::pure::question::Question> {
    let question = (verdict.status != Status::Completed)
        .then(|| needs_input(output))
        .flatten();
    if let Some(q) = &question {
        *verdict = Verdict {
            status: Status::Blocked,
            result: format!(
                "waits for the user: {}",
                q.text.lines().next().unwrap_or("")
            ),
            acceptance_passed: false,
            failed_checks: Vec::new(),
            warnings: std::mem::take(&mut verdict.warnings),
            halt: None,
        };
    }
    question
}

/// A completed attempt's review, concluded by the seed's rules: the task's review history and
/// its question, when its job reported a review (`None`: nothing to conclude; a task that
/// names its own reviewer but whose job reported none fails).
fn conclude_review(
    e: &MatrixEntry,
    task: &plan::model::Task,
    verdict: &mut Verdict,
    reviewed: Option<&artifact::ReviewRecord>,
) -> Option<(
    Vec<crate::pure::review::ReviewEntry>,
    Option<crate::pure::question::Question>,
)> {
    if verdict.status != Status::Completed {
        return None;
    }
    let own = crate::pure::review::reviewer_for(task, None).is_some();
    match reviewed {
        Some(r) => {
            let c = crate::pure::review::conclude(
                e.task,
                task,
                e.attempt,
                verdict,
                crate::pure::review::history(task),
                r.outcome(),
            );
            Some((c.history, c.question))
        }
        // The task names its own reviewer, so its job must have run it.
        None if own => {
            verdict.status = Status::Failed;
            verdict.result =
                "review failed: the task names a reviewer, but its job reported no review".into();
            None
        }
        None => None,
    }
}

/// The question a worker's output asks the user, if it stopped for one: an `OUTPUT_JSON`
/// block with status `NEEDS_DECISION` or `NEEDS_ACTION`, or a last line `NEEDS_DECISION: …` or
/// `NEEDS_ACTION: …`.
fn needs_input(output: &str) -> Option<crate::pure::question::Question> {
    use crate::sources::longrun::output::{self, Output};
    match output::parse(output) {
        Ok(Output::NeedsDecision(q) | Output::NeedsAction(q)) => return Some(q),
        Ok(_) => return None,
        Err(_) => {}
    }
    crate::pure::question::from_status_line(output)
}

/// What the agent CLI said, as the work job read it, into `verdict` (bounded again, since the
/// file is the job's). A budget stop — the work job's gateway refused a request past the
/// budget — fails the attempt whatever the worker printed after, as locally.
fn heed_said(verdict: &mut Verdict, said: &crate::pure::said::Said) {
    let said = said.clone().checked();
    match (&said.halt, &said.failure) {
        (Some(crate::pure::said::Halt::Budget), Some(why)) => {
            crate::pure::outcome::stopped_by_budget(verdict, why);
        }
        _ => crate::pure::outcome::heed(verdict, &said),
    }
}

/// What, beyond the plan, a task's patch may not change: what GitHub or the action runs with
/// the write token. `.github/` (workflows, but also composite actions and the files they
/// read), the root `action.yml`/`action.yaml`, and — when the repository is itself an action
/// that `uses: ./` builds from source — the files `scripts/install-action.sh` builds it from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protected {
    /// The user opted in (`allow-workflow-changes: true`): only the plan is protected.
    Nothing,
    /// `.github/` and a root action metadata file.
    Workflows,
    /// Those, and the action's build inputs: the repository holds the action's source.
    WorkflowsAndActionSource,
}

impl Protected {
    /// What to protect in the checkout at `root` (the round's base).
    pub fn at(root: &Path, allow_workflow_changes: bool) -> Protected {
        if allow_workflow_changes {
            Protected::Nothing
        } else if ACTION_FILES.iter().any(|f| root.join(f).exists()) {
            Protected::WorkflowsAndActionSource
        } else {
            Protected::Workflows
        }
    }
}

/// The metadata file that makes a repository root an action (`uses: ./`, `uses: org/repo@ref`).
const ACTION_FILES: [&str; 2] = ["action.yml", "action.yaml"];

/// What `scripts/install-action.sh` builds the action from when it has no release to fetch.
const ACTION_SOURCE: [&str; 5] = [
    "Cargo.toml",
    "Cargo.lock",
    "build.rs",
    "src/",
    "scripts/install-action.sh",
];

/// Why `path` is protected, if it is. Compared case-insensitively: on a case-insensitive
/// file system (macOS, Windows runners) `.GitHub/workflows/x.yml` is the workflow.
fn protected_reason(path: &str, protected: Protected) -> Option<&'static str> {
    let lower = path.to_ascii_lowercase();
    let under = |dir: &str| lower.starts_with(dir) || lower == dir.trim_end_matches('/');
    match protected {
        Protected::Nothing => None,
        _ if under(".github/") => Some("GitHub runs what is under .github/ (workflows, actions)"),
        _ if ACTION_FILES.contains(&lower.as_str()) => {
            Some("it is the action's metadata, which `uses: ./` runs")
        }
        Protected::WorkflowsAndActionSource
            if ACTION_SOURCE.iter().any(|f| under(&f.to_ascii_lowercase())) =>
        {
            Some(
                "the action is built from it (this repository is an action that `uses: ./` builds from source)",
            )
        }
        _ => None,
    }
}

/// Why a patch touching `paths` is refused, if it is: it changes the plan or a Spec Kit
/// plan's tasks.md (`own`; the work job drops a worker's edit of them, so a patch holding one
/// is not the work job's), or what the jobs holding a write token would run ([`Protected`]).
pub fn refused(
    paths: &[String],
    own: outcome::OwnFiles<'_>,
    protected: Protected,
) -> Option<String> {
    let outcome::OwnFiles {
        plan: plan_rel,
        task_list: tasks_md,
    } = own;
    if let Some(p) = paths.iter().find(|p| p.as_str() == plan_rel) {
        return Some(format!(
            "the patch changes {p}, the plan itself; a task may not edit the execution state, so the patch was refused"
        ));
    }
    if let Some(p) = paths.iter().find(|p| Some(p.as_str()) == tasks_md) {
        return Some(format!(
            "the patch changes {p}, the task list only dagexec writes (the work job drops a worker's edit of it), so the patch was refused"
        ));
    }
    let (p, why) = paths
        .iter()
        .find_map(|p| Some((p, protected_reason(p, protected)?)))?;
    Some(format!(
        "the patch changes {p}, and {why}; changes to .github/, action.yml and the action's own source are refused unless the action's `allow-workflow-changes` input is true"
    ))
}

/// A matrix entry must name a task of the plan at the round's base, once.
pub(super) fn check_entries(
    entries: &[MatrixEntry],
    plan: &plan::model::Plan,
    base: &str,
) -> Result<(), ActionError> {
    let mut seen = std::collections::BTreeSet::new();
    for e in entries {
        if e.task >= plan.tasks.len() {
            return Err(ActionError::Input(format!(
                "the matrix names task {}, but the plan at {base} has {} task(s); the plan job's matrix and the plan disagree (was the plan input or the base changed between the jobs?), so nothing of this round was judged",
                e.task,
                plan.tasks.len()
            )));
        }
        if !seen.insert(e.task) {
            return Err(ActionError::Input(format!(
                "the matrix names task {} twice; the plan job writes each task once, so the matrix was not the plan job's",
                e.task
            )));
        }
    }
    Ok(())
}

/// The artifact names finalize accepts for `e`, best first: the one of this run attempt, then
/// those of earlier attempts. "Re-run failed jobs" starts attempt N+1 of the same run in which
/// only the failed jobs run again; the work jobs that passed keep the artifacts they uploaded
/// in their attempt, and GitHub keeps those, so a re-run finalize must take an earlier
/// attempt's artifact when its job was not re-run — and the re-run job's own when it was. A
/// name of a later attempt than `run_attempt` cannot come from this attempt's jobs.
pub fn accepted_names(run_id: &str, run_attempt: u32, e: &MatrixEntry) -> Vec<String> {
    (1..=run_attempt)
        .rev()
        .map(|k| matrix::artifact_name(run_id, &k.to_string(), e.task, e.attempt))
        .collect()
}

/// The artifacts read, by (task, attempt); `Err` says why one is unusable.
pub type FoundArtifacts = BTreeMap<(usize, u32), Result<Collected, String>>;

/// The downloaded artifacts under `dir` for the matrix `entries` of run `run_id`, attempt
/// `run_attempt`, by (task, attempt): for each entry exactly the artifact named for it (see
/// [`accepted_names`]; the latest run attempt wins). Every other entry of `dir` is returned as
/// ignored (and never read): a forged name, another run attempt, a task or attempt not in the
/// matrix.
pub fn collect(
    dir: &Path,
    run_id: &str,
    run_attempt: u32,
    entries: &[MatrixEntry],
) -> (FoundArtifacts, Vec<String>) {
    let mut present: std::collections::BTreeSet<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    let mut found = BTreeMap::new();
    for e in entries {
        let names = accepted_names(run_id, run_attempt, e);
        if let Some(name) = names.iter().find(|n| present.contains(*n)) {
            let read = artifact::read(&dir.join(name)).and_then(|c| of_entry(c, name, e));
            found.insert((e.task, e.attempt), read);
        }
        for n in &names {
            present.remove(n);
        }
    }
    (found, present.into_iter().collect())
}

/// Artifact `name`'s contents `c`, when they are the result of `e`'s task and attempt: the
/// right name around another task's result is unreadable, not that task's.
pub(crate) fn of_entry(c: Collected, name: &str, e: &MatrixEntry) -> Result<Collected, String> {
    if (c.result.task, c.result.attempt) == (e.task, e.attempt) {
        return Ok(c);
    }
    Err(format!(
        "{name} holds the result of task {} attempt {}, not of task {} attempt {}",
        c.result.task, c.result.attempt, e.task, e.attempt
    ))
}

/// A merge's re-check that passed (`overlap: merge`): `j` carries the merged change kept for
/// it (`patch`, made at `base`), never its job's, and that is said.
pub(crate) fn rechecked_lands(repo: &Repo, j: &mut Judged, patch: Vec<u8>, base: &str, ui: &Ui) {
    j.touched = repo
        .patch_changes_at(base, patch.as_slice())
        .map(|(t, _)| t)
        .unwrap_or_default();
    j.patch = crate::edge::git::Patch::Bytes(patch);
    ui.say(format!(
        "  task {}: attempt {}'s merge passed its re-check",
        j.index, j.attempt
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches_touching_the_plan_or_workflows_are_refused() {
        use Protected::*;
        let p = |v: &[&str]| {
            v.iter()
                .map(std::string::ToString::to_string)
                .collect::<Vec<_>>()
        };
        let plan = outcome::OwnFiles::plan(".design/plan.json");
        assert!(refused(&p(&["src/a.rs", "README.md"]), plan, Workflows).is_none());
        assert!(
            refused(&p(&[".design/plan.json"]), plan, Nothing)
                .unwrap()
                .contains("the plan itself")
        );
        // A Spec Kit plan's tasks.md: the work job drops a worker's edit, so a patch holding
        // one is refused, whatever is allowed.
        let speckit = outcome::OwnFiles {
            plan: "specs/x/.dagexec/plan.json",
            task_list: Some("specs/x/tasks.md"),
        };
        assert!(
            refused(&p(&["src/a.rs", "specs/x/tasks.md"]), speckit, Nothing)
                .unwrap()
                .contains("specs/x/tasks.md, the task list only dagexec writes")
        );
        assert!(refused(&p(&["specs/x/spec.md"]), speckit, Nothing).is_none());
        for path in [
            ".github/workflows/ci.yml",
            ".github/dependabot.yml",
            ".github/actions/setup/action.yml",
            ".GitHub/Workflows/ci.yml",
            ".GITHUB/x",
            "action.yml",
            "Action.YAML",
        ] {
            let w = refused(&p(&["ok.txt", path]), plan, Workflows)
                .unwrap_or_else(|| panic!("{path} passed"));
            assert!(
                w.contains(path) && w.contains("allow-workflow-changes"),
                "{w}"
            );
            assert!(refused(&p(&[path]), plan, Nothing).is_none(), "{path}");
        }
        assert!(refused(&p(&["docs/action.yml", ".githubx/y"]), plan, Workflows).is_none());
        // The action's own repository: what it is built from is protected too.
        for path in [
            "Cargo.toml",
            "Cargo.lock",
            "build.rs",
            "src/main.rs",
            "SRC/lib.rs",
            "scripts/install-action.sh",
        ] {
            assert!(refused(&p(&[path]), plan, Workflows).is_none(), "{path}");
            let w = refused(&p(&[path]), plan, WorkflowsAndActionSource)
                .unwrap_or_else(|| panic!("{path} passed"));
            assert!(w.contains("built from it"), "{w}");
        }
        assert!(
            refused(
                &p(&["scripts/other.sh", "tests/x.rs"]),
                plan,
                WorkflowsAndActionSource
            )
            .is_none()
        );
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Protected::at(dir.path(), false), Workflows);
        assert_eq!(Protected::at(dir.path(), true), Nothing);
        std::fs::write(dir.path().join("action.yaml"), "runs: {}").unwrap();
        assert_eq!(Protected::at(dir.path(), false), WorkflowsAndActionSource);
    }

    fn entry(task: usize, attempt: u32) -> MatrixEntry {
        MatrixEntry {
            task,
            attempt,
            name: format!("task {task}"),
        }
    }

    /// Writes an artifact of `(task, attempt)` named `name` under `dir`, saying `out`.
    fn artifact_at(dir: &Path, name: &str, task: usize, attempt: u32, out: &str) {
        let nothing = AttemptReport::default();
        let mut r = artifact::WorkResult::new(task, attempt, 1, "b", &nothing, Duration::ZERO);
        r.output = out.into();
        artifact::write(&dir.join(name), &r, b"", None).unwrap();
    }

    #[test]
    fn the_latest_run_attempt_up_to_this_one_wins() {
        let dir = tempfile::tempdir().unwrap();
        for (run_attempt, out) in [(1, "COMPLETED: first"), (2, "COMPLETED: second")] {
            let name = matrix::artifact_name("77", &run_attempt.to_string(), 0, 1);
            artifact_at(dir.path(), &name, 0, 1, out);
        }
        // A job that passed in attempt 1 and was not re-run: its attempt-1 artifact counts.
        artifact_at(
            dir.path(),
            "dagexec-77-1-task-1-attempt-1",
            1,
            1,
            "COMPLETED: kept",
        );
        std::fs::create_dir(dir.path().join("unrelated")).unwrap();
        let (found, ignored) = collect(dir.path(), "77", 2, &[entry(0, 1), entry(1, 1)]);
        assert_eq!(found.len(), 2);
        let output = |k| found[&k].as_ref().unwrap().result.output.clone();
        assert_eq!(output((0, 1)), "COMPLETED: second");
        assert_eq!(output((1, 1)), "COMPLETED: kept");
        assert_eq!(ignored, vec!["unrelated".to_string()]);
    }

    #[test]
    fn forged_artifacts_are_ignored_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        artifact_at(
            dir.path(),
            "dagexec-77-1-task-1-attempt-1",
            1,
            1,
            "FAILED: real",
        );
        for forged in [
            "dagexec-77-999-task-1-attempt-1",
            "dagexec-77-01-task-1-attempt-1",
            "dagexec-77-+1-task-1-attempt-1",
            "dagexec-77-1-task-01-attempt-1",
            "dagexec-77-1-task-1-attempt-2",
            "dagexec-78-1-task-1-attempt-1",
            "dagexec-77-1-task-5-attempt-1",
        ] {
            artifact_at(dir.path(), forged, 1, 1, "COMPLETED: forged");
        }
        let (found, ignored) = collect(dir.path(), "77", 1, &[entry(1, 1)]);
        assert_eq!(
            found[&(1, 1)].as_ref().unwrap().result.output,
            "FAILED: real"
        );
        assert_eq!(ignored.len(), 7, "{ignored:?}");
        // Nothing at all for the entry: nothing else stands in for it.
        std::fs::remove_dir_all(dir.path().join("dagexec-77-1-task-1-attempt-1")).unwrap();
        let (found, _) = collect(dir.path(), "77", 1, &[entry(1, 1)]);
        assert!(found.is_empty());
        // The right name around another task's result is unreadable, not that task's.
        artifact_at(
            dir.path(),
            "dagexec-77-1-task-1-attempt-1",
            2,
            1,
            "COMPLETED: other",
        );
        let (found, _) = collect(dir.path(), "77", 1, &[entry(1, 1)]);
        let why = found[&(1, 1)].as_ref().unwrap_err();
        assert!(
            why.contains("task 2 attempt 1, not of task 1 attempt 1"),
            "{why}"
        );
    }
}
