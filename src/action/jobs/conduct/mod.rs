//! `dagexec action conduct`: `schedule: eager` on GitHub Actions. One job — the conductor —
//! holds the write token and never runs task code; every task attempt is its own workflow
//! run (`workflow_dispatch` with `task`, `attempt` and `base`; its run-name says which), so
//! a task starts as soon as its blockers are committed and a slot is free, and its result is
//! integrated, committed and pushed as soon as its run ends — the pull request and status
//! comment move with it, told once what the commit unblocked is dispatched (a dispatch waits
//! only for the push and the look for `/execute abort`).
//!
//! The loop is the local eager engine's: [`engine::eager_pick`] (longest remaining chain
//! first, never beside a task it conflicts with — under `overlap: merge` tasks that share
//! files are no conflict, and each arrival that meets what landed since its run's base is
//! merged without landing and waits for a re-check or rebase run ([`merging`]) —, at most
//! `max-parallel` at once), the same
//! judging as finalize ([`crate::action::arrival`]: the artifact read back, refusals, reviews,
//! questions), the same integration, plan update, retries, cascade and circuit breaker
//! ([`crate::action::arrival::integrate`]), one round commit per batch of arrivals (the runs found
//! ended at one poll), and the same stops (completed, deadlock, questions, breaker).
//!
//! State and crash safety: the execution branch is the only state, and beside it the record
//! of starts ([`starts_ref`], off the history the pull request shows: the branch holds one
//! commit per batch of arrivals and the final one). A started attempt is recorded and pushed
//! there before its run is dispatched (a commit on the branch's tip, `dagexec: starting task
//! N attempt K`: `status: in_progress`, its attempt counted); its run (the field `dagexecRun`
//! with the run's id, attempt and base) is committed on the branch with the next round commit
//! (or the handover commit). A dispatch is sent once: after a failed answer (GitHub may have
//! started the run) the run is looked for by its run-name before the dispatch is ever sent
//! again. A conductor that starts — the first, a successor, or one started by `/execute`
//! after any crash — adopts the runs its branch records and polls them again, reads the
//! record of starts made on the branch's tip, and looks up the run of a task in progress
//! without a run record by its run-name among the branch's dispatched runs, from the commit
//! it was dispatched from (the record's, or the follow-up's, for a re-check or rebase run),
//! and adopts it; when GitHub has none, the attempt was interrupted before its run started
//! and does not count (an attempt is counted once per run GitHub started), and a follow-up
//! (`overlap: merge`) is dispatched then, keeping its merged work. No attempt is dispatched
//! twice, and none is
//! integrated twice. The conductor pushes only onto the commit it last pushed (a rejected
//! push means another writer: it stops without publishing), so the branch has exactly one
//! writer at a time; its runs sit in the branch's concurrency group, task runs each in a
//! group of their own. When everything completed, the plan is archived on the branch before
//! the pull request is marked ready: a conductor killed between the two is finished by the
//! next run's plan job and finalize, which read the archive, or by its job's re-run, which
//! commits nothing then.
//!
//! GitHub's limits: a poll is one request, the listing of the branch's dispatched runs
//! (newest first; a run in flight older than its newest 100 is read on its own), so its cost
//! does not grow with the runs in flight, and polls are spaced so that they stay under 600
//! requests an hour (`GITHUB_TOKEN` allows 1,000 per repository); every
//! call goes through the one retry policy ([`crate::edge::github::retry`]). An outage outlasting
//! the policy's tries costs time only: a run's state, artifact listing or download that
//! GitHub fails (5xx, network, rate limit) is asked again at the next poll, the polls backing
//! off as the policy does and the log saying so, however long ago the run ended (up to the
//! job's own limit, then by the successor): an outage never costs an attempt. A run that
//! left no result (cancelled, failed before its upload) still leaves its attempt's record
//! (spanning the run). Before the 6-hour job
//! limit (`handover-after`, 5h30m by default) the conductor commits its state, dispatches a
//! successor conductor run (which waits in the branch's concurrency group until this one
//! ends) and exits; the successor adopts the runs still in flight (after an `/execute abort`
//! it stops instead, those runs left recorded for a later conductor; a successor started
//! before an abort heeds it, integrating what it adopts and starting nothing).

mod executor;
mod fetch;
mod lifecycle;
mod merging;
mod remote;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::action::report::Links;
use crate::action::rounds::Round;
use crate::action::runtime::Runner;
use crate::action::writer::{self, Finalized};
use crate::action::{ActionError, Inputs};
use crate::edge::github::Client;
use crate::flow::exec::Eager;
use crate::flow::preflight::Overlaps;
use crate::pure::gateway::held::Holds;
pub use crate::pure::pace::{POLLS_PER_HOUR, Timing, poll_interval};
use remote::Remote;

