//! The concurrency-aware file-overlap matrix (seed Step 4): tasks i and j conflict when their
//! create+modify sets intersect and neither reaches the other through `blockedBy` chains.
//!
//! Never compares all pairs: tasks are indexed by file, so only tasks that share a file are
//! candidates. A candidate pair (u, v) with u before v in topological order is ordered only if
//! u is an ancestor of v; when u is not shallower than v, or does not head a longer chain of
//! dependents, that is impossible and the pair conflicts at once. The rest are answered with reachability bitsets computed in column
//! chunks (64 × W candidate ancestors per pass, one pass over the topological range the chunk
//! can reach), so memory stays bounded at O(n·W) words whatever the plan's size.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use crate::graph::Dag;
use crate::plan::model::Plan;
use crate::plan::validate::normalize;

/// Symmetric conflict lists, one sorted row per task, stored as one array with offsets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OverlapMatrix {
    /// Row `i` is `data[offsets[i]..offsets[i + 1]]`.
    offsets: Vec<usize>,
    data: Vec<u32>,
}

/// Per-task facts the pair test reads together (one cache line instead of three lookups).
#[derive(Debug, Clone, Copy)]
struct Node {
    pos: u32,
    depth: u32,
    height: u32,
}

impl OverlapMatrix {
    /// An empty matrix for `n` tasks.
    pub fn empty(n: usize) -> Self {
        OverlapMatrix {
            offsets: vec![0; n + 1],
            data: Vec::new(),
        }
    }

    /// A matrix from arbitrary rows (sorted and deduplicated here).
    fn from_rows(mut rows: Vec<Vec<u32>>) -> Self {
        let mut offsets = Vec::with_capacity(rows.len() + 1);
        let mut data = Vec::new();
        offsets.push(0);
        for r in &mut rows {
            r.sort_unstable();
            r.dedup();
            data.extend_from_slice(r);
            offsets.push(data.len());
        }
        OverlapMatrix { offsets, data }
    }

    /// Number of tasks.
    fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Computes the matrix from the tasks' declared files.
    pub fn compute(plan: &Plan, dag: &Dag) -> Self {
        // Words per bitset row: wide enough to amortise passes, narrow enough to bound memory
        // (rows × words × 8 bytes stays under ~256 MiB).
        let words = (32_000_000 / plan.tasks.len().max(1)).clamp(1, 64);
        Self::compute_with(plan, dag, words)
    }

    fn compute_with(plan: &Plan, dag: &Dag, words: usize) -> Self {
        let n = plan.tasks.len();
        let span = tracing::debug_span!("candidates").entered();
        let (task_files, file_tasks) = index_files(plan);
        let nodes: Vec<Node> = (0..n)
            .map(|i| Node {
                pos: dag.topo_pos(i) as u32,
                depth: dag.depth(i),
                height: dag.height(i),
            })
            .collect();
        // Candidates per task a: the later-indexed tasks b sharing a file, each once, with a
        // flag saying whether the pair conflicts (undecided pairs wait in `partners`).
        let mut cand_off: Vec<usize> = Vec::with_capacity(n + 1);
        let mut cand: Vec<u32> = Vec::new();
        let mut conflict: Vec<bool> = Vec::new();
        let mut partners: Vec<Vec<(u32, u32)>> = vec![Vec::new(); n];
        let mut stamp: Vec<u32> = vec![u32::MAX; n];
        cand_off.push(0);
        for a in 0..n {
            let first = cand.len();
            let files = task_files.row(a);
            for &f in files {
                let list = file_tasks.row(f as usize);
                let from = list.partition_point(|&t| t as usize <= a);
                for &b in &list[from..] {
                    if stamp[b as usize] != a as u32 {
                        stamp[b as usize] = a as u32;
                        cand.push(b);
                    }
                }
            }
            if files.len() > 1 {
                cand[first..].sort_unstable();
            }
            for (k, &b) in cand.iter().enumerate().skip(first) {
                let b = b as usize;
                let (u, v) = if nodes[a].pos < nodes[b].pos {
                    (a, b)
                } else {
                    (b, a)
                };
                match quick_order(dag, &nodes, u, v) {
                    Some(ordered) => conflict.push(!ordered),
                    None => {
                        conflict.push(false);
                        partners[u].push((v as u32, k as u32));
                    }
                }
            }
            cand_off.push(cand.len());
        }
        tracing::debug!(
            candidates = cand.len(),
            undecided = partners.iter().map(Vec::len).sum::<usize>(),
            "candidate pairs"
        );
        drop(span);
        let span = tracing::debug_span!("reachability").entered();
        resolve_by_reachability(dag, &partners, &mut conflict, words);
        drop(span);
        let _span = tracing::debug_span!("rows").entered();
        // Rows: for a ascending, a's conflicts b > a go to the end of row a, and a goes to the
        // end of row b. Row x thus receives its smaller partners (in ascending a) before its
        // larger ones (ascending b): every row comes out sorted, with no sort.
        let mut degree = vec![0usize; n + 1];
        for a in 0..n {
            for k in cand_off[a]..cand_off[a + 1] {
                if conflict[k] {
                    degree[a] += 1;
                    degree[cand[k] as usize] += 1;
                }
            }
        }
        let mut offsets = Vec::with_capacity(n + 1);
        let mut total = 0;
        for d in &degree[..n] {
            offsets.push(total);
            total += d;
        }
        offsets.push(total);
        let mut cursor = offsets.clone();
        let mut data = vec![0u32; total];
        for a in 0..n {
            for k in cand_off[a]..cand_off[a + 1] {
                if conflict[k] {
                    let b = cand[k] as usize;
                    data[cursor[a]] = b as u32;
                    cursor[a] += 1;
                    data[cursor[b]] = a as u32;
                    cursor[b] += 1;
                }
            }
        }
        OverlapMatrix { offsets, data }
    }

