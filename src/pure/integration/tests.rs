use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::pure::outcome::MAX_ATTEMPTS;

fn set(paths: &[&str]) -> BTreeSet<String> {
    paths.iter().map(ToString::to_string).collect()
}

fn clean(paths: &[&str], combined: bool) -> Merge {
    Merge::Clean {
        changed: set(paths),
        combined,
    }
}

/// Task 0 landed on `a.txt` after task 1 started.
fn one_landed_beside() -> (Ledger, Start) {
    let mut l = Ledger::default();
    assert!(!l.start(0, "b"));
    assert!(!l.start(1, "b"));
    l.arrived(0).unwrap();
    l.landed(0, set(&["a.txt"]), set(&["a.txt"]), Vec::new());
    let start = l.arrived(1).unwrap();
    (l, start)
}

#[test]
fn a_change_that_meets_nothing_landed_since_its_start_lands_without_a_recheck() {
    let (mut l, start) = one_landed_beside();
    let step = l.merged(
        &at(1, &start, &set(&["b.txt"])),
        clean(&["b.txt"], false),
        Meets::default(),
    );
    assert_eq!(step, Step::Land);
}

#[test]
fn a_merge_into_a_path_landed_since_is_rechecked_with_that_tasks_checks() {
    let (mut l, start) = one_landed_beside();
    let own = set(&["a.txt"]);
    let step = l.merged(
        &at(1, &start, &own),
        clean(&["a.txt"], false),
        Meets::default(),
    );
    assert_eq!(step, Step::Recheck { tasks: vec![1, 0] });
    let passed = l.rechecked(&at(1, &start, &own), l.at_fault(&start, &own), None);
    assert_eq!(passed, Step::Land);
}

#[test]
fn a_conflict_is_an_uncounted_rebase_onto_the_task_at_fault_and_the_next_a_failed_attempt() {
    let (mut l, start) = one_landed_beside();
    let conflict = Merge::Conflict {
        files: set(&["a.txt"]),
        why: "conflict in a.txt".into(),
    };
    let step = l.merged(
        &at(1, &start, &set(&["a.txt"])),
        conflict.clone(),
        Meets::default(),
    );
    let rebase = Rebase {
        task: 1,
        attempt: 1,
        onto: vec![0],
        why: "conflict in a.txt".into(),
    };
    assert_eq!(step, Step::Rebase(rebase.clone()));
    assert_eq!(l.take_asked(), vec![rebase]);
    assert!(l.start(1, "c"), "its next start is the rebase");
    let start = l.arrived(1).unwrap();
    assert_a_rebase_builds_on_task_0_and_goes_back_no_more(&mut l, &start);
}

/// Task 1's rebase (started at `start`) built on task 0: task 0's checks run on its result
/// even though nothing moved, and a failed re-check is a failed attempt.
fn assert_a_rebase_builds_on_task_0_and_goes_back_no_more(l: &mut Ledger, start: &Start) {
    let own = set(&["a.txt"]);
    assert_eq!(
        l.merged(
            &at(1, start, &own),
            clean(&["a.txt"], false),
            Meets::default()
        ),
        Step::Recheck { tasks: vec![1, 0] }
    );
    assert_eq!(
        l.rechecked(
            &at(1, start, &own),
            l.at_fault(start, &own),
            Some("check fails".into())
        ),
        Step::Fail {
            why: "check fails".into()
        }
    );
}

#[test]
fn a_path_the_task_does_not_declare_sends_it_back() {
    let (mut l, start) = one_landed_beside();
    let step = l.merged(
        &at(1, &start, &set(&["b.txt"])),
        clean(&["b.txt", "c.txt"], true),
        Meets::default(),
    );
    let Step::Rebase(r) = step else {
        panic!("{step:?}")
    };
    assert_eq!(
        r.why,
        "the merge changes c.txt, which task 1 does not declare"
    );
    // Nothing landed since shares c.txt: every task landed since is named.
    assert_eq!(r.onto, vec![0]);
}

/// Task 1 sent back for a conflict with task 0 on `a.txt`, its rebase asked for.
fn one_sent_back() -> Ledger {
    let (mut l, start) = one_landed_beside();
    let conflict = Merge::Conflict {
        files: set(&["a.txt"]),
        why: "conflict".into(),
    };
    l.merged(&at(1, &start, &set(&["a.txt"])), conflict, Meets::default());
    assert_eq!(l.take_asked().len(), 1);
    l
}

