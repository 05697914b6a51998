//! `overlap: merge`: tasks that share declared files run at the same time, each from its
//! base, and their results are integrated in plan order by a three-way merge against the
//! round's tree ([`RoundBuild::add_merged`], `git merge-tree` in
//! [`crate::edge::git::RoundIndex::merge_patch`]). After a clean merge that combined work
//! (the tree had moved past the attempt's base in a path the merge changes) or that changes
//! a path a task landed since that base declared or changed, the acceptance checks of the
//! task and of every such task run again on the merged
//! tree (a merge into paths nothing else touched lands as under `serial`, unchecked again), in a worktree of their own, before anything is accepted (the round's temporary
//! index does not exist while they run). A textual conflict, a failed re-check, or a merge
//! that changes a file the task neither declared nor changed itself sends the task back
//! once as a *rebase* attempt ([`Ledger::asked`]): it starts from the integrated tree, its
//! prompt names the tasks it must build on and shows what went wrong, and it is not counted
//! as a failed attempt. A rebase attempt that cannot be merged either is a failed attempt
//! (retried while attempts remain). Nothing is published before the round commit, so a
//! crash anywhere here leaves `HEAD` as it was and the tasks in progress for a resume.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::attempt::{Judged, Pool};
use super::integrate::{RoundBuild, not_integrated};
use super::{RunError, Ui, failpoint};
use crate::edge::git::{Merged, Repo};
use crate::pure::clip;
use crate::pure::plan::model::{AcceptanceCriterion, Plan, Status};

/// Where a merge happens: the repository, the worktrees for the re-checks, the display,
/// the round, and the checks' timeout.
pub(crate) struct Merging<'a> {
    pub repo: &'a Repo,
    pub pool: &'a Pool,
    pub ui: &'a Ui,
    pub round: u32,
    pub timeout: Duration,
}

/// What a run under `overlap: merge` remembers between integrations (in memory only: after
/// a crash every task in progress starts again from `HEAD`).
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    /// The tasks landed in this run, in the order they landed, with the paths they changed.
    landed: Vec<(usize, BTreeSet<String>)>,
    /// Each running task's base commit and how many tasks had landed when it started.
    started: BTreeMap<usize, StartedAt>,
    /// Tasks sent back for a rebase in the integration under way (at most once each), with
    /// the tasks they must build on.
    rebased: BTreeMap<usize, Vec<usize>>,
    /// Rebase attempts asked for and not started yet.
    pub asked: Vec<Rebase>,
    /// Tasks whose next start is a rebase attempt.
    next_is_rebase: BTreeSet<usize>,
    /// The acceptance checks of the tasks landed, as they were when they landed (the plan
    /// update trims a completed task's).
    checks: BTreeMap<usize, Vec<AcceptanceCriterion>>,
    /// The round the last attempt started in (the crash tests' failpoints name it).
    pub round: u32,
}

/// What came of merging one patch: the paths it changes in the round when it lands, or the
/// paths at fault and why it cannot.
type Landing = Result<BTreeSet<String>, (BTreeSet<String>, String)>;

/// Where a running attempt started: its base commit, and how many tasks had landed then
/// (those landed since are the ones it may meet).
#[derive(Debug)]
struct StartedAt {
    base: String,
    since: usize,
}

/// An attempt that cannot land: the landed tasks it must build on (`onto`: none is the
/// branch) and why (git's account of the conflict, a path the task does not declare, the
/// failed check). Shared by the local run and the Action's finalize and conductor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CannotLand {
    pub onto: Vec<usize>,
    pub why: String,
}

/// A task sent back to build on the integrated tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rebase {
    pub task: usize,
    /// The attempt it repeats (a rebase is not counted).
    pub attempt: u32,
    /// The landed tasks whose change it must build on.
    pub onto: Vec<usize>,
    /// What went wrong (git's account of the conflict, or the failed check).
    pub why: String,
}

