#!/usr/bin/env python3
"""Makespan of `dagexec run --schedule rounds` vs `--schedule eager` vs the lower bound.

A genplan plan (bench/genplan_fast.py, same output as bench/genplan.py) is executed
twice in fresh git repositories by a worker that sleeps a fixed, task-specific time (0.5-2.5 s,
from the task index) and then does the demo worker's work (marker lines in the declared files,
which the plan's acceptance checks look for). The lower bound is
max(critical path of the task durations, total work / jobs); the issue's target is eager <=
1.10x the bound. It prints figures and never fails on a missed target.

Usage: python3 bench/makespan.py [--tasks 60] [--jobs 4] [--seed 1] [--no-build]
"""
import argparse, json, os, shutil, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def duration(i):
    return 0.5 + ((i * 7919) % 9) * 0.25  # 0.5 .. 2.5 s


def bound(plan, jobs):
    tasks = plan["tasks"]
    finish = []
    for i, t in enumerate(tasks):  # genplan's edges point backwards: index order is topological
        start = max((finish[d] for d in t["blockedBy"]), default=0.0)
        finish.append(start + duration(i))
    total = sum(duration(i) for i in range(len(tasks)))
    return max(max(finish), total / jobs), max(finish), total


def simulate_eager(plan, jobs):
    """The eager policy with zero overhead: whenever a slot is free, start the ready task (all
    blockers done, no file shared with a running task) heading the longest chain of
    dependents (in tasks, as dagexec counts it), ties by index. What dagexec would reach if
    git, workers and commits took no time."""
    tasks = plan["tasks"]
    n = len(tasks)
    files = [set(t["metadata"]["files"]["create"] + t["metadata"]["files"]["modify"]) for t in tasks]
    dependents = [[] for _ in range(n)]
    for i, t in enumerate(tasks):
        for d in t["blockedBy"]:
            dependents[d].append(i)
    height = [1] * n
    for i in reversed(range(n)):
        height[i] = 1 + max((height[d] for d in dependents[i]), default=0)
    done, running, now = set(), [], 0.0  # running: (finish, index)
    started = set()
    while len(done) < n:
        busy = set().union(*(files[i] for _, i in running)) if running else set()
        ready = sorted((i for i in range(n) if i not in started and all(d in done for d in tasks[i]["blockedBy"])),
                       key=lambda i: (-height[i], i))
        for i in ready:
            if len(running) >= jobs:
                break
            if files[i] & busy:
                continue
            running.append((now + duration(i), i))
            started.add(i)
            busy |= files[i]
        running.sort()
        now, i = running.pop(0)
        done.add(i)
    return now


def run(binary, plan_text, schedule, jobs, worker):
    d = tempfile.mkdtemp(prefix=f"dagexec-makespan-{schedule}-")
    try:
        os.makedirs(os.path.join(d, ".design"))
        with open(os.path.join(d, ".design/plan.json"), "w") as f:
            f.write(plan_text)
        for args in (["init", "-q"], ["config", "user.name", "bench"], ["config", "user.email", "bench@example.com"],
                     ["add", "-A"], ["commit", "-qm", "start"]):
            subprocess.run(["git", *args], cwd=d, check=True)
        env = dict(os.environ, DAGEXEC_DEMO_DELAY="0", DAGEXEC_DEMO_FLAKY_TASK="none", NO_COLOR="1")
        t0 = time.perf_counter()
        p = subprocess.run([binary, "run", "--worker", worker, "--jobs", str(jobs), "--schedule", schedule,
                            "--yes", "--timeout", "5m"], cwd=d, env=env, capture_output=True, text=True)
        elapsed = time.perf_counter() - t0
        if p.returncode != 0:
            sys.exit(f"dagexec run --schedule {schedule} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-2000:]}")
        commits = subprocess.run(["git", "rev-list", "--count", "HEAD"], cwd=d, capture_output=True, text=True).stdout.strip()
        return elapsed, int(commits) - 2  # minus the start commit and the completion commit
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=60)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--files", type=int, default=None,
                    help="genplan's file pool; a large pool (e.g. 100000) makes conflicts rare")
    ap.add_argument("--no-build", action="store_true")
    a = ap.parse_args()
    if not a.no_build:
        subprocess.run(["cargo", "build", "--release", "-q"], cwd=ROOT, check=True)
    binary = os.environ.get("DAGEXEC_BIN", os.path.join(ROOT, "target/release/dagexec"))
    gen = [sys.executable, os.path.join(ROOT, "bench/genplan_fast.py"), "--tasks", str(a.tasks), "--seed", str(a.seed)]
    if a.files:
        gen += ["--files", str(a.files)]
    plan_text = subprocess.run(gen, capture_output=True, text=True, check=True).stdout
    plan = json.loads(plan_text)
    demo = os.path.join(ROOT, "examples/demo/worker.sh")
    wdir = tempfile.mkdtemp(prefix="dagexec-makespan-worker-")
    worker_path = os.path.join(wdir, "worker.sh")
    with open(worker_path, "w") as f:
        f.write('#!/bin/sh\n'
                'ms=$(( 500 + (DAGEXEC_TASK_INDEX * 7919 % 9) * 250 ))\n'
                'sleep "$(( ms / 1000 )).$(printf %03d $(( ms % 1000 )))"\n'
                f"exec sh '{demo}'\n")
    worker = f"sh '{worker_path}'"
    lb, cp, total = bound(plan, a.jobs)
    files = {}
    for i, t in enumerate(plan["tasks"]):
        for f in set(t["metadata"]["files"]["create"] + t["metadata"]["files"]["modify"]):
            files[f] = files.get(f, 0.0) + duration(i)
    busiest = max(files.values(), default=0.0)
    print(f"plan: {a.tasks} tasks (genplan seed {a.seed}), jobs {a.jobs}; task durations 0.5-2.5 s, total work {total:.1f} s")
    print(f"lower bound = max(critical path {cp:.1f} s, total work / jobs {total / a.jobs:.1f} s) = {lb:.1f} s")
    print(f"(tasks sharing a file never overlap: the busiest file alone needs {busiest:.1f} s, and together with "
          f"the dependencies that can push the true optimum above the bound)")
    ideal = simulate_eager(plan, a.jobs)
    print(f"eager policy with zero overhead (simulated): {ideal:.1f} s = {ideal / lb:.2f}x bound")
    rows = []
    for schedule in ("rounds", "eager"):
        elapsed, rounds = run(binary, plan_text, schedule, a.jobs, worker)
        rows.append((schedule, elapsed, rounds))
        print(f"  {schedule:7s} {elapsed:7.1f} s  {elapsed / lb:5.2f}x bound  ({rounds} round commits)", flush=True)
    eager = rows[1][1] / lb
    print(f"target: eager <= 1.10x the bound: {'PASS' if eager <= 1.10 else 'MISS'} ({eager:.2f}x); "
          f"rounds/eager = {rows[0][1] / rows[1][1]:.2f}; eager/simulated = {rows[1][1] / ideal:.2f} "
          f"(what dagexec's own overhead adds)")
    shutil.rmtree(wdir, ignore_errors=True)


if __name__ == "__main__":
    main()
