//! A Taskmaster `tasks.json` read (pure): the tag, its tasks and subtasks, the units of work,
//! their states and dependencies, errors at their JSON path.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::sources::Problem;

/// What a unit's status means for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// `pending`, `in-progress` (or none): to run.
    Open,
    /// `done` (a subtask's `completed` too): not run again.
    Done,
    /// `cancelled`: not run; what waits for it does not wait.
    Cancelled,
    /// `deferred`, `blocked` (the team's "not now"), `review` (worked, waiting for a person):
    /// `task-master next` offers none of them, nor what waits for them (a dependency counts
    /// as met only when `done`), so they are not run in this run, nor is what waits for them.
    Held,
    /// A word Taskmaster does not know (`Done`, `completed`, `todo`): held as [`State::Held`]
    /// is, and named with the word it may mean ([`meant`]).
    Unknown,
}

impl State {
    /// What the status word `word` ("" for none) means, compared as Taskmaster compares it:
    /// exactly, but for a `subtask`'s own `pending` and `in-progress`, which `task-master
    /// next` offers in any case, and its `completed`, which `set-status` counts as `done`
    /// when it settles the parent. A task's word it does not know makes `task-master list`
    /// and `next` refuse the file ("Invalid task status"); a subtask's is never offered by
    /// `next`, nor met (only `done` is): both are [`State::Unknown`].
    pub(crate) fn of(word: &str, subtask: bool) -> State {
        match word {
            "" | "pending" | "in-progress" => State::Open,
            "done" => State::Done,
            "completed" if subtask => State::Done,
            "cancelled" => State::Cancelled,
            "deferred" | "blocked" | "review" => State::Held,
            w if subtask && State::of(&w.to_ascii_lowercase(), false) == State::Open => State::Open,
            _ => State::Unknown,
        }
    }
}

/// The Taskmaster word an unknown status word `word` may mean: its own in another case,
/// `done` for `completed`, `cancelled` for `canceled`, else `pending`.
fn meant(word: &str) -> String {
    let w = word.trim().to_ascii_lowercase();
    match w.as_str() {
        "completed" => "done".into(),
        "canceled" => "cancelled".into(),
        _ if w.is_empty() || State::of(&w, false) == State::Unknown => "pending".into(),
        _ => w,
    }
}

/// One unit of work: a subtask, or a task without subtasks.
#[derive(Debug, Clone)]
pub(crate) struct Item {
    /// `3` or `3.2`.
    pub id: String,
    /// `master.tasks[2]` or `master.tasks[2].subtasks[1]`.
    pub path: String,
    pub title: String,
    pub description: String,
    pub details: String,
    pub test_strategy: String,
    pub priority: String,
    pub state: State,
    /// Its status word as written (the parent's when the parent's settles it) and its
    /// `updatedAt` (Taskmaster sets it on `set-status`): see [`crate::sources::Unit::mark`].
    pub mark: String,
    /// The parent task's `(id, title, description)`, for a subtask.
    pub parent: Option<(String, String, String)>,
    /// The units it waits for (indices into [`Read::items`]).
    pub deps: BTreeSet<usize>,
    /// A task with subtasks it waits for that stays open, as `(task, why)`: `task-master
    /// set-status` settles a task `done` only when it sets the last of its subtasks done
    /// (one cancelled keeps it `in-progress`; one the team left open with every subtask done
    /// stays so), and counts a dependency met only when `done`, so this unit never starts
    /// there until the team sets that task done.
    pub waits_open: Option<(String, String)>,
}

impl Item {
    /// Its status word as written (its [`Item::mark`] without the time).
    pub(crate) fn word(&self) -> &str {
        self.mark.split_once('@').map_or(&self.mark, |(w, _)| w)
    }

    /// The unit `v` (`id` at `path`) of task `task` (itself, or its subtask's parent), whose
    /// state is `state`: a subtask of an open task has its own status, one of a task done,
    /// cancelled or held its task's.
    fn of(
        v: &Value,
        task: &Value,
        id: String,
        path: String,
        state: State,
        parent: Option<(String, String, String)>,
    ) -> Item {
        let own = state == State::Open;
        let word = text(if own { v } else { task }, "status");
        Item {
            id,
            path,
            title: text(v, "title"),
            description: text(v, "description"),
            details: text(v, "details"),
            test_strategy: text(v, "testStrategy"),
            priority: text(task, "priority"),
            state: State::of(&word, own && parent.is_some()),
            mark: mark(&word, v),
            parent,
            deps: BTreeSet::new(),
            waits_open: None,
        }
    }
}

