//! The texts the Action shows people: the pull request body (progress table, the DAG coloured
//! by status, links), the job summary of each round, and the `dagexec` check run's summary
//! when a run stops (circuit breaker, deadlock, the budget spent) or completes. Once attempts
//! are recorded ([`crate::pure::usage`]), the progress table has Time and Cost columns and a total
//! line follows it (and, where an agent CLI's report disagrees with the model gateway's count,
//! the CLI's figure in the Cost cell and a line per such task, as `status` shows them), and the body and the job summary have a timeline ([`timeline`]: the
//! attempts as a Mermaid gantt, beside `dagexec simulate`'s prediction). Pure; snapshot-tested.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::pure::plan::ids::TaskNames;
use crate::pure::plan::model::{Plan, Status};
use crate::pure::render::{graph, summary};

/// The first line of every body dagexec writes, so it can find its own texts again.
pub const BODY_MARKER: &str = "<!-- dagexec:pr-body -->";

/// Where people can look: the workflow run, and each task's latest artifact.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Links {
    pub run: Option<String>,
    pub logs: BTreeMap<usize, String>,
}

/// Why a run stopped, for the check run and summaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunStop {
    CircuitBreaker(String),
    Deadlock(String),
    /// Questions (or failed pre-flight checks) wait for the user's reply.
    NeedsInput(String),
    /// The `max-cost` budget is spent ([`crate::pure::usage::Budget::exhausted`] says so).
    Budget(String),
    Completed,
}

impl RunStop {
    /// Whether the job that stops here fails: the user must act on it.
    pub fn fails(&self) -> bool {
        matches!(
            self,
            RunStop::CircuitBreaker(_) | RunStop::Deadlock(_) | RunStop::Budget(_)
        )
    }
}

fn icon(s: Status) -> &'static str {
    match s {
        Status::Pending => "⏳",
        Status::InProgress => "🔄",
        Status::Completed => "✅",
        Status::Failed => "❌",
        Status::Blocked => "⛔",
        Status::Skipped => "⏭️",
    }
}

/// A table cell: one line, no pipes breaking the table, at most `max` characters.
fn cell(s: &str, max: usize) -> String {
    let one: String = s
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
        .replace('<', "&lt;");
    if one.chars().count() <= max {
        one
    } else {
        let mut c: String = one.chars().take(max - 1).collect();
        c.push('…');
        c
    }
}

/// Text that may carry a worker's words, as the pull request, its comments and the check run
/// show it: one line at most `max` characters long ([`cell`]), [`inert`]. One line, so no
/// fence or heading of the worker's starts in the report.
fn inert_line(s: &str, max: usize) -> String {
    inert(&cell(s, max))
}

/// A worker's words made inert in the pull request's Markdown
/// ([`crate::pure::sanitize::unreferenced`], and `<` written `&lt;`: no HTML, which could hide
/// a backtick from code) outside code: the lines of a fenced block (its fence indented at most
/// three spaces, as GitHub's) and an inline code span (on one line) stay exactly as written —
/// GitHub links nothing there, and `&#8203;` would show as typed. Where GitHub may not see code,
/// the text is inert: a glitch at worst, never a mention.
pub(crate) fn inert(s: &str) -> String {
    use crate::sources::markdown::{Block, lines};
    let mut out = String::with_capacity(s.len());
    // Inside a fenced block: whether its fence is one GitHub sees.
    let (mut from, mut block) = (0, None);
    for l in lines(s) {
        let code = match (l.block, block) {
            (Block::Fence, None) => {
                let indent = &l.text[..l.text.len() - l.text.trim_start().len()];
                *block.insert(indent.len() <= 3 && indent.bytes().all(|b| b == b' '))
            }
            (Block::Fence, Some(seen)) => block.take().unwrap_or(seen),
            (Block::Code(_), Some(seen)) => seen,
            _ => false,
        };
        if code {
            out.extend(s[from..l.start].split_inclusive('\n').map(inert_spans));
            from = l.start + l.text.len();
            out.push_str(&s[l.start..from]);
        }
    }
    out.extend(s[from..].split_inclusive('\n').map(inert_spans));
    out
}

/// [`inert`] of one line outside fenced blocks: each inline code span — a run of backticks
/// (not escaped) to the next run of as many — kept as written.
fn inert_spans(s: &str) -> String {
    let run = |at: usize| {
        s.as_bytes()[at..]
            .iter()
            .take_while(|&&c| c == b'`')
            .count()
    };
    let prose = |t: &str| crate::pure::sanitize::unreferenced(t, true).replace('<', "&lt;");
    let mut out = String::with_capacity(s.len());
    let (mut from, mut at) = (0, 0);
    while at < s.len() {
        match s.as_bytes()[at] {
            b'\\' => at += 2,
            b'`' => {
                let n = run(at);
                let mut end = at + n;
                while end < s.len() && (s.as_bytes()[end] != b'`' || run(end) != n) {
                    end += if s.as_bytes()[end] == b'`' {
                        run(end)
                    } else {
                        1
                    };
                }
                if end < s.len() {
                    out.push_str(&prose(&s[from..at]));
                    out.push_str(&s[at..end + n]);
                    (from, at) = (end + n, end + n);
                } else {
                    at += n;
                }
            }
            _ => at += 1,
        }
    }
    out.push_str(&prose(&s[from..]));
    out
}

