//! GitHub Spec Kit `tasks.md` files as dagexec plans (`--plan specs/001-x/tasks.md`). Format:
//! <https://github.com/github/spec-kit> (`templates/tasks-template.md`).
//!
//! Spec Kit's `/tasks` command writes `specs/<NNN-feature>/tasks.md` from its public
//! `templates/tasks-template.md`: `## Phase N: …` sections of task lines
//! `- [ ] T012 [P] [US1] Create User model in src/models/user.py` (also read: the markers
//! before the ID, `- [ ] [P] T012 …`, and a colon after it, `T012:`; a task inserted later is
//! `T012a` or `T012.1`). [`parse()`] reads one, and
//! [`build`] makes it a plan by these rules:
//!
//! - **Phases run in order.** A `## ` section holding task lines is a phase (so is a section
//!   under a `###` or `####` heading that starts with `Phase` and its number — not the
//!   template's `### Phase Dependencies`); a tasks.md with no section is
//!   one phase. Fenced code blocks and HTML comments are skipped, by the one line scanner
//!   parsing and ticking share; a UTF-8 BOM is ignored.
//! - **`[P]`**: within a phase, a `[P]` task may run together with the others; a task without
//!   `[P]` comes after every task written before it in its phase (its edges: the previous task
//!   without `[P]` and the `[P]` tasks since — the same order in O(N) edges).
//! - **`(depends on T012, T013)`** in a task's text adds those edges (IDs anywhere in the file);
//!   the explicit dependencies of github/spec-kit#1934 (<https://github.com/github/spec-kit/issues/1934>)
//!   also write ranges (`T003-T005`, `T003–T005`, `T003..T005`) and `(depends on none)`.
//! - **User stories**: a phase whose heading says `User Story N`, or whose tasks each carry
//!   one `[USn]` (a task of several, `[US1] [US2]`, is work they share), is a story phase. Story phases wait for the last non-story phase before them (the
//!   foundational phase) but not for each other. The phase after the stories (polish) waits for
//!   all of them; any other phase waits for the one before it. A phase's waiting is an edge
//!   from each of its tasks that waits for nothing in its own phase to each task of the phases
//!   it waits for that nothing there waits for — or, when that is N × M edges for N such
//!   tasks before and M after and N × M > N + M (two all-`[P]` phases), one join
//!   (`pure::join`: a task of the plan with no work, named after the phases it joins, never
//!   run, counted, shown or ticked) that waits for the N and that the M wait for. Joins come
//!   after every task in the plan, so a task's plan index is its place in the file.
//! - **`- [x]` / `- [X]`** tasks are completed; a task struck through (`- [x] ~~T016 …~~ -
//!   REMOVED`) is withdrawn: no task, said as a warning at its line. A ticked task orders nothing by itself, the path
//!   through it still does (`pure::graph::order_through_finished`): a phase whose last task is
//!   ticked still holds the next phase back until its open tasks are done.
//! - **Files**: paths named in a task's text — backticked (`` `src/app.py` ``, `` `.env` ``,
//!   `` `Makefile` ``), or a word
//!   with a file extension that has a `/`, follows `in`, `at`, `to`, `into`, `from`,
//!   `under` (`in src/models/user.py`), or is the object of the task's verb when that verb
//!   does not only read (`Update README.md`, not `Run quickstart.md validation`), or a
//!   Markdown link's target (`[src/x.ts](../../src/x.ts)`: from the tasks.md's folder after
//!   `./` or `../`, else from the root; a link to the feature's design documents is context)
//!   — are its files, so the overlap rules keep two tasks off one file even when both say
//!   `[P]`. The first task naming a file creates it when its verb
//!   creates (Create, Add, Implement, Write, Generate, Initialize, Scaffold, Define, Build,
//!   Setup, Set up) or it is a test task (`Contract test for …`);
//!   every other mention modifies it. Directories (`docs/`) and placeholders (`[name].py`) are
//!   not files, nor is a path from the file system's root or a home directory
//!   (`~/.app/config.toml`: a place on the machine the text talks about). A task naming no
//!   file conflicts with nothing and is flagged with a warning.
//! - **Context**: the feature folder's `spec.md`, `plan.md`, `data-model.md`, `research.md`,
//!   `quickstart.md` and the files under `contracts/` (those that exist) are every task's
//!   context files; the task line, its phase's goal (`**Goal**:` or `**Purpose**:`) and
//!   `**Independent Test**:` are in its description.
//! - **Errors** name the line and come with a hint: a task line without an ID or checkbox or
//!   description (a checkbox without an ID nested under a task is that task's own checklist,
//!   no task), a duplicate ID, an unknown ID in `depends on`, a cycle (as a path of IDs), a
//!   path no task may name (out of the repository through `..`, in `.git/`, the generated
//!   plan, through a linked directory), each at its line with the task's ID.
//!
//! State: [`SpecKit`] is a [`Reader`] like every task-list format, so what follows is
//! shared (`sources::prepare`, `sources::write_back`, `sources::own_file`): the generated plan
//! is written to `<feature>/.dagexec/plan.json` (the [`GENERATED_DIR`] next to tasks.md;
//! archived as `.dagexec/plan.done.json` when every task completed). Reading an edited
//! tasks.md again carries over the state of every task whose ID and text are unchanged. Each
//! round commit ticks the tasks completed so far in tasks.md (in the round's index, on the
//! committed version, so the work tree gets the ticks only with the published commit and a
//! user's uncommitted edit is neither committed nor lost). During a run only dagexec writes
//! tasks.md: a worker's edit of it is dropped from its patch. A Spec Kit plan records what it
//! was made from in its own field ([`FIELD`]: `{"tasksMd", "tasks", "warnings"}`), older than
//! the one the other formats share.