use crate::action::save_plan as save;

pub use crate::pure::plan::fields::RUN as RUN_FIELD;

/// The largest artifact archive the conductor downloads (streamed into a temporary file).
pub const MAX_ARTIFACT_BYTES: u64 = 256 << 20;

/// How long a dispatch that GitHub keeps failing (or the listing of runs that decides
/// whether it started) is tried again before the conductor gives up (a later conductor then
/// finds the run by its run-name, or learns that the attempt never started).
pub const DISPATCH_PATIENCE: Duration = Duration::from_secs(30 * 60);

/// A started attempt: its workflow run, and the commit it started from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flight {
    pub run: u64,
    pub attempt: u32,
    pub base: String,
}

/// The run-name of a task run (the template's `run-name` expression gives the same).
pub fn run_name(branch: &str, task: usize, attempt: u32) -> String {
    format!("dagexec {branch}: task {task} attempt {attempt}")
}

/// The ref beside `branch` that records the attempts started since the branch's last commit
/// (pushed before their runs are dispatched; off the history the pull request shows).
pub fn starts_ref(branch: &str) -> String {
    format!("refs/dagexec/starts/{branch}")
}

/// Reads the three files of a work job's artifact from its zip archive (the temporary file
/// the download streamed it into): only regular entries with exactly the expected names are
/// read, each bounded in size (`changes.patch` into a temporary file of its own, the log's
/// tail); links, directories and every other entry are ignored (nothing else is extracted),
/// and an archive of more entries than an artifact has is refused
/// before its directory is parsed ([`crate::action::artifact_zip`]).
pub use crate::action::artifact_zip::read as read_zip;

/// Runs the conductor in the checkout at `root` (the plan job's `base` of `branch`),
/// reporting to the run's context `ctx` and through `client` (`None` without a repository or
/// token: then it cannot run).
pub async fn run(
    root: &Path,
    inputs: &Inputs,
    ctx: &Runner,
    client: Option<&Client>,
    round: &Round,
    timing: Timing,
) -> Result<Finalized, ActionError> {
    let Some(client) = client else {
        return Err(ActionError::Input(
            "conduct needs GitHub (GITHUB_REPOSITORY and a token): it starts every task as a workflow run; run the plan locally with `dagexec run --schedule eager` instead".into(),
        ));
    };
    let writer::WriterJob {
        mut checkout,
        ui,
        opts,
    } = writer::WriterJob::carry_on(root, inputs, ctx, round)?;
    let plan = &mut checkout.plan;
    // `overlap: merge`: tasks that share files may run side by side; each arrival is merged.
    let policy = crate::action::overlap_policy(root, &checkout.inputs)?;
    let merge = policy == crate::pure::overlap::Policy::Merge;
    let conflicts = policy.for_scheduling(
        Overlaps::of(plan, &checkout.dag).for_scheduling(),
        plan.tasks.len(),
    );
    let mut remote = Remote {
        client,
        ctx,
        repo: &checkout.repo,
        auth: &checkout.auth,
        inputs: &checkout.inputs,
        branch: &round.branch,
        plan_path: &checkout.plan_path,
        dag: &checkout.dag,
        opts: &opts,
        ui: &ui,
        timing,
        started: Instant::now(),
        flights: BTreeMap::new(),
        pushed: checkout.repo.head()?,
        links: Links {
            run: ctx.run_url(),
            logs: BTreeMap::new(),
        },
        stale: None,
        staged: Vec::new(),
        pr: None,
        aborted: false,
        polls: remote::Polls::default(),
        untold: None,
        merging: remote::MergeState {
            on: merge,
            ..Default::default()
        },
        starts: remote::Starts::default(),
        // A provider the records found rate-limited is still held (a successor, or a
        // conductor `/execute` started, learns it from them).
        rate: remote::RateHolds {
            holds: Holds::of_records(&crate::pure::usage::records(plan)),
            holding: None,
        },
    };
    if checkout.archived.is_some() {
        return remote.finished(plan).await;
    }
    let again = remote.adopt(plan).await;
    let round_no = crate::flow::round_counter(plan);
    if let Some(ended) = remote.take_over(plan, again, round_no).await? {
        return Ok(ended);
    }
    let adopted: Vec<usize> = remote.flights.keys().copied().collect();
    let engine = Eager {
        dag: &checkout.dag,
        conflicts: &conflicts,
        budget: checkout.inputs.max_cost,
    };
    let (ending, round_no) = engine.run(&mut remote, plan, round_no, adopted).await?;
    if let Some(published) = remote.stale.take() {
        return Ok(writer::stale(published));
    }
    remote.end(plan, ending, round_no).await
}