impl Ledger {
    /// Attempt `task` starts from `base` in round `round`; whether it is a rebase attempt.
    pub(crate) fn started(&mut self, task: usize, base: &str, round: u32) -> bool {
        self.round = round;
        let started = StartedAt {
            base: base.to_string(),
            since: self.landed.len(),
        };
        self.started.insert(task, started);
        self.next_is_rebase.remove(&task)
    }

    /// An integration begins: a rebase asked for and never started (the budget, a stop) is
    /// forgotten, so the task's next attempt is an ordinary one.
    pub(crate) fn integrating(&mut self) {
        self.next_is_rebase.clear();
    }

    /// The rebase attempts asked for, to start now.
    pub(crate) fn take_asked(&mut self) -> Vec<Rebase> {
        let asked = std::mem::take(&mut self.asked);
        self.next_is_rebase.extend(asked.iter().map(|r| r.task));
        asked
    }

    /// The tasks landed since index `since` that share a path with `paths`, by what they
    /// changed or by what they declare.
    fn sharing(&self, plan: &Plan, since: usize, paths: &BTreeSet<String>) -> Vec<usize> {
        let later = self.landed.get(since..).unwrap_or_default();
        later
            .iter()
            .filter(|(k, changed)| {
                changed.iter().any(|f| paths.contains(f))
                    || plan.tasks[*k]
                        .files()
                        .any(|f| paths.contains(&crate::pure::paths::key(f)))
            })
            .map(|(k, _)| *k)
            .collect()
    }

    /// [`Ledger::sharing`], or — when none shares a path — every task landed since `since`.
    fn culprits(&self, plan: &Plan, since: usize, paths: &BTreeSet<String>) -> Vec<usize> {
        let sharing = self.sharing(plan, since, paths);
        if sharing.is_empty() {
            let later = self.landed.get(since..).unwrap_or_default();
            later.iter().map(|(k, _)| *k).collect()
        } else {
            sharing
        }
    }
}

impl RoundBuild {
    /// [`RoundBuild::add`] under `overlap: merge`: each completed patch (plan-index order)
    /// merged three-way into the round's tree and re-checked; one that cannot land is sent
    /// back as a rebase attempt ([`Ledger::asked`]) and decides nothing yet, or — when it was
    /// a rebase already — is a failed attempt. Everything else is decided as `add` decides.
    pub(crate) fn add_merged(
        &mut self,
        at: &Merging<'_>,
        ledger: &mut Ledger,
        plan: &mut Plan,
        judged: Vec<Judged>,
    ) -> Result<(), RunError> {
        for j in judged {
            let started = ledger.started.remove(&j.index);
            let merging = j.verdict.status == Status::Completed
                && !j.patch.is_empty()
                && at.repo.uncommitted(&j.touched)?.is_empty();
            let Some(started) = started.filter(|_| merging) else {
                let before = self.applied.len();
                self.add(at.repo, plan, std::slice::from_ref(&j), at.ui)?;
                if let Some(landed) = self.applied.get(before..) {
                    ledger.landed.extend(landed.iter().cloned());
                    for (k, _) in landed {
                        let checks = plan.tasks[*k].acceptance_criteria().to_vec();
                        ledger.checks.insert(*k, checks);
                    }
                }
                ledger.rebased.remove(&j.index);
                continue;
            };
            crate::flow::steps::questions::record(plan, &j);
            let refused = match self.merge_one(at, ledger, plan, &j, &started)? {
                Ok(changed) => {
                    ledger.landed.push((j.index, changed));
                    let checks = plan.tasks[j.index].acceptance_criteria().to_vec();
                    ledger.checks.insert(j.index, checks);
                    self.decided(&j, j.verdict.status, &j.verdict.result);
                    None
                }
                Err(refused) => Some(refused),
            };
            let Some((paths, why)) = refused else {
                ledger.rebased.remove(&j.index);
                continue;
            };
            let onto = ledger.culprits(plan, started.since, &paths);
            self.refuse(at, ledger, plan, &j, CannotLand { onto, why });
        }
        Ok(())
    }

