//! `dagexec action comment`: an `/execute` comment on a pull request, acted on. The comment
//! is classified and its author's permission checked ([`super::comment`]); then the command
//! changes the plan on the pull request's head branch (committed and pushed), and usually
//! starts a round there with `workflow_dispatch`. The comment's text is data throughout: it
//! goes into the plan as an answer, never into a shell.
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
//! Every writer of the branch applies the changes queued on the pull request ([`catch_up`]),
//! each once: the record is the commit that settled it (its last line, [`STEERED_TRAILER`])
//! and then its marker, rewritten after the push ([`confirm`]); the plan's list is a cache.

use std::path::Path;

use super::comment::{self, Command, Outcome, Trigger};
use crate::action::report::Links;
use crate::action::runtime::Context;
use crate::action::{ActionError, Inputs};
use crate::edge::git::{RemoteAuth, Repo};
use crate::edge::github::Client;
use crate::pure::plan::{Plan, model::Status};

/// In the status comment: the user asked to stop after the current round.
pub const ABORT_MARKER: &str = "<!-- dagexec:abort-requested -->";
/// After [`ABORT_MARKER`]: the `/execute abort` comment that asked, `<!-- dagexec:abort-by:<id> -->`.
pub const ABORT_BY_PREFIX: &str = "<!-- dagexec:abort-by:";

/// The marker naming `/execute abort` comment `id`.
pub fn abort_by_marker(id: u64) -> String {
    format!("{ABORT_BY_PREFIX}{id} -->")
}

/// Whether a stop after the current round was asked for on pull request `pr`: one of
/// dagexec's own status comments (`marked`) holds [`ABORT_MARKER`] and names an `/execute
/// abort` comment that is on this pull request, by a person with write access now. Any
/// workflow that comments with `GITHUB_TOKEN` writes as dagexec's comment job does, so the
/// marker alone stops nothing.
pub async fn abort_confirmed(
    client: &Client,
    pr: u64,
    marked: &comment::Trusted,
) -> Result<bool, ActionError> {
    if !marked.abort_requested(ABORT_MARKER) {
        return Ok(false);
    }
    let ids: std::collections::BTreeSet<u64> = marked
        .own
        .iter()
        .filter(|c| c.starts_with(comment::STATUS_MARKER) && c.body.contains(ABORT_MARKER))
        .flat_map(|c| {
            c.body
                .match_indices(ABORT_BY_PREFIX)
                .filter_map(|(at, _)| {
                    let rest = &c.body[at + ABORT_BY_PREFIX.len()..];
                    rest.split(" -->").next()?.trim().parse().ok()
                })
                .collect::<Vec<u64>>()
        })
        .collect();
    for id in ids {
        match still_a_command(client, pr, id).await? {
            Ok((_, Some(Command::Abort))) => return Ok(true),
            Ok(_) => tracing::warn!(comment = id, "the abort marker names no `/execute abort`"),
            Err(why) => tracing::warn!(comment = id, "abort not believed: {why}"),
        }
    }
    println!(
        "warning: a status comment asks to stop, but names no `/execute abort` a person with write access gave on this pull request; not stopping"
    );
    Ok(false)
}

pub use crate::pure::plan::fields::PROCEED as PROCEED_FIELD;

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

