//! The record of settled commands: the trailer of the commit that settled each (found again
//! in the branch's history), the plan's cache of them, and what a plan-changing command does
//! to the plan.

use crate::action::ActionError;
use crate::action::steering::comment::SlashCommand;
use crate::edge::git::{OwnRef, Pushed, RemoteAuth, Repo};
use crate::pure::plan::ids::TaskNames;
use crate::pure::plan::{Plan, model::Status};
use std::collections::BTreeSet;

pub use crate::pure::plan::fields::PROCEED as PROCEED_FIELD;

/// Whether `command` changes the plan (and so runs in the `steer` job).
pub fn changes_plan(command: &SlashCommand) -> bool {
    matches!(
        command,
        SlashCommand::Proceed | SlashCommand::Answer { .. } | SlashCommand::Retry { .. }
    )
}

/// The start of the marker of a queued plan change: `<!-- dagexec:steer:<comment id> -->`,
/// written by the comment job once the commenter's permission is checked.
pub(super) const STEER_MARKER_PREFIX: &str = "<!-- dagexec:steer:";

/// The marker of the plan change asked for in comment `id`.
pub fn steer_marker(id: u64) -> String {
    format!("{STEER_MARKER_PREFIX}{id} -->")
}

/// In a queued marker, the command as the comment job authorised it, `<!-- dagexec:command:<the
/// SHA-256 of its JSON, in base64> -->`: GitHub's API does not say who edited a comment (its
/// author, another writer, an App's token), so a command edited since it was queued is not
/// applied in its author's name.
pub(super) const AUTHORISED_PREFIX: &str = "<!-- dagexec:command:";

/// The line of a queued marker that records `command` as authorised (SHA-256 from the TLS
/// stack dagexec links: an answer of any length fits, and no other command has its line).
pub(crate) fn authorised(command: &SlashCommand) -> String {
    use base64::Engine as _;
    let json = serde_json::to_vec(command).expect("commands serialise");
    let suite = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256.tls13();
    let sha256 = suite.expect("a TLS 1.3 suite").common.hash_provider;
    let encoded = base64::engine::general_purpose::STANDARD.encode(sha256.hash(&json));
    format!("{AUTHORISED_PREFIX}{encoded} -->")
}

pub(super) use crate::pure::plan::fields::STEERED as STEERED_FIELD;

/// How many settled comments the plan's cache keeps (the record itself is not capped).
pub(super) const STEERED_KEPT: usize = 500;

/// The last line of the message of the commit that settled `/execute` comment `<id>`:
/// `Dagexec-Steered: <id> applied` (its change is in that commit) or `… refused` (the
/// commenter was told why). Found again in the branch's history, it keeps a command from being
/// applied twice even when the commit's marker was never rewritten (the job died after its
/// push) and the plan was replaced since.
pub const STEERED_TRAILER: &str = "Dagexec-Steered:";

