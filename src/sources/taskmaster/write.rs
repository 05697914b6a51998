//! Writing `"status": "done"` into a Taskmaster `tasks.json` as the only change: `serde_json`
//! reads each task and subtask as its members' raw text (`RawValue`, borrowed from the file's
//! text, so it is where it is written), and only its `status` value's bytes are replaced, so
//! key order, unknown fields, spacing and line ends stay as written.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;
use serde_json::value::RawValue;

use super::read::{State, id_of, tasks_of, words};

/// A JSON object's members as written (its last one of a name, as serde reads it).
type Members<'a> = HashMap<String, &'a RawValue>;

/// Where `raw`, borrowed from `text`, is in it.
fn span(text: &str, raw: &RawValue) -> (usize, usize) {
    let start = raw.get().as_ptr() as usize - text.as_ptr() as usize;
    (start, start + raw.get().len())
}

/// An edit: replace `start..end` with `with`.
type Edit = (usize, usize, &'static str);

/// The edit that makes the object `obj` (its members `m`, a `subtask`'s or a task's) `done`:
/// nothing when its status is not open (done already, `review`, `cancelled`, `deferred`,
/// `blocked` or a word Taskmaster does not know, as the team wrote it), or not a plain value.
fn set_done(text: &str, obj: &RawValue, m: &Members<'_>, subtask: bool) -> Option<Edit> {
    let Some(status) = m.get("status") else {
        let start = span(text, obj).0;
        return Some((start + 1, start + 1, "\"status\": \"done\", "));
    };
    if status.get().starts_with(['{', '[']) {
        return None;
    }
    let (s, e) = span(text, status);
    (State::of(&word(m), subtask) == State::Open).then_some((s, e, "\"done\""))
}

fn id_at(m: &Members<'_>) -> Option<String> {
    id_of(&serde_json::from_str::<Value>(m.get("id")?.get()).ok()?)
}

/// Its status word, as the reader reads it ("" for none).
fn word(m: &Members<'_>) -> String {
    m.get("status")
        .and_then(|s| serde_json::from_str::<Value>(s.get()).ok())
        .map_or(String::new(), |v| words(&v))
}

/// The members of the object `raw`; `None` for another value.
fn members(raw: &RawValue) -> Option<Members<'_>> {
    serde_json::from_str(raw.get()).ok()
}

/// `text` with every open unit in `done` set to `"done"` (a subtask of a task that is not
/// open is settled by its task's status: left as the team wrote it), and an open task whose subtasks are
/// all done once one of them is set so (as `task-master set-status` settles a parent when it
/// sets a subtask: each `done` or `completed`, compared exactly, [`State::of`]; a task the
/// team left open with every subtask done stays so); the tag is `tag` (`None`: the plain
/// form).
pub(crate) fn write_done(
    text: &str,
    done: &BTreeSet<String>,
    tag: Option<&str>,
) -> Result<String, String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let (found, _) = tasks_of(&doc, tag)?;
    if found.as_deref() != tag {
        return Err(format!("the tag {tag:?} is gone"));
    }
    let root: &RawValue = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut scope = members(root).ok_or("not an object")?;
    if let Some(t) = tag {
        scope = members(scope.get(t).ok_or("the tag is gone")?).ok_or("the tag is gone")?;
    }
    let tasks: Vec<&RawValue> = scope
        .get("tasks")
        .and_then(|t| serde_json::from_str(t.get()).ok())
        .ok_or("no tasks array")?;
    let mut edits: Vec<Edit> = Vec::new();
    for raw in tasks {
        let Some(t) = members(raw) else { continue };
        let Some(id) = id_at(&t) else { continue };
        let subs: Vec<&RawValue> = t
            .get("subtasks")
            .and_then(|s| serde_json::from_str(s.get()).ok())
            .unwrap_or_default();
        if subs.is_empty() {
            if done.contains(&id) {
                edits.extend(set_done(text, raw, &t, false));
            }
            continue;
        }
        if State::of(&word(&t), false) != State::Open {
            continue; // its status settles its subtasks, as the team wrote them
        }
        let (mut all, mut marked) = (true, false);
        for raw_sub in subs {
            let s = members(raw_sub).unwrap_or_default();
            let Some(local) = id_at(&s) else {
                all = false;
                continue;
            };
            if done.contains(&format!("{id}.{local}")) {
                let edit = set_done(text, raw_sub, &s, true);
                marked |= edit.is_some();
                edits.extend(edit);
            } else if State::of(&word(&s), true) != State::Done {
                all = false;
            }
        }
        if all && marked {
            edits.extend(set_done(text, raw, &t, false));
        }
    }
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    let mut out = text.to_string();
    for (s, e, with) in edits {
        out.replace_range(s..e, with);
    }
    Ok(out)
}
