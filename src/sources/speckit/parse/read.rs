//! Reading the lines of a tasks.md: the title, sections, phase fields and task lines (no edges
//! yet).

use super::{
    ANY_ID, CHECKBOX, DEPENDS, DOTTED, EXAMPLE_IDS, FIELD, ID, MARKER, NO_CHECKBOX, ORDER,
    PHASE_HEADING, Parsed, Phase, SECTION, STATED, STORY_HEADING, SUFFIXES, TaskLine, files_of,
    id_key, split_lead,
};
use crate::sources::Problem;
use crate::sources::markdown::{Content, content_lines};
use std::collections::{BTreeMap, BTreeSet};

/// The phases and task lines of `text` (no edges yet), and the tasks by [`super::id_key`].
#[allow(clippy::type_complexity)]
pub(super) fn read_lines(
    path: &str,
    text: &str,
) -> Result<(Parsed, BTreeMap<u64, usize>), Vec<Problem>> {
    let mut r = LinesRead {
        path,
        plan_rel: crate::sources::generated::plan_rel_of(path),
        errors: Vec::new(),
        out: Parsed::default(),
        section: None,
        section_phase: None,
        by_number: BTreeMap::new(),
        stated: Vec::new(),
        section_no: 0,
        tasked: tasked_sections(text),
        warned: BTreeSet::new(),
        task_indent: None,
    };
    for content in content_lines(text) {
        r.line(&content);
    }
    r.add_stated();
    let LinesRead {
        mut errors,
        out,
        by_number,
        ..
    } = r;
    if out.tasks.is_empty() && errors.is_empty() {
        errors.push(Problem::new(
            format!("{path}: no task lines (`- [ ] T001 Description`)"),
            "is this a Spec Kit tasks.md? Task lines look like `- [ ] T001 [P] [US1] Create X in src/x.py`",
        ));
    }
    crate::sources::generated::ok_unless(errors, (out, by_number))
}

/// What [`read_lines`] has read so far.
struct LinesRead<'a> {
    /// The tasks.md, repository-relative, for messages.
    path: &'a str,
    /// The generated plan's path, which no task may name.
    plan_rel: String,
    errors: Vec<Problem>,
    out: Parsed,
    /// The current `## ` section: (title, line, goal, test), made a phase when it gets a task.
    section: Option<Phase>,
    section_phase: Option<usize>,
    by_number: BTreeMap<u64, usize>,
    /// The dependencies stated as list items: (line, waiting ID, the IDs it waits for).
    stated: Vec<(usize, String, Vec<String>)>,
    /// The sections so far (`## …` headings), the ones with task lines, and the ones whose
    /// lines that are no task lines were said to be none.
    section_no: usize,
    tasked: BTreeSet<usize>,
    warned: BTreeSet<usize>,
    /// How far the section's last task line is indented: a checkbox line without an ID
    /// indented deeper is that task's own checklist.
    task_indent: Option<usize>,
}

/// The sections (numbered as [`LinesRead::section_no`]) with a task line.
fn tasked_sections(text: &str) -> BTreeSet<usize> {
    let mut section_no = 0;
    let mut tasked = BTreeSet::new();
    for content in content_lines(text) {
        let trimmed = content.text.trim_start();
        if SECTION.is_match(trimmed) {
            section_no += 1;
        } else if CHECKBOX
            .captures(trimmed)
            .is_some_and(|c| ID.is_match(split_lead(c[2].trim()).1))
        {
            tasked.insert(section_no);
        }
    }
    tasked
}