/// The comments whose change the plan records as settled.
pub(super) fn steered(plan: &Plan) -> Vec<u64> {
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
pub(crate) fn record(plan: &mut Plan, id: u64) {
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
pub(crate) fn with_trailer(message: &str, id: u64, applied: bool) -> String {
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
pub(super) struct SettledCommand {
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
pub(super) fn settled_in_history(
    repo: &Repo,
) -> Result<std::collections::BTreeMap<u64, SettledCommand>, ActionError> {
    settled_between(repo, None)
}

/// What [`settled_in_history`] finds in the commits since `since` (all of `HEAD`'s without).
pub(super) fn settled_between(
    repo: &Repo,
    since: Option<&str>,
) -> Result<std::collections::BTreeMap<u64, SettledCommand>, ActionError> {
    let mut out = std::collections::BTreeMap::new();
    for c in repo.commits_mentioning(STEERED_TRAILER, since)? {
        let lines: Vec<&str> = c.message.lines().collect();
        let subject = lines.first().copied().unwrap_or("").to_string();
        if !STEER_SUBJECTS.iter().any(|s| subject.starts_with(s)) {
            continue;
        }
        let Some((id, applied)) = lines.last().copied().and_then(parse_trailer) else {
            continue;
        };
        let why = lines[1..lines.len() - 1].join("\n").trim().to_string();
        out.entry(id).or_insert(SettledCommand {
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

/// The file of the commit on [`settled_ref`]: the settled comment ids, one a line.
const SETTLED_FILE: &str = "dagexec-settled";

/// The ref beside `branch` that keeps every command its history recorded as settled, so a
/// force-push that drops those commits does not make them queued again, and every
/// `/execute abort` whose stop was taken (`steering::aborts_taken`). Only a writer that can
/// push the branch can move it (a marker, which any workflow can write, is no record).
fn settled_ref(branch: &str) -> String {
    format!("refs/dagexec/settled/{branch}")
}

/// The commands the record beside `branch` holds, and its commit on `origin` (`None`: none).
pub(super) fn settled_beside(
    repo: &Repo,
    branch: &str,
    auth: &RemoteAuth,
) -> Result<(Option<String>, BTreeSet<u64>), ActionError> {
    let Some(at) = repo.fetch_ref(&settled_ref(branch), auth)? else {
        return Ok((None, BTreeSet::new()));
    };
    let text = repo.read_at(&at, SETTLED_FILE)?.unwrap_or_default();
    let ids = String::from_utf8_lossy(&text)
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    Ok((Some(at), ids))
}

/// Adds the commands `settled` (the aborts a writer of `branch` took) to the record beside it;
/// called after the branch's push.
pub(super) fn keep_beside(
    repo: &Repo,
    branch: &str,
    auth: &RemoteAuth,
    settled: impl IntoIterator<Item = u64>,
) -> Result<(), ActionError> {
    let Some(own) = beside_with(repo, branch, auth, settled)? else {
        return Ok(());
    };
    match repo.push_ref(&own.sha, &own.name, own.expected.as_deref(), auth)? {
        Pushed::Done => Ok(()),
        Pushed::Rejected(why) => Err(ActionError::Input(format!(
            "{} moved meanwhile ({why})",
            own.name
        ))),
    }
}

/// What a writer pushes with `branch`, in the same atomic push ([`Repo::push_head`]): the
/// record beside it with the commands the commits after `since` (the branch's tip on
/// `origin`) settle, so the branch never records a command the record beside it lacks, not
/// even when the job is killed after its push and a force-push then drops that commit.
/// `None` when those commits settle nothing (no fetch: a job of a run never steered) or
/// the record holds them already.
pub(crate) fn beside_push(
    repo: &Repo,
    branch: &str,
    auth: &RemoteAuth,
    since: &str,
) -> Result<Option<OwnRef>, ActionError> {
    let settled = settled_between(repo, Some(since))?.into_keys();
    beside_with(repo, branch, auth, settled)
}

/// The record beside `branch` with the commands `settled` added, as a commit of `HEAD` to
/// push under a lease; `None` when it holds them already, or there are none (then nothing is
/// fetched).
fn beside_with(
    repo: &Repo,
    branch: &str,
    auth: &RemoteAuth,
    settled: impl IntoIterator<Item = u64>,
) -> Result<Option<OwnRef>, ActionError> {
    let settled: BTreeSet<u64> = settled.into_iter().collect();
    if settled.is_empty() {
        return Ok(None);
    }
    let (at, mut ids) = settled_beside(repo, branch, auth)?;
    let known = ids.len();
    ids.extend(settled);
    if ids.len() == known {
        return Ok(None);
    }
    let text = ids
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    let message = "dagexec: the /execute comments settled on this branch";
    let commit = repo.commit_file_onto(&repo.head()?, SETTLED_FILE, text.as_bytes(), message)?;
    let name = settled_ref(branch);
    Ok(Some(OwnRef::new(&commit, &name, at.as_deref())))
}

/// A plan-changing command in words, for the queued reply.
pub(crate) fn command_text(command: &SlashCommand) -> String {
    match command {
        SlashCommand::Proceed => "`/execute proceed`".into(),
        SlashCommand::Answer { task, .. } => format!("the answer to task {task}"),
        SlashCommand::Retry { task } => format!("`/execute retry {task}`"),
        _ => "the command".into(),
    }
}

/// Applies a plan-changing `command` to `plan`: the commit message (`by` says who asked),
/// or why it cannot be applied (a reply for the pull request, with the fix).
pub fn apply(
    plan: &mut Plan,
    dag: &crate::pure::graph::Dag,
    command: &SlashCommand,
    by: &str,
) -> Result<String, String> {
    match command {
        SlashCommand::Proceed => {
            plan.progress
                .extra
                .insert(PROCEED_FIELD.into(), "proceed".into());
            Ok(format!(
                "dagexec: proceed despite failed pre-flight checks\n\nAsked for with {by}.\n"
            ))
        }
        SlashCommand::Answer { task, text } => {
            let index = crate::pure::plan::ids::find(plan, task)
                .map_err(|e| format!("dagexec could not take that answer: {e}"))?;
            let name = crate::pure::plan::ids::name(plan, index);
            if let Some(t) = plan.tasks.get_mut(index) {
                // A plain BLOCKED (no question recorded) is answered like a review: free text.
                if t.status == Status::Blocked && crate::pure::question::get(t).is_none() {
                    crate::pure::question::set(
                        t,
                        &super::blocked_question(&name, t.result.as_deref().unwrap_or("")),
                    );
                }
            }
            match crate::pure::question::answer(plan, dag, index, &text.replace("\r\n", "\n")) {
                Ok(a) => Ok(format!(
                    "dagexec: answer to task {name}\n\nGiven with {by}; task {name}{} pending again.\n",
                    if a.reopened.is_empty() {
                        String::new()
                    } else {
                        format!(" and tasks {}", TaskNames::of(plan).list(&a.reopened))
                    }
                )),
                Err(e) => Err(format!(
                    "dagexec could not take that answer: {e}\n\n{}",
                    e.hint()
                )),
            }
        }
        SlashCommand::Retry { task } => {
            let index = crate::pure::plan::ids::find(plan, task)
                .map_err(|e| format!("dagexec cannot retry that: {e}"))?;
            let name = crate::pure::plan::ids::name(plan, index);
            match retry(plan, dag, index) {
                Ok(reopened) => Ok(format!(
                    "dagexec: retry task {name}\n\nAsked for with {by}; pending again: {}.\n",
                    TaskNames::of(plan).list(&reopened)
                )),
                Err(why) => Err(format!("dagexec cannot retry that: {why}")),
            }
        }
        other => Err(format!("{other:?} does not change the plan")),
    }
}

/// `/execute retry N`: a failed, blocked or skipped task gets a fresh set of attempts, and
/// what the cascade skipped because of it is pending again.
pub fn retry(
    plan: &mut Plan,
    dag: &crate::pure::graph::Dag,
    index: usize,
) -> Result<Vec<usize>, String> {
    let (count, name) = (plan.tasks.len(), TaskNames::of(plan).get(index));
    let Some(t) = plan.tasks.get_mut(index) else {
        return Err(format!("task {index}: no such task (the plan has {count})"));
    };
    if !matches!(t.status, Status::Failed | Status::Blocked | Status::Skipped) {
        return Err(format!(
            "task {name} is {}; only a failed, blocked or skipped task can be retried",
            t.status
        ));
    }
    t.status = Status::Pending;
    t.attempts = Some(0);
    t.result = None;
    t.extra
        .shift_remove(crate::pure::plan::fields::RETRY_PROMPT);
    t.extra.shift_remove(crate::pure::question::QUESTION_FIELD);
    let mut all = vec![index];
    all.extend(crate::pure::update::reopen_skipped_dependents(
        plan, dag, index,
    ));
    all.sort_unstable();
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

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

    /// Issue 32 §3: on the pull request a task list's tasks go by the list's own IDs, as at
    /// the terminal — `/execute retry 13.3` retries task 13.3, never plan index 13 — and the
    /// question comment tells the reply with that ID.
    #[test]
    fn pull_request_commands_take_the_task_lists_own_ids() {
        let mut plan: Plan = serde_json::from_value(serde_json::json!({
            "schemaVersion": 2, "goal": "g", "progress": {"completedTasks": []},
            "tasks": [
                {"subject": "a", "status": "completed", "blockedBy": []},
                {"subject": "b", "status": "failed", "result": "no", "attempts": 3, "blockedBy": [0]},
                {"subject": "c", "status": "skipped", "blockedBy": [1]}
            ]
        }))
        .unwrap();
        plan.extra.insert(
            crate::pure::plan::fields::SOURCE.into(),
            serde_json::json!({"format": "taskmaster", "tasks": [
                {"id": "13.1", "text": "a"}, {"id": "13.3", "text": "b"}, {"id": "14", "text": "c"}
            ]}),
        );
        let dag = crate::pure::validate::check(&plan, None).unwrap();
        let by = "`/execute` by @o";
        let wrong = apply(
            &mut plan,
            &dag,
            &SlashCommand::Retry { task: "1".into() },
            by,
        );
        assert_eq!(
            wrong.unwrap_err(),
            "dagexec cannot retry that: no task \"1\" in the task list: its task IDs are 13.1, 13.3, 14"
        );
        assert_eq!(plan.tasks[1].status, Status::Failed);
        let done = apply(
            &mut plan,
            &dag,
            &SlashCommand::Retry {
                task: "13.3".into(),
            },
            by,
        )
        .unwrap();
        assert_eq!(
            done,
            "dagexec: retry task 13.3\n\nAsked for with `/execute` by @o; pending again: 13.3, 14.\n"
        );
        assert_eq!(plan.tasks[1].status, Status::Pending);
        assert_eq!(plan.tasks[2].status, Status::Pending);
        let q = crate::pure::question::Question {
            kind: crate::pure::question::Kind::Action,
            text: "Create the bucket".into(),
            options: Vec::new(),
            blocked_at: None,
            reply: None,
        };
        let comment = super::super::question_comment(&plan, 1, &q);
        assert!(comment.contains("/execute answer 13.3 done"), "{comment}");
        assert!(comment.contains("`/execute retry 13.3`"), "{comment}");
    }

    /// A task that cannot be retried is named as the user named it: in a task list whose IDs
    /// start at 1, plan index 0 is task 1, and "task 0 is completed" named no task at all.
    #[test]
    fn a_refused_retry_names_the_task_by_its_own_id() {
        let mut plan: Plan = serde_json::from_value(serde_json::json!({
            "schemaVersion": 2, "goal": "g", "progress": {"completedTasks": []},
            "tasks": [
                {"subject": "a", "status": "completed", "blockedBy": []},
                {"subject": "b", "status": "pending", "blockedBy": [0]}
            ]
        }))
        .unwrap();
        plan.extra.insert(
            crate::pure::plan::fields::SOURCE.into(),
            serde_json::json!({"format": "taskmaster", "tasks": [
                {"id": "1", "text": "a"}, {"id": "2", "text": "b"}
            ]}),
        );
        let dag = crate::pure::validate::check(&plan, None).unwrap();
        let retry = SlashCommand::Retry { task: "1".into() };
        assert_eq!(
            apply(&mut plan, &dag, &retry, "by").unwrap_err(),
            "dagexec cannot retry that: task 1 is completed; only a failed, blocked or skipped task can be retried"
        );
    }

    /// A plain BLOCKED answered on the pull request keeps the question it was asked as, in
    /// the task's own name (its question comment is headed by that name).
    #[test]
    fn a_plain_blocked_question_names_the_task_by_its_own_id() {
        let mut plan: Plan = serde_json::from_value(serde_json::json!({
            "schemaVersion": 2, "goal": "g", "progress": {"completedTasks": []},
            "tasks": [{"subject": "a", "status": "blocked", "result": "which db?", "blockedBy": []}]
        }))
        .unwrap();
        plan.extra.insert(
            crate::pure::plan::fields::SOURCE.into(),
            serde_json::json!({"format": "taskmaster", "tasks": [{"id": "7", "text": "a"}]}),
        );
        let dag = crate::pure::validate::check(&plan, None).unwrap();
        let answer = SlashCommand::Answer {
            task: "7".into(),
            text: "sqlite".into(),
        };
        apply(&mut plan, &dag, &answer, "by").unwrap();
        let q = crate::pure::question::get(&plan.tasks[0]).unwrap();
        assert_eq!(q.text, "Task 7 is blocked: which db?");
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
