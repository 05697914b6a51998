//! What the sources' tests share: a repository of files, and a reader's plan of a text with
//! its units' IDs, their order and its problems read back.

use std::path::Path;

use super::generated::{Built, Context, Problem, Reader, dir_of, plan_rel_of};

/// A temporary repository holding `files` (path, text).
pub(crate) fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

/// What `reader` builds of `text` as the file `rel` of a repository at `/nonexistent`.
pub(crate) fn built(reader: &dyn Reader, rel: &str, text: &str) -> Result<Built, Vec<Problem>> {
    let root = Path::new("/nonexistent");
    let dir = root.join(dir_of(rel));
    let plan_rel = plan_rel_of(rel);
    let cx = Context {
        root,
        dir: &dir,
        rel,
        plan_rel: &plan_rel,
    };
    reader.build(&cx, text)
}

/// The units' IDs, in the plan's order.
pub(crate) fn ids(b: &Built) -> Vec<&str> {
    b.units.iter().map(|u| u.id.as_str()).collect()
}

/// The IDs of the units the unit `id` waits for.
pub(crate) fn deps(b: &Built, id: &str) -> Vec<String> {
    let i = b.units.iter().position(|u| u.id == id).unwrap();
    b.plan.tasks[i]
        .blocked_by
        .iter()
        .map(|&d| b.units[d].id.clone())
        .collect()
}

/// The problems' messages, a line each.
pub(crate) fn messages(e: &[Problem]) -> String {
    e.iter()
        .map(|p| p.message.clone())
        .collect::<Vec<_>>()
        .join("\n")
}
