//! What the jobs that act on `/execute` share with every writer of the execution branch
//! (finalize, the conductor, the `steer` job) and with publishing (the pull request's
//! comments): the commands and who may give them ([`comment`]); the queue of plan changes
//! kept as dagexec's own comments, applied by whichever job writes the branch next
//! ([`catch_up`]) and confirmed after the push ([`confirm`]); their record in the branch's
//! history ([`STEERED_TRAILER`]); the questions a task asks on the pull request; and
//! `/execute abort`: its own record and its marker in the status comment.
//!
//! Every writer of the branch applies the changes queued on the pull request ([`catch_up`]),
//! each once: the record is the commit that settled it (its last line, [`STEERED_TRAILER`]);
//! its marker says so once rewritten after the push ([`confirm`]), but is not believed alone;
//! the plan's list is a cache, and a ref beside the branch keeps the record when a force-push
//! drops the commit.

pub mod comment;
pub mod issue;
mod queue;
mod record;

use crate::action::ActionError;
use crate::action::runtime::Runner;
use crate::edge::github::{Client, comments::IssueComment};
use crate::pure::plan::{Plan, model::Status};
use std::collections::BTreeSet;

use comment::SlashCommand;
use queue::still_a_command;
pub(crate) use queue::{Queue, catch_up, confirm, settled_since};
pub use record::{PROCEED_FIELD, STEERED_TRAILER, apply, changes_plan, retry, steer_marker};
pub(crate) use record::{authorised, beside_push, command_text, record, with_trailer};

/// What an `/execute` command did (on a pull request, `jobs::steer`; on a parent issue,
/// [`issue`]), for the log and the job's outputs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Steered {
    pub message: String,
    /// A round was dispatched on this branch.
    pub dispatched: Option<String>,
    /// The change to the plan is left to the `steer` job, in this branch's group.
    pub to_apply: Option<String>,
}

/// A [`Steered`] that only says `message`.
pub(crate) fn said(message: impl Into<String>) -> Steered {
    Steered {
        message: message.into(),
        ..Default::default()
    }
}

/// In the status comment: the user asked to stop after the current round.
pub const ABORT_MARKER: &str = "<!-- dagexec:abort-requested -->";
/// After [`ABORT_MARKER`]: the `/execute abort` comment that asked, `<!-- dagexec:abort-by:<id> -->`.
pub const ABORT_BY_PREFIX: &str = "<!-- dagexec:abort-by:";
/// The start of an abort's own record, `<!-- dagexec:abort:<id> -->`: dagexec's comment that
/// `/execute abort` comment `<id>` asked to stop, written by the comment job before it marks the
/// status comment. No status rewrite touches it, so an abort given while a writer rewrites the
/// status comment is not lost with the marker.
const ABORT_RECORD_PREFIX: &str = "<!-- dagexec:abort:";
/// In an abort's record: the stop it asked for was taken (a writer stopped for it, or a later
/// command started the run again); what says so is the branch's record ([`aborts_taken`]).
const ABORT_TAKEN: &str = "<!-- dagexec:abort-taken -->";

/// The marker naming `/execute abort` comment `id`.
pub fn abort_by_marker(id: u64) -> String {
    format!("{ABORT_BY_PREFIX}{id} -->")
}

/// The marker of the record of `/execute abort` comment `id`.
pub(crate) fn abort_record(id: u64) -> String {
    format!("{ABORT_RECORD_PREFIX}{id} -->")
}

/// The abort records among dagexec's own comments: the comment and the `/execute abort` it
/// names. Whether that stop was taken is not theirs to say ([`aborts_taken`]).
fn abort_records(marked: &comment::Trusted) -> impl Iterator<Item = (&IssueComment, u64)> {
    marked.own.iter().filter_map(|c| {
        let rest = c.body.trim_start().strip_prefix(ABORT_RECORD_PREFIX)?;
        let id = rest.split(" -->").next()?.trim().parse().ok()?;
        Some((c, id))
    })
}

/// The `/execute abort` comments whose stop was taken (a writer stopped for it, or a later
/// command started the run again): those the record beside `q`'s branch holds, which only a
/// writer that can push the branch moves. An abort's record that says so is not believed
/// alone: any workflow that comments with `GITHUB_TOKEN` can write one.
pub(crate) fn aborts_taken(q: Queue<'_>) -> Result<BTreeSet<u64>, ActionError> {
    Ok(record::settled_beside(q.repo, q.branch, q.auth)?.1)
}

