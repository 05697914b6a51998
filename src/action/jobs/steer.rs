//! `dagexec action comment`: an `/execute` comment on a pull request, acted on. The comment
//! is classified and its author's permission checked ([`crate::action::steering::comment`]);
//! then the command changes the plan on the pull request's head branch (committed and
//! pushed), and usually starts a round there with `workflow_dispatch`. The comment's text is
//! data throughout: it goes into the plan as an answer, never into a shell.
//!
//! Two jobs, because a command that commits to the execution branch must wait for a running
//! round of that branch (one concurrency group per branch, `dagexec-<branch>`), and the
//! branch is known only after asking the API for the pull request's head:
//! - [`Phase::Route`] (job `comment`, no group): permission, 👀, replies; `/execute`,
//!   `status` and `abort` are done here (they push nothing; an abort must reach the running
//!   round, not wait for it); `proceed`, `answer` and `retry` are handed on with the branch.
//! - [`Phase::Apply`] (job `steer`, in the branch's group): checks the permission again,
//!   commits the change to the plan, pushes and starts a round.
//!
//! What every writer of the branch shares with these jobs — the queue of plan changes, its
//! record in the branch's history, questions and the abort marker — is
//! [`crate::action::steering`].

use std::path::Path;

use crate::action::report::Links;
use crate::action::runtime::Context;
use crate::action::steering::comment::{self, Command, Outcome, Trigger};
use crate::action::steering::{
    ABORT_MARKER, Queue, abort_by_marker, apply, catch_up_all, changes_plan, command_text, confirm,
    record, steer_marker, waiting_on, with_trailer,
};
use crate::action::{ActionError, Inputs};
use crate::edge::git::{RemoteAuth, Repo};
use crate::edge::github::Client;
use crate::pure::plan;

/// `/execute retry N` (the local `dagexec retry` uses it too).
pub use crate::action::steering::retry;

/// What the command did, for the log and the job's outputs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Steered {
    pub message: String,
    /// A round was dispatched on this branch.
    pub dispatched: Option<String>,
    /// The change to the plan is left to the `steer` job, in this branch's group.
    pub to_apply: Option<String>,
}

/// Which half of a command this job does (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Route,
    Apply,
}

