//! Kiro and cc-sdd `.kiro/specs/<feature>/tasks.md` as a dagexec plan
//! (`--plan .kiro/specs/auth/tasks.md`). Formats: Kiro's specs
//! (<https://kiro.dev/docs/specs/>) and cc-sdd's task rules
//! (<https://github.com/gotalab/cc-sdd>, `.kiro/settings/rules/tasks-generation.md`):
//! `- [ ] 1. Major task`, `- [ ] 1.1 Subtask` (indented or not; a `## 1. …` heading can stand
//! for the major task), detail bullets under each, and the annotations `_Requirements: 1.1,
//! 2.3_`, `_Depends: 1.1, 2.3_`, `_Boundary: …_`, the `(P)` marker and `- [ ]*` optional tasks.
//!
//! - **Unit of work**: a subtask; a major task is one when it has no subtask that is not
//!   optional. A major task with required subtasks is their container: it is done (and
//!   ticked) when they all are, and its title is in their prompts.
//! - **Order**: major tasks run in order, as Spec Kit's phases: each waits for the one before
//!   (its last units). A major task marked `(P)` runs beside those before it back to the last
//!   one without `(P)`. Within a major task, subtasks run in order; a `(P)` subtask waits for
//!   none of its siblings (cc-sdd: "no dependency on its immediately preceding peers"), a
//!   subtask without `(P)` waits for the previous one without it and the `(P)` ones since.
//! - **`_Depends: 1.1, 2_`** adds edges: to a subtask, or to a major task (its last units).
//!   One on a later major task (`8.1` on `_Depends: 9.1_`) outranks the numbers' order: that
//!   major task no longer waits for the one the line is in, but for what that one waits for
//!   (and what came after it still comes after both). So does one on a later sibling (`1.1` on
//!   `_Depends: 1.3_`): 1.3 moves to just before 1.1.
//!   On a container's line it holds for its first subtasks. A note in parentheses is no ID
//!   (`_Depends: 1.1 (asset first)_`), and `none` (or `-`) names no task.
//! - **`- [ ]*` optional** tasks are not run (Kiro's and cc-sdd's deferrable test work): what
//!   waits for one waits for what it waited for; they are never ticked by dagexec.
//! - **`- [x]`** is completed; a ticked major task completes its subtasks. **`- [-]`** (Kiro's
//!   task in progress) is open; a started major task is ticked when its subtasks are done.
//! - **Order through ticked tasks**: a ticked unit orders nothing by itself, the path through
//!   it still does (`pure::graph::order_through_finished`, applied once the state is carried
//!   over): major task 13 waits for an open 12.2 even when 12.4, the last of 12, is ticked.
//! - **Files**: a `_Boundary:_` entry (or its part in parentheses) that is one word with a `/`
//!   or a file extension (or a Markdown link: its target, from this tasks.md's folder after
//!   `./` or `../`, else from the root) is in the task's scope (`metadata.files.scope`): what it may touch,
//!   not what it must change — kept apart by the overlap rules, a change to it not unexpected,
//!   never spot-checked; component names (`AuthService`) are in the prompt only. Naming the task list itself is
//!   an error. A task without a path boundary declares no file: no declared file, no
//!   assumed conflict (a patch that no longer applies is retried from the integrated tree).
//! - **Context**: the spec's `requirements.md` and `design.md` (those that exist) are every
//!   task's context files; the `_Requirements:_` IDs, details and boundary are in its
//!   description.
//! - **Errors** name the line and the task: an ID used twice, an unknown or self `_Depends:_`,
//!   a cycle (as a path of IDs), a boundary path outside the repository.
//! - **Write-back**: each round commit ticks the units completed so far and the major tasks
//!   they complete, in the committed tasks.md of the round's index (only those bytes); only
//!   dagexec writes tasks.md during a run.

pub(crate) mod parse;

use std::collections::BTreeSet;

use super::generated::{Built, Context, Names, Place, Problem, Reader, Unit};
use crate::pure::plan::model::{ContextFile, Files, Plan, Status, Task};

/// The spec's documents every task gets, in the order a prompt lists them.
pub const CONTEXT_DOCS: [&str; 2] = ["requirements.md", "design.md"];

/// The Kiro / cc-sdd reader.
pub struct Kiro;

impl Reader for Kiro {
    fn names(&self) -> Names {
        Names {
            name: "kiro",
            label: "Kiro / cc-sdd",
            extension: ".md",
            usual: ".kiro/specs/*/tasks.md",
        }
    }