/// The progress table (Markdown): one row per task, and a Review column with each task's
/// latest review ([`crate::pure::review::latest_word`]) once a reviewer has run on any task.
pub fn progress_table(plan: &Plan, links: &Links) -> String {
    // Completed tasks are trimmed (their `reviews` go); their approvals stay in the progress.
    let approvals: BTreeMap<u64, u64> = plan
        .progress
        .extra
        .get("reviews")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .filter_map(|r| Some((r["task"].as_u64()?, r["rejections"].as_u64().unwrap_or(0))))
        .collect();
    let reviews: Vec<String> = plan
        .tasks
        .iter()
        .enumerate()
        .map(|(i, t)| crate::pure::review::latest_word(t, approvals.get(&(i as u64)).copied()))
        .collect();
    let reviewed = reviews.iter().any(|r| !r.is_empty());
    let spent = crate::pure::usage::per_task(plan);
    let timed = !spent.is_empty();
    let mut s = String::from("| # | Task | Status | Attempts |");
    let mut rule = String::from("|---:|---|---|---:|");
    if reviewed {
        s.push_str(" Review |");
        rule.push_str("---|");
    }
    s.push_str(" Result |");
    rule.push_str("---|");
    if timed {
        s.push_str(" Time | Cost |");
        rule.push_str("---:|---:|");
    }
    let _ = writeln!(s, " Log |\n{rule}---|");
    for (i, t) in plan.tasks.iter().enumerate().filter(|(_, t)| !t.join) {
        let log = links
            .logs
            .get(&i)
            .map(|u| format!("[artifact]({u})"))
            .unwrap_or_default();
        let mut extra = String::new();
        if reviewed {
            let _ = write!(extra, " {} |", reviews[i]);
        }
        let _ = write!(
            extra,
            " {} |",
            inert_line(t.result.as_deref().unwrap_or(""), 120)
        );
        if timed {
            let t = spent.get(&i).cloned().unwrap_or_default();
            let _ = write!(extra, " {} | {} |", t.time_text(), t.cost_and_cli_text());
        }
        let _ = writeln!(
            s,
            "| {} | {} | {} {} | {} |{extra} {log} |",
            cell(&crate::pure::plan::ids::name(plan, i), 40),
            cell(&t.subject, 80),
            icon(t.status),
            t.status,
            plan.attempts_of(i),
        );
    }
    if let Some(total) = crate::pure::usage::total_line(plan) {
        let _ = writeln!(s, "\n**Time and cost:** {total}");
    }
    let mismatches = crate::pure::usage::mismatch_lines(plan);
    if !mismatches.is_empty() {
        let _ = write!(s, "\n{mismatches}");
    }
    s
}

/// How many of the latest attempts the pull request body and the status comment list.
pub const LATEST_ATTEMPTS: usize = 5;

/// The latest [`LATEST_ATTEMPTS`] attempts `plan` records, as [`activity`] lists them (the
/// pull request body's and the status comment's).
pub fn latest_attempts(plan: &Plan) -> String {
    let (events, names) = (crate::pure::events::of_records(plan), TaskNames::of(plan));
    activity(&events, &names, LATEST_ATTEMPTS)
}

