//! GitHub Spec Kit `tasks.md` files as dagexec plans (`--plan specs/001-x/tasks.md`).
//!
//! Spec Kit's `/tasks` command writes `specs/<NNN-feature>/tasks.md` from its public
//! `templates/tasks-template.md`: `## Phase N: …` sections of task lines
//! `- [ ] T012 [P] [US1] Create User model in src/models/user.py`. [`parse`] reads one, and
//! [`build`] makes it a plan by these rules:
//!
//! - **Phases run in order.** A `## ` section holding task lines is a phase (so is a section
//!   under a `###` or `####` heading that starts with `Phase`); a tasks.md with no section is
//!   one phase. Fenced code blocks and HTML comments are skipped, by the one line scanner
//!   parsing and ticking share; a UTF-8 BOM is ignored.
//! - **`[P]`**: within a phase, a `[P]` task may run together with the others; a task without
//!   `[P]` comes after every task written before it in its phase (its edges: the previous task
//!   without `[P]` and the `[P]` tasks since — the same order in O(N) edges).
//! - **`(depends on T012, T013)`** in a task's text adds those edges (IDs anywhere in the file).
//! - **User stories**: a phase whose heading says `User Story N`, or whose tasks all carry
//!   `[USn]`, is a story phase. Story phases wait for the last non-story phase before them (the
//!   foundational phase) but not for each other. The phase after the stories (polish) waits for
//!   all of them; any other phase waits for the one before it. A phase's waiting is an edge
//!   from each of its tasks that waits for nothing in its own phase to each task of the phases
//!   it waits for that nothing there waits for.
//! - **`- [x]` / `- [X]`** tasks are completed.
//! - **Files**: paths named in a task's text — backticked (`` `src/app.py` ``, `` `.env` ``,
//!   `` `Makefile` ``), or a word
//!   with a file extension that has a `/`, follows `in`, `at`, `to`, `into`, `from`,
//!   `under` (`in src/models/user.py`), or is the object of the task's verb when that verb
//!   does not only read (`Update README.md`, not `Run quickstart.md validation`) — are its files, so the overlap rules keep two tasks off one
//!   file even when both say `[P]`. The first task naming a file creates it when its verb
//!   creates (Create, Add, Implement, Write, Generate, Initialize, Scaffold, Define, Build,
//!   Setup, Set up) or it is a test task (`Contract test for …`);
//!   every other mention modifies it. Directories (`docs/`) and placeholders (`[name].py`) are
//!   not files. A task naming no file conflicts with nothing and is flagged with a warning.
//! - **Context**: the feature folder's `spec.md`, `plan.md`, `data-model.md`, `research.md`,
//!   `quickstart.md` and the files under `contracts/` (those that exist) are every task's
//!   context files; the task line, its phase's goal (`**Goal**:` or `**Purpose**:`) and
//!   `**Independent Test**:` are in its description.
//! - **Errors** name the line and come with a hint: a task line without an ID or checkbox or
//!   description, a duplicate ID, an unknown ID in `depends on`, a cycle (as a path of IDs), a
//!   path no task may name (outside the repository, in `.git/`, the generated plan, through a
//!   linked directory), each at its line with the task's ID.
//!
//! State: [`prepare`] writes the generated plan to `<feature>/.dagexec/plan.json` (the
//! [`GENERATED_DIR`] next to tasks.md; archived as `.dagexec/plan.done.json` when every task
//! completed). Reading an edited tasks.md again carries over the state of every task whose ID
//! and text are unchanged. Each round commit ticks the tasks completed so far in tasks.md
//! ([`tick_index`]: in the round's index, on the committed version, so the work tree gets the
//! ticks only with the published commit and a user's uncommitted edit is neither committed nor
//! lost). During a run only dagexec writes tasks.md: a worker's edit of it is dropped from its
//! patch ([`own_tasks_md`]).

pub mod parse;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::json;

pub use parse::{Parsed, TaskLine, parse};

use crate::pure::plan::model::{
    Agent, CompletedTask, ContextFile, Files, Metadata, Plan, Status, Task,
};

pub use crate::pure::plan::fields::SPEC_KIT as FIELD;

