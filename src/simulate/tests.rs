//! Small plans whose schedules are computed by hand in the comments.

use super::durations::with_history;
use super::*;
use crate::testing::{plan_of, task};
use serde_json::json;

const S: u64 = 1000;

/// Tasks `(blockers, files modified, seconds)`.
fn plan(tasks: &[(&[usize], &[&str], u64)]) -> (Plan, DurationInput) {
    let p = plan_of(
        tasks
            .iter()
            .enumerate()
            .map(|(i, (deps, files, _))| {
                let mut t = task(deps, &[], files);
                t.subject = format!("task {i}");
                t
            })
            .collect(),
    );
    let input = DurationInput {
        per_task: tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (i, t.2 * S))
            .collect(),
        use_history: true,
        ..Default::default()
    };
    (p, input)
}

fn setting(jobs: usize, max_parallel: usize, job_start: u64) -> Setting {
    Setting {
        jobs,
        max_parallel,
        job_start: job_start * S,
        remaining: false,
    }
}

fn report(p: &Plan, input: &DurationInput, s: Setting) -> Report {
    let dag = Dag::build(p).unwrap();
    let m = OverlapMatrix::compute(p, &dag);
    let times = durations::durations(p, input).unwrap();
    predict(p, &dag, &m, &times, s)
}

/// (wall s, jobs) of each prediction: local rounds, waves, eager; Actions rounds, eager.
fn walls(r: &Report) -> Vec<(u64, u64)> {
    r.predictions
        .iter()
        .map(|p| {
            assert_eq!(p.deadlock, None);
            (p.wall / S, p.jobs)
        })
        .collect()
}

#[test]
fn chain() {
    // 0 → 1 → 2 taking 10, 20, 30 s: 60 s whatever the schedule, locally.
    // Actions rounds: per run 5 (plan) + 5 + d (work) + 5 (finalize): 25 + 35 + 45 = 105 s,
    // 3 jobs per run. Eager: 5 (conductor) + 15 + 25 + 35 = 80 s, 1 + 3 jobs.
    let (p, d) = plan(&[(&[], &[], 10), (&[0], &[], 20), (&[1], &[], 30)]);
    let r = report(&p, &d, setting(2, 2, 5));
    assert_eq!(walls(&r), [(60, 3), (60, 3), (60, 3), (105, 9), (80, 4)]);
    assert_eq!(r.local_bound.value, 60 * S);
    assert_eq!(r.local_bound.critical_path, 60 * S);
    // Each task's job start-up counted: 15 + 25 + 35.
    assert_eq!(r.actions_bound.value, 75 * S);
    assert_eq!(r.predictions[3].rounds, 3);
    assert_eq!(r.predictions[4].rounds, 1);
    let eager = &r.predictions[4];
    assert_eq!(
        eager.spans[1],
        Span {
            task: 1,
            attempt: 1,
            start: 20 * S,
            work: 25 * S,
            end: 45 * S,
            failed: false
        }
    );
}

#[test]
fn diamond_and_one_job() {
    // 0 → {1, 2} → 3 taking 10, 20, 40, 10 s. Two jobs: 10 + 40 + 10 = 60 s.
    let (p, d) = plan(&[
        (&[], &[], 10),
        (&[0], &[], 20),
        (&[0], &[], 40),
        (&[1, 2], &[], 10),
    ]);
    let r = report(&p, &d, setting(2, 2, 0));
    assert_eq!(r.predictions[0].wall, 60 * S);
    assert_eq!(r.predictions[2].wall, 60 * S);
    // No start-up: the Action's rounds equal the local ones, and so does eager.
    assert_eq!(r.predictions[3].wall, 60 * S);
    assert_eq!(r.predictions[4].wall, 60 * S);
    // One job: everything in sequence, 80 s; the bound is the work. On Actions three
    // workflow runs ({0}, {1, 2}, {3}): 2 × 3 + 4 jobs.
    let r = report(&p, &d, setting(1, 1, 0));
    assert_eq!(walls(&r), [(80, 4), (80, 4), (80, 4), (80, 10), (80, 5)]);
    assert_eq!(r.local_bound.value, 80 * S);
    assert_eq!(r.ratio(&r.predictions[0]), Some(1.0));
}