/// The attempts that ended among `events`, the newest `last` of them, as a Markdown table
/// (when each ended, the task, the attempt, how it ended, its time and cost); empty when none
/// ended. The job summary renders the job's own events ([`crate::flow::Ui::activity`]); the
/// pull request body and the status comment those the plan records
/// ([`crate::pure::events::of_records`]).
pub fn activity(
    events: &[crate::pure::events::Stamped],
    names: &crate::pure::plan::ids::TaskNames,
    last: usize,
) -> String {
    use crate::pure::usage::Outcome;
    let ended: Vec<(&jiff::Timestamp, &crate::pure::events::Ended)> = events
        .iter()
        .filter_map(|s| match &s.event {
            crate::pure::events::Event::AttemptEnded(e) => Some((&s.at, e)),
            _ => None,
        })
        .collect();
    if ended.is_empty() || last == 0 {
        return String::new();
    }
    let mut s = String::from(
        "| Ended (UTC) | Task | Attempt | Outcome | Time | Cost |\n|---|---|---:|---|---:|---:|\n",
    );
    for (at, e) in &ended[ended.len().saturating_sub(last)..] {
        let icon = match e.outcome {
            Outcome::Completed => "✅",
            Outcome::Failed => "❌",
            Outcome::Timeout => "⏱️",
            Outcome::Rejected => "↩️",
            Outcome::Conflict => "🔀",
            Outcome::Blocked => "⛔",
            Outcome::Interrupted => "⏸️",
        };
        let next = e
            .retry
            .map(|n| format!(" → attempt {n}"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "| {} | {} {} | {} | {icon} {}{next} | {} | {} |",
            at.strftime("%Y-%m-%d %H:%M:%S"),
            names.get(e.task),
            cell(names.subject(e.task, &e.subject), 60),
            e.attempt,
            e.outcome,
            crate::pure::outcome::human_duration(e.took),
            e.cost_usd
                .map(crate::pure::usage::money)
                .unwrap_or_default(),
        );
    }
    if ended.len() > last {
        let _ = writeln!(
            s,
            "\n_{} earlier attempt(s) not shown._",
            ended.len() - last
        );
    }
    s
}

/// GitHub refuses a pull request body longer than this many characters.
pub const BODY_LIMIT: usize = 65_536;

/// Plans with more tasks get the actual time without the prediction beside it.
pub const PREDICT_MAX_TASKS: usize = 5_000;

/// The run's timeline (Markdown) once attempts are recorded: the actual run beside what
/// `dagexec simulate` predicts for the schedule that ran (`ran`), then the Mermaid chart of
/// the attempts ([`crate::pure::timeline`]: at most [`crate::pure::timeline::MERMAID_BARS`] bars, the
/// rest counted); empty before any attempt is recorded.
pub fn timeline(plan: &Plan, ran: crate::pure::timeline::Ran) -> String {
    let Some(actual) = crate::pure::timeline::actual(plan) else {
        return String::new();
    };
    // Simulating every schedule of a very large plan in each job would cost more than the
    // line is worth: `dagexec simulate` gives it.
    let predicted = (plan.tasks.len() <= PREDICT_MAX_TASKS)
        .then(|| crate::pure::timeline::predicted(plan, ran))
        .flatten();
    format!(
        "### Timeline\n\n{}.\n\n{}",
        crate::pure::timeline::versus(&actual, predicted.as_ref()),
        crate::pure::timeline::mermaid(plan, &actual, crate::pure::timeline::MERMAID_BARS)
    )
}

/// The pull request body after `round` rounds, the timeline's prediction for `ran`. At most
/// [`BODY_LIMIT`] characters: the progress table is cut, and the timeline and the dependency
/// graph are left out (each saying so), when they would not fit.
pub fn pr_body(
    plan: &Plan,
    round: u32,
    links: &Links,
    stop: Option<&RunStop>,
    ran: crate::pure::timeline::Ran,
) -> String {
    let mut s = format!("{BODY_MARKER}\n## dagexec: {}\n\n", cell(&plan.goal, 200));
    let done = plan.count(Status::Completed);
    let _ = write!(
        s,
        "**{done}/{} tasks completed** after round {round}",
        plan.total()
    );
    if let Some(run) = &links.run {
        let _ = write!(s, " · [latest workflow run]({run})");
    }
    s.push_str("\n\n");
    match stop {
        Some(RunStop::Completed) => {
            s.push_str("Every task completed: this pull request is ready for review.\n\n");
        }
        Some(RunStop::CircuitBreaker(why) | RunStop::Deadlock(why) | RunStop::Budget(why)) => {
            let _ = writeln!(
                s,
                "> [!WARNING]\n> Execution stopped: {}\n",
                inert_line(why, 300)
            );
        }
        Some(RunStop::NeedsInput(why)) => {
            let _ = writeln!(
                s,
                "> [!IMPORTANT]\n> Waiting for you: {}\n",
                inert_line(why, 300)
            );
        }
        None => s.push_str("Execution is in progress; this body is updated after every round.\n\n"),
    }
    let mut after = egress_blocked(plan);
    // A plan made of issues: merging closes the sub-issues completed (nothing sooner).
    let closes = crate::sources::issues::write_back::closes(plan);
    if !closes.is_empty() {
        let _ = write!(after, "{}\n\n", closes.join("\n"));
    }
    let latest = latest_attempts(plan);
    if !latest.is_empty() {
        let _ = write!(after, "### Latest attempts\n\n{latest}\n");
    }
    const FOOTER: usize = 400;
    // A row per task can pass the limit alone: the table gets the room the rest leaves.
    let room = BODY_LIMIT.saturating_sub(s.len() + after.len() + FOOTER + 1);
    s.push_str(&fit_table(&progress_table(plan, links), room));
    s.push('\n');
    s.push_str(&after);
    let timeline = timeline(plan, ran);
    if timeline.is_empty() {
    } else if s.len() + timeline.len() + FOOTER < BODY_LIMIT {
        let _ = writeln!(s, "{timeline}");
    } else {
        s.push_str("_The timeline does not fit in this body; run `dagexec status --gantt` on the branch._\n\n");
    }
    let diagram = graph::mermaid(plan);
    if diagram.len() < 45_000
        && diagram.matches("-->").count() <= 500
        && s.len() + diagram.len() + FOOTER < BODY_LIMIT
    {
        let _ = write!(s, "```mermaid\n{diagram}```\n");
    } else {
        s.push_str("_The dependency graph is too large for GitHub's Mermaid renderer; run `dagexec graph` locally._\n");
    }
    // A plan made of issues keeps its state beside its parent issue's number.
    let state = crate::sources::issues::write_back::state_path(plan)
        .unwrap_or_else(|| crate::pure::validate::DEFAULT_PLAN_REL.to_string());
    let _ = writeln!(
        s,
        "\n<sub>Written by dagexec. The execution state is `{state}` on this branch; each round is one commit.</sub>"
    );
    s
}

/// `table` when it fits in `room` bytes; else its first lines that do, and how many of its
/// tasks are not shown.
fn fit_table(table: &str, room: usize) -> String {
    const NOTE: usize = 120;
    if table.len() <= room {
        return table.to_string();
    }
    let mut end = 0;
    for line in table.split_inclusive('\n') {
        if end + line.len() + NOTE > room {
            break;
        }
        end += line.len();
    }
    let rows = |t: &str| t.lines().filter(|l| l.starts_with("| ")).count();
    let what = match rows(table) - rows(&table[..end]) {
        0 => "The table's last lines are".to_string(),
        left => format!("{left} more tasks are"),
    };
    format!(
        "{}\n_{what} not shown here; `dagexec status` on the branch lists them all._\n",
        &table[..end]
    )
}

/// How many attempts' blocked hosts the pull request body names (the latest).
const EGRESS_ATTEMPTS_SHOWN: usize = 5;

/// The hosts the work jobs' egress proxy refused, per attempt (the latest few), from the
/// plan's records: one paragraph, empty when none was.
fn egress_blocked(plan: &Plan) -> String {
    let records = crate::pure::usage::records(plan);
    let blocked: Vec<String> = records
        .iter()
        .filter(|r| !r.network.egress_blocked.is_empty())
        .map(|r| {
            let hosts: Vec<String> = r
                .network
                .egress_blocked
                .iter()
                .map(|h| format!("`{}`", cell(h, 100).replace('`', "'")))
                .collect();
            format!(
                "task {} attempt {}: {}",
                cell(&crate::pure::plan::ids::name(plan, r.task), 40),
                r.attempt,
                hosts.join(", ")
            )
        })
        .collect();
    if blocked.is_empty() {
        return String::new();
    }
    let shown = &blocked[blocked.len().saturating_sub(EGRESS_ATTEMPTS_SHOWN)..];
    format!(
        "**Egress blocked** (hosts outside the `egress` list the agent asked for): {}\n\n",
        shown.join("; ")
    )
}

/// What a job summary is about: round `round`, the tasks of `batch`, and those that wait
/// for a later round.
#[derive(Debug, Clone, Copy)]
pub struct Part<'a> {
    pub round: u32,
    pub batch: &'a [usize],
    pub waiting: &'a [usize],
}

