//! Reading a Spec Kit `tasks.md` (pure): phases, task lines, markers, `(depends on …)`,
//! the files a task names, and the DAG the rules in [`super`] derive from them.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use crate::sources::Problem;

mod derive;
mod files;
mod read;

pub(crate) use derive::{Rule, derive};
use files::{classify_files, files_of};
use read::read_lines;
#[cfg(test)]
pub(crate) use read::read_lines_for_tests;

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
    /// The `[USn]` markers, as written (`US1`): one for a story's task, several for work
    /// those stories share.
    pub stories: Vec<String>,
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
    /// For each task, then each join, the tasks (and joins) it waits for (indices,
    /// ascending); index `tasks.len() + k` is join `k`.
    pub deps: Vec<Vec<usize>>,
    /// The joins' subjects: a phase after N tasks with M first tasks waits through one join
    /// when N × M > N + M (see [`super`]).
    pub joins: Vec<String>,
    /// Non-fatal findings (a task naming no file), each naming its line.
    pub warnings: Vec<String>,
}

static CHECKBOX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*[-*+]\s+\[([ xX])\]\s*(.*)$").unwrap());
/// A task line without a checkbox of Spec Kit's: none, or another mark (`[~]`).
static NO_CHECKBOX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*[-*+]\s+(\[[^\]]?\]\s*)?(T\d+(?:[A-Za-z]|\.\d+)?)\b").unwrap()
});
/// A dependency written as a list item (`- T008 blocks T009, T015`, the template's
/// `## Dependencies` list until 2025; `- T009 depends on T008`).
static STATED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^\s*[-*+]\s+\**(T\d+(?:[A-Za-z]|\.\d+)?)\**\s+(?i:(blocks|depends\s+on))\s*:?\s+(.*)$",
    )
    .unwrap()
});
/// A task ID: `T012`, or `T012a` for one inserted after the list was numbered; in bold too
/// (`**T012**`); a colon may end it (`T012:`, `**T012**:`, `**T012:**`).
static ID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\**(T\d+(?:[A-Za-z]|\.\d+)?)(?::\**|\**:?)(?:\s+|$)(.*)$").unwrap()
});
/// A task ID anywhere, and a word that orders tasks: a line with both that is read as no
/// dependency is named ([`read`]'s `unread`).
static ANY_ID: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bT\d+(?:[A-Za-z]|\.\d+)?\b").unwrap());
static ORDER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:depend\w*|requires?|needs?|after|before|blocks?|blocked|waits?|then|first|sequential\w*|prerequisites?)\b|→|->|⟶|─►").unwrap()
});
/// Task IDs given as an example of their form (`T001, T002...`): no task.
static EXAMPLE_IDS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:\bT\d+,\s*)*\bT\d+\s*(?:\.{3}|…)").unwrap());
static MARKER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\[(P|US\d+)\]\s*(.*)$").unwrap());
/// The markers written before a task's ID (`- [ ] [P] T005 …`), as many lists put them.
static LEAD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^(?:\[(?:P|US\d+)\]\s*)+").unwrap());
static DEPENDS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\(\s*depends\s+on\s*:?\s*([^)]*)\)").unwrap());
/// What looks like a dependency but is not `(depends on …)`: `(depend on T001)`, `(requires
/// T002)`, `(after T003)`, `(blocked by T004)`, `(deps: T005)`.
static NEAR_DEPENDS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\(\s*(?:depend(?:s|ing|ent|ency|encies)?(?:\s+(?:on|upon))?|deps?|requires?|needs?|after|blocked\s+by|waits?\s+(?:for|on))\b[^)]*\bT\d+[^)]*\)|\b(?:depends?\s+(?:on|upon)|blocked\s+by|requires|needs|waits?\s+(?:for|on))\s*:?\s*\**T\d+(?:[A-Za-z]|\.\d+)?").unwrap()
});
static FIELD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\*\*([^*:]+):?\*\*\s*:?\s*(.*)$").unwrap());
/// A `## ` heading, or a deeper one that names a phase by its number (`### Phase 3.1: Setup`,
/// not the template's `### Phase Dependencies`).
static SECTION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:##\s|#{3,4}\s+(?i:phase)\s*(?:\d|(?i:[ivx]+)\b))").unwrap());
/// A heading that names a phase or a user story (by its number, or the final phase): where
/// task lines are.
static PHASE_HEADING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:phase\s*(?:\d|[ivx]+\b)|final\s+phase|user\s+story\s*\d)").unwrap()
});
static STORY_HEADING: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\buser\s+story\s+\d+").unwrap());
static BACKTICK: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"`([^`]+)`").unwrap());
static EXTENSION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[^./][^/]*\.[A-Za-z][A-Za-z0-9]{0,9}$").unwrap());

