//! The end of a round: completed patches applied to a temporary index at `HEAD` group by
//! group, each group in plan-index order ([`RoundBuild`]; a later group of conflicting tasks
//! starts from the commit of the earlier groups' patches) (a patch that no longer applies, or that would overwrite the user's uncommitted
//! files, is a failed attempt: retried next round while attempts remain), the processor batch
//! file, the plan update, and the round commit: one ref update as the commit point, then the
//! round's paths brought to it in the work tree (see `git::round`).

use std::collections::{BTreeMap, BTreeSet};

use super::attempt::Judged;
use super::{RunEnd, RunError, RunOptions, Ui, failpoint, save};
use crate::edge::git::{Repo, RoundIndex, StagedRound};
use crate::pure::graph::Dag;
use crate::pure::outcome::{self, BatchEntry};
use crate::pure::plan::model::{Plan, Status};
use crate::pure::render::summary;
use crate::pure::update::{self, RoundNotes, TaskResult};

/// Where and which round is committed: the repository, the plan's DAG, the round's tasks,
/// number and wave, the run's options and display.
#[derive(Clone, Copy)]
pub(crate) struct RoundCommit<'a> {
    pub repo: &'a Repo,
    pub dag: &'a Dag,
    pub batch: &'a [usize],
    pub round: u32,
    pub wave: Option<u64>,
    pub opts: &'a RunOptions,
    pub ui: &'a Ui,
}

/// A round being integrated: the patches accepted so far (in the order they apply) and the
/// results decided so far. A round whose conflicting tasks run in sequential groups adds each
/// group's judged attempts in turn ([`RoundBuild::add`]); the next group starts from
/// [`RoundBuild::next_base`], so its patches apply on top of the earlier ones. The temporary
/// index is built from `HEAD` and the accepted patches each time it is needed and removed
/// before any worker runs again: no worker ever runs while it exists.
#[derive(Default)]
pub(crate) struct RoundBuild {
    /// The accepted patches, in the order they were applied, each with its task.
    pub(super) accepted: Vec<(usize, crate::edge::git::Patch)>,
    /// How each of the round's tasks ended so far.
    pub(super) decided: Decided,
    /// Tasks whose changes are in the index, with the paths they touch.
    pub(super) applied: Vec<(usize, BTreeSet<String>)>,
    /// Whether the round said what `overlap: merge` would do with a conflict between tasks
    /// that declare no files (said once a round).
    merge_hinted: bool,
    /// The round's tree as last written, for the next index to start from instead of
    /// applying every accepted patch again.
    written: Option<Written>,
}

/// A round's tree written from its index: `HEAD` (`head`) with the first `count` accepted
/// patches applied.
struct Written {
    head: String,
    count: usize,
    tree: String,
}

impl RoundBuild {
    /// A round built at `HEAD` (the user's index and work tree are not touched until the
    /// commit exists and `HEAD` points at it).
    pub(crate) fn start() -> RoundBuild {
        RoundBuild::default()
    }

    /// Whether no patch is accepted yet (the round's tree is `HEAD`'s).
    pub(crate) fn is_empty(&self) -> bool {
        self.accepted.is_empty()
    }

    /// The round's temporary index: `HEAD` with the accepted patches applied (from the tree
    /// last written, when `HEAD` is still where it was then).
    pub(super) fn index(&self, repo: &Repo) -> Result<RoundIndex, RunError> {
        let head = repo.head()?;
        let (index, done) = match &self.written {
            Some(w) if w.head == head && w.count <= self.accepted.len() => {
                (repo.round_index_holding(&head, &w.tree)?, w.count)
            }
            _ => (repo.round_index_holding(&head, &head)?, 0),
        };
        for (_, patch) in &self.accepted[done..] {
            index
                .apply_patch(patch)
                .map_err(|e| RunError::Other(format!("cannot rebuild the round: {}", e.message)))?;
        }
        Ok(index)
    }

    /// The commit the round's next group starts from: `HEAD` with every patch accepted so far
    /// (not published on any branch).
    pub(crate) fn next_base(&self, repo: &Repo) -> Result<String, RunError> {
        Ok(self.index(repo)?.snapshot(repo)?)
    }

