//! Reading a Kiro / cc-sdd `tasks.md` (pure): numbered checkbox tasks, their detail lines and
//! annotations, the major-task groups, the units of work and the edges the rules in
//! [`super`] derive; ticking through the same line scanner as Spec Kit's (comments and
//! fences skipped, BOM ignored).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;

use crate::sources::Problem;
use crate::sources::markdown::content_lines;

/// `- [ ] 1.`, `- [x]* 2.1`, `- [ ] 2.2* Title` (optional), `  - [ ] 3.2. Title`, `- [-] 3.`
/// (Kiro's task in progress: open). Any other mark is matched, to be refused.
static TASK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(\s*)[-*+]\s+\[([^\]]?)\](\*?)\s*(\d+(?:\.\d+)*)\.?(\*?)(?:\s+(.*))?$").unwrap()
});
/// `## 1. Title`, `## Task 3: Title`, `### 2 Title`.
static HEADING: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^#{1,6}\s+(?i:task\s+)?(\d+)(?:[.:]\s*|\s+)(.*)$").unwrap());
static ANNOTATION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*(?:[-*+]\s+)?_(Requirements|Depends|Boundary)\s*:\s*(.*)$").unwrap()
});
/// A note in parentheses (`(file scaffold)`), nested once at most.
static NOTE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\((?:[^()]|\([^()]*\))*\)").unwrap());
static PARALLEL_HEAD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\(P\)\s*").unwrap());
static PARALLEL_TAIL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\s*\(P\)$").unwrap());
/// One word that is a path: with a `/`, or a name with a file extension.
static PATHLIKE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:[\w.@~+\-]*/[\w.@~+\-/]*|[\w.@~+\-]*[\w\-]\.[A-Za-z][A-Za-z0-9]{0,9})$")
        .unwrap()
});

/// One checkbox line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Entry {
    /// `1` or `1.2`, as written without a trailing dot.
    pub id: String,
    /// The major task's number (`1` for `1.2`).
    pub major: String,
    /// 1-based line number.
    pub line: usize,
    /// Byte offset of the character between the checkbox's brackets.
    pub checkbox: usize,
    /// `[x]`; `[ ]` and `[-]` (started) are open.
    pub done: bool,
    /// `[-]`.
    pub started: bool,
    /// `- [ ]*`.
    pub optional: bool,
    /// `(P)`.
    pub parallel: bool,
    pub title: String,
    /// The lines under it (annotations included), as written, trimmed.
    pub details: Vec<String>,
    pub requirements: Vec<String>,
    /// `_Depends:_` IDs.
    pub depends: Vec<String>,
    /// `_Boundary:_` entries.
    pub boundary: Vec<String>,
}

/// A major task and its subtasks.
#[derive(Debug, Clone, Default)]
pub(crate) struct Group {
    pub number: String,
    /// The major task's title (its checkbox line's or its heading's).
    pub title: String,
    /// Its checkbox line, when it has one.
    pub major: Option<usize>,
    /// Its subtasks' lines.
    pub subs: Vec<usize>,
}

impl Group {
    /// Whether its subtasks are the units (it has one that is not optional).
    pub(crate) fn container(&self, lines: &[Entry]) -> bool {
        self.subs.iter().any(|&s| !lines[s].optional)
    }
}

/// A tasks.md, read.
#[derive(Debug, Clone, Default)]
pub(crate) struct Parsed {
    pub lines: Vec<Entry>,
    pub groups: Vec<Group>,
}

impl Parsed {
    /// Each major task's number → the index of its group.
    fn group_of(&self) -> BTreeMap<&str, usize> {
        let numbers = self.groups.iter().enumerate();
        numbers.map(|(k, g)| (g.number.as_str(), k)).collect()
    }
}

