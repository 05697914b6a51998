//! The concurrency-aware file-overlap matrix (seed Step 4): tasks i and j conflict when their
//! create+modify sets intersect and neither reaches the other through `blockedBy` chains.
//!
//! Never compares all pairs: tasks are indexed by file, so only tasks that share a file are
//! candidates. A candidate pair (u, v) with u before v in topological order is ordered only if
//! u is an ancestor of v; when u is not shallower than v, or does not head a longer chain of
//! dependents, that is impossible and the pair conflicts at once. The rest are answered with reachability bitsets computed in column
//! chunks ([`reach`]), so memory stays bounded whatever the plan's size. Rows come out sorted
//! without sorting, and the JSON form is written straight from them.

mod pairs;
mod reach;

use std::io::{self, Write};

use serde::Serialize;
use serde_json::Value;

use crate::graph::Dag;
use crate::plan::model::Plan;

/// Symmetric conflict lists, one sorted row per task, stored as one array with offsets.
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

    /// Computes the matrix from the tasks' declared files.
    pub fn compute(plan: &Plan, dag: &Dag) -> Self {
        // Words per bitset row: wide enough to amortise passes, narrow enough to bound memory
        // (rows × words × 8 bytes stays under ~256 MiB per thread).
        let words = (32_000_000 / plan.tasks.len().max(1)).clamp(1, 64);
        Self::compute_with(plan, dag, words)
    }

    fn compute_with(plan: &Plan, dag: &Dag, words: usize) -> Self {
        let n = plan.tasks.len();
        let span = tracing::debug_span!("candidates").entered();
        let parts = pairs::enumerate(plan, dag);
        let mut bases = Vec::with_capacity(parts.len());
        let mut conflict: Vec<bool> = Vec::new();
        for part in &parts {
            bases.push(conflict.len());
            conflict.extend_from_slice(&part.conflict);
        }
        let partners = reach::Partners::group(n, &parts, &bases);
        tracing::debug!(
            candidates = conflict.len(),
            undecided = partners.pairs.len(),
            "candidate pairs"
        );
        drop(span);
        let span = tracing::debug_span!("reachability").entered();
        reach::resolve(dag, &partners, &mut conflict, words);
        drop(partners);
        drop(span);
        let _span = tracing::debug_span!("rows").entered();
        // For a ascending, a's conflicts b > a go to the end of row a, and a goes to the end
        // of row b. Row x thus receives its smaller partners (in ascending a) before its
        // larger ones (ascending b): every row comes out sorted, with no sort.
        let each_conflict = |f: &mut dyn FnMut(usize, usize)| {
            for (part, &base) in parts.iter().zip(&bases) {
                for i in 0..part.offsets.len() - 1 {
                    let a = part.start + i;
                    for k in part.offsets[i]..part.offsets[i + 1] {
                        if conflict[base + k] {
                            f(a, part.cand[k] as usize);
                        }
                    }
                }
            }
        };
        let mut degree = vec![0usize; n];
        each_conflict(&mut |a, b| {
            degree[a] += 1;
            degree[b] += 1;
        });
        let mut offsets = Vec::with_capacity(n + 1);
        let mut total = 0;
        for d in &degree {
            offsets.push(total);
            total += d;
        }
        offsets.push(total);
        let mut data = vec![0u32; total];
        // Fill in two halves of the rows at once when it is worth it: each thread reads every
        // conflict and writes only the rows it owns, so the writes never overlap.
        let mid = if total >= 1_000_000 { n / 2 } else { n };
        let (low, high) = data.split_at_mut(offsets[mid]);
        let fill = |rows: std::ops::Range<usize>, out: &mut [u32]| {
            let base = offsets[rows.start];
            let mut cursor: Vec<usize> = offsets[rows.clone()].iter().map(|o| o - base).collect();
            let mut put = |row: usize, value: usize| {
                if rows.contains(&row) {
                    let c = &mut cursor[row - rows.start];
                    out[*c] = value as u32;
                    *c += 1;
                }
            };
            each_conflict(&mut |a, b| {
                put(a, b);
                put(b, a);
            });
        };
        if mid == n {
            fill(0..n, low);
        } else {
            std::thread::scope(|s| {
                s.spawn(|| fill(mid..n, high));
                fill(0..mid, low);
            });
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

    /// The seed's `fileOverlapMatrix` as a JSON value.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a matrix always serialises")
    }

    /// Writes the same JSON as the [`Serialize`] impl, compact, formatting the numbers
    /// directly (in two halves on two threads for large matrices): a 100k-task plan's
    /// matrix can hold tens of millions of entries.
    pub fn write_json(&self, out: &mut impl Write) -> io::Result<()> {
        let n = self.len();
        let render = |rows: std::ops::Range<usize>, first: bool| {
            let mut buf: Vec<u8> =
                Vec::with_capacity((self.offsets[rows.end] - self.offsets[rows.start]) * 7 + 64);
            let mut fmt = itoa::Buffer::new();
            let mut first = first;
            for i in rows {
                let row = self.conflicts(i);
                if row.is_empty() {
                    continue;
                }
                if !first {
                    buf.push(b',');
                }
                first = false;
                buf.push(b'"');
                buf.extend_from_slice(fmt.format(i).as_bytes());
                buf.extend_from_slice(b"\":[");
                for (k, &j) in row.iter().enumerate() {
                    if k > 0 {
                        buf.push(b',');
                    }
                    buf.extend_from_slice(fmt.format(j).as_bytes());
                }
                buf.push(b']');
            }
            buf
        };
        out.write_all(b"{")?;
        if self.data.len() < 1_000_000 {
            out.write_all(&render(0..n, true))?;
        } else {
            // Split where half the entries lie; the second half starts with a comma only if
            // the first half wrote something.
            let mid = self
                .offsets
                .partition_point(|&o| o < self.data.len() / 2)
                .min(n);
            let first_has_rows = self.offsets[mid] > 0;
            let (a, b) = std::thread::scope(|s| {
                let h = s.spawn(|| render(mid..n, !first_has_rows));
                let a = render(0..mid, true);
                (a, h.join().expect("rendering does not panic"))
            });
            out.write_all(&a)?;
            out.write_all(&b)?;
        }
        out.write_all(b"}")
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::key as normalize;
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
        let text = include_str!("../../examples/auth-v2.json");
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
                files_store.push((0..1 + next(2)).map(|_| names[next(6) as usize]).collect());
            }
            let tasks: Vec<(&[usize], &[&str], &[&str])> = (0..n)
                .map(|i| (deps_store[i].as_slice(), files_store[i].as_slice(), &[][..]))
                .collect();
            let p = plan(&tasks);
            let dag = Dag::build(&p).unwrap();
            let want = brute(&p);
            let got = OverlapMatrix::compute(&p, &dag);
            assert_eq!(got, want, "seed {seed}");
            let mut fast = Vec::new();
            got.write_json(&mut fast).unwrap();
            assert_eq!(
                String::from_utf8(fast).unwrap(),
                serde_json::to_string(&got).unwrap()
            );
            // One-word rows: many chunks of 64 candidate columns each.
            assert_eq!(
                OverlapMatrix::compute_with(&p, &dag, 1),
                want,
                "seed {seed}, narrow"
            );
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
        let mut fast = Vec::new();
        m.write_json(&mut fast).unwrap();
        assert_eq!(
            String::from_utf8(fast).unwrap(),
            serde_json::to_string(&m).unwrap()
        );
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
