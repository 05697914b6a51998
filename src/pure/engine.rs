//! The round engine: which tasks run next. Pure — it reads plan state and returns decisions.
//!
//! * Ready set (seed 3a): pending tasks whose blockers are all completed.
//! * Round ([`Schedule::Rounds`], seed 3b): the whole ready set. Tasks in it that conflict on
//!   files "run sequentially": [`sequential_groups`] splits the round into groups run one
//!   after another, no two conflicting tasks in one group; the round still ends with one
//!   update, one circuit breaker decision and one commit.
//! * Batch ([`Schedule::Eager`]'s dry run, and within a wave): a subset of the ready set in
//!   which no two tasks conflict in the overlap matrix; conflicting ready tasks wait for a
//!   later batch. The GitHub Action plans its job matrices this way (a matrix cannot order
//!   its jobs).
//!   Order of choice (for batches and groups alike): longest remaining critical path first
//!   (the task heading the longest chain of dependents), ties by plan index. Why: when two
//!   ready tasks conflict, the one that unblocks deeper work should not wait behind one that
//!   unblocks nothing; plan index breaks ties so rounds are reproducible and follow
//!   declaration order.
//! * Deadlock (seed 3a): pending tasks remain but none is ready.
//! * Waves (seed 001): a batch holds only tasks of the lowest wave that still has pending
//!   tasks, so a wave starts only when the previous one is resolved.
//! * [`Schedule::next`] takes each schedule's next decision from a [`View`]; eager runs pick
//!   with [`eager_pick_with`] as slots free up.
//! * Conflicts are per-file locks ([`Conflicts`], [`Locks`]), not the pairwise matrix: a task
//!   joins a batch or group when none of its files is held by a task already in it. Ready
//!   tasks are not ordered among themselves in any state the runner writes, so this is the
//!   matrix's answer; when a hand-edited state makes two candidates ordered, the locks ask the
//!   DAG (the property tests check both against the matrix). Nothing here is quadratic in the
//!   plan: [`sequential_groups`] is a first-fit colouring, [`simulate`] keeps the ready set
//!   as tasks complete.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use rustc_hash::FxHashMap;

use crate::pure::graph::Dag;
use crate::pure::overlap::Conflicts;
use crate::pure::overlap::locks::{Locks, may_be_ordered};
use crate::pure::plan::model::{Plan, Status};
mod dry_run;
pub use dry_run::simulate;

/// The seed's deadlock message.
pub fn deadlock_message(pending: usize) -> String {
    format!(
        "Deadlock detected: {pending} tasks remain but none are ready. Remaining tasks depend on failed or blocked predecessors."
    )
}

/// What the engine sees: the plan's current state and its static structure.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    pub plan: &'a Plan,
    pub dag: &'a Dag,
    /// The conflicts scheduling must respect (computed ∪ declared).
    pub conflicts: &'a Conflicts,
}

/// The engine's decision for the next step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Run these tasks now (ascending plan index). `waiting` are ready tasks held back by a
    /// conflict or the batch cap.
    Batch {
        tasks: Vec<usize>,
        waiting: Vec<usize>,
    },
    /// No task is pending: go to completion.
    Done,
    /// Pending tasks remain but none can start.
    Deadlock { pending: usize },
}

/// Pending tasks whose blockers are all completed (a join counting as completed once its own
/// blockers are; a join itself is never ready), ascending.
pub fn ready_set(plan: &Plan, dag: &Dag) -> Vec<usize> {
    ready_set_after(plan, dag, &[])
}

/// [`ready_set`] as it will be once the tasks `landing` are completed too.
pub fn ready_set_after(plan: &Plan, dag: &Dag, landing: &[usize]) -> Vec<usize> {
    let landing: rustc_hash::FxHashSet<usize> = landing.iter().copied().collect();
    // A join is never ready; it counts as done once its blockers are (`pure::join`).
    let done = crate::pure::join::done(plan, dag, |i| landing.contains(&i));
    plan.tasks
        .iter()
        .enumerate()
        .filter(|(i, t)| {
            t.status == Status::Pending
                && !t.join
                && !landing.contains(i)
                && dag.deps(*i).iter().all(|&d| done[d as usize])
        })
        .map(|(i, _)| i)
        .collect()
}

/// The order of choice: longest remaining critical path first, then plan index.
fn by_priority(tasks: &[usize], dag: &Dag) -> Vec<usize> {
    let mut order = tasks.to_vec();
    order.sort_unstable_by_key(|&i| (Reverse(dag.height(i)), i));
    order
}

/// Picks a conflict-free batch from `ready`: critical path first, then plan index.
pub fn select_batch(
    ready: &[usize],
    dag: &Dag,
    conflicts: &Conflicts,
    cap: Option<usize>,
) -> (Vec<usize>, Vec<usize>) {
    let mut locks = Locks::new(conflicts, dag, ready);
    choose(ready, dag, &mut locks, cap)
}

