//! The end of finalize on GitHub: the round pushed, the pull request opened or updated, the
//! questions and the status comment written (each found again by its marker, so a re-run
//! finalize duplicates nothing), the next round dispatched unless `/execute abort` asked to
//! stop, and the `dagexec` check run when the run stops or completes (unless this workflow
//! run wrote the same one on that commit already).
//!
//! A round (or a part of one, see `rounds`) is pushed only onto the commit it was planned on. If the execution branch moved
//! since the plan job read it (a round started twice, a re-run of an old run's finalize, a
//! push by hand), the round is stale: nothing is pushed or published, and a fresh round is
//! dispatched to plan from where the branch now stands (GitHub keeps at most one pending run
//! per concurrency group, so duplicates collapse), unless `/execute abort` asked to stop. A
//! re-run of a finalize killed after its push (the same workflow run, a later attempt) finds
//! its own push by the plan's signature ([`super::writer::sign`]) and finishes what the killed
//! attempt left: the pull request, its comments, the check run and the dispatch (unless GitHub
//! has a run dispatched from that push already).

use super::report::{self, Links, RunStop};
use super::rounds::Round;
use super::runtime::{self, Runner};
use super::steering::{self, comment};
use super::{ActionError, Inputs};
use crate::edge::git::{RemoteAuth, Repo};
use crate::edge::github::{
    Client,
    ops::{CompletedCheckRun, Conclusion},
};
use crate::flow::Ui;
use crate::pure::plan;

/// What [`Publisher::finish`] did on GitHub.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Published {
    pub pr: Option<u64>,
    pub dispatched: bool,
    /// `/execute abort` asked to stop after this round.
    pub aborted: bool,
    /// The branch moved since the round was planned: nothing was pushed or published.
    pub stale: bool,
}

/// What finalize ends a round with: where it pushes and whom it tells.
#[derive(Clone, Copy)]
pub(crate) struct Publisher<'a> {
    /// `None` without a GitHub repository (a local try-out).
    pub client: Option<&'a Client>,
    pub ctx: &'a Runner,
    pub repo: &'a Repo,
    pub auth: &'a RemoteAuth,
    pub round: &'a Round,
    pub inputs: &'a Inputs,
    pub ui: &'a Ui,
    /// The schedule the run keeps (`rounds`: finalize; `eager`: the conductor), for the
    /// timeline's prediction in the pull request body.
    pub schedule: crate::pure::engine::Schedule,
    /// What the conductor holds for a provider's rate limit (`holding 2 tasks: anthropic
    /// rate-limited until 04:12:30Z`), said in the status comment's "Waiting on".
    pub holding: Option<&'a str>,
}

/// The run's pull request as finalize writes on it: the client, the pull request's number,
/// and the comments on it that carry a dagexec marker ([`Publisher::marked`]).
struct Pr<'a> {
    client: &'a Client,
    number: u64,
    marked: comment::Trusted,
}