/// The folder next to tasks.md that holds the generated plan.
pub const GENERATED_DIR: &str = ".dagexec";

/// The feature folder's design documents, in the order a prompt lists them.
pub const CONTEXT_DOCS: [&str; 5] = [
    "spec.md",
    "plan.md",
    "data-model.md",
    "research.md",
    "quickstart.md",
];

/// Why a tasks.md cannot run.
#[derive(Debug, thiserror::Error)]
pub enum SpecKitError {
    #[error("{path}:{line}: {why}")]
    Malformed {
        path: String,
        line: usize,
        why: String,
        hint: String,
    },
    #[error("{path}:{line}: task ID {id} is used twice (first on line {first})")]
    Duplicate {
        path: String,
        line: usize,
        id: String,
        first: usize,
    },
    #[error("{path}:{line}: task {id} depends on {dep}, which is not a task in this file")]
    UnknownDependency {
        path: String,
        line: usize,
        id: String,
        dep: String,
    },
    #[error("{path}:{line}: the tasks wait for each other in a cycle: {}", ids.join(" → "))]
    Cycle {
        path: String,
        line: usize,
        ids: Vec<String>,
    },
    #[error("{path}:{line}: task {id} names the file {file:?}, which {why}")]
    Path {
        path: String,
        line: usize,
        id: String,
        file: String,
        why: String,
    },
    #[error("{path}: no task lines (`- [ ] T001 Description`)")]
    NoTasks { path: String },
    #[error("{}: {message}", path.display())]
    Read { path: PathBuf, message: String },
    #[error("{} is outside the repository {}", path.display(), root.display())]
    Outside { path: PathBuf, root: PathBuf },
    #[error("cannot write {}: {message}", path.display())]
    Write { path: PathBuf, message: String },
}

impl SpecKitError {
    /// What to do about it.
    pub fn hint(&self) -> String {
        match self {
            SpecKitError::Malformed { hint, .. } => hint.clone(),
            SpecKitError::Duplicate { .. } => {
                "give one of them the next free ID and update any `depends on` naming it".into()
            }
            SpecKitError::UnknownDependency { .. } => {
                "fix the ID or drop it from `(depends on …)`".into()
            }
            SpecKitError::Cycle { .. } => {
                "remove one `(depends on …)` of the cycle, or move a task so the one it waits for is written before it".into()
            }
            SpecKitError::Path { .. } => {
                "name files relative to the repository root, without `..`, outside .git/ and dagexec's generated plan".into()
            }
            SpecKitError::NoTasks { .. } => {
                "is this a Spec Kit tasks.md? Task lines look like `- [ ] T001 [P] [US1] Create X in src/x.py`".into()
            }
            SpecKitError::Outside { .. } => {
                "run dagexec from the repository that holds tasks.md".into()
            }
            SpecKitError::Read { .. } | SpecKitError::Write { .. } => String::new(),
        }
    }
}

/// Several problems as one message (one per line) and their hints.
pub fn describe(errors: &[SpecKitError]) -> (String, String) {
    let message = errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    let mut hints: Vec<String> = Vec::new();
    for e in errors {
        let h = e.hint();
        if !h.is_empty() && !hints.contains(&h) {
            hints.push(h);
        }
    }
    (message, hints.join("; "))
}

/// Whether `--plan` names a Markdown file (a tasks.md) rather than a plan.json.
pub fn is_tasks_md(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("md"))
}

/// `dir/name`, or `name` when `dir` is the root.
fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

fn dir_of(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(d, _)| d)
}

/// The generated plan of the tasks.md at `tasks_md` (repository-relative).
pub fn generated_plan_rel(tasks_md: &str) -> String {
    join(&join(dir_of(tasks_md), GENERATED_DIR), "plan.json")
}

/// The tasks.md a Spec Kit plan was generated from, when it is one.
pub fn tasks_md_of(plan: &Plan) -> Option<&str> {
    plan.extra.get(FIELD)?.get("tasksMd")?.as_str()
}