    /// The matrix a v3 plan declares in its tasks' `fileOverlaps`, made symmetric.
    pub fn declared(plan: &Plan) -> Self {
        let n = plan.tasks.len();
        let mut rows: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (i, t) in plan.tasks.iter().enumerate() {
            for &j in t.file_overlaps.iter().flatten() {
                if j < n && j != i {
                    rows[i].push(j as u32);
                    rows[j].push(i as u32);
                }
            }
        }
        Self::from_rows(rows)
    }

    /// Both matrices' conflicts.
    pub fn union(&self, other: &OverlapMatrix) -> Self {
        let rows = (0..self.len())
            .map(|i| {
                self.conflicts(i)
                    .iter()
                    .chain(other.conflicts(i))
                    .copied()
                    .collect()
            })
            .collect();
        Self::from_rows(rows)
    }

    /// Pairs `(i, j)`, `i < j`, that conflict here but not in `other`.
    pub fn missing_from(&self, other: &OverlapMatrix) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for i in 0..self.len() {
            for &j in self.conflicts(i) {
                if (j as usize) > i && other.conflicts(i).binary_search(&j).is_err() {
                    out.push((i, j as usize));
                }
            }
        }
        out
    }

    /// Tasks that conflict with `task` (sorted).
    pub fn conflicts(&self, task: usize) -> &[u32] {
        &self.data[self.offsets[task]..self.offsets[task + 1]]
    }

    /// Whether the two tasks may not run at the same time.
    pub fn conflict(&self, a: usize, b: usize) -> bool {
        self.conflicts(a).binary_search(&(b as u32)).is_ok()
    }

    /// Number of tasks with at least one conflict.
    pub fn conflicting_tasks(&self) -> usize {
        (0..self.len())
            .filter(|&i| !self.conflicts(i).is_empty())
            .count()
    }

    /// The seed's `fileOverlapMatrix` as a JSON value (see the [`Serialize`] impl, which
    /// streams the same thing without building it).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a matrix always serialises")
    }
}

