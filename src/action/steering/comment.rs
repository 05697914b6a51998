//! `/execute` comments on a pull request (`issue_comment` events): which comments count
//! ([`classify`], [`parse`]; on a parent issue too, through the same [`created`]), who may
//! run them ([`may_run`]), the replies ([`help_text`], [`denied_reply`], [`unknown_reply`];
//! each posted once, found again by its [`reply_marker`])
//! and the one status comment ([`status_body`], found again by [`STATUS_MARKER`], written by
//! [`upsert_status`]). Pure except [`handle`], the edge that checks the commenter's
//! permission, acknowledges with 👀 and decides, and the reading and writing of dagexec's
//! marked comments; what a command then does to the plan and the dispatch is the caller's.
//!
//! Comment text is data: it is parsed here and never reaches a shell.
//!
//! State kept in comments (the status comment, `/execute abort`'s marker in it, the question
//! comments) is believed only from a comment dagexec wrote itself ([`Identity`]) or from
//! someone who passes the same permission check as a command ([`trusted_marked`]): anyone can
//! write a comment that starts with a marker.

use std::fmt::Write as _;

use serde_json::Value;

use crate::action::report::{Links, progress_table};
use crate::edge::github::comments::{Author, IssueComment};
use crate::edge::github::{ApiError, Client, RepoName};
use crate::pure::plan::model::{Plan, Status};

/// The first line of the status comment, so it is found again and updated in place.
pub const STATUS_MARKER: &str = "<!-- dagexec:status -->";

const PREFIX: &str = "/execute";

/// What an `/execute` comment asks for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum SlashCommand {
    /// `/execute`: start, or resume where the branch stands.
    Start,
    /// `/execute status`: refresh the status comment.
    Status,
    /// `/execute proceed`: "proceed anyway" to a pre-flight question.
    Proceed,
    /// `/execute answer <task> <text>`: `text` (the rest of the comment) answers task
    /// `task`'s question; the task is queued again with the answer in its prompt. `task` is
    /// as written: a task list's own ID (`13.3`, `T004`), a plan.json's task number
    /// ([`crate::pure::plan::ids::find`] reads it against the plan when it is applied).
    Answer { task: String, text: String },
    /// `/execute retry <task>`: queue a failed, blocked or skipped task again, with the tasks
    /// it cascaded to.
    Retry { task: String },
    /// `/execute abort`: stop after the current round, leaving the plan resumable.
    Abort,
    /// Anything else; why it is not a command (empty when the commands were asked for).
    Unknown(String),
}

/// A comment that asks dagexec to do something.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trigger {
    pub repo: RepoName,
    pub pr_number: u64,
    pub comment_id: u64,
    /// The comment's author (login).
    pub user: String,
    pub command: SlashCommand,
}

/// Why an event is not an `/execute` command (for the log; nothing else happens).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Ignored {
    #[error("the event is `{0}`, not `issue_comment`")]
    NotACommentEvent(String),
    #[error("the comment was {0}; only newly created comments run commands")]
    NotCreated(String),
    #[error("#{0} is an issue, not a pull request")]
    NotAPullRequest(u64),
    #[error("the comment's author {0} is a bot")]
    Bot(String),
    #[error("the comment does not start with {PREFIX}")]
    NotACommand,
    #[error("the event payload lacks `{0}`")]
    Malformed(&'static str),
}

/// What [`handle`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handled {
    /// The commenter may not run commands; the reply saying who may was posted.
    Denied,
    /// A reply was all there was to do (the command list, or why nothing can run here).
    Replied,
    /// Acknowledged with 👀: run `command` on the pull request's head branch.
    Run {
        head_branch: String,
        command: SlashCommand,
    },
}