/// The file, read.
#[derive(Debug, Clone, Default)]
pub(crate) struct Read {
    /// The tag read (`None`: the plain form `{"tasks": [...]}`).
    pub tag: Option<String>,
    pub items: Vec<Item>,
    /// A warning for each status word Taskmaster does not know, at its JSON path.
    pub unknown: Vec<String>,
}

/// An ID as written: `1`, `"1"`, `1.2`, `"1.2"` → `1`, `1.2`.
pub(crate) fn id_of(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        _ => None,
    }
}

/// A unit's mark: its status word as written and the `updatedAt` of its own object.
fn mark(word: &str, v: &Value) -> String {
    match v.get("updatedAt").and_then(Value::as_str) {
        Some(at) => format!("{word}@{at}"),
        None => word.to_string(),
    }
}

fn text(v: &Value, key: &str) -> String {
    v.get(key).map_or(String::new(), words)
}

/// A value as text: a string's own, none for `null`, else its JSON.
pub(crate) fn words(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The tasks array of the tag dagexec reads: the plain form's, else `preferred` (the current
/// tag in `.taskmaster/state.json`) when the file has it, else `master`, else the only tag.
pub(crate) fn tasks_of<'a>(
    doc: &'a Value,
    preferred: Option<&str>,
) -> Result<(Option<String>, &'a Vec<Value>), String> {
    let Some(obj) = doc.as_object() else {
        return Err("the file is not a JSON object".into());
    };
    if let Some(tasks) = obj.get("tasks") {
        return tasks
            .as_array()
            .map(|a| (None, a))
            .ok_or_else(|| "tasks: not an array".into());
    }
    let tagged: Vec<&String> = obj
        .iter()
        .filter(|(_, v)| v.get("tasks").is_some_and(Value::is_array))
        .map(|(k, _)| k)
        .collect();
    let tag = preferred
        .filter(|p| tagged.iter().any(|t| t == p))
        .map(str::to_string)
        .or_else(|| {
            tagged
                .iter()
                .find(|t| t.as_str() == "master")
                .map(|t| (*t).clone())
        })
        .or_else(|| (tagged.len() == 1).then(|| tagged[0].clone()));
    let Some(tag) = tag else {
        return Err(if tagged.is_empty() {
            "no `tasks` array (neither `{\"tasks\": [...]}` nor a tag `{\"master\": {\"tasks\": [...]}}`)".into()
        } else {
            format!(
                "several tags and none is `master` or the current tag: {}",
                tagged
                    .iter()
                    .map(|t| t.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        });
    };
    let tasks = obj[&tag]["tasks"].as_array().expect("filtered on is_array");
    Ok((Some(tag), tasks))
}

/// The units of `doc` and their dependencies; every problem at its JSON path.
pub(crate) fn read(rel: &str, doc: &Value, preferred: Option<&str>) -> Result<Read, Vec<Problem>> {
    let (tag, tasks) = tasks_of(doc, preferred)
        .map_err(|e| vec![Problem::new(format!("{rel}: {e}"), HINT_SHAPE)])?;
    let prefix = tag
        .as_ref()
        .map_or("tasks".to_string(), |t| format!("{t}.tasks"));
    let mut r = Walk {
        rel,
        out: Read {
            tag,
            items: Vec::new(),
            unknown: Vec::new(),
        },
        errors: Vec::new(),
        by_id: BTreeMap::new(),
        units_of: BTreeMap::new(),
        stays_open: BTreeMap::new(),
    };
    r.collect(tasks, &prefix);
    r.link(tasks, &prefix);
    crate::sources::generated::ok_unless(r.errors, r.out)
}

const HINT_SHAPE: &str = "is this a Taskmaster tasks.json? It holds `{\"tasks\": [...]}` or tags `{\"master\": {\"tasks\": [...]}}`";

/// What a `dependencies` list names: the units, and a task that stays open
/// ([`Item::waits_open`]).
#[derive(Default)]
struct Refs {
    units: BTreeSet<usize>,
    waits_open: Option<(String, String)>,
}

/// The document walked so far: what it read, and what it refused.
struct Walk<'a> {
    rel: &'a str,
    out: Read,
    errors: Vec<Problem>,
    /// Unit ID → item index.
    by_id: BTreeMap<String, usize>,
    /// Task ID → its units (its subtasks, or itself).
    units_of: BTreeMap<String, Vec<usize>>,
    /// Open task ID → why it stays open ([`Item::waits_open`]).
    stays_open: BTreeMap<String, String>,
}

impl Walk<'_> {
    fn error(&mut self, path: &str, message: &str, hint: &str) {
        self.errors.push(Problem::new(
            format!("{}: {path}: {message}", self.rel),
            hint,
        ));
    }

    /// The units, in file order; duplicate and missing IDs.
    fn collect(&mut self, tasks: &[Value], prefix: &str) {
        for (i, t) in tasks.iter().enumerate() {
            let path = format!("{prefix}[{i}]");
            let Some(id) = t.get("id").and_then(id_of) else {
                self.error(&path, "a task without an `id`", "give every task an id");
                continue;
            };
            if self.units_of.contains_key(&id) || self.by_id.contains_key(&id) {
                self.error(
                    &path,
                    &format!("task ID {id} is used twice"),
                    "give one of them the next free id and update the dependencies naming it",
                );
                continue;
            }
            let state = State::of(&text(t, "status"), false);
            if state == State::Unknown {
                self.unknown(&path, &id, &text(t, "status"));
            }
            let subtasks = t.get("subtasks").and_then(Value::as_array);
            let units = match subtasks.filter(|s| !s.is_empty()) {
                None => vec![self.push(Item::of(t, t, id.clone(), path.clone(), state, None))],
                Some(subs) => self.subtasks(t, &id, &path, state, subs),
            };
            self.units_of.insert(id, units);
        }
    }

    /// The units of task `t` (`id` at `path`, whose state is `state`): its subtasks `subs`.
    fn subtasks(
        &mut self,
        t: &Value,
        id: &str,
        path: &str,
        state: State,
        subs: &[Value],
    ) -> Vec<usize> {
        let mut units = Vec::new();
        let parent = (id.to_string(), text(t, "title"), text(t, "description"));
        for (j, s) in subs.iter().enumerate() {
            let spath = format!("{path}.subtasks[{j}]");
            let Some(local) = s.get("id").and_then(id_of) else {
                self.error(
                    &spath,
                    &format!("a subtask of task {id} without an `id`"),
                    "give every subtask an id",
                );
                continue;
            };
            let full = format!("{id}.{local}");
            if self.by_id.contains_key(&full) {
                if state != State::Open {
                    continue; // settled by its task: never run, written or told apart
                }
                self.error(
                    &spath,
                    &format!("subtask ID {full} is used twice"),
                    "give one of them the next free id",
                );
                continue;
            }
            // A parent done, cancelled or held settles its subtasks.
            let item = Item::of(s, t, full, spath, state, Some(parent.clone()));
            if state == State::Open && item.state == State::Cancelled {
                let why = format!("while its subtask {} is cancelled", item.id);
                self.stays_open.entry(id.to_string()).or_insert(why);
            }
            if state == State::Open && item.state == State::Unknown {
                self.unknown(&item.path, &item.id, &text(s, "status"));
            }
            units.push(self.push(item));
        }
        let done = |&u: &usize| self.out.items[u].state == State::Done;
        if state == State::Open && !units.is_empty() && units.iter().all(done) {
            let why = "though every subtask of it is done".to_string();
            self.stays_open.insert(id.to_string(), why);
        }
        units
    }

    /// Task `id` at `path` has the status `word`, which Taskmaster does not know.
    fn unknown(&mut self, path: &str, id: &str, word: &str) {
        self.out.unknown.push(format!(
            "{}: {path}: task {id} has the status {word:?}, which Taskmaster does not know (it compares status words exactly: `task-master next` offers neither it nor what waits for it), so neither is run: `task-master set-status --id={id} --status={}` sets the word you meant",
            self.rel,
            meant(word)
        ));
    }

    fn push(&mut self, item: Item) -> usize {
        let i = self.out.items.len();
        self.by_id.insert(item.id.clone(), i);
        self.out.items.push(item);
        i
    }

    /// The units a reference names: `a.b` a subtask; `n` in a subtask a sibling when there is
    /// one, else (and in a task) task `n`'s units.
    fn resolve(&self, reference: &str, parent: Option<&str>) -> Option<Vec<usize>> {
        if let Some(p) = parent
            && !reference.contains('.')
            && let Some(&i) = self.by_id.get(&format!("{p}.{reference}"))
        {
            return Some(vec![i]);
        }
        if let Some(units) = self.units_of.get(reference) {
            return Some(units.clone());
        }
        self.by_id.get(reference).map(|&i| vec![i])
    }

    /// The dependencies: a task's on every unit of the tasks it names (given to its subtasks
    /// that wait for no sibling), a subtask's on its siblings or other tasks.
    fn link(&mut self, tasks: &[Value], prefix: &str) {
        for (i, t) in tasks.iter().enumerate() {
            let Some(id) = t.get("id").and_then(id_of) else {
                continue;
            };
            let Some(units) = self.units_of.get(&id).cloned() else {
                continue;
            };
            let path = format!("{prefix}[{i}]");
            let task_deps = self.refs(t, &path, &id, None);
            let subs = t.get("subtasks").and_then(Value::as_array);
            match subs.filter(|s| !s.is_empty()) {
                None => {
                    if let Some(&u) = units.first() {
                        let item = &mut self.out.items[u];
                        item.deps.extend(task_deps.units);
                        item.waits_open = task_deps.waits_open;
                    }
                }
                Some(subs) => {
                    for (j, s) in subs.iter().enumerate() {
                        let Some(local) = s.get("id").and_then(id_of) else {
                            continue;
                        };
                        let Some(&u) = self.by_id.get(&format!("{id}.{local}")) else {
                            continue;
                        };
                        if self.out.items[u].path != format!("{path}.subtasks[{j}]") {
                            continue; // a duplicate, already said
                        }
                        let spath = format!("{path}.subtasks[{j}]");
                        let full = self.out.items[u].id.clone();
                        let own = self.refs(s, &spath, &full, Some(&id));
                        let siblings = own.units.iter().any(|d| units.contains(d));
                        let item = &mut self.out.items[u];
                        item.deps.extend(own.units);
                        item.waits_open = own.waits_open;
                        if !siblings {
                            item.deps.extend(task_deps.units.iter().copied());
                            if item.waits_open.is_none() {
                                item.waits_open.clone_from(&task_deps.waits_open);
                            }
                        }
                    }
                }
            }
        }
    }

    /// The units `v.dependencies` names (`who` is the task or subtask ID, `parent` a subtask's
    /// task), and the first task named that stays open; unknown and self references are
    /// errors.
    fn refs(&mut self, v: &Value, path: &str, who: &str, parent: Option<&str>) -> Refs {
        let mut out = Refs::default();
        let Some(deps) = v.get("dependencies") else {
            return out;
        };
        let Some(deps) = deps.as_array() else {
            self.error(
                &format!("{path}.dependencies"),
                &format!("task {who}: not an array of ids"),
                "write the ids in a list: \"dependencies\": [1, \"3.2\"]",
            );
            return out;
        };
        for (k, d) in deps.iter().enumerate() {
            let at = format!("{path}.dependencies[{k}]");
            let Some(reference) = id_of(d) else {
                self.error(
                    &at,
                    &format!("task {who}: {d} is not a task id"),
                    "list task ids",
                );
                continue;
            };
            match self.resolve(&reference, parent) {
                Some(units) if units.iter().any(|&u| self.out.items[u].id == who) => self.error(
                    &at,
                    &format!("task {who} depends on itself"),
                    "remove the dependency",
                ),
                Some(units) => {
                    let task = self.units_of.get(&reference) == Some(&units);
                    if let Some(sub) = self.stays_open.get(&reference).filter(|_| task) {
                        out.waits_open
                            .get_or_insert_with(|| (reference.clone(), sub.clone()));
                    }
                    out.units.extend(units);
                }
                None => self.error(
                    &at,
                    &format!("task {who} depends on {reference}, which is not a task in this file"),
                    "fix the id or drop it from `dependencies`",
                ),
            }
        }
        out
    }
}
