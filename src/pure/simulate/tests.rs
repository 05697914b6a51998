//! Small plans whose schedules are computed by hand in the comments.

use super::durations::with_history;
use super::*;
use crate::pure::engine;
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

/// `jobs` locally, `max_parallel` on Actions with `job_start` s per job; integrations take no
/// time and the conductor sees a run end at once (no poll wait).
fn setting(jobs: usize, max_parallel: usize, job_start: u64) -> Setting {
    Setting {
        jobs,
        max_parallel,
        job_start: job_start * S,
        integrate: 0,
        poll: 0,
        polls_per_hour: u64::MAX,
        remaining: false,
    }
}

fn report(p: &Plan, input: &DurationInput, s: Setting) -> Report {
    let dag = Dag::build(p).unwrap();
    let m = Conflicts::of(p);
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
    // 3 jobs per run. Eager: 5 (the plan job, which conducts) + 15 + 25 + 35 = 80 s, 1 + 3 jobs.
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
    // workflow runs ({0}, {1, 2}, {3}): 2 × 3 + 4 jobs; eager: the plan job, which conducts, and 4 jobs.
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
    // Actions rounds: one round, two parts: run {0, 2}: 5 + 15 + 5; run {1}: 25 → 50 s,
    // 4 + 3 jobs. Actions eager: 5 (the plan job, which conducts) + 15, then 1: 35 s, 1 + 3 jobs.
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
    // two jobs at once: 5 + (15, 15 then 15) + 5 = 40 s, 5 jobs; eager 5 + 15 + 15 = 35 s.
    let (p, d) = plan(&[(&[], &[], 10), (&[], &[], 10), (&[], &[], 10)]);
    let r = report(&p, &d, setting(2, 2, 5));
    assert_eq!(walls(&r), [(20, 3), (20, 3), (20, 3), (40, 5), (35, 4)]);
    assert_eq!(r.predictions[0].spans[2].start, 10 * S);
}

#[test]
fn eager_fills_free_slots_before_integrating_like_the_runner() {
    // One job. 0 (10 s) heads 0 → 3 → 4; 1 and 2 are alone (10 s). At 10 s task 0 arrives:
    // the runner fills the free slot before integrating it only with what it would also pick
    // once 0 is integrated, so not 1 (ready already): 3 (ready once 0 is integrated, heading
    // a chain) comes first and starts after the integration. At 20 s 3 arrives and 1 starts
    // before it is integrated (4, which it unblocks, comes after 1 in plan order); at 30 s
    // 1 arrives and 2 starts, then 4 at 40 s.
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
    assert_eq!(starts, [0, 20, 30, 10, 40]);
    assert_eq!(eager.wall, 50 * S);
}

#[test]
fn eager_gives_a_slot_freed_by_an_arrival_to_the_work_it_unblocks_like_the_runner() {
    // The runner's case (`flow::exec`'s test `a_slot_freed_by_an_arrival_goes_to_the_work_it_
    // unblocks_when_that_comes_first`): 0 → 1 → 2 (the longest chain); 3, 4 and 5 alone; 10 s
    // each, two slots. When 0 and 3 arrive (t = 10), 4 and 5 are ready at once and 1 only once
    // 0 is integrated; the runner starts before integrating only what it would also pick
    // after (4), then 1: 30 s, not 40.
    let ten = (&[][..], &[][..], 10);
    let (p, d) = plan(&[ten, (&[0], &[], 10), (&[1], &[], 10), ten, ten, ten]);
    let r = report(&p, &d, setting(2, 2, 0));
    let eager = &r.predictions[2];
    let at_10: Vec<usize> = eager
        .spans
        .iter()
        .filter(|s| s.start == 10 * S)
        .map(|s| s.task)
        .collect();
    assert_eq!(at_10, [1, 4]);
    assert_eq!(eager.wall, 30 * S);
}