/// The command in `body`, if its first line starts with the word `/execute` (leading
/// whitespace aside; `/executed` is not it). Case-sensitive. A later line that starts with
/// `/execute` makes it none ([`SlashCommand::Unknown`]) but in an answer.
pub fn parse(body: &str) -> Option<SlashCommand> {
    let (name, rest) = word(after_prefix(body)?);
    // One command a comment: an answer's text is the rest of it, whatever it holds.
    if name != "answer" && rest.lines().skip(1).any(|l| after_prefix(l).is_some()) {
        return Some(SlashCommand::Unknown(format!(
            "a comment runs one command, and this one has `{PREFIX}` on more than one line; comment each command on its own"
        )));
    }
    let no_args = |cmd: SlashCommand| {
        if first_line(rest).is_empty() {
            cmd
        } else {
            SlashCommand::Unknown(format!("`{PREFIX} {name}` takes no arguments"))
        }
    };
    Some(match name {
        "" => SlashCommand::Start,
        "status" => no_args(SlashCommand::Status),
        "proceed" => no_args(SlashCommand::Proceed),
        "abort" => no_args(SlashCommand::Abort),
        "retry" => {
            let (task, rest) = word(rest);
            match task_name(task, "retry") {
                Err(why) => SlashCommand::Unknown(why),
                Ok(_) if !first_line(rest).is_empty() => SlashCommand::Unknown(format!(
                    "`{PREFIX} retry` takes one task; to retry several tasks, comment once for each"
                )),
                Ok(task) => SlashCommand::Retry { task },
            }
        }
        "answer" => {
            let (task, text) = word(rest);
            match task_name(task, "answer") {
                Err(why) => SlashCommand::Unknown(why),
                Ok(task) => {
                    let text = text.trim().replace("\r\n", "\n");
                    if text.is_empty() {
                        SlashCommand::Unknown(format!(
                            "`{PREFIX} answer {task}` needs the answer after the task (it may span lines)"
                        ))
                    } else {
                        SlashCommand::Answer { task, text }
                    }
                }
            }
        }
        "help" | "-h" | "--help" => SlashCommand::Unknown(String::new()),
        other => SlashCommand::Unknown(format!("unknown command {}", quote(other))),
    })
}

/// What follows the word `/execute` that `body` starts with (leading whitespace aside), if it
/// does (`/executed` does not).
pub(super) fn after_prefix(body: &str) -> Option<&str> {
    let rest = body.trim_start().strip_prefix(PREFIX)?;
    rest.chars()
        .next()
        .is_none_or(char::is_whitespace)
        .then_some(rest)
}

/// The next word on the current line (any whitespace but a line's end skipped) and what
/// follows it.
fn word(s: &str) -> (&str, &str) {
    let s = s.trim_start_matches(|c: char| c.is_whitespace() && c != '\n');
    s.split_at(s.find(char::is_whitespace).unwrap_or(s.len()))
}

fn first_line(s: &str) -> &str {
    s.split('\n').next().unwrap_or("").trim()
}

fn task_name(word: &str, command: &str) -> Result<String, String> {
    let example = format!("e.g. `{PREFIX} {command} 3`");
    if word.is_empty() {
        return Err(format!(
            "`{PREFIX} {command}` needs a task (the first column of the status table), {example}"
        ));
    }
    // A task number or a task list's own ID (`13.3`, `T004`, `2.1`): short, no spaces.
    let fits = word.chars().count() <= 40
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if !fits || word.starts_with('-') {
        return Err(format!(
            "{} is not a task; use the first column of the status table, {example}",
            quote(word)
        ));
    }
    Ok(word.to_string())
}

/// A piece of someone's comment, safe to echo: short, in backticks, no backticks or controls.
fn quote(s: &str) -> String {
    let mut q: String = s
        .chars()
        .filter(|c| *c != '`' && !c.is_control())
        .take(40)
        .collect();
    if s.chars().count() > 40 {
        q.push('…');
    }
    format!("`{q}`")
}

