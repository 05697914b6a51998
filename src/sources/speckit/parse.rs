//! Reading a Spec Kit `tasks.md` (pure): phases, task lines, markers, `(depends on …)`,
//! the files a task names, and the DAG the rules in [`super`] derive from them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;

use super::SpecKitError;

/// One `- [ ] T012 [P] [US1] Description` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskLine {
    /// The ID as written (`T012`).
    pub id: String,
    /// 1-based line number in tasks.md.
    pub line: usize,
    /// `- [x]` / `- [X]`.
    pub done: bool,
    /// `[P]`.
    pub parallel: bool,
    /// `[USn]`, as written (`US1`).
    pub story: Option<String>,
    /// The description after the ID and markers (with any `(depends on …)` left in).
    pub text: String,
    /// IDs named by `(depends on …)`, as written.
    pub depends_on: Vec<String>,
    /// Files the task creates and modifies (repository form, relative to the repository).
    pub create: Vec<String>,
    pub modify: Vec<String>,
    /// The phase this task belongs to (index into [`Parsed::phases`]).
    pub phase: usize,
    /// Byte offset in the text of the character between the checkbox's brackets (what
    /// [`tick`] turns into `x`).
    pub checkbox: usize,
}

/// A `## …` section that holds tasks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Phase {
    /// The heading without `## `.
    pub title: String,
    pub line: usize,
    /// `**Goal**:` / `**Purpose**:` text.
    pub goal: Option<String>,
    /// `**Independent Test**:` text.
    pub independent_test: Option<String>,
    /// A user-story phase (`User Story N` heading or `[USn]` tasks).
    pub story: bool,
    /// Task indices, in the order written.
    pub tasks: Vec<usize>,
}

/// A tasks.md, read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Parsed {
    /// `# Tasks: Feature` heading text.
    pub feature: Option<String>,
    pub phases: Vec<Phase>,
    pub tasks: Vec<TaskLine>,
    /// For each task, the tasks it waits for (indices, ascending).
    pub deps: Vec<Vec<usize>>,
    /// Non-fatal findings (a task naming no file), each naming its line.
    pub warnings: Vec<String>,
}

static CHECKBOX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*[-*+]\s+\[([ xX])\]\s*(.*)$").unwrap());
static NO_CHECKBOX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*[-*+]\s+(T\d+)\b").unwrap());
static ID: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^(T\d+)(?:\s+|$)(.*)$").unwrap());
static MARKER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\[(P|US\d+)\]\s*(.*)$").unwrap());
static DEPENDS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\(\s*depends\s+on\s*:?\s*([^)]*)\)").unwrap());
static FIELD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\*\*([^*:]+):?\*\*\s*:?\s*(.*)$").unwrap());
/// A `## ` heading, or a deeper one that names a phase (`### Phase 3.1: Setup`).
static SECTION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:##\s|#{3,4}\s+(?i:phase)\b)").unwrap());
static STORY_HEADING: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\buser\s+story\s+\d+").unwrap());
static BACKTICK: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"`([^`]+)`").unwrap());
static EXTENSION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[^./][^/]*\.[A-Za-z][A-Za-z0-9]{0,9}$").unwrap());

static DOTFILE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\.[A-Za-z0-9][\w.-]*$").unwrap());

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

fn id_number(id: &str) -> Option<u64> {
    id.strip_prefix('T').and_then(|n| n.parse().ok())
}

/// One line of a tasks.md that carries Markdown content, as every reader of the file sees it.
struct Content<'a> {
    /// 1-based line number.
    number: usize,
    /// Byte offset of `text` in the file.
    start: usize,
    /// The line without its line end, trailing whitespace and (on line 1) a UTF-8 BOM.
    text: &'a str,
}