/// The job summary of one finalize or conductor: the round's progress, the whole table, the
/// attempts that ended in this job (`events`, the job's own), and the run's timeline so far
/// (the plan's recorded attempts, beside the prediction for `ran`).
pub fn round_summary(
    plan: &Plan,
    part: Part<'_>,
    links: &Links,
    events: &[crate::pure::events::Stamped],
    ran: crate::pure::timeline::Ran,
) -> String {
    let (names, waiting) = (TaskNames::of(plan), part.waiting);
    let mut s = format!(
        "## dagexec round {}\n\n```\n{}```\n\n",
        part.round,
        summary::round_progress(plan, part.round, part.batch)
    );
    if !waiting.is_empty() {
        let (noun, verb) = if waiting.len() == 1 {
            ("Task", "waits")
        } else {
            ("Tasks", "wait")
        };
        let _ = writeln!(
            s,
            "{noun} {} {verb} for a later round.\n",
            names.list(waiting)
        );
    }
    s.push_str(&progress_table(plan, links));
    let here = activity(events, &names, 200);
    if !here.is_empty() {
        let _ = write!(s, "\n### Attempts judged in this job\n\n{here}");
    }
    let timeline = timeline(plan, ran);
    if !timeline.is_empty() {
        let _ = write!(s, "\n{timeline}");
    }
    s
}

/// The `dagexec` check run's title and summary when a run stops or completes.
/// The summary renders as Markdown in the pull request's checks tab: the tasks' results and why
/// the run stopped (which may quote one) are shown there as on the pull request ([`inert_line`]).
pub fn check_run_text(plan: &Plan, stop: &RunStop, branch: &str) -> (String, String) {
    let mut s = String::new();
    let title = check_run_title(plan, stop);
    let mut shown = plan.clone();
    for result in shown.tasks.iter_mut().filter_map(|t| t.result.as_mut()) {
        *result = inert_line(result, 300);
    }
    let plan = &shown;
    match stop {
        RunStop::Completed => {}
        RunStop::Budget(why) => budget_text(&mut s, plan, why, branch),
        RunStop::NeedsInput(why) => {
            let _ = writeln!(
                s,
                "{}\n\nThe questions are comments on the pull request, each with the `/execute …` reply that answers it; the reply resumes the run.",
                inert_line(why, 400)
            );
        }
        RunStop::CircuitBreaker(why) | RunStop::Deadlock(why) => {
            failed_text(&mut s, plan, why, branch);
        }
    }
    s.push('\n');
    s.push_str(&summary::final_summary_for(
        plan,
        summary::Audience::PullRequest,
    ));
    (title, s)
}

/// The check run's title for `stop`.
fn check_run_title(plan: &Plan, stop: &RunStop) -> String {
    match stop {
        RunStop::Completed => format!("All {} tasks completed", plan.total()),
        RunStop::CircuitBreaker(_) => "Stopped by the circuit breaker".to_string(),
        RunStop::Deadlock(_) => "Stopped: no task can run (deadlock)".to_string(),
        RunStop::NeedsInput(_) => "Waiting for your answer".to_string(),
        RunStop::Budget(why) => {
            let what = cell(why.split(':').next().unwrap_or("the budget is spent"), 80);
            // What the plan's recorded attempts cost, when any reported a cost.
            let spent = crate::pure::usage::total(plan).cost_usd;
            match spent.map(crate::pure::usage::money) {
                Some(spent) => format!("Stopped: {what} ({spent} recorded)"),
                None => format!("Stopped: {what}"),
            }
        }
    }
}