    /// Decides the judged attempts of one group (in plan-index order): a completed patch is
    /// applied to the round's index, or — when it no longer applies or would overwrite the
    /// user's uncommitted files — becomes a failed attempt (retried next round while attempts
    /// remain).
    pub(crate) fn add(
        &mut self,
        repo: &Repo,
        plan: &mut Plan,
        judged: &[Judged],
        ui: &Ui,
    ) -> Result<(), RunError> {
        let index = self.index_for(repo, judged)?;
        let index = || index.as_ref().expect("built for each patch applied");
        let before = self.accepted.len();
        let accepted = &mut self.accepted;
        let applied = &mut self.applied;
        // Files the user changed (or keeps untracked or ignored) where a patch writes: the
        // patch cannot land without losing them, so it does not.
        let touched: Vec<String> = judged.iter().flat_map(|j| j.touched.clone()).collect();
        let theirs: BTreeMap<String, String> = repo.uncommitted(&touched)?.into_iter().collect();
        for j in judged {
            crate::flow::steps::questions::record(plan, j);
            let mut status = j.verdict.status;
            let mut result = j.verdict.result.clone();
            let users = |j: &Judged| -> Vec<String> {
                j.touched
                    .iter()
                    .filter_map(|p| theirs.get(p).map(|how| format!("{p} ({how})")))
                    .collect()
            };
            if status == Status::Completed && !j.patch.is_empty() {
                let conflict = match users(j) {
                    found if !found.is_empty() => Some(format!(
                        "the working tree has uncommitted changes that are not from this run at {} (commit or stash them)",
                        found.join(", ")
                    )),
                    _ => match index().apply_patch(&j.patch) {
                        Ok(()) => {
                            landed(accepted, applied, j);
                            None
                        }
                        Err(e) => {
                            let culprit = match culprit(repo, accepted, &j.patch)? {
                                Some(k) => {
                                    format!("task {}", crate::pure::plan::ids::name(plan, k))
                                }
                                None => "the branch".to_string(),
                            };
                            if !std::mem::replace(&mut self.merge_hinted, true) {
                                merge_hint(plan, j, &e.paths, ui);
                            }
                            Some(format!(
                                "conflicts with {culprit}: {}",
                                e.message.lines().next().unwrap_or("")
                            ))
                        }
                    },
                };
                if let Some(why) = conflict {
                    (status, result) = not_integrated(j, &why, ui);
                }
            } else if status == Status::Completed {
                applied.push((j.index, BTreeSet::new()));
            } else if crate::flow::steps::longrun::keeps_partial(j) {
                let found = users(j);
                let checked = if found.is_empty() {
                    index().apply_patch(&j.patch).map_err(|e| e.message)
                } else {
                    Err(format!(
                        "the working tree has uncommitted changes at {}",
                        found.join(", ")
                    ))
                };
                match checked {
                    Ok(()) => landed(accepted, applied, j),
                    Err(e) => ui.say(format!(
                        "  task {}: its work so far is dropped, it conflicts: {}",
                        crate::pure::plan::ids::name(plan, j.index),
                        e.lines().next().unwrap_or("")
                    )),
                }
            }
            self.decided.push(j, status, &result);
        }
        if self.accepted.len() > before {
            self.written = Some(Written {
                head: index().base().to_string(),
                count: self.accepted.len(),
                tree: index().write_tree()?,
            });
        }
        Ok(())
    }

    /// The round's index when one of `judged` has a patch to apply; none (no git process
    /// asked) otherwise.
    fn index_for(&self, repo: &Repo, judged: &[Judged]) -> Result<Option<RoundIndex>, RunError> {
        let applies = |j: &Judged| match j.verdict.status {
            Status::Completed => !j.patch.is_empty(),
            _ => crate::flow::steps::longrun::keeps_partial(j),
        };
        Ok(if judged.iter().any(applies) {
            Some(self.index(repo)?)
        } else {
            None
        })
    }

    /// The results decided so far (this build's attempts, after integration).
    pub(crate) fn results(&self) -> &[TaskResult] {
        &self.decided.results
    }

