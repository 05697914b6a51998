//! `dagexec action comment`: an `/execute` comment on a pull request, acted on (on a parent
//! issue: [`crate::action::steering::issue`] starts its sub-issues' plan). The comment
//! is classified and its author's permission checked ([`crate::action::steering::comment`]);
//! then the command changes the plan on the pull request's head branch (committed and
//! pushed), and usually starts a round there with `workflow_dispatch`. The comment's text is
//! data throughout: it goes into the plan as an answer, never into a shell.
//!
//! Two jobs, because a command that commits to the execution branch must wait for a running
//! round of that branch (one concurrency group per branch, `dagexec-<branch>`), and the
//! branch is known only after asking the API for the pull request's head:
//! - [`SteerPhase::Route`] (job `comment`, no group): permission, 👀, replies; `/execute`,
//!   `status` and `abort` are done here (they push nothing; an abort must reach the running
//!   round, not wait for it); `proceed`, `answer` and `retry` are handed on with the branch.
//! - [`SteerPhase::Apply`] (job `steer`, in the branch's group): checks the permission again,
//!   commits the change to the plan, pushes and starts a round.
//!
//! What every writer of the branch shares with these jobs — the queue of plan changes, its
//! record in the branch's history, questions and the abort marker — is
//! [`crate::action::steering`].

use std::path::Path;

use crate::action::report::Links;
use crate::action::runtime::Runner;
use crate::action::steering::comment::{self, Handled, SlashCommand, Trigger};
use crate::action::steering::{
    ABORT_MARKER, Queue, abort_after, abort_by_marker, abort_pending, abort_record, aborts_taken,
    apply, authorised, catch_up, changes_plan, command_text, confirm, record, said, steer_marker,
    take_aborts, waiting_on, with_trailer,
};
use crate::action::writer::Checkout;
use crate::action::{ActionError, Inputs};
use crate::edge::git::{RemoteAuth, Repo};
use crate::edge::github::Client;
use crate::edge::github::comments::IssueComment;
use crate::pure::plan;

pub use crate::action::steering::Steered;

/// Which half of a command this job does (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SteerPhase {
    Route,
    Apply,
}

/// Handles the event at `ctx.event_path` in the checkout at `root`.
pub async fn run(
    root: &Path,
    inputs: &Inputs,
    ctx: &Runner,
    client_for: impl FnOnce(&Trigger) -> Result<Client, ActionError>,
    phase: SteerPhase,
) -> Result<Steered, ActionError> {
    let payload = read_event(ctx)?;
    let replier = comment::Replier {
        me: inputs.me(),
        rerun: crate::action::writer::run_attempt(ctx) > 1,
    };
    let trigger = match comment::classify(&ctx.event_name, &payload) {
        Ok(t) => t,
        // `/execute` on a parent issue: its sub-issues are the plan.
        Err(comment::Ignored::NotAPullRequest(_))
            if let Some(t) =
                crate::action::steering::issue::classify(&ctx.event_name, &payload) =>
        {
            let client = client_for(&t.trigger)?;
            let apply = phase == SteerPhase::Apply;
            let issue = crate::action::steering::issue::run;
            return issue(root, inputs, &t, &client, replier, apply).await;
        }
        Err(why) => return Ok(said(format!("Ignoring this event: {why}."))),
    };
    if phase == SteerPhase::Apply && !changes_plan(&trigger.command) {
        return Ok(said("The comment job handled this command."));
    }
    let client = client_for(&trigger)?;
    let route = phase == SteerPhase::Route;
    let branch = match comment::handle_as(&client, &trigger, route, replier).await? {
        Handled::Denied => {
            return Ok(said(format!(
                "@{} may not run dagexec here; replied.",
                trigger.user
            )));
        }
        Handled::Replied => return Ok(said("Replied to the comment.")),
        Handled::Run { head_branch, .. } => head_branch,
    };
    let job = Steer {
        inputs,
        ctx,
        client: &client,
        trigger: &trigger,
        branch,
        replier,
    };
    if phase == SteerPhase::Route && changes_plan(&trigger.command) {
        return job.queue().await;
    }
    job.act(root).await
}

