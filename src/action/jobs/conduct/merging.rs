//! `overlap: merge` under `schedule: eager` (issue 23): tasks that share declared files run
//! side by side, and the conductor — which holds the write token and never runs task code —
//! integrates each batch of arrivals in plan order:
//!
//! - an arrival whose paths (declared or changed) meet nothing that landed since its run's
//!   base (the branch's commits since, and the batch's earlier arrivals) is integrated as
//!   under `serial`;
//! - one that meets them is merged three-way onto the branch's tree without landing (`git
//!   merge-tree`, trees only: no code runs here). A clean merge is kept on the task
//!   ([`FollowUp::Recheck`] in `dagexecFollowUp`, bounded by the same limit as a round's
//!   record) and a **re-check run** is dispatched from the commit that records it: the task
//!   run's `work` job finds the record at its base, applies the kept change and runs the task's
//!   acceptance checks and those of the landed tasks the merge touched, without a worker and
//!   without the write token. When that verdict passed and nothing landed since under the
//!   change's paths, the conductor lands its OWN kept copy (never the run's patch); when
//!   something did, it merges the kept copy again;
//! - a conflict, a failed re-check, or a merge that changes a file the task neither declares
//!   nor changed sends the task back as an uncounted **rebase** run from the integrated tree
//!   ([`FollowUp::Rebase`]: the work job's prompt gets the `## Rebase` section), at most once
//!   per integration: a rebase that cannot land either is a failed attempt.
//!
//! Each of those decisions is the rules' ledger's (`pure::integration::Ledger`, built for the
//! batch from the branch's plan and history), a merge aside taking the ledger's one sequence
//! as finalize's does (`action::arrival::merge_aside`); this module does the I/O.
//!
//! A follow-up is on the branch before its run is dispatched, and its run is recorded as any
//! task run's (`dagexecRun`), so a successor conductor adopts it; one dispatched and not
//! recorded is found by its run-name from the commits that record the same follow-up.

use std::collections::BTreeSet;

use super::remote::Remote;
use crate::action::ActionError;
use crate::action::arrival::{Aside, merge_aside};
use crate::action::rounds::FollowUp;
use crate::edge::git::Merged;
use crate::flow::Ui;
use crate::flow::attempt::Judged;
use crate::flow::exec::Launch;
use crate::pure::integration::{self, Ledger, Meets, Start, Step, paths_of};
use crate::pure::plan::fields::{FOLLOW_UP, FOLLOW_UP_CHECKS};
use crate::pure::plan::model::{Plan, Status};

