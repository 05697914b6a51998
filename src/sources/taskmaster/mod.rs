//! Taskmaster (`claude-task-master`) `.taskmaster/tasks/tasks.json` as a dagexec plan
//! (`--plan .taskmaster/tasks/tasks.json`). Format: <https://github.com/eyaltoledano/claude-task-master>
//! (`docs/task-structure.md`): tasks with `id`, `title`, `description`, `details`,
//! `testStrategy`, `priority`, `status`, `dependencies` and `subtasks`, either plain
//! (`{"tasks": [...]}`) or tagged (`{"master": {"tasks": [...]}, "feature-x": {...}}`).
//!
//! - **Tag**: the plain form's tasks; else the current tag of `.taskmaster/state.json`
//!   (`currentTag`) when the file has it, else `master`, else the only tag. A tag other than
//!   the earlier run's starts afresh: that run's state is not carried over to it.
//! - **Unit of work**: a subtask, when its task has subtasks (ID `3.2`); the task otherwise
//!   (ID `3`). A task with subtasks is done when they all are `done`: dagexec sets its status
//!   too when it marks the last of them, as `task-master set-status` does (one in `review` or
//!   `cancelled` keeps it open).
//! - **Dependencies**: a task's `dependencies` name tasks (`3`, `"3"`) or subtasks (`"3.2"`);
//!   a task named waits for all its units. A subtask's `dependencies` name its siblings
//!   (`1`, or `"3.1"` in full) or, when no sibling has that ID, other tasks. A subtask that
//!   waits for no sibling waits for what its task waits for, `in-progress` or not (as
//!   `task-master list --ready` has it; `next` offers a started task's subtasks on their own
//!   dependencies: docs/src/taskmaster.md says why dagexec does not).
//! - **Status**, compared exactly as Taskmaster does (`read::State::of`): `done` (a
//!   subtask's `completed` too) is completed and never run again; `pending`, `in-progress`
//!   (none; a subtask's in any case, as `next` reads them) runs; any other word is held as
//!   `deferred` is, named with the word it may mean. `cancelled` is not run and settles its
//!   dependents' wait for it (a cancelled task will never be done). `review` (worked,
//!   waiting for a person), `deferred` and `blocked` (the team's "not now") are not run in
//!   this run, nor is anything that waits for them, directly or not (each named in a warning):
//!   `task-master next` offers none of them, and counts a dependency as met only when `done`.
//!   A parent's status other than open holds for all its subtasks. An open task with a
//!   cancelled subtask stays open (`set-status` makes it done only when every subtask is),
//!   and so does one the team left open with every subtask done (`set-status` settles a
//!   task only when it sets a subtask): what depends on it is not run either, as `next`
//!   never offers it.
//! - **Order through finished tasks**: a finished unit (done, cancelled) orders nothing by
//!   itself, but the path through it still does: an open unit waits for every open unit it
//!   reaches through `dependencies`, whatever lies between (a done subtask, an `in-progress`
//!   parent, a parent whose subtasks are all done).
//! - **Files**: Taskmaster declares none, so a task has none: no declared file, no assumed
//!   conflict. Two tasks changing one file are integrated one after the other; a patch that
//!   no longer applies fails its attempt, which is retried from the integrated tree.
//! - **Prompt**: the title, description, `details`, `testStrategy` and priority (and a
//!   subtask's parent task) are the task's description.
//! - **Errors** name the JSON path and the task: an ID used twice (a subtask's only under an
//!   open task: a task not open settles its subtasks, never told apart), an unknown or self
//!   dependency, a cycle (as a path of IDs), a file that is not Taskmaster's shape.
//! - **Write-back**: each round commit sets `"status": "done"` on the units completed so far
//!   (and on a task whose last subtask it marks) in the committed tasks.json of the round's
//!   index; only those bytes change, so key order, unknown fields and formatting are kept.
//!   A status the team set that is not open (`review`, `cancelled`, `deferred`, `blocked`) stays,
//!   and so do the subtasks of a task that is not open (its status settles them).
//!   During a run only dagexec writes tasks.json: a worker's edit of it is dropped.
//! - **The team's edits win**: a unit whose status (or `updatedAt`, which `task-master
//!   set-status` stamps) changed since dagexec last read the file starts from the file's
//!   status, not the earlier run's memory (`sources::generated::carry_over`).