    /// A Markdown file under `.kiro/specs/`.
    fn claims(&self, place: &Place<'_>) -> bool {
        place.extension == "md" && place.under(".kiro", "specs")
    }

    fn build(&self, cx: &Context<'_>, text: &str) -> Result<Built, Vec<Problem>> {
        let parsed = parse::read(cx.rel, text)?;
        let deps = parse::derive(cx.rel, &parsed)?;
        let context = super::generated::docs_beside(cx, &CONTEXT_DOCS);
        Ok(build(cx.rel, &parsed, &deps, &context))
    }

    fn write_back(
        &self,
        text: &str,
        done: &BTreeSet<String>,
        _meta: &serde_json::Value,
    ) -> Result<String, String> {
        parse::tick("tasks.md", text, done)
            .map_err(|e| e.first().map_or_else(String::new, |p| p.message.clone()))
    }
}

fn description(rel: &str, p: &parse::Parsed, i: usize) -> String {
    let l = &p.lines[i];
    let mut s = format!(
        "Kiro task {} of {rel} (line {}):\n{}",
        l.id, l.line, l.title
    );
    for d in &l.details {
        s.push_str(&format!("\n{d}"));
    }
    if l.id.contains('.')
        && let Some(g) = p.groups.iter().find(|g| g.number == l.major)
        && !g.title.is_empty()
    {
        s.push_str(&format!("\n\nPart of task {}: {}", g.number, g.title));
    }
    if !l.requirements.is_empty() {
        s.push_str(&format!(
            "\n\nRequirements: {} (see the spec's requirements.md)",
            l.requirements.join(", ")
        ));
    }
    if !l.boundary.is_empty() {
        s.push_str(&format!(
            "\nBoundary: {} (touch only what this names)",
            l.boundary.join(", ")
        ));
    }
    s + &super::do_only(rel, "ticks the task")
}

fn build(
    rel: &str,
    p: &parse::Parsed,
    deps: &std::collections::BTreeMap<usize, BTreeSet<usize>>,
    context: &[String],
) -> Built {
    let units_at: Vec<usize> = deps.keys().copied().collect();
    let index = |line: usize| units_at.binary_search(&line).ok();
    let context_files = super::context_files(context, "the spec's requirements and design (Kiro)");
    let title = p
        .groups
        .first()
        .map_or(String::new(), |_| format!("The tasks of {rel}"));
    let mut plan = Plan::new(title, Vec::with_capacity(units_at.len()));
    let mut units = Vec::with_capacity(units_at.len());
    let mut warnings = Vec::new();
    for &i in &units_at {
        let l = &p.lines[i];
        let blocked_by = deps[&i].iter().filter_map(|&d| index(d)).collect();
        let task = task(rel, p, i, blocked_by, &context_files);
        let mark = match (task.status == Status::Completed, l.started) {
            (true, _) => "x",
            (false, true) => "-",
            (false, false) => " ",
        };
        plan.tasks.push(task);
        units.push(Unit {
            id: l.id.clone(),
            text: format!("{}\n{}", l.title, l.details.join("\n")),
            at: format!("{rel}:{}", l.line),
            mark: mark.into(),
        });
    }
    let optional: Vec<&str> = p
        .lines
        .iter()
        .filter(|l| l.optional && !l.done)
        .map(|l| l.id.as_str())
        .collect();
    if !optional.is_empty() {
        warnings.push(format!(
            "{rel}: optional tasks not run: {}",
            optional.join(", ")
        ));
    }
    Built {
        plan,
        units,
        warnings,
        meta: serde_json::Value::Null,
    }
}

/// The plan task of the unit at line index `i`.
fn task(
    rel: &str,
    p: &parse::Parsed,
    i: usize,
    blocked_by: Vec<usize>,
    context_files: &[ContextFile],
) -> Task {
    let l = &p.lines[i];
    let major_done = p
        .groups
        .iter()
        .find(|g| g.number == l.major)
        .and_then(|g| g.major)
        .is_some_and(|m| p.lines[m].done);
    let files: Vec<String> = l
        .boundary
        .iter()
        .flat_map(|b| parse::boundary_files(b, rel))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    Task {
        subject: format!("{} {}", l.id, l.title),
        description: Some(description(rel, p, i)),
        blocked_by,
        ..super::task_of(
            "kiro",
            "software engineer implementing one task of a Kiro spec",
            l.done || major_done,
            // A boundary is what the task may touch, not what it must change.
            Files {
                scope: files,
                ..Default::default()
            },
            Some(context_files.to_vec()),
        )
    }
}

#[cfg(test)]
mod tests;