impl Remote<'_> {
    /// Sorts a batch of arrivals under `overlap: merge`: returns those integrated now; each of
    /// the others waits on its task for a re-check or a rebase run ([`super::remote::MergeState::again`]).
    /// What happens to each is the rules' ledger's ([`Ledger`], built for the batch from the
    /// branch: every task landed before it, by what it declares, and each run's base with
    /// what the branch changed since); this does the I/O.
    pub(super) fn sort_merged(
        &mut self,
        plan: &mut Plan,
        mut judged: Vec<Judged>,
    ) -> Result<Vec<Judged>, ActionError> {
        judged.sort_by_key(|j| j.index);
        let head = self.repo.head()?;
        let mut ledger = landed_before(plan);
        // Every run of the batch started after those landed: only the batch's landings and the
        // branch's history since its base are news to it.
        let before = ledger.landed_tasks().count();
        let mut now: Vec<Judged> = Vec::new();
        for mut j in judged {
            let (follow, base, start) = self.arrived(plan, &mut ledger, &j, before);
            if let Some(f @ FollowUp::Recheck { checks, .. }) = &follow {
                let Some(p) = f.patch().filter(|_| j.verdict.status == Status::Completed) else {
                    let own = paths_of(plan, j.index, &j.touched);
                    let a = j.arrival(&start, &own);
                    let failed = Some(j.verdict.result.clone());
                    let step = ledger.rechecked(&a, checks.clone(), failed);
                    if (Batch {
                        remote: self,
                        plan,
                        now: &now,
                    })
                    .send_back(&mut j, step)
                    {
                        now.push(j);
                    }
                    continue;
                };
                let at = base.as_deref().unwrap_or("HEAD");
                crate::action::arrival::rechecked_lands(self.repo, &mut j, p, at, self.ui);
            }
            let mine = paths_of(plan, j.index, &j.touched);
            let moved = match &base {
                Some(base) if j.verdict.status == Status::Completed && !j.patch.is_empty() => {
                    let moved = self.repo.changed_between(base, &head)?;
                    ledger.meeting_history(&start, moved.into_iter().collect(), &mine)
                }
                Some(_) | None => None,
            };
            let Some(onto) = moved else {
                if j.verdict.status == Status::Completed {
                    let touched = j.touched.iter().cloned().collect();
                    crate::flow::merge::landed(&mut ledger, plan, j.index, touched);
                }
                now.push(j);
                continue;
            };
            let meets = Meets {
                checks: onto.clone(),
                onto,
            };
            let mut batch = Batch {
                remote: self,
                plan,
                now: &now,
            };
            let step = merge_aside(&mut ledger, &mut batch, &mut j, &start, &mine, meets)?;
            if matches!(step, Step::Fail { .. }) {
                now.push(j);
            }
        }
        Ok(now)
    }

    /// Arrival `j`'s follow-up taken off its task (and its checks kept before its landing
    /// trims them), its run's base, and its start in the batch's `ledger` (every run started
    /// after the `before` tasks landed).
    fn arrived(
        &mut self,
        plan: &mut Plan,
        ledger: &mut Ledger,
        j: &Judged,
        before: usize,
    ) -> (Option<FollowUp>, Option<String>, Start) {
        let follow = FollowUp::of(plan, j.index, j.attempt);
        let t = &mut plan.tasks[j.index];
        t.extra.shift_remove(FOLLOW_UP);
        t.extra.shift_remove(FOLLOW_UP_CHECKS);
        // Its checks as they are now, before its landing trims them.
        if !t.acceptance_criteria().is_empty() {
            self.merging
                .landed_checks
                .insert(j.index, t.acceptance_criteria().to_vec());
        }
        let base = self.merging.bases.remove(&j.index);
        let rebase_onto = follow.as_ref().and_then(FollowUp::rebase_onto);
        let start = integration::Start {
            since: before,
            ..ledger.resumed(
                j.index,
                base.as_deref().unwrap_or(""),
                rebase_onto,
                Vec::new(),
            )
        };
        (follow, base, start)
    }

    /// Merges completed attempt `j` (made at `base`) onto the branch's tree with the batch's
    /// landing arrivals `now`, without landing it.
    fn merge_aside(&self, j: &Judged, now: &[Judged], base: &str) -> Result<Merged, ActionError> {
        let index = self.repo.round_index()?;
        for l in now
            .iter()
            .filter(|l| l.verdict.status == Status::Completed && !l.patch.is_empty())
        {
            // As the batch's integration applies them (all or nothing: one that does not apply
            // is not integrated).
            let _ = index.apply_patch(l.patch.borrowed());
        }
        Ok(index.merge_patch(base, j.patch.borrowed())?)
    }

    /// Attempt `j` merged cleanly beside `onto`: what its re-check run needs goes on its task.
    fn keep_for_recheck(&mut self, plan: &mut Plan, j: &Judged, onto: &[usize]) {
        // Its review (if any) concluded now: the re-check reports none.
        crate::flow::steps::questions::record(plan, j);
        // The landed tasks' checks go beside the record: the plan update trims a completed
        // task's (in the commit the re-check starts from, too, for one landing beside it).
        let mut kept = serde_json::Map::new();
        for &k in onto {
            let own = plan.tasks[k].acceptance_criteria();
            let checks = if own.is_empty() {
                self.checks_before_landing(k)
            } else {
                Some(own.to_vec())
            };
            match checks {
                Some(c) => {
                    kept.insert(
                        k.to_string(),
                        serde_json::to_value(c).expect("checks serialise"),
                    );
                }
                None => self.ui.say(format!(
                    "  task {}: the acceptance checks of task {k} are not in the last {HISTORY} commits of the branch; its re-check runs without them",
                    j.index
                )),
            }
        }
        if !kept.is_empty() {
            plan.tasks[j.index]
                .extra
                .insert(FOLLOW_UP_CHECKS.into(), kept.into());
        }
    }

    /// Records follow-up `f` on `j`'s task (in progress, its attempt as it was, `result`
    /// saying why) and asks for its run once the batch is committed.
    fn follow(&mut self, plan: &mut Plan, j: &Judged, f: &FollowUp, result: String) {
        f.record_on(plan);
        let t = &mut plan.tasks[j.index];
        t.status = Status::InProgress;
        t.attempts = Some(t.attempts().max(j.attempt));
        t.result = Some(result);
        self.merging.again.push(Launch {
            task: j.index,
            attempt: j.attempt,
            retry_prompt: None,
        });
    }
}

