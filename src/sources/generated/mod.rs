//! What every task-list format shares once its [`Reader`] has built a plan: locating and
//! reading the file (inside the repository, at most [`MAX_BYTES`]), checking the plan with
//! the errors said at the file's line or JSON path with the task's ID, carrying an earlier
//! run's state over, writing the generated plan, and writing the completed tasks back into
//! the file in the round's index.

mod carry;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::json;

pub(crate) use carry::{carry_over, identities, settle};

use super::{Format, Prepared};
use crate::pure::plan::fields::SOURCE;
use crate::pure::plan::model::{Plan, Status};

/// The folder next to a task list that holds the plan generated from it.
pub const GENERATED_DIR: &str = ".dagexec";

/// The largest source file read (a task list is text a person keeps; 10,000 tasks take a few
/// MiB).
pub const MAX_BYTES: u64 = 64 << 20;

/// Why a task list cannot run: the message names the file's line or JSON path and the task.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Problem {
    pub message: String,
    pub hint: String,
}

impl Problem {
    pub fn new(message: impl Into<String>, hint: impl Into<String>) -> Self {
        Problem {
            message: message.into(),
            hint: hint.into(),
        }
    }

    /// A problem at line `line` of the file `rel`: `rel:line: what`.
    pub fn at(
        rel: &str,
        line: usize,
        what: impl std::fmt::Display,
        hint: impl Into<String>,
    ) -> Self {
        Problem::new(format!("{rel}:{line}: {what}"), hint)
    }
}

// How the tests read a problem, from when Spec Kit's and the issues' errors had their own types.
#[cfg(test)]
impl Problem {
    pub fn hint(&self) -> String {
        self.hint.clone()
    }
}
#[cfg(test)]
impl From<&Problem> for Problem {
    fn from(p: &Problem) -> Self {
        p.clone()
    }
}

/// One task of the plan as the source names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// The ID as written (`3.2`, `1.1`).
    pub id: String,
    /// Its text (a changed text starts the task afresh when the file is read again).
    pub text: String,
    /// Where it is: `file:line` or `file: json.path`.
    pub at: String,
    /// Its status as the file says it (`pending`, `done@2026-…` with Taskmaster's `updatedAt`;
    /// a checkbox's `x`, ` `, `-`): a mark that differs from the one read last time is the
    /// team's change, which wins over the earlier run's state.
    pub mark: String,
}

/// A format's plan: `plan.tasks[i]` is `units[i]`.
#[derive(Debug, Clone)]
pub struct Built {
    pub plan: Plan,
    pub units: Vec<Unit>,
    pub warnings: Vec<String>,
    /// What [`Reader::write_back`] needs to find the tasks again (a JSON object, kept in the
    /// plan's source field as `meta`; `null` for none).
    pub meta: serde_json::Value,
}

/// Where the file being read is.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The repository root (canonical).
    pub root: &'a Path,
    /// The file's folder (absolute, canonical).
    pub dir: &'a Path,
    /// The file, repository-relative.
    pub rel: &'a str,
    /// The generated plan, repository-relative.
    pub plan_rel: &'a str,
}

