//! What the Action's two writers under `overlap: merge` — finalize with a round's part, the
//! conductor with a batch of task runs — share of an arrival that meets what landed: the
//! ledger's one sequence ([`Ledger::integrate`]) driven with a merge kept aside. A clean merge
//! is kept as a [`FollowUp::Recheck`] for a later job to re-check (refused when it is too
//! large to record), a send-back is said and recorded as a conflict ([`Aside::send_back`]);
//! each writer does only its own I/O ([`Aside`]): the merge onto its tree, where its
//! follow-ups wait.

use std::collections::BTreeSet;

use crate::action::ActionError;
use crate::action::rounds::FollowUp;
use crate::edge::git::Merged;
use crate::flow::Ui;
use crate::flow::attempt::Judged;
use crate::pure::integration::{
    Arrival, Driver, Ledger, Meets, Merge, Rebase, Rechecked, Start, Step, names,
};
use crate::pure::plan::model::Plan;

/// A writer's own I/O for a merge kept aside.
pub(crate) trait Aside {
    /// When a rebase runs, as the send-back says it (after "from the integrated tree").
    const LATER: &'static str;

    /// The plan being integrated and the display.
    fn plan_ui(&mut self) -> (&mut Plan, &Ui);

    /// Attempt `j`'s change (started at `start`) merged three-way onto the writer's tree
    /// without landing.
    fn merge_aside(&mut self, j: &Judged, start: &Start) -> Result<Merged, ActionError>;

    /// Whom a re-check that names no task runs beside, as the writer says it.
    const NOBODY: &'static str;
    /// Who re-checks a clean merge, as the writer says it (after "it lands after").
    const RECHECKER: &'static str;
    /// When that re-check runs (after "its re-check runs").
    const RECHECK_RUNS: &'static str;

    /// Attempt `j`'s clean merge `patch`, to be re-checked with the checks of `checks`, kept
    /// where its re-check finds it (its record then waits as [`Aside::wait`] says).
    fn keep(&mut self, j: &Judged, patch: Vec<u8>, checks: &[usize]);

    /// Attempt `j`, kept for a re-check or sent back as `f` (`result` says why), waits for its
    /// re-check or rebase.
    fn wait(&mut self, j: &Judged, f: FollowUp, result: String);

    /// Attempt `j`, sent back by the rules (`step`: [`Step::Rebase`] or [`Step::Fail`]),
    /// recorded as a conflict and said: a rebase waits for its run (`false`: nothing more to do
    /// with it now); a failed attempt is decided as any (`true`: the caller integrates it as
    /// failed; `j` says why and carries no patch).
    fn send_back(&mut self, j: &mut Judged, step: Step) -> bool {
        const KEPT: usize = 16 << 10;
        let (plan, ui) = self.plan_ui();
        crate::pure::usage::amend(plan, j.index, j.attempt, |r| {
            r.outcome = crate::pure::usage::Outcome::Conflict;
        });
        let why = match &step {
            Step::Rebase(Rebase { why, .. }) | Step::Fail { why } => why.as_str(),
            Step::Land | Step::Recheck { .. } => "",
        };
        let line = crate::pure::sanitize::line(why.lines().next().unwrap_or_default());
        let line: String = line.chars().take(300).collect();
        let Step::Rebase(r) = step else {
            j.verdict.status = crate::pure::plan::model::Status::Failed;
            j.verdict.result = format!("it cannot be merged after its rebase: {line}");
            j.patch.clear();
            return true;
        };
        ui.say(format!(
            "  task {}: attempt {} cannot land beside {} ({line}); it runs again as a rebase attempt from the integrated tree{}",
            j.index,
            j.attempt,
            names(&r.onto),
            Self::LATER
        ));
        let f = FollowUp::Rebase {
            task: r.task,
            attempt: r.attempt,
            why: r.why.chars().take(KEPT).collect(),
            onto: r.onto,
        };
        let result = format!(
            "attempt {} runs again as a rebase attempt: {line}",
            j.attempt
        );
        self.wait(j, f, result);
        false
    }
}

/// Completed attempt `j` (started at `start`, owning `own`), which `meets` what landed or was
/// kept aside, through the ledger's sequence with writer `w`'s I/O: the step taken —
/// [`Step::Recheck`] kept for a re-check, [`Step::Rebase`] sent back, [`Step::Fail`] a failed
/// attempt the caller integrates as one.
pub(crate) fn merge_aside<W: Aside>(
    ledger: &mut Ledger,
    w: &mut W,
    j: &mut Judged,
    start: &Start,
    own: &BTreeSet<String>,
    meets: Meets,
) -> Result<Step, ActionError> {
    let a = j.arrival(start, own);
    let mut d = Deferred {
        w,
        j,
        patch: Vec::new(),
    };
    ledger.integrate(&mut d, &a, meets)
}

/// [`merge_aside`]'s driver, whose re-check is deferred to a later job: the writer, the
/// attempt, its merged change.
struct Deferred<'x, W> {
    w: &'x mut W,
    j: &'x mut Judged,
    patch: Vec<u8>,
}

impl<W: Aside> Driver for Deferred<'_, W> {
    type Error = ActionError;

    fn merge(&mut self, a: &Arrival<'_>) -> Result<Merge, ActionError> {
        let (merge, patch) = crate::flow::merge::judged_merge(self.w.merge_aside(self.j, a.start)?);
        self.patch = patch;
        Ok(merge)
    }

    /// Kept for a later job's re-check, when the record can hold it.
    fn recheck(
        &mut self,
        _: &Ledger,
        a: &Arrival<'_>,
        tasks: Vec<usize>,
    ) -> Result<Rechecked, ActionError> {
        let patch = std::mem::take(&mut self.patch);
        let kept = FollowUp::recheck(a.task, a.attempt, &patch, tasks.clone(), a.start.rebase);
        Ok(match kept {
            Ok(f) => {
                self.w.keep(self.j, patch, &tasks);
                let names = match tasks.as_slice() {
                    [] => W::NOBODY.to_string(),
                    _ => names(&tasks),
                };
                let result = format!(
                    "attempt {} merged cleanly beside {names}; its re-check runs {}",
                    a.attempt,
                    W::RECHECK_RUNS
                );
                self.w.wait(self.j, f, result);
                self.w.plan_ui().1.say(format!(
                    "  task {}: attempt {} merges cleanly onto {names}; it lands after {}",
                    a.task,
                    a.attempt,
                    W::RECHECKER
                ));
                Rechecked::Kept
            }
            Err(why) => Rechecked::NotKept(why),
        })
    }

    fn send_back(&mut self, _: &mut Ledger, step: Step) -> Result<(), ActionError> {
        self.w.send_back(self.j, step);
        Ok(())
    }
}
