#!/usr/bin/env python3
"""bench/plan_formats.py — issue 24: a 10,000-task file of each task-list format validates in
under 1 s.

Writes one synthetic file per format into a scratch git repository and times
`dagexec --plan FILE validate` (the file read, parsed, built into the plan and checked,
the DAG and overlaps made) with the release binary, best and median of --runs, and peak RSS
(GNU time, when installed). It REPORTS, it never gates: exit status 0 whatever the figures.

  speckit     specs/001-big/tasks.md: 100 phases of 100 tasks, every third [P], one
              `(depends on …)` range or ID in ten, each task naming its own file
  taskmaster  .taskmaster/tasks/tasks.json (tagged): 2,500 tasks of 4 subtasks (10,000 units),
              sibling and task dependencies, a tenth done
  kiro        .kiro/specs/big/tasks.md: 1,000 major tasks of 10 subtasks, (P) every other,
              `_Requirements:_`, `_Boundary:_` paths, `_Depends:_` on the group before

Usage: bench/plan_formats.py [--bin PATH] [--no-build] [--n 10000] [--runs 5]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def speckit(n):
    lines = ["# Tasks: Big", ""]
    per = 100
    for t in range(1, n + 1):
        if (t - 1) % per == 0:
            lines += ["", f"## Phase {(t - 1) // per + 1}: Part", ""]
        p = " [P]" if t % 3 == 0 else ""
        dep = ""
        if t % 10 == 0 and t > 20:
            dep = f" (depends on T{t - 20:05d}-T{t - 18:05d})" if t % 20 == 0 else f" (depends on T{t - 15:05d})"
        lines.append(f"- [ ] T{t:05d}{p} Update src/m{t // 100}/f{t}.py{dep}")
    return "\n".join(lines) + "\n"


def taskmaster(n):
    subs_per = 4
    tasks = []
    for i in range(1, n // subs_per + 1):
        subs = []
        for j in range(1, subs_per + 1):
            subs.append({
                "id": j, "title": f"Subtask {i}.{j}", "description": "do it",
                "dependencies": [j - 1] if j > 1 else [],
                "details": "details " * 10, "status": "done" if i % 10 == 0 else "pending",
                "testStrategy": "run the tests",
            })
        tasks.append({
            "id": i, "title": f"Task {i}", "description": "a task", "details": "details " * 20,
            "testStrategy": "unit tests", "priority": "medium",
            "dependencies": [i - 1, max(1, i - 7)] if i > 1 else [],
            "status": "pending", "subtasks": subs,
        })
    return json.dumps({"master": {"tasks": tasks, "metadata": {"created": "2026-01-01"}}}, indent=2) + "\n"


def kiro(n):
    per = 10
    lines = ["# Implementation Plan", ""]
    for m in range(1, n // per + 1):
        lines.append(f"- [ ] {m}. Major task {m}")
        for s in range(1, per + 1):
            p = " (P)" if s % 2 == 0 else ""
            lines.append(f"- [ ] {m}.{s}{p} Subtask {m}.{s}")
            lines.append("  - Implement the thing")
            lines.append(f"  - _Requirements: {m}.{s}_")
            lines.append(f"  - _Boundary: Component{m} (src/m{m}/f{s}.ts)_")
            if s == 1 and m > 2:
                lines.append(f"  - _Depends: {m - 2}.{per}_")
        lines.append("")
    return "\n".join(lines) + "\n"


CASES = [
    ("speckit", "specs/001-big/tasks.md", speckit),
    ("taskmaster", ".taskmaster/tasks/tasks.json", taskmaster),
    ("kiro", ".kiro/specs/big/tasks.md", kiro),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    binary = args.bin or os.path.join(target, "release", "dagexec")
    if not args.bin and not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, check=True)
    gnu_time = shutil.which("time") if os.path.exists("/usr/bin/time") else None
    print(f"{'format':<11} {'tasks':>6} {'bytes':>10} {'best s':>8} {'median s':>9} {'peak RSS MiB':>13}  target: < 1 s")
    for name, rel, make in CASES:
        with tempfile.TemporaryDirectory() as repo:
            path = os.path.join(repo, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            text = make(args.n)
            with open(path, "w") as f:
                f.write(text)
            subprocess.run(["git", "init", "-q", repo], check=True)
            times = []
            for _ in range(args.runs):
                start = time.perf_counter()
                r = subprocess.run([binary, "--plan", rel, "validate"], cwd=repo,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                times.append(time.perf_counter() - start)
                if r.returncode != 0:
                    print(f"{name}: validate failed ({r.returncode}): {r.stderr.decode()[:500]}")
                    break
            rss = "-"
            if gnu_time:
                r = subprocess.run(["/usr/bin/time", "-f", "%M", binary, "--plan", rel, "validate"],
                                   cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                last = r.stderr.decode().strip().splitlines()[-1:]
                if last and last[0].isdigit():
                    rss = f"{int(last[0]) / 1024:.0f}"
            print(f"{name:<11} {args.n:>6} {len(text.encode()):>10} {min(times):>8.3f} {statistics.median(times):>9.3f} {rss:>13}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