impl Publisher<'_> {
    /// Pushes the round onto the commit it was planned on, with the record of the commands
    /// it settles beside it ([`steering::beside_push`]); `Some(why)` when the branch moved
    /// since (the push is not a fast-forward). Without a GitHub repository the round stays a
    /// local commit.
    fn push(&self) -> Result<Option<String>, ActionError> {
        let (ui, branch) = (self.ui, &self.round.branch);
        if self.client.is_none() {
            ui.say("No GitHub repository (GITHUB_REPOSITORY unset): the round is committed here, not pushed.");
            return Ok(None);
        }
        let with = steering::beside_push(self.repo, branch, self.auth, &self.round.base)?;
        match self.repo.push_head(branch, with.as_ref(), self.auth)? {
            crate::edge::git::Pushed::Done => {
                ui.say(format!("Pushed to {branch}."));
                Ok(None)
            }
            crate::edge::git::Pushed::Rejected(why) => Ok(Some(why)),
        }
    }

    /// After a rejected push of finalize: the plan on the branch when an earlier attempt of
    /// this job pushed this round there and was killed before it finished (this re-run then
    /// finishes it from that push: [`super::writer::pushed_before`]), said.
    fn pushed_before(&self) -> Result<Option<plan::model::Plan>, ActionError> {
        let Publisher { repo, round, .. } = *self;
        if self.schedule != crate::pure::engine::Schedule::Rounds {
            return Ok(None);
        }
        let (plan_rel, branch) = (&self.inputs.plan_rel, &round.branch);
        let pushed = super::writer::pushed_before(repo, self.auth, plan_rel, self.ctx, branch)?;
        let Some((tip, plan)) = pushed else {
            return Ok(None);
        };
        self.ui.say(format!(
            "{branch} already holds this round ({}), pushed by an earlier attempt of this job that stopped before it finished; this attempt finishes it.",
            &tip[..tip.len().min(12)]
        ));
        Ok(Some(plan))
    }

    /// Whether GitHub has a run of the workflow dispatched on the branch from the commit
    /// checked out, other than this one, that carries the branch on — not yet completed
    /// (`requested`, `waiting`, `pending`, `queued`, `in_progress`) or completed with
    /// `success`: a re-run's earlier attempt (carrying on from its push, or stale as it is)
    /// dispatched the next run already. A dispatch is sent at most once, since GitHub keeps
    /// one pending run per concurrency group and a newer one cancels it; one that failed or
    /// was cancelled carries nothing on, so another is sent. When GitHub cannot list the runs,
    /// it is said, and the run is dispatched.
    async fn dispatched_already(&self, c: &Client) -> Result<bool, ActionError> {
        let (ui, tip) = (self.ui, self.repo.head()?);
        let runs = match c
            .dispatched_runs(&self.inputs.workflow, &self.round.branch, 1)
            .await
        {
            Ok(runs) => runs,
            Err(e) => {
                ui.say(format!(
                    "Cannot tell whether a run was dispatched from {tip} already ({e}); dispatching one."
                ));
                return Ok(false);
            }
        };
        let mine =
            |r: &&crate::edge::github::runs::WorkflowRun| r.id.to_string() == self.ctx.run_id;
        let carries_on = |r: &&crate::edge::github::runs::WorkflowRun| {
            !r.completed() || r.conclusion.as_deref() == Some("success")
        };
        let found = runs
            .iter()
            .find(|r| r.head_sha == tip && !mine(r) && carries_on(r));
        let Some(run) = found else {
            return Ok(false);
        };
        ui.say(format!(
            "GitHub has run {} dispatched from {} already: no other is dispatched.",
            run.id,
            &tip[..tip.len().min(12)]
        ));
        Ok(true)
    }

    /// The end of a stale round, its push rejected for `why`. When the branch already holds
    /// this round or a later one (the same round started twice, or a re-run of an old run's
    /// finalize), whoever committed that carries on, so nothing more is done. Otherwise (the
    /// branch moved by hand) a fresh round plans from where it stands now, unless `/execute
    /// abort` asked to stop.
    async fn stale(
        &self,
        c: &Client,
        ours: &plan::model::Plan,
        why: &str,
    ) -> Result<Published, ActionError> {
        let Publisher { round, inputs, .. } = *self;
        self.ui.say(format!(
            "{} moved since this round was planned on {} ({}): this round is stale, so nothing of it is pushed or published.",
            round.branch,
            &round.base[..round.base.len().min(12)],
            why.lines().last().unwrap_or("").trim()
        ));
        let plan_path = self.repo.root().join(&inputs.plan_rel);
        // With a round open (one that takes several runs, see `rounds`), the branch is
        // further when it holds a later part of the round or its end than the base this run
        // was planned on.
        self.repo.checkout_detached(&round.base)?;
        let base = crate::edge::plan_file::load(&plan_path)
            .ok()
            .map(|p| super::rounds::position(&p))
            .filter(|b| b.1 > 0 || super::rounds::position(ours).1 > 0);
        let done_there = match self.repo.fetch_branch(&round.branch, self.auth)? {
            Some(tip) => {
                self.repo.checkout_detached(&tip)?;
                crate::edge::plan_file::load(&plan_path).map_or(true, |p| match base {
                    Some(base) => super::rounds::position(&p) > base,
                    None => crate::flow::round_counter(&p) >= round.round,
                })
            }
            None => false,
        };
        if done_there {
            self.ui.say(format!(
                "{} already holds round {} or a later one; that run carries on.",
                round.branch, round.round
            ));
            return Ok(Published {
                stale: true,
                ..Published::default()
            });
        }
        let pr = c.find_pull(&round.branch).await?.map(|p| p.number);
        let aborted = match pr {
            Some(n) => {
                let marked = comment::trusted_marked(c, n, inputs.me()).await?;
                steering::abort_confirmed(self.queue(c, n), &marked, self.ctx).await?
            }
            None => false,
        };
        let dispatched = !aborted && !self.dispatched_already(c).await?;
        if dispatched {
            super::dispatch_round(c, self.inputs, &self.round.branch, &self.round.branch).await?;
            self.ui.say(format!(
                "Dispatched a fresh round on {} to plan from where it stands.",
                round.branch
            ));
        }
        Ok(Published {
            pr,
            dispatched,
            aborted,
            stale: true,
        })
    }

    /// Pushes the round, then, on GitHub: the pull request (opened as a draft on the first
    /// round, its body kept current), one comment per open question (and the pre-flight
    /// question), the next round dispatched when `more` work waits unless `/execute abort`
    /// asked to stop, the one status comment, and the `dagexec` check run on a stop or
    /// completion (ready for review on completion). Every comment is found again by its
    /// marker, so a re-run finalize creates nothing twice.
    pub(super) async fn finish(
        &self,
        plan: &plan::model::Plan,
        links: &Links,
        stop: Option<&RunStop>,
        more: bool,
        preflight: Option<&str>,
    ) -> Result<Published, ActionError> {
        // A re-run of a finalize killed after its push publishes the plan that push holds.
        let on_branch = match (self.push()?, self.client) {
            (Some(why), Some(c)) => match self.pushed_before()? {
                Some(pushed) => Some(pushed),
                None => return self.stale(c, plan, &why).await,
            },
            _ => None,
        };
        let plan = on_branch.as_ref().unwrap_or(plan);
        // The crash tests' kill -9 between a push and its publication (`final-push` when the
        // run stops or completes).
        let step = if stop.is_some() { "final-push" } else { "push" };
        crate::flow::failpoint(step, self.round.round);
        let Some(c) = self.client else {
            if let Some(s) = stop {
                let (title, summary) = report::check_run_text(plan, s, &self.round.branch);
                println!("{title}\n\n{summary}");
            }
            return Ok(Published::default());
        };
        let published: Result<Published, ActionError> = async {
            let pr = self.pull_request(c, plan, links, stop).await?;
            println!("Pull request #{}: {}", pr.number, pr.html_url);
            let at = self.marked(c, pr.number).await?;
            self.ask(&at, plan, preflight).await?;
            // A re-run whose killed attempt heeded `/execute abort` finds the abort's record saying so.
            let aborted =
                steering::abort_confirmed(self.queue(c, pr.number), &at.marked, self.ctx).await?;
            let dispatched =
                more && !aborted && !(on_branch.is_some() && self.dispatched_already(c).await?);
            if dispatched {
                let branch = &self.round.branch;
                super::dispatch_round(c, self.inputs, branch, branch).await?;
            }
            self.write_status(&at, plan, links, more && aborted).await?;
            // The crash tests' kill -9 once the status comment consumed an abort.
            crate::flow::failpoint("status", self.round.round);
            if let Some(s) = stop {
                self.check_run(c, plan, s, &pr).await?;
            }
            Ok(Published {
                pr: Some(pr.number),
                dispatched,
                aborted,
                ..Published::default()
            })
        }
        .await;
        if published.is_err() && self.schedule == crate::pure::engine::Schedule::Rounds {
            self.ui.say(format!(
                "The round is pushed to {}: re-running this job is safe — it finds that push, finishes the pull request, its comments and the check run without writing any twice, and dispatches the next run only if none was dispatched from it.",
                self.round.branch
            ));
        }
        published
    }

    /// The conductor's commit of a batch of arrivals, while runs may wait for it: pushed
    /// onto the commit it was made on, and `/execute abort` looked for on pull request `pr`
    /// — all the next dispatch needs. What the pull request and its comments say of it is
    /// told after that dispatch ([`Publisher::tell`]), so a task that the batch unblocked
    /// does not wait for those calls.
    pub(super) async fn push_for_dispatch(
        &self,
        plan: &plan::model::Plan,
        pr: u64,
    ) -> Result<Published, ActionError> {
        let rejected = self.push()?;
        let Some(c) = self.client else {
            return Ok(Published::default());
        };
        if let Some(why) = rejected {
            return self.stale(c, plan, &why).await;
        }
        crate::flow::failpoint("push", self.round.round);
        let at = self.marked(c, pr).await?;
        let aborted = steering::abort_confirmed(self.queue(c, pr), &at.marked, self.ctx).await?;
        Ok(Published {
            pr: Some(pr),
            aborted,
            ..Published::default()
        })
    }

    /// What [`Publisher::push_for_dispatch`] left to tell: the pull request's body, the
    /// questions, the status comment and the issues, as `plan` stands.
    pub(super) async fn tell(
        &self,
        plan: &plan::model::Plan,
        links: &Links,
    ) -> Result<(), ActionError> {
        let Some(c) = self.client else {
            return Ok(());
        };
        let pr = self.pull_request(c, plan, links, None).await?;
        let at = self.marked(c, pr.number).await?;
        self.ask(&at, plan, None).await?;
        self.write_status(&at, plan, links, false).await
    }

    /// Pull request `number` as a writer of the branch steers it (its queue, its aborts).
    fn queue<'b>(&'b self, client: &'b Client, number: u64) -> steering::Queue<'b> {
        let (repo, auth, inputs) = (self.repo, self.auth, self.inputs);
        steering::Queue::new(client, number, repo, auth, &self.round.branch, inputs)
    }

    /// Pull request `number` with the comments on it that carry a dagexec marker: only those
    /// dagexec wrote itself are its state; one by anyone else is reported and ignored.
    async fn marked<'a>(&self, client: &'a Client, number: u64) -> Result<Pr<'a>, ActionError> {
        let marked = comment::trusted_marked(client, number, self.inputs.me()).await?;
        for other in &marked.ignored {
            println!(
                "Ignoring comment {} by @{}: it carries a dagexec marker, but dagexec did not write it.",
                other.id, other.author.login
            );
        }
        Ok(Pr {
            client,
            number,
            marked,
        })
    }

    /// The pull request of the branch, its body brought up to date; opened as a draft on the
    /// first round.
    async fn pull_request(
        &self,
        c: &Client,
        plan: &plan::model::Plan,
        links: &Links,
        stop: Option<&RunStop>,
    ) -> Result<crate::edge::github::ops::PullRequest, ActionError> {
        let (ctx, round) = (self.ctx, self.round);
        let merge = crate::action::overlap_policy(self.repo.root(), self.inputs)
            .is_ok_and(|p| p == crate::pure::overlap::Policy::Merge);
        let ran = self.inputs.ran(self.schedule, merge);
        let body = report::pr_body(plan, round.round, links, stop, ran);
        if let Some(pr) = c.find_pull(&round.branch).await? {
            c.update_pull_body(pr.number, &body).await?;
            return Ok(pr);
        }
        // The ref the run was started on; a round runs on its own branch once the run that
        // started it was on the default branch (see `plan`): that one.
        let base = if !ctx.ref_name.is_empty() && ctx.ref_name != round.branch {
            ctx.ref_name.clone()
        } else if !ctx.default_branch.is_empty() {
            ctx.default_branch.clone()
        } else {
            c.default_branch().await?
        };
        let title = format!("dagexec: {}", plan.goal.lines().next().unwrap_or("plan"));
        match c
            .create_pull(&round.branch, &base, &title, &body, true)
            .await
        {
            // A retried create whose first try landed after all: adopt that PR.
            Err(e) if e.status() == Some(422) => match c.find_pull(&round.branch).await? {
                Some(pr) => Ok(pr),
                None => Err(e.into()),
            },
            other => Ok(other?),
        }
    }

    /// One comment per open question on the pull request, and the pre-flight question.
    async fn ask(
        &self,
        at: &Pr<'_>,
        plan: &plan::model::Plan,
        preflight: Option<&str>,
    ) -> Result<(), ActionError> {
        let (c, n, own) = (at.client, at.number, &at.marked.own);
        for (i, q) in crate::pure::question::open(plan) {
            let text = steering::question_comment(plan, i, &q);
            let marker = steering::question_marker(&i.to_string());
            c.upsert_marked_comment(n, &marker, &text, own).await?;
        }
        if let Some(message) = preflight {
            let marker = steering::question_marker("preflight");
            let text = steering::preflight_comment(message);
            c.upsert_marked_comment(n, &marker, &text, own).await?;
        }
        Ok(())
    }

    /// The one status comment on the pull request (`stopped`: work waits, but `/execute abort`
    /// stopped it), then, for a plan made of issues, what its issues are told
    /// ([`Publisher::write_back_issues`]).
    async fn write_status(
        &self,
        at: &Pr<'_>,
        plan: &plan::model::Plan,
        links: &Links,
        stopped: bool,
    ) -> Result<(), ActionError> {
        let (c, marked) = (at.client, &at.marked);
        let round = self.round;
        let (_, part) = super::rounds::position(plan);
        let waiting = if stopped {
            let (after, what) = match part {
                0 => (String::new(), ""),
                _ => (format!("part {part} of "), " the round"),
            };
            format!(
                "you: stopped after {after}round {} as `/execute abort` asked; comment `/execute` to resume{what}",
                round.round
            )
        } else {
            steering::waiting_on(plan)
        };
        // The conductor's rate-limit holds (`holding 2 tasks: anthropic rate-limited until …`).
        let waiting = match self.holding {
            Some(h) if !stopped => format!("{waiting}; {h}"),
            _ => waiting,
        };
        let status = comment::status_body(plan, round.round, links, &waiting);
        let status_id = c
            .upsert_marked_comment(at.number, comment::STATUS_MARKER, &status, &marked.own)
            .await?;
        // The abort is consumed: any other status comment of dagexec's that asked for it (the
        // comment job writes as GitHub Actions, a finalize with an App as the App) says so.
        for other in marked.own.iter().filter(|o| {
            o.id != status_id
                && o.starts_with(comment::STATUS_MARKER)
                && o.body.contains(steering::ABORT_MARKER)
        }) {
            c.update_comment(other.id, &status).await?;
        }
        self.write_back_issues(at, plan, links).await
    }

    /// A plan made of issues: the status on the parent issue too, and a note on the sub-issue
    /// of each task with an open question (asked on the pull request). Nothing else is
    /// written to the issues: they close when the pull request merges.
    async fn write_back_issues(
        &self,
        at: &Pr<'_>,
        plan: &plan::model::Plan,
        links: &Links,
    ) -> Result<(), ActionError> {
        let (c, n) = (at.client, at.number);
        use crate::sources::issues::write_back;
        let repo = c.repo.to_string();
        let Some(parent) = write_back::parent_in(plan, &repo) else {
            return Ok(());
        };
        let me = self.inputs.me();
        let left_out = write_back::left_out_lines(plan, crate::action::report::inert);
        let status = format!(
            "{}\nThe sub-issues run in pull request #{n}; merging it closes each completed one.\n{}",
            comment::status_body(plan, self.round.round, links, &steering::waiting_on(plan)),
            if left_out.is_empty() {
                String::new()
            } else {
                format!("{left_out}\n")
            }
        );
        comment::upsert_status(c, parent, me, &status).await?;
        for (task, issue, note) in write_back::question_notes(plan, &repo, n) {
            let marker = steering::question_marker(&task.to_string());
            let marked = comment::trusted_marked(c, issue, me).await?;
            let text = format!("{marker}\n{note}");
            c.upsert_marked_comment(issue, &marker, &text, &marked.own)
                .await?;
        }
        Ok(())
    }

    /// The `dagexec` check run for stop `s` (and the pull request ready for review on
    /// completion).
    async fn check_run(
        &self,
        c: &Client,
        plan: &plan::model::Plan,
        s: &RunStop,
        pr: &crate::edge::github::ops::PullRequest,
    ) -> Result<(), ActionError> {
        let ctx = self.ctx;
        let (title, summary) = report::check_run_text(plan, s, &self.round.branch);
        let conclusion = match s {
            RunStop::Completed => Conclusion::Success,
            RunStop::NeedsInput(_) => Conclusion::ActionRequired,
            _ => Conclusion::Failure,
        };
        let head = self.repo.head()?;
        let run_url = ctx.run_url();
        let run = CompletedCheckRun {
            name: "dagexec",
            head_sha: &head,
            conclusion,
            title: &title,
            summary: &summary,
            details_url: run_url.as_deref(),
        };
        // A re-run of this job writes it once (the same run's check run on this commit names
        // this run in its details URL; a later run reports the stop again); when GitHub
        // cannot list the commit's check runs, it is written.
        if c.has_check_run(&run).await.unwrap_or(false) {
            println!("The dagexec check run on {head} says this already; it is not written again.");
        } else {
            c.complete_check_run(&run).await?;
        }
        if conclusion != Conclusion::Success {
            if conclusion == Conclusion::Failure {
                runtime::annotation("error", &title, summary.lines().next().unwrap_or(""));
            }
            let _ = ctx.summary(&format!("## {title}\n\n{summary}"));
        }
        if *s == RunStop::Completed && pr.draft {
            c.mark_ready(pr).await?;
            println!("Marked #{} ready for review.", pr.number);
        }
        Ok(())
    }
}