#[test]
fn eager_beats_rounds_when_durations_vary() {
    // 0 (10 s) → 2 (10 s) → 3 (20 s); 1 (30 s) alone. Two jobs.
    // Rounds: {0, 1} 30 s, {2} 10 s, {3} 20 s = 60 s. Eager: 2 starts at 10, 3 at 20, ends 40.
    let (p, d) = plan(&[
        (&[], &[], 10),
        (&[], &[], 30),
        (&[0], &[], 10),
        (&[2], &[], 20),
    ]);
    let r = report(&p, &d, setting(2, 2, 0));
    assert_eq!(r.predictions[0].wall, 60 * S);
    assert_eq!(r.predictions[0].rounds, 3);
    assert_eq!(r.predictions[2].wall, 40 * S);
    assert_eq!(r.predictions[2].rounds, 4);
    // Bound: critical path 0 → 2 → 3 = 40 s, work 70 / 2 = 35 s.
    assert_eq!(r.local_bound.value, 40 * S);
    assert_eq!(r.ratio(&r.predictions[2]), Some(1.0));
    assert_eq!(r.ratio(&r.predictions[0]), Some(1.5));
}

#[test]
fn conflicting_tasks() {
    // 0 and 1 modify the same file; 2 is alone; 10 s each, three jobs, 5 s start-up.
    // rounds: one round, groups {0, 2} then {1}: 20 s. waves: {0, 2}, then {1}: 20 s.
    // eager: 0 and 2, then 1 once 0 is integrated: 20 s.
    // Actions rounds: run {0, 2}: 5 + 15 + 5; run {1}: 25 → 50 s, 4 + 3 jobs.
    // Actions eager: 5 + 15, then 1: 35 s, 1 + 3 jobs.
    let (p, d) = plan(&[(&[], &["a"], 10), (&[], &["a"], 10), (&[], &[], 10)]);
    let r = report(&p, &d, setting(3, 3, 5));
    assert_eq!(walls(&r), [(20, 3), (20, 3), (20, 3), (50, 7), (35, 4)]);
    assert_eq!(
        r.predictions.iter().map(|p| p.rounds).collect::<Vec<_>>(),
        [1, 2, 2, 2, 1]
    );
    let starts =
        |k: usize| -> Vec<u64> { r.predictions[k].spans.iter().map(|s| s.start / S).collect() };
    assert_eq!(starts(0), [0, 10, 0]);
    assert_eq!(starts(4), [5, 20, 5]);
    // The bound ignores conflicts: 10 s.
    assert_eq!(r.local_bound.value, 10 * S);
}

#[test]
fn jobs_limit_queues_in_plan_order() {
    // Three independent 10 s tasks on two slots: 20 s locally; on Actions the matrix runs
    // two jobs at once: 5 + (15, 15 then 15) + 5 = 40 s, 5 jobs.
    let (p, d) = plan(&[(&[], &[], 10), (&[], &[], 10), (&[], &[], 10)]);
    let r = report(&p, &d, setting(2, 2, 5));
    assert_eq!(walls(&r), [(20, 3), (20, 3), (20, 3), (40, 5), (35, 4)]);
    assert_eq!(r.predictions[0].spans[2].start, 10 * S);
}

#[test]
fn eager_fills_free_slots_before_integrating_like_the_runner() {
    // One job. 0 (10 s) heads 0 → 3 → 4; 1 and 2 are alone (10 s). At 10 s task 0 arrives:
    // the runner fills the free slot before integrating it, so 1 (ready already) starts, not
    // 3 (ready only once 0 is integrated). At 20 s, 3 is ready and heads a chain: it starts;
    // at 30 s it arrives and 2 (ready) starts before 4 (ready once 3 is integrated).
    let (p, d) = plan(&[
        (&[], &[], 10),
        (&[], &[], 10),
        (&[], &[], 10),
        (&[0], &[], 10),
        (&[3], &[], 10),
    ]);
    let r = report(&p, &d, setting(1, 1, 0));
    let eager = &r.predictions[2];
    let starts: Vec<u64> = eager.spans.iter().map(|s| s.start / S).collect();
    assert_eq!(starts, [0, 10, 30, 20, 40]);
    assert_eq!(eager.wall, 50 * S);
}