/// Whether `command` changes the plan (and so runs in the `steer` job).
pub fn changes_plan(command: &Command) -> bool {
    matches!(
        command,
        Command::Proceed | Command::Answer { .. } | Command::Retry { .. }
    )
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
    let dag =
        crate::pure::validate::check(&plan, Some(archived.as_deref().unwrap_or(&inputs.plan_rel)))?;
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
            let caught = rt.block_on(catch_up_all(
                &client,
                pr,
                me,
                &repo,
                &plan_path,
                &inputs.plan_rel,
                &mut plan,
                &dag,
                Some(&trigger),
            ))?;
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

/// The start of the marker of a queued plan change: `<!-- dagexec:steer:<comment id> -->`,
/// written by the comment job once the commenter's permission is checked.
pub const STEER_MARKER_PREFIX: &str = "<!-- dagexec:steer:";

/// The marker of the plan change asked for in comment `id`.
pub fn steer_marker(id: u64) -> String {
    format!("{STEER_MARKER_PREFIX}{id} -->")
}

pub use crate::pure::plan::fields::STEERED as STEERED_FIELD;

/// How many settled comments the plan's cache keeps (the record itself is not capped).
pub const STEERED_KEPT: usize = 500;

/// The last line of the message of the commit that settled `/execute` comment `<id>`:
/// `Dagexec-Steered: <id> applied` (its change is in that commit) or `… refused` (the
/// commenter was told why). Found again in the branch's history, it keeps a command from being
/// applied twice even when the commit's marker was never rewritten (the job died after its
/// push) and the plan was replaced since.
pub const STEERED_TRAILER: &str = "Dagexec-Steered:";

/// The comments whose change the plan records as settled.
pub fn steered(plan: &Plan) -> Vec<u64> {
    plan.progress
        .extra
        .get(STEERED_FIELD)
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_u64)
        .collect()
}

/// Records comment `id` as settled in the plan's cache.
fn record(plan: &mut Plan, id: u64) {
    let mut ids = steered(plan);
    if !ids.contains(&id) {
        ids.push(id);
    }
    let keep = ids.len().saturating_sub(STEERED_KEPT);
    plan.progress
        .extra
        .insert(STEERED_FIELD.into(), ids[keep..].to_vec().into());
}

/// `message` with the record that it settles comment `id` as its last line.
fn with_trailer(message: &str, id: u64, applied: bool) -> String {
    format!(
        "{}\n\n{STEERED_TRAILER} {id} {}\n",
        message.trim_end(),
        if applied { "applied" } else { "refused" }
    )
}

/// The subjects of the commits steering makes: only these carry a record (a round's message
/// holds workers' words, which must not be able to settle someone's command).
const STEER_SUBJECTS: [&str; 4] = [
    "dagexec: proceed despite failed pre-flight checks",
    "dagexec: answer to task ",
    "dagexec: retry task ",
    "dagexec: /execute comment ",
];

/// A command settled in the branch's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// The commit that settled it.
    pub sha: String,
    /// Applied (else refused).
    pub applied: bool,
    /// The commit's subject.
    pub subject: String,
    /// For a refused command: why (the reply the commenter gets).
    pub why: String,
}

/// Every command the history of `HEAD` records as settled, by comment id (the newest record
/// of each).
pub fn settled_in_history(
    repo: &Repo,
) -> Result<std::collections::BTreeMap<u64, Settled>, ActionError> {
    settled_between(repo, None)
}

/// What [`settled_in_history`] finds in the commits since `since` (all of `HEAD`'s without).
fn settled_between(
    repo: &Repo,
    since: Option<&str>,
) -> Result<std::collections::BTreeMap<u64, Settled>, ActionError> {
    let mut out = std::collections::BTreeMap::new();
    for c in repo.commits_mentioning(STEERED_TRAILER, since)? {
        let mut lines = c.message.lines();
        let subject = lines.next().unwrap_or("").to_string();
        if !STEER_SUBJECTS.iter().any(|s| subject.starts_with(s)) {
            continue;
        }
        let Some((id, applied)) = c.message.lines().last().and_then(parse_trailer) else {
            continue;
        };
        let body: Vec<&str> = c.message.lines().skip(1).collect();
        let why = body[..body.len().saturating_sub(1)]
            .join("\n")
            .trim()
            .to_string();
        out.entry(id).or_insert(Settled {
            sha: c.sha,
            applied,
            subject,
            why,
        });
    }
    Ok(out)
}

/// `Dagexec-Steered: <id> applied|refused`.
fn parse_trailer(line: &str) -> Option<(u64, bool)> {
    let mut words = line
        .trim()
        .strip_prefix(STEERED_TRAILER)?
        .split_whitespace();
    let id = words.next()?.parse().ok()?;
    let applied = match words.next()? {
        "applied" => true,
        "refused" => false,
        _ => return None,
    };
    words.next().is_none().then_some((id, applied))
}

