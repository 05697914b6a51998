//! `/execute` commented on a parent issue (not a pull request): its sub-issues become the plan
//! (`sources::issues`) and run on the branch `dagexec/issue-<N>`, as any plan.
//!
//! - The `comment` job: the same permission gate as on a pull request (the commenter's
//!   write access, through the API), 👀, the parent's sticky status comment saying what
//!   happens; then it hands the branch to the `steer` job (the branch's concurrency group).
//! - The `steer` job (it may push): checks the permission again, reads the issues and commits
//!   the plan at `.design/issues/<N>/plan.json` on the branch — started from the default
//!   branch, or the branch as it stands when it exists (the plan read at the start is kept:
//!   `/execute` again resumes; `/execute include #N …` reads the issues again with those
//!   sub-issues taken in although their authors lack write access) — pushes it, shows the
//!   tasks in the parent's status comment and starts the first round. The rounds, the draft
//!   pull request (its body closing each completed sub-issue) and its status comment are the
//!   ordinary ones. Nothing is closed or edited on the issues.
//!
//! The comment is data: only `/execute` and `/execute include #N …` are read from it.

use serde_json::Value;

use super::comment::{self, STATUS_MARKER, SlashCommand, Trigger};
use super::{Steered, said};
use crate::action::report::{Links, progress_table};
use crate::action::{ActionError, Inputs};
use crate::edge::git::{RemoteAuth, Repo};
use crate::edge::github::Client;
use crate::sources::Source;
use crate::sources::issues::read::{Options, ReadReport};
use crate::sources::issues::write_back;

/// `/execute` (or `/execute include #N …`) on a parent issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueTrigger {
    /// `pr_number` is the parent issue's number; `command` is [`SlashCommand::Start`].
    pub trigger: Trigger,
    /// Sub-issues a writer takes in (`/execute include #4 #7`).
    pub include: Vec<u64>,
}

impl IssueTrigger {
    pub fn issue(&self) -> u64 {
        self.trigger.pr_number
    }
    /// `dagexec/issue-<N>`.
    pub fn branch(&self) -> String {
        format!("dagexec/issue-{}", self.issue())
    }
}

/// An `/execute` comment newly created on an issue that is not a pull request, by a person;
/// `None` for anything else (including other `/execute` commands, which need a pull request).
pub fn classify(event_name: &str, payload: &Value) -> Option<IssueTrigger> {
    let read = |body: &str| Some((SlashCommand::Start, parse(body)?));
    let (trigger, include) = comment::created(event_name, payload, false, read).ok()?;
    Some(IssueTrigger { trigger, include })
}

/// `/execute` → no inclusions; `/execute include #4 #7` (or `4, 7`) → those; else `None`.
pub fn parse(body: &str) -> Option<Vec<u64>> {
    let line = comment::after_prefix(body)?.lines().next().unwrap_or("");
    let mut words = line
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty());
    match words.next() {
        None => Some(Vec::new()),
        Some("include") => {
            let numbers: Option<Vec<u64>> = words
                .map(|w| w.trim_start_matches('#').parse().ok().filter(|n| *n > 0))
                .collect();
            numbers.filter(|n| !n.is_empty())
        }
        Some(_) => None,
    }
}

/// The comment job's half (`apply` false) or the steer job's (`apply` true), in the checkout
/// at `root`, through `client`, replying as `replier`.
pub async fn run(
    root: &std::path::Path,
    inputs: &Inputs,
    t: &IssueTrigger,
    client: &Client,
    replier: comment::Replier,
    apply: bool,
) -> Result<Steered, ActionError> {
    let issue = t.issue();
    let user = &t.trigger.user;
    if let Some(access) = comment::too_little_access(client, user).await? {
        if !apply {
            let text = comment::denied_reply(user, &access);
            let id = t.trigger.comment_id;
            replier.reply(client, issue, id, &text).await?;
        }
        return Ok(said(format!("@{user} may not run dagexec here.")));
    }
    let branch = t.branch();
    if !apply {
        client.react(t.trigger.comment_id, "eyes").await?;
        let text = format!(
            "{STATUS_MARKER}\n### dagexec\n\n⏳ Reading the sub-issues of #{issue} (`/execute` by @{user}); they run on `{branch}`, in a draft pull request.\n"
        );
        comment::upsert_status(client, issue, inputs.me(), &text).await?;
        return Ok(Steered {
            message: format!("Reading the sub-issues of #{issue} is left to the steer job."),
            to_apply: Some(branch),
            ..Default::default()
        });
    }
    start(root, inputs, t, client).await
}