#[test]
fn failed_attempts_from_history() {
    // Task 0 failed after 10 s, then completed in 20 s; task 1 completed in 30 s. Two jobs,
    // 5 s start-up.
    // Local: the retry takes its slot again at once: 0 ends at 30, as does 1; 3 attempts.
    // Actions rounds: run 1: plan to 5, 0 fails at 20, 1 ends at 40, finalize to 45; run 2:
    // plan to 50, 0's job from 50 (its work from 55) to 75, finalize to 80: 80 s, 4 + 3 jobs.
    // Actions eager: conductor to 5; 0 fails at 20 and is dispatched again, ends at 45.
    let p = with_history(
        plan_of(vec![task(&[], &[], &[]), task(&[], &[], &[])]),
        json!([
            {"task": 0, "attempt": 1, "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:00:10Z", "seconds": 10.0, "outcome": "failed"},
            {"task": 1, "attempt": 1, "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:00:30Z", "seconds": 30.0, "outcome": "completed"},
            {"task": 0, "attempt": 2, "start": "2026-01-01T00:00:10Z", "end": "2026-01-01T00:00:30Z", "seconds": 20.0, "outcome": "completed"},
        ]),
    );
    let input = DurationInput {
        use_history: true,
        ..Default::default()
    };
    let r = report(&p, &input, setting(2, 2, 5));
    assert_eq!(walls(&r), [(30, 3), (30, 3), (30, 3), (80, 7), (45, 4)]);
    assert_eq!(r.predictions[3].rounds, 2);
    let spans = &r.predictions[3].spans;
    assert!(spans[0].failed && !spans[1].failed);
    assert_eq!(
        (spans[1].start, spans[1].work, spans[1].end),
        (50 * S, 55 * S, 75 * S)
    );
    // Bounds: locally 30 s; on Actions task 0 costs 10 + 20 + 2 × 5 = 40 s.
    assert_eq!(r.local_bound.value, 30 * S);
    assert_eq!(r.actions_bound.value, 40 * S);
}

#[test]
fn remaining_keeps_completed_tasks_done() {
    let (mut p, d) = plan(&[(&[], &[], 10), (&[0], &[], 20), (&[1], &[], 30)]);
    p.tasks[0].status = Status::Completed;
    p.tasks[1].status = Status::Failed;
    let mut s = setting(2, 2, 0);
    s.remaining = true;
    let r = report(&p, &d, s);
    assert_eq!(r.tasks, 2);
    assert_eq!(r.predictions[0].wall, 50 * S);
    assert_eq!(r.local_bound.value, 50 * S);
    // Without it, the whole plan again.
    let r = report(&p, &d, setting(2, 2, 0));
    assert_eq!(r.tasks, 3);
    assert_eq!(r.predictions[0].wall, 60 * S);
}

#[test]
fn waves_out_of_dependency_order_deadlock() {
    // Task 0 in wave 1 waits for task 1 in wave 2: waves never starts 1.
    let (mut p, d) = plan(&[(&[1], &[], 10), (&[], &[], 10)]);
    p.tasks[0].wave = Some(1);
    p.tasks[1].wave = Some(2);
    let r = report(&p, &d, setting(1, 1, 0));
    assert_eq!(r.predictions[1].deadlock, Some(2));
    assert_eq!(r.predictions[0].deadlock, None);
    assert!(
        render::table(&r, &durations::durations(&p, &d).unwrap()).contains("deadlock (2 left)")
    );
}

#[test]
fn empty_plan() {
    let (p, d) = plan(&[]);
    let r = report(&p, &d, setting(1, 1, 5));
    assert_eq!(r.local_bound.value, 0);
    assert_eq!(r.ratio(&r.predictions[0]), None);
    assert_eq!(r.predictions[4].wall, 5 * S);
}

#[test]
fn human_times() {
    use render::human;
    assert_eq!(human(0), "0s");
    assert_eq!(human(4_240), "4.2s");
    assert_eq!(human(59_940), "59.9s");
    assert_eq!(human(60_000), "1m");
    assert_eq!(human(750_400), "12m30s");
    assert_eq!(human(3_720_000), "1h2m");
    assert_eq!(human(7_200_000), "2h");
}