/// A plan-changing command in words, for the queued reply.
fn command_text(command: &Command) -> String {
    match command {
        Command::Proceed => "`/execute proceed`".into(),
        Command::Answer { task, .. } => format!("the answer to task {task}"),
        Command::Retry { task } => format!("`/execute retry {task}`"),
        _ => "the command".into(),
    }
}

/// Applies a plan-changing `command` to `plan`: the commit message (`by` says who asked),
/// or why it cannot be applied (a reply for the pull request, with the fix).
pub fn apply(
    plan: &mut Plan,
    dag: &crate::pure::graph::Dag,
    command: &Command,
    by: &str,
) -> Result<String, String> {
    match command {
        Command::Proceed => {
            plan.progress
                .extra
                .insert(PROCEED_FIELD.into(), "proceed".into());
            Ok(format!(
                "dagexec: proceed despite failed pre-flight checks\n\nAsked for with {by}.\n"
            ))
        }
        Command::Answer { task, text } => {
            let index = *task;
            if let Some(t) = plan.tasks.get_mut(index) {
                // A plain BLOCKED (no question recorded) is answered like a review: free text.
                if t.status == Status::Blocked && crate::pure::question::get(t).is_none() {
                    crate::pure::question::set(
                        t,
                        &blocked_question(index, t.result.as_deref().unwrap_or("")),
                    );
                }
            }
            match crate::pure::question::answer(plan, dag, index, &text.replace("\r\n", "\n")) {
                Ok(a) => Ok(format!(
                    "dagexec: answer to task {index}\n\nGiven with {by}; task {index}{} pending again.\n",
                    if a.reopened.is_empty() {
                        String::new()
                    } else {
                        format!(" and tasks {:?}", a.reopened)
                    }
                )),
                Err(e) => Err(format!(
                    "dagexec could not take that answer: {e}\n\n{}",
                    e.hint()
                )),
            }
        }
        Command::Retry { task } => match retry(plan, dag, *task) {
            Ok(reopened) => Ok(format!(
                "dagexec: retry task {task}\n\nAsked for with {by}; pending again: {reopened:?}.\n"
            )),
            Err(why) => Err(format!("dagexec cannot retry that: {why}")),
        },
        other => Err(format!("{other:?} does not change the plan")),
    }
}

/// What [`catch_up_all`] did.
#[derive(Debug, Default)]
pub(super) struct CaughtUp {
    /// A line per command, for the log.
    pub lines: Vec<String>,
    /// Every queued command known settled now (earlier, or by this call): never applied again.
    pub settled: std::collections::BTreeSet<u64>,
    /// Commits were made in the checkout (to push).
    pub committed: bool,
}

/// A queued change as its marker shows it: `<!-- dagexec:steer:<id> -->` then `⏳ Queued…`
/// until the change is settled, then `✅ Applied…` or `❌ Not applied…`.
struct Marker {
    /// The `/execute` comment it names.
    id: u64,
    /// The marker comment itself.
    comment: u64,
    /// It says the command was settled.
    settled: bool,
}

/// dagexec's own steer markers on pull request `pr` (a stranger's marker is no command).
async fn markers(
    client: &Client,
    pr: u64,
    me: comment::Identity,
) -> Result<Vec<Marker>, ActionError> {
    let marked = comment::trusted_marked(client, pr, me).await?;
    Ok(marked
        .own
        .iter()
        .filter_map(|c| {
            let rest = c.body.trim_start().strip_prefix(STEER_MARKER_PREFIX)?;
            let (id, status) = rest.split_once(" -->")?;
            let status = status.trim_start();
            Some(Marker {
                id: id.trim().parse().ok()?,
                comment: c.id,
                settled: status.starts_with("✅") || status.starts_with("❌"),
            })
        })
        .collect())
}