mod read;
mod write;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::generated::{Built, Context, Names, Place, Problem, Reader, Unit};
use crate::pure::plan::model::{Plan, Task};
use read::{Item, State};

/// The Taskmaster reader.
pub struct Taskmaster;

impl Reader for Taskmaster {
    fn names(&self) -> Names {
        Names {
            name: "taskmaster",
            label: "Taskmaster",
            extension: ".json",
            usual: ".taskmaster/tasks/tasks.json",
        }
    }

    /// A JSON file under `.taskmaster/`, or any `tasks.json` that is not a dagexec plan.
    fn claims(&self, place: &Place<'_>) -> bool {
        if place.extension != "json" {
            return false;
        }
        if place.parts.iter().any(|p| p == ".taskmaster") {
            return true;
        }
        if place.path.file_name().is_none_or(|n| n != "tasks.json") {
            return false;
        }
        // A dagexec plan named tasks.json stays a plan.
        !String::from_utf8_lossy(&head(place.path)).contains("\"schemaVersion\"")
    }

    fn build(&self, cx: &Context<'_>, text: &str) -> Result<Built, Vec<Problem>> {
        let doc: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            vec![Problem::new(
                format!(
                    "{}:{}:{}: malformed JSON: {e}",
                    cx.rel,
                    e.line(),
                    e.column()
                ),
                "fix the JSON (Taskmaster writes it with `task-master` commands)",
            )]
        })?;
        let current = current_tag(cx);
        let r = read::read(cx.rel, &doc, current.as_deref())?;
        let built = build(cx.rel, &r);
        if built.plan.tasks.is_empty() {
            return Err(vec![nothing_to_run(cx.rel, &r)]);
        }
        Ok(built)
    }

    fn write_back(
        &self,
        text: &str,
        done: &BTreeSet<String>,
        meta: &serde_json::Value,
    ) -> Result<String, String> {
        write::write_done(text, done, meta.get("tag").and_then(|t| t.as_str()))
    }

    fn mark_done_hint(&self, ids: &[&str]) -> String {
        format!(
            "set them done in it first (`task-master set-status --id={} --status=done`)",
            ids.join(",")
        )
    }
}

/// Why the list read as `r` gives no task to run: it lists none, or the team set aside or
/// cancelled every one (`task-master next` offers none of them either).
fn nothing_to_run(rel: &str, r: &read::Read) -> Problem {
    let tag = r
        .tag
        .as_ref()
        .map(|t| format!(" (tag {t})"))
        .unwrap_or_default();
    let at = format!("{rel}{tag}: no task to run");
    if r.items.is_empty() {
        return Problem::new(
            format!("{at}: it lists no task"),
            "add tasks (`task-master parse-prd`, `task-master add-task`), or switch to the tag that holds them (`task-master use-tag NAME`)",
        );
    }
    // The open ones wait for these (or for a task kept open by a cancelled subtask).
    let (open, aside): (Vec<&Item>, Vec<&Item>) =
        r.items.iter().partition(|it| it.state == State::Open);
    let mut said = named(&aside);
    if !open.is_empty() {
        said.push(format!("and {} task(s) waiting for them", open.len()));
    }
    Problem::new(
        format!("{at}: {}", said.join(", ")),
        "`task-master next` offers none of them either: set the one to run pending (`task-master set-status --id=ID --status=pending`)",
    )
}

/// `items` as `task 2 (blocked)`, the first ten, then how many more.
fn named(items: &[&Item]) -> Vec<String> {
    listed(
        items
            .iter()
            .map(|it| format!("task {} ({})", it.id, it.word())),
    )
}

/// The first ten of `words`, then how many more.
fn listed(words: impl ExactSizeIterator<Item = String>) -> Vec<String> {
    const SHOWN: usize = 10;
    let more = words.len().saturating_sub(SHOWN);
    let mut said: Vec<String> = words.take(SHOWN).collect();
    if more > 0 {
        said.push(format!("and {more} more"));
    }
    said
}