/// The `/execute` command in an event, or why there is none. Reads the payload GitHub wrote
/// to `GITHUB_EVENT_PATH` for `event_name` (`GITHUB_EVENT_NAME`).
pub fn classify(event_name: &str, payload: &Value) -> Result<Trigger, Ignored> {
    let read = |body: &str| parse(body).map(|command| (command, ()));
    created(event_name, payload, true, read).map(|(t, ())| t)
}

/// A comment newly created by a person, on a pull request (`on_pr`) or on an issue that is
/// none, whose body `read` takes for a command (and what else it says); or why it is not one
/// (on the other kind of issue: [`Ignored::NotAPullRequest`] either way).
pub(super) fn created<T>(
    event_name: &str,
    payload: &Value,
    on_pr: bool,
    read: impl FnOnce(&str) -> Option<(SlashCommand, T)>,
) -> Result<(Trigger, T), Ignored> {
    if event_name != "issue_comment" {
        return Err(Ignored::NotACommentEvent(event_name.to_string()));
    }
    let action = payload["action"]
        .as_str()
        .ok_or(Ignored::Malformed("action"))?;
    if action != "created" {
        return Err(Ignored::NotCreated(action.to_string()));
    }
    let issue = &payload["issue"];
    let pr_number = issue["number"]
        .as_u64()
        .ok_or(Ignored::Malformed("issue.number"))?;
    if issue.get("pull_request").is_none_or(Value::is_null) == on_pr {
        return Err(Ignored::NotAPullRequest(pr_number));
    }
    let comment = &payload["comment"];
    let user = comment["user"]["login"]
        .as_str()
        .ok_or(Ignored::Malformed("comment.user.login"))?;
    if comment["user"]["type"] == "Bot" || user.ends_with("[bot]") {
        return Err(Ignored::Bot(user.to_string()));
    }
    let (command, more) =
        read(comment["body"].as_str().unwrap_or("")).ok_or(Ignored::NotACommand)?;
    let trigger = Trigger {
        repo: payload["repository"]["full_name"]
            .as_str()
            .and_then(RepoName::parse)
            .ok_or(Ignored::Malformed("repository.full_name"))?,
        pr_number,
        comment_id: comment["id"]
            .as_u64()
            .ok_or(Ignored::Malformed("comment.id"))?,
        user: user.to_string(),
        command,
    };
    Ok((trigger, more))
}

/// Whether a collaborator may run commands: write, maintain or admin. `permission` is
/// GitHub's `admin`/`write`/`read`/`none`; `role_name` tells `maintain` apart.
pub fn may_run(permission: &str, role_name: Option<&str>) -> bool {
    matches!(permission, "admin" | "write")
        || matches!(role_name, Some("admin" | "maintain" | "write"))
}

/// The access `user` has on the repository now when it is too little to run commands
/// (`read`, `none`, …); `None` when they may run them. GitHub answers 404 for someone who is no
/// collaborator of a private repository: `none`.
pub(super) async fn too_little_access(
    client: &Client,
    user: &str,
) -> Result<Option<String>, ApiError> {
    let (permission, role) = match client.permission(user).await {
        Err(e) if e.status() == Some(404) => ("none".to_string(), None),
        other => other?,
    };
    Ok((!may_run(&permission, role.as_deref())).then(|| role.unwrap_or(permission)))
}

/// The login of GitHub Actions' bot: who writes what a job does with `GITHUB_TOKEN`. No person
/// or other App can have it (logins cannot hold brackets; an App's bot is `<slug>[bot]`).
pub const ACTIONS_BOT: &str = "github-actions[bot]";

/// Who dagexec is on GitHub in this job: GitHub Actions' bot always (the comment job and a
/// finalize without an App write as it), and the GitHub App when this job authenticates as one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Identity {
    pub app_id: Option<u64>,
}

impl Identity {
    /// Whether `author` is dagexec itself.
    pub fn wrote(&self, author: &Author) -> bool {
        author.bot
            && (author.login == ACTIONS_BOT
                || (author.app_id.is_some() && author.app_id == self.app_id))
    }
}

/// Every dagexec comment marker starts with this.
const MARKER_PREFIX: &str = "<!-- dagexec:";

