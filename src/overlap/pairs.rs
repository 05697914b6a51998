//! Candidate pairs for the overlap matrix: tasks indexed by file (so only tasks sharing a
//! file are ever compared), each pair `(a, b)`, `a < b`, produced once, and decided at once
//! when cheap facts about the DAG settle it. Large plans enumerate in parallel, one
//! contiguous range of tasks per core, ranges cut to equal work.

use std::borrow::Cow;
use std::ops::Range;

use rustc_hash::FxHashMap;

use crate::graph::Dag;
use crate::plan::model::Plan;

/// Enumerates every candidate pair of the plan, in ascending `a`, as consecutive parts.
pub(super) fn enumerate(plan: &Plan, dag: &Dag) -> Vec<Candidates> {
    let n = plan.tasks.len();
    let (task_files, file_tasks) = {
        let _span = tracing::debug_span!("index").entered();
        index_files(plan)
    };
    let _span = tracing::debug_span!("enumerate").entered();
    let nodes = Node::all(dag);
    let ctx = PairContext {
        dag,
        nodes: &nodes,
        task_files: &task_files,
        file_tasks: &file_tasks,
    };
    let ranges = split_work(&file_tasks, n);
    if ranges.len() == 1 {
        return vec![ctx.candidates(0..n)];
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = ranges
            .into_iter()
            .map(|r| s.spawn(move || ctx.candidates(r)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("candidate enumeration does not panic"))
            .collect()
    })
}

/// Per-task facts the pair test reads together (one cache line instead of three lookups).
#[derive(Debug, Clone, Copy)]
struct Node {
    pos: u32,
    depth: u32,
    height: u32,
}

impl Node {
    /// Every task's facts, by plan index.
    fn all(dag: &Dag) -> Vec<Node> {
        (0..dag.len())
            .map(|i| Node {
                pos: dag.topo_pos(i) as u32,
                depth: dag.depth(i),
                height: dag.height(i),
            })
            .collect()
    }
}

/// What candidate enumeration reads.
#[derive(Clone, Copy)]
struct PairContext<'a> {
    dag: &'a Dag,
    nodes: &'a [Node],
    task_files: &'a Rows,
    file_tasks: &'a Rows,
}

/// Candidate pairs `(a, b)`, `a < b`, for a range of tasks `a`, in ascending order.
pub(super) struct Candidates {
    /// The first task of the range.
    pub(super) start: usize,
    /// `cand[offsets[i]..offsets[i + 1]]` are the partners of the range's i-th task.
    pub(super) offsets: Vec<usize>,
    pub(super) cand: Vec<u32>,
    /// Decided conflicts (false also for undecided pairs).
    pub(super) conflict: Vec<bool>,
    /// Undecided pairs: (u, v, index into `cand`), u before v in topological order.
    pub(super) pending: Vec<(u32, u32, u32)>,
}

impl PairContext<'_> {
    fn candidates(&self, range: Range<usize>) -> Candidates {
        let mut out = Candidates {
            start: range.start,
            offsets: Vec::with_capacity(range.len() + 1),
            cand: Vec::new(),
            conflict: Vec::new(),
            pending: Vec::new(),
        };
        out.offsets.push(0);
        let mut stamp: Vec<u32> = vec![u32::MAX; self.nodes.len()];
        for a in range {
            let first = out.cand.len();
            let files = self.task_files.row(a);
            for &f in files {
                let list = self.file_tasks.row(f as usize);
                let from = list.partition_point(|&t| t as usize <= a);
                for &b in &list[from..] {
                    if stamp[b as usize] != a as u32 {
                        stamp[b as usize] = a as u32;
                        out.cand.push(b);
                    }
                }
            }
            if files.len() > 1 {
                out.cand[first..].sort_unstable();
            }
            for (k, &b) in out.cand.iter().enumerate().skip(first) {
                let b = b as usize;
                let (u, v) = if self.nodes[a].pos < self.nodes[b].pos {
                    (a, b)
                } else {
                    (b, a)
                };
                match quick_order(self.dag, self.nodes, u, v) {
                    Some(ordered) => out.conflict.push(!ordered),
                    None => {
                        out.conflict.push(false);
                        out.pending.push((u as u32, v as u32, k as u32));
                    }
                }
            }
            out.offsets.push(out.cand.len());
        }
        out
    }
}

/// Below this many candidate pairs one thread is faster than starting more.
const PARALLEL_PAIRS: usize = 2_000_000;