/// Greedy choice under `locks`: a task joins when the cap allows and none of its files (or
/// declared partners) is held; it then holds them.
fn choose(
    ready: &[usize],
    dag: &Dag,
    locks: &mut Locks<'_>,
    cap: Option<usize>,
) -> (Vec<usize>, Vec<usize>) {
    let cap = cap.unwrap_or(usize::MAX).max(1);
    let mut chosen: Vec<usize> = Vec::new();
    let mut waiting: Vec<usize> = Vec::new();
    for i in by_priority(ready, dag) {
        if chosen.len() < cap && !locks.blocked(i) {
            locks.take(i);
            chosen.push(i);
        } else {
            waiting.push(i);
        }
    }
    chosen.sort_unstable();
    waiting.sort_unstable();
    (chosen, waiting)
}

/// Splits a round's tasks into groups run one after another: no two tasks of a group
/// conflict, each group takes what [`select_batch`] picks from what is left (critical path
/// first, then plan index). Each group ascending; the groups cover `tasks` exactly once.
///
/// That is a first-fit colouring in priority order (a task goes to the first group holding
/// none of its files), which is what is computed, in O(k log k) for k tasks; when two of the
/// tasks may be ordered, the groups are taken one by one with exact locks instead.
pub fn sequential_groups(tasks: &[usize], dag: &Dag, conflicts: &Conflicts) -> Vec<Vec<usize>> {
    if may_be_ordered(dag, tasks) {
        let mut rest = tasks.to_vec();
        let mut groups = Vec::new();
        while !rest.is_empty() {
            let (group, waiting) = select_batch(&rest, dag, conflicts, None);
            groups.push(group);
            rest = waiting;
        }
        return groups;
    }
    let mut used: FxHashMap<u32, UsedGroups> = FxHashMap::default();
    let mut group_of: FxHashMap<u32, u32> = FxHashMap::default();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for i in by_priority(tasks, dag) {
        let files = conflicts.index().files_of(i);
        let declared = conflicts.declared_of(i);
        let mut g = 0u32;
        loop {
            let before = g;
            for f in files {
                if let Some(u) = used.get(f) {
                    g = u.next_free(g);
                }
            }
            for d in declared {
                if group_of.get(d) == Some(&g) {
                    g += 1;
                }
            }
            if g == before {
                break;
            }
        }
        for &f in files {
            used.entry(f).or_default().insert(g);
        }
        group_of.insert(i as u32, g);
        if g as usize == groups.len() {
            groups.push(Vec::new());
        }
        groups[g as usize].push(i);
    }
    for g in &mut groups {
        g.sort_unstable();
    }
    groups
}

/// The groups holding one file: all below `first_free`, and those in `above`.
#[derive(Debug, Default)]
struct UsedGroups {
    first_free: u32,
    above: BTreeSet<u32>,
}

impl UsedGroups {
    /// The first group from `g` on that does not hold the file.
    fn next_free(&self, mut g: u32) -> u32 {
        g = g.max(self.first_free);
        while self.above.contains(&g) {
            g += 1;
        }
        g
    }

    fn insert(&mut self, g: u32) {
        if g == self.first_free {
            self.first_free += 1;
            while self.above.remove(&self.first_free) {
                self.first_free += 1;
            }
        } else {
            self.above.insert(g);
        }
    }
}

/// A round of `ready`: all of it, or with a cap the first `cap` by critical path, then plan index.
fn round_of(ready: &[usize], dag: &Dag, cap: Option<usize>) -> (Vec<usize>, Vec<usize>) {
    let cap = cap.unwrap_or(usize::MAX).max(1);
    let mut tasks = by_priority(ready, dag);
    let mut waiting = tasks.split_off(cap.min(tasks.len()));
    tasks.sort_unstable();
    waiting.sort_unstable();
    (tasks, waiting)
}

/// The wave a task belongs to: its `wave` field, else its dependency depth.
pub fn wave_of(plan: &Plan, dag: &Dag, task: usize) -> u64 {
    plan.tasks[task]
        .wave
        .unwrap_or_else(|| u64::from(dag.depth(task)))
}

/// The lowest wave that still has pending tasks.
pub fn current_wave(plan: &Plan, dag: &Dag) -> Option<u64> {
    (0..plan.tasks.len())
        .filter(|&i| plan.tasks[i].status == Status::Pending && !plan.tasks[i].join)
        .map(|i| wave_of(plan, dag, i))
        .min()
}

/// How batches are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Schedule {
    /// Ready-set rounds (seed 000), the default: a round is the whole ready set.
    #[default]
    Rounds,
    /// Wave by wave (seed 001).
    Waves,
    /// Beyond the seeds: a task starts as soon as its blockers are completed and a slot is
    /// free ([`eager_pick`]); the batches shown for it (dry run) are conflict-free ones.
    Eager,
}

impl Schedule {
    /// What a worker's prompt calls the set it runs in: a wave (waves), else a batch.
    pub fn unit(self) -> crate::pure::prompt::Unit {
        match self {
            Schedule::Waves => crate::pure::prompt::Unit::Wave,
            Schedule::Rounds | Schedule::Eager => crate::pure::prompt::Unit::Batch,
        }
    }