/// The start of dagexec's reply to an `/execute` comment, `<!-- dagexec:reply:<id> -->`: found
/// again, so a job run again (GitHub's "Re-run jobs": the same event) does not reply twice.
const REPLY_PREFIX: &str = "<!-- dagexec:reply:";

/// The marker of dagexec's reply to `/execute` comment `id`.
pub fn reply_marker(id: u64) -> String {
    format!("{REPLY_PREFIX}{id} -->")
}

/// Who replies to an `/execute` comment, and whether its job may have replied before.
#[derive(Debug, Clone, Copy, Default)]
pub struct Replier {
    pub me: Identity,
    /// This job's attempt of its workflow run is not its first (`GITHUB_RUN_ATTEMPT`): an
    /// earlier one may have posted the reply. A first attempt cannot have, and lists nothing.
    pub rerun: bool,
}

impl Replier {
    /// Replies `text` to `/execute` comment `id` on `issue`, once ([`reply`]): on a re-run,
    /// dagexec's comments are read first to find the reply an earlier attempt posted.
    pub async fn reply(
        &self,
        client: &Client,
        issue: u64,
        id: u64,
        text: &str,
    ) -> Result<(), ApiError> {
        let own = if self.rerun {
            trusted_marked(client, issue, self.me).await?.own
        } else {
            Vec::new()
        };
        reply(client, issue, id, text, &own).await
    }
}

/// Replies `text` to `/execute` comment `id` on `issue`, starting with its [`reply_marker`]:
/// the reply among `own` (dagexec's comments, as the caller read them) is kept in place of a
/// second one.
pub async fn reply(
    client: &Client,
    issue: u64,
    id: u64,
    text: &str,
    own: &[IssueComment],
) -> Result<(), ApiError> {
    let marker = reply_marker(id);
    client
        .upsert_marked_comment(issue, &marker, text, own)
        .await
        .map(drop)
}

/// The comments on `issue` that carry a dagexec marker, split into those dagexec wrote itself
/// ([`Trusted::own`]: the only ones it updates and believes) and the rest, which are logged
/// and ignored: a stranger's comment that starts with the status marker and the abort marker
/// stops nothing. People with write access steer with `/execute` commands, which pass the
/// permission check; a hand-written marker is not state, from anyone.
pub async fn trusted_marked(
    client: &Client,
    issue: u64,
    me: Identity,
) -> Result<Trusted, ApiError> {
    Ok(Trusted::split(client.list_comments(issue).await?, me))
}

/// Writes `body` as dagexec's one status comment on `issue`, in place of the one it wrote
/// before (who it is: `me`).
pub async fn upsert_status(
    client: &Client,
    issue: u64,
    me: Identity,
    body: &str,
) -> Result<(), ApiError> {
    let marked = trusted_marked(client, issue, me).await?;
    client
        .upsert_marked_comment(issue, STATUS_MARKER, body, &marked.own)
        .await?;
    Ok(())
}

/// What [`trusted_marked`] found.
#[derive(Debug, Clone, Default)]
pub struct Trusted {
    /// Marked comments written by dagexec itself, oldest first.
    pub own: Vec<IssueComment>,
    /// Marked comments by anyone else.
    pub ignored: Vec<IssueComment>,
}

impl Trusted {
    /// Splits `comments` by author, keeping only the marked ones.
    pub fn split(comments: Vec<IssueComment>, me: Identity) -> Trusted {
        let mut out = Trusted::default();
        for c in comments
            .into_iter()
            .filter(|c| c.starts_with(MARKER_PREFIX))
        {
            if me.wrote(&c.author) {
                out.own.push(c);
            } else {
                tracing::warn!(comment = c.id, user = %c.author.login, "ignored a comment with a dagexec marker that dagexec did not write");
                out.ignored.push(c);
            }
        }
        out
    }