#[test]
fn failed_attempts_from_history() {
    // Task 0 failed after 10 s, then completed in 20 s; task 1 completed in 30 s. Two jobs,
    // 5 s start-up.
    // Local: the retry takes its slot again at once: 0 ends at 30, as does 1; 3 attempts.
    // Actions rounds: run 1: plan to 5, 0 fails at 20, 1 ends at 40, finalize to 45; run 2
    // (the round's second part): plan to 50, 0's job from 50 (its work from 55) to 75,
    // finalize to 80: 80 s, 4 + 3 jobs.
    // Actions eager: plan job and conductor to 10; 0 fails at 25 and is dispatched again,
    // ends at 50; 2 + 3 jobs.
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
fn actions_rounds_retry_is_a_later_part_of_its_round() {
    // 0 fails its first attempt; 1 and 2 (blocked by 1) take 10 s each; no start-up.
    // The Action's round is {0, 1}: part 1 runs both (0 fails), part 2 retries 0 alone —
    // the round is open until 0 completes — and only then does round 2 run 2: 30 s, 3 runs
    // (a conflict-free batch per run would have run 0's retry beside 2: 20 s, 2 runs).
    let p = with_history(
        plan_of(vec![
            task(&[], &[], &[]),
            task(&[], &[], &[]),
            task(&[1], &[], &[]),
        ]),
        json!([
            {"task": 0, "seconds": 10.0, "outcome": "failed"},
            {"task": 0, "seconds": 10.0, "outcome": "completed"},
            {"task": 1, "seconds": 10.0, "outcome": "completed"},
            {"task": 2, "seconds": 10.0, "outcome": "completed"},
        ]),
    );
    let input = DurationInput {
        use_history: true,
        ..Default::default()
    };
    let r = report(&p, &input, setting(2, 2, 0));
    let rounds = &r.predictions[3];
    assert_eq!(
        (rounds.wall, rounds.rounds, rounds.jobs),
        (30 * S, 3, 2 * 3 + 4)
    );
    let starts: Vec<(usize, u32, u64)> = rounds
        .spans
        .iter()
        .map(|s| (s.task, s.attempt, s.start / S))
        .collect();
    assert_eq!(starts, [(0, 1, 0), (0, 2, 10), (1, 1, 0), (2, 1, 20)]);
}

#[test]
fn actions_integrations_take_time() {
    // 0 → 1 taking 10 and 20 s; 5 s per job, 3 s per integration, no poll wait.
    // Rounds: run 1: plan 5, work 5 + 10, finalize 5 + 3 → 28; run 2: 28 + 5 + 25 + 8 = 66.
    // Eager: the plan job, which conducts, 5, its first commit 3 → 8; 0's run ends at 23,
    // integrated at 26; 1's run ends at 51, integrated at 54.
    let (p, d) = plan(&[(&[], &[], 10), (&[0], &[], 20)]);
    let s = Setting {
        integrate: 3 * S,
        ..setting(1, 1, 5)
    };
    let r = report(&p, &d, s);
    assert_eq!(r.predictions[3].wall, 66 * S);
    assert_eq!(r.predictions[4].wall, 54 * S);
    assert_eq!(r.predictions[4].spans[1].start, 26 * S);
}

/// `setting` with the conductor polling at least every `poll` s, at most `per_hour` run
/// reads an hour.
fn polling(max_parallel: usize, poll: u64, per_hour: u64) -> Setting {
    Setting {
        poll: poll * S,
        polls_per_hour: per_hour,
        ..setting(1, max_parallel, 0)
    }
}

#[test]
fn actions_eager_sees_an_ended_run_at_the_next_poll() {
    // 0 → 1 taking 10 s each, a poll every 30 s: 0 ends at 10, is seen at the poll at 30
    // (1 run in flight: 6 s of the 600 reads an hour, so the 30 s rule); 1 runs from 30 to 40
    // and is seen at 60.
    let (p, d) = plan(&[(&[], &[], 10), (&[0], &[], 10)]);
    let r = report(&p, &d, polling(8, 30, 600));
    assert_eq!(r.predictions[4].wall, 60 * S);
    assert_eq!(r.predictions[4].spans[1].start, 30 * S);
    // A 70 s task is seen at the third poll, at 90 s.
    let (p, d) = plan(&[(&[], &[], 70)]);
    assert_eq!(
        report(&p, &d, polling(8, 30, 600)).predictions[4].wall,
        90 * S
    );
}

#[test]
fn actions_eager_polls_as_often_whatever_the_runs_in_flight() {
    // Eight 10 s tasks. A poll is one listing of the branch's runs, however many are in
    // flight: with eight at 600 polls an hour and a 30 s poll, all are seen at 30 s.
    let ten: (&[usize], &[&str], u64) = (&[], &[], 10);
    let (p, d) = plan(&[ten; 8]);
    assert_eq!(
        report(&p, &d, polling(8, 30, 600)).predictions[4].wall,
        30 * S
    );
    // A 1 s poll at 600 an hour: every 6 s, so seen at 12 s.
    assert_eq!(
        report(&p, &d, polling(8, 1, 600)).predictions[4].wall,
        12 * S
    );
    // A GitHub App's budget (4,800 an hour): every 1 s, however many are in flight.
    assert_eq!(
        report(&p, &d, polling(8, 1, 4800)).predictions[4].wall,
        10 * S
    );
}

#[test]
fn actions_eager_hands_over_after_five_and_a_half_hours() {
    // One 6-hour task; 60 s a job, 10 s an integration, a poll every 30 s.
    // The conductor (the plan job, which conducts) starts at 60, commits to 70 and
    // dispatches the run (ends 70 + 60 + 21600 = 21730). Polls from 100 every 30 s; the first
    // at or after 60 + 19800 is 19870: it hands over: commit to 19880, the successor's plan
    // job to 19940, its commit to 19950. Polls from 19980 every 30 s: the run is seen at
    // 21750, integrated at 21760. Two conductors' runs: a job each and the task's.
    let (p, d) = plan(&[(&[], &[], 6 * 3600)]);
    let s = Setting {
        integrate: 10 * S,
        ..polling(8, 30, 600)
    };
    let s = Setting {
        job_start: 60 * S,
        ..s
    };
    let eager = &report(&p, &d, s).predictions[4];
    assert_eq!((eager.wall, eager.rounds, eager.jobs), (21_760 * S, 2, 3));
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
    // The plan job, which conducts, starts all the same.
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
    let m = Conflicts::of(&p);
    // The defaults of `dagexec simulate` on Actions, but for max-parallel.
    let s = Setting {
        integrate: 10 * S,
        poll: 10 * S,
        polls_per_hour: 600,
        ..setting(2, 4, 30)
    };
    let r = predict(&p, &dag, &m, &times, s);
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
    // `run --dry-run`'s rounds (rounds, waves) are the rounds simulated; on Actions a round
    // takes a workflow run per sequential group.
    let (p, d) = plan(&[
        (&[], &["a"], 3),
        (&[], &["a"], 4),
        (&[0], &[], 5),
        (&[1, 2], &["b"], 6),
    ]);
    let dag = Dag::build(&p).unwrap();
    let m = Conflicts::of(&p);
    let r = report(&p, &d, setting(2, 2, 1));
    for (k, schedule) in [(0, Schedule::Rounds), (1, Schedule::Waves)] {
        let (batches, _) = engine::simulate(&p, &dag, &m, schedule, None);
        assert_eq!(r.predictions[k].rounds, batches.len() as u64);
    }
    let (rounds, _) = engine::simulate(&p, &dag, &m, Schedule::Rounds, None);
    let parts: usize = rounds
        .iter()
        .map(|b| engine::sequential_groups(b, &dag, &m).len())
        .sum();
    assert_eq!(r.predictions[3].rounds, parts as u64);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Random plans: blockers point backwards, files from a pool of 4, 1–9 s per task, and
    /// now and then a failed attempt first.
    /// A task: blockers, files (pool indices), attempts' seconds.
    type Spec = Vec<(Vec<usize>, Vec<u8>, Vec<u64>)>;

    fn arb() -> impl Strategy<Value = (Spec, usize, usize, u64, (u64, u64))> {
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
        (tasks, 1usize..5, 1usize..5, 0u64..4, (0u64..4, 0u64..40))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Every prediction: each attempt once, in order; a task starts after its blockers
        /// ended; never more attempts at once than slots; conflicting tasks never overlap in
        /// eager, rounds or waves (attempt by attempt: on Actions a task's retry waits for a later
        /// workflow run, and another may run in between); never below the bound.
        #[test]
        fn schedules_respect_the_rules((spec, jobs, max_parallel, js, (integrate, poll)) in arb()) {
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
            let s = Setting {
                integrate: integrate * S,
                poll: poll * S,
                polls_per_hour: 600,
                ..setting(jobs, max_parallel, js)
            };
            let r = report(&p, &input, s);
            let dag = Dag::build(&p).unwrap();
            let m = Conflicts::of(&p);
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
                        if a.task < b.task && m.conflict(&dag, a.task, b.task) {
                            prop_assert!(a.end <= b.start || b.end <= a.start,
                                "{:?} {:?}: {} and {} overlap", pr.schedule, pr.place, a.task, b.task);
                        }
                    }
                }
                let bound = r.bound(pr.place).value;
                prop_assert!(pr.wall >= bound, "{:?} {:?}: {} < bound {}", pr.schedule, pr.place, pr.wall, bound);
                // The last attempt's end, then on Actions the last finalize job, or the
                // conductor's last poll and integration.
                let last = pr.spans.iter().map(|s| s.end).max().unwrap();
                match (pr.schedule, pr.place) {
                    (_, Place::Local) => prop_assert_eq!(pr.wall, last),
                    (Schedule::Rounds, _) => prop_assert_eq!(pr.wall, last + (js + integrate) * S),
                    _ => prop_assert!(pr.wall >= last + integrate * S),
                }
            }
            // Without conflicts and with a slot per task, eager reaches the critical path.
            let m = crate::pure::overlap::OverlapMatrix::compute(&p, &dag);
            let conflict_free = (0..p.tasks.len()).all(|i| m.conflicts(i).is_empty());
            if conflict_free && jobs >= spec.len() {
                prop_assert_eq!(r.predictions[2].wall, r.local_bound.critical_path);
            }
        }
    }
}

