//! `overlap: merge`: a work job that continues an attempt instead of starting one. Finalize
//! merged the attempt's patch onto the round's tree (`git merge-tree`, no code run) and kept
//! the merged change in the open round ([`crate::action::rounds::FollowUp::Recheck`]), after
//! the earlier candidates of its chain — or, under `schedule: eager`, the conductor did and
//! kept it on the task; this job, without a write token, applies the chain's earlier merged
//! changes (committed in the checkout, never pushed) and then its own to its checkout of the
//! part's base — exactly the tree that would be committed with it — judges its own change as an
//! attempt is judged (spot-checks, the task's acceptance checks) and runs the acceptance
//! checks of the landed tasks whose files the merge touched. No worker runs. Its artifact is
//! an attempt's; finalize (or the conductor) lands its own copy of the patch only when this
//! verdict passed.

use crate::action::ActionError;
use crate::action::rounds::FollowUp;
use crate::edge::git::{Repo, changes_in};
use crate::pure::outcome::{self, CheckRun};
use crate::pure::plan;

use super::WorkJob;

/// The re-check `follow` in the checkout `at`: the chain's earlier merged changes and its
/// own applied, judged, the checks of the tasks the merge touched run; the artifact written.
pub(super) fn run(at: &WorkJob, follow: &FollowUp) -> Result<outcome::Verdict, ActionError> {
    let (job, base, repo, inputs, plan) =
        (at.job, at.base.as_str(), &at.repo, &at.inputs, &at.plan);
    let start = jiff::Timestamp::now();
    let FollowUp::Recheck { checks, .. } = follow else {
        return Err(ActionError::Input(format!(
            "task {}: not a re-check",
            job.task
        )));
    };
    let (applied, judged_on) = apply_chain(repo, plan, follow, base);
    // What the merge wrote is the checks' to use too, when they run as the agent's user.
    super::hand_over(repo.root())?;
    let line = match &applied {
        Ok(()) => format!(
            "COMPLETED: attempt {}'s change merged beside the tasks landed before it, re-checked on the merged tree",
            job.attempt
        ),
        Err(why) => format!(
            "FAILED: the merged change does not apply at the part's base: {}",
            why.lines().next().unwrap_or_default()
        ),
    };
    let ran = crate::edge::worker::WorkerRun {
        stdout: format!("{line}\n"),
        stderr_tail: String::new(),
        exit: crate::pure::outcome::Exit::Success,
        log: None,
        duration: std::time::Duration::ZERO,
        usage: None,
    };
    let log_rel = format!(".design/worker-{}.log", job.task);
    let crate::flow::attempt::Observed {
        mut report,
        mut verdict,
        kept,
        ..
    } = at.judge(
        &ran,
        &log_rel,
        &judged_on,
        crate::flow::reported::Told::default(),
    )?;
    // The checks of the landed tasks whose files the merge touched, on the same tree.
    with_checks_of(at, checks, &mut report, &mut verdict);
    let mut result = job.result(base, &report, std::time::Duration::ZERO);
    result.set_measured(&crate::pure::usage::Measured::since(
        start,
        crate::pure::usage::Usage::default(),
    ));
    // The artifact's patch is the whole change from the part's base (finalize reads what it
    // touches there, and lands its own kept copy only).
    let whole = if judged_on == base {
        kept.patch
    } else {
        changes_in(repo.root(), base)?.patch
    };
    super::write_files(inputs, &result, &whole, None, None)?;
    println!("task {}: {}", job.task, verdict.result);
    Ok(verdict)
}

/// The chain's earlier merged changes applied in the checkout and committed there (never
/// pushed), then `follow`'s own applied: whether they all applied, and the commit its own
/// change is judged against (the part's base with the earlier changes).
fn apply_chain(
    repo: &Repo,
    plan: &plan::model::Plan,
    follow: &FollowUp,
    base: &str,
) -> (Result<(), String>, String) {
    let earlier = FollowUp::before(plan, follow.task())
        .ok_or_else(|| "the open round's record holds an unreadable patch".to_string())
        .and_then(|patches| commit_chain(repo, base, &patches, follow.task(), "re-check"));
    let applied = earlier.as_ref().map_err(Clone::clone).and_then(|_| {
        follow
            .patch()
            .ok_or_else(|| "the open round's record holds no readable patch".to_string())
            .and_then(|p| repo.apply_patch(&p).map_err(|e| e.message))
    });
    (applied, earlier.unwrap_or_else(|_| base.to_string()))
}