#[test]
fn a_rebase_asked_for_and_never_started_is_forgotten_at_the_next_integration() {
    let mut l = one_sent_back();
    l.integrating();
    assert!(!l.start(1, "c"));
}

#[test]
fn a_killed_rebase_starts_again_as_a_rebase() {
    let mut l = one_sent_back();
    assert!(l.start(1, "c"));
    l.interrupted(1);
    assert!(l.start(1, "c"));
}

#[test]
fn after_a_crash_a_rebase_onto_committed_tasks_runs_again_as_that_rebase() {
    let mut l = one_sent_back();
    assert!(l.start(1, "c"));
    l.start(2, "c");
    // Killed: task 0's round was committed, 1's rebase and 2's attempt were running.
    let again = l.after_crash(|k| k == 0);
    let rebase = Rebase {
        task: 1,
        attempt: 1,
        onto: vec![0],
        why: "conflict".into(),
    };
    assert_eq!(again, vec![rebase.clone()]);
    assert_eq!(l.landed_tasks().collect::<Vec<_>>(), vec![0]);
    assert!(l.checks_of(0).is_some());
    assert!(!l.start(2, "d"), "an ordinary attempt stays one");
    assert!(l.start(1, "d"), "the rebase starts again as one");
    assert_eq!(l.rebasing(1), Some(&rebase));
    let start = l.arrived(1).unwrap();
    assert_eq!(l.rebasing(1), None);
    assert_a_rebase_builds_on_task_0_and_goes_back_no_more(&mut l, &start);
}

#[test]
fn after_a_crash_what_landed_without_its_commit_did_not_land_nor_a_rebase_onto_it() {
    let mut l = one_sent_back();
    // Asked for and not started when the run was killed; task 0's round never committed.
    let again = l.after_crash(|_| false);
    assert_eq!(again, Vec::new());
    assert_eq!(l.landed_tasks().count(), 0);
    assert!(l.checks_of(0).is_none());
    assert!(!l.start(1, "c"), "an ordinary attempt");
    let start = l.arrived(1).unwrap();
    assert_eq!(
        l.merged(
            &Arrival {
                attempt: 2,
                ..at(1, &start, &set(&["a.txt"]))
            },
            clean(&["a.txt"], false),
            Meets::default(),
        ),
        Step::Land
    );
}

#[test]
fn the_ledger_is_kept_in_one_form() {
    let (mut l, start) = one_landed_beside();
    l.start(2, "c");
    let conflict = Merge::Conflict {
        files: set(&["a.txt"]),
        why: "conflict".into(),
    };
    l.merged(&at(1, &start, &set(&["a.txt"])), conflict, Meets::default());
    let json = serde_json::to_value(&l).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "landed": [{"task": 0, "changed": ["a.txt"], "declared": ["a.txt"]}],
            "started": {"2": {"base": "c", "since": 1}},
            "rebased": {"1": [0]},
            "asked": [{"task": 1, "attempt": 1, "onto": [0], "why": "conflict"}],
            "nextIsRebase": [],
            "checks": {"0": []}
        })
    );
    assert_eq!(serde_json::from_value::<Ledger>(json).unwrap(), l);
}

/// A driver whose re-checks run in a later job (the Action's finalize): every attempt
/// started from the part's base before anything landed.
fn part(ledger: &mut Ledger, task: usize) -> Start {
    ledger.resumed(task, "base", None, Vec::new())
}

/// Attempt 1 of `task`, started at `start`, owning `own`.
fn at<'a>(task: usize, start: &'a Start, own: &'a BTreeSet<String>) -> Arrival<'a> {
    Arrival {
        task,
        attempt: 1,
        start,
        own,
    }
}