#[test]
fn merge_runs_tasks_sharing_a_file_together_and_pays_the_rate_of_a_rebase() {
    // 0 (10 s) and 1 (5 s) modify x, 2 (12 s) modifies z; 3 slots; no history, so the rate
    // is assumed (20%): rebases of 2 s and 1 s. Serial rounds: {0, 2} then {1}: 17 s. Merge
    // rounds: all three at once (12 s), then the rebases of 0 and 1 after the round's other
    // work (2 s): 14 s. Merge eager: each rebase at once on its slot: 0 ends at 12 s, 1 at 6 s,
    // 2 at 12 s: 12 s.
    let (p, input) = plan(&[(&[], &["x"], 10), (&[], &["x"], 5), (&[], &["z"], 12)]);
    let r = report(&p, &input, setting(3, 3, 0));
    assert_eq!(r.predictions[0].wall, 17 * S);
    let (rate, merged) = r.merge.as_ref().expect("tasks share a file");
    assert_eq!(
        (rate.permille, rate.learned_from),
        (merge::ASSUMED_PERMILLE, 0)
    );
    let walls: Vec<(Schedule, u64)> = merged.iter().map(|p| (p.schedule, p.wall)).collect();
    assert_eq!(
        walls,
        [
            (Schedule::Rounds, 14 * S),
            (Schedule::Eager, 12 * S),
            // The Action (no job start-up here): one matrix (12 s), task 1's re-check part.
            (Schedule::Rounds, 12 * S),
            (Schedule::Eager, 12 * S),
        ]
    );
    let places: Vec<Place> = merged.iter().map(|p| p.place).collect();
    assert_eq!(
        places,
        [Place::Local, Place::Local, Place::Actions, Place::Actions]
    );
    // Nothing shares a file: nothing to predict.
    let (p, input) = plan(&[(&[], &["x"], 10), (&[], &["y"], 10)]);
    assert!(report(&p, &input, setting(2, 2, 0)).merge.is_none());
}