/// The queued commands no marker says are settled, oldest first, each with its markers.
fn queued(markers: &[Marker]) -> std::collections::BTreeMap<u64, Vec<u64>> {
    let done: std::collections::BTreeSet<u64> =
        markers.iter().filter(|m| m.settled).map(|m| m.id).collect();
    let mut out = std::collections::BTreeMap::<u64, Vec<u64>>::new();
    for m in markers.iter().filter(|m| !done.contains(&m.id)) {
        out.entry(m.id).or_default().push(m.comment);
    }
    out
}

/// Rewrites the markers of comment `id` to `status` (`✅ …` or `❌ …`). Whether they all
/// were: a marker left as it was is rewritten by a later job (the record is the history).
async fn rewrite(client: &Client, id: u64, markers: &[u64], status: &str) -> bool {
    let mut all = true;
    for m in markers {
        if let Err(e) = client
            .update_comment(*m, &format!("{}\n{status}\n", steer_marker(id)))
            .await
        {
            tracing::warn!(marker = m, "could not rewrite a steer marker: {e}");
            all = false;
        }
    }
    all
}

/// Makes the markers of commands the branch's history settled say so (a refused command's
/// author is told why, once its marker says so). Run after a push, so `HEAD`'s history is the
/// branch's; also the repair when the job that pushed died before its markers were rewritten.
/// A line per marker rewritten. Never fails the job: what it could not do (GitHub did not
/// answer) is a line too, and the next writer of the branch does it, since the history keeps
/// the record.
pub(super) async fn confirm(
    client: &Client,
    pr: u64,
    me: comment::Identity,
    repo: &Repo,
) -> Vec<String> {
    match try_confirm(client, pr, me, repo).await {
        Ok(lines) => lines,
        Err(e) => vec![format!(
            "warning: the replies of the commands applied here still say queued ({e}); the next job that writes the branch rewrites them (the branch's history records the commands)"
        )],
    }
}

async fn try_confirm(
    client: &Client,
    pr: u64,
    me: comment::Identity,
    repo: &Repo,
) -> Result<Vec<String>, ActionError> {
    let queued = queued(&markers(client, pr, me).await?);
    if queued.is_empty() {
        return Ok(Vec::new());
    }
    let history = settled_in_history(repo)?;
    let mut lines = Vec::new();
    for (id, marks) in &queued {
        if let Some(s) = history.get(id) {
            lines.push(settle_markers(client, pr, *id, marks, s).await?);
        }
    }
    Ok(lines)
}

/// Whether the commits after `since` up to `HEAD` settle a queued command (so their markers
/// are to be rewritten once pushed).
pub(super) fn settled_since(repo: &Repo, since: &str) -> bool {
    settled_between(repo, Some(since)).is_ok_and(|s| !s.is_empty())
}

/// Rewrites the markers of comment `id`, settled by `s`; replies with why when it was refused.
async fn settle_markers(
    client: &Client,
    pr: u64,
    id: u64,
    marks: &[u64],
    s: &Settled,
) -> Result<String, ActionError> {
    let short = &s.sha[..s.sha.len().min(12)];
    let status = if s.applied {
        format!("✅ Applied in {short}: {}.", s.subject)
    } else {
        format!(
            "❌ Not applied: {}",
            s.why.lines().next().unwrap_or("it could not be applied")
        )
    };
    if rewrite(client, id, marks, &status).await && !s.applied && !s.why.is_empty() {
        client.comment(pr, &s.why).await?;
    }
    Ok(format!("{status} (comment {id})"))
}

/// Applies every plan change queued on pull request `pr` that is not settled yet, oldest
/// first, each committed in the checkout (`plan_path`) with its record ([`STEERED_TRAILER`]):
/// the queued markers are dagexec's own comments (`me`: a stranger's marker is no command),
/// each naming an `/execute` comment. A command is settled when one of its markers says so,
/// when the branch's history records it, or when the plan's cache does; nothing settled is
/// applied again. Before a command is applied, the comment it names is read again and must
/// be on this pull request, by a person who has write access *now* (any workflow that
/// comments as GitHub Actions' bot can write a marker; a permission can be revoked after the
/// comment job checked it); otherwise its marker says why and nothing is committed. A change
/// that cannot be applied any more (the task moved on) is committed as refused. The markers
/// of what is committed here are rewritten by [`confirm`] once the caller pushed. Returns a
/// line per command, for the log.
#[expect(clippy::too_many_arguments, reason = "not yet a context struct")]
pub(super) async fn catch_up(
    client: &Client,
    pr: u64,
    me: comment::Identity,
    repo: &Repo,
    plan_path: &Path,
    plan_rel: &str,
    plan: &mut Plan,
    dag: &crate::pure::graph::Dag,
    known: Option<&Trigger>,
) -> Result<Vec<String>, ActionError> {
    Ok(
        catch_up_all(client, pr, me, repo, plan_path, plan_rel, plan, dag, known)
            .await?
            .lines,
    )
}