/// The lines of `text` outside HTML comments and fenced code blocks (the comment and fence
/// lines themselves excluded). The one scanner behind both [`parse`] and [`tick`], so a line
/// the parser reads as a task is exactly a line ticking may change. A line starting `<!--`
/// opens a comment (closed on the line that holds `-->`); inside a fence only its closing
/// fence (the same character, at least as long) counts.
fn content_lines(text: &str) -> impl Iterator<Item = Content<'_>> {
    let mut fence: Option<(char, usize)> = None;
    let mut in_comment = false;
    let mut offset = 0;
    text.split_inclusive('\n')
        .enumerate()
        .filter_map(move |(i, raw)| {
            let mut start = offset;
            offset += raw.len();
            let mut line = raw.strip_suffix('\n').unwrap_or(raw);
            if i == 0
                && let Some(rest) = line.strip_prefix('\u{feff}')
            {
                start += '\u{feff}'.len_utf8();
                line = rest;
            }
            let line = line.trim_end();
            let trimmed = line.trim_start();
            let opens = ['`', '~'].into_iter().find_map(|c| {
                let n = trimmed.chars().take_while(|&x| x == c).count();
                (n >= 3).then_some((c, n))
            });
            if let Some((c, n)) = fence {
                if opens.is_some_and(|(o, m)| o == c && m >= n) {
                    fence = None;
                }
                return None;
            }
            if in_comment {
                in_comment = !trimmed.contains("-->");
                return None;
            }
            if trimmed.starts_with("<!--") {
                in_comment = !trimmed.contains("-->");
                return None;
            }
            if opens.is_some() {
                fence = opens;
                return None;
            }
            Some(Content {
                number: i + 1,
                start,
                text: line,
            })
        })
}

/// Reads `text` (the tasks.md at `path`, repository-relative, used in messages).
pub fn parse(path: &str, text: &str) -> Result<Parsed, Vec<SpecKitError>> {
    let (mut out, by_number) = read_lines(path, text)?;
    for ph in &mut out.phases {
        let all_stories = ph.tasks.iter().all(|&t| out.tasks[t].story.is_some());
        ph.story = ph.story || all_stories;
    }
    classify_files(&mut out);
    out.deps = derive(path, &out, &by_number, Rule::Chain)?;
    for t in &out.tasks {
        if t.create.is_empty() && t.modify.is_empty() {
            out.warnings.push(format!(
                "{path}:{}: task {} names no file, so nothing keeps it apart from other tasks; name the file it changes (`in src/x.py` or a `backticked/path`)",
                t.line, t.id
            ));
        }
    }
    Ok(out)
}

/// The phases and task lines of `text` (no edges yet), and the tasks by ID number.
#[allow(clippy::type_complexity)]
fn read_lines(path: &str, text: &str) -> Result<(Parsed, BTreeMap<u64, usize>), Vec<SpecKitError>> {
    let mut r = Reader {
        path,
        plan_rel: super::generated_plan_rel(path),
        errors: Vec::new(),
        out: Parsed::default(),
        section: None,
        section_phase: None,
        by_number: BTreeMap::new(),
    };
    for content in content_lines(text) {
        r.line(&content);
    }
    let Reader {
        mut errors,
        out,
        by_number,
        ..
    } = r;
    if out.tasks.is_empty() && errors.is_empty() {
        errors.push(SpecKitError::NoTasks { path: path.into() });
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok((out, by_number))
}

/// What [`read_lines`] has read so far.
struct Reader<'a> {
    /// The tasks.md, repository-relative, for messages.
    path: &'a str,
    /// The generated plan's path, which no task may name.
    plan_rel: String,
    errors: Vec<SpecKitError>,
    out: Parsed,
    /// The current `## ` section: (title, line, goal, test), made a phase when it gets a task.
    section: Option<Phase>,
    section_phase: Option<usize>,
    by_number: BTreeMap<u64, usize>,
}

/// A task line's ID, markers and description, before its checks.
struct Head {
    id: String,
    done: bool,
    checkbox: usize,
    parallel: bool,
    story: Option<String>,
    body: String,
}