/// The checkbox lines and groups of `text` (the tasks.md at `path`); errors name their line.
pub(crate) fn read(path: &str, text: &str) -> Result<Parsed, Vec<Problem>> {
    let mut out = Parsed::default();
    let mut errors = Vec::new();
    let mut by_id: BTreeMap<String, usize> = BTreeMap::new();
    let mut group_of: BTreeMap<String, usize> = BTreeMap::new();
    let mut headings: BTreeMap<String, String> = BTreeMap::new();
    let mut current: Option<usize> = None;
    for c in content_lines(text) {
        if let Some(m) = TASK.captures(c.text) {
            let id = m[4].to_string();
            let major = id.split('.').next().unwrap_or("").to_string();
            let rest = m.get(6).map_or("", |r| r.as_str()).trim();
            let parallel = PARALLEL_HEAD.is_match(rest) || PARALLEL_TAIL.is_match(rest);
            let title = PARALLEL_TAIL
                .replace(&PARALLEL_HEAD.replace(rest, ""), "")
                .trim()
                .to_string();
            let first = by_id.get(&id).map(|&first| out.lines[first].line);
            if let Some(refused) = refused(path, c.number, &id, &m[2], first) {
                errors.push(refused);
                current = None;
                continue;
            }
            let i = out.lines.len();
            by_id.insert(id.clone(), i);
            let g = group(&mut out.groups, &mut group_of, &major);
            if id.contains('.') {
                out.groups[g].subs.push(i);
            } else {
                out.groups[g].major = Some(i);
                out.groups[g].title.clone_from(&title);
            }
            out.lines.push(Entry {
                id,
                major,
                line: c.number,
                checkbox: c.start + m.get(2).expect("the checkbox group").start(),
                done: m[2].eq_ignore_ascii_case("x"),
                started: &m[2] == "-",
                optional: !m[3].is_empty() || !m[5].is_empty(),
                parallel,
                title,
                ..Default::default()
            });
            current = Some(i);
            continue;
        }
        if c.text.trim_start().starts_with('#') {
            if let Some(h) = HEADING.captures(c.text) {
                headings.insert(h[1].to_string(), h[2].trim().to_string());
            }
            current = None;
            continue;
        }
        let Some(i) = current else { continue };
        let trimmed = c.text.trim();
        if trimmed.is_empty() {
            continue;
        }
        detail(&mut out.lines[i], c.text);
    }
    titles(&mut out.groups, &headings);
    if out.lines.is_empty() {
        errors.push(Problem::new(
            format!("{path}: no numbered task lines (`- [ ] 1. Title`, `- [ ] 1.1 Title`)"),
            "is this a Kiro or cc-sdd tasks.md? Task lines look like `- [ ] 1.1 (P) Build the worker`",
        ));
    }
    crate::sources::generated::ok_unless(errors, out)
}

/// Why task `id`'s line (`line`, marked `mark`) is refused, if it is: a mark Kiro does not
/// write, or an ID used before (on line `first`).
fn refused(path: &str, line: usize, id: &str, mark: &str, first: Option<usize>) -> Option<Problem> {
    if !matches!(mark, " " | "x" | "X" | "-") {
        return Some(Problem::at(
            path,
            line,
            format!("task {id} is marked `[{mark}]`, which is not a Kiro mark"),
            "mark it `[ ]` (open), `[-]` (started) or `[x]` (done)",
        ));
    }
    first.map(|first| {
        Problem::at(
            path,
            line,
            format!("task ID {id} is used twice (first on line {first})"),
            "number the tasks 1, 2, … and their subtasks 1.1, 1.2, … once each",
        )
    })
}

/// The index of the group of major task `major`, made on its first line.
fn group(groups: &mut Vec<Group>, group_of: &mut BTreeMap<String, usize>, major: &str) -> usize {
    *group_of.entry(major.to_string()).or_insert_with(|| {
        groups.push(Group {
            number: major.to_string(),
            ..Default::default()
        });
        groups.len() - 1
    })
}