    /// Whether one of dagexec's own status comments asks to stop after this round.
    pub fn abort_requested(&self, abort_marker: &str) -> bool {
        self.own
            .iter()
            .any(|c| c.starts_with(STATUS_MARKER) && c.body.contains(abort_marker))
    }
}

/// The list of commands, as a reply.
pub fn help_text() -> String {
    format!(
        "**dagexec** runs this pull request's plan when a comment's first line starts with `{PREFIX}`:\n\n\
         | Comment | What happens |\n\
         |---|---|\n\
         | `{PREFIX}` | start the plan on this branch, or resume it where the branch stands |\n\
         | `{PREFIX} status` | refresh the status comment |\n\
         | `{PREFIX} proceed` | proceed anyway after a pre-flight question |\n\
         | `{PREFIX} answer <task> <text>` | answer the question task `<task>` asked (the text may span lines); the task runs again with your answer in its prompt |\n\
         | `{PREFIX} retry <task>` | run a failed, blocked or skipped task again, with the tasks it cascaded to |\n\
         | `{PREFIX} abort` | stop after the current round; `{PREFIX}` resumes |\n\n\
         `<task>` is the task's entry in the first column of the status table (its ID in the task \
         list, or its number in a plan.json). Only people with write, \
         maintain or admin access to the repository can run these.\n"
    )
}

/// The reply to someone who may not run commands; `access` is what GitHub says they have.
pub fn denied_reply(user: &str, access: &str) -> String {
    let login: String = user
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    format!(
        "@{login} only people with write, maintain or admin access to this repository can run \
         `{PREFIX}` commands (yours: {}), so nothing was run. Someone with that access can \
         comment the command for you.\n",
        quote(access)
    )
}

/// The reply to a comment that is not a command: why, and the list.
pub fn unknown_reply(why: &str) -> String {
    if why.is_empty() {
        help_text()
    } else {
        format!("{why}, so nothing was run.\n\n{}", help_text())
    }
}

/// The status comment: progress table, the round, links to the run and logs, and what is
/// waiting on whom (`waiting_on`, Markdown written by dagexec; empty: nothing waits).
pub fn status_body(plan: &Plan, round: u32, links: &Links, waiting_on: &str) -> String {
    let mut s = format!(
        "{STATUS_MARKER}\n### dagexec status\n\n**{}/{} tasks completed** · round {round}",
        plan.count(Status::Completed),
        plan.total()
    );
    if let Some(run) = &links.run {
        let _ = write!(s, " · [workflow run and logs]({run})");
    }
    s.push_str("\n\n");
    if !waiting_on.trim().is_empty() {
        let _ = writeln!(s, "**Waiting on:** {}\n", waiting_on.trim());
    }
    // With attempt records, the table ends with the total time and cost, and the latest
    // attempts follow.
    s.push_str(&progress_table(plan, links));
    let latest = crate::action::report::latest_attempts(plan);
    if !latest.is_empty() {
        let _ = write!(s, "\n**Latest attempts**\n\n{latest}");
    }
    let _ = writeln!(
        s,
        "\n<sub>Updated in place after every round. `{PREFIX} status` refreshes it; `{PREFIX} help` lists the commands.</sub>"
    );
    s
}

/// Decides what to do about `trigger`: checks the commenter's permission (denied: one reply,
/// nothing else), reacts 👀, answers an unknown command with the list, refuses a closed or
/// fork pull request with a reply, and otherwise hands back the head branch to act on.
/// As a job's first attempt ([`handle_as`] for a re-run).
pub async fn handle(client: &Client, trigger: &Trigger) -> Result<Handled, ApiError> {
    handle_as(client, trigger, true, Replier::default()).await
}

