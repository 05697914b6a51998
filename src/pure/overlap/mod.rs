//! The concurrency-aware file-overlap matrix (seed Step 4): tasks i and j conflict when their
//! create+modify sets intersect and neither reaches the other through `blockedBy` chains.
//!
//! Never compares all pairs and never holds the whole matrix unless asked: tasks are indexed
//! by file ([`FileIndex`]), so only tasks that share a file are candidates; the computed
//! matrix is made row by row ([`Computed`], [`stream`]) and its JSON written as it is made.
//! Scheduling does not need the matrix at all: exclusive per-file locks give the same batches
//! ([`Conflicts`], [`locks`]). [`OverlapMatrix`] holds a matrix whole: a v3 plan's declared
//! `fileOverlaps` (as large as the plan), and small computed ones in tests.

mod overlaps;
pub use overlaps::{Missed, Overlaps};
mod index;
pub mod locks;
pub mod stream;

use serde::Serialize;
use serde::ser::SerializeMap;
#[cfg(test)]
use serde_json::Value;

#[cfg(test)]
use crate::pure::graph::Dag;
use crate::pure::plan::model::Plan;

pub use index::FileIndex;
pub use locks::Conflicts;
pub use stream::Computed;

/// What tasks that share declared files may do (`overlap:`): `serial` (the default, the
/// seeds' rule) never runs them at the same time; `merge` runs them side by side, each from
/// its base, and integrates their results in plan order by a three-way merge, re-checked
/// (`flow::merge`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Policy {
    #[default]
    Serial,
    Merge,
}

impl Policy {
    /// `serial` or `merge`.
    pub fn parse(s: &str) -> Result<Policy, String> {
        match s.trim() {
            "serial" => Ok(Policy::Serial),
            "merge" => Ok(Policy::Merge),
            other => Err(format!(
                "unknown overlap policy {other:?} (serial or merge)"
            )),
        }
    }

    /// What scheduling keeps apart: the plan's file conflicts under `serial`, nothing under
    /// `merge` (integration resolves what overlaps).
    pub fn for_scheduling(self, conflicts: Conflicts, tasks: usize) -> Conflicts {
        match self {
            Policy::Serial => conflicts,
            Policy::Merge => Conflicts::none(tasks),
        }
    }
}

/// Symmetric conflict lists, one sorted row per task, stored as one array with offsets
/// (compressed sparse rows; the [`FileIndex`] keeps its rows of tasks and files so too).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OverlapMatrix {
    /// Row `i` is `data[offsets[i]..offsets[i + 1]]`.
    offsets: Vec<usize>,
    data: Vec<u32>,
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

    /// Computes the whole matrix from the tasks' declared files (small plans and tests: a
    /// large plan's matrix is streamed with [`Computed`]).
    #[cfg(test)]
    pub fn compute(plan: &Plan, dag: &Dag) -> Self {
        let index = FileIndex::of(plan);
        Self::collect(Computed::new(&index, dag))
    }

    /// Holds the rows of a streamed matrix.
    #[cfg(test)]
    pub fn collect(rows: Computed<'_>) -> Self {
        let mut offsets = vec![0];
        let mut data = Vec::new();
        rows.for_each_row(|_, row| {
            data.extend_from_slice(row);
            offsets.push(data.len());
            Ok::<(), std::convert::Infallible>(())
        })
        .unwrap_or_else(|e| match e {});
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

    /// Tasks that conflict with `task` (sorted).
    pub fn conflicts(&self, task: usize) -> &[u32] {
        self.row(task)
    }

    /// Row `i`.
    fn row(&self, i: usize) -> &[u32] {
        &self.data[self.offsets[i]..self.offsets[i + 1]]
    }

    /// Whether the two tasks may not run at the same time.
    pub fn conflict(&self, a: usize, b: usize) -> bool {
        self.conflicts(a).binary_search(&(b as u32)).is_ok()
    }

    /// The seed's `fileOverlapMatrix` as a JSON value.
    #[cfg(test)]
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a matrix always serialises")
    }
}

/// The seed's `fileOverlapMatrix`: keys are plan indices (JSON strings) in ascending order,
/// only tasks with at least one conflict, values ascending.
#[cfg(test)]
impl Serialize for OverlapMatrix {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Rows::Held(self).serialize(serializer)
    }
}

/// A matrix to report: held whole (declared), or made row by row (computed).
#[derive(Debug, Clone, Copy)]
pub enum Rows<'a> {
    Held(&'a OverlapMatrix),
    Streamed(Computed<'a>),
}

impl Rows<'_> {
    /// Calls `f(i, row)` for every task in ascending order (rows sorted, possibly empty).
    pub fn for_each_row<E>(
        &self,
        mut f: impl FnMut(usize, &[u32]) -> Result<(), E>,
    ) -> Result<(), E> {
        match self {
            Rows::Held(m) => (0..m.len()).try_for_each(|i| f(i, m.conflicts(i))),
            Rows::Streamed(c) => c.for_each_row(f),
        }
    }
}

