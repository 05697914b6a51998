//! Ticking tasks.md in the round's index for the tasks the round completed.

use super::{completed_ids, describe, is_tasks_md, tasks_md_of};
use crate::pure::plan::model::Plan;
use std::path::Path;

/// What ticking tasks.md did for a round commit (every format's write-back says the same).
pub use crate::sources::Tick;

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
    let (mode, text) = match crate::sources::indexed_text(index, &path)? {
        Ok(found) => found,
        Err(why) => return Ok(skipped(why.into())),
    };
    let ticked = match super::parse::tick(&path, &text, &completed_ids(plan)) {
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