/// [`handle`], reacting 👀 only when `acknowledge` (the `steer` job checks a comment the
/// `comment` job already acknowledged), replying as `replier` (once, also when run again).
pub async fn handle_as(
    client: &Client,
    trigger: &Trigger,
    acknowledge: bool,
    replier: Replier,
) -> Result<Handled, ApiError> {
    let op = || format!("{PREFIX} comment {}", trigger.comment_id);
    if client.repo != trigger.repo {
        return Err(ApiError::Invalid {
            op: op(),
            message: format!(
                "the comment is on {} but the client is for {}",
                trigger.repo, client.repo
            ),
        });
    }
    let (pr, id) = (trigger.pr_number, trigger.comment_id);
    if let Some(access) = too_little_access(client, &trigger.user).await? {
        tracing::info!(user = %trigger.user, access, "{}: not allowed", op());
        let text = denied_reply(&trigger.user, &access);
        replier.reply(client, pr, id, &text).await?;
        return Ok(Handled::Denied);
    }
    if acknowledge {
        client.react(id, "eyes").await?;
    }
    if let SlashCommand::Unknown(why) = &trigger.command {
        replier.reply(client, pr, id, &unknown_reply(why)).await?;
        return Ok(Handled::Replied);
    }
    let head = client.pull_head(pr).await?;
    let refusal = if head.state != "open" {
        "This pull request is closed; reopen it to run its plan."
    } else if !head.head_owner.eq_ignore_ascii_case(&client.repo.owner) {
        "This pull request's branch is in a fork; dagexec runs plans on branches of this repository only."
    } else {
        return Ok(Handled::Run {
            head_branch: head.head_ref,
            command: trigger.command.clone(),
        });
    };
    replier
        .reply(client, pr, id, &format!("{refusal}\n"))
        .await?;
    Ok(Handled::Replied)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn commands_parse_from_the_first_line() {
        use SlashCommand::*;
        let answer = |task: &str, text: &str| Answer {
            task: task.into(),
            text: text.into(),
        };
        for (body, want) in [
            ("/execute", Some(Start)),
            ("  \n /execute  \r\nThanks!", Some(Start)),
            ("/execute status", Some(Status)),
            ("/execute\tproceed\r\n", Some(Proceed)),
            ("/execute abort", Some(Abort)),
            ("/execute retry 3", Some(Retry { task: "3".into() })),
            (
                "/execute retry 13.3",
                Some(Retry {
                    task: "13.3".into(),
                }),
            ),
            (
                "/execute retry T004",
                Some(Retry {
                    task: "T004".into(),
                }),
            ),
            (
                "/execute answer 2 Use Postgres",
                Some(answer("2", "Use Postgres")),
            ),
            (
                "/execute answer 2\r\nline one\r\nline two\r\n",
                Some(answer("2", "line one\nline two")),
            ),
            (
                "/execute answer 0 `$(rm -rf /)`",
                Some(answer("0", "`$(rm -rf /)`")),
            ),
            ("/execute help", Some(Unknown(String::new()))),
            (
                "/execute bogus",
                Some(Unknown("unknown command `bogus`".into())),
            ),
            ("/executed", None),
            ("/execute-now", None),
            ("/Execute", None),
            ("please /execute", None),
            ("hello\n/execute", None),
            ("", None),
        ] {
            assert_eq!(parse(body), want, "{body:?}");
        }
        for (body, hint) in [
            ("/execute STATUS", "unknown command `STATUS`"),
            ("/execute status now", "takes no arguments"),
            ("/execute answer", "needs a task"),
            ("/execute answer\n3 yes", "needs a task"),
            ("/execute answer a;b yes", "`a;b` is not a task"),
            ("/execute answer 3", "needs the answer"),
            ("/execute answer 3 \n ", "needs the answer"),
            ("/execute retry", "needs a task"),
            ("/execute retry -1", "`-1` is not a task"),
            ("/execute retry 3 4", "one task"),
            ("/execute `@all` x", "unknown command `@all`"),
        ] {
            match parse(body) {
                Some(Unknown(why)) => assert!(why.contains(hint), "{body:?}: {why}"),
                other => panic!("{body:?}: {other:?}"),
            }
        }
    }

    /// A comment runs one command: two commands on two lines run neither, and the reply says
    /// why, where only the first ran silently while the 👀 acknowledged the comment. An
    /// answer's text is the rest of the comment, whatever it holds.
    #[test]
    fn two_commands_in_one_comment_run_neither() {
        for body in [
            "/execute retry 3\n/execute retry 4",
            "/execute\r\n /execute abort",
            "/execute abort\n\nThanks\n/execute",
        ] {
            match parse(body) {
                Some(SlashCommand::Unknown(why)) => assert!(why.contains("one command"), "{why}"),
                other => panic!("{body:?}: {other:?}"),
            }
        }
        assert_eq!(
            parse("/execute answer 3 run\n/execute retry 4 first"),
            Some(SlashCommand::Answer {
                task: "3".into(),
                text: "run\n/execute retry 4 first".into()
            })
        );
        assert_eq!(
            parse("/execute\nsee /execute help"),
            Some(SlashCommand::Start)
        );
    }

    /// A space that is not ASCII (a no-break space, as some keyboards type after a word)
    /// still separates the command: `/execute abort` typed so never starts a round.
    #[test]
    fn a_unicode_space_separates_the_command_too() {
        use SlashCommand::*;
        assert_eq!(parse("/execute\u{a0}abort"), Some(Abort));
        assert_eq!(
            parse("/execute\u{2003}retry\u{a0}3"),
            Some(Retry { task: "3".into() })
        );
        assert_eq!(parse("/execute \r\nabort"), Some(Start));
    }

    fn webhook(name: &str) -> Value {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/github/webhooks/"
        );
        let text = std::fs::read_to_string(format!("{dir}{name}")).expect("webhook example");
        serde_json::from_str(&text).expect("webhook JSON")
    }

    /// `name`, turned into a comment on pull request #1 saying `body`.
    fn on_pr(name: &str, body: &str) -> Value {
        let mut p = webhook(name);
        p["issue"]["pull_request"] =
            json!({"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/1"});
        p["comment"]["body"] = json!(body);
        p
    }

    #[test]
    fn a_new_execute_comment_on_a_pr_is_a_trigger() {
        let t = classify(
            "issue_comment",
            &on_pr("issue_comment.created.0.json", "/execute retry 2"),
        );
        assert_eq!(
            t,
            Ok(Trigger {
                repo: RepoName::parse("Codertocat/Hello-World").unwrap(),
                pr_number: 1,
                comment_id: 492700400,
                user: "Codertocat".into(),
                command: SlashCommand::Retry { task: "2".into() },
            })
        );
    }

    #[test]
    fn everything_else_is_ignored_with_a_reason() {
        let created = || on_pr("issue_comment.created.3.json", "/execute");
        let with = |f: &dyn Fn(&mut Value)| {
            let mut p = created();
            f(&mut p);
            classify("issue_comment", &p)
        };
        assert_eq!(
            classify("pull_request", &created()),
            Err(Ignored::NotACommentEvent("pull_request".into()))
        );
        let edited = on_pr("issue_comment.edited.7.json", "/execute");
        assert_eq!(
            classify("issue_comment", &edited),
            Err(Ignored::NotCreated("edited".into()))
        );
        assert_eq!(
            with(&|p| p["action"] = json!("deleted")),
            Err(Ignored::NotCreated("deleted".into()))
        );
        let mut issue = webhook("issue_comment.created.0.json");
        issue["comment"]["body"] = json!("/execute");
        assert_eq!(
            classify("issue_comment", &issue),
            Err(Ignored::NotAPullRequest(1))
        );
        assert_eq!(
            with(&|p| p["issue"]["pull_request"] = Value::Null),
            Err(Ignored::NotAPullRequest(1))
        );
        assert_eq!(
            with(&|p| p["comment"]["user"]["type"] = json!("Bot")),
            Err(Ignored::Bot("Codertocat".into()))
        );
        assert_eq!(
            with(&|p| p["comment"]["user"]["login"] = json!("dagexec[bot]")),
            Err(Ignored::Bot("dagexec[bot]".into()))
        );
        let plain = on_pr("issue_comment.created.0.json", "Looks good! /execute later");
        assert_eq!(classify("issue_comment", &plain), Err(Ignored::NotACommand));
        assert_eq!(
            classify("issue_comment", &json!([])),
            Err(Ignored::Malformed("action"))
        );
        assert_eq!(
            with(&|p| p["comment"]["id"] = json!("x")),
            Err(Ignored::Malformed("comment.id"))
        );
        assert_eq!(
            Ignored::NotACommand.to_string(),
            "the comment does not start with /execute"
        );
        let why = Ignored::NotAPullRequest(7).to_string();
        assert_eq!(why, "#7 is an issue, not a pull request");
        assert_eq!(
            Ignored::NotCreated("edited".into()).to_string(),
            "the comment was edited; only newly created comments run commands"
        );
    }

    #[test]
    fn write_maintain_and_admin_may_run() {
        assert!(may_run("admin", Some("admin")));
        assert!(may_run("write", Some("maintain")));
        assert!(may_run("write", None));
        assert!(may_run("read", Some("maintain")));
        assert!(!may_run("read", Some("triage")));
        assert!(!may_run("read", Some("read")));
        assert!(!may_run("none", None));
    }

    #[test]
    fn replies() {
        insta::assert_snapshot!("help", help_text());
        insta::assert_snapshot!("denied", denied_reply("octo-cat", "read"));
        let why = "`a;b` is not a task; use the first column of the status table, e.g. `/execute retry 3`";
        assert!(
            unknown_reply(why).starts_with(&format!("{why}, so nothing was run.\n\n**dagexec**"))
        );
        assert_eq!(unknown_reply(""), help_text());
        assert!(denied_reply("evil`user @all", "read").starts_with("@eviluserall only"));
    }

    #[test]
    fn status_comment() {
        let plan: Plan = serde_json::from_value(json!({
            "schemaVersion": 2, "goal": "Add auth", "progress": {"completedTasks": []},
            "tasks": [
                {"subject": "Model", "status": "completed", "result": "Added model", "attempts": 1, "blockedBy": []},
                {"subject": "API", "status": "blocked", "result": "asked: which database?", "attempts": 1, "blockedBy": [0]},
                {"subject": "UI", "status": "pending", "blockedBy": [1]}
            ]
        }))
        .unwrap();
        let links = Links {
            run: Some("https://github.com/o/r/actions/runs/9".into()),
            logs: [(
                0,
                "https://github.com/o/r/actions/runs/9/artifacts/11".to_string(),
            )]
            .into(),
        };
        let waiting = "task 1 asked a question: reply `/execute answer 1 <text>`";
        let body = status_body(&plan, 2, &links, waiting);
        assert!(body.starts_with(STATUS_MARKER));
        insta::assert_snapshot!("status", body);
        assert!(!status_body(&plan, 2, &Links::default(), " ").contains("Waiting on"));
        // Once attempts are recorded: each task's time and cost, and the total.
        let mut plan = plan;
        crate::pure::render::tests::spend(
            &mut plan,
            &[
                (0, 1, 125, Some(0.5), crate::pure::usage::Outcome::Completed),
                (1, 1, 40, Some(0.25), crate::pure::usage::Outcome::Blocked),
            ],
        );
        let body = status_body(&plan, 2, &links, waiting);
        assert!(
            body.contains("| 0 | Model | ✅ completed | 1 | Added model | 2m5s | $0.50 |"),
            "{body}"
        );
        assert!(
            body.contains("**Time and cost:** 2 attempt(s) · 2m45s of work · $0.75"),
            "{body}"
        );
        // And the latest attempts, as the plan records them (any job can write this comment).
        assert!(body.contains("**Latest attempts**"), "{body}");
        assert!(
            body.contains("| 1 API | 1 | ⛔ blocked | 40s | $0.25 |"),
            "{body}"
        );
    }
}