/// A group without a major task line takes its title from its `## N.` heading.
fn titles(groups: &mut [Group], headings: &BTreeMap<String, String>) {
    for g in groups {
        if g.title.is_empty()
            && let Some(h) = headings.get(&g.number)
        {
            g.title.clone_from(h);
        }
    }
}

/// A line under a task: kept as a detail, and read when it is an annotation.
fn detail(line: &mut Entry, text: &str) {
    line.details.push(text.trim().to_string());
    if let Some(a) = ANNOTATION.captures(text) {
        // The value ends at the annotation's closing underscore (a note may follow it): the
        // last one the end or a space follows, never one inside a path (`my_module.rs`).
        let value = a[2].trim_end();
        let end = value.match_indices('_').rfind(|&(i, _)| {
            value[i + 1..]
                .chars()
                .next()
                .is_none_or(char::is_whitespace)
        });
        let value = end.map_or(value, |(i, _)| &value[..i]);
        let items = |value: &str| {
            value
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
        };
        match &a[1] {
            "Requirements" => line.requirements.extend(items(value)),
            // `1.1 (asset first), 2.1`: a note in parentheses is no ID; `none`, `-` no task.
            "Depends" => {
                let ids = items(&NOTE.replace_all(value, ""));
                let none = |d: &String| {
                    matches!(d.to_ascii_lowercase().as_str(), "none" | "-" | "—" | "n/a")
                };
                line.depends.extend(ids.into_iter().filter(|d| !none(d)));
            }
            _ => line.boundary.extend(items(value)),
        }
    }
}

/// The files a `_Boundary:_` entry names: the entry, or a part of it in parentheses, that is
/// one word looking like a path (with a `/`, or a file extension; not ending in `/`).
/// Component names (`AuthService`, `DB Layer`) name none. A Markdown link is its target, read
/// from the tasks.md at `file` ([`link_path`](crate::sources::markdown::link_path)).
pub(crate) fn boundary_files(entry: &str, file: &str) -> Vec<String> {
    use crate::sources::markdown::{LINK, link_path};
    let entry = LINK.replace_all(entry, |c: &regex::Captures<'_>| {
        let target = c.get(2).or(c.get(3)).map_or("", |m| m.as_str());
        link_path(target, file).unwrap_or_else(|| c[1].to_string())
    });
    entry
        .split(['(', ')', ',', ';'])
        .map(|t| t.trim().trim_matches('`').trim_end_matches('.'))
        .filter(|t| !t.is_empty() && !t.contains(char::is_whitespace) && !t.ends_with('/'))
        .filter(|t| PATHLIKE.is_match(t) && !t.starts_with("http"))
        .map(str::to_string)
        .collect()
}

