//! Plan sources other than `.design/plan.json`: the task lists teams already keep, each read
//! into the same plan model the engine runs, and kept true as tasks complete; and long-run
//! `PLAN.md` folders (`longrun`); and a GitHub issue's sub-issues (`issues`, read from the
//! network, closed by the pull request that completes them rather than written back).
//!
//! Every source is a [`Source`], prepared one way ([`Source::prepare`]) into one [`Prepared`]
//! plan, what stops it said as [`Problem`]s ([`describe`]). One abstraction, [`Format`],
//! covers every task-list format, so no caller names one:
//!
//! - [`Format::detect`] — which format a `--plan` path is (by its name and place);
//! - [`prepare`] — the file read, its plan built and checked (errors at the file's line or
//!   JSON path, with the task's ID), the earlier run's state carried over, and the generated
//!   plan written to `<dir of the file>/.dagexec/plan.json` (or a temporary directory);
//! - [`write_back`] — the completed tasks written into the file in the round's index (ticks,
//!   `"status": "done"`), never the work tree;
//! - [`own_file`] — the file only dagexec writes during a run (a worker's edit is dropped);
//! - [`generated_dir_of`] — the folder of dagexec's own generated state.
//!
//! The formats: [`speckit`] (Spec Kit `tasks.md`), [`taskmaster`] (Taskmaster
//! `.taskmaster/tasks/tasks.json`), [`kiro`] (Kiro and cc-sdd `.kiro/specs/<feature>/tasks.md`).
//! A new format is a module implementing [`Reader`] (its names and usual place, which files
//! it claims, a plan from the text, the text with the completed IDs marked done) and a
//! [`Format`] variant naming that reader; everything else is shared ([`generated`]). A
//! format that declares no files gives its tasks none: no declared file, no assumed
//! conflict — two tasks that do change one file are integrated one after the other, and one
//! whose patch no longer applies is retried from the integrated tree.

pub mod generated;
pub mod issues;
pub mod kiro;
pub mod longrun;
pub(crate) mod markdown;
mod prepared;
pub mod speckit;
pub mod taskmaster;

use std::collections::BTreeSet;
use std::path::Path;

pub use generated::{Built, Context, Names, Place, Problem, Reader, Unit, prepare, write_back};
pub use prepared::{Prepared, Source};

use crate::pure::plan::fields::SOURCE;
use crate::pure::plan::model::{Agent, ContextFile, Files, Metadata, Plan, Status, Task};

/// A task-list format dagexec reads as a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Spec Kit `specs/<feature>/tasks.md`.
    SpecKit,
    /// Taskmaster `.taskmaster/tasks/tasks.json` (plain or tagged).
    Taskmaster,
    /// Kiro / cc-sdd `.kiro/specs/<feature>/tasks.md`.
    Kiro,
}

impl Format {
    /// The format of the file `--plan` names, by its name and place: the one whose reader
    /// claims it ([`Reader::claims`]: a `tasks.md` under `.kiro/specs/` is Kiro's, any other
    /// Markdown file Spec Kit's; `tasks.json` under `.taskmaster/`, or any `tasks.json` that
    /// is not a dagexec plan, is Taskmaster's).
    pub fn detect(path: &Path) -> Option<Format> {
        let place = generated::Place::of(path);
        Format::ALL.into_iter().find(|f| f.reader().claims(&place))
    }

