//! The task DAG: `blockedBy` edges, a topological order, dependency depth (seed: depth 1 = no
//! blockers, else 1 + the deepest blocker), remaining critical-path height, and cycle paths.
//!
//! Built on petgraph for the topological sort and strongly connected components; the
//! adjacency is also kept as sorted index lists for the hot loops (overlap, scheduling).

use petgraph::algo::{kosaraju_scc, toposort};
use petgraph::graph::{DiGraph, NodeIndex};

use crate::pure::plan::model::Plan;

/// The dependency graph of a plan whose `blockedBy` indices are all in range.
#[derive(Debug, Clone)]
pub struct Dag {
    deps: Vec<Vec<u32>>,
    dependents: Vec<Vec<u32>>,
    topo: Vec<u32>,
    pos: Vec<u32>,
    depth: Vec<u32>,
    height: Vec<u32>,
    /// Depth and height with a join counted as a step, for [`Dag::reaches`]; empty when the
    /// plan has no join (then they are `depth` and `height`).
    step_depth: Vec<u32>,
    step_height: Vec<u32>,
}

/// Depth (over `topo` and `deps`) or height (over `topo` reversed and `dependents`): each
/// task's weight `work(task)` plus the largest level among its `edges`.
fn levels<'a>(
    order: impl Iterator<Item = &'a u32>,
    edges: &[Vec<u32>],
    work: &impl Fn(usize) -> u32,
) -> Vec<u32> {
    let mut level = vec![1u32; edges.len()];
    for &t in order {
        let t = t as usize;
        level[t] = work(t)
            + edges[t]
                .iter()
                .map(|&d| level[d as usize])
                .max()
                .unwrap_or(0);
    }
    level
}

impl Dag {
    /// Builds the DAG, or returns a cycle as a path `[a, b, …, a]` following `blockedBy`.
    ///
    /// Out-of-range and self entries are ignored here; [`crate::pure::validate`] reports them.
    pub fn build(plan: &Plan) -> Result<Dag, Vec<usize>> {
        let n = plan.tasks.len();
        let mut deps: Vec<Vec<u32>> = Vec::with_capacity(n);
        for (i, t) in plan.tasks.iter().enumerate() {
            let mut d: Vec<u32> = t
                .blocked_by
                .iter()
                .copied()
                .filter(|&b| b < n && b != i)
                .map(|b| b as u32)
                .collect();
            d.sort_unstable();
            d.dedup();
            deps.push(d);
        }
        let mut dependents: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut g: DiGraph<(), (), u32> =
            DiGraph::with_capacity(n, deps.iter().map(Vec::len).sum());
        for _ in 0..n {
            g.add_node(());
        }
        for (i, d) in deps.iter().enumerate() {
            for &b in d {
                dependents[b as usize].push(i as u32);
                g.add_edge(NodeIndex::new(b as usize), NodeIndex::new(i), ());
            }
        }
        let topo: Vec<u32> = match toposort(&g, None) {
            Ok(order) => order.into_iter().map(|x| x.index() as u32).collect(),
            Err(_) => return Err(find_cycle(&g, &deps)),
        };
        let mut pos = vec![0u32; n];
        for (p, &t) in topo.iter().enumerate() {
            pos[t as usize] = p as u32;
        }
        // A join is no work: it adds nothing to a depth or a chain (`pure::join`). `reaches`
        // keeps counting it as a step (its cheap facts need every edge to add one).
        let joins = plan.tasks.iter().any(|t| t.join);
        let work = |t: usize| u32::from(!plan.tasks[t].join);
        let depth = levels(topo.iter(), &deps, &work);
        let height = levels(topo.iter().rev(), &dependents, &work);
        let (step_depth, step_height) = if joins {
            (
                levels(topo.iter(), &deps, &|_| 1),
                levels(topo.iter().rev(), &dependents, &|_| 1),
            )
        } else {
            (Vec::new(), Vec::new())
        };
        Ok(Dag {
            deps,
            dependents,
            topo,
            pos,
            depth,
            height,
            step_depth,
            step_height,
        })
    }

    /// Number of tasks.
    pub fn len(&self) -> usize {
        self.deps.len()
    }

    /// True when the plan has no tasks.
    pub fn is_empty(&self) -> bool {
        self.deps.is_empty()
    }