    /// The next decision; `cap` limits the batch size (e.g. 256 jobs per GitHub matrix).
    /// Done when nothing is pending, deadlock when nothing pending is ready; else rounds take
    /// the whole ready set (with a cap, the first `cap` by critical path, then plan index: a
    /// round's conflicting tasks run one after another inside it, see [`sequential_groups`]),
    /// waves a conflict-free batch of the lowest wave with pending tasks, and eager a
    /// conflict-free batch of the ready set (its dry-run view, and what a GitHub job matrix
    /// can run at once; eager runs pick with [`eager_pick`]).
    pub fn next(self, view: View<'_>, cap: Option<usize>) -> Next {
        let mut ready = ready_set(view.plan, view.dag);
        if self == Schedule::Waves {
            let Some(wave) = current_wave(view.plan, view.dag) else {
                return Next::Done;
            };
            ready.retain(|&i| wave_of(view.plan, view.dag, i) == wave);
        }
        let pending = view.plan.count(Status::Pending);
        if pending == 0 {
            return Next::Done;
        }
        if ready.is_empty() {
            return Next::Deadlock { pending };
        }
        let (tasks, waiting) = match self {
            Schedule::Rounds => round_of(&ready, view.dag, cap),
            Schedule::Waves | Schedule::Eager => {
                select_batch(&ready, view.dag, view.conflicts, cap)
            }
        };
        Next::Batch { tasks, waiting }
    }
}

/// The eager policy's choice: up to `slots` ready tasks that conflict neither with a task in
/// flight nor with each other, longest remaining critical path first, then plan index.
pub fn eager_pick(
    plan: &Plan,
    dag: &Dag,
    conflicts: &Conflicts,
    in_flight: &[usize],
    slots: usize,
) -> Vec<usize> {
    let pick = Pick {
        in_flight,
        slots,
        landing: &[],
        held: &[],
    };
    eager_pick_with(plan, dag, conflicts, pick)
}

/// What an eager pick starts from: the tasks in flight (arrivals not yet integrated among
/// them: they hold their files until committed), the free slots, the completed attempts about
/// to land, and the ready tasks held back (on the Action, a provider's rate limit holds them:
/// `pure::gateway::held`).
#[derive(Debug, Clone, Copy)]
pub struct Pick<'a> {
    pub in_flight: &'a [usize],
    pub slots: usize,
    pub landing: &'a [usize],
    pub held: &'a [usize],
}

/// [`eager_pick`] with `pick.held` left out, as if not ready (they take no slot and hold no
/// file, so work beside them goes on); while `pick.landing` are about to land, only what would
/// also be picked once they have: a slot an arrival frees goes first to the work it unblocks
/// when that comes first (the critical path, often), not to lower-priority work that started
/// before it could. What `run`'s eager loop and `dagexec simulate`'s start.
pub fn eager_pick_with(
    plan: &Plan,
    dag: &Dag,
    conflicts: &Conflicts,
    pick: Pick<'_>,
) -> Vec<usize> {
    let mut picks = pick_after(plan, dag, conflicts, pick, &[]);
    if !pick.landing.is_empty() && !picks.is_empty() {
        let then = pick_after(plan, dag, conflicts, pick, pick.landing);
        picks.retain(|i| then.contains(i));
    }
    picks
}