impl Reader<'_> {
    /// One content line: the title, a section heading, a phase field, or a task line.
    fn line(&mut self, content: &Content<'_>) {
        let line_no = content.number;
        let trimmed = content.text.trim_start();
        if let Some(h) = trimmed.strip_prefix("# ") {
            if self.out.feature.is_none() {
                let h = h.trim();
                self.out.feature = Some(h.strip_prefix("Tasks:").unwrap_or(h).trim().to_string());
            }
            return;
        }
        if let Some(h) = SECTION
            .is_match(trimmed)
            .then(|| trimmed.trim_start_matches('#').trim())
        {
            self.section = Some(Phase {
                title: h.trim().to_string(),
                line: line_no,
                story: STORY_HEADING.is_match(h),
                ..Default::default()
            });
            self.section_phase = None;
            return;
        }
        if let Some(c) = FIELD.captures(trimmed) {
            self.field(&c[1].trim().to_ascii_lowercase(), c[2].trim().to_string());
            return;
        }
        if let Some(c) = NO_CHECKBOX.captures(trimmed)
            && !CHECKBOX.is_match(trimmed)
        {
            self.malformed(
                line_no,
                format!("task {} has no checkbox", &c[1]),
                format!("write it as `- [ ] {} Description in path/to/file`", &c[1]),
            );
            return;
        }
        if let Some(head) = self.head(content) {
            self.task(line_no, head);
        }
    }

    /// A `**Goal**:`-like field of the current section or phase.
    fn field(&mut self, key: &str, value: String) {
        let target = match self.section_phase {
            Some(p) => Some(&mut self.out.phases[p]),
            None => self.section.as_mut(),
        };
        if let Some(ph) = target {
            match key {
                "goal" | "purpose" if ph.goal.is_none() => ph.goal = Some(value),
                "independent test" => ph.independent_test = Some(value),
                _ => {}
            }
        }
    }

    fn malformed(&mut self, line: usize, why: String, hint: String) {
        self.errors.push(SpecKitError::Malformed {
            path: self.path.into(),
            line,
            why,
            hint,
        });
    }

    /// A checkbox line's ID, markers and description; `None` (an error kept) when it has no
    /// ID or no description, or is no checkbox line.
    fn head(&mut self, content: &Content<'_>) -> Option<Head> {
        let line = content.text;
        let trimmed = line.trim_start();
        let c = CHECKBOX.captures(trimmed)?;
        let done = &c[1] != " ";
        let checkbox =
            content.start + (line.len() - trimmed.len()) + c.get(1).map_or(0, |m| m.start());
        let rest = c[2].trim();
        let Some(idc) = ID.captures(rest) else {
            self.malformed(
                content.number,
                format!("the checkbox line {rest:?} has no task ID"),
                "every task line is `- [ ] T0NN [P] [USn] Description`; give it the next free ID"
                    .into(),
            );
            return None;
        };
        let id = idc[1].to_string();
        let mut body = idc[2].trim().to_string();
        let (mut parallel, mut story) = (false, None);
        while let Some(m) = MARKER.captures(&body) {
            if &m[1] == "P" {
                parallel = true;
            } else {
                story = Some(m[1].to_string());
            }
            body = m[2].trim().to_string();
        }
        if body.is_empty() {
            self.malformed(
                content.number,
                format!("task {id} has no description"),
                "say what to do and where: `- [ ] T012 Create User model in src/models/user.py`"
                    .into(),
            );
            return None;
        }
        Some(Head {
            id,
            done,
            checkbox,
            parallel,
            story,
            body,
        })
    }

    /// A task line: its ID unique, its `depends on` IDs, its phase and files.
    fn task(&mut self, line_no: usize, head: Head) {
        let Head {
            id,
            done,
            checkbox,
            parallel,
            story,
            body,
        } = head;
        let number = id_number(&id).unwrap_or(u64::MAX);
        if let Some(&first) = self.by_number.get(&number) {
            self.errors.push(SpecKitError::Duplicate {
                path: self.path.into(),
                line: line_no,
                id: id.clone(),
                first: self.out.tasks[first].line,
            });
            return;
        }
        let depends_on = self.depends_on(line_no, &body);
        let phase = self.phase();
        let (files, problems) = files_of(&body, (self.path, &self.plan_rel));
        for p in problems {
            self.errors.push(SpecKitError::Path {
                path: self.path.into(),
                line: line_no,
                id: id.clone(),
                file: p.0,
                why: p.1,
            });
        }
        let out = &mut self.out;
        self.by_number.insert(number, out.tasks.len());
        out.phases[phase].tasks.push(out.tasks.len());
        out.tasks.push(TaskLine {
            id,
            line: line_no,
            done,
            parallel,
            story,
            text: body,
            depends_on,
            create: Vec::new(),
            modify: files,
            phase,
            checkbox,
        });
    }

    /// The task IDs of a description's `(depends on …)`; anything else an error.
    fn depends_on(&mut self, line_no: usize, body: &str) -> Vec<String> {
        let mut depends_on = Vec::new();
        for d in DEPENDS.captures_iter(body) {
            for token in d[1]
                .split([',', ';', ' '])
                .map(str::trim)
                .filter(|t| !t.is_empty() && !t.eq_ignore_ascii_case("and"))
            {
                if id_number(token).is_some() {
                    depends_on.push(token.to_string());
                } else {
                    self.malformed(
                        line_no,
                        format!("`depends on` lists {token:?}, which is not a task ID"),
                        "list task IDs separated by commas: (depends on T012, T013)".into(),
                    );
                }
            }
        }
        depends_on
    }

    /// The phase a task line joins: the current section's, made a phase on its first task.
    fn phase(&mut self) -> usize {
        if let Some(p) = self.section_phase {
            return p;
        }
        let ph = self.section.take().unwrap_or_else(|| Phase {
            title: "Tasks".into(),
            line: 1,
            ..Default::default()
        });
        self.out.phases.push(ph);
        let p = self.out.phases.len() - 1;
        self.section_phase = Some(p);
        p
    }
}