/// [`catch_up`], with what the steer job needs to know about its own command.
#[expect(clippy::too_many_arguments, reason = "not yet a context struct")]
pub(super) async fn catch_up_all(
    client: &Client,
    pr: u64,
    me: comment::Identity,
    repo: &Repo,
    plan_path: &Path,
    plan_rel: &str,
    plan: &mut Plan,
    dag: &crate::pure::graph::Dag,
    known: Option<&Trigger>,
) -> Result<CaughtUp, ActionError> {
    let markers = markers(client, pr, me).await?;
    let mut out = CaughtUp {
        settled: markers.iter().filter(|m| m.settled).map(|m| m.id).collect(),
        ..Default::default()
    };
    let queued = queued(&markers);
    if queued.is_empty() {
        return Ok(out);
    }
    let history = settled_in_history(repo)?;
    let cache = steered(plan);
    for (id, marks) in queued {
        out.settled.insert(id);
        // Settled by a job that pushed and then died before rewriting the marker.
        if let Some(s) = history.get(&id) {
            out.lines
                .push(settle_markers(client, pr, id, &marks, s).await?);
            continue;
        }
        if cache.contains(&id) {
            rewrite(
                client,
                id,
                &marks,
                "✅ Applied earlier (the plan records it).",
            )
            .await;
            out.lines.push(format!(
                "Comment {id} was applied earlier (the plan records it)."
            ));
            continue;
        }
        let (user, command) = match known.filter(|t| t.comment_id == id && t.pr_number == pr) {
            // The command this job was started for: its author's permission was checked by
            // this job, and it is on this pull request.
            Some(t) => (t.user.clone(), Some(t.command.clone())),
            None => match still_a_command(client, pr, id).await? {
                Ok(found) => found,
                Err(why) => {
                    rewrite(client, id, &marks, &format!("❌ Not applied: {why}")).await;
                    out.lines.push(format!("❌ Not applied: {why}"));
                    continue;
                }
            },
        };
        let by = format!("`/execute` by @{user}");
        let outcome = match command {
            Some(command) if changes_plan(&command) => apply(plan, dag, &command, &by),
            _ => Err(format!(
                "Comment {id} no longer holds a command that changes the plan; nothing was applied."
            )),
        };
        record(plan, id);
        crate::edge::plan_file::save(plan, plan_path).map_err(|source| ActionError::Write {
            path: plan_path.to_path_buf(),
            source,
        })?;
        let message = match &outcome {
            Ok(message) => with_trailer(message, id, true),
            Err(why) => with_trailer(
                &format!(
                    "dagexec: /execute comment {id} not applied\n\n{}",
                    why.trim()
                ),
                id,
                false,
            ),
        };
        repo.commit(&message, &[plan_rel.to_string()])?;
        out.committed = true;
        out.lines.push(format!(
            "{}: comment {id} ({}).",
            if outcome.is_ok() {
                "Applied"
            } else {
                "Not applied"
            },
            message.lines().next().unwrap_or("")
        ));
    }
    Ok(out)
}