/// The pick as it will be once `landed` are completed (no copy of the plan, so it costs what
/// a pick costs).
fn pick_after(
    plan: &Plan,
    dag: &Dag,
    conflicts: &Conflicts,
    pick: Pick<'_>,
    landed: &[usize],
) -> Vec<usize> {
    if pick.slots == 0 {
        return Vec::new();
    }
    let busy: rustc_hash::FxHashSet<usize> = pick.in_flight.iter().copied().collect();
    let ready: Vec<usize> = ready_set_after(plan, dag, landed)
        .into_iter()
        .filter(|i| !busy.contains(i) && !pick.held.contains(i))
        .collect();
    let mut everyone = ready.clone();
    everyone.extend(busy.iter().copied());
    // Tasks in flight hold their files first; a ready task blocked by one waits.
    let mut locks = Locks::new(conflicts, dag, &everyone);
    for &r in &busy {
        locks.take(r);
    }
    choose(&ready, dag, &mut locks, Some(pick.slots)).0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{plan_of, task};
    use proptest::prelude::*;

    fn plan(tasks: &[(&[usize], &[&str])]) -> Plan {
        plan_of(
            tasks
                .iter()
                .map(|(deps, files)| task(deps, &[], files))
                .collect(),
        )
    }

    fn run(p: &Plan, schedule: Schedule, cap: Option<usize>) -> (Vec<Vec<usize>>, Option<usize>) {
        let dag = Dag::build(p).unwrap();
        let m = Conflicts::of(p);
        simulate(p, &dag, &m, schedule, cap)
    }

    #[test]
    fn ready_set_rules() {
        let mut p = plan(&[(&[], &[]), (&[0], &[]), (&[0, 1], &[]), (&[], &[])]);
        let dag = Dag::build(&p).unwrap();
        assert_eq!(ready_set(&p, &dag), [0, 3]);
        p.tasks[0].status = Status::Completed;
        p.tasks[3].status = Status::Failed;
        assert_eq!(ready_set(&p, &dag), [1]);
        p.tasks[1].status = Status::Skipped;
        assert_eq!(ready_set(&p, &dag), Vec::<usize>::new());
        let m = Conflicts::none(4);
        let view = View {
            plan: &p,
            dag: &dag,
            conflicts: &m,
        };
        assert_eq!(
            Schedule::Rounds.next(view, None),
            Next::Deadlock { pending: 1 }
        );
        assert_eq!(
            deadlock_message(1),
            "Deadlock detected: 1 tasks remain but none are ready. Remaining tasks depend on failed or blocked predecessors."
        );
    }

    #[test]
    fn conflicts_wait_and_critical_path_goes_first() {
        // 0 and 1 share a file; 1 heads a chain (1 ← 2 ← 3), so 1 runs first.
        let p = plan(&[(&[], &["a"]), (&[], &["a"]), (&[1], &[]), (&[2], &[])]);
        assert_eq!(
            run(&p, Schedule::Eager, None).0,
            vec![vec![1], vec![0, 2], vec![3]]
        );
        // Equal heights: plan index breaks the tie.
        let p = plan(&[(&[], &["a"]), (&[], &["a"]), (&[], &["a"])]);
        assert_eq!(
            run(&p, Schedule::Eager, None).0,
            vec![vec![0], vec![1], vec![2]]
        );
        // The cap holds the rest back.
        let p = plan(&[(&[], &[]), (&[], &[]), (&[], &[])]);
        assert_eq!(
            run(&p, Schedule::Eager, Some(2)).0,
            vec![vec![0, 1], vec![2]]
        );
    }

    #[test]
    fn a_round_is_the_whole_ready_set_with_conflicts_in_sequence() {
        // 0 and 1 share a file; 1 heads a chain (1 ← 2 ← 3). The seed's round 1 is {0, 1}:
        // 1 first (critical path), then 0 on top of it.
        let p = plan(&[(&[], &["a"]), (&[], &["a"]), (&[1], &[]), (&[2], &[])]);
        let dag = Dag::build(&p).unwrap();
        let m = Conflicts::of(&p);
        let rounds = run(&p, Schedule::Rounds, None).0;
        assert_eq!(rounds, vec![vec![0, 1], vec![2], vec![3]]);
        assert_eq!(
            sequential_groups(&rounds[0], &dag, &m),
            vec![vec![1], vec![0]]
        );
        // Three tasks on one file: one round, three groups in plan order.
        let p = plan(&[(&[], &["a"]), (&[], &["a"]), (&[], &["a"]), (&[], &["b"])]);
        let dag = Dag::build(&p).unwrap();
        let m = Conflicts::of(&p);
        let rounds = run(&p, Schedule::Rounds, None).0;
        assert_eq!(rounds, vec![vec![0, 1, 2, 3]]);
        assert_eq!(
            sequential_groups(&rounds[0], &dag, &m),
            vec![vec![0, 3], vec![1], vec![2]]
        );
        // A cap takes the first tasks by critical path, then plan index.
        let p = plan(&[(&[], &[]), (&[], &[]), (&[1], &[])]);
        let dag = Dag::build(&p).unwrap();
        let m = Conflicts::none(3);
        let view = View {
            plan: &p,
            dag: &dag,
            conflicts: &m,
        };
        assert_eq!(
            Schedule::Rounds.next(view, Some(1)),
            Next::Batch {
                tasks: vec![1],
                waiting: vec![0]
            }
        );
    }

    #[test]
    fn waves_wait_for_the_previous_wave() {
        // Ready-set would run 2 in round 1; waves holds it for wave 2.
        let mut p = plan(&[(&[], &[]), (&[0], &[]), (&[], &[])]);
        p.tasks[0].wave = Some(1);
        p.tasks[1].wave = Some(2);
        p.tasks[2].wave = Some(2);
        assert_eq!(run(&p, Schedule::Rounds, None).0, vec![vec![0, 2], vec![1]]);
        assert_eq!(run(&p, Schedule::Waves, None).0, vec![vec![0], vec![1, 2]]);
        // A missing wave falls back to the task's depth.
        p.tasks[2].wave = None;
        assert_eq!(run(&p, Schedule::Waves, None).0, vec![vec![0, 2], vec![1]]);
    }

    #[test]
    fn eager_fills_free_slots_around_what_is_in_flight() {
        // 0 → 2 (long chain 2 → 3), 1 independent, 4 shares a file with 1.
        let p = plan(&[
            (&[], &[]),
            (&[], &["x"]),
            (&[0], &[]),
            (&[2], &[]),
            (&[], &["x"]),
        ]);
        let dag = Dag::build(&p).unwrap();
        let m = Conflicts::of(&p);
        // Critical path first: 0 heads 0 → 2 → 3.
        assert_eq!(eager_pick(&p, &dag, &m, &[], 1), [0]);
        // 1 in flight: 4 conflicts with it and waits; 0 is picked.
        assert_eq!(eager_pick(&p, &dag, &m, &[1], 3), [0]);
        assert_eq!(eager_pick(&p, &dag, &m, &[], 3), [0, 1]);
        assert_eq!(eager_pick(&p, &dag, &m, &[0, 1], 0), Vec::<usize>::new());
    }

    #[test]
    fn ordered_ready_tasks_share_a_file_without_conflict() {
        // A hand edit completed 1 while its blocker 0 is pending: 0 and 2 (blocked by 1) are
        // both ready, share `a`, and are ordered (0 reaches 2), so they may run together, as
        // the matrix says; 3 shares `a` with both and is ordered with neither.
        let mut p = plan(&[(&[], &["a"]), (&[0], &[]), (&[1], &["a"]), (&[], &["a"])]);
        p.tasks[1].status = Status::Completed;
        let dag = Dag::build(&p).unwrap();
        let c = Conflicts::of(&p);
        assert!(!c.conflict(&dag, 0, 2));
        assert!(c.conflict(&dag, 0, 3) && c.conflict(&dag, 2, 3));
        assert_eq!(
            select_batch(&[0, 2, 3], &dag, &c, None),
            (vec![0, 2], vec![3])
        );
        assert_eq!(
            sequential_groups(&[0, 2, 3], &dag, &c),
            vec![vec![0, 2], vec![3]]
        );
        assert_eq!(eager_pick(&p, &dag, &c, &[3], 4), Vec::<usize>::new());
        assert_eq!(eager_pick(&p, &dag, &c, &[0], 4), [2]);
    }

    #[test]
    fn nothing_pending_is_done() {
        let mut p = plan(&[(&[], &[])]);
        p.tasks[0].status = Status::Completed;
        assert_eq!(run(&p, Schedule::Rounds, None), (vec![], None));
    }

    fn arb_plan() -> impl Strategy<Value = (Vec<Vec<usize>>, Vec<Vec<u8>>)> {
        (1usize..40).prop_flat_map(|n| {
            let deps = (0..n)
                .map(|i| proptest::collection::vec(0..i.max(1), 0..=i.min(3)))
                .collect::<Vec<_>>();
            let files = proptest::collection::vec(proptest::collection::vec(0u8..8, 0..3), n);
            (deps, files)
        })
    }

    /// The plan of an [`arb_plan`] draw (each task's blockers before it, files named `a` …
    /// `h`), and each task's blockers.
    fn arb_tasks(deps: &[Vec<usize>], files: &[Vec<u8>]) -> (Vec<Vec<usize>>, Plan) {
        let names = ["a", "b", "c", "d", "e", "f", "g", "h"];
        let tasks: Vec<(Vec<usize>, Vec<&str>)> = deps
            .iter()
            .enumerate()
            .map(|(i, d)| {
                (
                    d.iter().copied().filter(|&x| x < i).collect(),
                    files[i].iter().map(|&f| names[f as usize]).collect(),
                )
            })
            .collect();
        let spec: Vec<(&[usize], &[&str])> = tasks
            .iter()
            .map(|(d, f)| (d.as_slice(), f.as_slice()))
            .collect();
        let p = plan(&spec);
        (tasks.into_iter().map(|(d, _)| d).collect(), p)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Without conflicts, every task completes and rounds == maxDepth.
        #[test]
        fn rounds_equal_max_depth_without_conflicts((deps, _files) in arb_plan()) {
            let tasks: Vec<(Vec<usize>, Vec<&str>)> = deps.iter().enumerate()
                .map(|(i, d)| (d.iter().copied().filter(|&x| x < i).collect(), vec![])).collect();
            let spec: Vec<(&[usize], &[&str])> = tasks.iter().map(|(d, f)| (d.as_slice(), f.as_slice())).collect();
            let p = plan(&spec);
            let dag = Dag::build(&p).unwrap();
            let (batches, deadlock) = run(&p, Schedule::Rounds, None);
            prop_assert_eq!(deadlock, None);
            prop_assert_eq!(batches.len() as u32, dag.max_depth());
            prop_assert_eq!(batches.iter().map(Vec::len).sum::<usize>(), p.tasks.len());
            // Waves without wave fields (wave = depth) give the same rounds.
            prop_assert_eq!(run(&p, Schedule::Waves, None).0, batches);
        }

        /// With conflicts, no batch holds two conflicting tasks, blockers always come first,
        /// and everything still runs.
        #[test]
        fn batches_never_hold_conflicts((deps, files) in arb_plan(), cap in proptest::option::of(1usize..5)) {
            let (_, p) = arb_tasks(&deps, &files);
            let dag = Dag::build(&p).unwrap();
            let m = Conflicts::of(&p);
            let (batches, deadlock) = simulate(&p, &dag, &m, Schedule::Eager, cap);
            prop_assert_eq!(deadlock, None);
            let mut round_of = vec![usize::MAX; p.tasks.len()];
            for (r, b) in batches.iter().enumerate() {
                if let Some(c) = cap { prop_assert!(b.len() <= c); }
                for (k, &x) in b.iter().enumerate() {
                    round_of[x] = r;
                    for &y in &b[k + 1..] {
                        prop_assert!(!m.conflict(&dag, x, y), "tasks {} and {} conflict in one batch", x, y);
                    }
                }
            }
            for t in 0..p.tasks.len() {
                prop_assert!(round_of[t] != usize::MAX);
                for &d in dag.deps(t) {
                    prop_assert!(round_of[d as usize] < round_of[t]);
                }
            }
            prop_assert!(batches.len() as u32 >= dag.max_depth());
        }

        /// `rounds` against a plain model of the seed's round loop (Step 3: a round is every
        /// pending task whose blockers completed; all of them complete): the same rounds, on
        /// plans with file conflicts, and each round's sequential groups cover it once with
        /// no two conflicting tasks in a group.
        #[test]
        fn rounds_match_the_seed_round_loop_with_conflicts((deps, files) in arb_plan()) {
            let (blockers, p) = arb_tasks(&deps, &files);
            // The seed's loop, written out with no engine code.
            let mut done = vec![false; blockers.len()];
            let mut seed: Vec<Vec<usize>> = Vec::new();
            while done.iter().any(|d| !d) {
                let ready: Vec<usize> = (0..blockers.len())
                    .filter(|&i| !done[i] && blockers[i].iter().all(|&d| done[d]))
                    .collect();
                prop_assert!(!ready.is_empty());
                for &i in &ready { done[i] = true; }
                seed.push(ready);
            }
            let dag = Dag::build(&p).unwrap();
            let m = Conflicts::of(&p);
            let (rounds, deadlock) = simulate(&p, &dag, &m, Schedule::Rounds, None);
            prop_assert_eq!(deadlock, None);
            prop_assert_eq!(rounds.len(), seed.len());
            prop_assert_eq!(&rounds, &seed);
            for round in &rounds {
                let groups = sequential_groups(round, &dag, &m);
                let mut all: Vec<usize> = groups.concat();
                all.sort_unstable();
                prop_assert_eq!(&all, round);
                for g in &groups {
                    for (k, &x) in g.iter().enumerate() {
                        for &y in &g[k + 1..] {
                            prop_assert!(!m.conflict(&dag, x, y), "tasks {} and {} conflict in one group", x, y);
                        }
                    }
                }
            }
        }

        /// The lock-based scheduler against the matrix-based one it replaced (`by_matrix`,
        /// the former code, fed the computed ∪ declared matrix): the same batches, rounds,
        /// groups and eager picks, on random plans in random states — including states a
        /// hand edit makes, where a completed task has a pending ancestor and two ready tasks
        /// are ordered — with v3 `fileOverlaps` and waves.
        #[test]
        fn locks_schedule_as_the_matrix_does(
            (deps, files) in arb_plan(),
            states in proptest::collection::vec(0u8..12, 40),
            declared in proptest::collection::vec((0usize..40, 0usize..40), 0..6),
            waves in proptest::collection::vec(proptest::option::of(0u64..4), 40),
            subset in proptest::collection::vec(any::<bool>(), 40),
            cap in proptest::option::of(1usize..5),
            slots in 0usize..5,
        ) {
            let (_, mut p) = arb_tasks(&deps, &files);
            let n = p.tasks.len();
            for (i, t) in p.tasks.iter_mut().enumerate() {
                t.status = match states[i] {
                    8 => Status::Completed,
                    9 => Status::Failed,
                    10 => Status::InProgress,
                    11 => Status::Skipped,
                    _ => Status::Pending,
                };
                t.wave = waves[i];
            }
            if !declared.is_empty() {
                p.schema_version = 3;
                for &(a, b) in &declared {
                    if a < n && b < n && a != b {
                        p.tasks[a].file_overlaps.get_or_insert_with(Vec::new).push(b);
                    }
                }
            }
            let dag = Dag::build(&p).unwrap();
            let locks = Conflicts::of(&p);
            let m = by_matrix::matrix(&p, &dag);
            for (a, b) in (0..n).flat_map(|a| (0..n).map(move |b| (a, b))) {
                prop_assert_eq!(locks.conflict(&dag, a, b), m.conflict(a, b), "pair {} {}", a, b);
            }
            for schedule in [Schedule::Rounds, Schedule::Waves, Schedule::Eager] {
                let view = View { plan: &p, dag: &dag, conflicts: &locks };
                prop_assert_eq!(
                    schedule.next(view, cap),
                    by_matrix::next(&p, &dag, &m, schedule, cap),
                    "{:?}", schedule
                );
                prop_assert_eq!(
                    simulate(&p, &dag, &locks, schedule, cap),
                    by_matrix::simulate(&p, &dag, &m, schedule, cap),
                    "{:?}", schedule
                );
            }
            // The same plan fresh: every state consistent, the fast paths taken.
            let mut fresh = p.clone();
            for t in &mut fresh.tasks {
                t.status = Status::Pending;
            }
            for schedule in [Schedule::Rounds, Schedule::Waves, Schedule::Eager] {
                prop_assert_eq!(
                    simulate(&fresh, &dag, &locks, schedule, cap),
                    by_matrix::simulate(&fresh, &dag, &m, schedule, cap),
                    "fresh {:?}", schedule
                );
            }
            let ready = ready_set(&p, &dag);
            prop_assert_eq!(
                sequential_groups(&ready, &dag, &locks),
                by_matrix::sequential_groups(&ready, &dag, &m)
            );
            // Any set of tasks, ordered ones included.
            let some: Vec<usize> = (0..n).filter(|&i| subset[i]).collect();
            prop_assert_eq!(
                sequential_groups(&some, &dag, &locks),
                by_matrix::sequential_groups(&some, &dag, &m)
            );
            let in_flight: Vec<usize> = (0..n).filter(|&i| subset[i] && states[i] % 2 == 0).collect();
            prop_assert_eq!(
                eager_pick(&p, &dag, &locks, &in_flight, slots),
                by_matrix::eager_pick(&p, &dag, &m, &in_flight, slots)
            );
        }
    }

    /// The matrix-based scheduling the locks replaced, kept word for word as their model.
    mod by_matrix {
        use super::super::{Next, Schedule, current_wave, ready_set, wave_of};
        use crate::pure::graph::Dag;
        use crate::pure::overlap::OverlapMatrix;
        use crate::pure::plan::model::{Plan, Status};

        /// Computed ∪ declared, as `Overlaps::for_scheduling` made it.
        pub(super) fn matrix(p: &Plan, dag: &Dag) -> OverlapMatrix {
            let computed = OverlapMatrix::compute(p, dag);
            if p.schema_version < 3 {
                return computed;
            }
            let declared = OverlapMatrix::declared(p);
            let n = p.tasks.len();
            let pairs: Vec<(usize, usize)> = (0..n)
                .flat_map(|a| (0..n).map(move |b| (a, b)))
                .filter(|&(a, b)| computed.conflict(a, b) || declared.conflict(a, b))
                .collect();
            let mut q = p.clone();
            q.schema_version = 3;
            for t in &mut q.tasks {
                t.file_overlaps = Some(Vec::new());
            }
            for (a, b) in pairs {
                q.tasks[a].file_overlaps.as_mut().unwrap().push(b);
            }
            OverlapMatrix::declared(&q)
        }

        pub(super) fn select_batch(
            ready: &[usize],
            dag: &Dag,
            conflicts: &OverlapMatrix,
            cap: Option<usize>,
        ) -> (Vec<usize>, Vec<usize>) {
            let mut order: Vec<usize> = ready.to_vec();
            order.sort_by_key(|&i| (std::cmp::Reverse(dag.height(i)), i));
            let cap = cap.unwrap_or(usize::MAX).max(1);
            let mut chosen: Vec<usize> = Vec::new();
            let mut waiting: Vec<usize> = Vec::new();
            for i in order {
                if chosen.len() < cap && !chosen.iter().any(|&c| conflicts.conflict(i, c)) {
                    chosen.push(i);
                } else {
                    waiting.push(i);
                }
            }
            chosen.sort_unstable();
            waiting.sort_unstable();
            (chosen, waiting)
        }

        pub(super) fn sequential_groups(
            tasks: &[usize],
            dag: &Dag,
            conflicts: &OverlapMatrix,
        ) -> Vec<Vec<usize>> {
            let mut rest = tasks.to_vec();
            let mut groups = Vec::new();
            while !rest.is_empty() {
                let (group, waiting) = select_batch(&rest, dag, conflicts, None);
                groups.push(group);
                rest = waiting;
            }
            groups
        }

        pub(super) fn eager_pick(
            plan: &Plan,
            dag: &Dag,
            conflicts: &OverlapMatrix,
            in_flight: &[usize],
            slots: usize,
        ) -> Vec<usize> {
            if slots == 0 {
                return Vec::new();
            }
            let ready: Vec<usize> = ready_set(plan, dag)
                .into_iter()
                .filter(|&i| {
                    !in_flight
                        .iter()
                        .any(|&r| r == i || conflicts.conflict(i, r))
                })
                .collect();
            select_batch(&ready, dag, conflicts, Some(slots)).0
        }

        #[expect(
            clippy::needless_pass_by_value,
            reason = "the ready set is made for this decision"
        )]
        fn decide(
            pending: usize,
            ready: Vec<usize>,
            dag: &Dag,
            m: &OverlapMatrix,
            cap: Option<usize>,
        ) -> Next {
            if pending == 0 {
                return Next::Done;
            }
            if ready.is_empty() {
                return Next::Deadlock { pending };
            }
            let (tasks, waiting) = select_batch(&ready, dag, m, cap);
            Next::Batch { tasks, waiting }
        }

        pub(super) fn next(
            p: &Plan,
            dag: &Dag,
            m: &OverlapMatrix,
            schedule: Schedule,
            cap: Option<usize>,
        ) -> Next {
            let pending = p.count(Status::Pending);
            match schedule {
                Schedule::Rounds => {
                    if pending == 0 {
                        return Next::Done;
                    }
                    let mut ready = ready_set(p, dag);
                    if ready.is_empty() {
                        return Next::Deadlock { pending };
                    }
                    let cap = cap.unwrap_or(usize::MAX).max(1);
                    ready.sort_by_key(|&i| (std::cmp::Reverse(dag.height(i)), i));
                    let mut waiting = ready.split_off(cap.min(ready.len()));
                    ready.sort_unstable();
                    waiting.sort_unstable();
                    Next::Batch {
                        tasks: ready,
                        waiting,
                    }
                }
                Schedule::Waves => {
                    let Some(wave) = current_wave(p, dag) else {
                        return Next::Done;
                    };
                    let ready: Vec<usize> = ready_set(p, dag)
                        .into_iter()
                        .filter(|&i| wave_of(p, dag, i) == wave)
                        .collect();
                    decide(pending, ready, dag, m, cap)
                }
                Schedule::Eager => decide(pending, ready_set(p, dag), dag, m, cap),
            }
        }

        pub(super) fn simulate(
            plan: &Plan,
            dag: &Dag,
            m: &OverlapMatrix,
            schedule: Schedule,
            cap: Option<usize>,
        ) -> (Vec<Vec<usize>>, Option<usize>) {
            let mut state = plan.clone();
            let mut batches = Vec::new();
            loop {
                match next(&state, dag, m, schedule, cap) {
                    Next::Done => return (batches, None),
                    Next::Deadlock { pending } => return (batches, Some(pending)),
                    Next::Batch { tasks, .. } => {
                        for &t in &tasks {
                            state.tasks[t].status = Status::Completed;
                        }
                        batches.push(tasks);
                    }
                }
            }
        }
    }

    /// `p` with the tasks marked in `joins` made joins (no files), and the same plan with
    /// each join expanded into edges: every other task waits for the tasks the joins it
    /// waits for join, and a join's place holds a completed task nothing waits for.
    fn joined_and_expanded(p: &Plan, joins: &[bool]) -> (Plan, Plan) {
        let mut joined = p.clone();
        for (t, &j) in joined.tasks.iter_mut().zip(joins) {
            if j {
                t.join = true;
                t.metadata = None;
            }
        }
        let mut expanded = joined.clone();
        for (i, t) in expanded.tasks.iter_mut().enumerate() {
            if t.join {
                t.join = false;
                t.blocked_by.clear();
                t.status = Status::Completed;
            } else {
                t.blocked_by = crate::pure::join::through(&joined, &joined.tasks[i].blocked_by);
            }
        }
        (joined, expanded)
    }

    /// Batches taken one decision at a time ([`Schedule::next`]), each marked completed and
    /// nothing else (no plan update settles a join): what the drivers see between updates.
    fn stepped(p: &Plan, schedule: Schedule, cap: Option<usize>) -> Vec<Vec<usize>> {
        let mut state = p.clone();
        let dag = Dag::build(p).unwrap();
        let m = Conflicts::of(p);
        let mut out = Vec::new();
        loop {
            let view = View {
                plan: &state,
                dag: &dag,
                conflicts: &m,
            };
            match schedule.next(view, cap) {
                Next::Batch { tasks, .. } => {
                    for &t in &tasks {
                        state.tasks[t].status = Status::Completed;
                    }
                    out.push(tasks);
                }
                Next::Done => return out,
                Next::Deadlock { pending } => panic!("deadlock with {pending} pending"),
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// A plan with joins runs as the plan with the joins expanded into edges: the same
        /// batches under every schedule, by the dry run and decision by decision, and a join
        /// is never in a batch.
        #[test]
        fn joins_run_as_their_edges_expanded(
            (deps, files) in arb_plan(),
            marks in proptest::collection::vec(proptest::bool::weighted(0.3), 12),
            cap in proptest::option::of(1usize..4),
        ) {
            let (_, p) = arb_tasks(&deps, &files);
            let joins: Vec<bool> = (0..p.tasks.len()).map(|i| marks[i % marks.len()]).collect();
            let (joined, expanded) = joined_and_expanded(&p, &joins);
            for schedule in [Schedule::Rounds, Schedule::Waves, Schedule::Eager] {
                let (a, dead_a) = run(&joined, schedule, cap);
                let (b, dead_b) = run(&expanded, schedule, cap);
                prop_assert_eq!(dead_a, None);
                prop_assert_eq!(dead_b, None);
                prop_assert_eq!(&a, &b, "{:?}", schedule);
                prop_assert!(a.iter().flatten().all(|&t| !joins[t]));
                prop_assert_eq!(stepped(&joined, schedule, cap), b);
            }
        }
    }
}
