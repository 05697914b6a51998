//! The seed's executor prompt (one fresh worker per PLAN.md), its resume state from the
//! plan's checkpoint, and the `NN-SUMMARY.md` written when a plan completes. Pure.

use std::fmt::Write as _;

use serde_json::Value;

use super::output::Completed;

/// Replaced at spawn time by the "Resume State" text (see [`resume_state`]).
pub const RESUME_STATE: &str = "{{resume_state}}";
/// Replaced at spawn time by the task number the worker starts from.
pub const RESUME_FROM_TASK: &str = "{{resume_from_task}}";

/// What the executor prompt is built from (the seed's `buildExecutorPrompt` inputs).
#[derive(Debug, Clone, Copy)]
pub struct PromptInput<'a> {
    pub plan_content: &'a str,
    pub plan_number: &'a str,
    pub spec_content: &'a str,
    pub requirements: &'a str,
    pub tasks_md_path: &'a str,
    pub checkpoint_path: &'a str,
    pub issues_path: &'a str,
}

/// The seed's executor prompt template, filled in, with [`RESUME_STATE`] and
/// [`RESUME_FROM_TASK`] left for spawn time (the checkpoint changes as plans run).
pub fn executor_prompt(i: &PromptInput<'_>) -> String {
    format!(
        "You are a long-run-executor subagent. Execute this plan with minimal stops.

## Plan to Execute

{plan}

## Context

### Spec
{spec}

### Requirements
{requirements}

## Paths

- tasks.md: {tasks}
- checkpoint: {checkpoint}
- issues: {issues}

## Resume State

{RESUME_STATE}

## Instructions

1. Execute tasks sequentially starting from Task {RESUME_FROM_TASK}
2. Apply deviation rules:
   - Rules 1-3: Auto-fix and continue (log what you fixed)
   - Rule 4: STOP immediately and return NEEDS_DECISION
   - Rule 5: Log to ISSUES.md, continue
3. After each task completes:
   - Stage ONLY files listed in <files>
   - Commit: \"{{type}}({number}): {{task-name}}\"
   - Update checkpoint file at {checkpoint}
   - Mark complete in tasks.md
4. On completion or stop, output status between OUTPUT_JSON_START/END markers

## Output Format

Your final output MUST include:

```
OUTPUT_JSON_START
{{
  \"status\": \"COMPLETED\" | \"NEEDS_DECISION\" | \"NEEDS_ACTION\" | \"FAILED\",
  ... status-specific fields
}}
OUTPUT_JSON_END
```

Begin execution now.
",
        plan = i.plan_content.trim_end(),
        spec = i.spec_content.trim_end(),
        requirements = i.requirements.trim_end(),
        tasks = i.tasks_md_path,
        checkpoint = i.checkpoint_path,
        issues = i.issues_path,
        number = i.plan_number,
    )
}

/// The seed's Resume State and the task to start from: with a checkpoint,
/// `last_completed_task + 1` and the checkpoint itself; without one (or an unreadable one), Task 1.
pub fn resume_state(checkpoint: Option<&str>) -> (String, u64) {
    let Some(text) = checkpoint else {
        return ("Starting fresh from Task 1.".into(), 1);
    };
    match serde_json::from_str::<Value>(text) {
        Ok(v) => {
            let next = v
                .get("last_completed_task")
                .and_then(|n| {
                    n.as_u64()
                        .or_else(|| n.as_str().and_then(|s| s.trim().parse().ok()))
                })
                .map_or(1, |n| n + 1);
            (
                format!(
                    "Resuming from checkpoint. Skip to Task {next}.\nPrevious progress:\n{}",
                    text.trim_end()
                ),
                next,
            )
        }
        Err(e) => (
            format!(
                "Starting fresh from Task 1. (The checkpoint file is not valid JSON and was ignored: {e}.)"
            ),
            1,
        ),
    }
}

/// The prompt with its resume placeholders filled in from the checkpoint's text.
pub fn with_resume_state(prompt: &str, checkpoint: Option<&str>) -> String {
    let (state, next) = resume_state(checkpoint);
    prompt
        .replacen(RESUME_STATE, &state, 1)
        .replace(RESUME_FROM_TASK, &next.to_string())
}

/// `NN-SUMMARY.md` for a completed plan (the seed's summary fields), with `status:
/// completed` in its front matter so a later run skips the plan.
pub fn summary_markdown(number: &str, title: &str, c: &Completed) -> String {
    let mut s = format!(
        "---\nplan: \"{number}\"\nstatus: completed\n---\n# {}\n",
        heading(number, title)
    );
    if !c.summary.is_empty() {
        let _ = write!(s, "\n{}\n", c.summary);
    }
    for (heading, items) in [
        ("Tasks completed", &c.tasks_completed),
        ("Commits", &c.commits),
        ("Files modified", &c.files_modified),
        ("Deviations", &c.deviations),
    ] {
        let _ = write!(s, "\n## {heading}\n");
        if items.is_empty() {
            s.push_str("- (none)\n");
        }
        for i in items {
            let _ = writeln!(s, "- {i}");
        }
    }
    s
}

