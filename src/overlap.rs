//! The concurrency-aware file-overlap matrix (seed Step 4): tasks i and j conflict when their
//! create+modify sets intersect and neither reaches the other through `blockedBy` chains.
//!
//! Never compares all pairs: tasks are indexed by file, so only tasks that share a file are
//! candidates. A candidate pair (u, v) with u before v in topological order is ordered only if
//! u is an ancestor of v; when u is not shallower than v that is impossible and the pair
//! conflicts at once. The rest are answered with reachability bitsets computed in column
//! chunks (64 × W candidate ancestors per pass, one pass over the topological range the chunk
//! can reach), so memory stays bounded at O(n·W) words whatever the plan's size.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::graph::Dag;
use crate::plan::model::Plan;
use crate::plan::validate::normalize;

/// Symmetric conflict lists, one sorted row per task.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OverlapMatrix {
    rows: Vec<Vec<u32>>,
}

impl OverlapMatrix {
    /// An empty matrix for `n` tasks.
    pub fn empty(n: usize) -> Self {
        OverlapMatrix {
            rows: vec![Vec::new(); n],
        }
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
        let mut by_file: HashMap<Cow<'_, str>, Vec<u32>> = HashMap::new();
        let mut files: Vec<Cow<'_, str>> = Vec::new();
        for (i, task) in plan.tasks.iter().enumerate() {
            files.clear();
            files.extend(task.files().map(|f| {
                if f.starts_with("./") {
                    Cow::Owned(normalize(f))
                } else {
                    Cow::Borrowed(f.as_str())
                }
            }));
            files.sort_unstable();
            files.dedup();
            for f in files.drain(..) {
                by_file.entry(f).or_default().push(i as u32);
            }
        }
        let mut rows: Vec<Vec<u32>> = vec![Vec::new(); n];
        // partners[u]: later tasks v sharing a file whose order depends on reachability.
        let mut partners: Vec<Vec<u32>> = vec![Vec::new(); n];
        for tasks in by_file.values().filter(|t| t.len() > 1) {
            for (k, &a) in tasks.iter().enumerate() {
                for &b in &tasks[k + 1..] {
                    let (u, v) = if dag.topo_pos(a as usize) < dag.topo_pos(b as usize) {
                        (a, b)
                    } else {
                        (b, a)
                    };
                    if dag.depth(u as usize) >= dag.depth(v as usize) {
                        rows[u as usize].push(v);
                        rows[v as usize].push(u);
                    } else {
                        partners[u as usize].push(v);
                    }
                }
            }
        }
        resolve_by_reachability(dag, &mut partners, &mut rows, words);
        for r in &mut rows {
            r.sort_unstable();
            r.dedup();
        }
        OverlapMatrix { rows }
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
        for r in &mut rows {
            r.sort_unstable();
            r.dedup();
        }
        OverlapMatrix { rows }
    }

    /// Both matrices' conflicts.
    pub fn union(&self, other: &OverlapMatrix) -> Self {
        let rows = self
            .rows
            .iter()
            .zip(&other.rows)
            .map(|(a, b)| {
                let mut r: Vec<u32> = a.iter().chain(b).copied().collect();
                r.sort_unstable();
                r.dedup();
                r
            })
            .collect();
        OverlapMatrix { rows }
    }

    /// Pairs `(i, j)`, `i < j`, that conflict here but not in `other`.
    pub fn missing_from(&self, other: &OverlapMatrix) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (i, row) in self.rows.iter().enumerate() {
            for &j in row {
                if (j as usize) > i && other.rows[i].binary_search(&j).is_err() {
                    out.push((i, j as usize));
                }
            }
        }
        out
    }

    /// Tasks that conflict with `task` (sorted).
    pub fn conflicts(&self, task: usize) -> &[u32] {
        &self.rows[task]
    }

    /// Whether the two tasks may not run at the same time.
    pub fn conflict(&self, a: usize, b: usize) -> bool {
        self.rows[a].binary_search(&(b as u32)).is_ok()
    }

    /// Number of tasks with at least one conflict.
    pub fn conflicting_tasks(&self) -> usize {
        self.rows.iter().filter(|r| !r.is_empty()).count()
    }

    /// The seed's `fileOverlapMatrix`: keys are plan indices as strings in ascending order,
    /// only tasks with at least one conflict, values ascending.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        for (i, row) in self.rows.iter().enumerate() {
            if !row.is_empty() {
                m.insert(i.to_string(), Value::from(row.clone()));
            }
        }
        Value::Object(m)
    }
}

/// For every `v` in `partners[u]`, decides whether `u` is an ancestor of `v`; pairs that are
/// not ordered are recorded as conflicts in `rows`.
fn resolve_by_reachability(
    dag: &Dag,
    partners: &mut [Vec<u32>],
    rows: &mut [Vec<u32>],
    words: usize,
) {
    let n = dag.len();
    let mut columns: Vec<u32> = Vec::new();
    for (u, p) in partners.iter_mut().enumerate() {
        if !p.is_empty() {
            p.sort_unstable();
            p.dedup();
            columns.push(u as u32);
        }
    }
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
            .map(|&v| dag.topo_pos(v as usize))
            .max()
            .unwrap_or(start);
        let len = end - start + 1;
        bits.clear();
        bits.resize(len * words, 0);
        for p in start..=end {
            let x = topo[p] as usize;
            let row = (p - start) * words;
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
            for &v in &partners[u as usize] {
                let row = (dag.topo_pos(v as usize) - start) * words;
                if bits[row + c / 64] & (1u64 << (c % 64)) == 0 {
                    rows[u as usize].push(v);
                    rows[v as usize].push(u);
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
                anc[t][d] = true;
                for k in 0..n {
                    if anc[d][k] {
                        anc[t][k] = true;
                    }
                }
            }
        }
        let mut rows = vec![Vec::new(); n];
        for i in 0..n {
            for j in 0..n {
                let fi: Vec<String> = p.tasks[i].files().map(|f| normalize(f)).collect();
                let shared = p.tasks[j].files().any(|f| fi.contains(&normalize(f)));
                if i != j && shared && !anc[i][j] && !anc[j][i] {
                    rows[i].push(j as u32);
                }
            }
        }
        OverlapMatrix { rows }
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
        let cases: &[(&[(&[usize], &[&str], &[&str])], &str)] = &[
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