#[test]
fn merge_on_the_action_runs_one_matrix_and_one_follow_up_part_for_tasks_on_one_file() {
    // 0, 1, 2 (10, 20, 30 s) all modify x; 3 jobs at once, 5 s per job. Serial: a part each,
    // 5 + (5 + d) + 5: 25 + 35 + 45 = 105 s, 9 jobs. Merge (20% assumed: 0.4 rebases, none
    // whole): one matrix, 5 + 35 + 5 = 45 s, finalize lands 0 and keeps 1 and 2 aside as a
    // chain; one part re-checks both (no worker): 5 + 5 + 5 = 15 s. 60 s, 5 + 4 jobs, 2 runs.
    let (p, input) = plan(&[(&[], &["x"], 10), (&[], &["x"], 20), (&[], &["x"], 30)]);
    let r = report(&p, &input, setting(3, 3, 5));
    assert_eq!(walls(&r)[3], (105, 9));
    let (_, merged) = r.merge.as_ref().expect("tasks share a file");
    let rounds = &merged[2];
    assert_eq!(
        (rounds.schedule, rounds.place),
        (Schedule::Rounds, Place::Actions)
    );
    assert_eq!((rounds.wall, rounds.jobs, rounds.rounds), (60 * S, 9, 2));
    // The conductor (eager): serial runs them one after another, 5 + 15 + 25 + 35 = 80 s.
    // Merge: each task's time with its expected rebase (20%: 12, 24, 36 s), its re-check run
    // and the expected rebase's run (5 s + 20%: 6 s): 18, 30, 42 s, all at once after the
    // plan job, which conducts: 5 + 5 + 42 = 52 s; jobs 1 + 3 attempts + 3 re-checks + 1 rebase.
    assert_eq!(walls(&r)[4], (80, 4));
    let eager = &merged[3];
    assert_eq!(
        (eager.schedule, eager.place),
        (Schedule::Eager, Place::Actions)
    );
    assert_eq!((eager.wall, eager.jobs), (52 * S, 8));
}