    /// The task lists in their usual places under `root` (repository-relative; by format in
    /// [`Format::ALL`]'s order, then sorted): `.taskmaster/tasks/tasks.json`,
    /// `.kiro/specs/*/tasks.md`, `specs/*/tasks.md` ([`generated::Names::usual`]). Links are
    /// not followed.
    pub fn find(root: &Path) -> Vec<(Format, String)> {
        let file = |rel: &str| std::fs::symlink_metadata(root.join(rel)).is_ok_and(|m| m.is_file());
        let mut out = Vec::new();
        for format in Format::ALL {
            let usual = format.reader().names().usual;
            let Some((dir, name)) = usual.split_once("/*/") else {
                if file(usual) {
                    out.push((format, usual.to_string()));
                }
                continue;
            };
            let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
                continue;
            };
            let mut found: Vec<String> = entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| format!("{dir}/{}/{name}", e.file_name().to_string_lossy()))
                .filter(|rel| file(rel))
                .collect();
            found.sort();
            out.extend(found.into_iter().map(|rel| (format, rel)));
        }
        out
    }

    /// Every format: the order [`Format::find`] lists them in, and a generated plan is
    /// recognised in ([`Format::of_plan`]; each records its own source, so the order does
    /// not decide it).
    pub const ALL: [Format; 3] = [Format::Taskmaster, Format::Kiro, Format::SpecKit];

    /// Its reader: what the format itself is; everything else is shared.
    pub fn reader(self) -> &'static dyn Reader {
        match self {
            Format::SpecKit => &speckit::SpecKit,
            Format::Taskmaster => &taskmaster::Taskmaster,
            Format::Kiro => &kiro::Kiro,
        }
    }

    /// What people call it.
    pub fn label(self) -> &'static str {
        self.reader().names().label
    }

    /// The format a generated plan was made from, if any.
    pub fn of_plan(plan: &Plan) -> Option<Format> {
        Format::ALL
            .into_iter()
            .find(|f| f.reader().file_of(plan).is_some())
    }
}

/// Several problems as one message (one per line) and their hints.
pub fn describe(problems: &[Problem]) -> (String, String) {
    let message = problems
        .iter()
        .map(|p| p.message.clone())
        .collect::<Vec<_>>()
        .join("\n");
    let mut hints: Vec<String> = Vec::new();
    for p in problems {
        if !p.hint.is_empty() && !hints.contains(&p.hint) {
            hints.push(p.hint.clone());
        }
    }
    (message, hints.join("; "))
}

/// The source file a generated plan was made from (repository-relative, as recorded).
pub fn source_of(plan: &Plan) -> Option<&str> {
    Format::of_plan(plan)?.reader().file_of(plan)
}

/// The source file of a generated plan, which only dagexec writes during a run: a worker's
/// change to it is dropped from its patch. `None` for other plans, and for a recorded path
/// dagexec may not write (outside the repository form, in `.git`, not of its format).
pub fn own_file(plan: &Plan) -> Option<String> {
    generated::writable(plan, Format::of_plan(plan)?).ok()
}

/// The folder holding a generated plan's state (`<dir of the file>/.dagexec`), whose changes
/// are dagexec's own, not the user's.
pub fn generated_dir_of(plan: &Plan) -> Option<String> {
    let file = source_of(plan)?;
    Some(generated::join(
        generated::dir_of(file),
        generated::GENERATED_DIR,
    ))
}

