//! The queue of plan changes on the pull request: dagexec's own marker comments, each
//! naming an `/execute` comment; applied in order by whichever job writes the branch next,
//! each re-checked first, and the markers rewritten once the branch records them.

use super::comment::{self, SlashCommand, Trigger};
use super::record::{
    AUTHORISED_PREFIX, STEER_MARKER_PREFIX, SettledCommand, apply, authorised, changes_plan,
    record, settled_beside, settled_between, settled_in_history, steer_marker, steered,
    with_trailer,
};
use crate::action::{ActionError, Inputs};
use crate::edge::git::{RemoteAuth, Repo};
use crate::edge::github::Client;
use crate::edge::github::comments::IssueComment;
use crate::pure::plan::Plan;

/// What [`catch_up`] did.
#[derive(Debug, Default)]
pub(crate) struct CaughtUp {
    /// A line per command, for the log.
    pub lines: Vec<String>,
    /// Every queued command known settled now (earlier, or by this call): never applied again.
    pub settled: std::collections::BTreeSet<u64>,
    /// Commits were made in the checkout (to push).
    pub committed: bool,
    /// A command was applied here, or found applied by a job that may have died before it
    /// started its round.
    pub applied: bool,
    /// The queued commands found not to apply, here or by the commit that settled them.
    pub refused: std::collections::BTreeSet<u64>,
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
    /// The command as the comment job authorised it ([`authorised`]); none in a marker an
    /// earlier dagexec wrote.
    authorised: Option<String>,
}

/// dagexec's own steer markers on pull request `pr` (a stranger's marker is no command), and
/// every marked comment dagexec wrote there (its replies among them).
async fn markers(
    client: &Client,
    pr: u64,
    me: comment::Identity,
) -> Result<(Vec<Marker>, Vec<IssueComment>), ActionError> {
    let own = comment::trusted_marked(client, pr, me).await?.own;
    let markers = own
        .iter()
        .filter_map(|c| {
            let rest = c.body.trim_start().strip_prefix(STEER_MARKER_PREFIX)?;
            let (id, status) = rest.split_once(" -->")?;
            let status = status.trim_start();
            Some(Marker {
                id: id.trim().parse().ok()?,
                comment: c.id,
                settled: status.starts_with("✅") || status.starts_with("❌"),
                authorised: (status.lines())
                    .find(|l| l.starts_with(AUTHORISED_PREFIX))
                    .map(str::to_string),
            })
        })
        .collect();
    Ok((markers, own))
}

/// Every command a marker names, oldest first, each with its markers that still say queued.
/// What a marker says is no record: any workflow commenting as GitHub Actions' bot can write
/// one, so a command is settled only when the branch records it (its history, the plan's
/// cache), whatever its markers say.
fn queued(markers: &[Marker]) -> std::collections::BTreeMap<u64, Vec<&Marker>> {
    let mut out = std::collections::BTreeMap::<u64, Vec<&Marker>>::new();
    for m in markers {
        let open = out.entry(m.id).or_default();
        if !m.settled {
            open.push(m);
        }
    }
    out
}

/// Rewrites the markers of comment `id` to `status` (`✅ …` or `❌ …`), each keeping the
/// command it authorised (a re-run of the comment job finds it queued). A marker left as it
/// was is rewritten by a later job (the record is the history).
async fn rewrite(client: &Client, id: u64, markers: &[&Marker], status: &str) {
    for m in markers {
        let authorised = m.authorised.as_deref().unwrap_or_default();
        let body = format!("{}\n{status}\n{authorised}\n", steer_marker(id));
        if let Err(e) = client.update_comment(m.comment, body.trim_end()).await {
            tracing::warn!(marker = m.comment, "could not rewrite a steer marker: {e}");
        }
    }
}

/// Makes the markers of the commands the branch's history settled say so (a refused command's
/// author is told why first, once). Run after a push, so `HEAD`'s history is the branch's; also the
/// repair when the job that pushed died before its markers were rewritten. A line per marker
/// rewritten. Never fails the job: what it could not do (GitHub did not answer) is a line too,
/// and the next writer of the branch does it, since the history keeps the record.
pub(crate) async fn confirm(q: Queue<'_>) -> Vec<String> {
    match try_confirm(q).await {
        Ok(lines) => lines,
        Err(e) => vec![format!(
            "warning: the replies of the commands applied here still say queued ({e}); the next job that writes the branch rewrites them (the branch's history records the commands)"
        )],
    }
}

async fn try_confirm(q: Queue<'_>) -> Result<Vec<String>, ActionError> {
    let (client, pr) = (q.client, q.pr);
    let history = settled_in_history(q.repo)?;
    let mut lines = Vec::new();
    let (markers, own) = markers(client, pr, q.inputs.me()).await?;
    let queued = queued(&markers);
    for (id, marks) in queued.iter().filter(|(_, m)| !m.is_empty()) {
        if let Some(s) = history.get(id) {
            lines.push(settle_markers(client, pr, *id, marks, s, &own).await?);
        }
    }
    Ok(lines)
}