impl LinesRead<'_> {
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
            self.section_no += 1;
            self.task_indent = None;
            return;
        }
        if let Some(c) = FIELD.captures(trimmed) {
            self.unread(line_no, trimmed);
            self.field(&c[1].trim().to_ascii_lowercase(), c[2].trim().to_string());
            return;
        }
        if let Some(c) = STATED.captures(trimmed) {
            let ids = self.stated_ids(line_no, &c[3]);
            if c[2].eq_ignore_ascii_case("blocks") {
                let stated = ids
                    .into_iter()
                    .map(|w| (line_no, w, vec![c[1].to_string()]));
                self.stated.extend(stated);
            } else {
                self.stated.push((line_no, c[1].to_string(), ids));
            }
            return;
        }
        if let Some(c) = NO_CHECKBOX.captures(trimmed)
            && !CHECKBOX.is_match(trimmed)
        {
            let id = &c[2];
            let why = c.get(1).map_or_else(
                || "has no checkbox".to_string(),
                |m| {
                    format!(
                        "is marked `{}`, which is not a Spec Kit mark",
                        m.as_str().trim_end()
                    )
                },
            );
            let hint = format!("write it as `- [ ] {id} Description in path/to/file`");
            self.doubtful(line_no, trimmed, format!("task {id} {why}"), hint);
            return;
        }
        if !CHECKBOX.is_match(trimmed) {
            return self.unread(line_no, trimmed);
        }
        if let Some(head) = self.head(content) {
            self.task(head);
        }
    }

    /// A line read as no task and no dependency (`text`): when it orders tasks in words (names
    /// a task and a word of order, or an arrow with a task on each side: not `(T001-T004) →
    /// ~30 min`; IDs as an example of their form, `T001, T002...`, name no task), a warning
    /// says so, naming the line.
    fn unread(&mut self, line: usize, text: &str) {
        let named = EXAMPLE_IDS.replace_all(text, "");
        let orders = ORDER.find_iter(&named).any(|m| {
            m.as_str().starts_with(char::is_alphabetic)
                || ANY_ID.is_match(&named[..m.start()]) && ANY_ID.is_match(&named[m.end()..])
        });
        if ANY_ID.is_match(&named) && orders {
            self.out.warnings.push(format!(
                "{}:{line}: {text:?} orders tasks in words dagexec does not read; write each as `- T012 depends on T010` or as `(depends on T010)` in T012's line",
                self.path
            ));
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

    fn malformed(&mut self, line: usize, why: String, hint: impl Into<String>) {
        self.errors.push(Problem::at(self.path, line, why, hint));
    }

    /// A line like a task line that is none (`text`): among task lines or under a phase's
    /// heading an error (`why`), in another section without task lines (a checklist, a
    /// summary naming tasks) none, said once a section.
    fn doubtful(&mut self, line: usize, text: &str, why: String, hint: impl Into<String>) {
        let title = self.section.as_ref().map_or("Tasks", |s| s.title.as_str());
        if self.tasked.contains(&self.section_no) || PHASE_HEADING.is_match(title) {
            return self.malformed(line, why, hint);
        }
        if self.warned.insert(self.section_no) {
            self.out.warnings.push(format!(
                "{}:{line}: {text:?} and the like under {title:?} are not read as tasks (no task line there)",
                self.path
            ));
        }
    }

    /// A checkbox line's task as written (ID, line, checkbox, markers and description; its
    /// phase, dependencies and files not read yet); `None` (an error kept) when it has no ID or
    /// no description, or is no checkbox line; `None` (a warning kept) when it is struck
    /// through (`- [x] ~~T016 …~~ - REMOVED`): a task withdrawn; `None` when it has no ID and
    /// is nested under a task line: that task's own checklist.
    fn head(&mut self, content: &Content<'_>) -> Option<TaskLine> {
        let line = content.text;
        let trimmed = line.trim_start();
        let c = CHECKBOX.captures(trimmed)?;
        let done = &c[1] != " ";
        let checkbox =
            content.start + (line.len() - trimmed.len()) + c.get(1).map_or(0, |m| m.start());
        let rest = c[2].trim();
        if let Some(struck) = rest.strip_prefix("~~") {
            // Struck-through checklist text (no task ID) is said nowhere.
            if let Some(id) = ANY_ID.find(struck) {
                self.out.warnings.push(format!(
                    "{}:{}: task {} is struck through: withdrawn, not read as a task",
                    self.path,
                    content.number,
                    id.as_str()
                ));
            }
            return None;
        }
        let (lead, after) = split_lead(rest);
        let indent = line.len() - trimmed.len();
        let Some(idc) = ID.captures(after) else {
            if self.task_indent.is_some_and(|under| indent > under) {
                return None;
            }
            self.doubtful(
                content.number,
                trimmed,
                format!("the checkbox line {rest:?} has no task ID"),
                "every task line is `- [ ] T0NN [P] [USn] Description`; give it the next free ID",
            );
            return None;
        };
        let id = idc[1].to_string();
        let mut body = format!("{lead}{}", idc[2].trim());
        let (mut parallel, mut stories) = (false, Vec::new());
        while let Some(m) = MARKER.captures(&body) {
            if &m[1] == "P" {
                parallel = true;
            } else {
                stories.push(m[1].to_string());
            }
            body = m[2].trim().to_string();
        }
        if body.is_empty() {
            self.malformed(
                content.number,
                format!("task {id} has no description"),
                "say what to do and where: `- [ ] T012 Create User model in src/models/user.py`",
            );
            return None;
        }
        self.task_indent = Some(indent);
        Some(TaskLine {
            id,
            line: content.number,
            done,
            parallel,
            stories,
            text: body,
            depends_on: Vec::new(),
            create: Vec::new(),
            modify: Vec::new(),
            phase: 0,
            checkbox,
        })
    }

    /// A task line: its ID unique, its `depends on` IDs, its phase and files.
    fn task(&mut self, mut t: TaskLine) {
        let (id, line_no) = (&t.id, t.line);
        let number = id_key(id).unwrap_or(u64::MAX);
        if let Some(&first) = self.by_number.get(&number) {
            self.errors.push(Problem::at(
                self.path,
                line_no,
                format!(
                    "task ID {id} is used twice (first on line {})",
                    self.out.tasks[first].line
                ),
                "give one of them the next free ID and update any `depends on` naming it",
            ));
            return;
        }
        t.depends_on = self.depends_on(line_no, &t.text);
        t.phase = self.phase();
        let (files, problems) = files_of(&t.text, self.path, &self.plan_rel);
        for (file, why) in problems {
            self.errors.push(Problem::at(
                self.path,
                line_no,
                format!("task {id} names the file {file:?}, which {why}"),
                "name files relative to the repository root, without `..`, outside .git/ and dagexec's generated plan",
            ));
        }
        t.modify = files;
        let out = &mut self.out;
        self.by_number.insert(number, out.tasks.len());
        out.phases[t.phase].tasks.push(out.tasks.len());
        out.tasks.push(t);
    }

    /// The task IDs of a description's `(depends on …)`: IDs, ranges (`T003-T005`, `T003–T005`,
    /// `T003..T005`, as github/spec-kit#1934's explicit dependencies write them) and `none`;
    /// anything else an error.
    fn depends_on(&mut self, line_no: usize, body: &str) -> Vec<String> {
        let mut depends_on = Vec::new();
        for d in DEPENDS.captures_iter(body) {
            for token in d[1]
                .split([',', ';', ' '])
                // `(Depends on T003, T008.)`: a full stop ends the sentence, not the ID.
                .map(|t| t.trim().trim_end_matches('.'))
                .filter(|t| !t.is_empty() && !t.eq_ignore_ascii_case("and"))
            {
                if token.eq_ignore_ascii_case("none") {
                    continue;
                }
                if let Some(ids) = self.ids_of(line_no, token) {
                    depends_on.extend(ids);
                } else {
                    self.malformed(
                        line_no,
                        format!("`depends on` lists {token:?}, which is not a task ID"),
                        "list task IDs separated by commas: (depends on T012, T013)",
                    );
                }
            }
        }
        depends_on
    }

    /// The IDs `token` names, an ID or a range; `None` for another word. A range refused is an
    /// error at `line_no`.
    fn ids_of(&mut self, line_no: usize, token: &str) -> Option<Vec<String>> {
        match id_range(token) {
            Some(Ok(ids)) => Some(ids),
            Some(Err(why)) => {
                self.malformed(
                    line_no,
                    format!("`depends on` lists the range {token:?}, which {why}"),
                    "write a range as T003-T005 or T004a-T004d (first, then last, at most 1000 tasks), other IDs one by one",
                );
                Some(Vec::new())
            }
            None => id_key(token).map(|_| vec![token.to_string()]),
        }
    }

    /// The task IDs (and ranges) a stated dependency lists, up to the first word that is
    /// neither (`T009, T015 (shared model)` → T009, T015); after a `;`, a clause of IDs only
    /// (`T009; T015`), else [`Self::unread`] (`T009; T012 depends on T010`).
    fn stated_ids(&mut self, line_no: usize, list: &str) -> Vec<String> {
        let mut ids = Vec::new();
        for (k, clause) in list.split(';').enumerate() {
            let mut read = Vec::new();
            let whole = clause
                .split([',', ' '])
                .map(|t| t.trim().trim_matches('*'))
                .filter(|t| !t.is_empty() && !t.eq_ignore_ascii_case("and"))
                .all(|token| {
                    self.ids_of(line_no, token)
                        .map(|r| read.extend(r))
                        .is_some()
                });
            if k > 0 && !whole {
                self.unread(line_no, clause.trim());
                break;
            }
            ids.extend(read);
            if !whole {
                break;
            }
        }
        ids
    }

    /// The dependencies stated as list items, added to the tasks' own; an ID there that is no
    /// task is an error at its line.
    fn add_stated(&mut self) {
        for (line_no, waits, on) in std::mem::take(&mut self.stated) {
            let task = |id: &str| id_key(id).and_then(|n| self.by_number.get(&n).copied());
            let unknown = std::iter::once(&waits)
                .chain(&on)
                .find(|id| task(id).is_none());
            match (unknown, task(&waits)) {
                (None, Some(t)) => self.out.tasks[t].depends_on.extend(on),
                (id, _) => self.malformed(
                    line_no,
                    format!(
                        "the dependency names {}, which is not a task in this file",
                        id.unwrap_or(&waits)
                    ),
                    "fix the ID or drop the line",
                ),
            }
        }
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
    super::classify_files(&mut out);
    (out, by_number)
}

/// The IDs of a range `T003-T005` (`–`, `..`), written as wide as its first ID, or of one
/// number's letters `T004a-T004d` or dotted IDs `T231.1-T231.4`; `None` for a token that is
/// not a range.
fn id_range(token: &str) -> Option<Result<Vec<String>, &'static str>> {
    let (a, b) = token
        .split_once("..")
        .or_else(|| token.split_once('–'))
        .or_else(|| token.split_once('-'))?;
    let from = id_key(a)?;
    let to = id_key(b).or_else(|| id_key(&format!("T{b}")))?;
    if to < from {
        return Some(Err("goes backwards"));
    }
    let suffixes = (from % SUFFIXES, to % SUFFIXES);
    let one_number = from / SUFFIXES == to / SUFFIXES;
    if one_number && suffixes.0 >= DOTTED {
        let stem = &a[..=a.find('.').unwrap_or(0)];
        let ids = (suffixes.0..=suffixes.1).map(|n| format!("{stem}{}", n - DOTTED));
        return Some(Ok(ids.collect()));
    }
    if one_number && suffixes.0 > 0 && suffixes.1 < DOTTED {
        let (stem, last) = a.split_at(a.len() - 1);
        let first = last.as_bytes()[0];
        let ids = (first..=first + (to - from) as u8).map(|c| format!("{stem}{}", char::from(c)));
        return Some(Ok(ids.collect()));
    }
    if suffixes != (0, 0) {
        return Some(Err("mixes lettered IDs and numbers"));
    }
    let (from, to) = (from / SUFFIXES, to / SUFFIXES);
    if to - from >= 1000 {
        return Some(Err("spans more than 1000 tasks"));
    }
    let width = a.len() - 1;
    Some(Ok((from..=to).map(|n| format!("T{n:0width$}")).collect()))
}