static DOTFILE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\.[A-Za-z0-9][\w.-]*$").unwrap());

/// A checkbox line's text (trimmed) split where its ID starts: the markers before it (`[P] `),
/// and the rest.
fn split_lead(text: &str) -> (&str, &str) {
    text.split_at(LEAD.find(text).map_or(0, |m| m.end()))
}

fn id_number(id: &str) -> Option<u64> {
    id.strip_prefix('T').and_then(|n| n.parse().ok())
}

/// The keys [`id_key`] gives one number's IDs: the number's own, then its letters (`a` is 1),
/// then from [`DOTTED`] on its dotted IDs (`.1` is `DOTTED + 1`).
const SUFFIXES: u64 = 1 << 16;
const DOTTED: u64 = 32;

/// Which task an ID names: its number and the letter after it, in any case (`T010a` and
/// `T010A` one task, `T010` and `T10` another), or the number after a dot (`T231.1`, as
/// some lists number a task inserted after T231); `None` for no task ID.
fn id_key(id: &str) -> Option<u64> {
    let (number, suffix) = match (
        id.split_once('.'),
        id.strip_suffix(|c: char| c.is_ascii_alphabetic()),
    ) {
        (Some((number, sub)), _) => (
            number,
            DOTTED + sub.parse::<u64>().ok().filter(|&n| n < SUFFIXES - DOTTED)?,
        ),
        (None, Some(number)) => (
            number,
            u64::from(id.as_bytes()[number.len()].to_ascii_lowercase() - b'a' + 1),
        ),
        (None, None) => (id, 0),
    };
    Some(id_number(number)?.checked_mul(SUFFIXES)? + suffix)
}

/// Reads `text` (the tasks.md at `path`, repository-relative, used in messages).
pub fn parse(path: &str, text: &str) -> Result<Parsed, Vec<Problem>> {
    let (mut out, by_number) = read_lines(path, text)?;
    story_phases(&mut out);
    classify_files(&mut out);
    let derived = derive(path, &out, &by_number, Rule::Chain)?;
    out.deps = derived.deps;
    out.joins = derived.joins;
    for t in &out.tasks {
        if t.create.is_empty() && t.modify.is_empty() {
            out.warnings.push(format!(
                "{path}:{}: task {} names no file, so nothing keeps it apart from other tasks; name the file it changes (`in src/x.py` or a `backticked/path`)",
                t.line, t.id
            ));
        }
        for m in NEAR_DEPENDS.find_iter(&t.text) {
            if !DEPENDS.is_match(m.as_str()) {
                out.warnings.push(format!(
                    "{path}:{}: task {} says {:?}, which dagexec does not read as a dependency; write `(depends on T001)` for one",
                    t.line,
                    t.id,
                    m.as_str()
                ));
            }
        }
    }
    Ok(out)
}

/// A phase is a story phase by its heading, or when each of its tasks is one story's (a task
/// of several stories is work they share: `[US1] [US2] [US3]` in a foundational phase).
pub(crate) fn story_phases(out: &mut Parsed) {
    for ph in &mut out.phases {
        let all_stories = ph.tasks.iter().all(|&t| out.tasks[t].stories.len() == 1);
        ph.story = ph.story || all_stories;
    }
}

/// `text` (the tasks.md at `path`) with the checkbox of every task whose ID is in `done`
/// ticked (`- [ ]` → `- [x]`); every other byte unchanged. The task lines are the parser's
/// own ([`content_lines`](crate::sources::markdown::content_lines)): a line in a comment or a fence is never ticked. A file the parser
/// refuses is not ticked (the errors say why).
pub fn tick(path: &str, text: &str, done: &BTreeSet<String>) -> Result<String, Vec<Problem>> {
    let (read, _) = read_lines(path, text)?;
    let boxes = read
        .tasks
        .iter()
        .filter(|t| !t.done && done.contains(&t.id));
    Ok(crate::sources::generated::ticked(
        text,
        boxes.map(|t| t.checkbox),
    ))
}