/// The event this job was started for (an `/execute` comment, or why it is none, is read
/// from it).
fn read_event(ctx: &Runner) -> Result<serde_json::Value, ActionError> {
    match &ctx.event_path {
        Some(p) => std::fs::read_to_string(p)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .ok_or_else(|| ActionError::Input(format!("cannot read the event at {}", p.display()))),
        None => Err(ActionError::Input(
            "no GITHUB_EVENT_PATH: `comment` handles an issue_comment event".into(),
        )),
    }
}

/// One command, checked: who asked, on which pull request and branch.
struct Steer<'a> {
    inputs: &'a Inputs,
    ctx: &'a Runner,
    client: &'a Client,
    trigger: &'a Trigger,
    /// The pull request's head branch.
    branch: String,
    /// How this job replies to the comment (once, also when run again).
    replier: comment::Replier,
}

impl Steer<'_> {
    /// The command is kept on the pull request as dagexec's own comment: whichever job
    /// writes the branch next applies it (the steer job, or — when GitHub cancels that
    /// pending job because a round got there first — the running round's writer). Found
    /// again by its marker with the command it authorised, so a re-run of this job queues
    /// nothing twice, and another workflow's comment that starts with the marker keeps
    /// nothing from being queued.
    async fn queue(&self) -> Result<Steered, ActionError> {
        let (client, trigger, branch) = (self.client, self.trigger, &self.branch);
        let (marker, authorised) = (
            steer_marker(trigger.comment_id),
            authorised(&trigger.command),
        );
        let own = comment::trusted_marked(client, trigger.pr_number, self.inputs.me())
            .await?
            .own;
        let queued = |c: &IssueComment| c.starts_with(&marker) && c.body.contains(&authorised);
        if !own.iter().any(queued) {
            client.comment(
                trigger.pr_number,
                &format!(
                    "{marker}\n⏳ Queued: {} — applied by the next job that writes `{branch}` (at once when no round of it runs, else when the running round ends).\n{authorised}\n",
                    command_text(&self.trigger.command)
                ),
            ).await?;
        }
        Ok(Steered {
            message: format!(
                "The change to the plan is made by the steer job, once no round of {branch} runs."
            ),
            to_apply: Some(branch.clone()),
            ..Default::default()
        })
    }

    /// Checks out the branch and does the command there.
    async fn act(&self, root: &Path) -> Result<Steered, ActionError> {
        let checkout = match self.checkout(root).await? {
            Ok(c) => c,
            Err(done) => return Ok(done),
        };
        match &self.trigger.command {
            SlashCommand::Start => self.start(&checkout).await,
            SlashCommand::Status => self.status(&checkout).await,
            SlashCommand::Abort => self.abort(&checkout).await,
            SlashCommand::Proceed | SlashCommand::Answer { .. } | SlashCommand::Retry { .. } => {
                self.change(checkout).await
            }
            SlashCommand::Unknown(_) => unreachable!("handle replies to unknown commands"),
        }
    }

    /// The branch checked out at its tip and its plan read; `Err` with the reply when only
    /// the archive of a completed plan is left and the command would change it.
    async fn checkout(&self, root: &Path) -> Result<Result<Checkout, Steered>, ActionError> {
        let repo = Repo::discover(root)?;
        let auth = RemoteAuth::token(self.inputs.token.expose());
        let branch = &self.branch;
        let Some(tip) = repo.fetch_branch(branch, &auth)? else {
            return Err(ActionError::Input(format!(
                "the pull request's branch {branch} is not on the remote"
            )));
        };
        repo.checkout_detached(&tip)?;
        let inputs = crate::action::with_plan(repo.root(), self.inputs)?;
        let checkout = Checkout::read(repo, auth, inputs)?;
        // Only the archive is left when the job that completed the plan died before
        // publishing: `/execute` (a round there finishes the run), `status` and `abort` read
        // it; nothing changes it.
        if let (Some(rel), true) = (&checkout.archived, changes_plan(&self.trigger.command)) {
            let text = format!(
                "Every task is completed and the plan is archived as `{rel}`: there is nothing left to change. Comment `/execute` to finish the run on the pull request."
            );
            self.reply(&text).await?;
            return Ok(Err(said(text)));
        }
        Ok(Ok(checkout))
    }

    /// The status comment, with `extra` after it (`waiting` says what the run waits on).
    async fn write_status(
        &self,
        plan: &plan::model::Plan,
        waiting: &str,
        extra: Option<String>,
    ) -> Result<(), ActionError> {
        let (client, pr) = (self.client, self.trigger.pr_number);
        let links = Links {
            run: self.ctx.run_url(),
            logs: Default::default(),
        };
        let status = comment::status_body(plan, crate::flow::round_counter(plan), &links, waiting);
        let body = match extra {
            Some(extra) => format!("{status}\n{extra}"),
            None => status,
        };
        let me = self.inputs.me();
        Ok(comment::upsert_status(client, pr, me, &body).await?)
    }

    /// `/execute status`: the status comment refreshed, saying so while an `/execute abort`
    /// waits for the current round to end.
    async fn status(&self, c: &Checkout) -> Result<Steered, ActionError> {
        let (client, pr, plan) = (self.client, self.trigger.pr_number, &c.plan);
        let marked = comment::trusted_marked(client, pr, self.inputs.me()).await?;
        match abort_pending(self.queue_of(c), &marked).await? {
            Some((id, user)) => self.write_stopping(plan, id, &user).await?,
            None => self.write_status(plan, &waiting_on(plan), None).await?,
        }
        Ok(said("Refreshed the status comment."))
    }

    /// The status comment saying that the run stops after the current round, as `/execute
    /// abort` comment `id` by `user` asked.
    async fn write_stopping(
        &self,
        plan: &plan::model::Plan,
        id: u64,
        user: &str,
    ) -> Result<(), ActionError> {
        let extra = format!(
            "{ABORT_MARKER}\n{}\n**Stopping after the current round** (`/execute` by @{user}; a round that takes several workflow runs stops after the current one). Comment `/execute` to resume.\n",
            abort_by_marker(id)
        );
        self.write_status(plan, "the current round to end", Some(extra))
            .await
    }

    /// `/execute abort`: its own record, which the running round's writer reads (found again
    /// by its marker, so a re-run of this job writes it once), then the marker in the status
    /// comment that says so.
    async fn abort(&self, c: &Checkout) -> Result<Steered, ActionError> {
        let (client, pr, plan) = (self.client, self.trigger.pr_number, &c.plan);
        let by = format!("`/execute` by @{}", self.trigger.user);
        let record = abort_record(self.trigger.comment_id);
        let marked = comment::trusted_marked(client, pr, self.inputs.me()).await?;
        // This job run again after the stop was taken: it stops nothing more, so the status
        // comment must not say it will.
        if aborts_taken(self.queue_of(c))?.contains(&self.trigger.comment_id) {
            return Ok(said(
                "This `/execute abort` was taken already (the run stopped for it, or a later command started it again); it stops nothing more.",
            ));
        }
        if !marked.own.iter().any(|c| c.starts_with(&record)) {
            let text = format!(
                "{record}\n`/execute abort` ({by}): no round starts after the current one.\n"
            );
            client.comment(pr, &text).await?;
        }
        self.write_stopping(plan, self.trigger.comment_id, &self.trigger.user)
            .await?;
        Ok(said(
            "Abort requested: the run stops after the current round.",
        ))
    }

    /// Replies `text` to the comment, once.
    async fn reply(&self, text: &str) -> Result<(), ActionError> {
        let (client, t) = (self.client, self.trigger);
        let reply = self.replier.reply(client, t.pr_number, t.comment_id, text);
        Ok(reply.await?)
    }

    /// The pull request's queue as the writer of its branch checked out in `c` applies it.
    fn queue_of<'b>(&'b self, c: &'b Checkout) -> Queue<'b> {
        let pr = self.trigger.pr_number;
        Queue::new(self.client, pr, &c.repo, &c.auth, &self.branch, &c.inputs)
    }

    /// `proceed`, `answer`, `retry`: commands queued earlier whose steer job GitHub cancelled
    /// (one pending job per branch group) are applied first, in order; then this one, unless
    /// a round's writer applied it already. Pushed, and a round started, unless this one was
    /// refused (its author is told why) and no other was applied; then the markers say what
    /// was settled. A marker still queued is what tells a re-run that a command was applied
    /// before its round was started ([`catch_up`]), so it is rewritten after the dispatch.
    async fn change(&self, mut c: Checkout) -> Result<Steered, ActionError> {
        let trigger = self.trigger;
        let queue = Queue::new(
            self.client,
            trigger.pr_number,
            &c.repo,
            &c.auth,
            &self.branch,
            &c.inputs,
        );
        let caught = catch_up(queue, &mut c.plan, &c.dag, Some(trigger)).await?;
        for line in &caught.lines {
            println!("{line}");
        }
        // This command, unless a round's writer settled it already.
        let by = format!("`/execute` by @{}", trigger.user);
        let (change, refused) = if caught.settled.contains(&trigger.comment_id) {
            (None, None)
        } else {
            match apply(&mut c.plan, &c.dag, &trigger.command, &by) {
                Ok(message) => {
                    record(&mut c.plan, trigger.comment_id);
                    (Some(with_trailer(&message, trigger.comment_id, true)), None)
                }
                Err(refusal) => (None, Some(refusal)),
            }
        };
        let pushed = self.commit_and_push(&c, change.as_deref(), caught.committed)?;
        let id = trigger.comment_id;
        let refused_here = refused.is_some() || caught.refused.contains(&id);
        if let Some(refusal) = &refused {
            self.reply(refusal).await?;
        }
        let done = if refused_here && !caught.applied {
            said(refused.unwrap_or_else(|| {
                format!("Comment {id} was not applied (its reply says why); no round started.")
            }))
        } else {
            self.start(&c).await?
        };
        if pushed {
            // The branch's history records each command now; the markers say so.
            for line in confirm(queue).await {
                println!("{line}");
            }
        }
        Ok(done)
    }

    /// Commits the plan with `change` (its message) and pushes it with what was caught up;
    /// whether it pushed.
    fn commit_and_push(
        &self,
        c: &Checkout,
        change: Option<&str>,
        caught_up: bool,
    ) -> Result<bool, ActionError> {
        if let Some(message) = change {
            crate::action::save_plan(&c.plan, &c.plan_path)?;
            c.repo
                .commit(message, std::slice::from_ref(&c.inputs.plan_rel))?;
        }
        let push = change.is_some() || caught_up;
        if push {
            let say = |line: String| println!("{line}");
            crate::action::push_with_rebase(&c.repo, &self.branch, &c.auth, say)?;
            crate::flow::failpoint("steer-pushed", 0);
        }
        Ok(push)
    }

    /// Starts a round on the branch, unless `/execute abort` came after this command. One
    /// given before it is taken back: the user starts the run again, and that round must not
    /// stop after one pass (nor the status comment say it will).
    async fn start(&self, c: &Checkout) -> Result<Steered, ActionError> {
        let (client, branch, pr) = (self.client, &self.branch, self.trigger.pr_number);
        let (id, marked) = (
            self.trigger.comment_id,
            comment::trusted_marked(client, pr, self.inputs.me()).await?,
        );
        if let Some(abort) = abort_after(client, pr, &marked, id).await? {
            return Ok(said(format!(
                "`/execute abort` (comment {abort}) came after this command: no round started; `/execute` resumes."
            )));
        }
        let how = "taken back by a later command that started the run";
        if take_aborts(self.queue_of(c), &marked, id, how).await? {
            self.write_status(&c.plan, &waiting_on(&c.plan), None)
                .await?;
        }
        crate::action::dispatch_round(client, &c.inputs, branch, branch).await?;
        Ok(Steered {
            message: format!("Started a round on {branch}."),
            dispatched: Some(branch.clone()),
            to_apply: None,
        })
    }
}