    /// The task's blockers (sorted, deduplicated).
    pub fn deps(&self, task: usize) -> &[u32] {
        &self.deps[task]
    }

    /// Tasks that list this one in `blockedBy` (sorted).
    pub fn dependents(&self, task: usize) -> &[u32] {
        &self.dependents[task]
    }

    /// A topological order (blockers before the tasks they block).
    pub fn topo(&self) -> &[u32] {
        &self.topo
    }

    /// The task's position in [`Dag::topo`].
    pub fn topo_pos(&self, task: usize) -> usize {
        self.pos[task] as usize
    }

    /// Dependency depth: 1 for a task with no blockers, else 1 + the deepest blocker (a join
    /// adds nothing: it has its deepest blocker's depth).
    pub fn depth(&self, task: usize) -> u32 {
        self.depth[task]
    }

    /// Length of the longest chain of dependents starting at this task (1 for a sink; joins
    /// on it count nothing).
    pub fn height(&self, task: usize) -> u32 {
        self.height[task]
    }

    /// The deepest depth (`maxDepth` in the setup output).
    pub fn max_depth(&self) -> u32 {
        self.depth.iter().copied().max().unwrap_or(0)
    }

    /// Whether `u` is a (strict) ancestor of `v`: `v` reaches `u` through `blockedBy`.
    ///
    /// Cheap facts first (an ancestor is strictly shallower, heads a strictly longer chain,
    /// and comes earlier in topological order); otherwise a walk back from `v` that never
    /// leaves the tasks deeper than `u`. For the rare questions scheduling cannot settle
    /// otherwise (see [`crate::pure::engine`]), not for all pairs.
    pub fn reaches(&self, u: usize, v: usize) -> bool {
        let (depth, height) = if self.step_depth.is_empty() {
            (&self.depth, &self.height)
        } else {
            (&self.step_depth, &self.step_height)
        };
        if u == v || depth[u] >= depth[v] || height[u] <= height[v] || self.pos[u] >= self.pos[v] {
            return false;
        }
        if self.deps[v].binary_search(&(u as u32)).is_ok() {
            return true;
        }
        let (du, pu) = (depth[u], self.pos[u]);
        let mut seen = rustc_hash::FxHashSet::default();
        let mut stack = vec![v as u32];
        while let Some(x) = stack.pop() {
            for &d in &self.deps[x as usize] {
                if d as usize == u {
                    return true;
                }
                let di = d as usize;
                if depth[di] > du && self.pos[di] > pu && seen.insert(d) {
                    stack.push(d);
                }
            }
        }
        false
    }

    /// Whether either task reaches the other (they can never run at the same time anyway).
    pub fn ordered(&self, a: usize, b: usize) -> bool {
        self.reaches(a, b) || self.reaches(b, a)
    }
}

