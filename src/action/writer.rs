//! What a job that writes the execution branch starts from — the checkout, the plan there and
//! its DAG ([`Checkout`]: finalize, the conductor, steer), and for finalize and the conductor
//! the integration options ([`WriterJob`]) — and how it ends (its conclusion, the pull
//! request, whether the job fails); and how such a job knows its own push again when it is
//! re-run after it was killed past it ([`sign`], [`pushed_before`]).

use std::path::Path;

use crate::action::runtime::Runner;
use crate::action::{ActionError, Inputs};
use crate::edge::git::{RemoteAuth, Repo};
use crate::flow::{RunOptions, Settings, Ui};
use crate::pure::plan::fields::WRITER;
use crate::pure::{engine, plan};

/// How the round ended, for outputs and the exit code.
#[derive(Debug, Clone, PartialEq)]
pub struct Finalized {
    /// The job's `conclusion` output.
    pub conclusion: crate::action::protocol::Conclusion,
    pub pr: Option<u64>,
    /// The job fails (a stop the user must act on).
    pub failed: bool,
    /// What the plan's attempt records add up to (the `cost`, `input-tokens` and
    /// `output-tokens` outputs); `None` when the job read no plan it could report on.
    pub spent: Option<crate::pure::usage::Totals>,
}

impl Finalized {
    /// How a job ended that published pull request `pr` and stopped at `stop`, if it did:
    /// failed when the user must act on the stop; the plan's spend.
    pub(crate) fn ended(
        conclusion: crate::action::protocol::Conclusion,
        pr: Option<u64>,
        stop: Option<&crate::action::report::RunStop>,
        plan: &plan::model::Plan,
    ) -> Finalized {
        Finalized {
            conclusion,
            pr,
            failed: stop.is_some_and(crate::action::report::RunStop::fails),
            spent: Some(crate::pure::usage::total(plan)),
        }
    }

    /// The `cost` (USD, as recorded: `0.000615`; `0` when no attempt reported one),
    /// `input-tokens` and `output-tokens` outputs: what the plan's attempt records add up to,
    /// the model gateway's figures where it counted them. None when the job read no plan.
    pub fn spent_outputs(&self) -> Vec<(&'static str, String)> {
        let Some(t) = &self.spent else {
            return Vec::new();
        };
        let cost = t.cost_usd.unwrap_or(0.0);
        vec![
            ("cost", format!("{cost:.6}")),
            ("input-tokens", t.input_tokens.unwrap_or(0).to_string()),
            ("output-tokens", t.output_tokens.unwrap_or(0).to_string()),
        ]
    }
}

/// A checkout of the branch, and the plan there (resolved as every job resolves it) with its
/// DAG.
pub(crate) struct Checkout {
    pub repo: Repo,
    pub auth: RemoteAuth,
    /// The inputs with the plan resolved in the checkout ([`crate::action::with_plan`]).
    pub inputs: Inputs,
    pub plan_path: std::path::PathBuf,
    pub plan: plan::model::Plan,
    pub dag: crate::pure::graph::Dag,
    /// Where the plan was read when only its archive is left (see
    /// [`crate::action::load_plan`]): a completed run its last job did not publish.
    pub archived: Option<String>,
}

impl Checkout {
    /// Reads the plan in `repo`'s checkout, at `inputs`' resolved path or its archive.
    pub(crate) fn read(
        repo: Repo,
        auth: RemoteAuth,
        inputs: Inputs,
    ) -> Result<Checkout, ActionError> {
        let plan_path = repo.root().join(&inputs.plan_rel);
        let (plan, archived) = crate::action::load_plan(&repo, &inputs.plan_rel)?;
        let dag = crate::pure::validate::check(
            &plan,
            Some(archived.as_deref().unwrap_or(&inputs.plan_rel)),
        )?;
        Ok(Checkout {
            repo,
            auth,
            inputs,
            plan_path,
            plan,
            dag,
            archived,
        })
    }
}

/// What a job that integrates (finalize, the conductor) starts from: the checkout at the base
/// it was handed, and the options the local runner's integration takes.
pub(crate) struct WriterJob {
    pub checkout: Checkout,
    pub ui: Ui,
    pub opts: RunOptions,
}

impl WriterJob {
    /// Checks out `base` in the repository at `root` and reads the plan there (a completed
    /// plan may be archived already: then it is what the job publishes).
    pub(crate) fn open(
        root: &Path,
        inputs: &Inputs,
        base: &str,
        schedule: engine::Schedule,
    ) -> Result<WriterJob, ActionError> {
        let (repo, auth, inputs) = crate::action::check_out(root, inputs, base)?;
        let checkout = Checkout::read(repo, auth, inputs)?;
        let inputs = &checkout.inputs;
        let opts = RunOptions {
            plan: checkout.plan_path.clone(),
            plan_rel: inputs.plan_rel.clone(),
            root: checkout.repo.root().to_path_buf(),
            settings: Settings {
                worker: inputs.worker.clone(),
                jobs: inputs.max_parallel.max(1),
                timeout: inputs.timeout,
                schedule,
                overlap: crate::pure::overlap::Policy::Serial,
                // The reviewer ran in the work job; the verdict is concluded from its record.
                reviewer: None,
                max_cost: inputs.max_cost,
                worktrees: None,
            },
            yes: true,
            dry_run: false,
            check_timeout: inputs.timeout,
            branch: None,
        };
        let ui = Ui::plain(Box::new(std::io::stdout()));
        ui.name_tasks(&checkout.plan);
        Ok(WriterJob { checkout, ui, opts })
    }