/// Whether the commits after `since` up to `HEAD` settle a queued command (so their markers
/// are to be rewritten once pushed).
pub(crate) fn settled_since(repo: &Repo, since: &str) -> bool {
    settled_between(repo, Some(since)).is_ok_and(|s| !s.is_empty())
}

/// Rewrites the markers `marks` of comment `id`, settled by `s`; replies with why when it was
/// refused — first, once (`own`: dagexec's comments, its earlier reply among them): a job
/// stopped after the reply leaves the marker queued, and the next writer finds the reply.
async fn settle_markers(
    client: &Client,
    pr: u64,
    id: u64,
    marks: &[&Marker],
    s: &SettledCommand,
    own: &[IssueComment],
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
    if !s.applied && !s.why.is_empty() {
        comment::reply(client, pr, id, &s.why, own).await?;
    }
    rewrite(client, id, marks, &status).await;
    Ok(format!("{status} (comment {id})"))
}

/// The pull request whose queued commands a writer of the branch applies, its checkout of
/// `branch` (and how it reaches `origin`, for the record beside it), and its inputs (the plan
/// there, `plan_rel`, and whose markers count, `me`).
#[derive(Clone, Copy)]
pub(crate) struct Queue<'a> {
    pub(super) client: &'a Client,
    pub(super) pr: u64,
    pub(super) repo: &'a Repo,
    pub(super) auth: &'a RemoteAuth,
    inputs: &'a Inputs,
    pub(super) branch: &'a str,
}

impl<'a> Queue<'a> {
    pub(crate) fn new(
        client: &'a Client,
        pr: u64,
        repo: &'a Repo,
        auth: &'a RemoteAuth,
        branch: &'a str,
        inputs: &'a Inputs,
    ) -> Self {
        Queue {
            client,
            pr,
            repo,
            auth,
            inputs,
            branch,
        }
    }
}

/// Applies every plan change queued on pull request `pr` that is not settled yet, oldest first,
/// each committed in the checkout (the plan at the inputs' `plan_rel`) with its record
/// ([`STEERED_TRAILER`](super::record::STEERED_TRAILER)): the queued markers are dagexec's own
/// comments (the inputs' `me`: a stranger's marker is no command), each naming an `/execute` comment. A command
/// is settled when the branch's history records it, the plan's cache does, or the record beside
/// the branch ([`settled_beside`]: the branch's history may have lost it to a force-push) — a
/// marker that says so is not believed alone (see [`queued`]); nothing settled is applied
/// again. Before a
/// command is applied, the comment it names is read again and must be on this pull request, by
/// a person who has write access *now* (any workflow that comments as GitHub Actions' bot can
/// write a marker; a permission can be revoked after the comment job checked it); otherwise it
/// is committed as refused, its marker saying why. A change that cannot be applied any more
/// (the task moved on) is committed as refused too.
/// The markers of what is committed here are rewritten by [`confirm`] once the caller pushed.
/// `known`: the command the steer job was started for, which counts as authorised as given (its
/// comment is read again all the same: deleted or edited since, it is refused as by any writer).
/// Returns a line per command, for the log, and what the steer job needs to know about its own.
pub(crate) async fn catch_up(
    q: Queue<'_>,
    plan: &mut Plan,
    dag: &crate::pure::graph::Dag,
    known: Option<&Trigger>,
) -> Result<CaughtUp, ActionError> {
    let Queue {
        client, pr, repo, ..
    } = q;
    let (markers, own) = markers(client, pr, q.inputs.me()).await?;
    let mut out = CaughtUp::default();
    let queued = queued(&markers);
    if queued.is_empty() {
        return Ok(out);
    }
    let history = settled_in_history(repo)?;
    let cache = steered(plan);
    // The record beside the branch (a round trip to GitHub) is read only for a command the
    // history and the cache do not record: new, or its commit dropped by a force-push.
    let recorded = |id: &u64| history.contains_key(id) || cache.contains(id);
    let beside = if queued.keys().all(recorded) {
        Default::default()
    } else {
        settled_beside(repo, q.branch, q.auth)?.1
    };
    for (id, marks) in queued {
        out.settled.insert(id);
        // Settled where the branch's history no longer shows how: the plan's cache, or the
        // record beside the branch after a force-push dropped the commit.
        let earlier = cache.contains(&id) || beside.contains(&id);
        if marks.is_empty() && (earlier || history.contains_key(&id)) {
            // Refused before (a re-run of its steer job): it starts no round now either.
            if history.get(&id).is_some_and(|s| !s.applied) {
                out.refused.insert(id);
            }
            continue;
        }
        // Settled by a job that pushed and then died before rewriting the marker.
        if let Some(s) = history.get(&id) {
            out.note(id, s.applied);
            out.lines
                .push(settle_markers(client, pr, id, &marks, s, &own).await?);
            continue;
        }
        if earlier {
            out.applied = true;
            let said = "Settled earlier (the branch records it; the commit that settled it is not in its history any more).";
            rewrite(client, id, &marks, &format!("✅ {said}")).await;
            out.lines.push(format!("Comment {id}: {said}"));
            continue;
        }
        let given = known.filter(|t| t.comment_id == id && t.pr_number == pr);
        let given = given.map(|t| authorised(&t.command));
        let (user, command) = match still_a_command(client, pr, id).await? {
            Ok((user, command)) => (user, as_queued(&markers, id, given.as_deref(), command)),
            // Said on its markers at once (its author is no one to reply to), and committed
            // as refused: the branch records it.
            Err(why) => {
                rewrite(client, id, &marks, &format!("❌ Not applied: {why}")).await;
                (String::new(), Err(why))
            }
        };
        let (line, applied) = commit_command(q, plan, dag, id, &user, command)?;
        out.committed = true;
        out.note(id, applied);
        out.lines.push(line);
    }
    Ok(out)
}