#[test]
fn an_action_keeps_a_clean_merge_aside_and_a_later_change_on_its_paths_meets_it() {
    let mut l = Ledger::later();
    let s0 = part(&mut l, 0);
    l.landed(0, set(&["a.txt"]), set(&["a.txt"]), Vec::new());
    let s1 = part(&mut l, 1);
    let own = set(&["a.txt"]);
    // Paths it owns that landed: merged aside, never landed as under `serial`.
    assert_eq!(l.meeting(&s1, &own), vec![0]);
    assert_eq!(l.meeting(&s0, &set(&["b.txt"])), Vec::<usize>::new());
    let meets = Meets {
        checks: vec![0],
        onto: vec![0],
    };
    let step = l.merged(&at(1, &s1, &own), clean(&["a.txt"], false), meets);
    assert_eq!(step, Step::Recheck { tasks: vec![0] });
    // The next one on a.txt meets the landed task and then the merge kept aside.
    let s2 = part(&mut l, 2);
    assert_eq!(l.meeting(&s2, &own), vec![0, 1]);
    // A merge too large to keep is sent back instead, onto what it meets.
    let step = l.cannot_keep(&at(1, &s1, &own), vec![0], "too large".into());
    let Step::Rebase(r) = step else {
        panic!("{step:?}")
    };
    assert_eq!((r.onto, r.why.as_str()), (vec![0], "too large"));
    assert_eq!(l.meeting(&s2, &own), vec![0]);
}

#[test]
fn an_actions_chain_lands_its_passed_prefix_and_the_first_failure_goes_back() {
    let mut l = Ledger::later();
    let own = set(&["a.txt"]);
    let s1 = part(&mut l, 1);
    assert_eq!(
        l.chain_rechecked(&at(1, &s1, &own), &[0], Some(Ok(()))),
        Some(Step::Land)
    );
    l.landed(1, own.clone(), own.clone(), Vec::new());
    let s2 = part(&mut l, 2);
    let failed = l.chain_rechecked(&at(2, &s2, &own), &[0, 1], Some(Err("check".into())));
    let Some(Step::Rebase(r)) = failed else {
        panic!("{failed:?}")
    };
    assert_eq!(r.onto, vec![0, 1]);
    // Re-checked beside a change that does not land: void, merged again, whatever it said.
    let s3 = part(&mut l, 3);
    assert_eq!(
        l.chain_rechecked(&at(3, &s3, &own), &[2], Some(Ok(()))),
        None
    );
    let on_tree = |k: usize| k != 2;
    assert_eq!(l.merge_again_onto(&s3, &own, &[0, 2], on_tree), vec![0, 1]);
    // Sent back: it builds on every merge kept aside on its paths, those kept after it too.
    let meets = Meets {
        checks: vec![0, 1],
        onto: vec![1],
    };
    let step = l.merged(&at(3, &s3, &own), clean(&["a.txt"], true), meets);
    assert_eq!(step, Step::Recheck { tasks: vec![0, 1] });
    assert_eq!(l.building_on_aside(), vec![(2, vec![3])]);
}

#[test]
fn an_actions_rebase_fails_only_when_what_it_built_on_landed() {
    let mut l = Ledger::later();
    let own = set(&["a.txt"]);
    // Task 2's rebase started with task 1's merge kept aside, which did not land.
    let s2 = l.resumed(2, "base", Some(vec![1]), vec![1]);
    assert_eq!(l.not_landed(&s2), vec![1]);
    assert!(!l.lands_as_built(&s2, &[]));
    let cannot = CannotLand {
        onto: vec![],
        why: "it failed beside task 1".into(),
    };
    assert!(matches!(
        l.refused(&at(2, &s2, &own), cannot.clone()),
        Step::Rebase(_)
    ));
    // Task 3's rebase built on task 1, which landed: it lands as built, or fails.
    l.landed(1, own.clone(), own.clone(), Vec::new());
    let s3 = l.resumed(3, "base", Some(vec![1]), vec![1]);
    assert!(l.lands_as_built(&s3, &[1]));
    assert!(!l.lands_as_built(&s3, &[1, 0]));
    assert_eq!(
        l.refused(&at(3, &s3, &own), cannot),
        Step::Fail {
            why: "it failed beside task 1".into()
        }
    );
}

#[test]
fn the_conductor_meets_the_branchs_history_since_a_start_and_names_whoever_holds_those_paths() {
    let mut l = Ledger::later();
    // Landed before the batch: task 0 declares a.txt, task 1 b.txt.
    l.landed(0, BTreeSet::new(), set(&["a.txt"]), Vec::new());
    l.landed(1, BTreeSet::new(), set(&["b.txt"]), Vec::new());
    let s3 = l.resumed(3, "base", None, Vec::new());
    let s4 = l.resumed(4, "base", None, Vec::new());
    // Nothing moved under c.txt since its base: it lands as under `serial`.
    assert_eq!(
        l.meeting_history(&s3, set(&["a.txt"]), &set(&["c.txt"])),
        None
    );
    l.landed(3, set(&["c.txt"]), set(&["c.txt"]), Vec::new());
    // a.txt moved on the branch (task 0 declares it), c.txt in the batch (task 3).
    let own = set(&["a.txt", "c.txt"]);
    assert_eq!(
        l.meeting_history(&s4, set(&["a.txt"]), &own),
        Some(vec![0, 3])
    );
}