/// A plan with a little of everything: history with a retry, a given duration, the median for
/// the rest, a conflict and a chain.
fn showcase() -> (Plan, Durations, Report) {
    let mut p = plan_of(vec![
        task(&[], &[], &["src/lib.rs"]),
        task(&[], &[], &["src/lib.rs"]),
        task(&[0], &[], &["src/parse.rs"]),
        task(&[2], &[], &["docs/parse.md"]),
        task(&[], &[], &["README.md"]),
        task(&[1, 3], &[], &["tests/all.rs"]),
    ]);
    let subjects = [
        "Add the config loader",
        "Wire logging",
        "Parse the new plan format with full error recovery",
        "Document the parser",
        "Update the README",
        "End-to-end tests",
    ];
    for (t, s) in p.tasks.iter_mut().zip(subjects) {
        t.subject = s.into();
    }
    let p = with_history(
        p,
        json!([
            {"task": 0, "attempt": 1, "seconds": 300.0, "outcome": "completed"},
            {"task": 1, "attempt": 1, "seconds": 120.0, "outcome": "failed"},
            {"task": 1, "attempt": 2, "seconds": 240.0, "outcome": "completed"},
            {"task": 2, "attempt": 1, "seconds": 900.0, "outcome": "completed"},
        ]),
    );
    let mut input = DurationInput {
        use_history: true,
        ..Default::default()
    };
    input.per_task.insert(5, 600 * S);
    let times = durations::durations(&p, &input).unwrap();
    let dag = Dag::build(&p).unwrap();
    let m = OverlapMatrix::compute(&p, &dag);
    let r = predict(&p, &dag, &m, &times, setting(2, 4, 30));
    (p, times, r)
}

#[test]
fn snapshot_table_and_gantt() {
    let (p, times, r) = showcase();
    let mut text = render::table(&r, &times);
    for k in [0, 2, 3, 4] {
        text.push('\n');
        text.push_str(&render::gantt(&p, &r.predictions[k], 80));
    }
    insta::assert_snapshot!("table_and_gantt", text);
}

#[test]
fn snapshot_json() {
    let (_, times, r) = showcase();
    let mut v = render::json(&r, &times);
    // The attempts are covered by the table's Gantt charts; keep one schedule's here.
    for s in v["schedules"].as_array_mut().unwrap().iter_mut().skip(1) {
        s["attempts"] = json!("…");
    }
    insta::assert_snapshot!("json", serde_json::to_string_pretty(&v).unwrap());
}

#[test]
fn gantt_is_deterministic_and_fits_the_width() {
    let (p, _, r) = showcase();
    for width in [40, 80, 200] {
        let g = render::gantt(&p, &r.predictions[4], width);
        assert_eq!(g, render::gantt(&p, &r.predictions[4], width));
        for line in g.lines().skip(1) {
            assert!(
                line.chars().count() <= width.max(40),
                "{line:?} exceeds {width}"
            );
        }
    }
}