/// `patches` (a prefix of the chain's merged changes) applied in the checkout at `base` and
/// committed there, never pushed (`what`: the job it is for): the commit the job's own change
/// is judged against (`base` when there are none), or why they do not apply.
pub(super) fn commit_chain(
    repo: &Repo,
    base: &str,
    patches: &[Vec<u8>],
    task: usize,
    what: &str,
) -> Result<String, String> {
    // Each is made on the ones before it: applied in turn (to the work tree and the index),
    // never read against `HEAD` alone.
    for p in patches {
        repo.apply_patch(p).map_err(|e| e.message)?;
    }
    if patches.is_empty() {
        return Ok(base.to_owned());
    }
    let paths = repo.staged_paths().map_err(|e| e.to_string())?;
    let message = format!("dagexec: the merged changes before task {task}'s ({what}, not pushed)");
    repo.commit(&message, &paths)
        .map_err(|e| e.to_string())?
        .map_or_else(|| repo.head().map_err(|e| e.to_string()), Ok)
}

/// A completed `verdict` of the checkout's task failed when an acceptance check of `tasks`
/// fails in the checkout (each recorded in `report`, see [`others_pass`]).
pub(super) fn with_checks_of(
    at: &WorkJob,
    tasks: &[usize],
    report: &mut outcome::AttemptReport,
    verdict: &mut outcome::Verdict,
) {
    if verdict.status != plan::model::Status::Completed {
        return;
    }
    let Some(failed) = others_pass(at, tasks, report) else {
        return;
    };
    let warnings = std::mem::take(&mut verdict.warnings);
    *verdict = outcome::Verdict::refused(failed.trim().to_string(), warnings);
    report.output = failed;
}

