//! The DAG picture: the plan's tasks as nodes coloured by status, and an edge from each
//! dependency to its dependent, as Mermaid (for PR bodies on GitHub) or Graphviz DOT.
//!
//! Node `t{i}` is the task at plan index `i`, labelled `{i}: {subject}` over its status.
//! Edges are deduplicated and listed in ascending (dependency, dependent) order; a dependency
//! index that names no task is left out. Rendering takes time linear in the size of the plan.

use std::fmt::{self, Display, Formatter, Write as _};

use super::one_line;
use crate::pure::plan::model::{Plan, Status};

/// The text formats a plan's graph can be rendered in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum GraphFormat {
    /// A Mermaid `flowchart`, to put in a ```` ```mermaid ```` block (GitHub renders it).
    #[default]
    Mermaid,
    /// A Graphviz `digraph`, for `dot -Tsvg`.
    Dot,
}

/// The graph of `plan` in `format`.
#[must_use]
pub fn render(plan: &Plan, format: GraphFormat) -> String {
    match format {
        GraphFormat::Mermaid => mermaid(plan),
        GraphFormat::Dot => dot(plan),
    }
}

/// The graph of `plan` as a Mermaid flowchart (top-down), without the ```` ```mermaid ````
/// fence: one node per task, the edges, then a `classDef` and a `class` line per status that
/// occurs. Labels are escaped with Mermaid's `#…;` entities, so no subject can break the
/// diagram or the fence around it.
///
/// Mermaid's defaults, which GitHub keeps, refuse a diagram longer than 50,000 characters or
/// with more than 500 edges: check the length before putting a big plan in a PR body.
#[must_use]
pub fn mermaid(plan: &Plan) -> String {
    let mut f = String::from("flowchart TD\n");
    let names = crate::pure::plan::ids::TaskNames::of(plan);
    for (i, task) in plan.tasks.iter().enumerate() {
        // A join is a junction point: its edges show what it joins.
        if task.join {
            let _ = writeln!(f, "    t{i}(( ))");
            continue;
        }
        let _ = writeln!(
            f,
            "    t{i}[\"{}: {}<br/>{}\"]",
            MermaidText(&names.get(i)),
            MermaidText(names.subject(i, &task.subject)),
            task.status.as_str()
        );
    }
    for (from, to) in edges(plan) {
        let _ = writeln!(f, "    t{from} --> t{to}");
    }
    let groups = by_status(plan);
    for (status, ids) in Status::ALL.iter().zip(&groups) {
        if ids.is_empty() {
            continue;
        }
        let Look {
            fill,
            stroke,
            text,
            dashed,
        } = look(*status);
        let dash = if dashed { ",stroke-dasharray:5 5" } else { "" };
        let _ = writeln!(
            f,
            "    classDef {status} fill:{fill},stroke:{stroke},color:{text}{dash}"
        );
    }
    for (status, ids) in Status::ALL.iter().zip(&groups) {
        if let Some((first, rest)) = ids.split_first() {
            let _ = write!(f, "    class t{first}");
            for i in rest {
                let _ = write!(f, ",t{i}");
            }
            let _ = writeln!(f, " {status}");
        }
    }
    f
}

/// The graph of `plan` as a Graphviz `digraph` (top to bottom), each node filled with its
/// status's colour.
#[must_use]
pub fn dot(plan: &Plan) -> String {
    let mut f = String::from("digraph plan {\n");
    f.push_str("    rankdir=TB;\n");
    f.push_str("    node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];\n");
    let names = crate::pure::plan::ids::TaskNames::of(plan);
    for (i, task) in plan.tasks.iter().enumerate() {
        // A join is a junction point: its edges show what it joins.
        if task.join {
            let _ = writeln!(
                f,
                "    t{i} [shape=point, width=0.15, label=\"\", style=filled, fillcolor=\"#57606a\"];"
            );
            continue;
        }
        let Look {
            fill,
            stroke,
            text,
            dashed,
        } = look(task.status);
        let style = if dashed {
            ", style=\"rounded,filled,dashed\""
        } else {
            ""
        };
        let _ = writeln!(
            f,
            "    t{i} [label=\"{}: {}\\n{}\", fillcolor=\"{fill}\", fontcolor=\"{text}\", \
             color=\"{stroke}\"{style}];",
            DotText(&names.get(i)),
            DotText(names.subject(i, &task.subject)),
            task.status.as_str()
        );
    }
    for (from, to) in edges(plan) {
        let _ = writeln!(f, "    t{from} -> t{to};");
    }
    f.push_str("}\n");
    f
}