/// The seed's `fileOverlapMatrix`: keys are plan indices (JSON strings) in ascending order,
/// only tasks with at least one conflict, values ascending.
impl Serialize for OverlapMatrix {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(
            (0..self.len())
                .map(|i| (i, self.conflicts(i)))
                .filter(|(_, r)| !r.is_empty()),
        )
    }
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
    let mut ids: HashMap<Cow<'_, str>, u32> = HashMap::new();
    let mut task_files = Rows {
        offsets: vec![0],
        data: Vec::new(),
    };
    let mut counts: Vec<usize> = Vec::new();
    for task in &plan.tasks {
        let first = task_files.data.len();
        for f in task.files() {
            let key = if f.starts_with("./") {
                Cow::Owned(normalize(f))
            } else {
                Cow::Borrowed(f.as_str())
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

/// For every pending pair `(v, k)` in `partners[u]`, decides whether `u` is an ancestor of
/// `v`, and marks `conflict[k]` when it is not.
fn resolve_by_reachability(
    dag: &Dag,
    partners: &[Vec<(u32, u32)>],
    conflict: &mut [bool],
    words: usize,
) {
    let n = dag.len();
    let mut columns: Vec<u32> = (0..n as u32)
        .filter(|&u| !partners[u as usize].is_empty())
        .collect();
    if columns.is_empty() {
        return;
    }
    columns.sort_unstable_by_key(|&u| dag.topo_pos(u as usize));
    let per_chunk = words * 64;
    let topo = dag.topo();
    let mut col_of = vec![u32::MAX; n];
    let mut bits: Vec<u64> = Vec::new();
    for chunk in columns.chunks(per_chunk) {
        for (c, &u) in chunk.iter().enumerate() {
            col_of[u as usize] = c as u32;
        }
        let start = dag.topo_pos(chunk[0] as usize);
        let end = chunk
            .iter()
            .flat_map(|&u| partners[u as usize].iter())
            .map(|&(v, _)| dag.topo_pos(v as usize))
            .max()
            .unwrap_or(start);
        bits.clear();
        bits.resize((end - start + 1) * words, 0);
        // Row x holds the chunk's columns that are x itself or an ancestor of x.
        for (offset, &x) in topo[start..=end].iter().enumerate() {
            let x = x as usize;
            let row = offset * words;
            for &d in dag.deps(x) {
                let dp = dag.topo_pos(d as usize);
                if dp < start {
                    continue;
                }
                let drow = (dp - start) * words;
                let (lo, hi) = bits.split_at_mut(row);
                for (dst, src) in hi[..words].iter_mut().zip(&lo[drow..drow + words]) {
                    *dst |= *src;
                }
            }
            let c = col_of[x];
            if c != u32::MAX {
                bits[row + (c as usize) / 64] |= 1u64 << (c % 64);
            }
        }
        for &u in chunk {
            let c = col_of[u as usize] as usize;
            for &(v, k) in &partners[u as usize] {
                let row = (dag.topo_pos(v as usize) - start) * words;
                if bits[row + c / 64] & (1u64 << (c % 64)) == 0 {
                    conflict[k as usize] = true;
                }
            }
        }
        for &u in chunk {
            col_of[u as usize] = u32::MAX;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::model::{Files, Metadata, Task};

    fn plan(tasks: &[(&[usize], &[&str], &[&str])]) -> Plan {
        Plan {
            schema_version: 2,
            goal: String::new(),
            context: None,
            progress: Default::default(),
            tasks: tasks
                .iter()
                .map(|(deps, create, modify)| Task {
                    blocked_by: deps.to_vec(),
                    metadata: Some(Metadata {
                        files: Files {
                            create: create.iter().map(|s| s.to_string()).collect(),
                            modify: modify.iter().map(|s| s.to_string()).collect(),
                            ..Default::default()
                        },
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .collect(),
            extra: Default::default(),
        }
    }

    /// The definition, pair by pair, for checking the fast path.
    fn brute(p: &Plan) -> OverlapMatrix {
        let n = p.tasks.len();
        let mut anc = vec![vec![false; n]; n];
        let dag = Dag::build(p).unwrap();
        for &t in dag.topo() {
            let t = t as usize;
            for &d in dag.deps(t) {
                let d = d as usize;
                let from_d = anc[d].clone();
                anc[t][d] = true;
                for (k, reach) in from_d.into_iter().enumerate() {
                    anc[t][k] |= reach;
                }
            }
        }
        let mut rows = vec![Vec::new(); n];
        for (i, row) in rows.iter_mut().enumerate() {
            let fi: Vec<String> = p.tasks[i].files().map(|f| normalize(f)).collect();
            for (j, other) in p.tasks.iter().enumerate() {
                let shared = other.files().any(|f| fi.contains(&normalize(f)));
                if i != j && shared && !anc[i][j] && !anc[j][i] {
                    row.push(j as u32);
                }
            }
        }
        OverlapMatrix::from_rows(rows)
    }

    #[test]
    fn auth_plan_matrix() {
        let text = include_str!("../examples/auth-v2.json");
        let p = crate::plan::parse(text, std::path::Path::new("x")).unwrap();
        let dag = Dag::build(&p).unwrap();
        let m = OverlapMatrix::compute(&p, &dag);
        // package.json: tasks 1, 2 (blocked by 1) and 3; 2 and 3 are concurrent, 1 and 3 too.
        assert_eq!(m.to_json().to_string(), r#"{"1":[3],"2":[3],"3":[1,2]}"#);
    }

    #[test]
    fn table() {
        type Spec<'a> = &'a [(&'a [usize], &'a [&'a str], &'a [&'a str])];
        let cases: &[(Spec, &str)] = &[
            (
                &[(&[], &["a"], &[]), (&[], &[], &["a"])],
                r#"{"0":[1],"1":[0]}"#,
            ),
            (&[(&[], &["a"], &[]), (&[0], &[], &["a"])], r#"{}"#),
            (
                &[(&[], &["a"], &[]), (&[0], &[], &[]), (&[1], &[], &["a"])],
                r#"{}"#,
            ),
            (
                &[(&[], &["./a"], &[]), (&[], &[], &["a"])],
                r#"{"0":[1],"1":[0]}"#,
            ),
            (&[(&[], &["a"], &["a"]), (&[], &["b"], &[])], r#"{}"#),
            (
                &[
                    (&[], &["x"], &[]),
                    (&[0], &[], &["x"]),
                    (&[], &[], &["x"]),
                    (&[2], &["y"], &[]),
                ],
                r#"{"0":[2],"1":[2],"2":[0,1]}"#,
            ),
        ];
        for (tasks, want) in cases {
            let p = plan(tasks);
            let dag = Dag::build(&p).unwrap();
            let m = OverlapMatrix::compute(&p, &dag);
            assert_eq!(m.to_json().to_string(), *want, "{tasks:?}");
            assert_eq!(m, brute(&p));
        }
    }

    #[test]
    fn matches_definition_on_random_plans() {
        for seed in 0..40u64 {
            let mut s = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let mut next = |m: u64| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (s >> 33) % m
            };
            let n = 2 + next(if seed % 4 == 0 { 300 } else { 60 }) as usize;
            let names = ["a", "b", "c", "d", "e", "f"];
            let mut deps_store: Vec<Vec<usize>> = Vec::new();
            let mut files_store: Vec<Vec<&str>> = Vec::new();
            for i in 0..n {
                deps_store.push((0..i).filter(|_| next(100) < 12).collect());
                files_store.push((0..1 + next(2)).map(|_| names[next(6) as usize]).collect());
            }
            let tasks: Vec<(&[usize], &[&str], &[&str])> = (0..n)
                .map(|i| (deps_store[i].as_slice(), files_store[i].as_slice(), &[][..]))
                .collect();
            let p = plan(&tasks);
            let dag = Dag::build(&p).unwrap();
            let want = brute(&p);
            assert_eq!(OverlapMatrix::compute(&p, &dag), want, "seed {seed}");
            // One-word rows: many chunks of 64 candidate columns each.
            assert_eq!(
                OverlapMatrix::compute_with(&p, &dag, 1),
                want,
                "seed {seed}, narrow"
            );
        }
    }

    #[test]
    fn declared_union_and_missing() {
        let mut p = plan(&[(&[], &["a"], &[]), (&[], &["a"], &[]), (&[], &["b"], &[])]);
        p.tasks[0].file_overlaps = Some(vec![2]);
        let dag = Dag::build(&p).unwrap();
        let computed = OverlapMatrix::compute(&p, &dag);
        let declared = OverlapMatrix::declared(&p);
        assert_eq!(declared.to_json().to_string(), r#"{"0":[2],"2":[0]}"#);
        assert_eq!(computed.missing_from(&declared), [(0, 1)]);
        assert_eq!(
            computed.union(&declared).to_json().to_string(),
            r#"{"0":[1,2],"1":[0],"2":[0]}"#
        );
    }
}
