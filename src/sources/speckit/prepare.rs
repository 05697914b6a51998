//! `--plan …/tasks.md` prepared: the tasks.md located, read and parsed, its plan checked (errors at
//! their line of tasks.md), carried over and written.

use super::parse::{Parsed, parse};
use super::{CONTEXT_DOCS, SpecKitError, build, carry_over, generated_plan_rel};
use crate::pure::plan::model::Plan;
use std::path::{Path, PathBuf};

pub use crate::sources::generated::Prepared;

pub(crate) fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}

pub(super) fn read(path: &Path) -> Result<String, SpecKitError> {
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
    crate::sources::generated::settle(&mut plan);
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
pub(crate) fn locate(
    root: &Path,
    tasks_md: &Path,
) -> Result<(PathBuf, PathBuf, String), SpecKitError> {
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
pub(crate) fn save(
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

/// A problem the plan's validation found in the plan built from `parsed`, at the line of
/// tasks.md (`path`) of the task it names (and that line, 0 when it names none).
fn at_line(
    path: &str,
    parsed: &Parsed,
    e: &crate::pure::plan::error::PlanError,
) -> (usize, SpecKitError) {
    use crate::pure::plan::error::PlanError as E;
    let task = e.task();
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
