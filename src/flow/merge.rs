//! `overlap: merge` locally: the rules' driver. Tasks that share declared files run at the
//! same time, each from its base, and their results are integrated in plan order by a
//! three-way merge against the round's tree ([`RoundBuild::add_merged`], `git merge-tree` in
//! [`crate::edge::git::RoundIndex::merge_patch`]). What happens to each result — it lands, its
//! merge is re-checked first, it is sent back once as an uncounted *rebase* attempt, it is a
//! failed attempt — is [`crate::pure::integration`]'s decision, the step run by
//! [`Ledger::integrate`] as for the Action's writers; this module's driver does the I/O: the
//! merge, the re-check of the tasks' acceptance checks on the merged tree (in a worktree of
//! its own: the round's temporary index does not exist while they run), the landing in the
//! round, the note beside the logs, the run's output. A rebase starts from the integrated
//! tree, its prompt names the tasks it must build on and shows what went wrong. Nothing is
//! published before the round commit, so a crash anywhere here leaves `HEAD` as it was and
//! the tasks in progress for a resume.
//!
//! The ledger is the run's journal of integration: kept crash-safe (written whole, synced,
//! renamed) in `<git-common-dir>/dagexec/ledger.json` at each decision — an attempt started,
//! an integration decided — and read back by the run that resumes ([`Merges::open`]; its
//! tasks found by their identity in the source, which a task list edited between the runs
//! moves: [`Ledger::moved`]), made true for it by what the round commits kept
//! ([`Ledger::after_crash`]): a rebase that was running onto committed work runs again as that
//! rebase, uncounted, rather than as a new attempt that would not build on that work.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::attempt::{Judged, Pool};
use super::integrate::{RoundBuild, not_integrated};
use super::{RunError, Ui, failpoint};
use crate::edge::git::{Merged, Repo, RoundIndex};
use crate::pure::clip;
use crate::pure::integration::{self, Arrival, Ledger, Meets, Merge, Rebase, Rechecked, Step};
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

/// What a run under `overlap: merge` remembers between integrations: the rules' ledger
/// ([`crate::pure::integration`]), kept in its file at each decision, and the round the last
/// attempt started in (the crash tests' failpoints name it).
#[derive(Debug)]
pub(crate) struct Merges {
    pub ledger: Ledger,
    /// Where the ledger is kept (`<git-common-dir>/dagexec/ledger.json`).
    file: PathBuf,
    /// The git directory the file is under (no link is followed below it).
    common: PathBuf,
    /// The plan the ledger is for, as the run names it.
    plan: String,
    pub round: u32,
}

/// The ledger's file: the plan it is for (a file left for another plan is not read) and the
/// ledger.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Kept {
    plan: String,
    tasks: usize,
    /// Each task's identity in its source ([`crate::sources::identities`]): the ledger follows
    /// its tasks through a task list edited between runs. None in a file an earlier dagexec
    /// kept: there it is read only for as many tasks, where they were.
    #[serde(default)]
    ids: Vec<String>,
    ledger: Ledger,
}

/// The ledger's file in the git directory `common`.
fn ledger_file(common: &std::path::Path) -> PathBuf {
    common.join("dagexec").join("ledger.json")
}

/// Removes the ledger's file a run under `overlap: merge` left (this run does not merge).
pub(crate) fn forget(repo: &Repo) -> Result<(), RunError> {
    let file = ledger_file(repo.common_dir());
    crate::edge::fsx::remove_file(repo.common_dir(), &file)
        .map_err(crate::flow::cannot_write(&file))
}