/// [`aborts_taken`], read only when `marked` names an abort at all: a round's writer on a pull
/// request nobody asked to stop fetches no record (a round trip to GitHub per job).
fn aborts_taken_among(
    q: Queue<'_>,
    marked: &comment::Trusted,
) -> Result<BTreeSet<u64>, ActionError> {
    let named = abort_records(marked).next().is_some()
        || marked.own.iter().any(|c| c.body.contains(ABORT_BY_PREFIX));
    if named {
        aborts_taken(q)
    } else {
        Ok(BTreeSet::new())
    }
}

/// What an abort's record says once a writer stopped for it: the workflow run and attempt of
/// that writer's job.
fn heeded_by(run: &str, attempt: u32) -> String {
    format!("heeded by run {run} (attempt {attempt})")
}

/// Whether a stop after the current round was asked for on `q`'s pull request, for the job of
/// `by`: one of dagexec's own status comments (`marked`) holds [`ABORT_MARKER`], or an abort's
/// own record names an `/execute abort` the branch does not record as taken ([`aborts_taken`]),
/// on this pull request, by a person with write access now. Any workflow that comments with
/// `GITHUB_TOKEN` writes as dagexec's comment job does, so the marker alone stops nothing, and
/// a record alone takes no stop. A stop found is taken: the branch's record and the records in
/// `marked` say so from now on, heeded by `by`'s run and attempt (the caller stops), so the
/// next run, which `/execute` starts, does not stop for it again — but a re-run of this job,
/// whose earlier attempt stopped for it, does.
pub(crate) async fn abort_confirmed(
    q: Queue<'_>,
    marked: &comment::Trusted,
    by: &Runner,
) -> Result<bool, ActionError> {
    let taken = aborts_taken_among(q, marked)?;
    let attempt = crate::action::writer::run_attempt(by);
    let earlier =
        |c: &IssueComment| (1..attempt).any(|a| c.body.contains(&heeded_by(&by.run_id, a)));
    if abort_records(marked).any(|r| taken.contains(&r.1) && earlier(r.0)) {
        println!(
            "An earlier attempt of this job stopped the run at `/execute abort`; so does this one."
        );
        return Ok(true);
    }
    let named: BTreeSet<u64> = marked
        .own
        .iter()
        .filter(|c| c.starts_with(comment::STATUS_MARKER) && c.body.contains(ABORT_MARKER))
        .flat_map(|c| c.body.split(ABORT_BY_PREFIX).skip(1))
        .filter_map(|rest| rest.split(" -->").next()?.trim().parse().ok())
        .chain(abort_records(marked).map(|r| r.1))
        .collect();
    let asked: Vec<u64> = named.difference(&taken).copied().collect();
    if asked.is_empty() && (!named.is_empty() || !marked.abort_requested(ABORT_MARKER)) {
        return Ok(false);
    }
    for &id in &asked {
        match still_a_command(q.client, q.pr, id).await? {
            Ok((_, Some(SlashCommand::Abort))) => {
                let how = format!(
                    "{}: the run stopped for it; comment `/execute` to resume",
                    heeded_by(&by.run_id, attempt)
                );
                // The ones before it are no writer's abort: read once.
                let upto = asked.iter().copied().filter(|a| *a <= id).collect();
                take(q, marked, &upto, &how).await;
                return Ok(true);
            }
            Ok(_) => tracing::warn!(comment = id, "the abort marker names no `/execute abort`"),
            Err(why) => tracing::warn!(comment = id, "abort not believed: {why}"),
        }
    }
    println!(
        "warning: a status comment asks to stop, but names no `/execute abort` a person with write access gave on this pull request; not stopping"
    );
    Ok(false)
}

/// An `/execute abort` a writer gave on pull request `pr` after comment `after` (its record in
/// `marked`, taken or not): the run it stopped is not started again by an earlier command.
pub(crate) async fn abort_after(
    client: &Client,
    pr: u64,
    marked: &comment::Trusted,
    after: u64,
) -> Result<Option<u64>, ActionError> {
    for (_, id) in abort_records(marked).filter(|r| r.1 > after) {
        if let Ok((_, Some(SlashCommand::Abort))) = still_a_command(client, pr, id).await? {
            return Ok(Some(id));
        }
    }
    Ok(None)
}