    /// Results of the round decided and committed earlier (on Actions, by earlier workflow
    /// runs of the round): part of the round's update and commit message, nothing to apply.
    pub(crate) fn resolved_earlier(&mut self, earlier: Vec<TaskResult>) {
        for r in earlier {
            self.decided.entries.push(BatchEntry {
                plan_index: r.index,
                status: r.status,
                result: r.result.clone(),
                attempts: r.attempts,
                acceptance_passed: r.status == Status::Completed,
            });
            self.decided.results.push(r);
        }
    }

    /// A part of a round that does not end it (on Actions: one workflow run of a round that
    /// takes several): the accepted patches and the plan as the caller left it committed
    /// with `message`, without the update; the round's last part ends it with
    /// [`RoundBuild::commit`].
    pub(crate) fn commit_part(
        self,
        repo: &Repo,
        plan: &Plan,
        opts: &RunOptions,
        message: &str,
        ui: &Ui,
    ) -> Result<(), RunError> {
        let index = self.index(repo)?;
        stage_plan(&index, repo, plan, opts)?;
        if let Some(prepared) = index.prepare(repo, message)? {
            prepared.publish(repo)?;
            save(plan, opts)?;
            synced(&prepared, repo, ui)?;
        }
        Ok(())
    }

    /// The end of the round, once every task of it is resolved: the processor batch file,
    /// one plan update (results, cascade, circuit breaker) and one commit.
    pub(crate) fn commit(
        self,
        at: RoundCommit<'_>,
        plan: &mut Plan,
    ) -> Result<Option<RunEnd>, RunError> {
        let RoundCommit {
            repo,
            dag,
            batch,
            round,
            wave,
            opts,
            ui,
        } = at;
        let index = self.index(repo)?;
        let Decided {
            mut results,
            mut entries,
        } = self.decided;
        results.sort_by_key(|r| r.index);
        entries.sort_by_key(|e| e.plan_index);
        let batch_path = opts
            .root
            .join(format!(".design/processor-batch-{round}.json"));
        let text = serde_json::to_string_pretty(&entries).expect("entries serialise");
        crate::edge::plan_file::write_atomic(&batch_path, text.as_bytes())
            .map_err(crate::flow::cannot_write(&batch_path))?;
        let notes = RoundNotes {
            wave,
            ..Default::default()
        };
        let report = update::apply_round(plan, dag, &results, &notes);
        plan.progress.extra.insert("round".into(), round.into());
        // The updated plan (tasks completed) goes into the round's index only: until the
        // commit is published, the plan in the work tree still says what was true before the
        // round, so a run killed before the commit point never reads the round as done.
        stage_plan(&index, repo, plan, opts)?;
        // A Spec Kit plan's tasks.md, ticked in the round's index only (the work tree gets it
        // when the commit is published).
        crate::flow::steps::questions::tasks_md(plan, &index, ui)?;
        let overall = plan.count(Status::Completed);
        let message = commit_message(plan, round, batch, &results, overall);
        failpoint("after-apply", round);
        // The plan is committed with every round, also when no task completed or changed a
        // file: its attempt records and spend, its failures and questions are the state a
        // later run (or the Action) reads from the branch.
        {
            let own = crate::flow::steps::longrun::state_md(plan, opts)?;
            index.add_own_files(repo, &own)?;
            if let Some(prepared) = index.prepare(repo, &message)? {
                // The round's paths are recorded; HEAD has not moved.
                failpoint("before-commit", round);
                prepared.publish(repo)?;
                failpoint("after-ref", round);
                // Published: the work tree's plan may now say what the commit says (a crash
                // before this write is finished by the next start, which brings the plan to
                // the commit's: `git::Repo::recover_round`).
                save(plan, opts)?;
                synced(&prepared, repo, ui)?;
            }
        }
        drop(index);
        failpoint("after-commit", round);
        ui.progress(plan.count(Status::Completed), plan.total());
        ui.say(summary::round_progress(plan, round, batch).trim_end());
        if !report.skip_list.is_empty() {
            ui.say(format!(
                "  skipped because a dependency failed or was blocked: {}",
                crate::pure::plan::ids::TaskNames::of(plan).list(&report.skip_list)
            ));
        }
        if report.circuit_breaker.should_abort {
            ui.say(report.circuit_breaker.message());
            return Ok(Some(RunEnd::CircuitBreaker(report.circuit_breaker)));
        }
        Ok(None)
    }
}