/// The edges between lines (each node's blockers, as line indices): groups in order (a `(P)`
/// group runs beside the groups back to the last one without `(P)`), subtasks in order within
/// their group (a `(P)` subtask waits for none of its siblings), and `_Depends:_`. Optional
/// nodes are then bypassed: what waited for one waits for what it waited for.
pub(crate) fn derive(
    path: &str,
    p: &Parsed,
) -> Result<BTreeMap<usize, BTreeSet<usize>>, Vec<Problem>> {
    // The units of each group: its subtasks when one is required, else its major task;
    // optional ones included (bypassed once the edges are made). They are the keys of `deps`.
    let members: Vec<Vec<usize>> = p
        .groups
        .iter()
        .map(|g| {
            if g.container(&p.lines) {
                team_order(p, g.subs.clone())
            } else {
                g.major.into_iter().collect()
            }
        })
        .collect();
    // Within each group, and its sources and sinks.
    let mut deps: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for m in &members {
        chain(m, |i| p.lines[i].parallel, false, &mut deps);
    }
    let sinks: Vec<Vec<usize>> = members
        .iter()
        .map(|g| {
            g.iter()
                .copied()
                .filter(|&i| !g.iter().any(|&j| deps[&j].contains(&i)))
                .collect()
        })
        .collect();
    let sources: Vec<Vec<usize>> = members
        .iter()
        .map(|g| {
            g.iter()
                .copied()
                .filter(|&i| !deps[&i].iter().any(|d| g.contains(d)))
                .collect()
        })
        .collect();
    // Between groups.
    let group_parallel = |k: usize| p.groups[k].major.is_some_and(|m| p.lines[m].parallel);
    let order: Vec<usize> = (0..p.groups.len())
        .filter(|&k| !members[k].is_empty())
        .collect();
    let mut between: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    chain(&order, group_parallel, true, &mut between);
    yield_to_explicit(p, &mut between);
    for (&k, before) in &between {
        for &b in before {
            for &s in &sources[k] {
                deps.entry(s).or_default().extend(sinks[b].iter().copied());
            }
        }
    }
    explicit(path, p, [&members, &sources, &sinks], &mut deps)?;
    // Optional nodes bypassed.
    let optional = |n: usize| p.lines[n].optional;
    let mut resolved: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for &n in deps.keys() {
        if optional(n) {
            continue;
        }
        let mut out = BTreeSet::new();
        let mut stack: Vec<usize> = deps[&n].iter().copied().collect();
        let mut seen = BTreeSet::new();
        while let Some(d) = stack.pop() {
            if !seen.insert(d) || !deps.contains_key(&d) {
                continue;
            }
            if optional(d) {
                stack.extend(deps[&d].iter().copied());
            } else {
                out.insert(d);
            }
        }
        resolved.insert(n, out);
    }
    Ok(resolved)
}

/// The order of the numbers yields to `_Depends:_`: when a line of a group waits for a later
/// group (`8.1` on `_Depends: 9.1_`), the later group no longer waits for the earlier one
/// (`between`: the groups each group waits for) but for what that one waits for; what
/// waited for the later group waits for the earlier one too.
fn yield_to_explicit(p: &Parsed, between: &mut BTreeMap<usize, BTreeSet<usize>>) {
    let group_of = p.group_of();
    let mut forward = BTreeSet::new();
    for l in &p.lines {
        let from = group_of[l.major.as_str()];
        for d in &l.depends {
            let major = d.trim_end_matches('.').split('.').next().unwrap_or("");
            if let Some(&to) = group_of.get(major)
                && to > from
            {
                forward.insert((from, to));
            }
        }
    }
    for (earlier, later) in forward {
        if between.get_mut(&later).is_some_and(|w| w.remove(&earlier)) {
            let inherited = between.get(&earlier).cloned().unwrap_or_default();
            between.entry(later).or_default().extend(inherited);
            // What waited for the later group still comes after the earlier one.
            for (&k, waits) in between.iter_mut() {
                if k != earlier && waits.contains(&later) {
                    waits.insert(earlier);
                }
            }
        }
    }
}

/// Subtasks (`subs`, line indices in the numbers' order) in the order `_Depends:_` gives
/// where it differs: a later sibling one waits for (`1.1` on `_Depends: 1.3_`) moves to just
/// before it, so it waits for what that one waited for and what came after it still comes
/// after both (as [`yield_to_explicit`] does between major tasks).
fn team_order(p: &Parsed, mut subs: Vec<usize>) -> Vec<usize> {
    for l in subs.clone().into_iter().map(|i| &p.lines[i]) {
        for d in &l.depends {
            let at = |id: &str| subs.iter().position(|&k| p.lines[k].id == id);
            if let (Some(a), Some(b)) = (at(&l.id), at(d.trim_end_matches('.')))
                && b > a
            {
                let later = subs.remove(b);
                subs.insert(a, later);
            }
        }
    }
    subs
}