/// A task-list format: its names, its plan from its text, where the plan records what it was
/// made from, and its text with tasks marked done. Everything else is shared
/// (`sources::prepare`, `sources::write_back`, `sources::own_file`, `sources::completed_ids`, …).
pub trait Reader: Sync {
    /// What the format is called, how its files are named and where they usually are.
    fn names(&self) -> Names;
    /// Whether the file `--plan` names is of this format (no two readers claim one file).
    fn claims(&self, place: &Place<'_>) -> bool;
    /// The plan (and task) field that records what the plan was made from: the tasks'
    /// identities (`{"tasks": [{"id", "text", "mark"}]}`) and each task's ID.
    fn field(&self) -> &'static str {
        SOURCE
    }
    /// The file `plan` was made from when this reader made it (repository-relative, as
    /// recorded).
    fn file_of<'p>(&self, plan: &'p Plan) -> Option<&'p str> {
        let source = plan.extra.get(SOURCE)?;
        if source.get("format")?.as_str()? != self.names().name {
            return None;
        }
        source.get("file")?.as_str()
    }
    /// The plan of `text` (the file at `cx.rel`); errors at their line or JSON path.
    fn build(&self, cx: &Context<'_>, text: &str) -> Result<Built, Vec<Problem>>;
    /// Records on the plan what it was made from, the file `rel` (what [`Reader::file_of`]
    /// reads): by default the [`SOURCE`] field, each task's ID, and the tasks the file says
    /// are done as completed.
    fn stamp(&self, built: &mut Built, rel: &str) {
        stamp(built, self.names().name, rel);
    }
    /// `text` with the tasks whose IDs are in `done` (and what that completes) marked done,
    /// every other byte kept; `Err(why)` when it no longer reads as this format. `meta` is
    /// what [`Reader::build`] recorded in [`Built::meta`].
    fn write_back(
        &self,
        text: &str,
        done: &BTreeSet<String>,
        meta: &serde_json::Value,
    ) -> Result<String, String>;
    /// How a person marks the tasks `ids` done in the file by hand (said when an edit of the
    /// file made during a run would undo them).
    fn mark_done_hint(&self, _ids: &[&str]) -> String {
        "tick them in it first".to_string()
    }
}

/// What a format is called, and how its files are named.
#[derive(Debug, Clone, Copy)]
pub struct Names {
    /// In messages and in the generated plan (`taskmaster`).
    pub name: &'static str,
    /// As people call it (`Taskmaster`).
    pub label: &'static str,
    /// How the name of one of its files ends (`.json`): only such a file is written back.
    pub extension: &'static str,
    /// Where its task lists usually are in a repository, found without `--plan`
    /// (`specs/*/tasks.md`: `*` is any one folder; links are not followed).
    pub usual: &'static str,
}

/// A file `--plan` names, as a reader judges whether it is of its format
/// ([`Reader::claims`]): its name, and the folders of where it really is.
pub struct Place<'a> {
    pub path: &'a Path,
    /// The file's extension, lowercased (`md`).
    pub extension: String,
    /// The components of its real path (`--plan tasks.md` given inside `.kiro/specs/x/` is
    /// there).
    pub parts: Vec<String>,
}

impl Place<'_> {
    /// The file at `path`.
    pub fn of(path: &Path) -> Place<'_> {
        let real = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        Place {
            path,
            extension: path
                .extension()
                .map(|e| e.to_string_lossy().to_ascii_lowercase())
                .unwrap_or_default(),
            parts: real
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect(),
        }
    }

    /// Whether it is below a folder `dir` whose child `next` it is below too (`.kiro`,
    /// `specs`).
    pub fn under(&self, dir: &str, next: &str) -> bool {
        self.parts.windows(2).any(|w| w[0] == dir && w[1] == next)
    }
}

/// `text` with the checkbox at each byte offset of `boxes` (the character between its
/// brackets) ticked, every other byte unchanged.
pub(crate) fn ticked(text: &str, boxes: impl IntoIterator<Item = usize>) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for b in boxes {
        bytes[b] = b'x';
    }
    String::from_utf8(bytes).expect("an ASCII space or dash became an ASCII x")
}

/// The documents `names` that are files beside the task list (links not followed),
/// repository-relative.
pub(crate) fn docs_beside(cx: &Context<'_>, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .filter(|d| std::fs::symlink_metadata(cx.dir.join(d)).is_ok_and(|m| m.is_file()))
        .map(|d| join(dir_of(cx.rel), d))
        .collect()
}

/// `value`, unless anything was refused on the way to it (`errors`, all of them).
pub(crate) fn ok_unless<T, E>(errors: Vec<E>, value: T) -> Result<T, Vec<E>> {
    if errors.is_empty() {
        Ok(value)
    } else {
        Err(errors)
    }
}