/// The folder holding a Spec Kit plan's generated state (`<feature>/.dagexec`), whose
/// changes are dagexec's own, not the user's.
pub fn generated_dir_of(plan: &Plan) -> Option<String> {
    tasks_md_of(plan).map(|t| join(dir_of(t), GENERATED_DIR))
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

/// The task's ID and text as kept in the plan (plan-level, since completion trims tasks).
fn identities(plan: &Plan) -> Vec<(String, String)> {
    plan.extra
        .get(FIELD)
        .and_then(|v| v.get("tasks"))
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .map(|t| {
                    (
                        t["id"].as_str().unwrap_or("").to_string(),
                        t["text"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The description a task's worker gets: the task line, its phase's goal and independent
/// test, and the rule that dagexec (not the worker) ticks tasks.md.
fn description(parsed: &Parsed, t: &TaskLine, tasks_md: &str) -> String {
    let phase = &parsed.phases[t.phase];
    let mut s = format!(
        "Spec Kit task {} of {tasks_md} (line {}):\n{}\n\nPhase: {}",
        t.id, t.line, t.text, phase.title
    );
    if let Some(story) = &t.story {
        s.push_str(&format!(" (user story {story})"));
    }
    if let Some(goal) = &phase.goal {
        s.push_str(&format!("\nGoal: {goal}"));
    }
    if let Some(test) = &phase.independent_test {
        s.push_str(&format!("\nIndependent Test: {test}"));
    }
    s.push_str(&format!(
        "\n\nDo only this task. Do not edit {tasks_md}: dagexec ticks the task there when its work is committed."
    ));
    s
}

/// The plan for a parsed tasks.md at `tasks_md` (repository-relative), with `context` (the
/// feature folder's documents that exist, repository-relative) as every task's context.
pub fn build(parsed: &Parsed, tasks_md: &str, context: &[String]) -> Plan {
    let context_files: Vec<ContextFile> = context
        .iter()
        .map(|c| ContextFile {
            path: c.clone(),
            reason: "the feature's design document (Spec Kit)".into(),
            extra: Default::default(),
        })
        .collect();
    let mut plan = Plan {
        schema_version: 2,
        goal: match &parsed.feature {
            Some(f) if !f.is_empty() => format!("{f} ({tasks_md})"),
            _ => format!("The tasks of {tasks_md}"),
        },
        context: None,
        progress: Default::default(),
        tasks: Vec::with_capacity(parsed.tasks.len()),
        extra: Default::default(),
    };
    for (i, t) in parsed.tasks.iter().enumerate() {
        let mut task = Task {
            subject: format!("{} {}", t.id, t.text),
            description: Some(description(parsed, t, tasks_md)),
            status: if t.done {
                Status::Completed
            } else {
                Status::Pending
            },
            blocked_by: parsed.deps[i].clone(),
            metadata: Some(Metadata {
                kind: Some("speckit".into()),
                files: Files {
                    create: t.create.clone(),
                    modify: t.modify.clone(),
                    ..Default::default()
                },
                ..Default::default()
            }),
            agent: Some(Agent {
                role: "software engineer implementing one task of a Spec Kit feature".into(),
                context_files: Some(context_files.clone()),
                ..Default::default()
            }),
            ..Default::default()
        };
        if t.done {
            task.result = Some(format!("ticked in {tasks_md}"));
            plan.progress.completed_tasks.push(CompletedTask {
                index: i,
                summary: task.result.clone().unwrap_or_default(),
                wave: None,
                extra: Default::default(),
            });
        }
        task.extra
            .insert(FIELD.into(), json!({"id": t.id, "line": t.line}));
        plan.tasks.push(task);
    }
    let ids: Vec<serde_json::Value> = parsed
        .tasks
        .iter()
        .map(|t| json!({"id": t.id, "text": t.text}))
        .collect();
    plan.extra.insert(
        FIELD.into(),
        json!({"tasksMd": tasks_md, "tasks": ids, "warnings": parsed.warnings}),
    );
    plan
}

/// Carries the state of `old` (an earlier generated plan) over to `fresh`: a task whose ID
/// and text are unchanged keeps its status, result, attempts and extra fields (reviews,
/// question); a task ticked in tasks.md stays completed. Other tasks start afresh.
pub fn carry_over(fresh: &mut Plan, old: &Plan) {
    let old_ids = identities(old);
    let new_ids = identities(fresh);
    let mut moved: Vec<Option<usize>> = vec![None; old.tasks.len()];
    for (i, id) in new_ids.iter().enumerate() {
        let Some(j) = old_ids.iter().position(|o| o == id) else {
            continue;
        };
        if j >= old.tasks.len() || i >= fresh.tasks.len() {
            continue;
        }
        moved[j] = Some(i);
        let (new, old_t) = (&mut fresh.tasks[i], &old.tasks[j]);
        if new.status == Status::Completed {
            continue;
        }
        new.status = old_t.status;
        new.result = old_t.result.clone();
        new.attempts = old_t.attempts;
        for (k, v) in &old_t.extra {
            if k != FIELD {
                new.extra.insert(k.clone(), v.clone());
            }
        }
    }
    let mut progress = old.progress.clone();
    progress.completed_tasks = fresh
        .tasks
        .iter()
        .enumerate()
        .filter(|(_, t)| t.status == Status::Completed)
        .map(|(i, t)| {
            let kept = old
                .progress
                .completed_tasks
                .iter()
                .find(|c| c.index < moved.len() && moved[c.index] == Some(i));
            CompletedTask {
                index: i,
                summary: kept.map_or_else(
                    || t.result.clone().unwrap_or_default(),
                    |c| c.summary.clone(),
                ),
                wave: None,
                extra: kept.map(|c| c.extra.clone()).unwrap_or_default(),
            }
        })
        .collect();
    fresh.progress = progress;
}

/// The IDs of a Spec Kit plan's completed tasks.
pub fn completed_ids(plan: &Plan) -> BTreeSet<String> {
    identities(plan)
        .into_iter()
        .zip(&plan.tasks)
        .filter(|(_, t)| t.status == Status::Completed)
        .map(|((id, _), _)| id)
        .collect()
}

/// The prepared run: where the generated plan is.
#[derive(Debug)]
pub struct Prepared {
    /// The generated plan (`<feature>/.dagexec/plan.json`, or in `scratch`).
    pub plan: PathBuf,
    /// `<feature>/.dagexec/plan.json`, relative to the root.
    pub plan_rel: String,
    /// Tasks that name no file.
    pub warnings: Vec<String>,
    /// When the plan was not written next to tasks.md, the temporary directory holding it.
    pub scratch: Option<tempfile::TempDir>,
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}

fn read(path: &Path) -> Result<String, SpecKitError> {
    std::fs::read_to_string(path).map_err(|e| SpecKitError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// The context documents of the feature folder `dir` (absolute) that exist, relative to
/// `root`: the [`CONTEXT_DOCS`], then the files under `contracts/` in name order. Links are
/// not followed.
fn context_docs(root: &Path, dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for name in CONTEXT_DOCS {
        let p = dir.join(name);
        if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file()) {
            out.push(rel(root, &p));
        }
    }
    let mut contracts = Vec::new();
    let contracts_dir = dir.join("contracts");
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
                Ok(t) if t.is_file() => contracts.push(rel(root, &e.path())),
                _ => {}
            }
        }
    }
    contracts.sort();
    out.extend(contracts);
    out
}

/// Reads the tasks.md at `tasks_md` (inside `root`) and writes its plan as
/// `<feature>/.dagexec/plan.json`, carrying over the state an earlier run left there. With
/// `write` false nothing next to tasks.md is written: the plan goes to a temporary directory
/// (`validate`, `status`, `graph`, `prompt`, `run --dry-run`).
pub fn prepare(root: &Path, tasks_md: &Path, write: bool) -> Result<Prepared, Vec<SpecKitError>> {
    let one = |e: SpecKitError| vec![e];
    let (root_c, abs_c, tasks_rel) = locate(root, tasks_md).map_err(one)?;
    let text = read(&abs_c).map_err(one)?;
    let parsed = parse(&tasks_rel, &text)?;
    let dir = abs_c.parent().unwrap_or(&root_c).to_path_buf();
    let mut plan = build(&parsed, &tasks_rel, &context_docs(&root_c, &dir));
    let plan_rel = generated_plan_rel(&tasks_rel);
    // What the plan's validation would refuse is said here, at its line of tasks.md (the
    // generated plan's name, perhaps a temporary file's, means nothing to the user).
    if let Err(crate::pure::plan::PlanErrors(errors)) =
        crate::edge::plan_file::check_in(&plan, Some(&plan_rel), &root_c)
    {
        let mut found: Vec<(usize, SpecKitError)> = errors
            .iter()
            .map(|e| at_line(&tasks_rel, &parsed, e))
            .collect();
        found.sort_by_key(|(line, _)| *line);
        return Err(found.into_iter().map(|(_, e)| e).collect());
    }
    let plan_path = root_c.join(&plan_rel);
    if plan_path.is_file() {
        let old = crate::edge::plan_file::load(&plan_path).map_err(|e| {
            one(SpecKitError::Read {
                path: plan_path.clone(),
                message: format!("{e} (delete it to start over from tasks.md)"),
            })
        })?;
        carry_over(&mut plan, &old);
    }
    let (target, scratch) = save(&plan, &root_c, plan_path, write).map_err(one)?;
    Ok(Prepared {
        plan: target,
        plan_rel,
        warnings: parsed.warnings,
        scratch,
    })
}

/// The root and the tasks.md canonical, and the tasks.md relative to the root; a tasks.md
/// outside the root or in its `.git` is refused.
fn locate(root: &Path, tasks_md: &Path) -> Result<(PathBuf, PathBuf, String), SpecKitError> {
    let abs = if tasks_md.is_absolute() {
        tasks_md.to_path_buf()
    } else {
        root.join(tasks_md)
    };
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let (root_c, abs_c) = (canon(root), canon(&abs));
    if !abs_c.starts_with(&root_c) {
        return Err(SpecKitError::Outside {
            path: abs,
            root: root.to_path_buf(),
        });
    }
    let tasks_rel = rel(&root_c, &abs_c);
    if crate::pure::paths::git_dir_prefix(&tasks_rel).is_some() {
        return Err(SpecKitError::Outside {
            path: abs,
            root: root.to_path_buf(),
        });
    }
    Ok((root_c, abs_c, tasks_rel))
}

/// Writes the plan at `plan_path` (under `root_c`), or with `write` false in a temporary
/// directory, which comes back with the path written.
fn save(
    plan: &Plan,
    root_c: &Path,
    plan_path: PathBuf,
    write: bool,
) -> Result<(PathBuf, Option<tempfile::TempDir>), SpecKitError> {
    let scratch = if write {
        None
    } else {
        Some(tempfile::tempdir().map_err(|e| SpecKitError::Write {
            path: std::env::temp_dir(),
            message: e.to_string(),
        })?)
    };
    let target = scratch
        .as_ref()
        .map_or(plan_path, |d| d.path().join("plan.json"));
    if let Some(parent) = target.parent() {
        let base = if scratch.is_some() {
            crate::edge::fsx::default_root(parent)
        } else {
            root_c
        };
        crate::edge::fsx::create_dir_all(base, parent).map_err(|e| SpecKitError::Write {
            path: parent.to_path_buf(),
            message: e.to_string(),
        })?;
    }
    crate::edge::plan_file::save(plan, &target).map_err(|e| SpecKitError::Write {
        path: target.clone(),
        message: e.to_string(),
    })?;
    Ok((target, scratch))
}

/// What ticking tasks.md did for a round commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tick {
    /// Not a Spec Kit plan, or nothing new to tick.
    Nothing,
    /// The round's tree holds tasks.md at this path with the completed tasks ticked.
    Ticked(String),
    /// tasks.md could not be ticked in the round's tree; the round is committed without it.
    Skipped { path: String, why: String },
}

/// The tasks.md a Spec Kit plan names, when it is one dagexec may tick: a Markdown file
/// outside `.git`, in repository form.
fn tickable(plan: &Plan) -> Option<Result<String, String>> {
    let tasks_md = tasks_md_of(plan)?;
    Some(match crate::pure::paths::normalize(tasks_md) {
        Ok(clean)
            if is_tasks_md(Path::new(&clean))
                && crate::pure::paths::git_dir_prefix(&clean).is_none() =>
        {
            Ok(clean)
        }
        _ => Err(format!("{tasks_md:?} is not a tasks.md dagexec may tick")),
    })
}

/// The tasks.md of a Spec Kit plan (repository-relative, as the plan names it), which only
/// dagexec writes during a run: a worker's change to it is dropped from its patch.
pub fn own_tasks_md(plan: &Plan) -> Option<String> {
    tickable(plan)?.ok()
}

/// A problem the plan's validation found in the plan built from `parsed`, at the line of
/// tasks.md (`path`) of the task it names (and that line, 0 when it names none).
fn at_line(
    path: &str,
    parsed: &Parsed,
    e: &crate::pure::plan::error::PlanError,
) -> (usize, SpecKitError) {
    use crate::pure::plan::error::PlanError as E;
    let task = match e {
        E::UnsafePath { task, .. }
        | E::LinkedPath { task, .. }
        | E::ControlChar { task, .. }
        | E::UnknownDependency { task, .. }
        | E::SelfDependency { task, .. }
        | E::BadOverlap { task, .. } => Some(*task),
        E::Cycle { cycle } => cycle.first().copied(),
        _ => None,
    };
    let Some(t) = task.and_then(|i| parsed.tasks.get(i)) else {
        let e = SpecKitError::Malformed {
            path: path.into(),
            line: 0,
            why: format!("the plan made from it is refused: {e}"),
            hint: e.hint(),
        };
        return (0, e);
    };
    let (line, id) = (t.line, t.id.clone());
    let e = match e {
        E::UnsafePath {
            path: file, reason, ..
        } => SpecKitError::Path {
            path: path.into(),
            line,
            id,
            file: file.clone(),
            why: reason.to_string(),
        },
        E::LinkedPath {
            path: file,
            link,
            target,
            ..
        } => SpecKitError::Path {
            path: path.into(),
            line,
            id,
            file: file.clone(),
            why: format!("goes through {link}, a symbolic link to {target}"),
        },
        E::ControlChar { code, .. } => SpecKitError::Malformed {
            path: path.into(),
            line,
            why: format!("task {id} contains a control character (U+{code:04X})"),
            hint: "remove it: task lines reach the terminal and commit messages".into(),
        },
        other => SpecKitError::Malformed {
            path: path.into(),
            line,
            why: format!("task {id}: {other}"),
            hint: other.hint(),
        },
    };
    (line, e)
}

/// For a Spec Kit plan, ticks its completed tasks in the tasks.md of the round's `index`
/// (the version the round commits: `HEAD`'s, never the work tree's, so a user's uncommitted
/// edit is neither committed nor overwritten; the work tree gets the ticked file only when
/// the commit is published, and only where it still holds `HEAD`'s version). A tasks.md the
/// commit does not hold, or cannot be read as the parser reads it (not UTF-8, malformed), is
/// skipped with why: the round's work is committed all the same.
pub fn tick_index(
    index: &crate::edge::git::RoundIndex,
    plan: &Plan,
) -> Result<Tick, crate::edge::git::GitError> {
    let path = match tickable(plan) {
        None => return Ok(Tick::Nothing),
        Some(Ok(p)) => p,
        Some(Err(why)) => {
            return Ok(Tick::Skipped {
                path: tasks_md_of(plan).unwrap_or_default().to_string(),
                why,
            });
        }
    };
    let skipped = |why: String| Tick::Skipped {
        path: path.clone(),
        why,
    };
    let Some((mode, bytes)) = index.read_entry(&path)? else {
        return Ok(skipped("the commit holds no such file (deleted?)".into()));
    };
    if mode == "120000" {
        return Ok(skipped("it is a symbolic link".into()));
    }
    let Ok(text) = String::from_utf8(bytes) else {
        return Ok(skipped("it is not UTF-8 text".into()));
    };
    let ticked = match parse::tick(&path, &text, &completed_ids(plan)) {
        Ok(t) => t,
        Err(errors) => {
            let (message, _) = describe(&errors);
            return Ok(skipped(format!(
                "it no longer reads as a task list ({})",
                message.lines().next().unwrap_or("")
            )));
        }
    };
    if ticked == text {
        return Ok(Tick::Nothing);
    }
    index.write_entry(&path, &mode, ticked.as_bytes())?;
    Ok(Tick::Ticked(path))
}

#[cfg(test)]
mod tests;