/// How a node of a given status is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Look {
    /// Fill colour.
    fill: &'static str,
    /// Border colour.
    stroke: &'static str,
    /// Text colour.
    text: &'static str,
    /// Whether the border is dashed.
    dashed: bool,
}

/// Dark text, on light fills.
const DARK: &str = "#1f2328";
/// White text, on dark fills.
const WHITE: &str = "#ffffff";

/// How nodes of `status` are drawn (GitHub's Primer colours).
fn look(status: Status) -> Look {
    let (fill, stroke, text, dashed) = match status {
        Status::Pending => ("#d0d7de", "#8c959f", DARK, false),
        Status::InProgress => ("#0969da", "#0550ae", WHITE, false),
        Status::Completed => ("#1a7f37", "#116329", WHITE, false),
        Status::Failed => ("#cf222e", "#a40e26", WHITE, false),
        Status::Blocked => ("#bc4c00", "#953800", WHITE, false),
        Status::Skipped => ("#eaeef2", "#8c959f", DARK, true),
    };
    Look {
        fill,
        stroke,
        text,
        dashed,
    }
}

/// The dependency edges of `plan` as `(dependency, dependent)` pairs: deduplicated, in
/// ascending order, and only between existing tasks. Linear time (a counting sort by
/// dependency).
fn edges(plan: &Plan) -> Vec<(usize, usize)> {
    let n = plan.tasks.len();
    // start[from]..start[from + 1] is where the edges out of `from` go.
    let mut start = vec![0usize; n + 1];
    for (from, _) in raw_edges(plan) {
        start[from + 1] += 1;
    }
    let mut total = 0;
    for s in &mut start {
        total += *s;
        *s = total;
    }
    let mut next = start;
    let mut sorted = vec![(0, 0); total];
    // Dependents are visited in ascending order, so each bucket comes out sorted, and a
    // dependency listed twice by one task gives two adjacent equal edges.
    for (from, to) in raw_edges(plan) {
        sorted[next[from]] = (from, to);
        next[from] += 1;
    }
    sorted.dedup();
    sorted
}

/// Every `(dependency, dependent)` pair of `plan` whose dependency is a task, in plan order of
/// the dependent, then `blockedBy` order.
fn raw_edges(plan: &Plan) -> impl Iterator<Item = (usize, usize)> + '_ {
    let n = plan.tasks.len();
    plan.tasks.iter().enumerate().flat_map(move |(to, task)| {
        task.blocked_by
            .iter()
            .filter(move |&&from| from < n)
            .map(move |&from| (from, to))
    })
}

/// The plan indices of the tasks of each status, indexed like [`Status::ALL`].
fn by_status(plan: &Plan) -> [Vec<usize>; Status::ALL.len()] {
    let mut groups: [Vec<usize>; Status::ALL.len()] = Default::default();
    for (i, task) in plan.tasks.iter().enumerate().filter(|(_, t)| !t.join) {
        groups[task.status as usize].push(i);
    }
    groups
}

/// Displays text for inside a quoted Mermaid label, on one line, shown as it is.
///
/// These are written as Mermaid entities (`#…;`, which Mermaid turns into HTML entities):
/// `"` (it would end the label), `<`, `>` and `&` (HTML), `#` (it could start an entity),
/// `` ` `` (it could close the ```` ``` ```` fence of a Markdown block) and `%` (`%%{…}%%` is a
/// directive anywhere in a diagram).
///
/// Mermaid decodes those entities before it looks for the sequences below, so these get an
/// invisible word joiner (U+2060) in the middle instead: `\n` (a line break), `$$` (`KaTeX`
/// maths), `:fa-` (a Font Awesome icon, as in `fa:fa-car`), and `ﬂ°` and `¶ß` (the placeholders
/// Mermaid itself turns entities into).
struct MermaidText<'a>(&'a str);

/// An invisible word joiner, as a Mermaid entity.
const WORD_JOINER: &str = "#8288;";