/// Comment `id` read again at the moment its queued change is applied: its author and
/// command, or why it must not be applied — it is gone, it is not on pull request `pr`, a bot
/// wrote it, or its author may not (any longer) run commands here.
async fn still_a_command(
    client: &Client,
    pr: u64,
    id: u64,
) -> Result<Result<(String, Option<Command>), String>, ActionError> {
    let c = match client.get_comment(id).await {
        Ok(c) => c,
        Err(e) if e.status() == Some(404) => {
            return Ok(Err(format!("comment {id} is gone; nothing was applied.")));
        }
        Err(e) => return Err(e.into()),
    };
    if c.issue != Some(pr) {
        return Ok(Err(format!(
            "comment {id} is not on this pull request; nothing was applied."
        )));
    }
    let user = c.author.login.clone();
    if user.is_empty() || c.author.bot || user.ends_with("[bot]") {
        return Ok(Err(format!(
            "comment {id} was not written by a person; nothing was applied."
        )));
    }
    let (permission, role) = match client.permission(&user).await {
        Ok(p) => p,
        Err(e) if e.status() == Some(404) => ("none".to_string(), None),
        Err(e) => return Err(e.into()),
    };
    if !comment::may_run(&permission, role.as_deref()) {
        let access = role.as_deref().unwrap_or(&permission);
        return Ok(Err(format!(
            "@{user} has {access} access now, and only people with write, maintain or admin access can change the plan; comment {id} was not applied."
        )));
    }
    Ok(Ok((user, comment::parse(&c.body))))
}

/// The question a plain BLOCKED result asks.
pub fn blocked_question(index: usize, reason: &str) -> crate::pure::question::Question {
    crate::pure::question::Question {
        kind: crate::pure::question::Kind::Review,
        text: format!("Task {index} is blocked: {reason}"),
        options: Vec::new(),
        blocked_at: None,
        reply: None,
    }
}

/// `/execute retry N`: a failed, blocked or skipped task gets a fresh set of attempts, and
/// what the cascade skipped because of it is pending again.
pub fn retry(
    plan: &mut Plan,
    dag: &crate::pure::graph::Dag,
    index: usize,
) -> Result<Vec<usize>, String> {
    let count = plan.tasks.len();
    let Some(t) = plan.tasks.get_mut(index) else {
        return Err(format!("task {index}: no such task (the plan has {count})"));
    };
    if !matches!(t.status, Status::Failed | Status::Blocked | Status::Skipped) {
        return Err(format!(
            "task {index} is {}; only a failed, blocked or skipped task can be retried",
            t.status
        ));
    }
    t.status = Status::Pending;
    t.attempts = Some(0);
    t.result = None;
    t.extra.shift_remove(super::work::RETRY_PROMPT_FIELD);
    t.extra.shift_remove(crate::pure::question::QUESTION_FIELD);
    let mut all = vec![index];
    all.extend(crate::pure::update::reopen_skipped_dependents(
        plan, dag, index,
    ));
    all.sort_unstable();
    Ok(all)
}

/// What the status comment says the run waits on.
pub fn waiting_on(plan: &Plan) -> String {
    let open = crate::pure::question::open(plan);
    let blocked: Vec<usize> = plan
        .tasks
        .iter()
        .enumerate()
        .filter(|(_, t)| t.status == Status::Blocked)
        .map(|(i, _)| i)
        .collect();
    if plan.tasks.iter().all(|t| t.status == Status::Completed) {
        "nothing: every task completed".into()
    } else if !open.is_empty() || !blocked.is_empty() {
        let mut ids: Vec<usize> = open.iter().map(|(i, _)| *i).chain(blocked).collect();
        ids.sort_unstable();
        ids.dedup();
        format!("you: answer the question(s) of task(s) {ids:?} (`/execute answer N …`)")
    } else if plan.count(Status::Pending) > 0 {
        "the next round".into()
    } else {
        "you: nothing is pending; `/execute retry N` runs a failed task again".into()
    }
}

/// The comment a question gets on the pull request, found again by its marker.
pub fn question_marker(key: &str) -> String {
    format!("<!-- dagexec:question:{key} -->")
}