/// The `/execute abort` the run has not stopped for yet on `q`'s pull request (its record in
/// `marked`, not taken — [`aborts_taken`] — naming a writer's `/execute abort` on it) and
/// who gave it.
pub(crate) async fn abort_pending(
    q: Queue<'_>,
    marked: &comment::Trusted,
) -> Result<Option<(u64, String)>, ActionError> {
    let taken = aborts_taken_among(q, marked)?;
    for (_, id) in abort_records(marked).filter(|r| !taken.contains(&r.1)) {
        if let Ok((user, Some(SlashCommand::Abort))) = still_a_command(q.client, q.pr, id).await? {
            return Ok(Some((id, user)));
        }
    }
    Ok(None)
}

/// Takes the aborts in `marked` that name an `/execute abort` comment older than `before` and
/// the branch does not record as taken yet (`how`: what took them); whether there was any.
pub(crate) async fn take_aborts(
    q: Queue<'_>,
    marked: &comment::Trusted,
    before: u64,
    how: &str,
) -> Result<bool, ActionError> {
    let taken = aborts_taken_among(q, marked)?;
    let ids: BTreeSet<u64> = abort_records(marked)
        .map(|r| r.1)
        .filter(|id| *id < before && !taken.contains(id))
        .collect();
    if !ids.is_empty() {
        take(q, marked, &ids, how).await;
    }
    Ok(!ids.is_empty())
}

/// Records the aborts `ids` as taken beside `q`'s branch (after its push: the record is a
/// commit of its tip), then rewrites their records in `marked` to say so (`how`: what took
/// them). What cannot be written stays as it is: a later writer stops for it once more, which
/// loses nothing.
async fn take(q: Queue<'_>, marked: &comment::Trusted, ids: &BTreeSet<u64>, how: &str) {
    if let Err(e) = record::keep_beside(q.repo, q.branch, q.auth, ids.iter().copied()) {
        tracing::warn!("could not record an abort as taken beside the branch: {e}");
    }
    for (comment, id) in abort_records(marked).filter(|r| ids.contains(&r.1)) {
        let comment = comment.id;
        let body = format!(
            "{}\n{ABORT_TAKEN}\n`/execute abort` (comment {id}): {how}.\n",
            abort_record(id)
        );
        if let Err(e) = q.client.update_comment(comment, &body).await {
            tracing::warn!(comment, "could not mark an abort as taken: {e}");
        }
    }
}

/// The question a plain BLOCKED result of the task named `name` asks.
pub fn blocked_question(name: &str, reason: &str) -> crate::pure::question::Question {
    crate::pure::question::Question {
        kind: crate::pure::question::Kind::Review,
        text: format!("Task {name} is blocked: {reason}"),
        options: Vec::new(),
        blocked_at: None,
        reply: None,
    }
}

/// What the status comment says the run waits on.
pub fn waiting_on(plan: &Plan) -> String {
    let blocked = plan.tasks.iter().enumerate();
    let blocked = blocked.filter(|(_, t)| t.status == Status::Blocked);
    let open = crate::pure::question::open(plan).into_iter();
    let ids: std::collections::BTreeSet<usize> = open
        .map(|(i, _)| i)
        .chain(blocked.map(|(i, _)| i))
        .collect();
    if plan.tasks.iter().all(|t| t.status == Status::Completed) {
        "nothing: every task completed".into()
    } else if !ids.is_empty() {
        let ids: Vec<usize> = ids.into_iter().collect();
        format!(
            "you: answer the question(s) of task(s) {} (`/execute answer <task> …`)",
            crate::pure::plan::ids::TaskNames::of(plan).list(&ids)
        )
    } else if plan.count(Status::Pending) > 0 {
        "the next round".into()
    } else {
        "you: nothing is pending; `/execute retry <task>` runs a failed task again".into()
    }
}

/// The comment a question gets on the pull request, found again by its marker.
pub fn question_marker(key: &str) -> String {
    format!("<!-- dagexec:question:{key} -->")
}

/// The text of the question comment of the task at plan index `index` of `plan`: the
/// question, its options, the exact replies. A worker's words are made inert
/// ([`crate::action::report::inert`]); only the question the issues source asks itself (its
/// task waits for an issue outside the plan) links the issues it names.
pub fn question_comment(plan: &Plan, index: usize, q: &crate::pure::question::Question) -> String {
    use crate::sources::issues::convert::{OUTSIDE, TASK_FIELD};
    let (name, task) = (
        crate::pure::plan::ids::name(plan, index),
        &plan.tasks[index],
    );
    let mut asked = format!("{}\n", q.text.trim());
    if !q.options.is_empty() {
        asked.push_str("\nOptions:\n");
        for (n, c) in q.options.iter().enumerate() {
            asked.push_str(&format!("{}. `{}` — {}\n", n + 1, c.key, c.description));
        }
    }
    if !(task.extra.contains_key(TASK_FIELD) && q.blocked_at.as_deref() == Some(OUTSIDE)) {
        asked = crate::action::report::inert(&asked);
    }
    let mut s = format!(
        "{}\n### dagexec: task {name} ({}) needs you\n\n{asked}",
        question_marker(&index.to_string()),
        task.subject.lines().next().unwrap_or(""),
    );
    let example = match q.kind {
        crate::pure::question::Kind::Decision => q
            .options
            .first()
            .map_or_else(|| "<option>".into(), |c| c.key.clone()),
        crate::pure::question::Kind::Action => "done".into(),
        crate::pure::question::Kind::Review => "<your answer>".into(),
    };
    s.push_str(&format!(
        "\nReply with a comment:\n\n```\n/execute answer {name} {example}\n```\n\nor `/execute retry {name}` to run it again as it is.\n"
    ));
    s
}