impl Merges {
    /// The ledger of a run of `plan` (`plan_rel`): when it resumes (`resume`), the one the
    /// run it resumes kept, made true again ([`Ledger::after_crash`], `plan`'s completed
    /// tasks being the committed ones): each rebase that runs again gets back the attempt it
    /// repeats (the resume counts it when it starts, as the rebase never was), and is said;
    /// else a new one. Kept at once.
    pub(crate) fn open(
        repo: &Repo,
        plan_rel: &str,
        plan: &mut Plan,
        resume: bool,
        ui: &Ui,
    ) -> Result<Merges, RunError> {
        let common = repo.common_dir().to_path_buf();
        let file = ledger_file(&common);
        let kept = std::fs::read(&file)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Kept>(&bytes).ok())
            .filter(|k| resume && k.plan == plan_rel)
            .filter(|k| !k.ids.is_empty() || k.tasks == plan.tasks.len());
        let mut ledger = Ledger::default();
        if let Some(kept) = kept {
            ui.name_tasks(plan);
            ledger = kept.ledger;
            if !kept.ids.is_empty() {
                let ids = crate::sources::identities(plan);
                ledger.moved(|k| ids.iter().position(|id| Some(id) == kept.ids.get(k)));
            }
            let again = ledger.after_crash(|k| {
                plan.tasks
                    .get(k)
                    .is_some_and(|t| t.status == Status::Completed)
            });
            for r in again {
                let t = &mut plan.tasks[r.task];
                if t.status != Status::Pending {
                    continue;
                }
                if t.attempts() == r.attempt {
                    t.attempts = Some(r.attempt.saturating_sub(1)).filter(|&n| n > 0);
                }
                ui.say(format!(
                    "Task {} was in its rebase onto {} (attempt {}, not counted) when the last run stopped; it runs that rebase again.",
                    ui.task(r.task),
                    ui.onto(&r.onto),
                    r.attempt
                ));
            }
        }
        let merges = Merges {
            ledger,
            file,
            common,
            plan: plan_rel.to_string(),
            round: 0,
        };
        merges.keep(plan)?;
        Ok(merges)
    }

    /// Writes the ledger to its file, crash-safe.
    fn keep(&self, plan: &Plan) -> Result<(), RunError> {
        let kept = Kept {
            plan: self.plan.clone(),
            tasks: plan.tasks.len(),
            ids: crate::sources::identities(plan),
            ledger: self.ledger.clone(),
        };
        let bytes = serde_json::to_vec(&kept).expect("the ledger serialises");
        crate::edge::fsx::write(&self.common, &self.file, &bytes)
            .map_err(crate::flow::cannot_write(&self.file))
    }

    /// Attempt `task` starts from `base` in round `round`, kept: whether it is a rebase
    /// attempt.
    pub(crate) fn started(
        &mut self,
        plan: &Plan,
        task: usize,
        base: &str,
        round: u32,
    ) -> Result<bool, RunError> {
        self.round = round;
        let rebase = self.ledger.start(task, base);
        self.keep(plan)?;
        Ok(rebase)
    }
}

/// `task` landed in the ledger, changing `changed`, with its checks as they are before the
/// plan's update trims them.
pub(crate) fn landed(ledger: &mut Ledger, plan: &Plan, task: usize, changed: BTreeSet<String>) {
    let declared = integration::declared(plan, task);
    let checks = plan.tasks[task].acceptance_criteria().to_vec();
    ledger.landed(task, changed, declared, checks);
}

impl RoundBuild {
    /// [`RoundBuild::add`] under `overlap: merge`: each completed patch (plan-index order)
    /// merged three-way into the round's tree and re-checked as [`Ledger`] decides; one that
    /// cannot land is sent back as a rebase attempt ([`Ledger::take_asked`]) and decides
    /// nothing yet, or — when it was a rebase already — is a failed attempt. Everything else
    /// is decided as `add` decides.
    pub(crate) fn add_merged(
        &mut self,
        at: &Merging<'_>,
        merges: &mut Merges,
        plan: &mut Plan,
        judged: Vec<Judged>,
    ) -> Result<(), RunError> {
        let ledger = &mut merges.ledger;
        for j in judged {
            let started = ledger.arrived(j.index);
            let merging = j.verdict.status == Status::Completed
                && !j.patch.is_empty()
                && at.repo.uncommitted(&j.touched)?.is_empty();
            let Some(start) = started.filter(|_| merging) else {
                self.add_serial(at.repo, plan, &j, at.ui, ledger)?;
                continue;
            };
            crate::flow::steps::questions::record(plan, &j);
            let own = integration::paths_of(plan, j.index, &j.touched);
            let a = j.arrival(&start, &own);
            let mut local = Inline {
                build: self,
                at,
                plan,
                j: &j,
                index: None,
                patch: Vec::new(),
            };
            ledger.integrate(&mut local, &a, Meets::default())?;
        }
        merges.keep(plan)
    }
}

impl RoundBuild {
    /// Judged attempt `j` decided as under `serial` ([`RoundBuild::add`]), whoever drives the
    /// rules: `ledger` learns what landed, and that `j`'s send-back is over.
    pub(crate) fn add_serial(
        &mut self,
        repo: &Repo,
        plan: &mut Plan,
        j: &Judged,
        ui: &Ui,
        ledger: &mut Ledger,
    ) -> Result<(), RunError> {
        let before = self.applied.len();
        self.add(repo, plan, std::slice::from_ref(j), ui)?;
        for (k, changed) in self.applied.get(before..).unwrap_or_default().to_vec() {
            landed(ledger, plan, k, changed);
        }
        ledger.ended(j.index);
        Ok(())
    }
}