/// [`read_lines`] for the property tests of [`derive`].
#[cfg(test)]
pub(crate) fn read_lines_for_tests(path: &str, text: &str) -> (Parsed, BTreeMap<u64, usize>) {
    let (mut out, by_number) = read_lines(path, text).unwrap_or_else(|e| panic!("{e:?}"));
    classify_files(&mut out);
    (out, by_number)
}

/// The files named in a task's description: backticked paths (with a `/`, an extension, a
/// dotfile, or a name like `Makefile`), and words that look like a
/// file path (a file name with an extension that has a `/` in it, follows `in`, `at`,
/// `to`, `into`, `from`, `under`, or is the object of the task's verb unless that verb only
/// reads: `Update README.md`, not `Run quickstart.md validation`). Directories (`docs/`) and placeholders (`[name].py`) are not files.
/// Returns the files (normalised) and the paths no task may name (absolute, `..`, in `.git/`,
/// the generated plan at `plan_rel`, the task list `tasks_md` itself), each with why.
fn files_of(
    text: &str,
    (tasks_md, plan_rel): (&str, &str),
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
            Ok(n) => match crate::pure::plan::validate::path_problem(&n, Some(plan_rel)) {
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
            Err(e) => problems.push((f, e.to_string())),
        }
    }
    (files, problems)
}

/// `create` for the first task naming a file when its verb creates, else `modify`.
fn classify_files(out: &mut Parsed) {
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

/// How a task without `[P]` waits for the tasks written before it in its phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// For the previous task without `[P]` and the `[P]` tasks since: the same order as
    /// [`Rule::AllPairs`] (the previous one waits, in turn, for everything before it) in
    /// O(N) edges.
    Chain,
    /// For every task before it: N(N−1)/2 edges for a phase of N such tasks. Kept to test
    /// that [`Rule::Chain`] gives the same order.
    #[cfg_attr(not(test), allow(dead_code))]
    AllPairs,
}