/// The pre-flight question: the failed checks (their output in a block no fence in it ends)
/// and the reply that proceeds anyway.
pub fn preflight_comment(message: &str) -> String {
    let longest = message.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!(
        "{}\n### dagexec: pre-flight checks failed\n\n{fence}\n{}\n{fence}\n\nFix what they check and comment `/execute`, or reply with a comment:\n\n```\n/execute proceed\n```\n\nto run anyway.\n",
        question_marker("preflight"),
        message.trim()
    )
}

#[cfg(test)]
mod tests {
    use crate::pure::question::{Choice, Kind, Question};

    /// A queued answer's marker records what was authorised in a line of its own size, so
    /// the longest answer GitHub takes still fits in the marker comment, and is not refused
    /// as edited.
    #[test]
    fn the_authorised_record_of_any_answer_is_short() {
        let answer = |text: &str| super::comment::SlashCommand::Answer {
            task: "1".into(),
            text: text.into(),
        };
        let long = super::authorised(&answer(&"x".repeat(65_000)));
        assert!(long.len() < 100, "{}", long.len());
        assert_ne!(long, super::authorised(&answer(&"x".repeat(64_999))));
    }

    /// Failed checks' output (of the branch's code, which workers wrote) stays inside its
    /// block: a fence in it does not end the block and let a mention out.
    #[test]
    fn the_preflight_output_cannot_end_its_code_block() {
        let c = super::preflight_comment("bad:\n```\n@octocat\n``````");
        assert!(
            c.contains("\n```````\nbad:\n```\n@octocat\n``````\n```````\n"),
            "{c}"
        );
    }

    /// A worker's question mentions nobody and links no issue on the pull request, but what
    /// it writes as code stays exactly as written.
    #[test]
    fn a_workers_question_is_inert_outside_its_code() {
        let q = Question {
            options: vec![Choice {
                key: "pg".into(),
                description: "ask @dba-team, see #12".into(),
            }],
            ..Question::new(
                Kind::Decision,
                "Fixes #7? @octocat said `git log @{u} #3` and\n\n```sh\necho @here #9 &amp;\n```\nthen `x`@y".into(),
            )
        };
        let mut plan: crate::pure::plan::Plan = serde_json::from_value(serde_json::json!({
            "schemaVersion": 2, "goal": "g", "progress": {"completedTasks": []},
            "tasks": [{"subject": "Subject", "status": "blocked", "blockedBy": []}]
        }))
        .unwrap();
        let c = super::question_comment(&plan, 0, &q);
        for inert in [
            "Fixes #&#8203;7? @&#8203;octocat said `git log @{u} #3` and",
            "```sh\necho @here #9 &amp;\n```\nthen `x`@&#8203;y",
            "1. `pg` — ask @&#8203;dba-team, see #&#8203;12",
        ] {
            assert!(c.contains(inert), "{inert}\n{c}");
        }
        // The issues source's own question about an issue outside the plan links it.
        let issue = crate::sources::issues::convert::TASK_FIELD;
        plan.tasks[0]
            .extra
            .insert(issue.into(), serde_json::json!({"number": 6}));
        let waits = Question {
            blocked_at: Some(crate::sources::issues::convert::OUTSIDE.into()),
            ..Question::new(Kind::Action, "#6 waits for #90".into())
        };
        assert!(super::question_comment(&plan, 0, &waits).contains("\n#6 waits for #90\n"));
        // Not a worker's that claims to be about one.
        let claims = Question {
            text: "@octocat".into(),
            ..waits.clone()
        };
        plan.tasks[0].extra.clear();
        assert!(super::question_comment(&plan, 0, &claims).contains("@&#8203;octocat"));
    }
}