/// Splits `0..n` into contiguous ranges with about the same number of candidate pairs each
/// (task a's pairs are the tasks after it in each of its files' lists), one per core.
fn split_work(file_tasks: &Rows, n: usize) -> Vec<Range<usize>> {
    let mut work = vec![0usize; n];
    let mut total = 0usize;
    for f in 0..file_tasks.offsets.len() - 1 {
        let list = file_tasks.row(f);
        for (r, &t) in list.iter().enumerate() {
            work[t as usize] += list.len() - 1 - r;
            total += list.len() - 1 - r;
        }
    }
    let threads = std::thread::available_parallelism().map_or(1, |p| p.get().min(8));
    if threads < 2 || total < PARALLEL_PAIRS {
        return std::iter::once(0..n).collect();
    }
    let per = total.div_ceil(threads);
    let mut ranges = Vec::with_capacity(threads);
    let (mut start, mut acc) = (0, 0);
    for (a, w) in work.iter().enumerate() {
        acc += w;
        if acc >= per && ranges.len() + 1 < threads {
            ranges.push(start..a + 1);
            start = a + 1;
            acc = 0;
        }
    }
    ranges.push(start..n);
    ranges
}

/// Rows of small integers in one array (compressed sparse rows).
struct Rows {
    offsets: Vec<usize>,
    data: Vec<u32>,
}

impl Rows {
    fn row(&self, i: usize) -> &[u32] {
        &self.data[self.offsets[i]..self.offsets[i + 1]]
    }
}

/// (task → its distinct file ids, file id → tasks touching it in ascending order).
fn index_files(plan: &Plan) -> (Rows, Rows) {
    let mut ids: FxHashMap<Cow<'_, str>, u32> = FxHashMap::default();
    let mut task_files = Rows {
        offsets: vec![0],
        data: Vec::new(),
    };
    let mut counts: Vec<usize> = Vec::new();
    for task in &plan.tasks {
        let first = task_files.data.len();
        for f in task.files() {
            let key = if crate::paths::is_clean(f) {
                Cow::Borrowed(f.as_str())
            } else {
                Cow::Owned(crate::paths::key(f))
            };
            let next = ids.len() as u32;
            let id = *ids.entry(key).or_insert(next);
            if id as usize == counts.len() {
                counts.push(0);
            }
            if !task_files.data[first..].contains(&id) {
                task_files.data.push(id);
                counts[id as usize] += 1;
            }
        }
        task_files.offsets.push(task_files.data.len());
    }
    let mut offsets = Vec::with_capacity(counts.len() + 1);
    let mut total = 0;
    for c in &counts {
        offsets.push(total);
        total += c;
    }
    offsets.push(total);
    let mut cursor = offsets.clone();
    let mut data = vec![0u32; total];
    for t in 0..plan.tasks.len() {
        for &f in task_files.row(t) {
            data[cursor[f as usize]] = t as u32;
            cursor[f as usize] += 1;
        }
    }
    (task_files, Rows { offsets, data })
}

/// Whether `u` (earlier in topological order) is an ancestor of `v`, when cheap facts
/// decide it: an ancestor is strictly shallower and heads a strictly longer chain, and a
/// direct blocker is an ancestor. `None` when only reachability can tell.
fn quick_order(dag: &Dag, nodes: &[Node], u: usize, v: usize) -> Option<bool> {
    let (nu, nv) = (nodes[u], nodes[v]);
    if nu.depth >= nv.depth || nu.height <= nv.height {
        Some(false)
    } else if dag.deps(v).binary_search(&(u as u32)).is_ok() {
        Some(true)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cutting the task range anywhere gives the same pairs as one pass.
    #[test]
    fn ranges_concatenate_to_the_whole() {
        let text = include_str!("../../examples/random-40-v2.json");
        let plan = crate::plan::parse(text, std::path::Path::new("x")).unwrap();
        let dag = Dag::build(&plan).unwrap();
        let (task_files, file_tasks) = index_files(&plan);
        let nodes = Node::all(&dag);
        let ctx = PairContext {
            dag: &dag,
            nodes: &nodes,
            task_files: &task_files,
            file_tasks: &file_tasks,
        };
        let flat = |parts: &[Candidates]| -> Vec<(usize, u32, bool)> {
            let mut out = Vec::new();
            for p in parts {
                for i in 0..p.offsets.len() - 1 {
                    for k in p.offsets[i]..p.offsets[i + 1] {
                        out.push((p.start + i, p.cand[k], p.conflict[k]));
                    }
                }
            }
            out
        };
        let whole = flat(&[ctx.candidates(0..40)]);
        assert!(!whole.is_empty());
        for cut in [1, 7, 20, 39] {
            assert_eq!(
                flat(&[ctx.candidates(0..cut), ctx.candidates(cut..40)]),
                whole,
                "cut at {cut}"
            );
        }
    }
}