    /// Attempt `j`, which cannot land (beside `onto`, `why`): sent back as a rebase
    /// attempt, or — rebased once already — a failed attempt (its later attempts still have
    /// to keep the change it was sent to build on: those tasks' checks run on them).
    fn refuse(
        &mut self,
        at: &Merging<'_>,
        ledger: &mut Ledger,
        plan: &mut Plan,
        j: &Judged,
        cannot: CannotLand,
    ) {
        let CannotLand { onto, why } = cannot;
        let again = ledger.rebased.contains_key(&j.index);
        keep_note(at, j, again, &why);
        crate::pure::usage::amend(plan, j.index, j.attempt, |r| {
            r.outcome = crate::pure::usage::Outcome::Conflict;
        });
        if again {
            let why = format!("it cannot be merged after its rebase: {why}");
            let (status, result) = not_integrated(j, &why, at.ui);
            if status != Status::Pending {
                ledger.rebased.remove(&j.index);
            }
            self.decided(j, status, &result);
            return;
        }
        let names: Vec<String> = onto.iter().map(|k| format!("task {k}")).collect();
        at.ui.say(format!(
            "  task {}: attempt {} cannot be merged onto {} ({}); it runs again as a rebase attempt from the integrated tree",
            j.index,
            j.attempt,
            if names.is_empty() {
                "the branch".to_string()
            } else {
                names.join(", ")
            },
            crate::pure::sanitize::line(&clip::chars(why.lines().next().unwrap_or_default(), 300))
        ));
        ledger.rebased.insert(j.index, onto.clone());
        ledger.asked.push(Rebase {
            task: j.index,
            attempt: j.attempt,
            onto,
            why,
        });
    }

    /// Merges one completed patch made where it `started`: the paths
    /// it changes in the round when it lands, or the paths at fault and why it cannot.
    fn merge_one(
        &mut self,
        at: &Merging<'_>,
        ledger: &Ledger,
        plan: &Plan,
        j: &Judged,
        started: &StartedAt,
    ) -> Result<Landing, RunError> {
        let index = self.index(at.repo)?;
        let merged = index.merge_patch(&started.base, (&j.patch).into())?;
        let (changed, patch, combined) = match merged {
            Merged::Conflict { files, account } => {
                let why = format!("conflict in {}\n{account}", files.join(", "));
                return Ok(Err((files.into_iter().collect(), why)));
            }
            Merged::Clean {
                changed,
                patch,
                combined,
            } => (changed, patch, combined),
        };
        let changed: BTreeSet<String> = changed.into_iter().collect();
        // A merge may carry another task's change into a path this task neither declared
        // nor changed (a rename followed): never accepted behind its back.
        let own: BTreeSet<String> = plan.tasks[j.index]
            .files()
            .map(|f| crate::pure::paths::key(f))
            .chain(j.touched.iter().cloned())
            .collect();
        let foreign: BTreeSet<String> = changed.difference(&own).cloned().collect();
        if !foreign.is_empty() {
            let list: Vec<&str> = foreign.iter().map(String::as_str).collect();
            let why = format!(
                "the merge changes {}, which task {} does not declare",
                list.join(", "),
                j.index
            );
            return Ok(Err((foreign, why)));
        }
        // A rebase must keep the change it builds on: those tasks' checks run on its result
        // even when nothing landed beside it.
        let onto = ledger.rebased.get(&j.index);
        // The tasks landed since its base that declared or changed a path it changes: their
        // checks may read what it changed even where the merge combined nothing.
        let sharing = ledger.sharing(plan, started.since, &changed);
        if combined || onto.is_some() || !sharing.is_empty() {
            let snapshot = index.snapshot(at.repo)?;
            // No task code runs while the round's temporary index exists.
            drop(index);
            failpoint("after-merge", at.round);
            let mut who = vec![j.index];
            who.extend(sharing);
            who.extend(onto.into_iter().flatten());
            let mut seen = BTreeSet::new();
            who.retain(|k| seen.insert(*k));
            let who: Vec<(usize, &[AcceptanceCriterion])> = who
                .into_iter()
                .map(|k| {
                    let checks = ledger.checks.get(&k).filter(|_| k != j.index);
                    (
                        k,
                        checks.map_or(plan.tasks[k].acceptance_criteria(), Vec::as_slice),
                    )
                })
                .collect();
            tracing::debug!(task = j.index, checks = who.len(), "re-checking the merge");
            let failed = recheck(at, &snapshot, &who)?;
            tracing::debug!(task = j.index, passed = failed.is_none(), "re-checked");
            if let Some(failed) = failed {
                return Ok(Err((changed, failed)));
            }
        }
        self.accepted.push(crate::edge::git::Patch::Bytes(patch));
        let mut touched: BTreeSet<String> = j.touched.iter().cloned().collect();
        touched.extend(changed.iter().cloned());
        self.applied.push((j.index, touched.clone()));
        Ok(Ok(touched))
    }
}

