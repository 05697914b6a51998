//! The edges: phase order, `[P]`, `(depends on …)`, stories; and the cycle check.

use super::{Parsed, id_key};
use crate::sources::Problem;
use std::collections::{BTreeMap, BTreeSet};

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

/// The edges the rules of [`super`] give (phase order, `[P]`, `(depends on …)`, stories):
/// what each task, then each join, waits for. Node `tasks.len() + k` is join `k`.
pub(crate) struct Derived {
    pub deps: Vec<Vec<usize>>,
    /// Each join's subject (what it joins: `Phase 1: Setup done`).
    pub joins: Vec<String>,
}

/// The rules of [`super`]: phase order, `[P]`, `(depends on …)`, stories.
pub(crate) fn derive(
    path: &str,
    out: &Parsed,
    by_number: &BTreeMap<u64, usize>,
    rule: Rule,
) -> Result<Derived, Vec<Problem>> {
    let mut deps = within_phases(out, rule);
    let phase_deps = between_phases(out);
    explicit_edges(path, out, by_number, &mut deps)?;
    let joins = phase_edges(out, &phase_deps, &mut deps);
    let deps: Vec<Vec<usize>> = deps.into_iter().map(|s| s.into_iter().collect()).collect();
    if let Some(found) = crate::pure::graph::cycle_in(&deps) {
        // A join in the cycle is no task of the file: the path goes through it unnamed.
        let real: Vec<_> = found.iter().filter_map(|&t| out.tasks.get(t)).collect();
        let ids: Vec<&str> = real.iter().map(|t| t.id.as_str()).collect();
        return Err(vec![cycle(path, real[0].line, &ids)]);
    }
    Ok(Derived { deps, joins })
}

/// The tasks `ids` (at `line`, the first one's) wait for each other in a cycle.
fn cycle(path: &str, line: usize, ids: &[&str]) -> Problem {
    Problem::at(
        path,
        line,
        format!(
            "the tasks wait for each other in a cycle: {}",
            ids.join(" → ")
        ),
        "remove one `(depends on …)` of the cycle, or move a task so the one it waits for is written before it",
    )
}

/// The edges inside each phase, by `rule`.
fn within_phases(out: &Parsed, rule: Rule) -> Vec<BTreeSet<usize>> {
    let mut deps: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); out.tasks.len()];
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
    deps
}

/// The phases each phase waits for.
fn between_phases(out: &Parsed) -> Vec<Vec<usize>> {
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
    phase_deps
}

/// The `(depends on …)` edges; unknown IDs and a task depending on itself are errors.
fn explicit_edges(
    path: &str,
    out: &Parsed,
    by_number: &BTreeMap<u64, usize>,
    deps: &mut [BTreeSet<usize>],
) -> Result<(), Vec<Problem>> {
    let mut errors = Vec::new();
    for (t, task) in out.tasks.iter().enumerate() {
        for d in &task.depends_on {
            match id_key(d).and_then(|n| by_number.get(&n)) {
                Some(&j) if j == t => errors.push(cycle(path, task.line, &[&task.id, &task.id])),
                Some(&j) => {
                    deps[t].insert(j);
                }
                None => errors.push(Problem::at(
                    path,
                    task.line,
                    format!(
                        "task {} depends on {d}, which is not a task in this file",
                        task.id
                    ),
                    "fix the ID or drop it from `(depends on …)`",
                )),
            }
        }
    }
    crate::sources::generated::ok_unless(errors, ())
}

/// The phase edges as task edges: each first task of a phase (one waiting for nothing in it)
/// waits for each last task of the phases it waits for (one nothing there waits for). When
/// that is more edges than going through one join (N last tasks, M first: N × M > N + M),
/// a join waits for the N and the M wait for it; the joins are appended to `deps` and their
/// subjects returned.
fn phase_edges(
    out: &Parsed,
    phase_deps: &[Vec<usize>],
    deps: &mut Vec<BTreeSet<usize>>,
) -> Vec<String> {
    let n = out.tasks.len();
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
    let mut joins = Vec::new();
    for (p, ph) in out.phases.iter().enumerate() {
        let before: Vec<usize> = phase_deps[p]
            .iter()
            .flat_map(|&q| sinks[q].iter().copied())
            .collect();
        let first: Vec<usize> = ph
            .tasks
            .iter()
            .copied()
            .filter(|&t| !deps[t].iter().any(|&d| d < n && out.tasks[d].phase == p))
            .collect();
        let (many, to) = (before.len(), first.len());
        if many * to > many + to {
            let join = deps.len();
            deps.push(before.into_iter().collect());
            let titles: Vec<&str> = phase_deps[p]
                .iter()
                .map(|&q| out.phases[q].title.as_str())
                .collect();
            joins.push(format!("{} done", titles.join(", ")));
            for t in first {
                deps[t].insert(join);
            }
        } else {
            for t in first {
                deps[t].extend(before.iter().copied());
            }
        }
    }
    joins
}