/// The warning naming the units the team set aside (`review`, `deferred`, `blocked`), which
/// are not in the plan: without it a run of what is left ends saying every task is resolved.
fn set_aside(rel: &str, items: &[Item]) -> Option<String> {
    let held: Vec<&Item> = items.iter().filter(|it| it.state == State::Held).collect();
    (!held.is_empty()).then(|| {
        format!(
            "{rel}: not run, as the team set them: {} (`task-master set-status --id=ID --status=pending` runs one)",
            named(&held).join(", ")
        )
    })
}

/// The first 4 KiB of the regular file at `path` (none for anything else): a FIFO is opened
/// without waiting for a writer, and a device or a growing file is never read to its end.
fn head(path: &Path) -> Vec<u8> {
    use std::io::Read;
    let mut head = Vec::new();
    if let Ok(file) = crate::edge::fsx::open_regular(path) {
        let _ = file.take(4096).read_to_end(&mut head);
    }
    head
}

/// `currentTag` of `.taskmaster/state.json` beside the tasks folder, if it reads.
fn current_tag(cx: &Context<'_>) -> Option<String> {
    let state = cx.dir.parent()?.join("state.json");
    let meta = std::fs::symlink_metadata(&state).ok()?;
    if !meta.is_file() || meta.len() > 1 << 20 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(state).ok()?).ok()?;
    v.get("currentTag")?.as_str().map(str::to_string)
}

/// Why a unit is not run though open: it waits for a held unit, or for a task that stays
/// open ([`read::Item::waits_open`]: held by itself, or by what it waits for).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Hold {
    /// The held unit (`review`, `deferred`, `blocked`) at this index.
    Unit(usize),
    /// The unit at this index waits for a task that stays open.
    Open(usize),
}

/// The units not run: cancelled and held ones, and whatever waits for a held one or for a
/// task that stays open (each with why).
fn settled(items: &[Item]) -> (BTreeSet<usize>, Vec<(usize, Hold)>) {
    let mut out: BTreeSet<usize> = BTreeSet::new();
    let mut waiting: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, it) in items.iter().enumerate() {
        for &d in &it.deps {
            waiting.entry(d).or_default().push(i);
        }
    }
    let mut held_by: Vec<(usize, Hold)> = Vec::new();
    let mut stack: Vec<(usize, Hold)> = Vec::new();
    for (i, it) in items.iter().enumerate() {
        match it.state {
            State::Cancelled => {
                out.insert(i);
            }
            State::Held | State::Unknown => {
                out.insert(i);
                stack.push((i, Hold::Unit(i)));
            }
            State::Open if it.waits_open.is_some() => {
                out.insert(i);
                held_by.push((i, Hold::Open(i)));
                stack.push((i, Hold::Open(i)));
            }
            _ => {}
        }
    }
    // What waits for a held unit through finished ones (done, cancelled) waits for it too.
    let mut through: BTreeSet<(usize, Hold)> = BTreeSet::new();
    while let Some((d, root)) = stack.pop() {
        for &w in waiting.get(&d).map_or(&[][..], Vec::as_slice) {
            match items[w].state {
                State::Done | State::Cancelled => {
                    if through.insert((w, root)) {
                        stack.push((w, root));
                    }
                }
                _ => {
                    if out.insert(w) {
                        held_by.push((w, root));
                        stack.push((w, root));
                    }
                }
            }
        }
    }
    held_by.sort_unstable();
    (out, held_by)
}

/// The warnings for the units not run because of what they wait for (`held_by`): one for
/// each reason, naming every unit it holds back (a unit alone at its JSON path).
fn held_back(rel: &str, items: &[Item], held_by: &[(usize, Hold)]) -> Vec<String> {
    let mut by_why: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for &(w, root) in held_by {
        by_why.entry(why(items, root)).or_default().push(w);
    }
    by_why
        .into_iter()
        .map(|(why, units)| match units[..] {
            [w] => format!(
                "{rel}: {}: task {} waits for {why}, so it is not run either",
                items[w].path, items[w].id
            ),
            _ => format!(
                "{rel}: tasks {} wait for {why}, so they are not run either",
                listed(units.iter().map(|&w| items[w].id.clone())).join(", ")
            ),
        })
        .collect()
}