impl RoundBuild {
    /// A merge that lands nothing: `patch`, made at `base`, merged three-way onto the round's
    /// tree as it is now (`git merge-tree`, trees only, no task code), the index then dropped.
    /// For a writer that cannot re-check (the Action's finalize under `overlap: merge`): a
    /// clean merge's patch (onto the round's tree) is handed to a job without a write token to
    /// re-check, and lands only after it passed there.
    #[allow(
        dead_code,
        reason = "the Action's finalize under merge: not wired yet (issue 23)"
    )]
    pub(crate) fn trial_merge(
        &self,
        repo: &Repo,
        base: &str,
        patch: crate::edge::git::PatchRef<'_>,
    ) -> Result<Merged, RunError> {
        Ok(self.index(repo)?.merge_patch(base, patch)?)
    }
}

/// Runs the acceptance checks of `tasks` on commit `snapshot` in a worktree of its own: the
/// first that fails, said (task, check, output), or `None` when all pass.
fn recheck(
    at: &Merging<'_>,
    snapshot: &str,
    tasks: &[(usize, &[AcceptanceCriterion])],
) -> Result<Option<String>, RunError> {
    let wt = super::pool::retry_git(|| at.pool.acquire(at.repo, snapshot))?;
    let mut failed = None;
    'tasks: for &(k, checks) in tasks {
        for c in checks {
            let o = crate::edge::shell::run(&c.check, wt.path(), at.timeout);
            if !o.passed {
                failed = Some(format!(
                    "on the merged tree, task {k}'s acceptance check `{}` ({}) fails:\n{}",
                    c.check,
                    c.criterion,
                    o.output.trim_end()
                ));
                break 'tasks;
            }
        }
    }
    if let Some(warning) = at.pool.release(wt) {
        at.ui.say(format!("  re-check: {warning}"));
    }
    Ok(failed)
}

/// Keeps why attempt `j` could not be merged beside its logs, as
/// `task-N-attempt-K[.rebase].merge` (best effort: the run's output says it too).
fn keep_note(at: &Merging<'_>, j: &Judged, rebase: bool, why: &str) {
    let common = at.repo.common_dir();
    let Ok(dir) = at.pool.logs.dir(common) else {
        return;
    };
    let stem = if rebase { ".rebase" } else { "" };
    let path = dir.join(format!(
        "task-{}-attempt-{}{stem}.merge",
        j.index, j.attempt
    ));
    let kept = crate::edge::fsx::create_dir_all(common, &dir)
        .and_then(|()| crate::edge::fsx::remove_file(common, &path))
        .and_then(|()| {
            crate::edge::fsx::write(common, &path, clip::chars(why, NOTE_MAX).as_bytes())
        });
    if let Err(e) = kept {
        tracing::warn!("task {}: cannot keep the merge note: {e}", j.index);
    }
}