impl CaughtUp {
    /// Comment `id` was found `applied`, or refused.
    fn note(&mut self, id: u64, applied: bool) {
        self.applied |= applied;
        if !applied {
            self.refused.insert(id);
        }
    }
}

/// `command`, which comment `id` holds now, if it is what its queued `markers` (and `given`,
/// the steer job's own) say the comment job authorised (or they say nothing, as an earlier
/// dagexec's did); else why it is not applied. What a marker authorised is a hash anyone can
/// compute, no signature: a workflow that comments as GitHub Actions' bot can write either
/// form, so refusing the older one would keep no such marker out. What stands against a
/// forged marker is [`still_a_command`]: a person with write access now wrote this command on
/// this pull request.
fn as_queued(
    markers: &[Marker],
    id: u64,
    given: Option<&str>,
    command: Option<SlashCommand>,
) -> Result<Option<SlashCommand>, String> {
    let queued = markers.iter().filter(|m| m.id == id);
    let said: Vec<&str> = (queued.filter_map(|m| m.authorised.as_deref()))
        .chain(given)
        .collect();
    let now = command.as_ref().map(authorised);
    if said.is_empty() || said.iter().any(|a| now.as_deref() == Some(*a)) {
        return Ok(command);
    }
    Err(format!(
        "Comment {id} was edited after it was queued, and dagexec applies a command only as it was given; nothing was applied (comment the command again)."
    ))
}

/// Applies `command` (comment `id`, by `user`; `None`: it holds none now; `Err`: why it is
/// not applied) to the plan and commits it with its record, applied or refused: the line for
/// the log, and whether it was applied.
fn commit_command(
    q: Queue<'_>,
    plan: &mut Plan,
    dag: &crate::pure::graph::Dag,
    id: u64,
    user: &str,
    command: Result<Option<SlashCommand>, String>,
) -> Result<(String, bool), ActionError> {
    let by = format!("`/execute` by @{user}");
    let outcome = match command {
        Ok(Some(command)) if changes_plan(&command) => apply(plan, dag, &command, &by),
        Err(why) => Err(why),
        Ok(_) => Err(format!(
            "Comment {id} no longer holds a command that changes the plan; nothing was applied."
        )),
    };
    record(plan, id);
    crate::action::save_plan(plan, &q.repo.root().join(&q.inputs.plan_rel))?;
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
    q.repo
        .commit(&message, std::slice::from_ref(&q.inputs.plan_rel))?;
    let line = format!(
        "{}: comment {id} ({}).",
        if outcome.is_ok() {
            "Applied"
        } else {
            "Not applied"
        },
        message.lines().next().unwrap_or("")
    );
    Ok((line, outcome.is_ok()))
}

/// Comment `id` read again at the moment its queued change is applied: its author and
/// command, or why it must not be applied — it is gone, it is not on pull request `pr`, a bot
/// wrote it, or its author may not (any longer) run commands here.
pub(super) async fn still_a_command(
    client: &Client,
    pr: u64,
    id: u64,
) -> Result<Result<(String, Option<SlashCommand>), String>, ActionError> {
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
    if let Some(access) = comment::too_little_access(client, &user).await? {
        return Ok(Err(format!(
            "@{user} has {access} access now, and only people with write, maintain or admin access can change the plan; comment {id} was not applied."
        )));
    }
    Ok(Ok((user, comment::parse(&c.body))))
}