impl Display for MermaidText<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let line: String = one_line(self.0).collect();
        for (at, c) in line.char_indices() {
            match c {
                '"' => f.write_str("#quot;")?,
                '<' => f.write_str("#lt;")?,
                '>' => f.write_str("#gt;")?,
                '&' => f.write_str("#amp;")?,
                '#' => f.write_str("#35;")?,
                '`' => f.write_str("#96;")?,
                '%' => f.write_str("#37;")?,
                c => f.write_char(c)?,
            }
            let rest = &line[at + c.len_utf8()..];
            let join = match c {
                '\\' => rest.starts_with('n'),
                '$' => rest.starts_with('$'),
                ':' => rest.starts_with("fa-"),
                'ﬂ' => rest.starts_with('°'),
                '¶' => rest.starts_with('ß'),
                _ => false,
            };
            if join {
                f.write_str(WORD_JOINER)?;
            }
        }
        Ok(())
    }
}

/// Displays text for inside a double-quoted DOT string, on one line, shown as it is: `\` and
/// `"` are backslash-escaped (so the text has no `\n`, `\l`, `\N`… escapes of its own), and
/// `&` is written `&amp;` (Graphviz decodes HTML entities such as `&#35;` in every label).
struct DotText<'a>(&'a str);

impl Display for DotText<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for c in one_line(self.0) {
            match c {
                '\\' => f.write_str("\\\\")?,
                '"' => f.write_str("\\\"")?,
                '&' => f.write_str("&amp;")?,
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::plan::model::Task;
    use crate::pure::render::tests::{auth_v2, auth_v2_mid_run, plan_of, task};

    /// Name, each task's `blockedBy`, the edges wanted.
    type EdgeCase<'a> = (&'a str, &'a [&'a [usize]], &'a [(usize, usize)]);

    #[test]
    fn edges_are_deduplicated_sorted_and_only_between_tasks() {
        let cases: &[EdgeCase] = &[
            ("no tasks", &[], &[]),
            ("no deps", &[&[], &[]], &[]),
            ("one dep", &[&[], &[0]], &[(0, 1)]),
            (
                "sorted by dependency then dependent",
                &[&[], &[], &[1, 0], &[0]],
                &[(0, 2), (0, 3), (1, 2)],
            ),
            ("duplicates", &[&[], &[0, 0, 0]], &[(0, 1)]),
            ("unknown index", &[&[7], &[0, usize::MAX, 2]], &[(0, 1)]),
            ("self loop kept", &[&[0]], &[(0, 0)]),
            ("forward reference", &[&[1], &[]], &[(1, 0)]),
        ];
        for (name, deps, want) in cases {
            let tasks = deps.iter().map(|d| task("t", d)).collect();
            assert_eq!(edges(&plan_of(tasks)), *want, "case {name}");
        }
    }