pub mod parse;

use std::collections::BTreeSet;

use serde_json::json;

pub use parse::{Parsed, TaskLine, parse};

use super::generated::{Built, Context, Names, Place, Problem, Reader, Unit};
use crate::pure::plan::model::{Files, Plan, Task};

pub use super::generated::GENERATED_DIR;
pub use crate::pure::plan::fields::SPEC_KIT as FIELD;
// What the tests (`use super::*`) name that this file no longer does.
#[cfg(test)]
use {
    crate::pure::plan::model::{CompletedTask, Status},
    std::path::Path,
};
/// A Spec Kit error, as the tests name it: a [`Problem`] at its line.
#[cfg(test)]
pub type SpecKitError = Problem;

/// The feature folder's design documents, in the order a prompt lists them.
pub const CONTEXT_DOCS: [&str; 5] = [
    "spec.md",
    "plan.md",
    "data-model.md",
    "research.md",
    "quickstart.md",
];

/// The Spec Kit reader.
pub struct SpecKit;

impl Reader for SpecKit {
    fn names(&self) -> Names {
        Names {
            name: "speckit",
            label: "Spec Kit",
            extension: ".md",
            usual: "specs/*/tasks.md",
        }
    }

    /// Any Markdown file but a Kiro spec's.
    fn claims(&self, place: &Place<'_>) -> bool {
        place.extension == "md" && !place.under(".kiro", "specs")
    }

    fn field(&self) -> &'static str {
        FIELD
    }

    fn file_of<'p>(&self, plan: &'p Plan) -> Option<&'p str> {
        plan.extra.get(FIELD)?.get("tasksMd")?.as_str()
    }

    fn build(&self, cx: &Context<'_>, text: &str) -> Result<Built, Vec<Problem>> {
        let parsed = parse(cx.rel, text)?;
        let plan = build(&parsed, cx.rel, &context_docs(cx));
        let units = parsed
            .tasks
            .iter()
            .map(|t| Unit {
                id: t.id.clone(),
                text: t.text.clone(),
                at: format!("{}:{}", cx.rel, t.line),
                mark: if t.done { "x" } else { " " }.to_string(),
            })
            .collect();
        Ok(Built {
            plan,
            units,
            warnings: parsed.warnings,
            meta: serde_json::Value::Null,
        })
    }

    /// [`build`] has recorded it already, in [`FIELD`].
    fn stamp(&self, _built: &mut Built, _rel: &str) {}

    fn write_back(
        &self,
        text: &str,
        done: &BTreeSet<String>,
        _meta: &serde_json::Value,
    ) -> Result<String, String> {
        parse::tick("tasks.md", text, done)
            .map_err(|e| e.first().map_or_else(String::new, ToString::to_string))
    }
}

