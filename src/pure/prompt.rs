//! Worker prompts, assembled exactly as the seed's setup sub-agent does (Step 5, sections
//! S1–S9), the dependency-results block the lead substitutes for the S6 placeholder at spawn
//! time, and the processor's retry prompt.
//!
//! v3 tasks carry their own `prompt`, which is used as is.

use std::fmt::Write as _;

use crate::pure::plan::model::{Plan, Status, Task};

/// The S6 placeholder line, replaced at spawn time.
pub const DEPENDENCY_PLACEHOLDER: &str =
    "[Dependency results — deferred: lead appends actual results at spawn time]";

/// Which variant of the seed's wording to use in S8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Unit {
    /// "after the batch completes" (ready-set rounds, v2 and v3).
    #[default]
    Batch,
    /// "after the wave completes" (seed 001).
    Wave,
}

/// The task's prompt with the S6 placeholder still in place: its v3 `prompt` field if it has
/// one, else the 9 sections assembled from the task's fields.
pub fn original_prompt(plan: &Plan, index: usize, unit: Unit) -> String {
    let task = &plan.tasks[index];
    match &task.prompt {
        Some(p) if !p.trim().is_empty() => p.clone(),
        _ => assemble(plan, index, unit),
    }
}

/// S3: the files to read, the project's stack, conventions, test command and tools.
fn context_section(plan: &Plan, task: &Task) -> String {
    let mut s3 = String::from("## Context\nRead before implementing:");
    for c in task.context_files() {
        let _ = write!(s3, "\n- {} — {}", c.path, c.reason);
    }
    let ctx = plan.context.clone().unwrap_or_default();
    let _ = write!(
        s3,
        "\nProject: {}. Conventions: {}.",
        ctx.stack.as_deref().unwrap_or(""),
        ctx.conventions.as_deref().unwrap_or("")
    );
    if let Some(t) = ctx.test_command.as_deref().filter(|t| !t.is_empty()) {
        let _ = write!(s3, "\nTest: {t}");
    }
    if let Some(lsp) = ctx.lsp.as_ref().filter(|l| !l.available.is_empty()) {
        let _ = write!(
            s3,
            "\nUse LSP (goToDefinition, findReferences, hover) over Grep for {}.",
            lsp.available.join(", ")
        );
    }
    if task.kind() == Some("research") {
        s3.push_str("\nUse WebSearch/WebFetch for current information. Prefer web tools over assumptions when external facts are needed.");
    }
    s3
}

/// S8: the acceptance criteria to verify, and no commit.
fn after_section(task: &Task, unit: Unit) -> String {
    let mut s8 = String::from("## After implementing\n1. Verify acceptance criteria:");
    for c in task.acceptance_criteria() {
        let _ = write!(s8, "\n- [ ] {}: `{}`", c.criterion, c.check);
    }
    s8.push_str("\n   Fix failures before proceeding.");
    let _ = write!(
        s8,
        "\n2. Do NOT stage or commit — the lead handles git after the {} completes.",
        match unit {
            Unit::Batch => "batch",
            Unit::Wave => "wave",
        }
    );
    s8
}