/// Puts the plan's text into the round's index at its path, without writing the work tree:
/// only a published commit may hold a plan that records the round's results. A plan git
/// would not commit (ignored) is saved in the work tree instead, as it always was.
fn stage_plan(
    index: &RoundIndex,
    repo: &Repo,
    plan: &Plan,
    opts: &RunOptions,
) -> Result<(), RunError> {
    let text = crate::pure::plan::load::to_text(plan);
    if !index.stage_own(repo, &opts.plan_rel, text.as_bytes())? {
        save(plan, opts)?;
    }
    Ok(())
}

/// `dagexec: round N — x/y tasks (a/b overall)` and one body line per task (its result made
/// inert on GitHub: [`crate::pure::sanitize::unreferenced`]).
pub fn commit_message(
    plan: &Plan,
    round: u32,
    batch: &[usize],
    results: &[TaskResult],
    overall: usize,
) -> String {
    let done = results
        .iter()
        .filter(|r| r.status == Status::Completed)
        .count();
    let mut s = if batch.is_empty() {
        format!(
            "dagexec: round {round} — no task landed; attempts recorded ({overall}/{} overall)\n",
            plan.total()
        )
    } else {
        format!(
            "dagexec: round {round} — {done}/{} tasks ({overall}/{} overall)\n",
            batch.len(),
            plan.total()
        )
    };
    s.push('\n');
    for r in results {
        // A worker's words: shown, never a reference GitHub acts on.
        let result =
            crate::pure::sanitize::unreferenced(r.result.lines().next().unwrap_or(""), false);
        s.push_str(&format!(
            "- task {}: {} — {}: {}\n",
            r.index, plan.tasks[r.index].subject, r.status, result
        ));
    }
    s
}
/// A patch that applied to the round's index (`git apply` changes all or nothing) is
/// remembered as the change of its task's files.
fn landed(
    accepted: &mut Vec<(usize, crate::edge::git::Patch)>,
    applied: &mut Vec<(usize, BTreeSet<String>)>,
    j: &Judged,
) {
    accepted.push((j.index, j.patch.clone()));
    applied.push((j.index, j.touched.iter().cloned().collect()));
}

/// The landed task whose change `patch` does not apply after (`None`: the branch's own
/// tree). Worked out only for a patch that failed, in a scratch index of its own: the first
/// task to touch the same file is not the answer (it may have changed lines far from the
/// patch's).
fn culprit(
    repo: &Repo,
    accepted: &[(usize, crate::edge::git::Patch)],
    patch: &crate::edge::git::Patch,
) -> Result<Option<usize>, RunError> {
    let landed: Vec<_> = accepted.iter().map(|(_, p)| p.into()).collect();
    let found = repo.first_in_the_way(&repo.head()?, &landed, patch.into())?;
    Ok(found.map(|n| accepted[n].0))
}

/// Under `overlap: serial` a task that declares no files (Taskmaster's never do) runs beside
/// any other, so two that change one file meet at integration, where a patch that no longer
/// applies uses an attempt. `overlap: merge` is made for that; this says so, naming the file.
fn merge_hint(plan: &Plan, j: &Judged, failed: &[String], ui: &Ui) {
    if plan.tasks[j.index].files().next().is_some() {
        return;
    }
    let file = failed.first().or(j.touched.first());
    ui.say(format!(
        "  note: task {} declares no files, so it ran beside the tasks that changed {}; `overlap: merge` (`--overlap merge`) merges such changes three-way, and a conflict there is a rebase that uses no attempt",
        crate::pure::plan::ids::name(plan, j.index),
        file.map_or("the same files", String::as_str),
    ));
}

/// An integration conflict is a failed attempt like any other: retried on the next round's
/// base while attempts remain, then failed (and cascaded). The status and result it leaves.
pub(super) fn not_integrated(j: &Judged, why: &str, ui: &Ui) -> (Status, String) {
    let result = format!(
        "attempt {} of {} could not be integrated: {why}",
        j.attempt,
        outcome::MAX_ATTEMPTS
    );
    if j.attempt >= outcome::MAX_ATTEMPTS {
        ui.say(format!("  task {}: {result}; it fails", ui.task(j.index)));
        (Status::Failed, result)
    } else {
        ui.say(format!(
            "  task {}: {result}; it runs again next round on the new base",
            ui.task(j.index)
        ));
        (Status::Pending, result)
    }
}