/// The Spec Kit chain rule over `items`: an item without `(P)` waits for the previous one
/// without it and every `(P)` item since; a `(P)` item waits for the previous one without it
/// when `after_last` (major tasks), else for none (subtasks, as Spec Kit's `[P]` in a phase).
fn chain<T: Ord + Copy>(
    items: &[T],
    parallel: impl Fn(T) -> bool,
    after_last: bool,
    deps: &mut BTreeMap<T, BTreeSet<T>>,
) {
    let mut last: Option<T> = None;
    let mut since: Vec<T> = Vec::new();
    for &i in items {
        let entry = deps.entry(i).or_default();
        if parallel(i) {
            if after_last {
                entry.extend(last);
            }
            since.push(i);
        } else {
            entry.extend(last);
            entry.extend(since.drain(..));
            last = Some(i);
        }
    }
}

/// `_Depends:_`: on a subtask, on a major task (its group's sinks, or itself), each unknown or
/// self reference an error at its line. `groups`: the units of each group (line indices, by
/// group) — all of them, those that wait for none of the others (its sources), and those none
/// of the others waits for (its sinks).
fn explicit(
    path: &str,
    p: &Parsed,
    groups: [&[Vec<usize>]; 3],
    deps: &mut BTreeMap<usize, BTreeSet<usize>>,
) -> Result<(), Vec<Problem>> {
    let [members, sources, sinks] = groups;
    let mut errors = Vec::new();
    let by_id: BTreeMap<&str, usize> = p
        .lines
        .iter()
        .enumerate()
        .map(|(i, l)| (l.id.as_str(), i))
        .collect();
    let group_of = p.group_of();
    for (i, l) in p.lines.iter().enumerate() {
        if l.depends.is_empty() {
            continue;
        }
        let k = group_of[l.major.as_str()];
        // A container's annotation holds for its group's sources; a node's for itself.
        let whose: Vec<usize> = if deps.contains_key(&i) {
            vec![i]
        } else {
            sources[k].clone()
        };
        for d in &l.depends {
            let d = d.trim_end_matches('.');
            let target: Option<Vec<usize>> = match (by_id.get(d), group_of.get(d)) {
                (_, Some(&g)) if !members[g].is_empty() && p.groups[g].container(&p.lines) => {
                    Some(sinks[g].clone())
                }
                (Some(&j), _) => Some(vec![j]),
                (None, Some(&g)) => Some(sinks[g].clone()),
                (None, None) => None,
            };
            match target {
                None => errors.push(Problem::at(
                    path,
                    l.line,
                    format!(
                        "task {} depends on {d}, which is not a task in this file",
                        l.id
                    ),
                    "fix the ID or drop it from `_Depends:_`",
                )),
                Some(t) if t.iter().any(|j| whose.contains(j)) || d == l.id => {
                    errors.push(Problem::at(
                        path,
                        l.line,
                        format!("task {} depends on itself", l.id),
                        "drop it from `_Depends:_`",
                    ));
                }
                Some(t) => {
                    for &w in &whose {
                        deps.entry(w).or_default().extend(t.iter().copied());
                    }
                }
            }
        }
    }
    crate::sources::generated::ok_unless(errors, ())
}

/// `text` with the checkbox of every unit in `done` ticked, and each major task whose required
/// subtasks are all ticked; every other byte unchanged.
pub(crate) fn tick(
    path: &str,
    text: &str,
    done: &BTreeSet<String>,
) -> Result<String, Vec<Problem>> {
    let p = read(path, text)?;
    let mut ticked: Vec<bool> = p.lines.iter().map(|l| l.done).collect();
    for (i, l) in p.lines.iter().enumerate() {
        if done.contains(&l.id) {
            ticked[i] = true;
        }
    }
    for g in &p.groups {
        if let Some(m) = g.major
            && g.container(&p.lines)
            && g.subs
                .iter()
                .filter(|&&s| !p.lines[s].optional)
                .all(|&s| ticked[s])
        {
            ticked[m] = true;
        }
    }
    let boxes = p.lines.iter().zip(ticked).filter(|(l, t)| *t && !l.done);
    Ok(crate::sources::generated::ticked(
        text,
        boxes.map(|(l, _)| l.checkbox),
    ))
}
