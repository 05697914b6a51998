//! The files a task names, and which of them it creates.

use super::{BACKTICK, DEPENDS, DOTFILE, EXTENSION, Parsed};
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
/// of the repository, so none of the task's.
/// Returns the files (normalised) and the paths no task may name (`..`, in `.git/`, the
/// generated plan at `plan_rel`, the task list `tasks_md` itself), each with why.
pub(super) fn files_of(
    text: &str,
    tasks_md: &str,
    plan_rel: &str,
) -> (Vec<String>, Vec<(String, String)>) {
    let text = DEPENDS.replace_all(text, "");
    let mut found: Vec<String> = Vec::new();
    for c in BACKTICK.captures_iter(&text) {
        let s = c[1].trim();
        let named = s.contains('/')
            || EXTENSION.is_match(s)
            || DOTFILE.is_match(s)
            || KNOWN_FILES.contains(&s);
        if !s.contains(char::is_whitespace) && named {
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