/// The 9-section worker prompt (S1–S9); conditional sections are left out when empty.
pub fn assemble(plan: &Plan, index: usize, unit: Unit) -> String {
    let task = &plan.tasks[index];
    let agent = task.agent.clone().unwrap_or_default();
    let mut sections: Vec<String> = Vec::new();

    // S1: role line.
    let mut s1 = format!("You are a {}", agent.role);
    if let Some(e) = agent.expertise.as_deref().filter(|e| !e.is_empty()) {
        let _ = write!(s1, " with expertise in {e}");
    }
    sections.push(s1);

    // S2: pre-flight.
    let mut s2 = String::from(
        "## Pre-flight\nVerify before starting. If BLOCKING check fails, return BLOCKED: followed by the reason.",
    );
    for a in task.assumptions() {
        let _ = write!(s2, "\n- [ ] [{}] {}: `{}`", a.severity, a.claim, a.verify);
    }
    sections.push(s2);

    // S3: context.
    sections.push(context_section(plan, task));

    // S4: task.
    let mut s4 = format!(
        "## Task: {}\n{}\nFiles to create: {}\nFiles to modify: {}",
        task.subject,
        task.description.as_deref().unwrap_or(""),
        list_or_none(task.creates()),
        list_or_none(task.modifies()),
    );
    if !task.scope().is_empty() {
        let _ = write!(
            s4,
            "\nFiles it may change (its scope; none of them has to change): {}",
            task.scope().join(", ")
        );
    }
    if !agent.constraints().is_empty() {
        s4.push_str("\nConstraints:");
        for c in agent.constraints() {
            let _ = write!(s4, "\n- {c}");
        }
    }
    sections.push(s4);

    // S5: strategy lines.
    let mut s5: Vec<String> = Vec::new();
    for (label, v) in [
        ("Approach", &agent.approach),
        ("Apply", &agent.prior_art),
        ("Fallback", &agent.fallback),
    ] {
        if let Some(v) = v.as_deref().filter(|v| !v.trim().is_empty()) {
            s5.push(format!("{label}: {v}"));
        }
    }
    if !s5.is_empty() {
        sections.push(s5.join("\n"));
    }

    // S6: dependency results placeholder.
    if !task.blocked_by.is_empty() {
        sections.push(DEPENDENCY_PLACEHOLDER.to_string());
    }

    // S7: rollback triggers.
    let mut s7 = String::from("Rollback triggers — STOP immediately if any occur:");
    for r in agent.rollback_triggers() {
        let _ = write!(s7, "\n- {r}");
    }
    sections.push(s7);

    // S8: post-implementation.
    sections.push(after_section(task, unit));

    // S9: output format, verbatim.
    sections.push(output_format(index));

    let mut out = sections.join("\n\n");
    out.push('\n');
    out
}

fn list_or_none(files: &[String]) -> String {
    if files.is_empty() {
        "(none)".to_string()
    } else {
        files.join(", ")
    }
}

fn output_format(index: usize) -> String {
    format!(
        "## After implementing (continued)
3. Write your full work log (reasoning, commands run, decisions made, issues encountered) to `.design/worker-{index}.log` using the Write tool. This log is consumed by the result processor — include enough detail for verification.

## Output format
The FINAL line of your output MUST be one of:
- COMPLETED: {{one-line summary}}
- FAILED: {{one-line reason}}
- BLOCKED: {{reason}}

Return ONLY the status line as your final output. All detailed work output goes in the log file above.

Example valid outputs:
...writing log.\\nCOMPLETED: Added user authentication middleware with JWT
...writing log.\\nBLOCKED: Required package pg not installed"
    )
}

/// The block the lead builds from completed results (seed 3b.2):
/// `Dependency results (from prior tasks):` and one `- Task {index}: {result}` per blocker
/// (a task list's blockers by their own IDs: `- Task T004: …`), looking through a join to
/// the tasks it joins. `None` when the task has no blockers.
pub fn dependency_results(plan: &Plan, task: &Task) -> Option<String> {
    if task.blocked_by.is_empty() {
        return None;
    }
    // A join's results are those of the tasks it joins (`pure::join::through`).
    let deps: Vec<usize> = crate::pure::join::through(plan, &task.blocked_by);
    let names = crate::pure::plan::ids::TaskNames::of(plan);
    let mut s = String::from("Dependency results (from prior tasks):");
    for d in deps {
        let result = plan
            .tasks
            .get(d)
            .filter(|t| t.status == Status::Completed)
            .and_then(|t| t.result.as_deref())
            .unwrap_or("(no result recorded)");
        let _ = write!(s, "\n- Task {}: {result}", names.get(d));
    }
    Some(s)
}

/// Replaces the placeholder line with the dependency results. A prompt without the
/// placeholder (e.g. a hand-written v3 prompt) gets the block appended at the end instead,
/// so the worker always sees its blockers' results.
pub fn resolve_dependencies(prompt: &str, results: Option<&str>) -> String {
    let Some(results) = results else {
        return prompt.to_string();
    };
    if prompt.contains(DEPENDENCY_PLACEHOLDER) {
        prompt.replacen(DEPENDENCY_PLACEHOLDER, results, 1)
    } else {
        format!("{}\n\n{results}\n", prompt.trim_end())
    }
}

