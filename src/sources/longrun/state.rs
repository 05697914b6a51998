//! The seed's `STATE.md` progress (Step 5): the "Current Position" section, rewritten after
//! each round in place, the rest of the file left as the user or the planner wrote it. Pure.

use crate::pure::plan::model::{Plan, Status};

/// The section heading dagexec owns.
const HEADING: &str = "## Current Position";

/// The plan number of a long-run task, from its summary path (`…/NN-SUMMARY.md`), the one
/// field that survives trimming.
fn number(plan: &Plan, index: usize) -> Option<String> {
    let summary = plan.tasks[index].creates().first()?;
    let name = summary.rsplit('/').next()?;
    name.strip_suffix("-SUMMARY.md").map(str::to_string)
}

/// The seed's Step 5 block: the next plan, plans completed, a ten-cell progress bar.
pub fn current_position(plan: &Plan) -> String {
    let total = plan.tasks.len();
    let completed = plan.count(Status::Completed);
    let next = plan
        .tasks
        .iter()
        .position(|t| !t.status.is_resolved() || t.status == Status::Blocked)
        .and_then(|i| number(plan, i))
        .unwrap_or_else(|| "none".into());
    let pct = (completed * 100).checked_div(total).unwrap_or(100);
    let filled = (completed * 10).checked_div(total).unwrap_or(10);
    format!(
        "{HEADING}\n- Current plan: {next}\n- Plans completed: {completed}/{total}\n- Progress: [{}{}] {pct}%\n",
        "█".repeat(filled),
        "░".repeat(10 - filled)
    )
}

/// `existing` (the current STATE.md, if any) with its Current Position section replaced by
/// `section` (appended when it has none). The section runs to the next `## ` heading.
pub fn with_position(existing: Option<&str>, section: &str) -> String {
    let text = existing.unwrap_or("# State\n");
    let Some(start) = text
        .match_indices(HEADING)
        .map(|(i, _)| i)
        .find(|&i| i == 0 || text[..i].ends_with('\n'))
    else {
        let mut s = text.trim_end().to_string();
        s.push_str("\n\n");
        s.push_str(section);
        return s;
    };
    let after = start + HEADING.len();
    let end = text[after..]
        .find("\n## ")
        .map_or(text.len(), |i| after + i + 1);
    let mut s = text[..start].to_string();
    s.push_str(section);
    if end < text.len() {
        s.push('\n');
        s.push_str(&text[end..]);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{plan_of, task};

    fn plan() -> Plan {
        let mut p = plan_of(vec![
            task(&[], &[".lr/summaries/01-SUMMARY.md"], &[]),
            task(&[0], &[".lr/summaries/02-SUMMARY.md"], &[]),
            task(&[1], &[".lr/summaries/03-SUMMARY.md"], &[]),
        ]);
        p.tasks[0].status = Status::Completed;
        p
    }

    #[test]
    fn position_and_section_replacement() {
        let pos = current_position(&plan());
        assert_eq!(
            pos,
            "## Current Position\n- Current plan: 02\n- Plans completed: 1/3\n- Progress: [███░░░░░░░] 33%\n"
        );
        assert_eq!(with_position(None, &pos), format!("# State\n\n{pos}"));
        let old = "# State\nintro\n\n## Current Position\n- old\n\n## Decisions\n- keep me\n";
        assert_eq!(
            with_position(Some(old), &pos),
            format!("# State\nintro\n\n{pos}\n## Decisions\n- keep me\n")
        );
        let last = "# State\n## Current Position\n- old\n";
        assert_eq!(with_position(Some(last), &pos), format!("# State\n{pos}"));
    }
}