/// `NN-SUMMARY.md` for a plan whose decision the user deferred (the seed's "Create skipped
/// summary"), with `status: skipped` in its front matter: a later run skips the plan.
pub fn skipped_summary_markdown(
    number: &str,
    title: &str,
    q: &crate::pure::question::Question,
) -> String {
    let mut s = format!(
        "---\nplan: \"{number}\"\nstatus: skipped\n---\n# {}\n\nSkipped: the user deferred the decision",
        heading(number, title)
    );
    if let Some(at) = &q.blocked_at {
        let _ = write!(s, " at {at}");
    }
    s.push_str(" (logged in ISSUES.md).\n\n## Decision deferred\n");
    let _ = writeln!(s, "{}", q.text.trim_end());
    for c in &q.options {
        let _ = writeln!(s, "- {}: {}", c.key, c.description);
    }
    s
}

/// The `ISSUES.md` entry for a deferred decision (the seed's "Log to ISSUES.md").
pub fn deferred_issue(number: &str, title: &str, q: &crate::pure::question::Question) -> String {
    let mut s = format!("\n## Plan {number} ({title}): decision deferred\n");
    if let Some(at) = &q.blocked_at {
        let _ = writeln!(s, "- Blocked at: {at}");
    }
    let _ = writeln!(
        s,
        "- Decision needed: {}",
        q.text.trim_end().replace('\n', " ")
    );
    if !q.options.is_empty() {
        let options: Vec<String> = q
            .options
            .iter()
            .map(|c| format!("{} ({})", c.key, c.description))
            .collect();
        let _ = writeln!(s, "- Options: {}", options.join(", "));
    }
    s.push_str("- The user deferred it; the plan was skipped and the run continued.\n");
    s
}

/// `Plan NN: title`, unless the title already starts with `Plan NN` (a PLAN.md headed
/// `# Plan 01: Models` gives the title `Plan 01: Models`, not `Plan 01: Plan 01: Models`).
pub fn heading(number: &str, title: &str) -> String {
    let named = title
        .get(..4)
        .filter(|w| w.eq_ignore_ascii_case("plan"))
        .and_then(|_| {
            let rest = title[4..].trim_start();
            let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            let n = &rest[..digits];
            let after = &rest[digits..];
            let same = !n.is_empty() && n.parse::<u64>().ok() == number.parse::<u64>().ok();
            (same && (after.is_empty() || after.starts_with([':', ' ', '-', '.', '\u{2014}'])))
                .then_some(())
        })
        .is_some();
    if named {
        title.to_string()
    } else {
        format!("Plan {number}: {title}")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_title_naming_its_plan_is_not_prefixed_again() {
        assert_eq!(heading("01", "Plan 01: models"), "Plan 01: models");
        assert_eq!(heading("01", "plan 1 - models"), "plan 1 - models");
        assert_eq!(heading("01", "Plan 01"), "Plan 01");
        assert_eq!(heading("01", "models"), "Plan 01: models");
        assert_eq!(heading("01", "Plan 012: other"), "Plan 01: Plan 012: other");
        assert_eq!(heading("02", "Plan 01: models"), "Plan 02: Plan 01: models");
        assert_eq!(heading("01", "Planning"), "Plan 01: Planning");
        let c = Completed {
            summary: String::new(),
            tasks_completed: vec![],
            commits: vec![],
            files_modified: vec![],
            deviations: vec![],
        };
        assert!(summary_markdown("01", "Plan 01: models", &c).contains("\n# Plan 01: models\n"));
    }

    use super::*;

    #[test]
    fn resume_from_a_checkpoint() {
        assert_eq!(resume_state(None).1, 1);
        let (text, next) = resume_state(Some("{\"last_completed_task\": 2}"));
        assert_eq!(next, 3);
        assert!(
            text.starts_with("Resuming from checkpoint. Skip to Task 3.\nPrevious progress:\n{")
        );
        let (text, next) = resume_state(Some("{nope"));
        assert_eq!(next, 1);
        assert!(text.contains("not valid JSON"), "{text}");
        let p = with_resume_state(
            "a {{resume_state}} b Task {{resume_from_task}}",
            Some("{\"last_completed_task\":\"4\"}"),
        );
        assert!(p.ends_with("b Task 5"), "{p}");
    }

    #[test]
    fn snapshot_prompt_and_summary() {
        let p = executor_prompt(&PromptInput {
            plan_content: "# Plan 02: API\n\n<task>1. Add the route</task>\n",
            plan_number: "02",
            spec_content: "# Spec\nA todo API.",
            requirements: "- must be fast",
            tasks_md_path: ".long-run/spec/tasks.md",
            checkpoint_path: ".long-run/plans/02-CHECKPOINT.json",
            issues_path: ".long-run/ISSUES.md",
        });
        insta::assert_snapshot!("executor_prompt", with_resume_state(&p, None));
        let c = Completed {
            summary: "Added the route".into(),
            tasks_completed: vec!["1".into(), "2".into()],
            commits: vec!["abc123".into()],
            files_modified: vec!["src/api.rs".into()],
            deviations: vec![],
        };
        insta::assert_snapshot!("summary", summary_markdown("02", "API", &c));
    }
}