/// One completed attempt `j` integrated in the round under the ledger's rules
/// ([`Ledger::integrate`]): this driver's I/O. It re-checks inline, in a worktree of its own.
struct Inline<'x, 'a> {
    build: &'x mut RoundBuild,
    at: &'x Merging<'a>,
    plan: &'x mut Plan,
    j: &'x Judged,
    /// The round's index the merge was made in, until the re-check drops it.
    index: Option<RoundIndex>,
    /// The merged patch, which rebuilds the merge on the round's tree.
    patch: Vec<u8>,
}

impl integration::Driver for Inline<'_, '_> {
    type Error = RunError;

    /// The patch, made where it started, merged three-way onto the round's index.
    fn merge(&mut self, a: &Arrival<'_>) -> Result<Merge, RunError> {
        let index = self.build.index(self.at.repo)?;
        let merged = index.merge_patch(&a.start.base, (&self.j.patch).into())?;
        let (merge, patch) = judged_merge(merged);
        self.index = Some(index);
        self.patch = patch;
        Ok(merge)
    }

    /// The checks of `tasks` (a landed task's as it landed) run on the merged tree, in a
    /// worktree of its own.
    fn recheck(
        &mut self,
        ledger: &Ledger,
        a: &Arrival<'_>,
        tasks: Vec<usize>,
    ) -> Result<Rechecked, RunError> {
        let index = self
            .index
            .take()
            .expect("the merge comes before its re-check");
        let snapshot = index.snapshot(self.at.repo)?;
        // No task code runs while the round's temporary index exists.
        drop(index);
        failpoint("after-merge", self.at.round);
        let plan = &*self.plan;
        let who: Vec<(usize, &[AcceptanceCriterion])> = tasks
            .into_iter()
            .map(|k| {
                let kept = ledger.checks_of(k).filter(|_| k != a.task);
                (k, kept.unwrap_or(plan.tasks[k].acceptance_criteria()))
            })
            .collect();
        tracing::debug!(task = a.task, checks = who.len(), "re-checking the merge");
        let failed = recheck(self.at, &snapshot, &who)?;
        tracing::debug!(task = a.task, passed = failed.is_none(), "re-checked");
        Ok(Rechecked::Ran(failed))
    }

    /// The merged patch lands in the round.
    fn land(&mut self, ledger: &mut Ledger, changed: BTreeSet<String>) -> Result<(), RunError> {
        let j = self.j;
        let patch = std::mem::take(&mut self.patch);
        self.build
            .accepted
            .push((j.index, crate::edge::git::Patch::Bytes(patch)));
        let mut touched: BTreeSet<String> = j.touched.iter().cloned().collect();
        touched.extend(changed);
        self.build.applied.push((j.index, touched.clone()));
        landed(ledger, self.plan, j.index, touched);
        self.build
            .decided
            .push(j, j.verdict.status, &j.verdict.result);
        Ok(())
    }

    /// The attempt cannot land (`step`: sent back as a rebase attempt, or — rebased once
    /// already — a failed attempt: its later attempts still have to keep the change it was
    /// sent to build on, those tasks' checks run on them): its note beside the logs, its
    /// record a conflict, the run's output.
    fn send_back(&mut self, ledger: &mut Ledger, step: Step) -> Result<(), RunError> {
        let (at, j) = (self.at, self.j);
        let (again, why) = match &step {
            Step::Rebase(r) => (false, r.why.as_str()),
            Step::Fail { why } => (true, why.as_str()),
            Step::Land | Step::Recheck { .. } => return Ok(()),
        };
        keep_note(at, j, again, why);
        crate::pure::usage::amend(self.plan, j.index, j.attempt, |r| {
            r.outcome = crate::pure::usage::Outcome::Conflict;
        });
        // The whole account (git's messages, the merged file: worker text) is the note's;
        // the output and the result say its first line, or worker text could pass there as
        // dagexec's own lines.
        let line =
            crate::pure::sanitize::line(&clip::chars(why.lines().next().unwrap_or_default(), 300));
        let Step::Rebase(Rebase { onto, .. }) = step else {
            let why = format!("it cannot be merged after its rebase: {line}");
            let (status, result) = not_integrated(j, &why, at.ui);
            ledger.failed(j.index, status != Status::Pending);
            self.build.decided.push(j, status, &result);
            return Ok(());
        };
        at.ui.say(format!(
            "  task {}: attempt {} cannot be merged onto {} ({line}); it runs again as a rebase attempt from the integrated tree",
            at.ui.task(j.index),
            j.attempt,
            at.ui.onto(&onto),
        ));
        Ok(())
    }
}

