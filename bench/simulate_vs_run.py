#!/usr/bin/env python3
"""`dagexec simulate`'s prediction vs the measured makespan of `dagexec run`.

A genplan plan (bench/genplan.py, ~30 tasks, file conflicts included) is executed locally with
`--schedule rounds` and `--schedule eager`, each in a fresh git repository, by a worker that
sleeps a known, task-specific time (1-6 s, from the task index) and then does the demo worker's
work (marker lines in the declared files, which genplan's acceptance checks look for). The
wall time of each run is measured. Then `dagexec simulate --json` predicts both from the same
durations, given per task (`--no-history -d I=Xms ...`); when the finished plan carries a
history of attempts (`progress.dagexecAttempts`, recorded by `run`: each attempt's wall time,
dagexec's own per-task work included), each run is also predicted from its own history (the
whole plan again). It prints predicted vs measured and the ratio; the issue's target is a prediction within 15% of the measurement. dagexec's own time
(worktrees, checks, commits) is what the given durations leave out, so that ratio is below 1
by that overhead; the recorded history holds most of it (not the commits). It prints figures and never fails on a missed target.

Usage: python3 bench/simulate_vs_run.py [--tasks 30] [--jobs 4] [--seed 1] [--no-build]
Environment: DAGEXEC_BIN=path (default: target/release/dagexec, built unless --no-build)
"""
import argparse, glob, json, os, shutil, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def duration_ms(i):
    return 1000 + ((i * 7919) % 11) * 500  # 1.0 .. 6.0 s


def git_repo(d, plan_text):
    os.makedirs(os.path.join(d, ".design"))
    with open(os.path.join(d, ".design/plan.json"), "w") as f:
        f.write(plan_text)
    for args in (["init", "-q"], ["config", "user.name", "bench"], ["config", "user.email", "bench@example.com"],
                 ["config", "commit.gpgsign", "false"], ["add", "-A"], ["commit", "-qm", "start"]):
        subprocess.run(["git", *args], cwd=d, check=True)


def finished_plan(d):
    """The plan after the run: still in place, or archived by the completion step."""
    for p in [os.path.join(d, ".design/plan.json"), os.path.join(d, ".design/plan.done.json"),
              *sorted(glob.glob(os.path.join(d, ".design/history/*-plan.json")))[-1:]]:
        if os.path.exists(p):
            with open(p) as f:
                return f.read()
    return None


def run(binary, plan_text, schedule, jobs, worker):
    d = tempfile.mkdtemp(prefix=f"dagexec-simvsrun-{schedule}-")
    try:
        git_repo(d, plan_text)
        env = dict(os.environ, DAGEXEC_DEMO_DELAY="0", DAGEXEC_DEMO_FLAKY_TASK="none", NO_COLOR="1")
        for k in [k for k in env if k.startswith("GIT_")]:
            del env[k]
        t0 = time.perf_counter()
        p = subprocess.run([binary, "run", "--worker", worker, "--jobs", str(jobs), "--schedule", schedule,
                            "--yes", "--timeout", "5m"], cwd=d, env=env, capture_output=True, text=True)
        elapsed = time.perf_counter() - t0
        if p.returncode != 0:
            sys.exit(f"dagexec run --schedule {schedule} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-2000:]}")
        return elapsed, finished_plan(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def simulate(binary, plan_text, jobs, extra):
    d = tempfile.mkdtemp(prefix="dagexec-simvsrun-sim-")
    try:
        os.makedirs(os.path.join(d, ".design"))
        with open(os.path.join(d, ".design/plan.json"), "w") as f:
            f.write(plan_text)
        p = subprocess.run([binary, "simulate", "--json", "--jobs", str(jobs), *extra], cwd=d,
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"dagexec simulate exited {p.returncode}:\n{p.stderr}")
        out = json.loads(p.stdout)
        return {s["schedule"]: s["seconds"] for s in out["schedules"] if s["where"] == "local"}, out
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=30)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-build", action="store_true")
    a = ap.parse_args()
    binary = os.environ.get("DAGEXEC_BIN")
    if binary is None:
        if not a.no_build:
            subprocess.run(["cargo", "build", "--release", "-q"], cwd=ROOT, check=True)
        binary = os.path.join(ROOT, "target/release/dagexec")
    binary = os.path.abspath(binary)
    plan_text = subprocess.run([sys.executable, os.path.join(ROOT, "bench/genplan.py"), "--tasks", str(a.tasks),
                                "--seed", str(a.seed)], capture_output=True, text=True, check=True).stdout
    plan = json.loads(plan_text)
    n = len(plan["tasks"])
    demo = os.path.join(ROOT, "examples/demo/worker.sh")
    wdir = tempfile.mkdtemp(prefix="dagexec-simvsrun-worker-")
    worker_path = os.path.join(wdir, "worker.sh")
    with open(worker_path, "w") as f:
        f.write('#!/bin/sh\n'
                'ms=$(( 1000 + (DAGEXEC_TASK_INDEX * 7919 % 11) * 500 ))\n'
                'sleep "$(( ms / 1000 )).$(printf %03d $(( ms % 1000 )))"\n'
                f"exec sh '{demo}'\n")
    worker = f"sh '{worker_path}'"
    given = ["--no-history"]
    for i in range(n):
        given += ["-d", f"{i}={duration_ms(i)}ms"]
    predicted, report = simulate(binary, plan_text, a.jobs, given)
    total = sum(duration_ms(i) for i in range(n)) / 1000
    print(f"plan: {n} tasks (genplan seed {a.seed}), --jobs {a.jobs}; task durations 1-6 s, total work {total:.1f} s")
    b = report["bounds"]["local"]
    print(f"lower bound {b['seconds']:.1f} s = max(critical path {b['criticalPathSeconds']:.1f} s, "
          f"work {b['workSeconds']:.1f} s / {b['slots']})")
    print(f"{'schedule':8s} {'durations':9s} {'predicted':>10s} {'measured':>10s} {'predicted/measured':>19s}  "
          f"target (within 15%)")
    worst = 0.0
    row = lambda schedule, source, p, m: print(
        f"{schedule:8s} {source:9s} {p:9.1f}s {m:9.1f}s {p / m:19.3f}  {'PASS' if abs(1 - p / m) <= 0.15 else 'MISS'}",
        flush=True)
    for schedule in ("rounds", "eager"):
        measured, after = run(binary, plan_text, schedule, a.jobs, worker)
        worst = max(worst, abs(1 - predicted[schedule] / measured))
        row(schedule, "given", predicted[schedule], measured)
        # From the history the run recorded (progress.dagexecAttempts), when it records one:
        # the whole plan again, with each attempt's measured wall time.
        if after and "dagexecAttempts" in json.loads(after).get("progress", {}):
            from_history, _ = simulate(binary, after, a.jobs, [])
            worst = max(worst, abs(1 - from_history[schedule] / measured))
            row(schedule, "history", from_history[schedule], measured)
        else:
            print(f"  (the {schedule} run recorded no history: progress.dagexecAttempts is absent)")
    print(f"worst deviation: {worst * 100:.1f}% ({'PASS' if worst <= 0.15 else 'MISS'} the 15% target); "
          f"predicted eager/rounds = {predicted['eager'] / predicted['rounds']:.2f}")
    shutil.rmtree(wdir, ignore_errors=True)


if __name__ == "__main__":
    main()