/// The prompt a worker receives at spawn time: `base` (the original or a retry prompt) with
/// the task's dependency results in place of the placeholder.
pub fn spawn_prompt(plan: &Plan, index: usize, base: &str) -> String {
    let results = dependency_results(plan, &plan.tasks[index]);
    resolve_dependencies(base, results.as_deref())
}

/// `text` as a fenced block (info string `info`) that nothing in it can close: the fence is
/// a run of backticks longer than any run in the text (three at least), so no line of the
/// text — a `## Rebase` heading, a `COMPLETED:` line, a fence of its own — can be read as
/// part of the prompt around it.
pub fn fenced(text: &str, info: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat((longest + 1).max(3));
    format!("{fence}{info}\n{}\n{fence}", text.trim_end_matches('\n'))
}

/// A failed acceptance check, as the retry prompt lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedCheck {
    pub criterion: String,
    pub check: String,
    pub output: String,
}

/// The processor's retry prompt (seed B.3 step 6): the original prompt, the retry-context
/// block, the fallback line when the task has a fallback, and the failed acceptance checks
/// when that is why the attempt failed. `next_attempt` is `attempts + 1`.
pub fn retry_prompt(
    original: &str,
    next_attempt: u32,
    reason: &str,
    fallback: Option<&str>,
    failed_checks: &[FailedCheck],
) -> String {
    let mut s = original.trim_end().to_string();
    let _ = write!(
        s,
        "\n\n## Retry context\nThis is attempt {next_attempt} of 3. The previous attempt failed.\n\nPrevious failure reason:\n{reason}"
    );
    if let Some(f) = fallback {
        let _ = write!(
            s,
            "\n\nIMPORTANT: The primary approach failed. Use this strategy instead: {f}"
        );
    }
    if !failed_checks.is_empty() {
        s.push_str("\n\nThe following acceptance checks failed — ensure they pass before reporting COMPLETED:");
        for c in failed_checks {
            let _ = write!(s, "\n- `{}` ({})", c.check, c.criterion);
            let out = c.output.trim_end();
            if out.is_empty() {
                s.push_str("\n  (no output)");
            } else {
                for line in out.lines() {
                    let _ = write!(s, "\n  {line}");
                }
            }
        }
    }
    s.push('\n');
    s
}

