//! The texts the seed has the lead display: round progress (Step 3e) and the completion
//! summary (Step 4), with follow-up recommendations when something did not complete.

use std::fmt::Write as _;

use crate::pure::plan::model::{Plan, Status};
use crate::pure::update::closing_line;

/// `Round {n}: {completed}/{in batch} tasks ({completed overall}/{task count} overall)` and
/// one `- Task {i}: {subject} — {status}` line per task of the batch (an empty batch, whose
/// arrivals all went back for a rebase, says that no task landed).
pub fn round_progress(plan: &Plan, round: u32, batch: &[usize]) -> String {
    let done = batch
        .iter()
        .filter(|&&i| plan.tasks[i].status == Status::Completed)
        .count();
    let overall = format!(
        "({}/{} overall)",
        plan.count(Status::Completed),
        plan.total()
    );
    let mut s = if batch.is_empty() {
        // Every arrival went back for a rebase (`overlap: merge`): the round only records
        // their attempts.
        format!("Round {round}: no task landed; attempts recorded {overall}")
    } else {
        format!("Round {round}: {done}/{} tasks {overall}", batch.len())
    };
    let spent = crate::pure::usage::per_task(plan);
    let names = crate::pure::plan::ids::TaskNames::of(plan);
    for &i in batch {
        let t = &plan.tasks[i];
        // A task list's own ID (`13.3`), else the plan index.
        let name = names.get(i);
        let _ = write!(
            s,
            "\n- Task {name}: {} — {}",
            names.subject(i, &t.subject),
            t.status
        );
        if let Some(spent) = spent.get(&i) {
            // `2m3s, $0.42` (the cost left out when none was reported).
            let cost = spent.cost_usd.map(crate::pure::usage::money);
            let cost = cost.map(|c| format!(", {c}")).unwrap_or_default();
            let _ = write!(s, " ({}{cost})", spent.time_text());
        }
    }
    s.push('\n');
    if let Some(total) = crate::pure::usage::total_line(plan) {
        let _ = writeln!(s, "So far: {total}");
    }
    s
}

/// The Step 4 summary: counts with the subjects of what did not complete, follow-up
/// recommendations, and the closing line ("All N tasks completed." or "Execution
/// incomplete. x/N completed.").
pub fn final_summary(plan: &Plan) -> String {
    final_summary_for(plan, Audience::Terminal)
}

/// Who reads a summary, and so which commands its recommendations name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// Someone at the terminal: `dagexec retry N`, `dagexec answer N …`.
    Terminal,
    /// The pull request: `/execute retry N`, `/execute answer N …` comments.
    PullRequest,
}

impl Audience {
    /// How this reader gives the command: `dagexec retry 1` / comment `/execute retry 1`.
    fn command(self, verb_and_args: &str) -> String {
        match self {
            Audience::Terminal => format!("`dagexec {verb_and_args}`"),
            Audience::PullRequest => format!("comment `/execute {verb_and_args}`"),
        }
    }
}

/// When nothing is left to run but not every task completed: what waits and why, and the
/// one command that moves each failed or blocked task — never "nothing to do" while tasks
/// are skipped. `None` when every task is completed.
pub fn nothing_runs(plan: &Plan) -> Option<String> {
    let stuck: Vec<usize> = (0..plan.tasks.len())
        .filter(|&i| {
            !plan.tasks[i].join && matches!(plan.tasks[i].status, Status::Failed | Status::Blocked)
        })
        .collect();
    let skipped: Vec<&str> = plan
        .tasks
        .iter()
        .filter(|t| t.status == Status::Skipped && !t.join)
        .map(|t| t.subject.as_str())
        .collect();
    if stuck.is_empty() && skipped.is_empty() {
        return None;
    }
    let mut s = String::from("Nothing can run now:");
    let names = crate::pure::plan::ids::TaskNames::of(plan);
    for &index in &stuck {
        let t = &plan.tasks[index];
        let result = t.result.as_deref().unwrap_or("no result recorded");
        // A task list's own ID (`13.3`), else the plan index: what `retry` and `answer` take.
        let i = names.get(index);
        let _ = match t.status {
            Status::Failed => write!(
                s,
                "\n- task {i} ({}) failed after {} attempt(s): {result}. Run it again with `dagexec retry {i}`, or settle it in the task list (done, cancelled) and run again.",
                names.subject(index, &t.subject),
                plan.attempts_of(index)
            ),
            _ => write!(
                s,
                "\n- task {i} ({}) is blocked: {result}. Answer it with `dagexec answer {i} …`, or settle it in the task list (done, cancelled) and run again.",
                names.subject(index, &t.subject)
            ),
        };
    }
    if !skipped.is_empty() {
        let _ = write!(
            s,
            "\n- {} task(s) wait for them (skipped): {}.",
            skipped.len(),
            skipped.join(", ")
        );
    }
    Some(s)
}