/// The text of a task's question comment: the question, its options, the exact replies.
pub fn question_comment(
    index: usize,
    subject: &str,
    q: &crate::pure::question::Question,
) -> String {
    let mut s = format!(
        "{}\n### dagexec: task {index} ({}) needs you\n\n{}\n",
        question_marker(&index.to_string()),
        subject.lines().next().unwrap_or(""),
        q.text.trim()
    );
    if !q.options.is_empty() {
        s.push_str("\nOptions:\n");
        for (n, c) in q.options.iter().enumerate() {
            s.push_str(&format!("{}. `{}` — {}\n", n + 1, c.key, c.description));
        }
    }
    let example = match q.kind {
        crate::pure::question::Kind::Decision => q
            .options
            .first()
            .map_or_else(|| "<option>".into(), |c| c.key.clone()),
        crate::pure::question::Kind::Action => "done".into(),
        crate::pure::question::Kind::Review => "<your answer>".into(),
    };
    s.push_str(&format!(
        "\nReply with a comment:\n\n```\n/execute answer {index} {example}\n```\n\nor `/execute retry {index}` to run it again as it is.\n"
    ));
    s
}

/// The pre-flight question: the failed checks and the reply that proceeds anyway.
pub fn preflight_comment(message: &str) -> String {
    format!(
        "{}\n### dagexec: pre-flight checks failed\n\n```\n{}\n```\n\nFix what they check and comment `/execute`, or reply with a comment:\n\n```\n/execute proceed\n```\n\nto run anyway.\n",
        question_marker("preflight"),
        message.trim()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(["-c", "commit.gpgsign=false"])
            .args(args)
            .current_dir(dir)
            .env_remove("GIT_DIR")
            .env_remove("GIT_INDEX_FILE")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    }

    #[test]
    fn the_history_records_only_steering_commits_own_last_line() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q", "-b", "main"]);
        let repo = Repo::discover(dir).unwrap();
        assert!(settled_in_history(&repo).unwrap().is_empty());
        let commit = |message: &str| git(dir, &["commit", "-q", "--allow-empty", "-m", message]);
        commit(&with_trailer(
            "dagexec: answer to task 2\n\nGiven with `/execute` by @o.\n",
            11,
            true,
        ));
        commit(&with_trailer(
            "dagexec: /execute comment 12 not applied\n\ndagexec cannot retry that: task 1 is completed\nline two",
            12,
            false,
        ));
        // Workers' words are in a round's message: they settle nothing, nor does a trailer
        // that is not the last line, nor one with something after the outcome.
        commit(
            "dagexec: round 3 — 1/1 tasks\n\n- task 0: A — completed: x\n\nDagexec-Steered: 13 applied",
        );
        commit("dagexec: retry task 1\n\nDagexec-Steered: 14 applied\nmore");
        commit("dagexec: retry task 1\n\nDagexec-Steered: 15 applied now");
        commit(&with_trailer(
            "dagexec: proceed despite failed pre-flight checks",
            16,
            true,
        ));
        let found = settled_in_history(&repo).unwrap();
        assert_eq!(found.keys().copied().collect::<Vec<_>>(), [11, 12, 16]);
        assert!(found[&11].applied && found[&16].applied);
        assert_eq!(found[&11].subject, "dagexec: answer to task 2");
        assert_eq!(found[&11].sha.len(), 40);
        let refused = &found[&12];
        assert!(!refused.applied);
        assert_eq!(
            refused.why,
            "dagexec cannot retry that: task 1 is completed\nline two"
        );
    }

    #[test]
    fn trailers_parse_exactly() {
        assert_eq!(parse_trailer("Dagexec-Steered: 5 applied"), Some((5, true)));
        assert_eq!(
            parse_trailer("Dagexec-Steered: 5 refused"),
            Some((5, false))
        );
        for bad in [
            "Dagexec-Steered: x applied",
            "Dagexec-Steered: 5",
            "Dagexec-Steered: 5 done",
            "dagexec-steered: 5 applied",
        ] {
            assert_eq!(parse_trailer(bad), None, "{bad}");
        }
        assert!(
            with_trailer("dagexec: retry task 1\n", 9, false)
                .ends_with("\n\nDagexec-Steered: 9 refused\n")
        );
    }
}