/// How much of a merge note is kept.
const NOTE_MAX: usize = 64 << 10;

#[cfg(test)]
mod tests {
    /// A repository at a commit holding `list.txt` as `base`, and the patches (`git diff
    /// --binary` from that commit) that write it as each of `versions`.
    fn repo_with_changes(
        base: &str,
        versions: &[&str],
    ) -> (
        tempfile::TempDir,
        crate::edge::git::Repo,
        String,
        Vec<Vec<u8>>,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let run = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args([
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@t",
                    "-c",
                    "commit.gpgsign=false",
                ])
                .args(args)
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
            out.stdout
        };
        run(&["init", "-q"]);
        std::fs::write(dir.path().join("list.txt"), base).unwrap();
        run(&["add", "list.txt"]);
        run(&["commit", "-qm", "list"]);
        let head = String::from_utf8(run(&["rev-parse", "HEAD"])).unwrap();
        let patches = versions
            .iter()
            .map(|v| {
                std::fs::write(dir.path().join("list.txt"), v).unwrap();
                let p = run(&["diff", "--binary", "--full-index", "HEAD"]);
                run(&["checkout", "-q", "--", "list.txt"]);
                p
            })
            .collect();
        let repo = crate::edge::git::Repo::discover(dir.path()).unwrap();
        (dir, repo, head.trim().to_string(), patches)
    }

    #[test]
    fn a_trial_merge_lands_nothing_and_its_patch_rebuilds_the_merge_on_the_rounds_tree() {
        const BASE: &str = "a\n1\n2\n3\n4\nb\n";
        let (_dir, repo, head, patches) = repo_with_changes(
            BASE,
            &[
                "a=0\n1\n2\n3\n4\nb\n",
                "a\n1\n2\n3\n4\nb=1\n",
                "a=1\n1\n2\n3\n4\nb\n",
            ],
        );
        let mut build = super::RoundBuild::start();
        build
            .accepted
            .push(crate::edge::git::Patch::Bytes(patches[0].clone()));
        let crate::edge::git::Merged::Clean {
            changed,
            patch,
            combined,
        } = build
            .trial_merge(&repo, &head, (&patches[1]).into())
            .unwrap()
        else {
            panic!("different lines merge cleanly")
        };
        assert_eq!((changed, combined), (vec!["list.txt".to_string()], true));
        // Nothing landed: the round's tree still holds the first change only.
        let index = build.index(&repo).unwrap();
        assert_eq!(
            index.read_entry("list.txt").unwrap().unwrap().1,
            b"a=0\n1\n2\n3\n4\nb\n"
        );
        // The merge's patch applies onto the round's tree as it is and gives the merge.
        index.apply_patch(&patch).unwrap();
        assert_eq!(
            index.read_entry("list.txt").unwrap().unwrap().1,
            b"a=0\n1\n2\n3\n4\nb=1\n"
        );
        drop(index);
        // The same line changed twice: a conflict, and still nothing landed.
        let conflict = build
            .trial_merge(&repo, &head, (&patches[2]).into())
            .unwrap();
        assert!(
            matches!(&conflict, crate::edge::git::Merged::Conflict { files, .. } if files == &["list.txt"]),
            "{conflict:?}"
        );
        assert_eq!(
            build
                .index(&repo)
                .unwrap()
                .read_entry("list.txt")
                .unwrap()
                .unwrap()
                .1,
            b"a=0\n1\n2\n3\n4\nb\n"
        );
    }

    #[test]
    fn a_note_or_a_line_from_worker_content_is_bounded_by_characters() {
        let note = crate::pure::clip::chars(&"é".repeat(100_000), super::NOTE_MAX);
        assert_eq!(note.chars().count(), 64 << 10);
        assert!(note.ends_with('…'));
    }
}