/// What git's three-way merge came to, in the rules' terms ([`Merge`]: a conflict says its
/// files and git's account), with the merged patch (empty for a conflict).
pub(crate) fn judged_merge(merged: Merged) -> (Merge, Vec<u8>) {
    match merged {
        Merged::Conflict { files, account } => {
            let why = format!("conflict in {}\n{account}", files.join(", "));
            let files = files.into_iter().collect();
            (Merge::Conflict { files, why }, Vec::new())
        }
        Merged::Clean {
            changed,
            patch,
            combined,
        } => {
            let changed = changed.into_iter().collect();
            (Merge::Clean { changed, combined }, patch)
        }
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
    use super::*;

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
        let run = |args: &[&str]| crate::testing::git(dir.path(), args);
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
    fn a_merge_lands_nothing_and_its_patch_rebuilds_the_merge_on_the_rounds_tree() {
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
            .push((0, crate::edge::git::Patch::Bytes(patches[0].clone())));
        let crate::edge::git::Merged::Clean {
            changed,
            patch,
            combined,
        } = build
            .index(&repo)
            .unwrap()
            .merge_patch(&head, (&patches[1]).into())
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
            .index(&repo)
            .unwrap()
            .merge_patch(&head, (&patches[2]).into())
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

    /// A plan generated from a task list whose tasks are `(id, subject, status)`.
    fn listed(tasks: &[(&str, &str, Status)]) -> Plan {
        let mut plan = crate::testing::plan_of(
            tasks
                .iter()
                .map(|&(_, subject, status)| crate::pure::plan::model::Task {
                    subject: subject.into(),
                    status,
                    ..crate::testing::task(&[], &[subject], &[])
                })
                .collect(),
        );
        let ids: Vec<_> = tasks
            .iter()
            .map(|(id, _, _)| serde_json::json!({"id": id}))
            .collect();
        plan.extra.insert(
            crate::pure::plan::fields::SOURCE.into(),
            serde_json::json!({ "tasks": ids }),
        );
        plan
    }

    /// The team removed task 3 and put task 9 before 2 in their task list between the run
    /// killed in 2's rebase onto 1 and the resume: the count is the same, and the ledger's
    /// rebase follows task 2 to its new index; it is never given to task 9 now at 2's old one.
    #[test]
    fn the_ledger_follows_its_tasks_through_a_task_list_edited_between_runs() {
        let (_dir, repo, _, _) = repo_with_changes("x\n", &[]);
        let ui = Ui::plain(Box::new(std::io::sink()));
        let mut before = listed(&[
            ("1", "1 A", Status::Completed),
            ("2", "2 B", Status::InProgress),
            ("3", "3 C", Status::Pending),
        ]);
        let mut merges = Merges::open(&repo, "tasks.md", &mut before, false, &ui).unwrap();
        merges.ledger = serde_json::from_value(serde_json::json!({
            "landed": [{"task": 0, "changed": ["1 A"], "declared": ["1 A"]}],
            "started": {}, "rebased": {"1": [0]}, "asked": [], "nextIsRebase": [1],
            "rebasing": {"1": {"task": 1, "attempt": 1, "onto": [0], "why": "conflict"}},
            "checks": {"0": []}}))
        .unwrap();
        merges.keep(&before).unwrap();
        let mut after = listed(&[
            ("1", "1 A", Status::Completed),
            ("9", "9 X", Status::Pending),
            ("2", "2 B", Status::Pending),
        ]);
        after.tasks[2].attempts = Some(1);
        let merges = Merges::open(&repo, "tasks.md", &mut after, true, &ui).unwrap();
        assert_eq!(merges.ledger.rebasing(1), None);
        assert_eq!(merges.ledger.rebasing(2).map(|r| &r.onto), Some(&vec![0]));
        assert_eq!(
            after.tasks[2].attempts, None,
            "the rebase gets its attempt back"
        );
    }

    #[test]
    fn a_note_or_a_line_from_worker_content_is_bounded_by_characters() {
        let note = crate::pure::clip::chars(&"é".repeat(100_000), super::NOTE_MAX);
        assert_eq!(note.chars().count(), 64 << 10);
        assert!(note.ends_with('…'));
    }
}