/// `dir/name`, or `name` when `dir` is the root.
pub(crate) fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

pub(crate) fn dir_of(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(d, _)| d)
}

/// The generated plan of the task list at `rel` (repository-relative):
/// `<dir>/.dagexec/plan.json`.
pub(crate) fn plan_rel_of(rel: &str) -> String {
    join(&join(dir_of(rel), GENERATED_DIR), "plan.json")
}

/// `p` relative to `root`, with `/` separators.
pub(crate) fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}

/// Marks the plan as made from the file `rel` by the format `name`: the identities on the
/// plan, each task's ID on it, and the tasks done in the file as completed.
fn stamp(built: &mut Built, name: &str, rel: &str) {
    let Built {
        plan,
        units,
        warnings,
        meta,
    } = built;
    plan.progress.completed_tasks.clear();
    for (task, unit) in plan.tasks.iter_mut().zip(units.iter()) {
        task.extra.insert(SOURCE.into(), json!({"id": unit.id}));
        if task.status == Status::Completed {
            task.result.get_or_insert_with(|| format!("done in {rel}"));
        }
    }
    super::list_completed(plan);
    let ids: Vec<serde_json::Value> = units
        .iter()
        .map(|u| json!({"id": u.id, "text": u.text, "mark": u.mark}))
        .collect();
    plan.extra.insert(
        SOURCE.into(),
        json!({"format": name, "file": rel, "tasks": ids, "warnings": warnings, "meta": meta}),
    );
}

/// Reads the file at `path` (inside `root`) in `format` and writes its plan (next to it with
/// `write`, else in a temporary directory), carrying over an earlier run's state.
pub fn prepare(
    format: Format,
    root: &Path,
    path: &Path,
    write: bool,
) -> Result<Prepared, Vec<Problem>> {
    let reader = format.reader();
    let one = |p: Problem| vec![p];
    let (root_c, abs_c, rel) = locate(root, path).map_err(one)?;
    let text = read(&abs_c, &rel).map_err(one)?;
    let plan_rel = plan_rel_of(&rel);
    let dir = abs_c.parent().unwrap_or(&root_c).to_path_buf();
    let cx = Context {
        root: &root_c,
        dir: &dir,
        rel: &rel,
        plan_rel: &plan_rel,
    };
    let mut built = reader.build(&cx, &text)?;
    reader.stamp(&mut built, &rel);
    let Built {
        mut plan,
        units,
        warnings,
        ..
    } = built;
    own_file_declared(&plan, &units, &rel)?;
    // What the plan's validation would refuse is said here, at the unit's line or JSON path
    // (the generated plan's name, perhaps a temporary file's, means nothing to the user).
    if let Err(crate::pure::plan::PlanErrors(errors)) =
        crate::edge::plan_file::check_in(&plan, Some(&plan_rel), &root_c)
    {
        let mut found: Vec<(Option<usize>, Problem)> = errors
            .iter()
            .map(|e| (e.task(), at_unit(&rel, &units, e)))
            .collect();
        found.sort_by_key(|(task, _)| *task);
        return Err(found.into_iter().map(|(_, p)| p).collect());
    }
    let plan_path = root_c.join(&plan_rel);
    if plan_path.is_file() {
        let old = crate::edge::plan_file::load(&plan_path).map_err(|e| {
            one(Problem::new(
                format!(
                    "{}: {e} (delete it to start over from {rel})",
                    plan_path.display()
                ),
                "",
            ))
        })?;
        // Another list of the file (a Taskmaster tag switched to since) starts afresh.
        let before = meta_of(&old);
        if before.is_null() || before == meta_of(&plan) {
            carry_over(&mut plan, &old, reader.field());
        }
    }
    settle(&mut plan);
    let failed = |path: &Path, e: &dyn std::fmt::Display| {
        vec![Problem::new(
            format!("cannot write {}: {e}", path.display()),
            "",
        )]
    };
    let created = write
        .then(|| super::prepared::created_by(&plan_path))
        .flatten();
    if write && let Some(parent) = plan_path.parent() {
        crate::edge::fsx::create_dir_all(&root_c, parent).map_err(|e| failed(parent, &e))?;
    }
    let prepared =
        Prepared::save(&plan, plan_path, plan_rel, write).map_err(|(path, e)| failed(&path, &e))?;
    Ok(Prepared {
        warnings,
        ..prepared
    }
    .creating(created))
}