/// A rebase attempt's prompt (`overlap: merge`): the original prompt, then which tasks'
/// changes the attempt starts from and must build on, and what went wrong when its earlier
/// attempt was merged (a conflict as git left it, or a check that failed on the merged
/// tree). `why` is untrusted text (file contents, check output): made plain and bounded.
pub fn rebase_prompt(original: &str, onto: &[(usize, &str)], why: &str) -> String {
    const SHOWN: usize = 6000;
    let mut s = original.trim_end().to_string();
    let tasks: Vec<String> = onto
        .iter()
        .map(|(i, subject)| format!("task {i} ({})", crate::pure::sanitize::line(subject)))
        .collect();
    let tasks = if tasks.is_empty() {
        "the tasks integrated before it".to_string()
    } else {
        tasks.join(", ")
    };
    let _ = write!(
        s,
        "\n\n## Rebase\nYour previous change was made beside other work on the same files and could not be integrated as it was. This attempt starts from the integrated tree, which already holds the change of {tasks}: build on it — keep that change and make yours again on top of it. This rebase does not count as a failed attempt.\n\nWhat happened when your change was merged:"
    );
    let why = crate::pure::sanitize::text(why);
    let cut: String = why.chars().take(SHOWN).collect();
    for line in cut.trim_end().lines() {
        let _ = write!(s, "\n  {line}");
    }
    if cut.len() < why.len() {
        s.push_str("\n  […]");
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::example;

    #[test]
    fn v2_prompts_snapshot() {
        let plan = example("auth-v2.json");
        for i in 0..plan.tasks.len() {
            insta::assert_snapshot!(
                format!("auth_v2_task_{i}"),
                original_prompt(&plan, i, Unit::Batch)
            );
        }
    }

    #[test]
    fn waves_wording_and_v3_prompt_field() {
        let plan = example("auth-v2-waves.json");
        assert!(
            original_prompt(&plan, 0, Unit::Wave)
                .contains("the lead handles git after the wave completes.")
        );
        let v3 = example("auth-v3.json");
        assert_eq!(
            original_prompt(&v3, 0, Unit::Batch),
            v3.tasks[0].prompt.clone().unwrap()
        );
    }

    /// The seed's S1 is `You are a {agent.role}` + ` with expertise in {agent.expertise}`,
    /// nothing after it (issue 12 §6).
    #[test]
    fn the_role_line_is_the_seeds_template_exactly() {
        let plan = example("auth-v2.json");
        let p0 = original_prompt(&plan, 0, Unit::Batch);
        assert_eq!(
            p0.lines().next(),
            Some("You are a backend engineer with expertise in Prisma schema design")
        );
        let mut bare = plan.clone();
        bare.tasks[0].agent.as_mut().unwrap().expertise = None;
        let p = original_prompt(&bare, 0, Unit::Batch);
        assert_eq!(p.lines().next(), Some("You are a backend engineer"));
    }

    #[test]
    fn conditional_sections() {
        let plan = example("auth-v2.json");
        let p5 = original_prompt(&plan, 5, Unit::Batch);
        assert!(
            p5.contains("Use WebSearch/WebFetch"),
            "research task gets the web line"
        );
        assert!(
            !p5.contains("Approach:"),
            "no strategy lines without fields"
        );
        assert!(
            !p5.contains(DEPENDENCY_PLACEHOLDER),
            "no S6 without blockers"
        );
        assert!(!p5.contains("Constraints:"));
        let p2 = original_prompt(&plan, 2, Unit::Batch);
        assert!(p2.contains(DEPENDENCY_PLACEHOLDER));
        assert!(!original_prompt(&plan, 0, Unit::Batch).contains("WebSearch"));
    }

    #[test]
    fn dependency_results_replace_the_placeholder() {
        let mut plan = example("auth-v2.json");
        plan.tasks[0].status = Status::Completed;
        plan.tasks[0].result = Some("User model added".into());
        plan.tasks[1].status = Status::Completed;
        plan.tasks[1].result = Some("bcrypt helper added".into());
        let base = original_prompt(&plan, 2, Unit::Batch);
        let p = spawn_prompt(&plan, 2, &base);
        assert!(!p.contains(DEPENDENCY_PLACEHOLDER));
        assert!(p.contains("Dependency results (from prior tasks):\n- Task 0: User model added\n- Task 1: bcrypt helper added\n"));
        // Without a placeholder the block is appended.
        assert_eq!(
            resolve_dependencies(
                "Do it.\n",
                Some("Dependency results (from prior tasks):\n- Task 0: x")
            ),
            "Do it.\n\nDependency results (from prior tasks):\n- Task 0: x\n"
        );
        assert_eq!(resolve_dependencies("Do it.\n", None), "Do it.\n");
    }

    #[test]
    fn a_fence_is_longer_than_any_backtick_run_in_its_text() {
        assert_eq!(fenced("plain", "text"), "```text\nplain\n```");
        assert_eq!(
            fenced("a\n```\nb ````` c\n", ""),
            "``````\na\n```\nb ````` c\n``````"
        );
    }

    #[test]
    fn retry_prompt_snapshot() {
        let plan = example("auth-v2.json");
        let original = original_prompt(&plan, 1, Unit::Batch);
        let p = retry_prompt(
            &original,
            2,
            "acceptance check failed: `npm test -- password` exited with status 1",
            plan.tasks[1].fallback(),
            &[FailedCheck {
                criterion: "Password tests pass".into(),
                check: "npm test -- password".into(),
                output: "FAIL src/auth/password.test.ts\n  expected true, got false".into(),
            }],
        );
        assert!(p.starts_with(original.trim_end()));
        insta::assert_snapshot!(p[original.trim_end().len()..].to_string());
        let plain = retry_prompt("Do it.", 3, "timed out after 30m", None, &[]);
        assert_eq!(
            plain,
            "Do it.\n\n## Retry context\nThis is attempt 3 of 3. The previous attempt failed.\n\nPrevious failure reason:\ntimed out after 30m\n"
        );
    }
}