/// Makes every task of `plan` that is not completed also wait for each unfinished task it
/// reaches through completed ones: a finished task orders nothing by itself, but the path
/// through it still does (a task list's order, `sources`: a ticked subtask between two open
/// ones, a started parent, a parent whose subtasks are all done). Edges are only added, each
/// implied by a path already there, so the order's transitive closure is unchanged and the
/// edges between unfinished tasks — what the engine waits for — now have that closure over
/// them. Completed tasks' own edges are kept (a task's prompt lists its blockers' results).
///
/// A join is never expanded through (its dependents would wait for each task it joins again,
/// the N × M edges it saves): it counts as unfinished, gets the edges itself, and
/// [`crate::pure::join::settle`] then says whether it is done.
pub fn order_through_finished(plan: &mut Plan) {
    use crate::pure::plan::model::Status;
    let n = plan.tasks.len();
    let finished: Vec<bool> = plan
        .tasks
        .iter()
        .map(|t| t.status == Status::Completed && !t.join)
        .collect();
    let deps: Vec<Vec<usize>> = plan
        .tasks
        .iter()
        .enumerate()
        .map(|(i, t)| {
            t.blocked_by
                .iter()
                .copied()
                .filter(|&d| d < n && d != i)
                .collect()
        })
        .collect();
    // The unfinished tasks each finished task reaches through finished ones, made once per
    // finished task (post-order, without recursion; a cycle, refused elsewhere, is cut).
    let mut frontier: Vec<Option<std::collections::BTreeSet<usize>>> = vec![None; n];
    let mut entered = vec![false; n];
    let mut stack: Vec<(usize, bool)> = Vec::new();
    for start in (0..n).filter(|&i| finished[i]) {
        stack.push((start, false));
        while let Some((f, expanded)) = stack.pop() {
            if expanded {
                let mut out = std::collections::BTreeSet::new();
                for &d in &deps[f] {
                    if !finished[d] {
                        out.insert(d);
                    } else if let Some(set) = &frontier[d] {
                        out.extend(set.iter().copied());
                    }
                }
                frontier[f] = Some(out);
            } else if !entered[f] {
                entered[f] = true;
                stack.push((f, true));
                stack.extend(
                    deps[f]
                        .iter()
                        .filter(|&&d| finished[d] && !entered[d])
                        .map(|&d| (d, false)),
                );
            }
        }
    }
    for (i, task) in plan.tasks.iter_mut().enumerate() {
        if finished[i] {
            continue;
        }
        let mut more: Vec<usize> = deps[i]
            .iter()
            .filter_map(|&d| frontier[d].as_ref())
            .flatten()
            .copied()
            .filter(|&d| d != i && !task.blocked_by.contains(&d))
            .collect();
        if more.is_empty() {
            continue;
        }
        task.blocked_by.append(&mut more);
        task.blocked_by.sort_unstable();
        task.blocked_by.dedup();
    }
}