/// A batch's arrival merged aside by the conductor: where (the conductor, the branch's plan)
/// and the batch's arrivals that land before it.
struct Batch<'x, 'r> {
    remote: &'x mut Remote<'r>,
    plan: &'x mut Plan,
    now: &'x [Judged],
}

impl Aside for Batch<'_, '_> {
    const LATER: &'static str = "";
    const NOBODY: &'static str = "the branch";
    const RECHECKER: &'static str = "a re-check run checks the merged tree";
    const RECHECK_RUNS: &'static str = "now";

    fn plan_ui(&mut self) -> (&mut Plan, &Ui) {
        (self.plan, self.remote.ui)
    }

    fn merge_aside(&mut self, j: &Judged, start: &Start) -> Result<Merged, ActionError> {
        self.remote.merge_aside(j, self.now, &start.base)
    }

    /// Kept on its task, which waits in progress for its re-check run.
    fn keep(&mut self, j: &Judged, _: Vec<u8>, checks: &[usize]) {
        self.remote.keep_for_recheck(self.plan, j, checks);
    }

    /// Its re-check or rebase runs now.
    fn wait(&mut self, j: &Judged, f: FollowUp, result: String) {
        self.remote.follow(self.plan, j, &f, result);
    }
}

impl Remote<'_> {
    /// The acceptance checks task `k` had before it landed: kept when this conductor saw it
    /// arrive, else read from the last plan on the branch's first-parent history (at most
    /// [`HISTORY`] commits back) where it was not completed yet.
    fn checks_before_landing(
        &mut self,
        k: usize,
    ) -> Option<Vec<crate::pure::plan::model::AcceptanceCriterion>> {
        if let Some(c) = self.merging.landed_checks.get(&k) {
            return Some(c.clone());
        }
        for c in self.repo.first_parents(HISTORY).unwrap_or_default() {
            let t = self.plan_at(&c)?.tasks.get(k)?.clone();
            if t.status != Status::Completed {
                let checks = t.acceptance_criteria().to_vec();
                self.merging.landed_checks.insert(k, checks.clone());
                return Some(checks);
            }
        }
        None
    }
}

/// Drops the follow-ups of tasks no longer in progress — put back to pending before their run
/// started (the budget, a stop, the circuit breaker): the change they kept never landed, and
/// the attempt's record and the task's result say so.
pub(super) fn drop_stale(plan: &mut Plan) {
    for i in 0..plan.tasks.len() {
        let t = &mut plan.tasks[i];
        if t.status == Status::InProgress || !t.extra.contains_key(FOLLOW_UP) {
            continue;
        }
        t.extra.shift_remove(FOLLOW_UP_CHECKS);
        let kept: Option<FollowUp> = t
            .extra
            .shift_remove(FOLLOW_UP)
            .and_then(|v| serde_json::from_value(v).ok());
        if let Some(f) = kept {
            let what = match f {
                FollowUp::Recheck { .. } => "merged cleanly but was not re-checked",
                FollowUp::Rebase { .. } => "was not run again as a rebase",
            };
            t.result = Some(format!(
                "attempt {} {what}: the run stopped starting tasks first, so its change did not land",
                f.attempt()
            ));
            crate::pure::usage::amend(plan, i, f.attempt(), |r| {
                r.outcome = crate::pure::usage::Outcome::Interrupted;
            });
        }
    }
}

/// How far back the branch's history is read for a landed task's checks.
const HISTORY: usize = 512;

/// The batch's ledger, from the branch's plan: every task landed before it, by the paths it
/// declares (what it changed is on the branch's history, read per run).
fn landed_before(plan: &Plan) -> Ledger {
    let mut ledger = Ledger::later();
    for (k, t) in plan.tasks.iter().enumerate() {
        if t.status == Status::Completed {
            crate::flow::merge::landed(&mut ledger, plan, k, BTreeSet::new());
        }
    }
    ledger
}