/// The check run's text for a spent budget: why, what the money bought, how to go on.
fn budget_text(s: &mut String, plan: &Plan, why: &str, branch: &str) {
    let _ = writeln!(s, "{}\n", inert_line(why, 400));
    let (spent, names) = (crate::pure::usage::per_task(plan), TaskNames::of(plan));
    let bought: Vec<String> = plan
        .tasks
        .iter()
        .enumerate()
        .filter(|(_, t)| t.status == Status::Completed && !t.join)
        .map(|(i, t)| {
            let cost = spent.get(&i).map(crate::pure::usage::Totals::cost_text);
            let cost = cost.filter(|c| !c.is_empty());
            let cost = cost.unwrap_or_else(|| "no cost reported".into());
            format!("- task {} ({}): {cost}", names.get(i), cell(&t.subject, 80))
        })
        .collect();
    if !bought.is_empty() {
        let _ = writeln!(s, "### What it bought\n{}\n", bought.join("\n"));
    }
    let _ = writeln!(
        s,
        "### How to go on\nRaise the `max-cost` input of the plan and finalize steps, then comment `/execute` on this pull request (or run the workflow on branch `{branch}`): the run resumes where it stopped."
    );
}

/// The check run's text for a circuit breaker or a deadlock: why, what failed, what the
/// cascade skipped, how to resume (`plan`'s results are shown as [`check_run_text`] made them).
fn failed_text(s: &mut String, plan: &Plan, why: &str, branch: &str) {
    let _ = writeln!(s, "{}\n", inert_line(why, 400));
    let names = TaskNames::of(plan);
    let failed: Vec<_> = plan
        .tasks
        .iter()
        .enumerate()
        .filter(|(_, t)| matches!(t.status, Status::Failed | Status::Blocked))
        .collect();
    if !failed.is_empty() {
        s.push_str("### What failed\n");
        for (i, t) in failed {
            let _ = writeln!(
                s,
                "- task {} ({}): {} after {} attempt(s) — {}",
                names.get(i),
                cell(&t.subject, 80),
                t.status,
                plan.attempts_of(i),
                t.result.as_deref().unwrap_or("no result recorded")
            );
        }
        s.push('\n');
    }
    let skipped: Vec<String> = plan
        .tasks
        .iter()
        .enumerate()
        .filter(|(_, t)| t.status == Status::Skipped && !t.join)
        .map(|(i, t)| format!("task {} ({})", names.get(i), cell(&t.subject, 60)))
        .collect();
    if !skipped.is_empty() {
        let _ = writeln!(s, "### Skipped by the cascade\n{}\n", skipped.join(", "));
    }
    let _ = writeln!(
        s,
        "### How to resume\nFix the cause on branch `{branch}` if it is in the repository, then comment `/execute retry N` on this pull request for each failed task N (the tasks it cascaded to come back with it); a blocked task takes `/execute answer N …`."
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What GitHub does not render as code is inert, however the text is built: an HTML
    /// tag around a backtick, a fence indented as code, a span GitHub ends at a heading.
    #[test]
    fn html_an_indented_fence_or_a_heading_hides_no_mention() {
        for (text, want) in [
            (
                "<b title=\"`\">@octocat`</b>",
                "&lt;b title=\"`\">@octocat`&lt;/b>",
            ),
            (
                "para\n    ```\n@octocat\n```",
                "para\n    ```\n@&#8203;octocat\n```",
            ),
            ("`a\n# @octocat`", "`a\n# @&#8203;octocat`"),
        ] {
            assert_eq!(inert(text), want, "{text:?}");
        }
    }

    #[test]
    fn code_stays_as_written_and_the_rest_is_inert() {
        for (text, want) in [
            ("`@a` @b", "`@a` @&#8203;b"),
            ("``a ` @b`` @c", "``a ` @b`` @&#8203;c"),
            ("\\`@a` @b", "\\`@&#8203;a` @&#8203;b"),
            // A span is taken on one line only (GitHub ends one at a heading, a list…).
            ("`@a\n@b` #1", "`@&#8203;a\n@&#8203;b` #&#8203;1"),
            ("`@a\n\n@b`", "`@&#8203;a\n\n@&#8203;b`"),
            ("`@a", "`@&#8203;a"),
            ("~~~\n@a\n~~~\n@b", "~~~\n@a\n~~~\n@&#8203;b"),
        ] {
            assert_eq!(inert(text), want, "{text:?}");
        }
    }

    fn plan() -> Plan {
        serde_json::from_value(serde_json::json!({
            "schemaVersion": 2, "goal": "Add | auth", "context": {},
            "progress": {"completedTasks": [], "reviews": [{"task": 0, "verdict": "approved", "rejections": 1, "summary": "fine"}]},
            "tasks": [
                {"subject": "Model", "status": "completed", "result": "Added model", "attempts": 2, "blockedBy": []},
                {"subject": "API", "status": "failed", "result": "tests fail:\nline two", "attempts": 3, "blockedBy": [0],
                 "reviews": [
                    {"attempt": 1, "verdict": "approved", "summary": "ok"},
                    {"attempt": 2, "verdict": "rejected", "summary": "no", "issues": ["x"], "hash": "1"},
                    {"attempt": 3, "verdict": "rejected", "summary": "no", "issues": ["x"], "hash": "1"}
                 ]},
                {"subject": "UI", "status": "skipped", "result": "dependency 1 failed", "blockedBy": [1]},
                {"subject": "Docs", "status": "pending", "blockedBy": []}
            ]
        }))
        .unwrap()
    }

    fn ran() -> crate::pure::timeline::Ran {
        crate::pure::timeline::Ran {
            schedule: crate::pure::engine::Schedule::Rounds,
            place: crate::pure::simulate::Place::Actions,
            slots: 8,
            merge: false,
        }
    }

    fn links() -> Links {
        Links {
            run: Some("https://github.com/o/r/actions/runs/9".into()),
            logs: [(
                0,
                "https://github.com/o/r/actions/runs/9/artifacts/11".to_string(),
            )]
            .into(),
        }
    }

    #[test]
    fn pr_body_in_progress() {
        insta::assert_snapshot!(pr_body(&plan(), 2, &links(), None, ran()));
    }

    #[test]
    fn the_body_names_the_hosts_egress_blocked_per_attempt() {
        let mut p = plan();
        assert!(!pr_body(&p, 2, &links(), None, ran()).contains("Egress blocked"));
        let start = jiff::Timestamp::from_second(1_795_000_000).unwrap();
        let measured = crate::pure::usage::Measured {
            start,
            end: start + jiff::SignedDuration::from_secs(9),
            usage: crate::pure::usage::Usage::default(),
        };
        for (task, attempt, hosts) in [(1, 2, vec![]), (1, 3, vec!["evil.example", "a`b"])] {
            let mut r = crate::pure::usage::AttemptRecord::new(
                task,
                attempt,
                &measured,
                crate::pure::usage::Outcome::Failed,
            );
            r.network.egress_blocked = hosts.into_iter().map(String::from).collect();
            crate::pure::usage::record(&mut p, &r);
        }
        let body = pr_body(&p, 2, &links(), None, ran());
        let line = body
            .lines()
            .find(|l| l.starts_with("**Egress blocked**"))
            .unwrap_or_else(|| panic!("{body}"));
        assert_eq!(
            line,
            "**Egress blocked** (hosts outside the `egress` list the agent asked for): task 1 attempt 3: `evil.example`, `a'b`"
        );
    }

    #[test]
    fn a_plan_made_of_issues_closes_its_completed_sub_issues_in_the_body() {
        let mut p = plan();
        let completed: Vec<usize> = (0..p.tasks.len())
            .filter(|&i| p.tasks[i].status == Status::Completed)
            .collect();
        assert!(!completed.is_empty() && completed.len() < p.tasks.len());
        let tasks: Vec<serde_json::Value> = (0..p.tasks.len())
            .map(|i| serde_json::json!({"repo": "o/r", "number": 100 + i}))
            .collect();
        p.extra.insert(
            crate::sources::issues::PLAN_FIELD.into(),
            serde_json::json!({"repo": "o/r", "parent": 7, "tasks": tasks}),
        );
        let body = pr_body(&p, 2, &links(), None, ran());
        assert!(
            body.contains("The execution state is `.design/issues/7/plan.json` on this branch"),
            "{body}"
        );
        for i in 0..p.tasks.len() {
            assert_eq!(
                body.contains(&format!("Closes #{}\n", 100 + i)),
                completed.contains(&i),
                "task {i}: {body}"
            );
        }
        assert!(!pr_body(&plan(), 2, &links(), None, ran()).contains("Closes"));
    }

    #[test]
    fn pr_body_after_a_circuit_breaker_and_its_check_run() {
        let stop =
            RunStop::CircuitBreaker("Circuit breaker: 2 of 4 tasks failed or were skipped.".into());
        let body = pr_body(&plan(), 3, &links(), Some(&stop), ran());
        assert!(body.contains("[!WARNING]"));
        let (title, summary) = check_run_text(&plan(), &stop, "dagexec/add-auth");
        insta::assert_snapshot!(format!("{title}\n\n{summary}"));
    }

    #[test]
    fn round_summary_lists_the_batch_and_who_waits() {
        let part = Part {
            round: 1,
            batch: &[0, 1],
            waiting: &[3],
        };
        insta::assert_snapshot!(round_summary(&plan(), part, &links(), &[], ran()));
    }

    #[test]
    fn the_review_column_shows_only_once_a_reviewer_ran() {
        let mut p = plan();
        p.progress.extra.shift_remove("reviews");
        p.tasks[1].extra.shift_remove("reviews");
        let table = progress_table(&p, &links());
        assert!(!table.contains("Review"), "{table}");
        assert!(
            table.contains("| 0 | Model | ✅ completed | 2 | Added model |"),
            "{table}"
        );
        let table = progress_table(&plan(), &links());
        assert!(
            table.contains(
                "| 0 | Model | ✅ completed | 2 | approved after 1 rejection | Added model |"
            ),
            "{table}"
        );
        assert!(
            table.contains("| 1 | API | ❌ failed | 3 | rejected ×2 | tests fail"),
            "{table}"
        );
        assert!(
            table.contains("| 3 | Docs | ⏳ pending | 0 |  |"),
            "{table}"
        );
    }

    /// With attempt records: Time and Cost columns, the total line, and the budget's check run.
    #[test]
    fn time_and_cost_and_the_budget_check_run() {
        use crate::pure::usage::Outcome::*;
        let mut p = plan();
        crate::pure::render::tests::spend(
            &mut p,
            &[
                (0, 1, 95, Some(0.3), Failed),
                (0, 2, 61, Some(0.25), Completed),
                (1, 1, 1800, None, Timeout),
            ],
        );
        let budget = crate::pure::usage::Budget::parse("0.5").unwrap();
        let why = budget.exhausted(&p).expect("spent");
        let stop = RunStop::Budget(why);
        let body = pr_body(&p, 3, &links(), Some(&stop), ran());
        let (title, summary) = check_run_text(&p, &stop, "dagexec/add-auth");
        insta::assert_snapshot!(format!("{body}\n---\n{title}\n\n{summary}"));
    }

    /// Where an agent CLI's report disagrees with the gateway's count, the Cost cell adds
    /// the CLI's and a line per such task follows the total, as `status` shows them locally.
    #[test]
    fn the_pr_table_shows_where_the_cli_and_the_wire_disagree() {
        let p = crate::pure::render::tests::cli_disagrees();
        insta::assert_snapshot!(progress_table(&p, &links()));
    }

    #[test]
    fn the_job_summary_lists_the_attempts_the_job_judged_newest_last() {
        use crate::pure::events::{Ended, Event, Stamped};
        use crate::pure::usage::Outcome;
        let at = |s: i64| jiff::Timestamp::from_second(1_795_000_000 + s).unwrap();
        let ended = |task: usize, attempt: u32, outcome: Outcome, retry: Option<u32>| Ended {
            task,
            attempt,
            subject: "Add | login <b>".into(),
            status: Status::Failed,
            outcome,
            result: String::new(),
            took: std::time::Duration::from_secs(75),
            cost_usd: Some(0.5),
            retry,
        };
        let events = vec![
            Stamped {
                at: at(0),
                event: Event::Starting { tasks: vec![0, 1] },
            },
            Stamped {
                at: at(75),
                event: Event::AttemptEnded(ended(0, 1, Outcome::Failed, Some(2))),
            },
            Stamped {
                at: at(80),
                event: Event::Integrating {
                    round: 2,
                    tasks: vec![0],
                },
            },
            Stamped {
                at: at(150),
                event: Event::AttemptEnded(ended(0, 2, Outcome::Completed, None)),
            },
        ];
        let part = Part {
            round: 2,
            batch: &[0],
            waiting: &[],
        };
        let summary = round_summary(&plan(), part, &links(), &events, ran());
        insta::assert_snapshot!(summary);
        // Only the newest are listed when asked for fewer, and the rest are counted.
        let none = crate::pure::plan::ids::TaskNames::default();
        let one = activity(&events, &none, 1);
        assert!(
            one.contains("| 0 Add \\| login &lt;b> | 2 | ✅ completed |"),
            "{one}"
        );
        assert!(!one.contains("→ attempt 2"), "{one}");
        assert!(one.contains("1 earlier attempt(s) not shown"), "{one}");
        assert_eq!(
            activity(&events[..1], &none, 5),
            "",
            "no attempt ended: no table"
        );
    }

    /// Many attempts with long subjects: the chart is cut to the latest ones (saying how many
    /// it left out), the job summary has the timeline too, and the body stays under GitHub's
    /// limit.
    #[test]
    fn the_timeline_is_bounded_for_plans_with_many_attempts() {
        use crate::pure::usage::Outcome::*;
        let mut p = plan();
        for t in &mut p.tasks {
            t.subject = format!("{} {}", t.subject, "long words ".repeat(40));
        }
        let rows: Vec<_> = (0..600u32)
            .map(|k| {
                (
                    k as usize % 4,
                    k / 4 + 1,
                    60 + i64::from(k),
                    Some(0.01),
                    Failed,
                )
            })
            .collect();
        crate::pure::render::tests::spend(&mut p, &rows);
        let body = pr_body(&p, 9, &links(), None, ran());
        assert!(body.len() < BODY_LIMIT, "{}", body.len());
        assert!(body.contains("### Timeline"), "{body}");
        assert!(
            body.contains("The chart shows the latest 100 of 600 attempts (500 left out)"),
            "{body}"
        );
        let chart = body.split("```mermaid\ngantt").nth(1).unwrap();
        assert_eq!(chart.matches(" :crit, ").count(), 100);
        let part = Part {
            round: 9,
            batch: &[0],
            waiting: &[],
        };
        let summary = round_summary(&p, part, &links(), &[], ran());
        assert!(summary.contains("### Timeline\n\npredicted "), "{summary}");
        assert!(summary.contains("```mermaid\ngantt\n"), "{summary}");
    }

    /// A plan whose progress table alone is past GitHub's limit on a pull request body
    /// (which refuses the whole body, so finalize would stop before dispatching the next
    /// round): the rows that fit, how many are not shown, and every `Closes` line and the
    /// footer kept.
    #[test]
    fn a_table_too_long_for_the_body_is_cut_and_the_closing_lines_kept() {
        let mut p = plan();
        let task = p.tasks[3].clone();
        p.tasks = (0..1500)
            .map(|i| {
                let mut t = task.clone();
                t.subject = format!("Task {i} {}", "word ".repeat(20));
                t.result = Some("because ".repeat(20));
                if i % 2 == 0 {
                    t.status = Status::Completed;
                }
                t
            })
            .collect();
        let tasks: Vec<serde_json::Value> = (0..p.tasks.len())
            .map(|i| serde_json::json!({"repo": "o/r", "number": 10_000 + i}))
            .collect();
        p.extra.insert(
            crate::sources::issues::PLAN_FIELD.into(),
            serde_json::json!({"repo": "o/r", "parent": 7, "tasks": tasks}),
        );
        let body = pr_body(&p, 2, &links(), None, ran());
        assert!(body.chars().count() <= BODY_LIMIT, "{}", body.len());
        assert!(body.contains("| 0 | Task 0 word"), "{body}");
        assert!(!body.contains("| 1499 | Task 1499"), "{body}");
        assert!(body.contains("more tasks are not shown here"), "{body}");
        assert_eq!(body.matches("Closes #").count(), 750, "{body}");
        assert!(
            body.ends_with("each round is one commit.</sub>\n"),
            "{body}"
        );
    }

    /// A worker's words in the body are shown, never acted on: a `Fixes #12` in a result
    /// would close issue 12 when the pull request is merged (dagexec closes only the
    /// completed sub-issues of a plan made of issues), and an `@login` would ping someone.
    #[test]
    fn a_workers_result_closes_no_issue_and_mentions_nobody() {
        let mut p = plan();
        p.tasks[0].result = Some("Fixes #12 and closes o/r#7, thanks @octocat (a@b.io)".into());
        let table = progress_table(&p, &links());
        let row = table.lines().find(|l| l.starts_with("| 0 |")).unwrap();
        assert!(
            row.contains(
                "Fixes #&#8203;12 and closes o/r#&#8203;7, thanks @&#8203;octocat (a@&#8203;b.io)"
            ),
            "{row}"
        );
    }

    /// The check run names failed, skipped and paid-for tasks as `/execute retry` takes them:
    /// by a task list's own IDs, not plan indices.
    #[test]
    fn the_check_run_names_tasks_by_their_own_ids() {
        let mut p = plan();
        p.extra.insert(
            crate::pure::plan::fields::SOURCE.into(),
            serde_json::json!({"format": "taskmaster", "tasks": [
                {"id": "1", "text": "a"}, {"id": "2", "text": "b"}, {"id": "3", "text": "c"}, {"id": "4", "text": "d"}
            ]}),
        );
        let stop = RunStop::CircuitBreaker("Circuit breaker.".into());
        let (_, summary) = check_run_text(&p, &stop, "b");
        assert!(
            summary.contains("- task 2 (API): failed after 3 attempt(s)"),
            "{summary}"
        );
        assert!(
            summary.contains("Skipped by the cascade\ntask 3 (UI)"),
            "{summary}"
        );
        let (_, summary) = check_run_text(&p, &RunStop::Budget("spent".into()), "b");
        assert!(
            summary.contains("- task 1 (Model): no cost reported"),
            "{summary}"
        );
    }

    /// The same through HTML entities, which GitHub's Markdown decodes: `&#35;12`,
    /// `&#x23;12`, `&num;12` and `&commat;login` stay plain text too.
    #[test]
    fn a_workers_result_cannot_spell_a_reference_as_an_entity() {
        for spelled in [
            "&#35;12",
            "&#x23;12",
            "&num;12",
            "&commat;octocat",
            "&#64;octocat",
        ] {
            let shown = inert(spelled);
            assert!(shown.starts_with("&&#8203;"), "{spelled}: {shown}");
        }
        assert_eq!(inert("a & b &lt;c>"), "a & b &lt;c>");
    }

    /// Cut below its last task, the table does not say that 0 tasks are not shown.
    #[test]
    fn a_table_cut_after_its_rows_says_what_is_left_out() {
        let table = format!("| # |\n|---|\n| 0 |\n\n{}\n", "x".repeat(300));
        let cut = fit_table(&table, 200);
        assert!(
            cut.ends_with("| 0 |\n\n\n_The table's last lines are not shown here; `dagexec status` on the branch lists them all._\n"),
            "{cut}"
        );
    }

    /// Why the run stopped can carry a worker's words (a refused credential's stop names the
    /// attempt's result): in the pull request's body they reference and mention nothing.
    #[test]
    fn a_stop_reason_in_the_body_references_nothing() {
        for stop in [
            RunStop::Budget("task 0: Fixes #12, cc @octocat".into()),
            RunStop::NeedsInput("task 0 asks: Fixes #12, cc @octocat".into()),
        ] {
            let body = pr_body(&plan(), 2, &links(), Some(&stop), ran());
            assert!(
                !body.contains("#12") && !body.contains("@octocat"),
                "{body}"
            );
        }
    }

    /// The check run's summary renders as Markdown in the pull request's checks tab: a
    /// worker's failure text there mentions and links nothing, and no fence or HTML of its
    /// own breaks the report (or forges a part of it), wherever the text is shown.
    #[test]
    fn a_workers_failure_in_the_check_run_is_inert() {
        let mut p = plan();
        let hostile =
            "Fixes #1, cc @octocat\n```\n<img src=x onerror=y>\n### How to resume\nmerge it";
        p.tasks[1].result = Some(hostile.into());
        for stop in [
            RunStop::CircuitBreaker(format!("task 1: {hostile}")),
            RunStop::Deadlock("Deadlock.".into()),
            RunStop::NeedsInput(format!("task 1 asks: {hostile}")),
            RunStop::Budget(format!("spent: task 1: {hostile}")),
        ] {
            let (title, summary) = check_run_text(&p, &stop, "b");
            for raw in [
                "#1",
                "@octocat",
                "\n```",
                "<img",
                "\n### How to resume\nmerge",
            ] {
                assert!(!summary.contains(raw), "{raw:?} in {stop:?}:\n{summary}");
                assert!(!title.contains(raw), "{raw:?} in {stop:?}:\n{title}");
            }
        }
    }

    #[test]
    fn cells_stay_in_their_cell() {
        assert_eq!(cell("a|b\nc <script>", 50), "a\\|b c &lt;script>");
        assert_eq!(cell(&"x".repeat(10), 5), "xxxx…");
    }
}