/// Handles the event at `ctx.event_path` in the checkout at `root`.
#[expect(clippy::too_many_lines, reason = "not yet split into named steps")]
pub fn run(
    root: &Path,
    inputs: &Inputs,
    ctx: &Context,
    client_for: impl FnOnce(&Trigger) -> Result<Client, ActionError>,
    rt: &tokio::runtime::Runtime,
    phase: Phase,
) -> Result<Steered, ActionError> {
    let payload: serde_json::Value = match &ctx.event_path {
        Some(p) => std::fs::read_to_string(p)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .ok_or_else(|| {
                ActionError::Input(format!("cannot read the event at {}", p.display()))
            })?,
        None => {
            return Err(ActionError::Input(
                "no GITHUB_EVENT_PATH: `comment` handles an issue_comment event".into(),
            ));
        }
    };
    let trigger = match comment::classify(&ctx.event_name, &payload) {
        Ok(t) => t,
        Err(why) => {
            return Ok(Steered {
                message: format!("Ignoring this event: {why}."),
                ..Default::default()
            });
        }
    };
    if phase == Phase::Apply && !changes_plan(&trigger.command) {
        return Ok(Steered {
            message: "The comment job handled this command.".into(),
            ..Default::default()
        });
    }
    let client = client_for(&trigger)?;
    let (branch, command) =
        match rt.block_on(comment::handle_as(&client, &trigger, phase == Phase::Route))? {
            Outcome::Denied => {
                return Ok(Steered {
                    message: format!("@{} may not run dagexec here; replied.", trigger.user),
                    ..Default::default()
                });
            }
            Outcome::Replied => {
                return Ok(Steered {
                    message: "Replied to the comment.".into(),
                    ..Default::default()
                });
            }
            Outcome::Run {
                head_branch,
                command,
            } => (head_branch, command),
        };
    if phase == Phase::Route && changes_plan(&command) {
        // The command is kept on the pull request as dagexec's own comment: whichever job
        // writes the branch next applies it (the steer job below, or — when GitHub cancels
        // that pending job because a round got there first — the running round's writer).
        // Found again by its marker, so a re-run of this job queues nothing twice.
        let marker = steer_marker(trigger.comment_id);
        let own = rt
            .block_on(comment::trusted_marked(
                &client,
                trigger.pr_number,
                comment::Identity {
                    app_id: inputs.app_id,
                },
            ))?
            .own;
        if !own.iter().any(|c| c.starts_with(&marker)) {
            rt.block_on(client.comment(
                trigger.pr_number,
                &format!(
                    "{marker}\n⏳ Queued: {} — applied by the next job that writes `{branch}` (at once when no round of it runs, else when the running round ends).\n",
                    command_text(&command)
                ),
            ))?;
        }
        return Ok(Steered {
            message: format!(
                "The change to the plan is made by the steer job, once no round of {branch} runs."
            ),
            to_apply: Some(branch),
            ..Default::default()
        });
    }
    let repo = Repo::discover(root)?;
    let auth = RemoteAuth::token(inputs.token.expose());
    let Some(tip) = repo.fetch_branch(&branch, &auth)? else {
        return Err(ActionError::Input(format!(
            "the pull request's branch {branch} is not on the remote"
        )));
    };
    repo.checkout_detached(&tip)?;
    let inputs = &crate::action::with_plan(repo.root(), inputs)?;
    let plan_path = repo.root().join(&inputs.plan_rel);
    // Only the archive is left when the job that completed the plan died before publishing:
    // `/execute` (a round there finishes the run), `status` and `abort` read it; nothing
    // changes it.
    let (mut plan, archived) = crate::action::load_plan(&repo, &inputs.plan_rel)?;
    if let (Some(rel), true) = (&archived, changes_plan(&command)) {
        let text = format!(
            "Every task is completed and the plan is archived as `{rel}`: there is nothing left to change. Comment `/execute` to finish the run on the pull request."
        );
        rt.block_on(client.comment(trigger.pr_number, &text))?;
        return Ok(Steered {
            message: text,
            ..Default::default()
        });
    }
    let dag = plan::validate::check(&plan, Some(archived.as_deref().unwrap_or(&inputs.plan_rel)))?;
    let pr = trigger.pr_number;
    let reply = |text: String| -> Result<(), ActionError> {
        rt.block_on(client.comment(pr, &text))?;
        Ok(())
    };
    let by = format!("`/execute` by @{}", trigger.user);
    // Whether queued changes were committed before this command's own.
    let mut caught_up = false;
    // Why this command cannot be applied (the reply), once what was caught up is pushed.
    let mut refused = None;
    let change: Option<String> = match &command {
        Command::Start => None,
        Command::Status => {
            let round = crate::flow::round_counter(&plan);
            let body = comment::status_body(
                &plan,
                round,
                &Links {
                    run: ctx.run_url(),
                    logs: Default::default(),
                },
                &waiting_on(&plan),
            );
            let marked = rt.block_on(comment::trusted_marked(
                &client,
                pr,
                comment::Identity::default(),
            ))?;
            rt.block_on(client.upsert_marked_comment(
                pr,
                comment::STATUS_MARKER,
                &body,
                &marked.own,
            ))?;
            return Ok(Steered {
                message: "Refreshed the status comment.".into(),
                ..Default::default()
            });
        }
        Command::Abort => {
            let round = crate::flow::round_counter(&plan);
            let body = format!(
                "{}\n{ABORT_MARKER}\n{}\n**Stopping after the current round** ({by}; a round that takes several workflow runs stops after the current one). Comment `/execute` to resume.\n",
                comment::status_body(
                    &plan,
                    round,
                    &Links {
                        run: ctx.run_url(),
                        logs: Default::default()
                    },
                    "the current round to end"
                ),
                abort_by_marker(trigger.comment_id)
            );
            let marked = rt.block_on(comment::trusted_marked(
                &client,
                pr,
                comment::Identity::default(),
            ))?;
            rt.block_on(client.upsert_marked_comment(
                pr,
                comment::STATUS_MARKER,
                &body,
                &marked.own,
            ))?;
            return Ok(Steered {
                message: "Abort requested: the run stops after the current round.".into(),
                ..Default::default()
            });
        }
        Command::Proceed | Command::Answer { .. } | Command::Retry { .. } => {
            // Commands queued earlier whose steer job GitHub cancelled (one pending job per
            // branch group) are applied first, in order; then this one, unless a round's
            // writer applied it already.
            let me = comment::Identity {
                app_id: inputs.app_id,
            };
            let queue = Queue {
                client: &client,
                pr,
                me,
                repo: &repo,
                plan_path: &plan_path,
                plan_rel: &inputs.plan_rel,
            };
            let caught = rt.block_on(catch_up_all(queue, &mut plan, &dag, Some(&trigger)))?;
            for line in &caught.lines {
                println!("{line}");
            }
            caught_up = caught.committed;
            if caught.settled.contains(&trigger.comment_id) {
                None
            } else {
                match apply(&mut plan, &dag, &command, &by) {
                    Ok(message) => {
                        record(&mut plan, trigger.comment_id);
                        Some(with_trailer(&message, trigger.comment_id, true))
                    }
                    Err(refusal) => {
                        refused = Some(refusal);
                        None
                    }
                }
            }
        }
        Command::Unknown(_) => unreachable!("handle replies to unknown commands"),
    };
    if let Some(message) = &change {
        crate::edge::plan_file::save(&plan, &plan_path).map_err(|source| ActionError::Write {
            path: plan_path.clone(),
            source,
        })?;
        repo.commit(message, std::slice::from_ref(&inputs.plan_rel))?;
    }
    if change.is_some() || caught_up {
        crate::action::push_with_rebase(&repo, &branch, &auth, |line| println!("{line}"))?;
        // Pushed: the branch's history records each command now; the markers say so next.
        crate::flow::failpoint("steer-pushed", 0);
        let me = comment::Identity {
            app_id: inputs.app_id,
        };
        for line in rt.block_on(confirm(&client, pr, me, &repo)) {
            println!("{line}");
        }
    }
    if let Some(refusal) = refused {
        reply(refusal.clone())?;
        return Ok(Steered {
            message: refusal,
            ..Default::default()
        });
    }
    let dispatch = crate::action::dispatch_inputs(&inputs.plan_rel, &branch);
    rt.block_on(client.dispatch(&inputs.workflow, &branch, &dispatch))?;
    Ok(Steered {
        message: format!("Started a round on {branch}."),
        dispatched: Some(branch),
        to_apply: None,
    })
}