/// A driver that records what the ledger's sequence asked of it: its merge's outcome and its
/// re-check's are given.
struct Scripted {
    merge: Merge,
    rechecked: Rechecked,
    calls: Vec<String>,
}

impl super::Driver for Scripted {
    type Error = ();

    fn merge(&mut self, a: &Arrival<'_>) -> Result<Merge, ()> {
        self.calls.push(format!("merge {}", a.task));
        Ok(self.merge.clone())
    }

    fn recheck(&mut self, _: &Ledger, _: &Arrival<'_>, tasks: Vec<usize>) -> Result<Rechecked, ()> {
        self.calls.push(format!("recheck {tasks:?}"));
        Ok(self.rechecked.clone())
    }

    fn land(&mut self, l: &mut Ledger, changed: BTreeSet<String>) -> Result<(), ()> {
        self.calls.push(format!("land {changed:?}"));
        l.landed(1, changed, BTreeSet::new(), Vec::new());
        Ok(())
    }

    fn send_back(&mut self, _: &mut Ledger, step: Step) -> Result<(), ()> {
        self.calls.push(format!("back {step:?}"));
        Ok(())
    }
}

#[test]
fn one_arrivals_sequence_calls_each_drivers_io_as_the_rules_decide() {
    let own = set(&["a.txt"]);
    let run = |l: &mut Ledger, start: &Start, merge: Merge, rechecked: Rechecked, meets| {
        let mut d = Scripted {
            merge,
            rechecked,
            calls: Vec::new(),
        };
        let step = l.integrate(&mut d, &at(1, start, &own), meets).unwrap();
        (step, d.calls)
    };
    // Task 0 landed on a.txt since its start: re-checked now with task 0's checks; passed, it
    // lands.
    let (mut l, s) = one_landed_beside();
    let (step, calls) = run(
        &mut l,
        &s,
        clean(&["a.txt"], false),
        Rechecked::Ran(None),
        Meets::default(),
    );
    assert_eq!(step, Step::Land);
    assert_eq!(calls, ["merge 1", "recheck [1, 0]", r#"land {"a.txt"}"#]);
    // Failed, it goes back onto the task at fault.
    let (mut l, s) = one_landed_beside();
    let failed = Rechecked::Ran(Some("check".into()));
    let (step, calls) = run(
        &mut l,
        &s,
        clean(&["a.txt"], false),
        failed,
        Meets::default(),
    );
    assert!(
        matches!(&step, Step::Rebase(r) if r.onto == [0]),
        "{step:?}"
    );
    assert_eq!(calls.len(), 3);
    // Kept aside for a later job: it waits, nothing lands; too large to keep: sent back.
    let meets = || Meets {
        checks: vec![0],
        onto: vec![0],
    };
    let mut l = Ledger::later();
    let s = part(&mut l, 1);
    let (step, calls) = run(
        &mut l,
        &s,
        clean(&["a.txt"], true),
        Rechecked::Kept,
        meets(),
    );
    assert_eq!(step, Step::Recheck { tasks: vec![0] });
    assert_eq!(calls, ["merge 1", "recheck [0]"]);
    let mut l = Ledger::later();
    let too_large = Rechecked::NotKept("too large".into());
    let (step, calls) = run(&mut l, &s, clean(&["a.txt"], true), too_large, meets());
    assert!(
        matches!(&step, Step::Rebase(r) if r.why == "too large"),
        "{step:?}"
    );
    assert_eq!(l.building_on_aside(), vec![(1, vec![])]);
    assert_eq!(calls.len(), 3);
    // A conflict is never re-checked.
    let conflict = Merge::Conflict {
        files: set(&["a.txt"]),
        why: "conflict".into(),
    };
    let (step, calls) = run(&mut Ledger::later(), &s, conflict, Rechecked::Kept, meets());
    assert!(matches!(step, Step::Rebase(_)));
    assert_eq!(calls.len(), 2);
}

/// The world a run meets: each task's declared paths and the ones each of its attempts
/// changes (some of them), the pairs that edit the same lines, the pairs where the first's
/// change breaks the second's check (it changes a path the second declares), and which of a
/// task's runs fail by themselves.
#[derive(Debug, Clone)]
struct World {
    paths: Vec<BTreeSet<String>>,
    changes: Vec<BTreeSet<String>>,
    conflicts: BTreeSet<(usize, usize)>,
    breaks: BTreeSet<(usize, usize)>,
    /// Bit `r` of task `i`: its run `r` fails its own checks.
    flaky: Vec<u8>,
}

impl World {
    fn conflict(&self, a: usize, b: usize) -> bool {
        self.conflicts.contains(&(a.min(b), a.max(b)))
    }

    /// Whether `a`'s change meets a path `b` declares or changes.
    fn meets(&self, a: usize, b: usize) -> bool {
        !self.changes[a].is_disjoint(&self.paths[b])
            || !self.changes[a].is_disjoint(&self.changes[b])
    }
}

fn arb_world() -> impl Strategy<Value = World> {
    (2usize..7).prop_flat_map(|n| {
        let paths = proptest::collection::vec(proptest::collection::btree_set(0u8..4, 1..3), n);
        let pairs = proptest::collection::btree_set((0..n, 0..n), 0..n * 2);
        let breaks = proptest::collection::btree_set((0..n, 0..n), 0..n);
        let flaky = proptest::collection::vec(any::<u8>().prop_map(|b| b & b >> 1), n);
        let masks = proptest::collection::vec(any::<u8>(), n);
        (paths, masks, pairs, breaks, flaky).prop_map(|(paths, masks, pairs, breaks, flaky)| {
            let paths: Vec<BTreeSet<String>> = paths
                .into_iter()
                .map(|p| p.into_iter().map(|f| format!("f{f}")).collect())
                .collect();
            let changes = paths
                .iter()
                .zip(masks)
                .map(|(p, m)| {
                    let some: BTreeSet<String> = p
                        .iter()
                        .enumerate()
                        .filter(|(k, _)| m >> k & 1 == 1)
                        .map(|(_, f)| f.clone())
                        .collect();
                    if some.is_empty() {
                        p.iter().take(1).cloned().collect()
                    } else {
                        some
                    }
                })
                .collect();
            let mut w = World {
                paths,
                changes,
                conflicts: BTreeSet::new(),
                breaks: BTreeSet::new(),
                flaky,
            };
            w.conflicts = pairs
                .into_iter()
                .filter(|&(a, b)| a < b && !w.changes[a].is_disjoint(&w.changes[b]))
                .collect();
            w.breaks = breaks
                .into_iter()
                .filter(|&(a, b)| a != b && w.meets(a, b))
                .collect();
            w
        })
    })
}

/// How a task's attempt was charged.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Charge {
    /// Its worker's result failed.
    Worker,
    /// It could not land after it was sent back.
    AfterRebase,
}

#[derive(Debug, Clone, PartialEq)]
enum TaskState {
    /// Waiting to start this attempt.
    Queued(u32),
    /// Running this attempt from this tree (the tasks landed when it started).
    Running(u32, Vec<usize>),
    /// Sent back, its rebase of this attempt not asked for yet.
    SentBack(u32),
    Landed,
    Failed,
}

/// A run of the local executor's loop in `world`, driven by `ops`: whom it starts, which
/// arrive together and in which order, when it is killed; then run to its end.
struct Driver<'w> {
    world: &'w World,
    ledger: Ledger,
    tree: Vec<usize>,
    state: Vec<TaskState>,
    charges: Vec<Vec<Charge>>,
    runs: Vec<u32>,
    /// Whether the task was sent back since it last ended or landed.
    sent: Vec<bool>,
    rebases: Vec<u32>,
}

