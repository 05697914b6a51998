//! The computed overlap matrix, row by row in ascending plan index, never held whole: a plan
//! with every task on one file has ~n² entries (20,000 tasks: 400 million), which only its
//! JSON text may be as large as.
//!
//! Rows are made in blocks of 64·W tasks. A candidate pair shares a file (from the
//! [`FileIndex`]); cheap facts about the DAG (depth, height, a direct blocker) decide most
//! pairs at once. When a block has a pair they cannot decide, two bitset passes over the DAG
//! answer all of them: which of the block's tasks are ancestors of each task (forward, in
//! topological order) and which are its descendants (backward). Memory: 2·n·W words per
//! block, whatever the plan's size.

use super::index::FileIndex;
use crate::pure::graph::Dag;

/// The computed matrix of a plan: its file index and DAG, rows made on demand.
#[derive(Debug, Clone, Copy)]
pub struct Computed<'a> {
    pub(crate) index: &'a FileIndex,
    pub(crate) dag: &'a Dag,
}

impl<'a> Computed<'a> {
    /// The matrix of the plan the index and DAG were made from.
    pub fn new(index: &'a FileIndex, dag: &'a Dag) -> Self {
        Computed { index, dag }
    }

    /// Calls `f(i, row)` for every task `i` in ascending order, `row` its conflicts (sorted,
    /// possibly empty). Stops at the first error.
    pub fn for_each_row<E>(&self, f: impl FnMut(usize, &[u32]) -> Result<(), E>) -> Result<(), E> {
        let n = self.index.tasks();
        // Words per bitset row: two n × W arrays stay under ~128 MiB.
        let words = (8_000_000 / n.max(1)).clamp(1, 64);
        self.for_each_row_with(words, f)
    }

    pub(crate) fn for_each_row_with<E>(
        &self,
        words: usize,
        mut f: impl FnMut(usize, &[u32]) -> Result<(), E>,
    ) -> Result<(), E> {
        let n = self.index.tasks();
        let block = 64 * words;
        let mut reach = Reach::default();
        let mut stamp = Stamps {
            of: vec![0; n],
            now: 0,
        };
        let mut cand: Vec<u32> = Vec::new();
        let mut row: Vec<u32> = Vec::new();
        let mut start = 0;
        while start < n {
            let end = (start + block).min(n);
            // Pass 1: does any pair of the block need reachability?
            let mut undecided = false;
            'scan: for i in start..end {
                self.candidates(i, &mut stamp, &mut cand);
                for &j in &cand {
                    if quick_order(self.dag, i, j as usize).is_none() {
                        undecided = true;
                        break 'scan;
                    }
                }
            }
            if undecided {
                reach.compute(self.dag, start..end, words);
            }
            for i in start..end {
                self.candidates(i, &mut stamp, &mut cand);
                row.clear();
                if undecided {
                    // The bitsets answer every pair exactly, with one read each.
                    let c = i - start;
                    row.extend(cand.iter().filter(|&&j| !reach.ordered(c, j as usize)));
                } else {
                    row.extend(
                        cand.iter()
                            .filter(|&&j| quick_order(self.dag, i, j as usize) == Some(false)),
                    );
                }
                f(i, &row)?;
            }
            start = end;
        }
        Ok(())
    }

    /// The tasks sharing a file with `i` (not `i`), ascending, into `out`.
    fn candidates(&self, i: usize, stamp: &mut Stamps, out: &mut Vec<u32>) {
        out.clear();
        let files = self.index.files_of(i);
        if let [f] = files {
            out.extend(self.index.tasks_of(*f).iter().filter(|&&j| j as usize != i));
            return;
        }
        stamp.now += 1;
        for &f in files {
            for &j in self.index.tasks_of(f) {
                if j as usize != i && stamp.of[j as usize] != stamp.now {
                    stamp.of[j as usize] = stamp.now;
                    out.push(j);
                }
            }
        }
        out.sort_unstable();
    }
}

/// Which tasks were seen in the current candidate list (`of[j] == now`).
struct Stamps {
    of: Vec<u64>,
    now: u64,
}

/// Whether `a` and `b` are ordered (either reaches the other), when cheap facts decide it:
/// an ancestor is strictly shallower and heads a strictly longer chain, and a direct blocker
/// is an ancestor. `None` when only reachability can tell.
fn quick_order(dag: &Dag, a: usize, b: usize) -> Option<bool> {
    let (u, v) = if dag.topo_pos(a) < dag.topo_pos(b) {
        (a, b)
    } else {
        (b, a)
    };
    if dag.depth(u) >= dag.depth(v) || dag.height(u) <= dag.height(v) {
        Some(false)
    } else if dag.deps(v).binary_search(&(u as u32)).is_ok() {
        Some(true)
    } else {
        None
    }
}

/// Reachability between a block of tasks (columns) and every task. Stored word-major
/// (`up[w * n + x]`), so a row's lookups (one column, every partner) read memory in order.
#[derive(Default)]
struct Reach {
    n: usize,
    /// Bit c of `up[w * n + x]` (c = 64·w + bit): the block's column c is `x` or its ancestor.
    up: Vec<u64>,
    /// The same for descendants.
    down: Vec<u64>,
}

impl Reach {
    fn compute(&mut self, dag: &Dag, block: std::ops::Range<usize>, words: usize) {
        let n = dag.len();
        self.n = n;
        for v in [&mut self.up, &mut self.down] {
            v.clear();
            v.resize(n * words, 0);
        }
        for x in block.clone() {
            let c = x - block.start;
            self.up[(c / 64) * n + x] |= 1u64 << (c % 64);
            self.down[(c / 64) * n + x] |= 1u64 << (c % 64);
        }
        let first = block.clone().map(|x| dag.topo_pos(x)).min().unwrap_or(0);
        let last = block.clone().map(|x| dag.topo_pos(x)).max().unwrap_or(0);
        let topo = dag.topo();
        // Only the words that hold the block's columns.
        let used = block.len().div_ceil(64);
        for w in 0..used {
            let up = &mut self.up[w * n..(w + 1) * n];
            for &x in &topo[first..] {
                let x = x as usize;
                let mut acc = up[x];
                for &d in dag.deps(x) {
                    acc |= up[d as usize];
                }
                up[x] = acc;
            }
            let down = &mut self.down[w * n..(w + 1) * n];
            for &x in topo[..=last].iter().rev() {
                let x = x as usize;
                let mut acc = down[x];
                for &d in dag.dependents(x) {
                    acc |= down[d as usize];
                }
                down[x] = acc;
            }
        }
    }

    /// Whether the block's column `c` and task `j` are ordered.
    fn ordered(&self, c: usize, j: usize) -> bool {
        let (w, b) = ((c / 64) * self.n + j, 1u64 << (c % 64));
        (self.up[w] | self.down[w]) & b != 0
    }
}
