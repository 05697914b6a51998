//! The files a task names, and which of them it creates.

use super::{BACKTICK, DEPENDS, DOTFILE, EXTENSION, Parsed};
use crate::sources::markdown::{LINK, link_path};
use std::collections::BTreeSet;

/// File names without an extension that a backticked word names.
const KNOWN_FILES: &[&str] = &[
    "Makefile",
    "Dockerfile",
    "Containerfile",
    "Justfile",
    "Procfile",
    "Gemfile",
    "Rakefile",
    "Vagrantfile",
    "LICENSE",
    "CODEOWNERS",
];

/// Verbs that make a task the creator of the files it names first.
const CREATING_VERBS: &[&str] = &[
    "create",
    "add",
    "implement",
    "write",
    "generate",
    "initialize",
    "initialise",
    "scaffold",
    "define",
    "build",
    "setup",
    "set",
];

/// Verbs whose object is read, not changed (`Run quickstart.md validation`).
const READING_VERBS: &[&str] = &[
    "run", "read", "validate", "verify", "check", "review", "test", "execute", "follow",
];

/// The files named in a task's description: backticked paths (with a `/`, an extension, a
/// dotfile, or a name like `Makefile`), and words that look like a
/// file path (a file name with an extension that has a `/` in it, follows `in`, `at`,
/// `to`, `into`, `from`, `under`, or is the object of the task's verb unless that verb only
/// reads: `Update README.md`, not `Run quickstart.md validation`). Directories (`docs/`) and placeholders (`[name].py`) are not files.
/// A path from the file system's root or a home directory (`~/.app/config.toml`) names no file
/// of the repository, so none of the task's. A Markdown link names its target ([`link_path`]), unless it is one of the feature's
/// design documents ([`design_doc`]).
/// Returns the files (normalised) and the paths no task may name (`..`, in `.git/`, the
/// generated plan at `plan_rel`, the task list `tasks_md` itself), each with why.
pub(super) fn files_of(
    text: &str,
    tasks_md: &str,
    plan_rel: &str,
) -> (Vec<String>, Vec<(String, String)>) {
    let text = DEPENDS.replace_all(text, "");
    let mut found: Vec<String> = Vec::new();
    // A Markdown link names its target; the link's text is only its label.
    let text = LINK.replace_all(&text, |c: &regex::Captures<'_>| {
        let target = c.get(2).or(c.get(3)).map_or("", |m| m.as_str());
        // A web address or an anchor: the text is read as any text.
        let Some(path) = link_path(target, tasks_md) else {
            return c[1].to_string();
        };
        if named(&path) && !target.ends_with('/') && !design_doc(&path, target, tasks_md) {
            found.push(path);
        }
        " ".to_string()
    });
    for c in BACKTICK.captures_iter(&text) {
        let s = c[1].trim();
        if !s.contains(char::is_whitespace) && named(s) {
            found.push(s.to_string());
        }
    }
    let plain = BACKTICK.replace_all(&text, " ");
    let words: Vec<&str> = plain.split_whitespace().collect();
    for (k, w) in words.iter().enumerate() {
        let w = w
            .trim_start_matches(['(', '"', '\'', '['])
            .trim_end_matches([',', '.', ';', ':', ')', '"', '\'', '!', '?', ']']);
        if w.contains("://") || w.contains(['[', ']', '{', '}', '<', '>', '*']) {
            continue;
        }
        if !EXTENSION.is_match(w) {
            continue;
        }
        let before = k
            .checked_sub(1)
            .map(|j| words[j].to_ascii_lowercase())
            .unwrap_or_default();
        let after_preposition =
            ["in", "at", "to", "into", "from", "under"].contains(&before.as_str());
        // `Update README.md`: the object of the task's verb, unless the verb only reads.
        let object = k == 1 && !READING_VERBS.contains(&before.as_str());
        if w.contains('/') || after_preposition || object {
            found.push(w.to_string());
        }
    }
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for f in found {
        if f.ends_with('/') {
            continue;
        }
        match crate::pure::paths::normalize(&f) {
            Ok(n) => match crate::pure::validate::path_problem(&n, Some(plan_rel)) {
                Some(why) => problems.push((f, why.to_string())),
                // A worker's edit of the task list is dropped from its patch: only dagexec
                // ticks it.
                None if n == tasks_md => problems.push((
                    f,
                    "is this task list itself; only dagexec changes it (it ticks completed tasks)"
                        .into(),
                )),
                None if !files.contains(&n) => files.push(n),
                None => {}
            },
            // `~/.config/x.toml`, `/etc/hosts`: a place on the machine the text talks about.
            Err(crate::pure::paths::Unclean::Absolute) => {}
            Err(e) => problems.push((f, e.to_string())),
        }
    }
    (files, problems)
}

/// Whether a backticked word or a link's path names a file: it has a `/` or an extension, or
/// is a dotfile or a name like `Makefile`.
fn named(s: &str) -> bool {
    s.contains('/') || EXTENSION.is_match(s) || DOTFILE.is_match(s) || KNOWN_FILES.contains(&s)
}

/// Whether a link to `path` (its `target` as written) in the tasks.md at `tasks_md` names one
/// of the feature's design documents (its context, not a task's work: `[plan.md](plan.md)`,
/// `[contracts/api.md](contracts/api.md)`); a bare target from the tasks.md's folder, as
/// GitHub renders it.
fn design_doc(path: &str, target: &str, tasks_md: &str) -> bool {
    let folder = tasks_md.rsplit_once('/').map_or("", |(d, _)| d);
    let bare = !target.starts_with(['.', '/']);
    let in_folder = path.strip_prefix(folder).and_then(|p| p.strip_prefix('/'));
    in_folder.or(bare.then_some(path)).is_some_and(|p| {
        crate::sources::speckit::CONTEXT_DOCS.contains(&p) || p.starts_with("contracts/")
    })
}

/// `create` for the first task naming a file when its verb creates, else `modify`.
pub(super) fn classify_files(out: &mut Parsed) {
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for t in &mut out.tasks {
        let words: Vec<String> = t
            .text
            .split_whitespace()
            .take(2)
            .map(str::to_ascii_lowercase)
            .collect();
        let verb = words.first().map_or("", String::as_str);
        // "Contract test for …", "Unit tests in …": a new test file.
        let test = words.get(1).is_some_and(|w| w == "test" || w == "tests");
        let creates = CREATING_VERBS.contains(&verb) || test;
        let files = std::mem::take(&mut t.modify);
        for f in files {
            if creates && !seen.contains(&f) {
                t.create.push(f.clone());
            } else {
                t.modify.push(f.clone());
            }
            seen.insert(f);
        }
    }
}