/// `path` (absolute, or relative to `root`) and `root`, canonical, and the path relative to
/// the root: `None` when the path is outside it.
pub(crate) fn within(root: &Path, path: &Path) -> (PathBuf, PathBuf, Option<String>) {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let (root_c, abs_c) = (canon(root), canon(&root.join(path)));
    let rel = abs_c.starts_with(&root_c).then(|| rel(&root_c, &abs_c));
    (root_c, abs_c, rel)
}

/// The root and the file canonical, and the file relative to the root; a file outside the
/// root or in its `.git` is refused.
fn locate(root: &Path, path: &Path) -> Result<(PathBuf, PathBuf, String), Problem> {
    match within(root, path) {
        (root_c, abs_c, Some(rel)) if crate::pure::paths::git_dir_prefix(&rel).is_none() => {
            Ok((root_c, abs_c, rel))
        }
        _ => {
            let abs = root.join(path);
            let name = abs.file_name().map_or_else(
                || "the task list".to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            Err(Problem::new(
                format!(
                    "{} is outside the repository {}",
                    abs.display(),
                    root.display()
                ),
                format!("run dagexec from the repository that holds {name}"),
            ))
        }
    }
}

/// A task may not declare the task list itself: only dagexec writes it during a run.
fn own_file_declared(plan: &Plan, units: &[Unit], rel: &str) -> Result<(), Vec<Problem>> {
    let own = crate::pure::paths::key(rel);
    let errors: Vec<Problem> = plan
        .tasks
        .iter()
        .zip(units)
        .flat_map(|(t, u)| {
            t.files()
                .filter(|f| crate::pure::paths::normalize(f).is_ok_and(|n| crate::pure::paths::key(&n) == own))
                .map(move |f| {
                    Problem::new(
                        format!("{}: task {} names the file {f:?}, which is the task list only dagexec writes", u.at, u.id),
                        "name the files the task changes, not the task list",
                    )
                })
        })
        .collect();
    ok_unless(errors, ())
}

/// The file's text: a regular file of at most [`MAX_BYTES`], UTF-8.
fn read(abs: &Path, rel: &str) -> Result<String, Problem> {
    let meta = std::fs::metadata(abs).map_err(|e| Problem::new(format!("{rel}: {e}"), ""))?;
    if !meta.is_file() {
        return Err(Problem::new(format!("{rel}: not a regular file"), ""));
    }
    if meta.len() > MAX_BYTES {
        return Err(Problem::new(
            format!(
                "{rel}: {} bytes, more than the {} MiB dagexec reads from a task list",
                meta.len(),
                MAX_BYTES >> 20
            ),
            "split the task list, or check that this is the file you meant",
        ));
    }
    std::fs::read_to_string(abs).map_err(|e| Problem::new(format!("{rel}: {e}"), ""))
}

/// A problem the plan's validation found, said at the unit it names.
fn at_unit(rel: &str, units: &[Unit], e: &crate::pure::plan::error::PlanError) -> Problem {
    use crate::pure::plan::error::PlanError as E;
    let name = |i: usize| units.get(i).map_or_else(|| i.to_string(), |u| u.id.clone());
    let task = e.task();
    let Some(u) = task.and_then(|i| units.get(i)) else {
        return Problem::new(
            format!("{rel}: the plan made from it is refused: {e}"),
            e.hint(),
        );
    };
    let message = match e {
        E::Cycle { cycle } => format!(
            "{}: the tasks wait for each other in a cycle: {}",
            u.at,
            cycle
                .iter()
                .map(|&i| name(i))
                .collect::<Vec<_>>()
                .join(" → ")
        ),
        E::UnsafePath { path, reason, .. } => {
            format!(
                "{}: task {} names the file {path:?}, which {reason}",
                u.at, u.id
            )
        }
        E::LinkedPath {
            path, link, target, ..
        } => format!(
            "{}: task {} names the file {path:?}, which goes through {link}, a symbolic link to {target}",
            u.at, u.id
        ),
        // The text itself is not repeated: it holds the character.
        E::ControlChar { code, .. } => format!(
            "{}: task {} contains a control character (U+{code:04X})",
            u.at, u.id
        ),
        // The plan's own wording starts `task <plan index> …`: the list's ID says it.
        other => {
            let text = other.to_string();
            let own = task.map(|i| format!("task {i} ")).unwrap_or_default();
            let text = text.strip_prefix(own.as_str()).unwrap_or(&text);
            format!("{}: task {}: {text}", u.at, u.id)
        }
    };
    let hint = match e {
        E::Cycle { .. } => "remove one dependency of the cycle".to_string(),
        other => other.hint(),
    };
    Problem::new(message, hint)
}

/// The source file of a plan in `format`, when it is one dagexec may write: repository form,
/// outside `.git`, with the format's extension.
pub(crate) fn writable(plan: &Plan, format: Format) -> Result<String, String> {
    let reader = format.reader();
    let file = reader.file_of(plan).unwrap_or_default();
    match crate::pure::paths::normalize(file) {
        Ok(clean)
            if clean
                .to_ascii_lowercase()
                .ends_with(reader.names().extension)
                && crate::pure::paths::git_dir_prefix(&clean).is_none() =>
        {
            Ok(clean)
        }
        _ => Err(format!(
            "{file:?} is not a {} file dagexec may write",
            reader.names().name
        )),
    }
}

/// For a generated plan, writes its completed tasks into its source file in the round's
/// `index` (`HEAD`'s version, never the work tree's: a user's uncommitted edit is neither
/// committed nor overwritten). A file the commit does not hold or that no longer reads as its
/// format is skipped with why.
pub fn write_back(
    index: &crate::edge::git::RoundIndex,
    plan: &Plan,
) -> Result<super::Tick, crate::edge::git::GitError> {
    use super::Tick;
    let Some(format) = Format::of_plan(plan) else {
        return Ok(Tick::Nothing);
    };
    let reader = format.reader();
    let path = match writable(plan, format) {
        Ok(p) => p,
        Err(why) => {
            return Ok(Tick::Skipped {
                path: reader.file_of(plan).unwrap_or_default().to_string(),
                why,
            });
        }
    };
    let skipped = |why: String| Tick::Skipped {
        path: path.clone(),
        why,
    };
    // The list in the round's index, unless it cannot be written back there.
    let Some((mode, bytes)) = index.read_entry(&path)? else {
        return Ok(skipped("the commit holds no such file (deleted?)".into()));
    };
    if mode == "120000" {
        return Ok(skipped("it is a symbolic link".into()));
    }
    let Ok(text) = String::from_utf8(bytes) else {
        return Ok(skipped("it is not UTF-8 text".into()));
    };
    let written = match reader.write_back(&text, &super::completed_ids(plan), &meta_of(plan)) {
        Ok(t) => t,
        Err(why) => {
            return Ok(skipped(format!(
                "it no longer reads as a {} task list ({why})",
                reader.names().name
            )));
        }
    };
    if written == text {
        return Ok(Tick::Nothing);
    }
    index.write_entry(&path, &mode, written.as_bytes())?;
    Ok(Tick::Ticked(path))
}

/// What the reader recorded to find the tasks again ([`Built::meta`]).
pub(crate) fn meta_of(plan: &Plan) -> serde_json::Value {
    plan.extra
        .get(SOURCE)
        .and_then(|s| s.get("meta"))
        .cloned()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