impl Serialize for Rows<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        self.for_each_row(|i, row| {
            if row.is_empty() {
                Ok(())
            } else {
                map.serialize_entry(&i, row)
            }
        })?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::paths::key as normalize;
    use crate::testing::{plan_of, task};

    fn plan(tasks: &[(&[usize], &[&str], &[&str])]) -> Plan {
        plan_of(
            tasks
                .iter()
                .map(|(deps, create, modify)| task(deps, create, modify))
                .collect(),
        )
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
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/auth-v2.json"
        ));
        let p = crate::pure::plan::parse(text, std::path::Path::new("x")).unwrap();
        let dag = Dag::build(&p).unwrap();
        let m = OverlapMatrix::compute(&p, &dag);
        // package.json: tasks 1, 2 (blocked by 1) and 3; 2 and 3 are concurrent, 1 and 3 too.
        assert_eq!(m.to_json().to_string(), r#"{"1":[3],"2":[3],"3":[1,2]}"#);
    }

    #[test]
    fn table() {
        type Case<'a> = &'a [(&'a [usize], &'a [&'a str], &'a [&'a str])];
        let cases: &[(Case, &str)] = &[
            (
                &[(&[], &["a"], &[]), (&[], &[], &["a"])],
                r#"{"0":[1],"1":[0]}"#,
            ),
            (&[(&[], &["a"], &[]), (&[0], &[], &["a"])], r"{}"),
            (
                &[(&[], &["a"], &[]), (&[0], &[], &[]), (&[1], &[], &["a"])],
                r"{}",
            ),
            (
                &[(&[], &["./a"], &[]), (&[], &[], &["a"])],
                r#"{"0":[1],"1":[0]}"#,
            ),
            (&[(&[], &["a"], &["a"]), (&[], &["b"], &[])], r"{}"),
            // One path, one file: `src//a`, `src/./a`, `./src/a` and `src/a`; `docs/` and `docs`.
            (
                &[
                    (&[], &["src//a"], &[]),
                    (&[], &[], &["src/./a"]),
                    (&[], &["docs/"], &[]),
                    (&[], &[], &["docs"]),
                    (&[], &["src/a"], &[]),
                ],
                r#"{"0":[1,4],"1":[0,4],"2":[3],"3":[2],"4":[0,1]}"#,
            ),
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
                files_store.push((0..=next(2)).map(|_| names[next(6) as usize]).collect());
            }
            let tasks: Vec<(&[usize], &[&str], &[&str])> = (0..n)
                .map(|i| (deps_store[i].as_slice(), files_store[i].as_slice(), &[][..]))
                .collect();
            let p = plan(&tasks);
            let dag = Dag::build(&p).unwrap();
            let want = brute(&p);
            let got = OverlapMatrix::compute(&p, &dag);
            assert_eq!(got, want, "seed {seed}");
            // One-word bitsets: many blocks of 64 rows each.
            let index = FileIndex::of(&p);
            let mut narrow = OverlapMatrix::empty(0);
            Computed::new(&index, &dag)
                .for_each_row_with(1, |_, row| {
                    narrow.data.extend_from_slice(row);
                    narrow.offsets.push(narrow.data.len());
                    Ok::<(), ()>(())
                })
                .unwrap();
            assert_eq!(narrow, want, "seed {seed}, narrow");
        }
    }

    /// Big enough for the parallel paths: 2.2M candidate pairs, a 4.4M-entry matrix.
    #[test]
    fn parallel_paths_agree_with_the_serial_ones() {
        let n = 2100;
        let files: &[&str] = &["hot"];
        let deps_store: Vec<Vec<usize>> = (0..n)
            .map(|i| if i % 3 == 2 { vec![i - 1] } else { vec![] })
            .collect();
        let tasks: Vec<(&[usize], &[&str], &[&str])> = (0..n)
            .map(|i| (deps_store[i].as_slice(), files, &[][..]))
            .collect();
        let p = plan(&tasks);
        let dag = Dag::build(&p).unwrap();
        let m = OverlapMatrix::compute(&p, &dag);
        // Every pair conflicts except (i-1, i) for i % 3 == 2.
        for i in [0usize, 1, 2, 700, 2099] {
            let want: Vec<u32> = (0..n as u32)
                .filter(|&j| {
                    j as usize != i
                        && !(i % 3 == 2 && j as usize == i - 1)
                        && !(j % 3 == 2 && j as usize - 1 == i)
                })
                .collect();
            assert_eq!(m.conflicts(i), want, "row {i}");
        }
    }

    #[test]
    fn declared_and_the_scheduling_view() {
        let mut p = plan(&[(&[], &["a"], &[]), (&[], &["a"], &[]), (&[], &["b"], &[])]);
        p.tasks[0].file_overlaps = Some(vec![2]);
        p.schema_version = 3;
        let dag = Dag::build(&p).unwrap();
        let declared = OverlapMatrix::declared(&p);
        assert_eq!(declared.to_json().to_string(), r#"{"0":[2],"2":[0]}"#);
        // Scheduling respects both: 0-1 (computed) and 0-2 (declared), not 1-2.
        let c = Conflicts::of(&p);
        let pairs: Vec<(usize, usize)> = (0..3)
            .flat_map(|a| (a + 1..3).map(move |b| (a, b)))
            .filter(|&(a, b)| c.conflict(&dag, a, b))
            .collect();
        assert_eq!(pairs, [(0, 1), (0, 2)]);
    }
}