/// The context documents of the feature folder (`cx.dir`) that exist, repository-relative:
/// the [`CONTEXT_DOCS`], then the files under `contracts/` in name order. Links are
/// not followed.
fn context_docs(cx: &Context<'_>) -> Vec<String> {
    use crate::sources::generated::rel;
    let mut out = super::generated::docs_beside(cx, &CONTEXT_DOCS);
    let mut contracts = Vec::new();
    let contracts_dir = cx.dir.join("contracts");
    // A linked contracts/ is not followed (its files could be anywhere).
    let mut stack = if std::fs::symlink_metadata(&contracts_dir).is_ok_and(|m| m.is_dir()) {
        vec![contracts_dir]
    } else {
        Vec::new()
    };
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => contracts.push(rel(cx.root, &e.path())),
                _ => {}
            }
        }
    }
    contracts.sort();
    out.extend(contracts);
    out
}

/// The description a task's worker gets: the task line, its phase's goal and independent
/// test, and the rule that dagexec (not the worker) ticks tasks.md.
fn description(parsed: &Parsed, t: &TaskLine, tasks_md: &str) -> String {
    let phase = &parsed.phases[t.phase];
    let mut s = format!(
        "Spec Kit task {} of {tasks_md} (line {}):\n{}\n\nPhase: {}",
        t.id, t.line, t.text, phase.title
    );
    match t.stories.as_slice() {
        [] => {}
        [story] => s.push_str(&format!(" (user story {story})")),
        many => s.push_str(&format!(" (user stories {})", many.join(", "))),
    }
    if let Some(goal) = &phase.goal {
        s.push_str(&format!("\nGoal: {goal}"));
    }
    if let Some(test) = &phase.independent_test {
        s.push_str(&format!("\nIndependent Test: {test}"));
    }
    s + &super::do_only(tasks_md, "ticks the task")
}

/// The plan for a parsed tasks.md at `tasks_md` (repository-relative), with `context` (the
/// feature folder's documents that exist, repository-relative) as every task's context.
pub fn build(parsed: &Parsed, tasks_md: &str, context: &[String]) -> Plan {
    let context_files = super::context_files(context, "the feature's design document (Spec Kit)");
    let mut plan = Plan::new(
        match &parsed.feature {
            Some(f) if !f.is_empty() => format!("{f} ({tasks_md})"),
            _ => format!("The tasks of {tasks_md}"),
        },
        Vec::with_capacity(parsed.tasks.len()),
    );
    for (i, t) in parsed.tasks.iter().enumerate() {
        let mut task = Task {
            subject: format!("{} {}", t.id, t.text),
            description: Some(description(parsed, t, tasks_md)),
            blocked_by: parsed.deps[i].clone(),
            ..super::task_of(
                "speckit",
                "software engineer implementing one task of a Spec Kit feature",
                t.done,
                Files {
                    create: t.create.clone(),
                    modify: t.modify.clone(),
                    ..Default::default()
                },
                Some(context_files.clone()),
            )
        };
        if t.done {
            task.result = Some(format!("ticked in {tasks_md}"));
        }
        task.extra
            .insert(FIELD.into(), json!({"id": t.id, "line": t.line}));
        plan.tasks.push(task);
    }
    super::list_completed(&mut plan);
    // The joins come after every task, so each task keeps its plan index (its state, its
    // entry in the field's task list, its attempt logs).
    for (k, subject) in parsed.joins.iter().enumerate() {
        plan.tasks.push(Task {
            subject: subject.clone(),
            blocked_by: parsed.deps[parsed.tasks.len() + k].clone(),
            join: true,
            ..Default::default()
        });
    }
    let ids: Vec<serde_json::Value> = parsed
        .tasks
        .iter()
        .map(|t| json!({"id": t.id, "text": t.text, "mark": if t.done { "x" } else { " " }}))
        .collect();
    plan.extra.insert(
        FIELD.into(),
        json!({"tasksMd": tasks_md, "tasks": ids, "warnings": parsed.warnings}),
    );
    plan
}

#[cfg(test)]
mod tests;