/// How the round's tasks ended so far, in the two forms the round's end writes: the
/// results of the plan's update and the entries of the processor's batch file.
#[derive(Default)]
pub(super) struct Decided {
    results: Vec<TaskResult>,
    entries: Vec<BatchEntry>,
}

impl Decided {
    /// Judged attempt `j` ends in the round as `status`, with `result` (bounded here: whatever
    /// made it — a status line, a question, a refusal — it reaches the plan, the commit
    /// message and the pull request).
    pub(super) fn push(&mut self, j: &Judged, status: Status, result: &str) {
        let result = outcome::clip_result(result);
        self.entries.push(BatchEntry {
            plan_index: j.index,
            status,
            result: result.clone(),
            attempts: j.attempt,
            acceptance_passed: j.verdict.acceptance_passed,
        });
        self.results.push(TaskResult {
            index: j.index,
            status,
            result,
            attempts: j.attempt,
        });
    }
}

/// Once `prepared` is published and the plan saved: the work tree brought to the commit
/// (what the user changed there since kept, and said), and the commit said.
fn synced(prepared: &StagedRound, repo: &Repo, ui: &Ui) -> Result<(), RunError> {
    for path in prepared.sync(repo)? {
        ui.say(format!(
            "  {path}: left as you changed it (the round committed another version)"
        ));
    }
    let sha = prepared.sha();
    ui.say(format!("  committed {}", &sha[..sha.len().min(12)]));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task list's plan: a patch that cannot land names its task as every other line
    /// does, by the list's own ID (`T002`), never by the plan index behind it.
    #[test]
    fn a_patch_that_cannot_land_names_its_task_as_the_list_does() {
        let mut plan = crate::testing::plan_of(vec![
            crate::testing::task(&[], &["a"], &[]),
            crate::testing::task(&[], &["b"], &[]),
        ]);
        let ids = serde_json::json!({"tasks": [{"id": "T001"}, {"id": "T002"}]});
        plan.extra
            .insert(crate::pure::plan::fields::SOURCE.into(), ids);
        let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Sink {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let ui = Ui::plain(Box::new(Sink(out.clone())));
        ui.name_tasks(&plan);
        let j = Judged {
            index: 1,
            attempt: 1,
            verdict: outcome::Verdict::refused("done".into(), Vec::new()),
            patch: Default::default(),
            touched: Vec::new(),
            duration: std::time::Duration::ZERO,
            reviews: None,
            question: None,
            measured: None,
            timed_out: false,
            rebase: false,
            reported: None,
            network: Default::default(),
        };
        not_integrated(&j, "conflicts with task T001", &ui);
        let said = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        assert!(said.starts_with("  task T002: attempt 1 of 3"), "{said}");
    }

    /// A worker's result in a round commit is shown, never acted on: GitHub closes the issue
    /// a commit message's `Fixes #12` names once the commit reaches the default branch (the
    /// pull request merged), and a result is what a worker, maybe a prompt-injected agent,
    /// wrote. The plan's own subject is the team's and is kept as written.
    #[test]
    fn a_workers_result_in_a_round_commit_closes_no_issue() {
        let plan = crate::testing::example("auth-v2.json");
        let done = crate::pure::update::TaskResult {
            index: 0,
            status: Status::Completed,
            result: "done; Fixes #12, closes o/r#7 (thanks @octocat)".into(),
            attempts: 1,
        };
        let message = commit_message(&plan, 1, &[0], &[done], 1);
        let line = message.lines().nth(2).unwrap();
        assert!(
            line.ends_with(
                "— completed: done; Fixes #\u{200B}12, closes o/r#\u{200B}7 (thanks @\u{200B}octocat)"
            ),
            "{line}"
        );
    }

    /// Every arrival of an eager batch went back for a rebase: not "0/0 tasks".
    #[test]
    fn a_round_commit_where_no_task_landed_says_so() {
        let plan = crate::testing::example("auth-v2.json");
        let message = commit_message(&plan, 4, &[], &[], 1);
        assert_eq!(
            message,
            "dagexec: round 4 — no task landed; attempts recorded (1/6 overall)\n\n"
        );
    }
}