/// The rules of [`super`]: phase order, `[P]`, `(depends on …)`, stories.
#[expect(clippy::too_many_lines, reason = "not yet split into named steps")]
pub(crate) fn derive(
    path: &str,
    out: &Parsed,
    by_number: &BTreeMap<u64, usize>,
    rule: Rule,
) -> Result<Vec<Vec<usize>>, Vec<SpecKitError>> {
    let n = out.tasks.len();
    let mut deps: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
    // Within a phase: a task without [P] comes after every task written before it.
    for ph in &out.phases {
        let mut since: usize = 0;
        for (k, &t) in ph.tasks.iter().enumerate() {
            if out.tasks[t].parallel {
                continue;
            }
            match rule {
                Rule::Chain => {
                    let from = since.saturating_sub(1);
                    deps[t].extend(ph.tasks[from..k].iter().copied());
                    since = k + 1;
                }
                Rule::AllPairs => deps[t].extend(ph.tasks[..k].iter().copied()),
            }
        }
    }
    // Between phases: a story phase waits for the last non-story phase before it; a
    // non-story phase waits for the stories since the last non-story phase, or else for the
    // phase before it.
    let mut gate: Option<usize> = None;
    let mut stories: Vec<usize> = Vec::new();
    let mut phase_deps: Vec<Vec<usize>> = vec![Vec::new(); out.phases.len()];
    for (p, ph) in out.phases.iter().enumerate() {
        if ph.story {
            phase_deps[p].extend(gate);
            stories.push(p);
        } else {
            phase_deps[p] = if stories.is_empty() {
                gate.into_iter().collect()
            } else {
                std::mem::take(&mut stories)
            };
            gate = Some(p);
        }
    }
    // Explicit edges.
    let mut errors = Vec::new();
    for (t, task) in out.tasks.iter().enumerate() {
        for d in &task.depends_on {
            match id_number(d).and_then(|n| by_number.get(&n)) {
                Some(&j) if j == t => errors.push(SpecKitError::Cycle {
                    path: path.into(),
                    line: task.line,
                    ids: vec![task.id.clone(), task.id.clone()],
                }),
                Some(&j) => {
                    deps[t].insert(j);
                }
                None => errors.push(SpecKitError::UnknownDependency {
                    path: path.into(),
                    line: task.line,
                    id: task.id.clone(),
                    dep: d.clone(),
                }),
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    // The phase edges go to the tasks of a phase that wait for nothing else in it, from the
    // tasks of the phases it waits for that nothing else in them waits for.
    let sinks: Vec<Vec<usize>> = out
        .phases
        .iter()
        .map(|ph| {
            let inner: BTreeSet<usize> = ph
                .tasks
                .iter()
                .flat_map(|&t| deps[t].iter().copied())
                .filter(|d| out.tasks[*d].phase == out.tasks[ph.tasks[0]].phase)
                .collect();
            ph.tasks
                .iter()
                .copied()
                .filter(|t| !inner.contains(t))
                .collect()
        })
        .collect();
    for (p, ph) in out.phases.iter().enumerate() {
        let before: Vec<usize> = phase_deps[p]
            .iter()
            .flat_map(|&q| sinks[q].iter().copied())
            .collect();
        for &t in &ph.tasks {
            let has_inner = deps[t].iter().any(|&d| out.tasks[d].phase == p);
            if !has_inner {
                deps[t].extend(before.iter().copied());
            }
        }
    }
    let deps: Vec<Vec<usize>> = deps.into_iter().map(|s| s.into_iter().collect()).collect();
    if let Some(cycle) = find_cycle(&deps) {
        let first = cycle[0];
        return Err(vec![SpecKitError::Cycle {
            path: path.into(),
            line: out.tasks[first].line,
            ids: cycle.iter().map(|&t| out.tasks[t].id.clone()).collect(),
        }]);
    }
    Ok(deps)
}

/// A cycle as a path of tasks whose last equals its first, if any (iterative DFS).
fn find_cycle(deps: &[Vec<usize>]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut mark = vec![Mark::New; deps.len()];
    for start in 0..deps.len() {
        if mark[start] != Mark::New {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        mark[start] = Mark::Open;
        while let Some(&mut (t, ref mut k)) = stack.last_mut() {
            if let Some(&d) = deps[t].get(*k) {
                *k += 1;
                match mark[d] {
                    Mark::New => {
                        mark[d] = Mark::Open;
                        stack.push((d, 0));
                    }
                    Mark::Open => {
                        // t waits for d which (up the stack) waits for t: d → … → t → d, in
                        // "waits for" order.
                        let at = stack.iter().position(|&(s, _)| s == d).unwrap_or(0);
                        let mut path: Vec<usize> = stack[at..].iter().map(|&(s, _)| s).collect();
                        path.push(d);
                        return Some(path);
                    }
                    Mark::Done => {}
                }
            } else {
                mark[t] = Mark::Done;
                stack.pop();
            }
        }
    }
    None
}

/// `text` (the tasks.md at `path`) with the checkbox of every task whose ID is in `done`
/// ticked (`- [ ]` → `- [x]`); every other byte unchanged. The task lines are the parser's
/// own ([`content_lines`]): a line in a comment or a fence is never ticked. A file the parser
/// refuses is not ticked (the errors say why).
pub fn tick(path: &str, text: &str, done: &BTreeSet<String>) -> Result<String, Vec<SpecKitError>> {
    let (read, _) = read_lines(path, text)?;
    let mut bytes = text.as_bytes().to_vec();
    for t in read
        .tasks
        .iter()
        .filter(|t| !t.done && done.contains(&t.id))
    {
        bytes[t.checkbox] = b'x';
    }
    Ok(String::from_utf8(bytes).expect("an ASCII space became an ASCII x"))
}