/// Runs the acceptance checks of `tasks` in the checkout, each recorded in `report`: the
/// status line saying which failed first (the task named as the user's task list names it),
/// or `None` when all pass. A task the plan update trimmed (completed in an earlier round, or
/// under `schedule: eager`) has its checks from the conductor's record beside the follow-up
/// on the checkout's task ([`crate::pure::plan::fields::FOLLOW_UP_CHECKS`]).
fn others_pass(
    at: &WorkJob,
    tasks: &[usize],
    report: &mut outcome::AttemptReport,
) -> Option<String> {
    let (task, repo, plan) = (at.job.task, &at.repo, &at.plan);
    let kept: std::collections::BTreeMap<String, Vec<plan::model::AcceptanceCriterion>> = plan
        .tasks
        .get(task)
        .and_then(|t| t.extra.get(crate::pure::plan::fields::FOLLOW_UP_CHECKS))
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    let names = crate::pure::plan::ids::TaskNames::of(plan);
    for &k in tasks {
        let Some(t) = plan.tasks.get(k) else { continue };
        let criteria = match t.acceptance_criteria() {
            [] => kept.get(&k.to_string()).map_or(&[][..], Vec::as_slice),
            own => own,
        };
        for c in criteria {
            let o = crate::edge::shell::run(&c.check, repo.root(), at.inputs.timeout);
            report
                .acceptance
                .get_or_insert_with(Vec::new)
                .push(CheckRun {
                    criterion: format!("task {}: {}", names.get(k), c.criterion),
                    check: c.check.clone(),
                    passed: o.passed,
                    output: o.output.clone(),
                });
            if !o.passed {
                return Some(format!(
                    "FAILED: on the merged tree, task {}'s acceptance check `{}` ({}) fails: {}\n",
                    names.get(k),
                    c.check,
                    c.criterion,
                    o.output.trim().lines().last().unwrap_or_default()
                ));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::git;

    /// A chain's merged changes are each made on the ones before it: the second one's context
    /// holds the first's edit, two lines above its own, and the chain is committed whole.
    #[test]
    fn a_chain_whose_changes_overlap_in_context_is_committed_whole() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        git(root, &["init", "-q", "-b", "main"]);
        let lines = |edit: &[(usize, &str)]| {
            let mut l: Vec<String> = (1..=9).map(|i| format!("line {i}")).collect();
            for &(i, s) in edit {
                l[i] = s.to_string();
            }
            l.join("\n") + "\n"
        };
        std::fs::write(root.join("f.txt"), lines(&[])).unwrap();
        git(root, &["add", "f.txt"]);
        git(root, &["commit", "-qm", "base"]);
        let diff = |from: &str, to: &str| {
            std::fs::write(root.join("f.txt"), from).unwrap();
            git(root, &["add", "f.txt"]);
            git(root, &["commit", "-q", "--allow-empty", "-m", "from"]);
            std::fs::write(root.join("f.txt"), to).unwrap();
            let d = git(root, &["diff", "--binary", "--full-index"]);
            git(root, &["checkout", "-q", "--", "f.txt"]);
            git(root, &["reset", "-q", "--hard", "HEAD~1"]);
            d
        };
        let first = diff(&lines(&[]), &lines(&[(3, "first")]));
        let second = diff(
            &lines(&[(3, "first")]),
            &lines(&[(3, "first"), (5, "second")]),
        );
        let repo = Repo::discover(root).unwrap();
        let base = repo.head().unwrap();
        let head = commit_chain(&repo, &base, &[first, second], 2, "re-check").unwrap();
        let at = String::from_utf8(git(root, &["rev-parse", "HEAD"])).unwrap();
        assert_eq!(head, at.trim());
        assert_eq!(
            String::from_utf8(git(root, &["show", "HEAD:f.txt"])).unwrap(),
            lines(&[(3, "first"), (5, "second")])
        );
        assert!(git(root, &["status", "--porcelain"]).is_empty());
    }

    /// A landed task's failing check names the task as the user's task list does (Taskmaster's
    /// `2`), never by its plan index (`1`, another task of the list).
    #[test]
    fn a_failing_check_of_a_landed_task_names_it_by_the_task_lists_id() {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q", "-b", "main"]);
        let task = |check: &str| plan::model::Task {
            subject: "s".into(),
            agent: Some(plan::model::Agent {
                acceptance_criteria: Some(vec![plan::model::AcceptanceCriterion {
                    criterion: "holds".into(),
                    check: check.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut plan = plan::model::Plan::new("g".into(), vec![task("true"), task("false")]);
        plan.extra.insert(
            crate::pure::plan::fields::SOURCE.into(),
            serde_json::json!({"format": "taskmaster", "tasks": [{"id": "1"}, {"id": "2"}]}),
        );
        let at = WorkJob {
            job: super::super::Assignment {
                task: 0,
                attempt: 1,
                round: 1,
            },
            base: String::new(),
            repo: Repo::discover(dir.path()).unwrap(),
            inputs: crate::action::Inputs {
                plan_rel: ".design/plan.json".into(),
                worker: String::new(),
                reviewer: None,
                max_parallel: 1,
                timeout: std::time::Duration::from_secs(30),
                branch: String::new(),
                allow_workflow_changes: false,
                token: crate::edge::github::Token::new(String::new()),
                app_id: None,
                workflow: String::new(),
                artifacts: dir.path().join("artifacts"),
                max_cost: None,
                build: String::new(),
                overlap: None,
            },
            plan,
            prices_lowered: Vec::new(),
        };
        let mut report = outcome::AttemptReport::default();
        let failed = others_pass(&at, &[0, 1], &mut report).unwrap();
        assert!(
            failed.starts_with("FAILED: on the merged tree, task 2's acceptance check `false`"),
            "{failed}"
        );
        let named: Vec<&str> = report
            .acceptance
            .iter()
            .flatten()
            .map(|c| c.criterion.as_str())
            .collect();
        assert_eq!(named, ["task 1: holds", "task 2: holds"]);
    }
}