/// What a unit held back by `root` waits for.
fn why(items: &[Item], root: Hold) -> String {
    match root {
        Hold::Unit(r) if items[r].state == State::Unknown => format!(
            "task {}, whose status {:?} Taskmaster does not know",
            items[r].id,
            items[r].word()
        ),
        Hold::Unit(r) => format!("{} task {}", items[r].word(), items[r].id),
        Hold::Open(r) => {
            let (task, why) = items[r].waits_open.clone().unwrap_or_default();
            format!(
                "task {task}, which stays open {why} (Taskmaster counts a dependency met only when done: `task-master set-status --id={task} --status=done` lets it run)"
            )
        }
    }
}

/// The plan tasks unit `i` waits for. A cancelled unit is settled (it will never be done, and
/// is not in the plan), but what it waited for still orders: its wait passes through it.
fn blockers(items: &[Item], i: usize, index: &[Option<usize>]) -> Vec<usize> {
    let mut out: BTreeSet<usize> = BTreeSet::new();
    let mut seen: BTreeSet<usize> = BTreeSet::new();
    let mut stack: Vec<usize> = items[i].deps.iter().copied().collect();
    while let Some(d) = stack.pop() {
        if !seen.insert(d) {
            continue;
        }
        match index[d] {
            Some(t) => {
                out.insert(t);
            }
            None if items[d].state == State::Cancelled => stack.extend(items[d].deps.iter()),
            None => {}
        }
    }
    out.into_iter().collect()
}

fn description(rel: &str, it: &Item) -> String {
    let mut s = format!(
        "Taskmaster task {} of {rel} ({}):\n{}",
        it.id, it.path, it.title
    );
    if !it.description.is_empty() {
        s.push_str(&format!("\n\n{}", it.description));
    }
    if let Some((id, title, desc)) = &it.parent {
        s.push_str(&format!("\n\nPart of task {id}: {title}"));
        if !desc.is_empty() {
            s.push_str(&format!(" — {desc}"));
        }
    }
    if !it.details.is_empty() {
        s.push_str(&format!("\n\nDetails:\n{}", it.details));
    }
    if !it.test_strategy.is_empty() {
        s.push_str(&format!("\n\nTest strategy:\n{}", it.test_strategy));
    }
    if !it.priority.is_empty() {
        s.push_str(&format!("\n\nPriority: {}", it.priority));
    }
    s + &super::do_only(rel, "sets the task's status")
}

fn build(rel: &str, r: &read::Read) -> Built {
    let (skip, held_by) = settled(&r.items);
    let mut warnings: Vec<String> = held_back(rel, &r.items, &held_by);
    warnings.extend(r.unknown.iter().cloned());
    warnings.sort();
    if let Some(aside) = set_aside(rel, &r.items) {
        warnings.insert(0, aside);
    }
    let mut index: Vec<Option<usize>> = vec![None; r.items.len()];
    let mut n = 0;
    for (i, slot) in index.iter_mut().enumerate() {
        if !skip.contains(&i) {
            *slot = Some(n);
            n += 1;
        }
    }
    let mut plan = Plan::new(
        match &r.tag {
            Some(t) => format!("The Taskmaster tasks of {rel} (tag {t})"),
            None => format!("The Taskmaster tasks of {rel}"),
        },
        Vec::with_capacity(n),
    );
    let mut units = Vec::with_capacity(n);
    for (i, it) in r.items.iter().enumerate() {
        if skip.contains(&i) {
            continue;
        }
        plan.tasks.push(Task {
            subject: match it.title.strip_prefix(&it.id) {
                Some(rest) if rest.starts_with(' ') => it.title.clone(),
                _ => format!("{} {}", it.id, it.title),
            },
            description: Some(description(rel, it)),
            blocked_by: blockers(&r.items, i, &index),
            ..super::task_of(
                "taskmaster",
                "software engineer implementing one task of a Taskmaster plan",
                it.state == State::Done,
                Default::default(),
                None,
            )
        });
        units.push(Unit {
            id: it.id.clone(),
            text: format!("{}\n{}\n{}", it.title, it.description, it.details),
            at: format!("{rel}: {}", it.path),
            mark: it.mark.clone(),
        });
    }
    Built {
        plan,
        units,
        warnings,
        meta: serde_json::json!({"tag": r.tag}),
    }
}

#[cfg(test)]
mod tests;