/// [`final_summary`] for `reader`.
pub fn final_summary_for(plan: &Plan, reader: Audience) -> String {
    let mut s = format!("Completed: {}\n", plan.count(Status::Completed));
    for (label, status) in [
        ("Failed", Status::Failed),
        ("Blocked", Status::Blocked),
        ("Skipped", Status::Skipped),
    ] {
        let subjects: Vec<&str> = plan
            .tasks
            .iter()
            .filter(|t| t.status == status && !t.join)
            .map(|t| t.subject.as_str())
            .collect();
        if subjects.is_empty() {
            let _ = writeln!(s, "{label}: 0");
        } else {
            let _ = writeln!(s, "{label}: {} — {}", subjects.len(), subjects.join(", "));
        }
    }
    if let Some(total) = crate::pure::usage::total_line(plan) {
        let _ = writeln!(s, "Time and cost: {total}");
    }
    s.push_str(&crate::pure::usage::mismatch_lines(plan));
    let follow = follow_ups(plan, reader);
    if !follow.is_empty() {
        s.push_str("\nFollow-up recommendations:\n");
        for f in follow {
            let _ = writeln!(s, "- {f}");
        }
    }
    s.push('\n');
    s.push_str(&closing_line(plan));
    s.push('\n');
    s
}

fn follow_ups(plan: &Plan, reader: Audience) -> Vec<String> {
    let mut out = Vec::new();
    let again = match reader {
        Audience::Terminal => " and run again",
        Audience::PullRequest => "; it starts the next round",
    };
    let names = crate::pure::plan::ids::TaskNames::of(plan);
    for (index, t) in plan.tasks.iter().enumerate().filter(|(_, t)| !t.join) {
        let result = t.result.as_deref().unwrap_or("no result recorded");
        // A task list's tasks go by its own IDs (`dagexec retry 13.3`, `/execute retry
        // 13.3`), a plan.json's by their index.
        let i = names.get(index);
        let retry = reader.command(&format!("retry {i}"));
        let answer = reader.command(&format!("answer {i} …"));
        match t.status {
            Status::Failed => out.push(format!(
                "Task {i} ({}) failed after {} attempt(s): {result}. Fix the cause, then {retry}{again}.",
                names.subject(index, &t.subject),
                plan.attempts_of(index)
            )),
            Status::Blocked if crate::pure::question::get(t).is_some_and(|q| q.reply.is_none()) => {
                out.push(format!(
                    "Task {i} ({}) is blocked: {result}. It asks you a question (below): answer it with {answer}{again}; the tasks skipped because of it run too.",
                    names.subject(index, &t.subject)
                ));
            }
            Status::Blocked => out.push(format!(
                "Task {i} ({}) is blocked: {result}. Tell it what it needs with {answer}, or resolve that, then {retry}{again}.",
                names.subject(index, &t.subject)
            )),
            Status::Skipped if crate::pure::question::deferred(t) => out.push(format!(
                "Task {i} ({}) was deferred (your answer `defer`): it is skipped. Set it back to \"pending\" to run it.",
                names.subject(index, &t.subject)
            )),
            _ => {}
        }
    }
    out.extend(skipped_lines(plan));
    let pending = plan.count(Status::Pending);
    if pending > 0 {
        out.push(format!(
            "{pending} task(s) did not start; running again resumes from the plan as it stands."
        ));
    }
    // Attempts the stop left running (eager: the breaker ends a run with work in flight).
    let running = plan.count(Status::InProgress);
    if running > 0 {
        out.push(format!(
            "{running} task(s) were still in progress when the run stopped; running again picks them up (on GitHub, their runs in flight are adopted)."
        ));
    }
    out
}
/// What the summary says of the skipped tasks that wait (behind a deferred task, taken out by
/// an edit of the task list during the run, behind a failure), as counts.
fn skipped_lines(plan: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    let after_deferred = |t: &&&crate::pure::plan::model::Task| {
        t.result
            .as_deref()
            .is_some_and(|r| r.ends_with("was deferred by the user"))
    };
    let waiting: Vec<_> = plan
        .tasks
        .iter()
        .filter(|t| t.status == Status::Skipped && !t.join && !crate::pure::question::deferred(t))
        .collect();
    let behind = waiting.iter().filter(after_deferred).count();
    if behind > 0 {
        out.push(format!(
            "{behind} task(s) were skipped because a task they depend on was deferred; set them back to \"pending\" with it."
        ));
    }
    let withdrawn = waiting
        .iter()
        .filter(|t| {
            t.result
                .as_deref()
                .is_some_and(|r| r.starts_with(crate::pure::update::NOT_RUN))
        })
        .count();
    if withdrawn > 0 {
        out.push(format!(
            "{withdrawn} task(s) were not run because the task list, edited during the run, takes them (or what they wait for) out; commit the edit, or undo it, and run again."
        ));
    }
    let skipped = waiting.len() - behind - withdrawn;
    if skipped > 0 {
        out.push(format!(
            "{skipped} task(s) were skipped because a dependency failed or was blocked; they are pending again when the task they depend on is retried or answered."
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        crate::pure::plan::parse(
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/examples/auth-v2.json"
            )),
            std::path::Path::new("x"),
        )
        .unwrap()
    }

    /// A task list's round progress names its tasks by the list's IDs, as `status` does.
    #[test]
    fn round_progress_names_a_task_lists_tasks_by_their_ids() {
        let mut plan = plan();
        let ids: Vec<serde_json::Value> = (0..plan.tasks.len())
            .map(|i| serde_json::json!({"id": format!("7.{}", i + 1), "text": "t"}))
            .collect();
        plan.extra.insert(
            crate::pure::plan::fields::SOURCE.into(),
            serde_json::json!({"format": "taskmaster", "tasks": ids}),
        );
        plan.tasks[1].status = Status::Completed;
        let text = round_progress(&plan, 1, &[1]);
        assert!(
            text.contains(&format!(
                "\n- Task 7.2: {} — completed",
                plan.tasks[1].subject
            )),
            "{text}"
        );
    }

    #[test]
    fn tasks_still_running_are_not_said_never_to_have_started() {
        let mut plan = plan();
        plan.tasks[0].status = Status::InProgress;
        let text = final_summary(&plan);
        let pending = plan.count(Status::Pending);
        assert!(
            text.contains(&format!("{pending} task(s) did not start")),
            "{text}"
        );
        assert!(
            text.contains("1 task(s) were still in progress when the run stopped"),
            "{text}"
        );
    }

    #[test]
    fn time_and_cost_when_recorded() {
        let plan = crate::pure::render::tests::auth_v2_spent();
        assert_eq!(
            round_progress(&plan, 2, &[0, 1, 3]),
            "Round 2: 1/3 tasks (1/6 overall)\n- Task 0: Create user model — completed (2m3s, $0.42)\n- Task 1: Add password hashing helper — failed (31m30s, $1.35)\n- Task 3: Implement session middleware — in_progress\nSo far: 5 attempt(s) · 33m43s of work · $1.77\n"
        );
        assert!(
            final_summary(&plan)
                .contains("\nTime and cost: 5 attempt(s) · 33m43s of work · $1.77\n"),
            "{}",
            final_summary(&plan)
        );
    }

    #[test]
    fn round_progress_lines() {
        let mut p = plan();
        p.tasks[0].status = Status::Completed;
        p.tasks[1].status = Status::Failed;
        p.tasks[5].status = Status::Completed;
        assert_eq!(
            round_progress(&p, 1, &[0, 1, 5]),
            "Round 1: 2/3 tasks (2/6 overall)\n- Task 0: Create user model — completed\n- Task 1: Add password hashing helper — failed\n- Task 5: Research rate limiting options — completed\n"
        );
    }

    /// Every arrival of an eager batch went back for a rebase: not "0/0 tasks".
    #[test]
    fn a_round_where_no_task_landed_says_so() {
        let mut p = plan();
        p.tasks[0].status = Status::Completed;
        assert_eq!(
            round_progress(&p, 4, &[]),
            "Round 4: no task landed; attempts recorded (1/6 overall)\n"
        );
    }

    #[test]
    fn summaries() {
        let mut p = plan();
        for t in &mut p.tasks {
            t.status = Status::Completed;
        }
        insta::assert_snapshot!("all_completed", final_summary(&p));
        p.tasks[1].status = Status::Failed;
        p.tasks[1].attempts = Some(3);
        p.tasks[1].result = Some("acceptance check failed: `npm test -- password`: FAIL".into());
        p.tasks[2].status = Status::Skipped;
        p.tasks[4].status = Status::Skipped;
        p.tasks[5].status = Status::Blocked;
        p.tasks[5].result = Some("needs a decision between Redis and in-memory".into());
        p.tasks[3].status = Status::Pending;
        insta::assert_snapshot!("incomplete", final_summary(&p));
    }

    /// Where an agent CLI's own report disagrees with the gateway's count, the summary says
    /// so under its time and cost, task by task.
    #[test]
    fn a_summary_shows_where_the_cli_and_the_gateway_disagree() {
        let p = crate::pure::render::tests::cli_disagrees();
        insta::assert_snapshot!(final_summary(&p));
    }
}