    #[test]
    fn mermaid_text_is_escaped() {
        let cases = [
            ("plain", "Create user model", "Create user model"),
            ("quotes", r#"say "hi""#, "say #quot;hi#quot;"),
            ("html", "<b>&</b>", "#lt;b#gt;#amp;#lt;/b#gt;"),
            (
                "entity-looking text",
                "#quot; and #35;",
                "#35;quot; and #35;35;",
            ),
            ("backtick fence", "```end", "#96;#96;#96;end"),
            ("directive", "%%{init: {}}%%", "#37;#37;{init: {}}#37;#37;"),
            (
                "backslash n is no line break",
                r"C:\new\N",
                r"C:\#8288;new\N",
            ),
            ("backslashes", r"a\\b\", r"a\\b\"),
            (
                "dollars are no maths",
                "$$x$$ costs $5",
                "$#8288;$x$#8288;$ costs $5",
            ),
            (
                "no icons",
                "fa:fa-car fab:fa-x a:b",
                "fa:#8288;fa-car fab:#8288;fa-x a:b",
            ),
            ("placeholders", "ﬂ°°1¶ß ﬂ ¶", "ﬂ#8288;°°1¶#8288;ß ﬂ ¶"),
            ("newline", "a\nb\r\nc", "a b c"),
            (
                "brackets need no escape",
                "f(x) [y] {z} |w|",
                "f(x) [y] {z} |w|",
            ),
            ("unicode", "Ünïcödé 🦀", "Ünïcödé 🦀"),
        ];
        for (name, input, want) in cases {
            assert_eq!(MermaidText(input).to_string(), want, "case {name}");
        }
    }

    #[test]
    fn dot_text_is_escaped() {
        let cases = [
            ("plain", "Create user model", "Create user model"),
            ("quotes", r#"say "hi""#, r#"say \"hi\""#),
            ("backslash", r"C:\dir\n", r"C:\\dir\\n"),
            ("newline", "a\nb", "a b"),
            ("angle brackets need no escape", "<b>x</b>", "<b>x</b>"),
            (
                "entities stay text",
                "&amp; &#35; &",
                "&amp;amp; &amp;#35; &amp;",
            ),
        ];
        for (name, input, want) in cases {
            assert_eq!(DotText(input).to_string(), want, "case {name}");
        }
    }

    #[test]
    fn every_status_has_its_look() {
        let cases = [
            (Status::Pending, "#d0d7de", DARK, false),
            (Status::InProgress, "#0969da", WHITE, false),
            (Status::Completed, "#1a7f37", WHITE, false),
            (Status::Failed, "#cf222e", WHITE, false),
            (Status::Blocked, "#bc4c00", WHITE, false),
            (Status::Skipped, "#eaeef2", DARK, true),
        ];
        for (status, fill, text, dashed) in cases {
            let got = look(status);
            assert_eq!(
                (got.fill, got.text, got.dashed),
                (fill, text, dashed),
                "{status}"
            );
        }
    }

    #[test]
    fn mermaid_defines_only_classes_that_occur() {
        let plan = plan_of(vec![
            Task {
                status: Status::Completed,
                ..task("a", &[])
            },
            task("b", &[0]),
            Task {
                status: Status::Completed,
                ..task("c", &[0])
            },
        ]);
        let got = mermaid(&plan);
        let class_lines: Vec<&str> = got
            .lines()
            .filter(|l| l.trim_start().starts_with("class"))
            .collect();
        assert_eq!(
            class_lines,
            [
                "    classDef pending fill:#d0d7de,stroke:#8c959f,color:#1f2328",
                "    classDef completed fill:#1a7f37,stroke:#116329,color:#ffffff",
                "    class t1 pending",
                "    class t0,t2 completed",
            ]
        );
    }

    #[test]
    fn empty_plan() {
        assert_eq!(mermaid(&plan_of(Vec::new())), "flowchart TD\n");
        assert_eq!(
            dot(&plan_of(Vec::new())),
            "digraph plan {\n    rankdir=TB;\n    node [shape=box, style=\"rounded,filled\", \
             fontname=\"Helvetica\"];\n}\n"
        );
    }

    #[test]
    fn render_dispatches_on_format() {
        let plan = auth_v2();
        assert_eq!(render(&plan, GraphFormat::Mermaid), mermaid(&plan));
        assert_eq!(render(&plan, GraphFormat::Dot), dot(&plan));
    }

    #[test]
    fn large_plans_render_in_linear_time() {
        const N: usize = 100_000;
        // Every task depends on its two predecessors and on task 0: 3 edges a task, one of
        // them a hub with N - 1 dependents.
        let tasks = (0..N)
            .map(|i| task("task", &[i.saturating_sub(1), i.saturating_sub(2), 0]))
            .collect();
        let plan = plan_of(tasks);
        let want_edges = edges(&plan).len();
        assert_eq!(want_edges, 3 * N - 5);
        let m = mermaid(&plan);
        assert_eq!(m.lines().count(), 1 + N + want_edges + 2);
        let d = dot(&plan);
        assert_eq!(d.lines().count(), 3 + N + want_edges + 1);
    }

    #[test]
    fn tricky_plan_snapshots() {
        let plan = plan_of(vec![
            task(r#"Quote "this" & <that>"#, &[]),
            task(
                "Back\\slash, C:\\new, `code` #1; 100% $$x$$ fa:fa-car",
                &[0, 0, 42],
            ),
            Task {
                status: Status::Skipped,
                ..task("Line one\nline two", &[1, 0])
            },
        ]);
        insta::assert_snapshot!("tricky_mermaid", mermaid(&plan));
        insta::assert_snapshot!("tricky_dot", dot(&plan));
    }

    #[test]
    fn snapshot_auth_v2_mermaid() {
        insta::assert_snapshot!(mermaid(&auth_v2_mid_run()));
    }

    #[test]
    fn snapshot_auth_v2_dot() {
        insta::assert_snapshot!(dot(&auth_v2_mid_run()));
    }
}