/// A cycle among `deps` (task → the tasks it waits for) as a path of tasks whose last equals
/// its first, in "waits for" order; the first found in task order (iterative DFS, for the
/// task-list sources, which name a cycle before a plan exists).
pub fn cycle_in(deps: &[Vec<usize>]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut mark = vec![Mark::New; deps.len()];
    for start in 0..deps.len() {
        if mark[start] != Mark::New {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        mark[start] = Mark::Open;
        while let Some(&mut (t, ref mut k)) = stack.last_mut() {
            if let Some(&d) = deps[t].get(*k) {
                *k += 1;
                match mark[d] {
                    Mark::New => {
                        mark[d] = Mark::Open;
                        stack.push((d, 0));
                    }
                    Mark::Open => {
                        // t waits for d which (up the stack) waits for t: d → … → t → d, in
                        // "waits for" order.
                        let at = stack.iter().position(|&(s, _)| s == d).unwrap_or(0);
                        let mut path: Vec<usize> = stack[at..].iter().map(|&(s, _)| s).collect();
                        path.push(d);
                        return Some(path);
                    }
                    Mark::Done => {}
                }
            } else {
                mark[t] = Mark::Done;
                stack.pop();
            }
        }
    }
    None
}

/// A shortest cycle through the lowest-numbered task that lies on any cycle, as a path that
/// follows `blockedBy` (ties broken by ascending index), e.g. `[0, 4, 2, 0]`.
fn find_cycle(g: &DiGraph<(), (), u32>, deps: &[Vec<u32>]) -> Vec<usize> {
    let n = deps.len();
    let mut comp_of = vec![usize::MAX; n];
    let mut best: Option<(usize, usize)> = None; // (min node, component id)
    for (ci, comp) in kosaraju_scc(g).into_iter().enumerate() {
        if comp.len() < 2 {
            continue;
        }
        let min = comp.iter().map(|x| x.index()).min().unwrap_or(usize::MAX);
        for x in &comp {
            comp_of[x.index()] = ci;
        }
        if best.is_none_or(|(m, _)| min < m) {
            best = Some((min, ci));
        }
    }
    let Some((start, ci)) = best else {
        return Vec::new();
    };
    // Breadth-first along blockedBy inside the component, back to `start`.
    let mut parent = vec![usize::MAX; n];
    let mut queue = std::collections::VecDeque::from([start]);
    let mut seen = vec![false; n];
    seen[start] = true;
    while let Some(v) = queue.pop_front() {
        for &d in &deps[v] {
            let d = d as usize;
            if comp_of[d] != ci {
                continue;
            }
            if d == start {
                // start, then the chain from start's child to `v`, then start again.
                let mut path = vec![start];
                let mut cur = v;
                while cur != start {
                    path.push(cur);
                    cur = parent[cur];
                }
                path[1..].reverse();
                path.push(start);
                return path;
            }
            if !seen[d] {
                seen[d] = true;
                parent[d] = v;
                queue.push_back(d);
            }
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::plan::model::Task;

    pub(crate) fn plan_of(deps: &[&[usize]]) -> Plan {
        Plan {
            schema_version: 2,
            goal: String::new(),
            context: None,
            progress: Default::default(),
            tasks: deps
                .iter()
                .enumerate()
                .map(|(i, d)| Task {
                    subject: format!("t{i}"),
                    blocked_by: d.to_vec(),
                    ..Default::default()
                })
                .collect(),
            extra: Default::default(),
        }
    }

    #[test]
    fn depth_height_and_order() {
        // 0 ← 2 ← 4, 1 ← 2, 0 ← 3 ← 4
        let dag = Dag::build(&plan_of(&[&[], &[], &[0, 1], &[0], &[2, 3], &[]])).unwrap();
        let depths: Vec<u32> = (0..6).map(|i| dag.depth(i)).collect();
        assert_eq!(depths, [1, 1, 2, 2, 3, 1]);
        let heights: Vec<u32> = (0..6).map(|i| dag.height(i)).collect();
        assert_eq!(heights, [3, 3, 2, 2, 1, 1]);
        assert_eq!(dag.max_depth(), 3);
        for i in 0..6 {
            for &d in dag.deps(i) {
                assert!(dag.topo_pos(d as usize) < dag.topo_pos(i));
            }
        }
        assert_eq!(dag.dependents(0), [2, 3]);
    }

    #[test]
    fn the_order_holds_through_finished_tasks() {
        use crate::pure::plan::model::Status;
        // 0 ← 1 (done) ← 2 ← 3 (done) ← 4; 5 (done) and 6 (done) wait for each other.
        let mut plan = plan_of(&[&[], &[0], &[1], &[2], &[3], &[6], &[5]]);
        for i in [1, 3, 5, 6] {
            plan.tasks[i].status = Status::Completed;
        }
        order_through_finished(&mut plan);
        let deps: Vec<Vec<usize>> = plan.tasks.iter().map(|t| t.blocked_by.clone()).collect();
        // Edges only added; finished tasks keep theirs; a cycle among finished ones is cut.
        assert_eq!(
            deps,
            [
                vec![],
                vec![0],
                vec![0, 1],
                vec![2],
                vec![2, 3],
                vec![6],
                vec![5]
            ]
        );
    }

    #[test]
    fn cycles_are_paths() {
        let cases: &[(&[&[usize]], &[usize])] = &[
            (&[&[4], &[], &[0, 1], &[0], &[2, 3], &[]], &[0, 4, 2, 0]),
            (&[&[], &[2], &[1]], &[1, 2, 1]),
            (&[&[1], &[2], &[3], &[0]], &[0, 1, 2, 3, 0]),
            (&[&[], &[3], &[], &[2], &[], &[6], &[5]], &[5, 6, 5]),
        ];
        for (deps, want) in cases {
            assert_eq!(Dag::build(&plan_of(deps)).unwrap_err(), *want, "{deps:?}");
        }
        let mut plan = plan_of(&[&[1], &[2], &[3], &[0]]);
        plan.tasks[0].blocked_by = vec![3, 1];
        // the shortest cycle through 0 is reported: 0 → 3 → 0
        assert_eq!(Dag::build(&plan).unwrap_err(), [0, 3, 0]);
    }

    /// A cycle through 100,000 tasks is found without recursion: on a thread with a small
    /// stack (a recursive strongly-connected-components search overflowed 8 MiB at 100,000).
    #[test]
    fn a_long_cycle_is_found_on_a_small_stack() {
        let n = 100_000;
        let deps: Vec<Vec<usize>> = (0..n).map(|i| vec![(i + 1) % n]).collect();
        let refs: Vec<&[usize]> = deps.iter().map(Vec::as_slice).collect();
        let plan = plan_of(&refs);
        let cycle = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || Dag::build(&plan).unwrap_err())
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(cycle.len(), n + 1);
        assert_eq!((cycle[0], cycle[1], cycle[n]), (0, 1, 0));
    }
}