impl Driver<'_> {
    fn start(&mut self, task: usize) {
        let TaskState::Queued(attempt) = self.state[task] else {
            return;
        };
        let rebase = self.ledger.start(task, &format!("{:?}", self.tree));
        assert!(
            !rebase || self.sent[task],
            "task {task}: a rebase nobody asked for"
        );
        self.state[task] = TaskState::Running(attempt, self.tree.clone());
    }

    /// Task `task`'s attempt arrives, as the local executor integrates it.
    fn arrive(&mut self, task: usize) {
        let TaskState::Running(attempt, base) = self.state[task].clone() else {
            return;
        };
        let w = self.world;
        let start = self.ledger.arrived(task).expect("it started");
        let run = self.runs[task];
        self.runs[task] += 1;
        let own_fail = w.flaky[task] >> (run % 8) & 1 == 1
            || base.iter().any(|&a| w.breaks.contains(&(a, task)));
        if own_fail {
            self.charge(task, attempt, Charge::Worker);
            self.ledger.ended(task);
            return;
        }
        let since: Vec<usize> = self.tree[start.since..].to_vec();
        let mine = w.paths[task].clone();
        let changed = w.changes[task].clone();
        let merge = match since.iter().find(|&&k| w.conflict(task, k)) {
            Some(&k) => Merge::Conflict {
                files: changed.intersection(&w.changes[k]).cloned().collect(),
                why: format!("conflict with {k}"),
            },
            None => Merge::Clean {
                changed: changed.clone(),
                combined: since.iter().any(|&k| !w.changes[k].is_disjoint(&changed)),
            },
        };
        let a = Arrival {
            task,
            attempt,
            start: &start,
            own: &mine,
        };
        let mut step = self.ledger.merged(&a, merge, Meets::default());
        if let Step::Recheck { tasks } = &step {
            assert_eq!(tasks.first(), Some(&task), "its own checks run first");
            let broken = tasks.iter().any(|&b| {
                w.breaks.contains(&(task, b))
                    || (b == task && self.tree.iter().any(|&a| w.breaks.contains(&(a, task))))
            });
            let failed = broken.then(|| "a check fails".to_string());
            let onto = self.ledger.at_fault(&start, &changed);
            step = self.ledger.rechecked(&a, onto, failed);
        }
        match step {
            Step::Land => {
                self.promise_kept(task, &base, &since);
                assert!(!self.tree.contains(&task), "{task} landed twice");
                self.tree.push(task);
                self.ledger.landed(task, changed, mine, Vec::new());
                self.state[task] = TaskState::Landed;
                self.sent[task] = false;
            }
            Step::Rebase(r) => {
                assert!(
                    !self.sent[task],
                    "{task} sent back twice in one integration"
                );
                assert_eq!((r.task, r.attempt), (task, attempt));
                assert!(
                    r.onto.iter().all(|k| since.contains(k)),
                    "{r:?} onto {since:?}"
                );
                self.sent[task] = true;
                self.rebases[task] += 1;
                self.state[task] = TaskState::SentBack(attempt);
            }
            Step::Fail { .. } => {
                assert!(self.sent[task], "{task} charged for its first send-back");
                self.charge(task, attempt, Charge::AfterRebase);
                let for_good = self.state[task] == TaskState::Failed;
                self.ledger.failed(task, for_good);
            }
            Step::Recheck { .. } => unreachable!("decided above"),
        }
    }

    /// The promise a landing keeps: no conflict lands, and the checks of the task and of
    /// every task landed since its base (`since`) whose paths its merge touched pass (those
    /// landed before its base ran in its own attempt).
    fn promise_kept(&self, task: usize, base: &[usize], since: &[usize]) {
        let w = self.world;
        for &k in since {
            assert!(
                !w.conflict(task, k),
                "{task} landed over a conflict with {k}"
            );
            if w.meets(task, k) {
                assert!(!w.breaks.contains(&(task, k)), "{task} broke {k}'s check");
                assert!(!w.breaks.contains(&(k, task)), "{k} broke {task}'s check");
            }
        }
        for &a in base {
            assert!(
                !w.breaks.contains(&(a, task)),
                "{task}'s check fails on landing"
            );
        }
    }

    fn charge(&mut self, task: usize, attempt: u32, why: Charge) {
        self.charges[task].push(why);
        assert_eq!(self.charges[task].len(), attempt as usize);
        self.state[task] = if attempt >= MAX_ATTEMPTS {
            TaskState::Failed
        } else {
            TaskState::Queued(attempt + 1)
        };
        if why == Charge::Worker {
            self.sent[task] = false;
        }
    }

    /// The batch `batch` arrives in that order: one integration, then the rebases it asked for
    /// start.
    fn integrate(&mut self, batch: &[usize]) {
        self.ledger.integrating();
        for &t in batch {
            self.arrive(t);
        }
        for r in self.ledger.take_asked() {
            assert_eq!(self.state[r.task], TaskState::SentBack(r.attempt));
            self.state[r.task] = TaskState::Queued(r.attempt);
            self.start(r.task);
        }
    }

    /// Killed: the ledger is reloaded from its serialised form, and the attempts that were
    /// running start again.
    fn kill(&mut self) {
        let json = serde_json::to_string(&self.ledger).unwrap();
        let reloaded: Ledger = serde_json::from_str(&json).unwrap();
        assert_eq!(reloaded, self.ledger);
        self.ledger = reloaded;
        let running: Vec<usize> = (0..self.state.len())
            .filter(|&t| matches!(self.state[t], TaskState::Running(..)))
            .collect();
        for &t in &running {
            self.ledger.interrupted(t);
            if let TaskState::Running(a, _) = self.state[t] {
                self.state[t] = TaskState::Queued(a);
            }
        }
        for t in running {
            self.start(t);
        }
    }

    fn running(&self) -> Vec<usize> {
        (0..self.state.len())
            .filter(|&t| matches!(self.state[t], TaskState::Running(..)))
            .collect()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Whatever the arrival order, the overlaps, the failing checks and the kills: every task
    /// lands exactly once or fails, nothing is left waiting, a send-back is uncounted the
    /// first time in an integration and counted after, and a task fails only when each of its
    /// attempts was charged for its own failure or for not landing after its rebase.
    #[test]
    fn every_change_lands_once_and_attempts_are_charged_as_documented(
        world in arb_world(),
        ops in proptest::collection::vec((0u8..4, any::<u16>()), 0..60),
    ) {
        let n = world.paths.len();
        let mut sim = Driver {
            world: &world,
            ledger: Ledger::default(),
            tree: Vec::new(),
            state: vec![TaskState::Queued(1); n],
            charges: vec![Vec::new(); n],
            runs: vec![0; n],
            sent: vec![false; n],
            rebases: vec![0; n],
        };
        let mut ops = ops.into_iter();
        for _ in 0..10_000 {
            let queued: Vec<usize> = (0..n).filter(|&t| matches!(sim.state[t], TaskState::Queued(_))).collect();
            let running = sim.running();
            if queued.is_empty() && running.is_empty() {
                break;
            }
            let (op, pick) = ops.next().unwrap_or((1, u16::MAX));
            match op {
                0 if !queued.is_empty() => sim.start(queued[pick as usize % queued.len()]),
                2 => sim.kill(),
                3 => {
                    // A reload between two steps, nothing lost.
                    let json = serde_json::to_value(&sim.ledger).unwrap();
                    sim.ledger = serde_json::from_value(json).unwrap();
                }
                _ if running.is_empty() => {
                    for t in queued {
                        sim.start(t);
                    }
                }
                _ => {
                    // A random non-empty batch of the running attempts, in a random order.
                    let mut batch: Vec<usize> = running
                        .iter()
                        .enumerate()
                        .filter(|(k, _)| pick >> (k % 16) & 1 == 1)
                        .map(|(_, &t)| t)
                        .collect();
                    if batch.is_empty() {
                        batch.push(running[pick as usize % running.len()]);
                    }
                    let turn = pick as usize % batch.len();
                    batch.rotate_left(turn);
                    sim.integrate(&batch);
                }
            }
        }
        let mut landed = sim.tree.clone();
        landed.sort_unstable();
        landed.dedup();
        prop_assert_eq!(landed.len(), sim.tree.len(), "a task landed twice");
        prop_assert_eq!(sim.ledger.landed_tasks().collect::<Vec<_>>(), sim.tree.clone());
        for t in 0..n {
            match &sim.state[t] {
                TaskState::Landed => prop_assert!(sim.charges[t].len() < MAX_ATTEMPTS as usize),
                TaskState::Failed => prop_assert_eq!(sim.charges[t].len(), MAX_ATTEMPTS as usize),
                other => prop_assert!(false, "task {} left {:?}", t, other),
            }
            let worker = sim.charges[t].iter().filter(|c| **c == Charge::Worker).count();
            prop_assert!(
                sim.rebases[t] as usize <= 1 + worker,
                "task {} rebased {} times with {} failures of its own", t, sim.rebases[t], worker
            );
        }
        prop_assert!(sim.ledger.started.is_empty() && sim.ledger.asked.is_empty());
    }
}