    /// The conductor's [`WriterJob::open`] at `round`'s base, or at the branch's tip when an
    /// earlier attempt of this job's workflow run pushed it there ([`pushed_before`]): a
    /// re-run of a conductor killed after a push, given the plan job's base as it was, carries
    /// on from that push.
    pub(crate) fn carry_on(
        root: &Path,
        inputs: &Inputs,
        ctx: &Runner,
        round: &crate::action::rounds::Round,
    ) -> Result<WriterJob, ActionError> {
        let open = |base: &str| WriterJob::open(root, inputs, base, engine::Schedule::Eager);
        let job = open(&round.base)?;
        let at = &job.checkout;
        let (plan_rel, branch) = (&at.inputs.plan_rel, &round.branch);
        let Some((tip, _)) = pushed_before(&at.repo, &at.auth, plan_rel, ctx, branch)? else {
            return Ok(job);
        };
        job.ui.say(format!(
            "{branch} moved since {} was planned on: an earlier attempt of this conductor pushed {} before it stopped; this attempt carries on from there.",
            &round.base[..round.base.len().min(12)],
            &tip[..tip.len().min(12)]
        ));
        open(&tip)
    }
}

/// This job's attempt of its workflow run (`GITHUB_RUN_ATTEMPT`, 1 when unknown).
pub(crate) fn run_attempt(ctx: &Runner) -> u32 {
    ctx.run_attempt.parse::<u32>().unwrap_or(1).max(1)
}

/// Signs `plan` as written by this job's workflow run and attempt (`progress.dagexecWriter`),
/// which its next commit carries to the branch. Task code cannot forge it: a worker's patch
/// that touches the plan is refused. A plan an earlier attempt of this run signed keeps that
/// signature (a re-run carrying on from its push): a plan the re-run does not change is the
/// same file, and no commit.
pub(crate) fn sign(plan: &mut plan::model::Plan, ctx: &Runner) {
    if !signed_earlier(plan, ctx) {
        let by = serde_json::json!({"run": ctx.run_id, "attempt": run_attempt(ctx)});
        plan.progress.extra.insert(WRITER.into(), by);
    }
}

/// Whether an earlier attempt of this job's workflow run signed `plan` ([`sign`]).
fn signed_earlier(plan: &plan::model::Plan, ctx: &Runner) -> bool {
    let by = plan.progress.extra.get(WRITER);
    let run = by.and_then(|b| b["run"].as_str());
    let attempt = by.and_then(|b| b["attempt"].as_u64());
    run == Some(ctx.run_id.as_str()) && attempt.is_some_and(|a| a < run_attempt(ctx).into())
}

/// The tip of `branch` and the plan there, when an earlier attempt of this job's workflow run
/// committed it ([`sign`]): the job was killed after it pushed, and this re-run carries on
/// from its push instead of taking it for another writer's. The checkout is then at that
/// tip; otherwise it is left where it was.
pub(crate) fn pushed_before(
    repo: &Repo,
    auth: &RemoteAuth,
    plan_rel: &str,
    ctx: &Runner,
    branch: &str,
) -> Result<Option<(String, plan::model::Plan)>, ActionError> {
    let here = repo.head()?;
    let Some(tip) = repo.fetch_branch(branch, auth)?.filter(|t| *t != here) else {
        return Ok(None);
    };
    repo.checkout_detached(&tip)?;
    if let Ok((plan, _)) = crate::action::load_plan(repo, plan_rel)
        && signed_earlier(&plan, ctx)
    {
        return Ok(Some((tip, plan)));
    }
    repo.checkout_detached(&here)?;
    Ok(None)
}

/// A stale round's end: not a failure (the fresh round carries on), nothing to report.
pub(crate) fn stale(published: crate::action::publish::Published) -> Finalized {
    Finalized {
        conclusion: crate::action::protocol::Conclusion::Stale,
        pr: published.pr,
        failed: false,
        spent: None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_spend_outputs_are_the_records_totals_and_absent_without_a_plan() {
        let mut done = super::Finalized {
            conclusion: crate::action::protocol::Conclusion::Completed,
            pr: None,
            failed: false,
            spent: None,
        };
        assert!(done.spent_outputs().is_empty());
        done.spent = Some(crate::pure::usage::Totals {
            attempts: 2,
            seconds: 3.0,
            cost_usd: Some(0.000_615),
            input_tokens: Some(115),
            output_tokens: None,
            ..Default::default()
        });
        assert_eq!(
            done.spent_outputs(),
            vec![
                ("cost", "0.000615".to_string()),
                ("input-tokens", "115".to_string()),
                ("output-tokens", "0".to_string()),
            ]
        );
    }
}