#[test]
fn round_counts_match_the_engines_dry_run() {
    // `run --dry-run`'s rounds (rounds, waves) and the Action's batches (eager's dry run) are
    // the rounds and workflow runs simulated.
    let (p, d) = plan(&[
        (&[], &["a"], 3),
        (&[], &["a"], 4),
        (&[0], &[], 5),
        (&[1, 2], &["b"], 6),
    ]);
    let dag = Dag::build(&p).unwrap();
    let m = OverlapMatrix::compute(&p, &dag);
    let r = report(&p, &d, setting(2, 2, 1));
    for (k, schedule) in [(0, Schedule::Rounds), (1, Schedule::Waves)] {
        let (batches, _) = engine::simulate(&p, &dag, &m, schedule, None);
        assert_eq!(r.predictions[k].rounds, batches.len() as u64);
    }
    let (batches, _) = engine::simulate(&p, &dag, &m, Schedule::Eager, None);
    assert_eq!(r.predictions[3].rounds, batches.len() as u64);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Random plans: blockers point backwards, files from a pool of 4, 1–9 s per task, and
    /// now and then a failed attempt first.
    /// A task: blockers, files (pool indices), attempts' seconds.
    type Spec = Vec<(Vec<usize>, Vec<u8>, Vec<u64>)>;

    fn arb() -> impl Strategy<Value = (Spec, usize, usize, u64)> {
        let tasks = (1usize..25).prop_flat_map(|n| {
            (0..n)
                .map(|i| {
                    (
                        proptest::collection::vec(0..i.max(1), 0..=i.min(3)),
                        proptest::collection::vec(0u8..4, 0..2),
                        proptest::collection::vec(1u64..10, 1..3),
                    )
                })
                .collect::<Vec<_>>()
        });
        (tasks, 1usize..5, 1usize..5, 0u64..4)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Every prediction: each attempt once, in order; a task starts after its blockers
        /// ended; never more attempts at once than slots; conflicting tasks never overlap in
        /// eager, rounds or waves (attempt by attempt: on Actions a task's retry waits for a later
        /// workflow run, and another may run in between); never below the bound.
        #[test]
        fn schedules_respect_the_rules((spec, jobs, max_parallel, js) in arb()) {
            let names = ["a", "b", "c", "d"];
            let mut p = plan_of(spec.iter().enumerate().map(|(i, (deps, files, _))| {
                let deps: Vec<usize> = deps.iter().copied().filter(|&d| d < i).collect();
                let files: Vec<&str> = files.iter().map(|&f| names[f as usize]).collect();
                task(&deps, &[], &files)
            }).collect());
            let records: Vec<serde_json::Value> = spec.iter().enumerate().flat_map(|(i, (_, _, attempts))| {
                let last = attempts.len() - 1;
                attempts.iter().enumerate().map(move |(k, &s)| json!({
                    "task": i, "seconds": s as f64,
                    "outcome": if k == last { "completed" } else { "failed" },
                }))
            }).collect();
            p = with_history(p, json!(records));
            let input = DurationInput { use_history: true, ..Default::default() };
            let r = report(&p, &input, setting(jobs, max_parallel, js));
            let dag = Dag::build(&p).unwrap();
            let m = OverlapMatrix::compute(&p, &dag);
            for pr in &r.predictions {
                prop_assert_eq!(pr.deadlock, None);
                let slots = match pr.place { Place::Local => jobs, Place::Actions => max_parallel };
                let startup = match pr.place { Place::Local => 0, Place::Actions => js * S };
                // Each attempt once, in order, with its time.
                let mut k = 0;
                for (i, (_, _, attempts)) in spec.iter().enumerate() {
                    for (a, &secs) in attempts.iter().enumerate() {
                        let s = pr.spans[k];
                        prop_assert_eq!((s.task, s.attempt as usize), (i, a + 1));
                        prop_assert_eq!(s.work - s.start, startup);
                        prop_assert_eq!(s.end - s.work, secs * S);
                        prop_assert_eq!(s.failed, a + 1 < attempts.len());
                        if a > 0 {
                            prop_assert!(s.start >= pr.spans[k - 1].end);
                        }
                        k += 1;
                    }
                }
                prop_assert_eq!(k, pr.spans.len());
                let first = |i: usize| pr.spans.iter().find(|s| s.task == i).unwrap().start;
                let last = |i: usize| pr.spans.iter().filter(|s| s.task == i).map(|s| s.end).max().unwrap();
                for i in 0..spec.len() {
                    for &d in dag.deps(i) {
                        prop_assert!(first(i) >= last(d as usize), "{:?} {:?}: {} before {}", pr.schedule, pr.place, i, d);
                    }
                }
                for s in &pr.spans {
                    let at_once = pr.spans.iter().filter(|o| o.start <= s.start && s.start < o.end).count();
                    prop_assert!(at_once <= slots, "{:?} {:?}: {} at once", pr.schedule, pr.place, at_once);
                }
                for a in &pr.spans {
                    for b in &pr.spans {
                        if a.task < b.task && m.conflict(a.task, b.task) {
                            prop_assert!(a.end <= b.start || b.end <= a.start,
                                "{:?} {:?}: {} and {} overlap", pr.schedule, pr.place, a.task, b.task);
                        }
                    }
                }
                let bound = r.bound(pr.place).value;
                prop_assert!(pr.wall >= bound, "{:?} {:?}: {} < bound {}", pr.schedule, pr.place, pr.wall, bound);
                prop_assert_eq!(pr.wall, pr.spans.iter().map(|s| s.end).max().unwrap()
                    + if pr.schedule == Schedule::Rounds && pr.place == Place::Actions { js * S } else { 0 });
            }
            // Without conflicts and with a slot per task, eager reaches the critical path.
            if m.conflicting_tasks() == 0 && jobs >= spec.len() {
                prop_assert_eq!(r.predictions[2].wall, r.local_bound.critical_path);
            }
        }
    }
}
