//! The Action's rounds under `overlap: merge` on the clock (`action::rounds::follow`): a
//! round's tasks in one matrix whatever files they share; each part's finalize lands the
//! re-checked merges first, then the rest in plan order — a result meeting nothing landed or
//! kept aside before it lands, one that meets them is merged aside and waits for the next
//! part: a re-check job (the start-up only: no worker; the checks' own time is not modelled),
//! or, for the expected share of them that conflict (the learned rate, accumulated over the
//! run so the count stays whole and deterministic: the latest in plan order), a rebase job
//! (the task's last attempt again, uncounted). A rebase that meets what landed beside it waits
//! for its own re-check in the part after. The chain of merges is re-checked in one part.

use super::{MATRIX_LIMIT, Sim, list_schedule};
use crate::pure::overlap::Conflicts;
use crate::pure::simulate::Prediction;
use crate::pure::simulate::merge::MergeRate;

/// A job of a part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Job {
    /// The task's next attempt (a worker).
    Attempt(usize),
    /// A merge kept aside, re-checked (no worker).
    Recheck(usize),
    /// A merge that conflicted, run again from the integrated tree (a worker, uncounted).
    Rebase(usize),
}

impl Job {
    fn task(self) -> usize {
        match self {
            Job::Attempt(i) | Job::Recheck(i) | Job::Rebase(i) => i,
        }
    }
}

/// The expected conflicts, kept whole: conflicts per thousand accumulated over the run.
struct Expected {
    permille: u64,
    carried: u64,
}

impl Expected {
    /// How many of `n` merges conflict.
    fn of(&mut self, n: usize) -> usize {
        self.carried += self.permille * n as u64;
        let k = self.carried / 1000;
        self.carried -= k * 1000;
        usize::try_from(k).unwrap_or(n).min(n)
    }
}

impl Sim<'_> {
    /// The Action's rounds under `merge` (this `Sim` keeping no conflicts apart; `serial`:
    /// the file conflicts that decide what is merged aside).
    pub(in crate::pure::simulate) fn actions_rounds_merge(
        &self,
        serial: &Conflicts,
        rate: MergeRate,
    ) -> Prediction {
        let js = self.setting.job_start;
        let mut expected = Expected {
            permille: u64::from(rate.permille),
            carried: 500,
        };
        self.actions_rounds_by(|round, clock, at| {
            let mut jobs_left: Vec<Job> = round.iter().map(|&i| Job::Attempt(i)).collect();
            while !jobs_left.is_empty() {
                let part: Vec<Job> = jobs_left
                    .drain(..jobs_left.len().min(MATRIX_LIMIT))
                    .collect();
                let mut failed = Vec::new();
                let order: Vec<usize> = (0..part.len()).collect();
                self.actions_run(at, part.len(), |t| {
                    list_schedule(
                        &order,
                        self.setting.max_parallel,
                        t,
                        |k, start| match part[k] {
                            Job::Attempt(i) => {
                                let (end, f) = clock.one_attempt(self.times, i, start, js);
                                if f {
                                    failed.push(i);
                                }
                                end
                            }
                            Job::Recheck(_) => start + js,
                            Job::Rebase(i) => {
                                start
                                    + js
                                    + self.times.tasks[i].attempts.last().copied().unwrap_or(0)
                            }
                        },
                    )
                });
                let next = self.finalize(serial, &part, &failed, &mut expected);
                jobs_left.extend(next);
                jobs_left.sort_by_key(|j| j.task());
            }
        })
    }

    /// What a part's finalize leaves for the next part: the retries of `failed` attempts, the
    /// re-checks and rebases of the merges kept aside.
    fn finalize(
        &self,
        serial: &Conflicts,
        part: &[Job],
        failed: &[usize],
        expected: &mut Expected,
    ) -> Vec<Job> {
        let mut next: Vec<Job> = failed.iter().map(|&i| Job::Attempt(i)).collect();
        // The re-checked chain lands first.
        let mut landed: Vec<usize> = part
            .iter()
            .filter(|j| matches!(j, Job::Recheck(_)))
            .map(|j| j.task())
            .collect();
        let mut rest: Vec<Job> = part
            .iter()
            .copied()
            .filter(|j| match j {
                Job::Attempt(i) => !failed.contains(i),
                Job::Rebase(_) => true,
                Job::Recheck(_) => false,
            })
            .collect();
        rest.sort_by_key(|j| j.task());
        let mut aside: Vec<usize> = Vec::new();
        let mut merged = Vec::new();
        for j in rest {
            let i = j.task();
            let meets = landed
                .iter()
                .chain(&aside)
                .any(|&k| serial.conflict(self.dag, i, k));
            if !meets {
                landed.push(i);
                continue;
            }
            aside.push(i);
            match j {
                Job::Rebase(_) => next.push(Job::Recheck(i)),
                _ => merged.push(i),
            }
        }
        let rebases = expected.of(merged.len());
        let (clean, conflicting) = merged.split_at(merged.len() - rebases);
        next.extend(clean.iter().map(|&i| Job::Recheck(i)));
        next.extend(conflicting.iter().map(|&i| Job::Rebase(i)));
        next
    }
}