/// The steer job's half: the plan committed on the branch and pushed, the status comment,
/// the first round dispatched.
async fn start(
    root: &std::path::Path,
    inputs: &Inputs,
    t: &IssueTrigger,
    client: &Client,
) -> Result<Steered, ActionError> {
    let (issue, branch) = (t.issue(), t.branch());
    let repo = Repo::discover(root)?;
    let auth = RemoteAuth::token(inputs.token.expose());
    if let Some(tip) = repo.fetch_branch(&branch, &auth)? {
        repo.checkout_detached(&tip)?;
    }
    let opts = Options {
        number: issue,
        repo: t.trigger.repo.clone(),
        api_url: client.api_url().to_string(),
        token: inputs.token.clone(),
        include: t.include.clone(),
        reread: !t.include.is_empty(),
    };
    // Reading the issues is blocking work with its own runtime (a plan source is read by
    // synchronous code too): a blocking thread does it.
    let root = repo.root().to_path_buf();
    let read = crate::action::blocking(move || Source::Issues(opts).prepare(&root, true)).await;
    let prepared = match read {
        Ok(p) => p,
        Err(errors) => {
            let (message, hint) = crate::sources::describe(&errors);
            let text = format!(
                "{STATUS_MARKER}\n### dagexec\n\n❌ The sub-issues of #{issue} cannot run: {}\n\n{hint}\n",
                crate::pure::sanitize::line(&message),
            );
            comment::upsert_status(client, issue, inputs.me(), &text).await?;
            return Ok(said(text));
        }
    };
    if prepared.read.as_ref().is_some_and(|r| r.commit.is_some()) {
        crate::action::push_with_rebase(&repo, &branch, &auth, |line| println!("{line}"))?;
    }
    let plan = crate::edge::plan_file::load(&prepared.plan)
        .map_err(|e| ActionError::Input(format!("{}: {e}", prepared.plan.display())))?;
    let text = status_text(issue, &branch, &plan, prepared.read.as_ref());
    comment::upsert_status(client, issue, inputs.me(), &text).await?;
    let mut run_inputs = inputs.clone();
    run_inputs.plan_rel.clone_from(&prepared.plan_rel);
    crate::action::dispatch_round(client, &run_inputs, &branch, &branch).await?;
    Ok(Steered {
        message: format!("Started the plan of #{issue}'s sub-issues on {branch}."),
        dispatched: Some(branch),
        ..Default::default()
    })
}

/// The parent's status comment once the plan is on the branch: its tasks, what was left out.
fn status_text(
    issue: u64,
    branch: &str,
    plan: &crate::pure::plan::model::Plan,
    read: Option<&ReadReport>,
) -> String {
    let mut s = format!(
        "{STATUS_MARKER}\n### dagexec\n\nThe sub-issues of #{issue} run on `{branch}` (plan `.design/issues/{issue}/plan.json`); the draft pull request closes each completed one when it is merged.\n\n"
    );
    s.push_str(&progress_table(plan, &Links::default()));
    let inert = crate::action::report::inert;
    s.push_str(&write_back::left_out_lines(plan, inert));
    if let Some(r) = read {
        s.push_str(&write_back::note_lines(plan, "", &r.outside, inert));
    }
    if !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn execute_and_include_parse_anything_else_does_not() {
        assert_eq!(parse("/execute"), Some(vec![]));
        assert_eq!(parse("  /execute \nplease"), Some(vec![]));
        assert_eq!(parse("/execute include #4 #7"), Some(vec![4, 7]));
        assert_eq!(parse("/execute include 4, 7"), Some(vec![4, 7]));
        assert_eq!(parse("/execute include"), None);
        assert_eq!(parse("/execute include #x"), None);
        assert_eq!(parse("/execute status"), None);
        assert_eq!(parse("/executed"), None);
        assert_eq!(parse("run /execute"), None);
    }

    /// What the reading noted about an issue outside the plan is shown inert, as the left-out
    /// list is: no mention, no fence, heading or HTML comment (a forged marker) of its own.
    #[test]
    fn the_outside_notes_in_the_status_comment_are_inert() {
        use crate::sources::issues::Note;
        let plan = crate::pure::plan::model::Plan::new("Goal".into(), Vec::new());
        let hostile = "@admin ```\n# Fake heading\n<!-- dagexec:abort-requested -->";
        let note = |issue: &str, text: &str| Note {
            issue: issue.into(),
            text: text.into(),
        };
        let read = ReadReport {
            outside: vec![note("#90", hostile), note(hostile, "outside the plan")],
            ..Default::default()
        };
        let text = status_text(1, "dagexec/issue-1", &plan, Some(&read));
        assert!(!text.contains("@admin"), "{text}");
        assert_eq!(text.matches("<!--").count(), 1, "{text}");
        assert!(
            (text.lines().skip(2)).all(|l| !l.starts_with('#') && !l.starts_with("```")),
            "{text}"
        );
        assert!(text.contains("\n- #90: @&#8203;admin"), "{text}");
    }
}