/// `git status --porcelain` output without the entries inside `dir` (or `dir` itself).
pub fn without_dir(status: &str, dir: &str) -> String {
    status
        .lines()
        .filter(|l| {
            let path = l.get(3..).unwrap_or("").trim_matches('"');
            let path = path.rsplit(" -> ").next().unwrap_or(path);
            !(path.trim_end_matches('/') == dir || crate::pure::paths::within(path, dir))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What writing the completed tasks back into a source file did for a round commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tick {
    /// Not a generated plan, or nothing new to write.
    Nothing,
    /// The round's tree holds the file at this path with the completed tasks written.
    Ticked(String),
    /// The file could not be written in the round's tree; the round is committed without it.
    Skipped { path: String, why: String },
}

/// The IDs of a generated plan's completed tasks.
pub fn completed_ids(plan: &Plan) -> BTreeSet<String> {
    let field = Format::of_plan(plan).map_or(SOURCE, |f| f.reader().field());
    generated::identities(plan, field)
        .into_iter()
        .zip(&plan.tasks)
        .filter(|(_, t)| t.status == Status::Completed)
        .map(|((id, _), _)| id)
        .collect()
}

/// Each task's identity in the source its plan is read from, by plan index: what a record
/// kept by index follows when the source is read again and its tasks move — a task list's
/// ID, an issue's `owner/name#N`, else (a plan.json, a long-run folder: their tasks keep
/// their places) the index itself among as many tasks.
pub fn identities(plan: &Plan) -> Vec<String> {
    let listed = crate::pure::plan::ids::list_ids(plan).unwrap_or_default();
    let issues = issues::write_back::issue_keys(plan);
    let n = plan.tasks.len();
    (0..n)
        .map(|i| match (listed.get(i), &issues[i]) {
            (Some(id), _) => format!("id {id}"),
            (None, Some(issue)) => format!("issue {}", issue.show("")),
            (None, None) => format!("index {i} of {n}"),
        })
        .collect()
}

/// A plan task of a source's: `kind` (the source's name in the plan), the worker's `role`,
/// completed when the source says it is `done` (else pending), the files the source gives it
/// and the documents it reads for context. The caller says what the task is (subject,
/// description, blockers).
pub(crate) fn task_of(
    kind: &str,
    role: &str,
    done: bool,
    files: Files,
    context_files: Option<Vec<ContextFile>>,
) -> Task {
    Task {
        status: if done {
            Status::Completed
        } else {
            Status::Pending
        },
        metadata: Some(Metadata {
            kind: Some(kind.into()),
            files,
            ..Default::default()
        }),
        agent: Some(Agent {
            role: role.into(),
            context_files,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The end of a task list's task's description: only this task, and the list left to dagexec,
/// which `marks` the task (`ticks the task`) there when its work is committed.
pub(crate) fn do_only(rel: &str, marks: &str) -> String {
    format!(
        "\n\nDo only this task. Do not edit {rel}: dagexec {marks} there when its work is committed."
    )
}

/// Lists the plan's completed tasks in `progress.completedTasks`, each with its result.
pub(crate) fn list_completed(plan: &mut Plan) {
    for (i, t) in plan.tasks.iter().enumerate() {
        if t.status == Status::Completed {
            let summary = t.result.clone().unwrap_or_default();
            plan.progress
                .completed_tasks
                .push(crate::pure::plan::model::CompletedTask::new(i, summary));
        }
    }
}

/// The documents `context` (repository-relative) as every task's context, each read for
/// `reason`.
pub(crate) fn context_files(context: &[String], reason: &str) -> Vec<ContextFile> {
    context
        .iter()
        .map(|c| ContextFile {
            path: c.clone(),
            reason: reason.into(),
            extra: Default::default(),
        })
        .collect()
}

#[cfg(test)]
mod order_tests;
#[cfg(test)]
pub(crate) mod testing;

/// A generated plan's task list in the work tree, edited during the run ([`edited`]).
struct ListEdit {
    format: Format,
    path: String,
    /// The list as the work tree holds it.
    work: String,
}

/// A generated plan's task list in the work tree, when it is an edit made during the run (it
/// differs from the committed one).
fn edited(repo: &crate::edge::git::Repo, plan: &Plan) -> Option<ListEdit> {
    let format = Format::of_plan(plan)?;
    let path = own_file(plan)?;
    let work = std::fs::read_to_string(repo.root().join(&path)).ok()?;
    let head = String::from_utf8(repo.read_at("HEAD", &path).ok()??).ok()?;
    (work != head).then_some(ListEdit { format, path, work })
}

/// The tasks of `plan` the edited list takes out — absent from
/// its plan: Taskmaster's `cancelled`, `deferred`, `blocked` (and what waits for those), a
/// task removed — or marks done, by plan index, with whether they are done there; `None`
/// when it does not read.
fn settled_by_edit(root: &Path, plan: &Plan, edit: &ListEdit) -> Option<Vec<(usize, bool)>> {
    let ListEdit { format, path, work } = edit;
    let reader = format.reader();
    let (plan_rel, dir) = (
        generated::plan_rel_of(path),
        root.join(generated::dir_of(path)),
    );
    let cx = Context {
        root,
        dir: &dir,
        rel: path,
        plan_rel: &plan_rel,
    };
    let mut built = reader.build(&cx, work).ok()?;
    reader.stamp(&mut built, path);
    let field = reader.field();
    let theirs: std::collections::BTreeMap<String, bool> =
        generated::identities(&built.plan, field)
            .into_iter()
            .zip(&built.plan.tasks)
            .map(|((id, _), t)| (id, t.status == Status::Completed))
            .collect();
    let settled = generated::identities(plan, field)
        .into_iter()
        .enumerate()
        .filter_map(|(i, (id, _))| match theirs.get(&id) {
            None => Some((i, false)),
            Some(true) => Some((i, true)),
            Some(false) => None,
        })
        .collect();
    Some(settled)
}

/// During a run of a generated plan: its pending tasks that the task list in the work tree,
/// edited since the run started, takes out of the run or marks done (which the next run would
/// honour), by plan index; with the list's path.
pub fn withdrawn(repo: &crate::edge::git::Repo, plan: &Plan) -> Option<(String, Vec<usize>)> {
    let edit = edited(repo, plan)?;
    let settled = settled_by_edit(repo.root(), plan, &edit)?;
    let open = |i: &usize| plan.tasks[*i].status == Status::Pending && !plan.tasks[*i].join;
    let tasks: Vec<usize> = settled.into_iter().map(|(i, _)| i).filter(open).collect();
    (!tasks.is_empty()).then_some((edit.path, tasks))
}

/// At the end of a run of a generated plan: when the task list in the work tree is an edit
/// made during the run (it differs from the committed one), what came too late — the
/// completed tasks it takes out (cancelled, deferred, blocked, removed), whose work is
/// committed — and what committing it as it is would undo — the units this run completed
/// that it does not mark done — and how to keep them. `None` when there is nothing to say.
pub fn edit_would_undo(repo: &crate::edge::git::Repo, plan: &Plan) -> Option<String> {
    let edit = edited(repo, plan)?;
    let ListEdit { format, path, work } = &edit;
    let names = crate::pure::plan::ids::TaskNames::of(plan);
    let late: Vec<String> = settled_by_edit(repo.root(), plan, &edit)
        .unwrap_or_default()
        .into_iter()
        .filter(|&(i, done)| !done && !plan.tasks[i].join)
        .filter(|&(i, _)| plan.tasks[i].status == Status::Completed)
        .map(|(i, _)| names.get(i).clone())
        .collect();
    let late = (!late.is_empty()).then(|| format!(
        "{path} in your work tree, edited during the run, takes out {} (cancelled, deferred, blocked or removed there) after it completed: its work is committed; revert it by hand if it should not stay.",
        late.join(", ")
    ));
    let undo = undone(*format, path, work, plan);
    match (late, undo) {
        (Some(l), Some(u)) => Some(format!("{l}\n{u}")),
        (l, u) => l.or(u),
    }
}

/// What committing the edited list `work` as it is would undo: the units this run completed
/// that it does not mark done, and how to keep them.
fn undone(format: Format, path: &str, work: &str, plan: &Plan) -> Option<String> {
    let reader = format.reader();
    let done = completed_ids(plan);
    let meta = generated::meta_of(plan);
    let marks_done = |ids: &BTreeSet<String>| reader.write_back(work, ids, &meta).ok();
    if marks_done(&done)? == work {
        return None;
    }
    // A unit the edit does not mark done is one whose own mark changes the text: what marking
    // none changes (a task whose subtasks the edit marks done, itself not) is no unit's.
    let none = marks_done(&BTreeSet::new())?;
    let missing: Vec<&str> = done
        .iter()
        .filter(|id| marks_done(&BTreeSet::from([(*id).clone()])).is_some_and(|t| t != none))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        return None;
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    let keep = reader.mark_done_hint(&missing);
    Some(format!(
        "{path} in your work tree is an edit made during the run, left uncommitted; it does not mark done {} that this run completed and committed. Committing your {name} as it is would undo that (the next run runs them again): {keep}, then commit it.",
        missing.join(", ")
    ))
}