#[test]
fn merge_on_the_action_sends_the_expected_conflicts_back_as_rebases_with_their_re_checks() {
    // As above with half the merges conflicting: of the two kept aside, the later (2) is
    // rebased. Part 1: 45 s. Part 2: 1's re-check (5 s) beside 2's rebase (5 + 30 s): 45 s;
    // 1 lands, 2's rebase merges beside it. Part 3: 2's re-check, 15 s. 105 s; jobs 5 + 4 +
    // 3; 3 runs.
    let (p, input) = plan(&[(&[], &["x"], 10), (&[], &["x"], 20), (&[], &["x"], 30)]);
    let s = setting(3, 3, 5);
    let dag = Dag::build(&p).unwrap();
    let serial = Conflicts::of(&p);
    let none = Conflicts::none(3);
    let times = durations::durations(&p, &input).unwrap();
    let sim = play::Sim {
        plan: &p,
        dag: &dag,
        conflicts: &none,
        times: &times,
        setting: s,
    };
    let half = merge::MergeRate {
        permille: 500,
        learned_from: 4,
    };
    let pr = sim.actions_rounds_merge(&serial, half);
    assert_eq!((pr.wall, pr.jobs, pr.rounds), (105 * S, 12, 3));
    // Every merge conflicting: both rebased side by side (35 s), then 2's rebase merged
    // beside 1's and re-checked: 45 + 45 + 15.
    let all = merge::MergeRate {
        permille: 1000,
        learned_from: 4,
    };
    let pr = sim.actions_rounds_merge(&serial, all);
    assert_eq!((pr.wall, pr.rounds), (105 * S, 3));
    // No conflict at all: one follow-up part.
    let never = merge::MergeRate {
        permille: 0,
        learned_from: 4,
    };
    let pr = sim.actions_rounds_merge(&serial, never);
    assert_eq!((pr.wall, pr.rounds), (60 * S, 2));
}
